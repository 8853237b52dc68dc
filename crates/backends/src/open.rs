//! Opening the configured backends from their URIs.

use std::path::PathBuf;
use std::sync::Arc;

use thinkus_common::config::{EmbedderConfig, LlmConfig, ResolvedStorage};
use thinkus_common::tokens::TokenCounter;

use crate::blob::BlobStore;
use crate::embed::{EmbedError, Embedder};
use crate::llm::{LanguageModel, RuleEngine};
use crate::sql::SqlStore;
use crate::vector::VectorIndex;

/// A backend could not be opened. The message names the config key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct OpenError {
    pub key: &'static str,
    pub message: String,
}

impl OpenError {
    fn new(key: &'static str, message: impl ToString) -> Self {
        Self {
            key,
            message: message.to_string(),
        }
    }
}

/// What the backends are built from.
#[derive(Debug, Clone)]
pub struct BackendsConfig {
    pub storage: ResolvedStorage,
    pub embedder: EmbedderConfig,
    pub models_dir: PathBuf,
    pub llm: LlmConfig,
    pub tokenizer: String,
}

/// Which backends a process needs (a process running only the memory controller needs no
/// database; only one process may open an embedded vector index).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    pub store: bool,
    pub vectors: bool,
    pub blobs: bool,
    pub embedder: bool,
}

impl Needs {
    pub const ALL: Needs = Needs {
        store: true,
        vectors: true,
        blobs: true,
        embedder: true,
    };

    pub fn union(self, other: Needs) -> Needs {
        Needs {
            store: self.store || other.store,
            vectors: self.vectors || other.vectors,
            blobs: self.blobs || other.blobs,
            embedder: self.embedder || other.embedder,
        }
    }
}

/// The opened backends of a process.
#[derive(Debug, Clone)]
pub struct Backends {
    pub store: Option<Arc<SqlStore>>,
    pub vectors: Option<Arc<dyn VectorIndex>>,
    pub blobs: Option<Arc<dyn BlobStore>>,
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The configured remote language model, if any.
    pub llm: Option<Arc<dyn LanguageModel>>,
    /// The built-in rule engine; services register their rules in it.
    pub rules: RuleEngine,
    pub tokens: TokenCounter,
}

impl Backends {
    /// Opens what `needs` asks for; the language model and tokenizer always.
    pub async fn open(config: &BackendsConfig, needs: Needs) -> Result<Self, OpenError> {
        let tokens = TokenCounter::for_name(&config.tokenizer).ok_or_else(|| {
            OpenError::new(
                "tokenizer.encoding",
                format!(
                    "unknown encoding {:?} (use cl100k_base, o200k_base, p50k_base or r50k_base)",
                    config.tokenizer
                ),
            )
        })?;
        let llm = crate::llm::from_config(&config.llm).map_err(|err| OpenError::new("llm", err))?;
        let embedder = if needs.embedder {
            Some(crate::traced::embedder(open_embedder(
                &config.embedder,
                &config.models_dir,
            )?))
        } else {
            None
        };
        let store = if needs.store {
            Some(Arc::new(
                SqlStore::connect(&config.storage.database, config.storage.database_max_connections)
                    .await
                    .map_err(|err| OpenError::new("storage.database", err))?,
            ))
        } else {
            None
        };
        let vectors = if needs.vectors {
            let index = open_vectors(&config.storage.vectors).await?;
            if let Some(embedder) = &embedder {
                index
                    .ensure_ready(embedder.dim())
                    .await
                    .map_err(|err| OpenError::new("storage.vectors", err))?;
            }
            Some(crate::traced::vectors(index))
        } else {
            None
        };
        let blobs = if needs.blobs {
            Some(crate::traced::blobs(open_blobs(&config.storage.blobs).await?))
        } else {
            None
        };
        Ok(Self {
            store,
            vectors,
            blobs,
            embedder,
            llm,
            rules: RuleEngine::new(),
            tokens,
        })
    }

    /// Checks that every opened backend answers (health checks).
    pub async fn check(&self) -> Result<(), OpenError> {
        if let Some(store) = &self.store {
            store
                .ping()
                .await
                .map_err(|err| OpenError::new("storage.database", err))?;
        }
        if let Some(vectors) = &self.vectors {
            vectors
                .count(None)
                .await
                .map_err(|err| OpenError::new("storage.vectors", err))?;
        }
        if let Some(blobs) = &self.blobs {
            blobs
                .check()
                .await
                .map_err(|err| OpenError::new("storage.blobs", err))?;
        }
        Ok(())
    }
}

/// Opens the embedder named by `embedder.uri`, behind the cache of recent query embeddings
/// (`embedder.query_cache_entries`).
pub fn open_embedder(config: &EmbedderConfig, models_dir: &std::path::Path) -> Result<Arc<dyn Embedder>, OpenError> {
    let embedder = open_model(config, models_dir)?;
    Ok(match config.query_cache_entries {
        0 => embedder,
        entries => Arc::new(crate::embed::cache::CachedEmbedder::new(embedder, entries)),
    })
}

/// The cores this process may use (its CPU affinity and cgroup quota included).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How the local engine is laid out: `embedder.workers` (0: one per core) threads, each calling
/// the engine with `embedder.threads_per_worker` (0: the cores divided among the workers).
#[cfg(feature = "local-embedder")]
pub fn local_options(config: &EmbedderConfig, cores: usize) -> crate::embed::local::LocalOptions {
    let cores = cores.max(1);
    let workers = if config.workers == 0 { cores } else { config.workers };
    let threads_per_worker = if config.threads_per_worker == 0 {
        (cores / workers).max(1)
    } else {
        config.threads_per_worker
    };
    crate::embed::local::LocalOptions {
        pool: crate::embed::pool::PoolOptions {
            workers,
            max_query_batch: config.max_query_batch.max(1),
            passages_per_call: config.passages_per_call.max(1),
            passage_workers: config.passage_workers.clamp(1, workers),
        },
        threads_per_worker,
    }
}

fn open_model(config: &EmbedderConfig, models_dir: &std::path::Path) -> Result<Arc<dyn Embedder>, OpenError> {
    let uri = config.uri.as_str();
    let map = |err: EmbedError| OpenError::new("embedder.uri", err);
    if uri.starts_with("local://") {
        #[cfg(feature = "local-embedder")]
        {
            let path = crate::embed::local::LocalEmbedder::resolve_path(uri, models_dir);
            let options = local_options(config, available_cores());
            let local = crate::embed::local::LocalEmbedder::load_with(&path, options).map_err(map)?;
            tracing::info!(
                workers = options.pool.workers,
                threads_per_worker = options.threads_per_worker,
                "local embedder started"
            );
            return Ok(Arc::new(local));
        }
        #[cfg(not(feature = "local-embedder"))]
        {
            let _ = models_dir;
            return Err(OpenError::new(
                "embedder.uri",
                "this build has no local embedder (rebuild with the local-embedder feature after `make models`)",
            ));
        }
    }
    if let Some(dim) = uri.strip_prefix("hash://") {
        let dim = if dim.is_empty() {
            384
        } else {
            dim.parse::<usize>()
                .map_err(|_| OpenError::new("embedder.uri", format!("hash://{dim}: the dimension is not a number")))?
        };
        return Ok(Arc::new(crate::embed::hash::HashEmbedder::new(dim)));
    }
    if uri.starts_with("http://") || uri.starts_with("https://") {
        return Ok(Arc::new(
            crate::embed::http::HttpEmbedder::from_config(config).map_err(map)?,
        ));
    }
    Err(OpenError::new(
        "embedder.uri",
        format!("unsupported URI {uri:?} (use local://, http(s)://…/v1 or hash://384)"),
    ))
}

/// Opens the vector index named by `storage.vectors`.
pub async fn open_vectors(uri: &str) -> Result<Arc<dyn VectorIndex>, OpenError> {
    let map = |err: crate::vector::VectorError| OpenError::new("storage.vectors", err);
    if let Some(rest) = uri.strip_prefix("edge://") {
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (rest, None),
        };
        let flush = crate::vector::edge::Flush::from_query(query).map_err(map)?;
        return Ok(Arc::new(
            crate::vector::edge::EdgeIndex::open_with(std::path::Path::new(path), flush).map_err(map)?,
        ));
    }
    if uri.starts_with("qdrant://") || uri.starts_with("qdrants://") {
        return Ok(Arc::new(crate::vector::qdrant::QdrantIndex::connect(uri).map_err(map)?));
    }
    Err(OpenError::new(
        "storage.vectors",
        format!("unsupported URI {uri:?} (use edge://PATH or qdrant://HOST:6334)"),
    ))
}

/// Opens the blob store named by `storage.blobs`.
pub async fn open_blobs(uri: &str) -> Result<Arc<dyn BlobStore>, OpenError> {
    let map = |err: crate::blob::BlobError| OpenError::new("storage.blobs", err);
    if let Some(path) = uri.strip_prefix("file://") {
        return Ok(Arc::new(
            crate::blob::local::LocalBlobStore::open(std::path::Path::new(path))
                .await
                .map_err(map)?,
        ));
    }
    if uri.starts_with("s3://") {
        return Ok(Arc::new(crate::blob::s3::S3BlobStore::connect(uri).await.map_err(map)?));
    }
    Err(OpenError::new(
        "storage.blobs",
        format!("unsupported URI {uri:?} (use file://path or s3://bucket/prefix?endpoint=…)"),
    ))
}
