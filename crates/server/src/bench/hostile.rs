//! The hostile runs of `thinkus bench load` (issue 18), on the same child server and corpus as
//! its levels ([`super::load`]):
//! - `--flood`: two tenants with their own API keys. At each level of `--clients`, the
//!   measuring tenant runs `--measure-clients` clients alone (its idle figures), then again
//!   while the flooding tenant runs that many clients; both with the level's mix and deadline.
//!   The measuring tenant's p99 during the flood over its p99 alone is the fairness figure, and
//!   the flooding tenant's shed requests (RESOURCE_EXHAUSTED, the client waits its Retry-After)
//!   say how much of the flood was refused.
//! - `--bad-input`: from the largest `--clients` at once for `--seconds`, requests no client
//!   should send: malformed protobuf, invalid UTF-8, messages at and over the size limit, deeply
//!   nested JSON (an artifact read with JSONPath, a REST body) and bad or costly JSONPath
//!   expressions (on a JSON artifact just under the server's JSONPath limit,
//!   `artifact.json_path_max_bytes`, and one over it). The server's RSS idle (after a few valid
//!   requests of each kind), its highest sample during (every 100 ms) and after; every answer's
//!   status by kind. INTERNAL, UNKNOWN, a broken connection or a 5xx is a failure.
//! - `--rebuild`: the largest `--clients` recall (random users, their corpus's questions; each
//!   client waits [`RECALL_PAUSE`] between two, so that the probes leave the embedding workers
//!   room for the rebuild: queries go before passages) while the whole index is rebuilt as a
//!   job; every recall must be answered with at least one memory. The job's progress, its
//!   duration and the recalls' latency before and during.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use thinkus_common::model::Scope as ModelScope;
use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
use thinkus_proto::artifact::read_artifact_request::Locator;
use thinkus_proto::artifact::{ArtifactHeader, CreateArtifactRequest, ReadArtifactRequest};
use thinkus_proto::codec::RawCodec;
use thinkus_proto::common::Scope;
// Raw stubs and protobuf messages, not the services' clients (`GatewayGrpcClient` and the
// like): these runs send what no client would (malformed bytes, messages over the size limit,
// per-request deadlines and keys) and label every answer by its gRPC code.
use thinkus_proto::gateway::PrepareTurnRequest;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
use thinkus_proto::knowledge::{GetIndexJobRequest, IndexJobStatus, RebuildIndexRequest};
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

use super::corpus::{self, ROLE, Rng};
use super::load::{
    Driver, LoadOptions, Outcome, Sample, Server, Window, drain, drive_all, free_port, request, seed, start_server,
    summarize, user_of,
};
use super::stats::{percentile_ms, tenth};
use super::{say, state_dir};
use crate::config::Config;

/// The pause of each `--rebuild` client between two recalls.
const RECALL_PAUSE: Duration = Duration::from_millis(250);

/// The two tenants of `--flood`, each with its own key (in a keys file the server reads).
const MEASURED: (&str, &str) = ("measured", "bench-measured-key");
const FLOODING: (&str, &str) = ("flooding", "bench-flooding-key");

async fn connect(server: &Server) -> anyhow::Result<Channel> {
    Ok(tonic::transport::Endpoint::from_shared(server.url.clone())?
        .tcp_nodelay(true)
        .connect()
        .await?)
}

/// `thinkus bench load --flood`.
pub async fn flood(config: Config, options: LoadOptions) -> anyhow::Result<()> {
    anyhow::ensure!(options.measure_clients > 0, "--measure-clients: at least 1");
    let (dir, _temp) = state_dir(options.data_dir.clone())?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    say(format!(
        "load --flood: {} memories across tenants {:?} and {:?} ({} users each); mix \
         PrepareTurn/Recall/CompleteTurn {}/{}/{}; deadline {} ms; {cores} cores; per level, the \
         measuring tenant's {} client(s) alone, then with the flooding tenant's clients, {:.0} s \
         (+{:.0} s warm-up) each",
        options.memories,
        MEASURED.0,
        FLOODING.0,
        options.users,
        options.mix[0],
        options.mix[1],
        options.mix[2],
        options.deadline_ms,
        options.measure_clients,
        options.seconds,
        options.warmup_seconds,
    ));
    let started = Instant::now();
    let users = options.users;
    seed(&config, &dir, options.memories, |k| {
        let tenant = if k % 2 == 0 { MEASURED.0 } else { FLOODING.0 };
        ModelScope::new(user_of((k / 2) % users), ROLE).with_tenant(tenant)
    })
    .await?;
    say(format!("corpus written in {:.1} s", started.elapsed().as_secs_f64()));
    let keys = dir.join("keys.toml");
    let mut text = String::new();
    for (tenant, key) in [MEASURED, FLOODING] {
        text.push_str(&format!(
            "[[keys]]\ntenant = \"{tenant}\"\nusers = [\"*\"]\nkey = \"{key}\"\n"
        ));
    }
    std::fs::write(&keys, text)?;
    let server = start_server(
        &dir,
        &[
            "--set".into(),
            "auth.mode=api_key".into(),
            "--set".into(),
            format!("auth.keys_file={}", keys.display()),
        ],
    )
    .await?;
    let (idle_rss, _) = server.rss_mb();
    say(format!("the server's RSS idle {idle_rss:.0} MB"));

    let counter = Arc::new(AtomicUsize::new(0));
    let drivers = |(_, key): (&str, &str), clients: usize, first: usize, level: usize| -> Vec<Driver> {
        (0..clients)
            .map(|i| Driver {
                user: user_of(i % users),
                key: Some(key.to_string()),
                client: first + i,
                seed: 0xf100d ^ ((level as u64) << 40) ^ ((first + i) as u64),
            })
            .collect()
    };
    let both = [Some(MEASURED.1), Some(FLOODING.1)];
    let mut levels = Vec::new();
    for (level, &clients) in options.clients.iter().enumerate() {
        // The measuring tenant alone.
        let window = Window::new(&options, Instant::now());
        let alone = drive_all(
            &server,
            &options,
            drivers(MEASURED, options.measure_clients, 0, level),
            &window,
            &counter,
        )
        .await?;
        let (rss, peak) = server.rss_mb();
        let alone = summarize(options.measure_clients, window.seconds(), &alone, rss, peak);
        drain(
            &server,
            users.min(options.measure_clients),
            &both,
            options.drain_seconds,
        )
        .await;

        // The same, while the other tenant floods.
        let window = Window::new(&options, Instant::now());
        let (measured, flooding) = tokio::join!(
            drive_all(
                &server,
                &options,
                drivers(MEASURED, options.measure_clients, 0, level),
                &window,
                &counter
            ),
            drive_all(
                &server,
                &options,
                drivers(FLOODING, clients, 10_000, level),
                &window,
                &counter
            ),
        );
        let seconds = window.seconds();
        let (rss, peak) = server.rss_mb();
        let measured = summarize(options.measure_clients, seconds, &measured?, rss, peak);
        let flooding = summarize(clients, seconds, &flooding?, rss, peak);
        let ratio = if alone.p99 > 0.0 { measured.p99 / alone.p99 } else { 0.0 };
        let effective = server.metric("thinkus_admission_effective_seats").await;
        say(format!(
            "effective seats at the end of the flood: {}",
            effective.map_or("unknown".to_string(), |seats| format!("{seats:.0}"))
        ));
        say(format!(
            "flood of {clients} clients: measuring tenant alone {} requests, p50 {:.1} ms, p99 {:.1} ms, \
             errors {}, shed {}; during the flood {} requests, p50 {:.1} ms, p99 {:.1} ms ({ratio:.2} x \
             alone), errors {}, shed {}; flooding tenant {} requests, {:.1} answered/s, p50 {:.1} ms, \
             p99 {:.1} ms, errors {}, shed {} (refused in p50 {:.1} ms); RSS {:.0} MB (peak {:.0} MB)",
            alone.counted,
            alone.p50,
            alone.p99,
            alone.errors,
            alone.shed,
            measured.counted,
            measured.p50,
            measured.p99,
            measured.errors,
            measured.shed,
            flooding.counted,
            flooding.rps,
            flooding.p50,
            flooding.p99,
            flooding.errors,
            flooding.shed,
            flooding.shed_p50,
            rss,
            peak,
        ));
        for error in measured.first_errors.iter().chain(&flooding.first_errors) {
            say(format!("  error: {error}"));
        }
        let drained = drain(
            &server,
            users.min(clients.max(options.measure_clients)),
            &both,
            options.drain_seconds,
        )
        .await;
        say(format!("  queue drained in {drained:.1} s"));
        levels.push((clients, alone, measured, flooding, ratio));
    }
    drop(server);

    say("");
    say(
        "| flooding clients | measuring alone p50 / p99 ms | during the flood p50 / p99 ms | p99 ratio | measuring errors / shed | flood answered/s | flood shed | flood errors | RSS MB |",
    );
    say("|---|---|---|---|---|---|---|---|---|");
    for (clients, alone, measured, flooding, ratio) in &levels {
        say(format!(
            "| {clients} | {:.1} / {:.1} | {:.1} / {:.1} | {ratio:.2} | {} / {} | {:.1} | {} | {} | {:.0} |",
            alone.p50,
            alone.p99,
            measured.p50,
            measured.p99,
            measured.errors,
            measured.shed,
            flooding.rps,
            flooding.shed,
            flooding.errors,
            measured.rss_mb,
        ));
    }
    let by = |get: &dyn Fn(&(usize, _, _, _, f64)) -> f64| {
        levels
            .iter()
            .map(|l| (l.0.to_string(), json!(tenth(get(l)))))
            .collect::<serde_json::Map<_, _>>()
    };
    say(json!({
        "mode": "flood",
        "measuring_clients": options.measure_clients,
        "measured_p99_alone_ms_by_flooding_clients": by(&|l| l.1.p99),
        "measured_p99_flood_ms_by_flooding_clients": by(&|l| l.2.p99),
        "measured_p50_alone_ms_by_flooding_clients": by(&|l| l.1.p50),
        "measured_p50_flood_ms_by_flooding_clients": by(&|l| l.2.p50),
        "measured_p99_ratio_by_flooding_clients": levels
            .iter()
            .map(|l| (l.0.to_string(), json!((l.4 * 100.0).round() / 100.0)))
            .collect::<serde_json::Map<_, _>>(),
        "measured_errors_by_flooding_clients": by(&|l| (l.1.errors + l.2.errors) as f64),
        "measured_shed_by_flooding_clients": by(&|l| (l.1.shed + l.2.shed) as f64),
        "flood_rps_by_flooding_clients": by(&|l| l.3.rps),
        "flood_shed_by_flooding_clients": by(&|l| l.3.shed as f64),
        "flood_errors_by_flooding_clients": by(&|l| l.3.errors as f64),
        "rss_mb_by_flooding_clients": by(&|l| l.2.rss_mb),
        "idle_rss_mb": tenth(idle_rss),
        "deadline_ms": options.deadline_ms,
        "cores": cores,
        "memories": options.memories,
        "users_per_tenant": options.users,
        "mix": options.mix,
        "synthetic_vectors": true,
    })
    .to_string());
    Ok(())
}

/// The kinds of bad input, in the order the clients cycle through them.
const KINDS: [&str; 5] = [
    "malformed protobuf",
    "invalid UTF-8",
    "huge message",
    "deep JSON",
    "bad JSONPath",
];

/// Unary methods that get malformed bytes.
const UNARY_PATHS: [&str; 6] = [
    "/thinkus.retriever.v1.RetrieverService/Recall",
    "/thinkus.gateway.v1.GatewayService/PrepareTurn",
    "/thinkus.gateway.v1.GatewayService/CompleteTurn",
    "/thinkus.knowledge.v1.KnowledgeManagerService/Remember",
    "/thinkus.artifact.v1.ArtifactService/CreateArtifact",
    "/thinkus.artifact.v1.ArtifactService/ReadArtifact",
];

/// Whether an answer (a gRPC code, an HTTP status, or a broken exchange) is a failure: the
/// server broke, or did not answer within the request's 10 s (the client's CANCELLED).
fn failed(label: &str) -> bool {
    label.starts_with("Internal")
        || label.starts_with("Cancelled")
        || label.starts_with("Unknown")
        || label.starts_with("Unavailable")
        || label.starts_with("DataLoss")
        || label.starts_with("HTTP 5")
        || label.starts_with("broken")
}

fn grpc_label(result: Result<(), tonic::Status>) -> String {
    match result {
        Ok(()) => "Ok".into(),
        Err(status) => format!("{:?}", status.code()),
    }
}

fn scope(user: &str, session: &str) -> Scope {
    Scope {
        user_id: user.into(),
        role_id: ROLE.into(),
        session_id: session.into(),
        ..Default::default()
    }
}

/// A message's bytes with every occurrence of `marker` (in a string field) made invalid UTF-8.
fn with_invalid_utf8(mut bytes: Vec<u8>, marker: &str) -> Vec<u8> {
    let marker = marker.as_bytes();
    let mut i = 0;
    while i + marker.len() <= bytes.len() {
        if &bytes[i..i + marker.len()] == marker {
            for (j, byte) in bytes[i..i + marker.len()].iter_mut().enumerate() {
                *byte = if j % 2 == 0 { 0xff } else { 0xc3 };
            }
            i += marker.len();
        } else {
            i += 1;
        }
    }
    bytes
}

async fn raw_unary(channel: Channel, path: &str, bytes: Vec<u8>, deadline: Duration) -> Result<(), tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|err| tonic::Status::unavailable(format!("not ready: {err}")))?;
    let path = PathAndQuery::from_str(path).map_err(|err| tonic::Status::internal(err.to_string()))?;
    let mut request = tonic::Request::new(bytes);
    request.set_timeout(deadline);
    grpc.unary(request, path, RawCodec).await.map(drop)
}

/// One HTTP/1.1 POST of a JSON body to the REST facade: the status line's code.
async fn rest_post(port: u16, path: &str, body: &[u8]) -> String {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(Ok(answer)) => {
            let text = String::from_utf8_lossy(&answer[..answer.len().min(64)]).to_string();
            match text.split_whitespace().nth(1) {
                Some(code) => format!("HTTP {code}"),
                None => "broken (no status line)".into(),
            }
        }
        Ok(Err(err)) => format!("broken ({err})"),
        Err(_) => "broken (no answer in 30 s)".into(),
    }
}

/// Nested JSON arrays `depth` deep.
fn deep_json(depth: usize) -> Vec<u8> {
    let mut text = Vec::with_capacity(depth * 2);
    text.extend(std::iter::repeat_n(b'[', depth));
    text.extend(std::iter::repeat_n(b']', depth));
    text
}

/// A JSON document of about `bytes` bytes: records with nested fields.
fn large_json(bytes: usize) -> Vec<u8> {
    let mut text = String::from("{\"records\":[");
    let mut i = 0;
    while text.len() < bytes {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(
            "{{\"id\":{i},\"name\":\"record {i}\",\"tags\":[\"a{i}\",\"b{i}\"],\"nested\":{{\"x\":{i},\"y\":[{i},{i}]}}}}"
        ));
        i += 1;
    }
    text.push_str("]}");
    text.into_bytes()
}

/// The artifacts the JSONPath attacks read, created at the start of the campaign.
struct Targets {
    user: String,
    /// Just under the server's JSONPath limit (`artifact.json_path_max_bytes`).
    large: String,
    /// Over it.
    over: String,
    deep: String,
}

async fn create_artifact(channel: Channel, user: &str, path: &str, content: Vec<u8>) -> anyhow::Result<String> {
    let created = ArtifactServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .create_artifact(CreateArtifactRequest {
            header: Some(ArtifactHeader {
                scope: Some(scope(user, "bad-input")),
                tool_call_id: "bench".into(),
                tool_name: "read_file".into(),
                path: path.into(),
                ..Default::default()
            }),
            content,
        })
        .await?
        .into_inner();
    created
        .artifact
        .map(|a| a.id)
        .ok_or_else(|| anyhow::anyhow!("no artifact in the answer to CreateArtifact"))
}

async fn read_json_path(channel: Channel, user: &str, id: &str, path: String, deadline: Duration) -> String {
    let mut request = tonic::Request::new(ReadArtifactRequest {
        scope: Some(scope(user, "")),
        artifact_id: id.into(),
        locator: Some(Locator::JsonPath(path)),
        max_bytes: 1024,
    });
    request.set_timeout(deadline);
    grpc_label(
        ArtifactServiceClient::new(channel)
            .read_artifact(request)
            .await
            .map(drop),
    )
}

/// Sends the `n`-th request of `kind`: what came back.
async fn attack(
    channel: Channel,
    rest_port: u16,
    kind: &str,
    n: usize,
    rng: &mut Rng,
    targets: &Targets,
    max_message_bytes: usize,
) -> String {
    let deadline = Duration::from_secs(10);
    let user = user_of(n % 8);
    match kind {
        "malformed protobuf" => {
            let path = UNARY_PATHS[n % UNARY_PATHS.len()];
            let length = 1 + rng.below(4096);
            let bytes: Vec<u8> = (0..length).map(|_| rng.next() as u8).collect();
            grpc_label(raw_unary(channel, path, bytes, deadline).await)
        }
        "invalid UTF-8" => {
            let marker = "MARKERMARKERMARKER";
            let (path, bytes) = if n.is_multiple_of(2) {
                let message = RecallRequest {
                    scope: Some(scope(&user, "bad-input")),
                    query: format!("what about {marker}?"),
                    limit: 10,
                    ..Default::default()
                };
                (UNARY_PATHS[0], thinkus_proto::codec::encode(&message))
            } else {
                let message = PrepareTurnRequest {
                    scope: Some(scope(&format!("{user}{marker}"), "bad-input")),
                    message: format!("tell me about {marker}"),
                    ..Default::default()
                };
                (UNARY_PATHS[1], thinkus_proto::codec::encode(&message))
            };
            grpc_label(raw_unary(channel, path, with_invalid_utf8(bytes, marker), deadline).await)
        }
        "huge message" => {
            // Just under the server's message limit, and over it.
            let size = if n.is_multiple_of(2) {
                max_message_bytes - 64 * 1024
            } else {
                max_message_bytes + 4 * 1024 * 1024
            };
            let words = "budget deadline supplier contract ";
            let text: String = words.repeat(size / words.len() + 1);
            if n % 4 < 2 {
                let message = PrepareTurnRequest {
                    scope: Some(scope(&user, "bad-input")),
                    message: text,
                    ..Default::default()
                };
                let mut request = tonic::Request::new(message);
                request.set_timeout(deadline);
                grpc_label(
                    GatewayServiceClient::new(channel)
                        .max_encoding_message_size(usize::MAX)
                        .prepare_turn(request)
                        .await
                        .map(drop),
                )
            } else {
                let message = RecallRequest {
                    scope: Some(scope(&user, "bad-input")),
                    query: text,
                    limit: 10,
                    ..Default::default()
                };
                let mut request = tonic::Request::new(message);
                request.set_timeout(deadline);
                grpc_label(
                    RetrieverServiceClient::new(channel)
                        .max_encoding_message_size(usize::MAX)
                        .recall(request)
                        .await
                        .map(drop),
                )
            }
        }
        "deep JSON" => {
            if n.is_multiple_of(2) {
                let path = if n.is_multiple_of(4) {
                    "$..*"
                } else {
                    "$[0][0][0][0][0][0][0][0]"
                };
                read_json_path(channel, &targets.user, &targets.deep, path.into(), deadline).await
            } else {
                // A REST body whose field is nested 100,000 deep.
                let mut body = b"{\"userId\":".to_vec();
                body.extend(deep_json(100_000));
                body.extend(b",\"roleId\":\"assistant\",\"query\":\"budget\"}");
                rest_post(rest_port, "/api/memory/retrieve", &body).await
            }
        }
        "bad JSONPath" => {
            let path = match n % 7 {
                0 => "$[".to_string(),
                1 => "$..[?(@.name == 'record".to_string(),
                2 => format!("${}", ".a".repeat(50_000)),
                3 => "$..*".to_string(),
                4 => "$..records[?(@.id > 0)]..*".to_string(),
                5 => format!("$.records[{}]", "9".repeat(400)),
                // A document over the limit.
                _ => return read_json_path(channel, &targets.user, &targets.over, "$..*".into(), deadline).await,
            };
            read_json_path(channel, &targets.user, &targets.large, path, deadline).await
        }
        other => format!("broken (unknown kind {other})"),
    }
}

/// `thinkus bench load --bad-input`.
pub async fn bad_input(config: Config, options: LoadOptions) -> anyhow::Result<()> {
    let clients = options.clients.iter().copied().max().unwrap_or(1).max(1);
    let kinds: Vec<&'static str> = KINDS
        .into_iter()
        .filter(|kind| options.bad_kinds.is_empty() || options.bad_kinds.iter().any(|k| k == kind))
        .collect();
    if let Some(unknown) = options.bad_kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
        anyhow::bail!("--kinds: {unknown:?} is not one of {}", KINDS.join(", "));
    }
    let (dir, _temp) = state_dir(options.data_dir.clone())?;
    let users = options.users;
    seed(&config, &dir, options.memories, |k| {
        ModelScope::new(user_of(k % users), ROLE)
    })
    .await?;
    let rest_port = free_port()?;
    let server = start_server(
        &dir,
        &["--set".into(), format!("gateway.rest_listen=127.0.0.1:{rest_port}")],
    )
    .await?;
    let max_message_bytes = config.server.max_message_bytes;
    let json_limit = usize::try_from(config.artifact.json_path_max_bytes)
        .unwrap_or(usize::MAX)
        .min(64 << 20);
    say(format!(
        "load --bad-input: {clients} clients for {:.0} s, each cycling through {}; message limit {} bytes, \
         {} in flight; JSONPath limit {json_limit} bytes, {} parsed at once; {} memories across {users} users",
        options.seconds,
        kinds.join(", "),
        max_message_bytes,
        config.server.message_bytes_in_flight,
        config.artifact.parse_bytes_in_flight,
        options.memories,
    ));
    let channel = connect(&server).await?;
    let (started_rss, _) = server.rss_mb();

    // A few valid requests of each kind first, so that idle is the server having served them.
    let user = user_of(0);
    for i in 0..5 {
        let recall = RecallRequest {
            scope: Some(scope(&user, "warm")),
            query: corpus::question(i),
            limit: 10,
            ..Default::default()
        };
        RetrieverServiceClient::new(channel.clone())
            .recall(request(recall, Duration::from_secs(30), None))
            .await?;
        let prepare = PrepareTurnRequest {
            scope: Some(scope(&user, "warm")),
            message: corpus::question(i + 100),
            ..Default::default()
        };
        GatewayServiceClient::new(channel.clone())
            .prepare_turn(request(prepare, Duration::from_secs(30), None))
            .await?;
    }
    let small = create_artifact(channel.clone(), &user, "/warm/users.json", large_json(4 * 1024)).await?;
    let _ = read_json_path(
        channel.clone(),
        &user,
        &small,
        "$..name".into(),
        Duration::from_secs(30),
    )
    .await;
    let ok = rest_post(
        rest_port,
        "/api/memory/retrieve",
        br#"{"userId":"load-user-000","roleId":"assistant","query":"budget"}"#,
    )
    .await;
    anyhow::ensure!(
        ok == "HTTP 200",
        "the REST facade did not answer a valid retrieve: {ok}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle_rss, _) = server.rss_mb();
    say(format!(
        "RSS just started {started_rss:.0} MB; idle (after valid Recall, PrepareTurn, CreateArtifact, \
         ReadArtifact and REST requests) {idle_rss:.0} MB"
    ));

    // The campaign: its JSON artifacts, then the clients, with RSS sampled every 100 ms.
    let campaign_started = Instant::now();
    // The highest RSS sampled, in tenths of a MB.
    let peak = Arc::new(AtomicUsize::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let pid = server.pid().to_string();
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                let (rss, _) = super::stats::rss_mb(&pid);
                peak.fetch_max((rss * 10.0) as usize, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let large = create_artifact(
        channel.clone(),
        &user,
        "/bad-input/records.json",
        large_json(json_limit.saturating_sub(64 * 1024).max(4096)),
    )
    .await?;
    let over = create_artifact(
        channel.clone(),
        &user,
        "/bad-input/more-records.json",
        large_json(json_limit + 1024 * 1024),
    )
    .await?;
    let deep = create_artifact(channel.clone(), &user, "/bad-input/deep.json", deep_json(500_000)).await?;
    let targets = Arc::new(Targets {
        user,
        large,
        over,
        deep,
    });
    let until = Instant::now() + Duration::from_secs_f64(options.seconds);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let channel = connect(&server).await?;
        let targets = targets.clone();
        let kinds = kinds.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0xbad ^ client as u64);
            let mut seen: Vec<(&'static str, String)> = Vec::new();
            let mut n = client;
            while Instant::now() < until {
                let kind = kinds[n % kinds.len()];
                let label = attack(
                    channel.clone(),
                    rest_port,
                    kind,
                    n / kinds.len(),
                    &mut rng,
                    &targets,
                    max_message_bytes,
                )
                .await;
                seen.push((kind, label));
                n += 1;
            }
            seen
        }));
    }
    let mut answers: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    for task in tasks {
        for (kind, label) in task.await? {
            *answers.entry(kind).or_default().entry(label).or_default() += 1;
        }
    }
    let campaign_seconds = campaign_started.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    sampler.await?;
    let (end_rss, _) = server.rss_mb();
    let during = (peak.load(Ordering::Relaxed) as f64 / 10.0).max(end_rss);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (after_rss, _) = server.rss_mb();

    // It still serves.
    let recall = RecallRequest {
        scope: Some(scope(&user_of(1), "after")),
        query: corpus::question(7),
        limit: 10,
        ..Default::default()
    };
    let still = RetrieverServiceClient::new(connect(&server).await?)
        .recall(request(recall, Duration::from_secs(30), None))
        .await
        .map(|r| !r.into_inner().catalog.is_empty());
    let still_serving = matches!(still, Ok(true));

    let mut failures = 0;
    for (kind, labels) in &answers {
        let total: usize = labels.values().sum();
        let bad: usize = labels.iter().filter(|(l, _)| failed(l)).map(|(_, c)| c).sum();
        failures += bad;
        say(format!(
            "{kind}: {total} requests, {bad} failures; answers {}",
            labels
                .iter()
                .map(|(label, count)| format!("{label} {count}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    say(format!(
        "RSS idle {idle_rss:.0} MB, highest during the campaign ({campaign_seconds:.0} s) {during:.0} MB \
         ({:.2} x idle), 5 s after {after_rss:.0} MB ({:.2} x idle); a valid recall after: {}",
        during / idle_rss.max(1.0),
        after_rss / idle_rss.max(1.0),
        if still_serving { "answered" } else { "NOT answered" },
    ));
    drop(server);
    say(json!({
        "mode": "bad_input",
        "clients": clients,
        "seconds": tenth(campaign_seconds),
        "rss_mb_started": tenth(started_rss),
        "rss_mb_idle": tenth(idle_rss),
        "rss_mb_during_max": tenth(during),
        "rss_mb_after": tenth(after_rss),
        "rss_during_over_idle": (during / idle_rss.max(1.0) * 100.0).round() / 100.0,
        "rss_after_over_idle": (after_rss / idle_rss.max(1.0) * 100.0).round() / 100.0,
        "requests": answers.values().flat_map(|l| l.values()).sum::<usize>(),
        "failures": failures,
        "kinds": kinds,
        "answers": answers,
        "still_serving": still_serving,
        "max_message_bytes": max_message_bytes,
        "message_bytes_in_flight": config.server.message_bytes_in_flight,
        "json_path_max_bytes": json_limit,
        "parse_bytes_in_flight": config.artifact.parse_bytes_in_flight,
    })
    .to_string());
    Ok(())
}

/// `thinkus bench load --rebuild`.
pub async fn rebuild(config: Config, options: LoadOptions) -> anyhow::Result<()> {
    let clients = options.clients.iter().copied().max().unwrap_or(1).max(1);
    let (dir, _temp) = state_dir(options.data_dir.clone())?;
    let users = options.users;
    say(format!(
        "load --rebuild: {} memories across {users} users; {clients} clients recall (deadline {} ms, \
         {} ms between two recalls of a client) before ({:.0} s) and while the whole index is rebuilt",
        options.memories,
        options.deadline_ms,
        RECALL_PAUSE.as_millis(),
        options.seconds,
    ));
    seed(&config, &dir, options.memories, |k| {
        ModelScope::new(user_of(k % users), ROLE)
    })
    .await?;
    let server = start_server(&dir, &[]).await?;
    let channel = connect(&server).await?;

    // Recalls before, for the reference latency.
    let before = recall_at(&server.url, clients, users, options.deadline_ms, Instant::now(), {
        let until = Instant::now() + Duration::from_secs_f64(options.seconds);
        move || Instant::now() < until
    })
    .await?;

    let mut km = KnowledgeManagerServiceClient::new(channel.clone());
    let job = km
        .rebuild_index(RebuildIndexRequest {
            scope: Some(Scope::default()),
        })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("RebuildIndex answered no job"))?;
    let started = Instant::now();
    say(format!("rebuild job {} queued", job.id));
    // When the swap began: the first report with every memory staged or a user done.
    let mut swapping_from: Option<f64> = None;
    let done = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicUsize::new(0));
    let recalling = {
        let (done, asked) = (done.clone(), asked.clone());
        let server_url = server.url.clone();
        let deadline_ms = options.deadline_ms;
        tokio::spawn(async move {
            recall_at(&server_url, clients, users, deadline_ms, started, move || {
                asked.fetch_add(1, Ordering::Relaxed);
                !done.load(Ordering::Relaxed)
            })
            .await
        })
    };
    let mut last_report = Instant::now();
    let finished = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let job = km
            .get_index_job(GetIndexJobRequest { job_id: job.id.clone() })
            .await?
            .into_inner()
            .job
            .ok_or_else(|| anyhow::anyhow!("GetIndexJob answered no job"))?;
        let status = IndexJobStatus::try_from(job.status).unwrap_or(IndexJobStatus::Unspecified);
        if swapping_from.is_none()
            && job.users_total > 0
            && job.users_done == 0
            && job.staged as usize >= options.memories / users.max(1)
        {
            swapping_from = Some(started.elapsed().as_secs_f64());
        }
        let over = matches!(status, IndexJobStatus::Succeeded | IndexJobStatus::Failed);
        if over || last_report.elapsed() >= Duration::from_secs(10) {
            say(format!(
                "  {:.0} s: {status:?}, users {}/{}, staged {}, indexed {}; recalls so far {}",
                started.elapsed().as_secs_f64(),
                job.users_done,
                job.users_total,
                job.staged,
                job.indexed,
                asked.load(Ordering::Relaxed),
            ));
            last_report = Instant::now();
        }
        match status {
            IndexJobStatus::Succeeded => break job,
            IndexJobStatus::Failed => anyhow::bail!("the rebuild failed: {}", job.last_error),
            _ if started.elapsed() > Duration::from_secs(3600) => anyhow::bail!("the rebuild took over an hour"),
            _ => {}
        }
    };
    let rebuild_seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let during = recalling.await??;
    drop(server);

    for (label, run) in [("before the rebuild", &before), ("during the rebuild", &during)] {
        say(format!(
            "{label}: {} recalls, {} answered with memories, {} failures (p50 {:.1} ms, p99 {:.1} ms){}{}",
            run.samples.len(),
            run.answered,
            run.failures.len(),
            percentile_ms(&run.latencies(), 0.5),
            percentile_ms(&run.latencies(), 0.99),
            run.by_kind()
                .iter()
                .map(|(kind, count)| format!("; {count} x {kind}"))
                .collect::<String>(),
            if run.failed_at.is_empty() {
                String::new()
            } else {
                format!(
                    "; asked at {} s",
                    run.failed_at
                        .iter()
                        .map(|at| format!("{:.1}", at.as_secs_f64()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
    }
    if let Some(from) = swapping_from {
        say(format!(
            "the first user's memories were all staged by {from:.0} s (its swap followed); the job ended at {rebuild_seconds:.0} s"
        ));
    }
    say(format!(
        "rebuild of {} memories ({} users) in {rebuild_seconds:.1} s: indexed {}, removed {}, attempts {}",
        options.memories, finished.users_total, finished.indexed, finished.removed, finished.attempts
    ));
    say(json!({
        "mode": "rebuild",
        "memories": options.memories,
        "users": users,
        "clients": clients,
        "rebuild_seconds": tenth(rebuild_seconds),
        "indexed": finished.indexed,
        "recalls_during": during.samples.len(),
        "failures_during": during.failures.len(),
        "recall_p50_ms_before": tenth(percentile_ms(&before.latencies(), 0.5)),
        "recall_p99_ms_before": tenth(percentile_ms(&before.latencies(), 0.99)),
        "recall_p50_ms_during": tenth(percentile_ms(&during.latencies(), 0.5)),
        "recall_p99_ms_during": tenth(percentile_ms(&during.latencies(), 0.99)),
        "failures_during_by_kind": during.by_kind(),
        "failures_before": before.failures.len(),
        "failures_during_at_s": during.failed_at.iter().map(|at| tenth(at.as_secs_f64())).collect::<Vec<_>>(),
        "staged_by_s": swapping_from.map(tenth),
        "deadline_ms": options.deadline_ms,
    })
    .to_string());
    Ok(())
}

/// Recalls of a run: every latency, how many came back with memories, what failed.
#[derive(Default)]
struct Recalls {
    samples: Vec<Sample>,
    answered: usize,
    failures: Vec<String>,
    /// When each failed recall was asked, since the run's start.
    failed_at: Vec<Duration>,
}

impl Recalls {
    fn latencies(&self) -> Vec<Duration> {
        self.samples.iter().map(|s| s.latency).collect()
    }

    /// The failures counted by what they were (an answer without memories, or the status).
    fn by_kind(&self) -> BTreeMap<&str, usize> {
        let mut kinds = BTreeMap::new();
        for failure in &self.failures {
            *kinds.entry(failure.as_str()).or_default() += 1;
        }
        kinds
    }
}

/// `clients` recall one after another while `go_on()`: a failure is an error (shed
/// included) or an answer without memories.
async fn recall_at(
    url: &str,
    clients: usize,
    users: usize,
    deadline_ms: u64,
    since: Instant,
    go_on: impl Fn() -> bool + Clone + Send + 'static,
) -> anyhow::Result<Recalls> {
    let mut tasks = Vec::new();
    for client in 0..clients {
        let channel = tonic::transport::Endpoint::from_shared(url.to_string())?
            .tcp_nodelay(true)
            .connect()
            .await?;
        let go_on = go_on.clone();
        tasks.push(tokio::spawn(async move {
            let mut retriever = RetrieverServiceClient::new(channel);
            let mut rng = Rng(0x7eb1d ^ client as u64);
            let mut mine = Recalls::default();
            while go_on() {
                let n = rng.below(1 << 20);
                let user = user_of(rng.below(users));
                let message = RecallRequest {
                    scope: Some(scope(&user, "")),
                    query: corpus::question(n),
                    limit: 10,
                    ..Default::default()
                };
                let asked = Instant::now();
                let failures = mine.failures.len();
                let answer = retriever
                    .recall(request(message, Duration::from_millis(deadline_ms), None))
                    .await;
                let latency = asked.elapsed();
                let outcome = match answer {
                    Ok(answer) if !answer.get_ref().catalog.is_empty() => {
                        mine.answered += 1;
                        Outcome::Answered
                    }
                    Ok(_) => {
                        mine.failures.push("an answer without memories".to_string());
                        Outcome::Error(Code::NotFound, "no memory recalled".into())
                    }
                    Err(status) => {
                        mine.failures.push(format!("{:?}: {}", status.code(), status.message()));
                        Outcome::Error(status.code(), status.message().to_string())
                    }
                };
                if mine.failures.len() > failures {
                    mine.failed_at.push(asked.saturating_duration_since(since));
                }
                mine.samples.push(Sample {
                    op: super::load::Op::Recall,
                    outcome,
                    latency,
                });
                tokio::time::sleep(RECALL_PAUSE).await;
            }
            mine
        }));
    }
    let mut all = Recalls::default();
    for task in tasks {
        let mine = task.await?;
        all.samples.extend(mine.samples);
        all.answered += mine.answered;
        all.failures.extend(mine.failures);
        all.failed_at.extend(mine.failed_at);
    }
    all.failed_at.sort();
    Ok(all)
}
