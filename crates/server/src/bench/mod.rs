//! The benches: `thinkus bench <name>` prints figures as a table for people and, on its last
//! line, one JSON object for scripts.

mod artifacts;
mod controller;
mod corpus;
mod embed;
pub(crate) mod extract;
mod hostile;
mod ingest;
mod load;
mod locomo;
pub mod locomo_data;
mod recall;
mod session;
pub mod stats;
mod summary;
mod tokens;

use std::path::PathBuf;

use clap::Subcommand;

use crate::config::Config;

/// A benchmark to run.
#[derive(Debug, Subcommand)]
pub enum Bench {
    /// Turn-level retrieval on a LoCoMo file: R@1, R@5, R@10 and nDCG@10 per category.
    Locomo {
        /// The LoCoMo JSON file (e.g. ../shared/bench/locomo/locomo-dev.json).
        #[arg(long)]
        data: PathBuf,
        /// Keep the state here instead of a temporary folder.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Only the first N samples.
        #[arg(long)]
        limit: Option<usize>,
        /// Print every miss (question, evidence, top turns).
        #[arg(long)]
        verbose: bool,
        /// Also rank the same ingested turns with other fusion weights, `dense:keyword` pairs
        /// separated by commas (`0:1` is BM25 alone, `1:0` the embedding alone): R@10 per
        /// weights and per conversation, for choosing the weights by cross-validation.
        #[arg(long, value_delimiter = ',')]
        weights: Vec<String>,
    },
    /// Recall latency through gRPC on a synthetic corpus written straight to the store and the
    /// index: by default 10,000 memories of one user, then 100,000 across 100 users.
    Recall {
        /// Measure one corpus of this many memories instead of the two defaults.
        #[arg(long)]
        memories: Option<usize>,
        /// Spread the corpus over this many users.
        #[arg(long)]
        users: Option<usize>,
        /// Queries measured per corpus (after 10 not counted).
        #[arg(long, default_value_t = 200)]
        queries: usize,
    },
    /// The whole service under a mixed load at growing concurrency, on loopback: `thinkus all`
    /// as a child process on a synthetic corpus; per level of clients, requests/s, p50/p99,
    /// errors, shed requests (RESOURCE_EXHAUSTED) and the server's RSS.
    Load {
        /// Levels of concurrent clients.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,64")]
        clients: Vec<usize>,
        /// Seconds counted per level.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// Seconds run at the start of each level and not counted.
        #[arg(long, default_value_t = 2.0)]
        warmup_seconds: f64,
        /// The most requests counted per level.
        #[arg(long, default_value_t = 5000)]
        requests: usize,
        /// Each request's deadline (sent as grpc-timeout), in milliseconds.
        #[arg(long, default_value_t = 2000)]
        deadline_ms: u64,
        /// Users the memories belong to; client i acts for user i modulo this.
        #[arg(long, default_value_t = 32)]
        users: usize,
        /// Memories in the corpus.
        #[arg(long, default_value_t = 10_000)]
        memories: usize,
        /// Shares of PrepareTurn, Recall and CompleteTurn.
        #[arg(long, value_delimiter = ',', default_value = "40,40,20")]
        mix: Vec<u32>,
        /// The longest wait for the queued jobs to run between levels, in seconds.
        #[arg(long, default_value_t = 120.0)]
        drain_seconds: f64,
        /// Keep the state here instead of a temporary folder.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Two tenants (API keys): at each level of --clients one tenant floods with that many
        /// clients while the other measures with --measure-clients; the measuring tenant's p99
        /// alone and during the flood, the flood's shed requests.
        #[arg(long)]
        flood: bool,
        /// The measuring tenant's clients with --flood.
        #[arg(long, default_value_t = 1)]
        measure_clients: usize,
        /// The bad-input campaign instead of the levels: malformed protobuf, invalid UTF-8, huge
        /// messages, deep JSON and bad JSONPath from the largest --clients for --seconds; the
        /// server's RSS idle, during and after, and every answer's status.
        #[arg(long)]
        bad_input: bool,
        /// Only these kinds of bad input (comma-separated, as the campaign names them:
        /// "malformed protobuf", "invalid UTF-8", "huge message", "deep JSON", "bad JSONPath").
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        /// Recall during a rebuild of the whole index instead of the levels: the largest
        /// --clients recall until the rebuild job is done; every recall must be answered.
        #[arg(long)]
        rebuild: bool,
    },
    /// The gateway end to end on a LoCoMo file: context tokens per question vs the full history,
    /// and how often the evidence is in the context.
    Tokens {
        /// The LoCoMo JSON file.
        #[arg(long)]
        data: PathBuf,
        /// Keep the state here instead of a temporary folder.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Only the first N samples.
        #[arg(long)]
        limit: Option<usize>,
        /// Print every question whose evidence is not all in the context, with the decision.
        #[arg(long)]
        verbose: bool,
    },
    /// Scripted employee sessions through the gateway (datasets/sessions/): several roles and
    /// sessions of one user over days, values changed, tool outputs; at each check, whether the
    /// needed facts are in the PrepareTurn context and whether a replaced value shows as current.
    Session {
        /// The scenario file (e.g. datasets/sessions/sessions-dev.json).
        #[arg(long)]
        data: PathBuf,
        /// Keep the state here instead of a temporary folder.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Only the scenario with this id.
        #[arg(long)]
        scenario: Option<String>,
        /// Print every check that failed, with its context and the controller's decision.
        #[arg(long)]
        verbose: bool,
    },
    /// The knowledge manager's extraction rules and admission on a labelled JSONL file
    /// (datasets/extract.jsonl): precision, recall and junk ratio per language.
    Extract {
        #[arg(long)]
        data: PathBuf,
        /// Print every line the engine got wrong.
        #[arg(long)]
        verbose: bool,
        /// The rules alone, without the learned clause head.
        #[arg(long)]
        rules_only: bool,
    },
    /// End-to-end write throughput of the knowledge manager (embedding and indexing included)
    /// on the embedded defaults in a temporary folder.
    Ingest {
        /// The number of memories to write.
        #[arg(long, default_value_t = 1000)]
        n: usize,
        /// Keep the state here instead of a temporary folder.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// The summary rules on a LoCoMo file: coverage of the annotated events, summary tokens as a
    /// share of the session's, time per session.
    Summary {
        /// The LoCoMo JSON file (e.g. ../shared/bench/locomo/locomo-dev.json).
        #[arg(long)]
        data: PathBuf,
        /// Only the first N samples.
        #[arg(long)]
        limit: Option<usize>,
        /// Print every summary that missed an event.
        #[arg(long)]
        verbose: bool,
    },
    /// The artifact service on every file under a folder: compact tokens vs full tokens, and
    /// partial-read latency on a generated 10 MB artifact (local blob folder).
    Artifacts {
        /// The folder whose files are stored (sources, cargo JSON output, logs).
        #[arg(long)]
        data: PathBuf,
        /// Keep the state here instead of a temporary folder.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// The local embedding engine's layouts on this machine: one query alone, queries from 1 to
    /// 16 concurrent callers, passages from 4 writers; one worker using every core per call
    /// against one single-threaded worker per core.
    Embed {
        /// Seconds per measure.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// The most queries gathered into one call (1: no batching).
        #[arg(long, default_value_t = 16)]
        max_query_batch: usize,
        /// Layouts to measure, WORKERSxTHREADS (repeatable); default 1xCORES and CORESx1.
        #[arg(long)]
        layout: Vec<String>,
    },
    /// The memory controller's rules on a labelled JSONL file (datasets/controller.jsonl).
    Controller {
        #[arg(long)]
        data: PathBuf,
        /// The reference time for relative dates in the labels (RFC 3339).
        #[arg(long)]
        now: Option<String>,
        /// Print every disagreement on need and mode.
        #[arg(long)]
        verbose: bool,
        /// The rules alone, without the learned heads.
        #[arg(long)]
        rules_only: bool,
    },
}

/// The reference time of the labelled sets (their relative dates are resolved against it).
pub(crate) fn dataset_now(value: Option<&str>) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    let text = value.unwrap_or("2026-11-22T12:00:00Z");
    Ok(chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|err| anyhow::anyhow!("--now {text:?}: {err}"))?
        .with_timezone(&chrono::Utc))
}

/// Runs a bench.
pub async fn run(bench: Bench, config: Config) -> anyhow::Result<()> {
    match bench {
        Bench::Locomo {
            data,
            data_dir,
            limit,
            verbose,
            weights,
        } => locomo::run(config, &data, data_dir, limit, verbose, &weights).await,
        Bench::Recall {
            memories,
            users,
            queries,
        } => recall::run(config, memories, users, queries).await,
        Bench::Tokens {
            data,
            data_dir,
            limit,
            verbose,
        } => tokens::run(config, &data, data_dir, limit, verbose).await,
        Bench::Session {
            data,
            data_dir,
            scenario,
            verbose,
        } => session::run(config, &data, data_dir, scenario, verbose).await,
        Bench::Load {
            clients,
            seconds,
            warmup_seconds,
            requests,
            deadline_ms,
            users,
            memories,
            mix,
            drain_seconds,
            data_dir,
            flood,
            measure_clients,
            bad_input,
            kinds,
            rebuild,
        } => {
            let [prepare, recall, complete] = mix[..] else {
                anyhow::bail!("--mix: three shares, PrepareTurn,Recall,CompleteTurn (e.g. 40,40,20)");
            };
            let options = load::LoadOptions {
                clients,
                seconds,
                warmup_seconds,
                requests,
                deadline_ms,
                users,
                memories,
                mix: [prepare, recall, complete],
                drain_seconds,
                data_dir,
                flood,
                measure_clients,
                bad_input,
                bad_kinds: kinds,
                rebuild,
            };
            options.check()?;
            if options.flood {
                hostile::flood(config, options).await
            } else if options.bad_input {
                hostile::bad_input(config, options).await
            } else if options.rebuild {
                hostile::rebuild(config, options).await
            } else {
                load::run(config, options).await
            }
        }
        Bench::Extract {
            data,
            verbose,
            rules_only,
        } => extract::run(config, &data, verbose, rules_only).await,
        Bench::Ingest { n, data_dir } => ingest::run(config, n, data_dir).await,
        Bench::Summary { data, limit, verbose } => summary::run(config, &data, limit, verbose).await,
        Bench::Artifacts { data, data_dir } => artifacts::run(config, &data, data_dir).await,
        Bench::Embed {
            seconds,
            max_query_batch,
            layout,
        } => embed::run(config, seconds, max_query_batch, layout).await,
        Bench::Controller {
            data,
            now,
            verbose,
            rules_only,
        } => controller::run(config, &data, dataset_now(now.as_deref())?, verbose, rules_only).await,
    }
}

/// A line of bench output.
#[allow(clippy::print_stdout)]
pub(crate) fn say(line: impl AsRef<str>) {
    println!("{}", line.as_ref());
}

/// A state folder: the given one, or a temporary one removed at the end.
pub(crate) fn state_dir(given: Option<PathBuf>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match given {
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            Ok((dir, None))
        }
        None => {
            let temp = tempfile::Builder::new().prefix("thinkus-bench-").tempdir()?;
            Ok((temp.path().to_path_buf(), Some(temp)))
        }
    }
}
