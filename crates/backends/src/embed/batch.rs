//! Gathers the passage embeddings of concurrent callers into one call of the inner embedder.
//!
//! The local engine embeds a batch for much less than the same texts one by one (its threads
//! share each weight read across the batch), and two single-text calls at once only fight over
//! the cores. Every `embed_passages` call joins a queue; one worker takes what is queued (after
//! waiting at most `max_wait` for company while the batch is small), embeds it with one call and
//! hands each caller its vectors. While the engine is busy the queue fills by itself, so under
//! load batches form without waiting and alone a caller waits at most `max_wait`. Queries are
//! latency-bound and pass straight through.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use super::{EmbedError, Embedder};

type Reply = oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>;

struct Job {
    texts: Vec<String>,
    reply: Reply,
}

/// An embedder that batches concurrent `embed_passages` calls.
pub struct BatchingEmbedder {
    inner: Arc<dyn Embedder>,
    max_batch: usize,
    max_wait: Duration,
    /// Started by the first call, inside the caller's runtime.
    queue: OnceLock<mpsc::UnboundedSender<Job>>,
}

impl fmt::Debug for BatchingEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchingEmbedder")
            .field("inner", &self.inner)
            .field("max_batch", &self.max_batch)
            .field("max_wait", &self.max_wait)
            .finish()
    }
}

impl BatchingEmbedder {
    /// Batches of at most `max_batch` texts (a larger single call still goes whole), waiting at
    /// most `max_wait` for more callers.
    pub fn new(inner: Arc<dyn Embedder>, max_batch: usize, max_wait: Duration) -> Self {
        Self {
            inner,
            max_batch: max_batch.max(1),
            max_wait,
            queue: OnceLock::new(),
        }
    }

    fn queue(&self) -> &mpsc::UnboundedSender<Job> {
        self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            // The worker ends when the embedder (the only sender) is dropped.
            drop(tokio::spawn(worker(
                self.inner.clone(),
                receiver,
                self.max_batch,
                self.max_wait,
            )));
            sender
        })
    }
}

async fn worker(
    inner: Arc<dyn Embedder>,
    mut receiver: mpsc::UnboundedReceiver<Job>,
    max_batch: usize,
    max_wait: Duration,
) {
    while let Some(first) = receiver.recv().await {
        let mut count = first.texts.len();
        let mut jobs = vec![first];
        // What is already queued joins at once.
        while count < max_batch {
            match receiver.try_recv() {
                Ok(job) => {
                    count += job.texts.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        // A small batch waits a little for company.
        let deadline = tokio::time::Instant::now() + max_wait;
        while count < max_batch {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(job)) => {
                    count += job.texts.len();
                    jobs.push(job);
                }
                _ => break,
            }
        }
        let texts: Vec<String> = jobs.iter().flat_map(|job| job.texts.iter().cloned()).collect();
        let result = inner.embed_passages(&texts).await;
        match result {
            Ok(vectors) if vectors.len() == texts.len() => {
                let mut vectors = vectors.into_iter();
                for job in jobs {
                    let mine: Vec<Vec<f32>> = vectors.by_ref().take(job.texts.len()).collect();
                    // A caller that gave up dropped its receiver; nothing to tell it.
                    let _ = job.reply.send(Ok(mine));
                }
            }
            Ok(vectors) => {
                let message = format!("{} vectors for {} texts", vectors.len(), texts.len());
                for job in jobs {
                    let _ = job.reply.send(Err(EmbedError::BadResponse(message.clone())));
                }
            }
            Err(err) => {
                for job in jobs {
                    let _ = job.reply.send(Err(copy_error(&err)));
                }
            }
        }
    }
}

/// The same error for every caller of a failed batch.
fn copy_error(err: &EmbedError) -> EmbedError {
    match err {
        EmbedError::Config(m) => EmbedError::Config(m.clone()),
        EmbedError::Unavailable(m) => EmbedError::Unavailable(m.clone()),
        EmbedError::Timeout => EmbedError::Timeout,
        EmbedError::BadResponse(m) => EmbedError::BadResponse(m.clone()),
        EmbedError::Backend(m) => EmbedError::Backend(m.clone()),
    }
}

#[async_trait]
impl Embedder for BatchingEmbedder {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.inner.embed_query(text).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        self.queue()
            .send(Job {
                texts: texts.to_vec(),
                reply,
            })
            .map_err(|_| EmbedError::Unavailable("the embedding batcher stopped".into()))?;
        answer
            .await
            .map_err(|_| EmbedError::Unavailable("the embedding batcher stopped".into()))?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::embed::hash::HashEmbedder;

    /// Counts the calls that reach the inner embedder.
    #[derive(Debug)]
    struct Counting {
        inner: HashEmbedder,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl Embedder for Counting {
        fn name(&self) -> String {
            self.inner.name()
        }
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
            self.inner.embed_query(text).await
        }
        async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.inner.embed_passages(texts).await
        }
    }

    #[tokio::test]
    async fn concurrent_calls_share_a_batch_and_get_their_own_vectors() {
        let counting = Arc::new(Counting {
            inner: HashEmbedder::new(64),
            calls: AtomicUsize::new(0),
        });
        let batching = Arc::new(BatchingEmbedder::new(counting.clone(), 64, Duration::from_millis(50)));
        let texts: Vec<Vec<String>> = (0..8)
            .map(|i| vec![format!("statement {i}"), format!("another statement {i}")])
            .collect();
        let calls = texts.iter().cloned().map(|texts| {
            let batching = batching.clone();
            async move { batching.embed_passages(&texts).await }
        });
        let answers = futures::future::join_all(calls).await;
        let direct = HashEmbedder::new(64);
        for (texts, answer) in texts.iter().zip(answers) {
            assert_eq!(
                answer.expect("embedded"),
                direct.embed_passages(texts).await.expect("direct")
            );
        }
        assert!(
            counting.calls.load(Ordering::SeqCst) < 8,
            "8 concurrent callers should share calls, made {}",
            counting.calls.load(Ordering::SeqCst)
        );
        assert!(batching.embed_passages(&[]).await.expect("empty").is_empty());
    }
}
