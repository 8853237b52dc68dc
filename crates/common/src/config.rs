//! Layered configuration: built-in defaults, then a TOML file, then the environment
//! (`THINKUS__SECTION__KEY`), then command-line flags (`--set section.key=value`).
//!
//! This module holds the sections every service shares; each service crate owns its own
//! section and the binary composes them into one root config, so the all-in-one process reads
//! one file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The environment prefix: `THINKUS__STORAGE__DATABASE=postgres://…` sets `storage.database`.
pub const ENV_PREFIX: &str = "THINKUS__";

/// A configuration error that names the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    Parse(String),
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    #[error("--set {0}: expected key=value")]
    BadFlag(String),
}

impl ConfigError {
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Loads `T` from its defaults, the optional file, the environment and `--set` overrides, in
/// that order of precedence (later wins).
pub fn load_layered<T>(file: Option<&Path>, overrides: &[String]) -> Result<T, ConfigError>
where
    T: Serialize + DeserializeOwned + Default,
{
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    if let Some(path) = file {
        if !path.is_file() {
            return Err(ConfigError::File {
                path: path.display().to_string(),
                message: "no such file".into(),
            });
        }
        figment = figment.merge(Toml::file(path));
    }
    figment = figment.merge(Env::prefixed(ENV_PREFIX).split("__"));
    for item in overrides {
        let (key, value) = item.split_once('=').ok_or_else(|| ConfigError::BadFlag(item.clone()))?;
        let value = parse_flag_value(value.trim());
        figment = figment.merge(Serialized::global(key.trim(), value));
    }
    figment.extract::<T>().map_err(|err| {
        let key = err.path.join(".");
        let message = err.to_string();
        // A file that does not parse is shown with its offending line, and a value of the
        // wrong type is quoted: either may be a key or a password.
        if key.is_empty() {
            ConfigError::Parse(crate::redact::parser_message(&message))
        } else if crate::redact::is_secret_key(&key) {
            ConfigError::Invalid {
                message: crate::redact::parser_message(&message),
                key,
            }
        } else {
            ConfigError::Invalid { key, message }
        }
    })
}

/// Values given on the command line are TOML when they parse as such (numbers, booleans,
/// arrays), plain strings otherwise.
fn parse_flag_value(raw: &str) -> toml::Value {
    let probe = format!("value = {raw}");
    match toml::from_str::<toml::Table>(&probe) {
        Ok(mut table) => table
            .remove("value")
            .unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

/// Where a process listens and how it serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The gRPC address. In `all` mode every service shares it.
    pub grpc_addr: SocketAddr,
    /// The Prometheus metrics address (`/metrics`); empty disables it.
    pub metrics_addr: Option<SocketAddr>,
    /// Where embedded backends keep their state (SQLite, qdrant-edge, local artifacts).
    pub data_dir: PathBuf,
    /// Where `make models` put the local embedding model.
    pub models_dir: PathBuf,
    /// How long in-flight requests may finish after SIGTERM.
    pub shutdown_grace_secs: u64,
    /// The deadline of a request that carries none (grpc-timeout wins when present).
    pub request_timeout_ms: u64,
    /// Requests served at once by the process (health and reflection aside); more wait for a
    /// seat, in turn per tenant, then are shed with RESOURCE_EXHAUSTED and Retry-After.
    pub concurrency_limit: usize,
    /// The fewest effective seats: while several tenants are active, each may hold a share of
    /// the seats the machine serves side by side, learned from how much longer requests take
    /// the more of them run at once (CPU-bound work), between this floor and
    /// `concurrency_limit` (see `thinkus_common::limits`). 0 means the cores; a value at or
    /// over `concurrency_limit` shares the configured seats as they are.
    pub concurrency_floor: usize,
    /// Requests of one tenant served at once; a key's `max_concurrency` overrides it.
    pub tenant_concurrency_limit: usize,
    /// Requests of one tenant waiting for a seat; more are shed at once.
    pub tenant_queue_limit: usize,
    /// The longest a request waits for a seat (never past its own deadline), in milliseconds.
    pub queue_timeout_ms: u64,
    /// Requests per second of one tenant when its key sets none (0 turns rates off).
    pub tenant_rate_per_second: f64,
    /// Burst of the per-tenant rate, in requests.
    pub tenant_rate_burst: f64,
    /// The largest gRPC message accepted, in bytes.
    pub max_message_bytes: usize,
    /// Bytes of large request messages (over 1 MiB each) read and decoded at once: one waits
    /// for its bytes (a message larger than this waits for all of them) no longer than its
    /// deadline, then is shed with RESOURCE_EXHAUSTED. Bounds the memory near-limit messages
    /// take, however many come at once.
    pub message_bytes_in_flight: usize,
    /// TLS on the gRPC listener, the REST facade and the memory page: a PEM certificate chain
    /// (with `tls_key_file`); unset, they speak plain text (behind a mesh that encrypts).
    pub tls_cert_file: Option<PathBuf>,
    /// The PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// A PEM CA the clients of the other services trust at `https://` endpoints, beside the
    /// system's roots (for a private CA).
    pub tls_ca_file: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            grpc_addr: "127.0.0.1:50051".parse().expect("valid address"),
            metrics_addr: Some("127.0.0.1:9464".parse().expect("valid address")),
            data_dir: PathBuf::from("data"),
            models_dir: PathBuf::from("models"),
            shutdown_grace_secs: 20,
            request_timeout_ms: 30_000,
            concurrency_limit: 64,
            concurrency_floor: 0,
            tenant_concurrency_limit: 16,
            tenant_queue_limit: 64,
            queue_timeout_ms: 1_000,
            tenant_rate_per_second: 50.0,
            tenant_rate_burst: 100.0,
            max_message_bytes: 16 * 1024 * 1024,
            message_bytes_in_flight: 16 * 1024 * 1024,
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_file: None,
        }
    }
}

/// How callers authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Development: requests from loopback addresses need no key; others are refused.
    #[default]
    Dev,
    /// Every request needs `authorization: Bearer <key>`; keys map to tenants.
    ApiKey,
}

/// One API key and what it may do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The tenant the key belongs to: its requests read and write that tenant's data only.
    pub tenant: String,
    /// The user ids of its tenant the key may act for; `["*"]` means any (admin keys).
    pub users: Vec<String>,
    /// A service key (the gateway's and summary's own key): it may act in any tenant, named
    /// by a request's `scope.tenant_id` (its own tenant when empty). Implies `users = ["*"]`.
    pub any_tenant: bool,
    /// Hex SHA-256 of the key: configs never hold keys in clear.
    pub key_sha256: String,
    /// The key itself, only in a keys file mounted from a secret; hashed at load.
    pub key: String,
    /// Requests per second allowed for this tenant, per process; 0 means
    /// `server.tenant_rate_per_second`.
    pub rate_per_second: f64,
    /// Requests of this tenant served at once, per process; 0 means
    /// `server.tenant_concurrency_limit`.
    pub max_concurrency: usize,
}

/// Authentication settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// Keys given inline (hashed).
    pub keys: Vec<ApiKeyConfig>,
    /// A TOML file with more `[[keys]]`, typically a mounted secret; re-read on SIGHUP.
    pub keys_file: Option<PathBuf>,
    /// The key this process presents to the other services and that clients default to
    /// (also read from the THINKUS_API_KEY environment variable).
    pub client_key: Option<String>,
}

/// Logs and traces.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// "text" for people, "json" for log pipelines.
    pub log_format: String,
    /// The default filter when RUST_LOG is unset.
    pub log_level: String,
    /// The OTLP/gRPC endpoint of a collector (`http://otel-collector:4317`); traces are
    /// exported only when set. OTEL_EXPORTER_OTLP_ENDPOINT is honoured too.
    pub otlp_endpoint: Option<String>,
    /// Share of traces sampled, 0 to 1 (parent decisions are respected).
    pub sample_ratio: f64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: "text".into(),
            log_level: "info".into(),
            otlp_endpoint: None,
            sample_ratio: 1.0,
        }
    }
}

/// The backends, as URIs. Unset values derive from `server.data_dir` (embedded defaults).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// `sqlite://path/to.db` or `postgres://user:pass@host:5432/db`.
    pub database: Option<String>,
    /// Connections in the pool.
    pub database_max_connections: Option<u32>,
    /// `edge://path/to/dir` (qdrant-edge, in-process) or `qdrant://host:6334` /
    /// `qdrants://host:6334` (a Qdrant server over gRPC; `?api_key_env=NAME&prefix=thinkus`).
    pub vectors: Option<String>,
    /// `file://path/to/dir` or `s3://bucket/prefix?endpoint=http://host:9000&region=us-east-1`.
    pub blobs: Option<String>,
    /// How long records kept only for operations stay in the database.
    pub retention: RetentionConfig,
}

/// Retention of the records the database keeps only for operations (docs/runbook.md,
/// "Retention"); a sweep of every node that opens the database purges what is older. 0 keeps
/// them for good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Days a session message is kept once the session's summary covers it (0: kept; a
    /// summary regenerated from message 0 then sees only the messages kept).
    pub session_messages_days: u32,
    /// Days the input (payload) of a finished job is kept; the job's status and result stay.
    pub job_payload_days: u32,
    /// Days a request id is remembered: a retry after that is a new request.
    pub idempotency_days: u32,
    /// Seconds between sweeps (0: no sweep).
    pub sweep_interval_secs: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            session_messages_days: 0,
            job_payload_days: 7,
            idempotency_days: 7,
            sweep_interval_secs: 3600,
        }
    }
}

impl StorageConfig {
    /// The URIs after applying the embedded defaults under `data_dir`.
    pub fn resolved(&self, data_dir: &Path) -> ResolvedStorage {
        let under = |name: &str| data_dir.join(name).display().to_string();
        ResolvedStorage {
            database: self
                .database
                .clone()
                .unwrap_or_else(|| format!("sqlite://{}", under("thinkus.db"))),
            database_max_connections: self.database_max_connections.unwrap_or(10),
            vectors: self
                .vectors
                .clone()
                .unwrap_or_else(|| format!("edge://{}", under("vectors"))),
            blobs: self
                .blobs
                .clone()
                .unwrap_or_else(|| format!("file://{}", under("artifacts"))),
        }
    }
}

/// Storage URIs with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedStorage {
    pub database: String,
    pub database_max_connections: u32,
    pub vectors: String,
    pub blobs: String,
}

/// The embedding model.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderConfig {
    /// `local://` (multilingual-e5-small from `server.models_dir`, or `local:///path/e5.bin`),
    /// `http://host:port/v1` or `https://…/v1` (an OpenAI-compatible embeddings endpoint),
    /// or `hash://384` (hashed character n-grams: fast, for tests only).
    pub uri: String,
    /// The model name sent to an HTTP endpoint.
    pub model: String,
    /// The environment variable holding the HTTP endpoint's API key.
    pub api_key_env: Option<String>,
    /// The embedding width; required for HTTP endpoints (checked against the first answer).
    pub dim: Option<usize>,
    /// Texts per HTTP request.
    pub batch_size: usize,
    /// HTTP requests in flight at once per process (passages may hold three quarters of them).
    pub max_concurrent_requests: usize,
    /// HTTP timeout.
    pub timeout_ms: u64,
    /// `input_type` sent with queries and passages to endpoints that distinguish them (e5,
    /// Voyage, Cohere); empty sends none.
    pub query_input_type: String,
    pub passage_input_type: String,
    /// Local engine: worker threads, each making one engine call at a time; 0 means one per
    /// core (the cores this process may use).
    pub workers: usize,
    /// Local engine: threads each engine call uses; 0 means the cores divided among the
    /// workers (1 with one worker per core).
    pub threads_per_worker: usize,
    /// Local engine: the most queries embedded together in one call (concurrent queries are
    /// gathered while the workers are busy).
    pub max_query_batch: usize,
    /// Local engine: the most passages embedded in one call; a query waits at most for the
    /// call in progress, so smaller calls let queries in sooner.
    pub passages_per_call: usize,
    /// Local engine: the most workers embedding passages at once (the others stay free for
    /// live queries); with 1, concurrent writes are embedded and answered in the order they
    /// were queued.
    pub passage_workers: usize,
    /// Recent query embeddings kept in memory (a retried or repeated message is not embedded
    /// again); 0 turns the cache off.
    pub query_cache_entries: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        Self {
            uri: "local://".into(),
            model: "multilingual-e5-small".into(),
            api_key_env: None,
            dim: None,
            batch_size: 64,
            max_concurrent_requests: 8,
            timeout_ms: 30_000,
            query_input_type: "query".into(),
            passage_input_type: "passage".into(),
            workers: 0,
            threads_per_worker: 0,
            max_query_batch: 16,
            passages_per_call: 8,
            passage_workers: 1,
            query_cache_entries: 1024,
        }
    }
}

/// Which language model answers the tasks that need one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmProvider {
    /// The built-in rule engine (Chinese and English), no network.
    #[default]
    Rules,
    /// An OpenAI-compatible chat completions endpoint.
    Openai,
    /// Anthropic's Messages API.
    Anthropic,
}

/// The language model.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: LlmProvider,
    /// The API base URL (`https://api.openai.com/v1`, `https://api.anthropic.com`).
    pub base_url: String,
    /// The model for every task unless a task overrides it.
    pub model: String,
    /// A cheaper model for the memory controller's decisions; empty uses `model`.
    pub fast_model: String,
    /// The environment variable holding the API key.
    pub api_key_env: String,
    /// Request timeout.
    pub timeout_ms: u64,
    /// Retries on 429 and 5xx answers, with exponential backoff.
    pub max_retries: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: LlmProvider::Rules,
            base_url: String::new(),
            model: String::new(),
            fast_model: String::new(),
            api_key_env: String::new(),
            timeout_ms: 30_000,
            max_retries: 2,
        }
    }
}

/// How tokens are counted for budgets.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokenizerConfig {
    /// `cl100k_base` (default), `o200k_base`, `p50k_base` or `r50k_base`.
    pub encoding: String,
}

impl Default for TokenizerConfig {
    fn default() -> Self {
        Self {
            encoding: "cl100k_base".into(),
        }
    }
}

/// Where the other services are, for processes that run one service. Empty means "in this
/// process" (the `all` mode).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointsConfig {
    pub memory_controller: Option<String>,
    pub retriever: Option<String>,
    pub knowledge_manager: Option<String>,
    pub artifact: Option<String>,
    pub summary: Option<String>,
    /// Connect timeout for the channels.
    pub connect_timeout_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Root {
        auth: AuthConfig,
        server: ServerConfig,
        storage: StorageConfig,
        telemetry: TelemetryConfig,
    }

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[server]\ngrpc_addr = \"0.0.0.0:7000\"\nconcurrency_limit = 8\n[telemetry]\nlog_level = \"debug\"\n",
        )
        .unwrap();
        let root: Root = load_layered(
            Some(&file),
            &[
                "server.concurrency_limit=16".into(),
                "storage.database=postgres://db/x".into(),
            ],
        )
        .unwrap();
        assert_eq!(root.server.grpc_addr.to_string(), "0.0.0.0:7000");
        assert_eq!(root.server.concurrency_limit, 16, "flags win over the file");
        assert_eq!(root.telemetry.log_level, "debug");
        assert_eq!(root.storage.database.as_deref(), Some("postgres://db/x"));
        assert_eq!(root.server.shutdown_grace_secs, 20, "defaults fill the rest");
    }

    #[test]
    fn errors_name_the_key() {
        let err = load_layered::<Root>(None, &["server.concurrency_limit=lots".into()]).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("server.concurrency_limit"), "{text}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[server]\ngrpc_adress = \"0.0.0.0:7000\"\n").unwrap();
        let err = load_layered::<Root>(Some(&file), &[]).unwrap_err();
        assert!(err.to_string().contains("grpc_adress"), "{err}");
    }

    #[test]
    fn a_config_file_that_does_not_parse_is_not_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[auth]\nclient_key = \"tk_0123456789abcdef\n").unwrap();
        let err = load_layered::<Root>(Some(&file), &[]).unwrap_err().to_string();
        assert!(!err.contains("tk_0123456789abcdef"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn storage_defaults_live_under_the_data_dir() {
        let resolved = StorageConfig::default().resolved(Path::new("/var/lib/thinkus"));
        assert_eq!(resolved.database, "sqlite:///var/lib/thinkus/thinkus.db");
        assert_eq!(resolved.vectors, "edge:///var/lib/thinkus/vectors");
        assert_eq!(resolved.blobs, "file:///var/lib/thinkus/artifacts");
    }
}
