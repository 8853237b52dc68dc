//! `thinkus bench load`: throughput, latency, errors, shed requests and memory of the whole
//! service under a mixed load at growing concurrency, on loopback.
//!
//! A synthetic corpus is written to a temporary folder ([`super::corpus`]: perturbed e5
//! vectors of real sentences, `--memories` across `--users`), then `thinkus all` is started on
//! it as a child process (this binary, with this invocation's `--config` and `--set` options),
//! so the RSS measured is the server's alone. For each level of concurrent clients, each client
//! sends one request after another (a closed loop) with a deadline (`grpc-timeout`): 40%
//! PrepareTurn, 40% Recall, 20% CompleteTurn by default (`--mix`), every message distinct (no
//! cache answers them), each client acting for one of the users. CompleteTurn queues learning
//! jobs, so background passage embeddings run during the level as they do in production. A
//! level ends after `--seconds` (plus `--warmup-seconds` not counted) or `--requests` counted
//! requests; the queue is drained between levels.
//!
//! Outcomes: answered; shed (RESOURCE_EXHAUSTED: the client waits the Retry-After it was given,
//! as a well-behaved client does); errors (anything else, a deadline exceeded included).
//! Latency percentiles are of the requests the server took (answered and errors); shed
//! requests are counted apart, with how fast they were refused.
//!
//! One query embedding alone is measured in this process before the levels, on the idle
//! machine, with the configured embedder: the reference of the targets.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_proto::common::Scope;
// The load runs call the gateway (and the retriever beside it) through the raw stubs, not
// `thinkus_gateway::GatewayGrpcClient`: each request carries its own deadline and its client's
// key in its metadata (`request`), an answer is timed up to its arrival without being converted,
// and a failure is counted by its gRPC code (`tonic::Code`) as the server sent it.
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::gateway::{CompleteTurnRequest, JobStatus, ListJobsRequest, PrepareTurnRequest};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use tonic::Code;
use tonic::transport::Channel;

use super::corpus::{self, PREDICATES, ROLE, Rng, SUBJECTS};
use super::stats::{percentile_ms, tenth};
use super::{say, state_dir};
use crate::config::Config;
use crate::services::ServiceKind;

/// What `thinkus bench load` was asked.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub clients: Vec<usize>,
    pub seconds: f64,
    pub warmup_seconds: f64,
    pub requests: usize,
    pub deadline_ms: u64,
    pub users: usize,
    pub memories: usize,
    /// Shares of PrepareTurn, Recall and CompleteTurn.
    pub mix: [u32; 3],
    pub drain_seconds: f64,
    pub data_dir: Option<PathBuf>,
    /// Instead of the mixed levels: at each level a tenant floods with that many clients while
    /// another tenant measures (`hostile.rs`).
    pub flood: bool,
    /// The measuring tenant's clients in `flood` mode.
    pub measure_clients: usize,
    /// Instead of the mixed levels: the bad-input campaign (`hostile.rs`).
    pub bad_input: bool,
    /// The kinds of bad input sent (every kind when empty).
    pub bad_kinds: Vec<String>,
    /// Instead of the mixed levels: recall during a rebuild of the index (`hostile.rs`).
    pub rebuild: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Op {
    Prepare,
    Recall,
    Complete,
}

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Prepare => "PrepareTurn",
            Op::Recall => "Recall",
            Op::Complete => "CompleteTurn",
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Answered,
    Shed,
    Error(Code, String),
}

pub(super) struct Sample {
    pub(super) op: Op,
    pub(super) outcome: Outcome,
    pub(super) latency: Duration,
}

/// Figures of one level.
pub(super) struct Level {
    pub(super) clients: usize,
    pub(super) seconds: f64,
    pub(super) counted: usize,
    pub(super) rps: f64,
    pub(super) rps_by_op: BTreeMap<Op, f64>,
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) p50_by_op: BTreeMap<Op, f64>,
    pub(super) p99_by_op: BTreeMap<Op, f64>,
    pub(super) errors: usize,
    pub(super) shed: usize,
    pub(super) shed_p50: f64,
    pub(super) rss_mb: f64,
    pub(super) peak_rss_mb: f64,
    pub(super) first_errors: Vec<String>,
}

/// The server under test, killed when dropped.
pub(super) struct Server {
    child: Child,
    pub(super) url: String,
    log: PathBuf,
    metrics: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// (resident, peak resident) memory in MB, from /proc.
    pub(super) fn rss_mb(&self) -> (f64, f64) {
        super::stats::rss_mb(&self.child.id().to_string())
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The value of an unlabelled metric on the server's /metrics, if it has one.
    pub(super) async fn metric(&self, name: &str) -> Option<f64> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics)).await.ok()?;
        let head = "GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
        stream.write_all(head.as_bytes()).await.ok()?;
        let mut text = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut text))
            .await
            .ok()?
            .ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    pub(super) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

pub(super) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// This invocation's `--config` and `--set` options, for the child.
fn passed_options() -> Vec<String> {
    let mut passed = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--config" || arg == "-c" || arg == "--set" {
            passed.push(arg);
            passed.extend(args.next());
        } else if arg.starts_with("--config=") || arg.starts_with("--set=") {
            passed.push(arg);
        }
    }
    passed
}

/// Starts `thinkus all` on `dir` with this invocation's options, then `extra` ones (`--set`).
pub(super) async fn start_server(dir: &Path, extra: &[String]) -> anyhow::Result<Server> {
    let port = free_port()?;
    let metrics = free_port()?;
    let log = dir.join("server.log");
    let file = std::fs::File::create(&log)?;
    let child = Command::new(std::env::current_exe()?)
        .args(passed_options())
        .args(["--set", &format!("server.data_dir={}", dir.join("data").display())])
        .args(["--set", &format!("server.grpc_addr=127.0.0.1:{port}")])
        .args(["--set", &format!("server.metrics_addr=127.0.0.1:{metrics}")])
        .args(["--set", "gateway.rest_listen="])
        .args(extra)
        .arg("all")
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()?;
    let mut server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        log,
        metrics,
    };
    let ready =
        thinkus_common::grpc::wait_serving(&server.url, ServiceKind::Gateway.grpc_name(), Duration::from_secs(180))
            .await;
    if let Err(err) = ready {
        let exited = server.child.try_wait()?;
        anyhow::bail!(
            "the server did not start ({err}; exit status {exited:?}); its log ends with:\n{}",
            server.log_tail()
        );
    }
    Ok(server)
}

/// Writes the corpus in this process, memory `k` in `scope_of(k)`, then lets go of the data
/// folder for the server.
pub(super) async fn seed(
    config: &Config,
    dir: &Path,
    memories: usize,
    scope_of: impl Fn(usize) -> thinkus_common::model::Scope,
) -> anyhow::Result<()> {
    let mut config = config.clone();
    config.server.data_dir = dir.join("data");
    std::fs::create_dir_all(&config.server.data_dir)?;
    let services = [ServiceKind::Retriever].into_iter().collect();
    let backends = crate::node::open_backends(&config, &services).await?;
    let store = backends.store.clone().ok_or_else(|| anyhow::anyhow!("no database"))?;
    let vectors = backends
        .vectors
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no vector index"))?;
    let embedder = backends
        .embedder
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no embedder"))?;
    let sentences = corpus::sentences();
    let bases = corpus::embed_sentences(embedder.as_ref(), &sentences).await?;
    corpus::write(&store, &vectors, &sentences, &bases, memories, scope_of).await?;
    drop((store, vectors, embedder, backends));
    Ok(())
}

pub(super) fn user_of(index: usize) -> String {
    format!("load-user-{index:03}")
}

/// One query embedding alone, idle, in this process, with the configured embedder: p50 in ms.
pub(super) async fn embedding_alone(config: &Config) -> anyhow::Result<f64> {
    let embedder = thinkus_backends::open_embedder(&config.embedder, &config.server.models_dir)?;
    let mut took = Vec::new();
    for i in 0..40 {
        let started = Instant::now();
        // Distinct texts: no cache answers them.
        embedder.embed_query(&format!("{} ({i})", corpus::question(i))).await?;
        if i >= 5 {
            took.push(started.elapsed());
        }
    }
    Ok(percentile_ms(&took, 0.5))
}

impl LoadOptions {
    /// Refuses options no run of `thinkus bench load` can use (every mode is checked alike).
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.clients.is_empty(), "--clients: at least one level");
        anyhow::ensure!(
            self.users > 0 && self.memories >= self.users,
            "--memories must be at least --users"
        );
        anyhow::ensure!(self.mix.iter().sum::<u32>() > 0, "--mix: at least one share above 0");
        anyhow::ensure!(
            [self.flood, self.bad_input, self.rebuild]
                .iter()
                .filter(|on| **on)
                .count()
                <= 1,
            "--flood, --bad-input and --rebuild are separate runs: one at a time"
        );
        Ok(())
    }
}

/// The mixed levels (`options` checked by [`LoadOptions::check`]; the hostile modes,
/// `--flood`, `--bad-input` and `--rebuild`, are runs of their own in `hostile.rs`).
pub async fn run(config: Config, options: LoadOptions) -> anyhow::Result<()> {
    let (dir, _temp) = state_dir(options.data_dir.clone())?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    say(format!(
        "load: {} memories across {} users (synthetic vectors: perturbed e5 embeddings of real sentences, \
         written straight to the store and the index); mix PrepareTurn/Recall/CompleteTurn {}/{}/{}; \
         deadline {} ms; {cores} cores; levels of {:.0} s (+{:.0} s warm-up) or {} requests",
        options.memories,
        options.users,
        options.mix[0],
        options.mix[1],
        options.mix[2],
        options.deadline_ms,
        options.seconds,
        options.warmup_seconds,
        options.requests
    ));
    let started = Instant::now();
    let users = options.users;
    seed(&config, &dir, options.memories, |k| {
        thinkus_common::model::Scope::new(user_of(k % users), ROLE)
    })
    .await?;
    say(format!("corpus written in {:.1} s", started.elapsed().as_secs_f64()));

    let server = start_server(&dir, &[]).await?;
    let (idle_rss, _) = server.rss_mb();
    let alone = embedding_alone(&config).await?;
    say(format!(
        "one query embedding alone (idle, this process, the configured embedder): p50 {alone:.1} ms; \
         the server's RSS idle {idle_rss:.0} MB"
    ));

    let counter = Arc::new(AtomicUsize::new(0));
    let mut levels = Vec::new();
    for &clients in &options.clients {
        let level = run_level(&server, &options, clients, counter.clone()).await?;
        say(format!(
            "{clients} clients: {} requests in {:.1} s, {:.1}/s ({}); p50 {:.1} ms, p99 {:.1} ms ({}); \
             errors {}, shed {} (refused in p50 {:.1} ms); RSS {:.0} MB (peak {:.0} MB)",
            level.counted,
            level.seconds,
            level.rps,
            level
                .rps_by_op
                .iter()
                .map(|(op, r)| format!("{} {r:.1}/s", op.name()))
                .collect::<Vec<_>>()
                .join(", "),
            level.p50,
            level.p99,
            level
                .p50_by_op
                .iter()
                .map(|(op, p)| format!(
                    "{} p50 {p:.1} p99 {:.1}",
                    op.name(),
                    level.p99_by_op.get(op).copied().unwrap_or(0.0)
                ))
                .collect::<Vec<_>>()
                .join(", "),
            level.errors,
            level.shed,
            level.shed_p50,
            level.rss_mb,
            level.peak_rss_mb,
        ));
        for error in &level.first_errors {
            say(format!("  error: {error}"));
        }
        let drained = drain(&server, options.users.min(clients), &[None], options.drain_seconds).await;
        say(format!("  queue drained in {drained:.1} s"));
        levels.push(level);
    }
    drop(server);

    say("");
    say(
        "| clients | requests/s | PrepareTurn/s | p50 ms | p99 ms | PrepareTurn p50 / p99 | Recall p50 / p99 | errors | shed | RSS MB |",
    );
    say("|---|---|---|---|---|---|---|---|---|---|");
    for l in &levels {
        let op = |map: &BTreeMap<Op, f64>, op: Op| map.get(&op).copied().unwrap_or(0.0);
        say(format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {} | {} | {:.0} |",
            l.clients,
            l.rps,
            op(&l.rps_by_op, Op::Prepare),
            l.p50,
            l.p99,
            op(&l.p50_by_op, Op::Prepare),
            op(&l.p99_by_op, Op::Prepare),
            op(&l.p50_by_op, Op::Recall),
            op(&l.p99_by_op, Op::Recall),
            l.errors,
            l.shed,
            l.rss_mb
        ));
    }
    let by = |get: &dyn Fn(&Level) -> f64| {
        levels
            .iter()
            .map(|l| (l.clients.to_string(), json!(tenth(get(l)))))
            .collect::<serde_json::Map<_, _>>()
    };
    let op = |map: &BTreeMap<Op, f64>, op: Op| map.get(&op).copied().unwrap_or(0.0);
    say(json!({
        "rps_by_clients": by(&|l| l.rps),
        "p99_ms_by_clients": by(&|l| l.p99),
        "p50_ms_by_clients": by(&|l| l.p50),
        "prepare_rps_by_clients": by(&|l| op(&l.rps_by_op, Op::Prepare)),
        "prepare_p50_ms_by_clients": by(&|l| op(&l.p50_by_op, Op::Prepare)),
        "recall_p50_ms_by_clients": by(&|l| op(&l.p50_by_op, Op::Recall)),
        "shed_by_clients": by(&|l| l.shed as f64),
        "errors_by_clients": by(&|l| l.errors as f64),
        "rss_mb_by_clients": by(&|l| l.rss_mb),
        "errors": levels.iter().map(|l| l.errors).sum::<usize>(),
        "shed": levels.iter().map(|l| l.shed).sum::<usize>(),
        "deadline_ms": options.deadline_ms,
        "embed_query_ms": tenth(alone),
        "cores": cores,
        "memories": options.memories,
        "users": options.users,
        "mix": options.mix,
        "synthetic_vectors": true,
    })
    .to_string());
    Ok(())
}

async fn run_level(
    server: &Server,
    options: &LoadOptions,
    clients: usize,
    counter: Arc<AtomicUsize>,
) -> anyhow::Result<Level> {
    let started = Instant::now();
    let window = Window::new(options, started);
    let drivers: Vec<Driver> = (0..clients)
        .map(|client| Driver {
            user: user_of(client % options.users),
            key: None,
            client,
            seed: 0x5eed ^ ((clients as u64) << 32) ^ client as u64,
        })
        .collect();
    let samples = drive_all(server, options, drivers, &window, &counter).await?;
    let ended = Instant::now().min(window.until);
    let seconds = ended
        .saturating_duration_since(window.measure_from)
        .as_secs_f64()
        .max(1e-3);
    let (rss_mb, peak_rss_mb) = server.rss_mb();
    Ok(summarize(clients, seconds, &samples, rss_mb, peak_rss_mb))
}

/// When a level's requests count: after the warm-up, until its end or `requests` counted.
pub(super) struct Window {
    pub(super) measure_from: Instant,
    pub(super) until: Instant,
    counted: AtomicUsize,
    full: AtomicBool,
    requests: usize,
}

impl Window {
    pub(super) fn new(options: &LoadOptions, started: Instant) -> Arc<Self> {
        let measure_from = started + Duration::from_secs_f64(options.warmup_seconds);
        Arc::new(Self {
            measure_from,
            until: measure_from + Duration::from_secs_f64(options.seconds),
            counted: AtomicUsize::new(0),
            full: AtomicBool::new(false),
            requests: options.requests,
        })
    }

    /// The seconds counted so far (the whole window once it is over).
    pub(super) fn seconds(&self) -> f64 {
        let ended = Instant::now().min(self.until);
        ended
            .saturating_duration_since(self.measure_from)
            .as_secs_f64()
            .max(1e-3)
    }
}

/// One client of a level: whom it acts for, with which key (None in dev mode).
pub(super) struct Driver {
    pub(super) user: String,
    pub(super) key: Option<String>,
    /// Its number, for session ids distinct across clients.
    pub(super) client: usize,
    pub(super) seed: u64,
}

/// Runs every driver on its own connection until the window ends; their counted samples.
pub(super) async fn drive_all(
    server: &Server,
    options: &LoadOptions,
    drivers: Vec<Driver>,
    window: &Arc<Window>,
    counter: &Arc<AtomicUsize>,
) -> anyhow::Result<Vec<Sample>> {
    let mut channels = Vec::with_capacity(drivers.len());
    for _ in 0..drivers.len() {
        channels.push(
            tonic::transport::Endpoint::from_shared(server.url.clone())?
                .tcp_nodelay(true)
                .connect()
                .await?,
        );
    }
    let tasks: Vec<_> = drivers
        .into_iter()
        .zip(channels)
        .map(|(driver, channel)| {
            let options = options.clone();
            let (window, counter) = (window.clone(), counter.clone());
            tokio::spawn(async move { drive(channel, &options, driver, &window, &counter).await })
        })
        .collect();
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await?);
    }
    Ok(samples)
}

/// One client: a request after another (a closed loop) until the window ends.
async fn drive(
    channel: Channel,
    options: &LoadOptions,
    driver: Driver,
    window: &Window,
    counter: &AtomicUsize,
) -> Vec<Sample> {
    let mut gateway = GatewayServiceClient::new(channel.clone());
    let mut retriever = RetrieverServiceClient::new(channel);
    let mut rng = Rng(driver.seed);
    let total: u32 = options.mix.iter().sum();
    let mut turn = 0usize;
    let mut mine = Vec::new();
    while Instant::now() < window.until && !window.full.load(Ordering::Relaxed) {
        let pick = (rng.next() % u64::from(total)) as u32;
        let op = if pick < options.mix[0] {
            Op::Prepare
        } else if pick < options.mix[0] + options.mix[1] {
            Op::Recall
        } else {
            Op::Complete
        };
        let n = counter.fetch_add(1, Ordering::Relaxed);
        let asked = Instant::now();
        let target = Target {
            user: &driver.user,
            key: driver.key.as_deref(),
            client: driver.client,
        };
        let outcome = send(&mut gateway, &mut retriever, op, &target, turn, n, options.deadline_ms).await;
        let latency = asked.elapsed();
        turn += 1;
        let retry_after = match &outcome {
            Err(status) if status.code() == Code::ResourceExhausted => Some(
                status
                    .metadata()
                    .get(thinkus_common::error::RETRY_AFTER_METADATA)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<f64>().ok())
                    .map_or(Duration::from_secs(1), Duration::from_secs_f64),
            ),
            _ => None,
        };
        if asked >= window.measure_from && asked < window.until {
            let outcome = match &outcome {
                Ok(()) => Outcome::Answered,
                Err(status) if status.code() == Code::ResourceExhausted => Outcome::Shed,
                Err(status) => Outcome::Error(status.code(), status.message().to_string()),
            };
            mine.push(Sample { op, outcome, latency });
            if window.counted.fetch_add(1, Ordering::Relaxed) + 1 >= window.requests {
                window.full.store(true, Ordering::Relaxed);
            }
        }
        if let Some(wait) = retry_after {
            // A well-behaved client waits as told, a little less or more at random so that
            // refused clients do not come back together.
            let jitter = 0.5 + rng.unit();
            let wait = wait
                .mul_f64(jitter)
                .min(window.until.saturating_duration_since(Instant::now()));
            tokio::time::sleep(wait).await;
        }
    }
    mine
}

pub(super) fn summarize(clients: usize, seconds: f64, samples: &[Sample], rss_mb: f64, peak_rss_mb: f64) -> Level {
    let taken: Vec<&Sample> = samples.iter().filter(|s| !matches!(s.outcome, Outcome::Shed)).collect();
    let answered: Vec<&Sample> = taken
        .iter()
        .copied()
        .filter(|s| matches!(s.outcome, Outcome::Answered))
        .collect();
    let latencies = |of: &[&Sample]| of.iter().map(|s| s.latency).collect::<Vec<_>>();
    let mut rps_by_op = BTreeMap::new();
    let mut p50_by_op = BTreeMap::new();
    let mut p99_by_op = BTreeMap::new();
    for op in [Op::Prepare, Op::Recall, Op::Complete] {
        let done = answered.iter().filter(|s| s.op == op).count();
        rps_by_op.insert(op, done as f64 / seconds);
        let of: Vec<&Sample> = taken.iter().copied().filter(|s| s.op == op).collect();
        if !of.is_empty() {
            p50_by_op.insert(op, percentile_ms(&latencies(&of), 0.5));
            p99_by_op.insert(op, percentile_ms(&latencies(&of), 0.99));
        }
    }
    let shed: Vec<&Sample> = samples.iter().filter(|s| matches!(s.outcome, Outcome::Shed)).collect();
    let errors: Vec<String> = samples
        .iter()
        .filter_map(|s| match &s.outcome {
            Outcome::Error(code, message) => Some(format!("{} {code:?}: {message}", s.op.name())),
            _ => None,
        })
        .collect();
    let mut first_errors: Vec<String> = errors.clone();
    first_errors.dedup();
    first_errors.truncate(3);
    Level {
        clients,
        seconds,
        counted: samples.len(),
        rps: answered.len() as f64 / seconds,
        rps_by_op,
        p50: percentile_ms(&latencies(&taken), 0.5),
        p99: percentile_ms(&latencies(&taken), 0.99),
        p50_by_op,
        p99_by_op,
        errors: errors.len(),
        shed: shed.len(),
        shed_p50: percentile_ms(&latencies(&shed), 0.5),
        rss_mb,
        peak_rss_mb,
        first_errors,
    }
}

/// Whom a request is for.
struct Target<'a> {
    user: &'a str,
    /// The API key sent (`authorization: Bearer`), None in dev mode.
    key: Option<&'a str>,
    client: usize,
}

/// A request with the deadline and, when given, the key.
pub(super) fn request<T>(message: T, deadline: Duration, key: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(deadline);
    if let Some(value) = key.and_then(|key| format!("Bearer {key}").parse().ok()) {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Sends one request of `op` with the deadline.
async fn send(
    gateway: &mut GatewayServiceClient<Channel>,
    retriever: &mut RetrieverServiceClient<Channel>,
    op: Op,
    target: &Target<'_>,
    turn: usize,
    n: usize,
    deadline_ms: u64,
) -> Result<(), tonic::Status> {
    let scope = Scope {
        user_id: target.user.to_string(),
        role_id: ROLE.into(),
        project_id: String::new(),
        session_id: format!("load-{}-{}", target.client, turn / 10),
        ..Default::default()
    };
    let deadline = Duration::from_millis(deadline_ms);
    let key = target.key;
    match op {
        Op::Prepare => {
            // Every tenth turn starts a session (the last session's summary is looked up).
            let recent_messages = if turn.is_multiple_of(10) {
                Vec::new()
            } else {
                vec!["好的，继续。".to_string()]
            };
            let request = PrepareTurnRequest {
                scope: Some(scope),
                message: corpus::question(n),
                recent_messages,
                ..Default::default()
            };
            gateway
                .prepare_turn(self::request(request, deadline, key))
                .await
                .map(|_| ())
        }
        Op::Recall => {
            let request = RecallRequest {
                scope: Some(scope),
                query: corpus::question(n),
                limit: 10,
                ..Default::default()
            };
            retriever
                .recall(self::request(request, deadline, key))
                .await
                .map(|_| ())
        }
        Op::Complete => {
            let subject = SUBJECTS[n % SUBJECTS.len()].to_lowercase();
            let predicate = PREDICATES[(n / SUBJECTS.len()) % PREDICATES.len()];
            let request = CompleteTurnRequest {
                scope: Some(scope),
                user_message: format!("Just so you know, {subject} {predicate} (update {n})."),
                assistant_message: "Noted, I will keep that in mind.".into(),
                request_id: format!("load-{n}"),
                ..Default::default()
            };
            gateway
                .complete_turn(self::request(request, deadline, key))
                .await
                .map(|_| ())
        }
    }
}

/// Waits until the users' queued jobs have run (at most `seconds`), the users of each key
/// (one None key in dev mode); the time it took.
pub(super) async fn drain(server: &Server, users: usize, keys: &[Option<&str>], seconds: f64) -> f64 {
    let started = Instant::now();
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(server.url.clone()) else {
        return 0.0;
    };
    let Ok(channel) = endpoint.connect().await else {
        return 0.0;
    };
    let mut gateway = GatewayServiceClient::new(channel);
    while started.elapsed().as_secs_f64() < seconds {
        let mut open = false;
        for (user, key) in (0..users).flat_map(|user| keys.iter().map(move |key| (user, *key))) {
            for status in [JobStatus::Pending, JobStatus::Running] {
                let listing = ListJobsRequest {
                    scope: Some(Scope {
                        user_id: user_of(user),
                        ..Default::default()
                    }),
                    status: status as i32,
                    ..Default::default()
                };
                let listed = gateway.list_jobs(request(listing, Duration::from_secs(10), key)).await;
                open |= listed.is_ok_and(|r| !r.into_inner().jobs.is_empty());
            }
        }
        if !open {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _ = std::io::stdout().flush();
    started.elapsed().as_secs_f64()
}
