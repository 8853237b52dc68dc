//! A small cache of recent query embeddings: a retried or repeated message costs nothing.
//!
//! Entries are keyed by the SHA-256 of the text (a fixed 32 bytes whatever the message's
//! length, and no two texts share a key in practice). Two generations approximate LRU in O(1):
//! new entries go to the young map; when it holds half the capacity it becomes the old one
//! and the previous old one is dropped; a hit in the old map moves the entry back to the young
//! one. An entry therefore lives for at least `capacity / 2` later insertions.
//!
//! Concurrent calls for the same text share one embedding: the first embeds, the others wait
//! for its result (an error included, which is not kept). If the first gives up (its request
//! was cancelled), the others start over, one of them embedding.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::{EmbedError, Embedder};

type Key = [u8; 32];
type Waiter = oneshot::Sender<Result<Vec<f32>, EmbedError>>;

#[derive(Default)]
struct State {
    young: HashMap<Key, Vec<f32>>,
    old: HashMap<Key, Vec<f32>>,
    /// Texts being embedded, with the callers waiting for them.
    in_flight: HashMap<Key, Vec<Waiter>>,
    hits: u64,
    misses: u64,
}

/// An [`Embedder`] that keeps the embeddings of recent queries. Passages pass through.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    /// Half the capacity: the size of a generation.
    generation: usize,
    state: Mutex<State>,
}

impl fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("inner", &self.inner)
            .field("capacity", &(self.generation * 2))
            .finish()
    }
}

/// Cache hits and misses since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: usize,
}

impl CachedEmbedder {
    /// Keeps at most `capacity` query embeddings (at least 2).
    pub fn new(inner: Arc<dyn Embedder>, capacity: usize) -> Self {
        Self {
            inner,
            generation: (capacity / 2).max(1),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn stats(&self) -> CacheStats {
        let state = self.lock();
        CacheStats {
            hits: state.hits,
            misses: state.misses,
            entries: state.young.len() + state.old.len(),
        }
    }

    fn key(text: &str) -> Key {
        Sha256::digest(text.as_bytes()).into()
    }

    fn remember(&self, state: &mut State, key: Key, vector: Vec<f32>) {
        if state.young.len() >= self.generation {
            state.old = std::mem::take(&mut state.young);
        }
        state.young.insert(key, vector);
    }

    /// The cached vector, moved to the young generation when found in the old one.
    fn lookup(&self, state: &mut State, key: &Key) -> Option<Vec<f32>> {
        if let Some(vector) = state.young.get(key) {
            return Some(vector.clone());
        }
        let vector = state.old.remove(key)?;
        self.remember(state, *key, vector.clone());
        Some(vector)
    }
}

/// The first caller of a text while it embeds it: when dropped before finishing (the caller
/// gave up), the waiters are released to start over.
struct Leader<'a> {
    cache: &'a CachedEmbedder,
    key: Key,
    finished: bool,
}

impl Leader<'_> {
    fn finish(mut self, result: &Result<Vec<f32>, EmbedError>) {
        let mut state = self.cache.lock();
        let waiters = state.in_flight.remove(&self.key).unwrap_or_default();
        if let Ok(vector) = result {
            self.cache.remember(&mut state, self.key, vector.clone());
        }
        drop(state);
        for waiter in waiters {
            let _ = waiter.send(result.clone());
        }
        self.finished = true;
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Dropping the senders wakes the waiters, who start over.
            self.cache.lock().in_flight.remove(&self.key);
        }
    }
}

#[async_trait]
impl Embedder for CachedEmbedder {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let key = Self::key(text);
        loop {
            let waiting = {
                let mut state = self.lock();
                if let Some(vector) = self.lookup(&mut state, &key) {
                    state.hits += 1;
                    return Ok(vector);
                }
                match state.in_flight.get_mut(&key) {
                    Some(waiters) => {
                        let (waiter, answer) = oneshot::channel();
                        waiters.push(waiter);
                        state.hits += 1;
                        Some(answer)
                    }
                    None => {
                        state.in_flight.insert(key, Vec::new());
                        state.misses += 1;
                        None
                    }
                }
            };
            match waiting {
                Some(answer) => match answer.await {
                    Ok(result) => return result,
                    // The caller embedding it gave up: start over.
                    Err(_) => continue,
                },
                None => {
                    let leader = Leader {
                        cache: self,
                        key,
                        finished: false,
                    };
                    let result = self.inner.embed_query(text).await;
                    leader.finish(&result);
                    return result;
                }
            }
        }
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_passages(texts).await
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_background(texts).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;
    use crate::embed::hash::HashEmbedder;

    /// Counts the queries that reach the model; each waits for a permit when gated.
    #[derive(Debug)]
    struct Counting {
        inner: HashEmbedder,
        queries: AtomicUsize,
        gate: Option<Semaphore>,
    }

    impl Counting {
        fn new(gated: bool) -> Arc<Self> {
            Arc::new(Self {
                inner: HashEmbedder::new(64),
                queries: AtomicUsize::new(0),
                gate: gated.then(|| Semaphore::new(0)),
            })
        }

        fn calls(&self) -> usize {
            self.queries.load(Ordering::SeqCst)
        }
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
            self.queries.fetch_add(1, Ordering::SeqCst);
            if let Some(gate) = &self.gate {
                gate.acquire().await.expect("open").forget();
            }
            if text == "fail" {
                return Err(EmbedError::Unavailable("asked to fail".into()));
            }
            self.inner.embed_query(text).await
        }
        async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.inner.embed_passages(texts).await
        }
    }

    /// Polls until `ready` holds; the outcome never depends on how long it takes.
    async fn until(mut ready: impl FnMut() -> bool) {
        for _ in 0..30_000 {
            if ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the condition never held");
    }

    #[tokio::test]
    async fn a_repeated_query_is_not_embedded_again() {
        let model = Counting::new(false);
        let cache = CachedEmbedder::new(model.clone(), 8);
        let first = cache.embed_query("what is the budget?").await.unwrap();
        let again = cache.embed_query("what is the budget?").await.unwrap();
        assert_eq!(first, again);
        assert_eq!(model.calls(), 1);
        cache.embed_query("another question").await.unwrap();
        assert_eq!(model.calls(), 2);
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 1,
                misses: 2,
                entries: 2
            }
        );
        // Passages are not cached.
        let texts = vec!["what is the budget?".to_string()];
        cache.embed_passages(&texts).await.unwrap();
        assert_eq!(model.calls(), 2);
    }

    #[tokio::test]
    async fn a_retry_during_the_first_embedding_waits_for_it() {
        let model = Counting::new(true);
        let cache = Arc::new(CachedEmbedder::new(model.clone(), 8));
        let first = tokio::spawn({
            let cache = cache.clone();
            async move { cache.embed_query("retried message").await }
        });
        until(|| model.calls() == 1).await;
        let retry = tokio::spawn({
            let cache = cache.clone();
            async move { cache.embed_query("retried message").await }
        });
        until(|| cache.stats().hits == 1).await;
        model.gate.as_ref().unwrap().add_permits(1);
        let (first, retry) = (first.await.unwrap().unwrap(), retry.await.unwrap().unwrap());
        assert_eq!(first, retry);
        assert_eq!(model.calls(), 1, "one embedding for both");
    }

    #[tokio::test]
    async fn when_the_first_caller_gives_up_a_waiting_one_embeds() {
        let model = Counting::new(true);
        let cache = Arc::new(CachedEmbedder::new(model.clone(), 8));
        let first = tokio::spawn({
            let cache = cache.clone();
            async move { cache.embed_query("message").await }
        });
        until(|| model.calls() == 1).await;
        let second = tokio::spawn({
            let cache = cache.clone();
            async move { cache.embed_query("message").await }
        });
        until(|| cache.stats().hits == 1).await;
        first.abort();
        let _ = first.await;
        until(|| model.calls() == 2).await;
        model.gate.as_ref().unwrap().add_permits(1);
        assert!(second.await.unwrap().is_ok());
        // And it is kept.
        cache.embed_query("message").await.unwrap();
        assert_eq!(model.calls(), 2);
    }

    #[tokio::test]
    async fn errors_are_shared_but_not_kept() {
        let model = Counting::new(false);
        let cache = CachedEmbedder::new(model.clone(), 8);
        assert!(cache.embed_query("fail").await.is_err());
        assert!(cache.embed_query("fail").await.is_err());
        assert_eq!(model.calls(), 2);
    }

    #[tokio::test]
    async fn the_oldest_entries_go_first_and_a_hit_keeps_an_entry() {
        let model = Counting::new(false);
        // Generations of two entries.
        let cache = CachedEmbedder::new(model.clone(), 4);
        for text in ["a", "b", "c"] {
            cache.embed_query(text).await.unwrap();
        }
        // young {c}, old {a, b}: "a" is used again and moves to the young generation.
        cache.embed_query("a").await.unwrap();
        assert_eq!(model.calls(), 3);
        // "d" fills the young generation {c, a} -> it becomes old, "b" is dropped.
        cache.embed_query("d").await.unwrap();
        assert_eq!(model.calls(), 4);
        for kept in ["a", "c", "d"] {
            cache.embed_query(kept).await.unwrap();
        }
        assert_eq!(model.calls(), 4, "a, c and d were kept");
        cache.embed_query("b").await.unwrap();
        assert_eq!(model.calls(), 5, "b was dropped");
        assert!(cache.stats().entries <= 4);
    }
}
