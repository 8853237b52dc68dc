//! A pool of embedding workers in front of a blocking engine: sized to the cores, live queries
//! ahead of stored passages, background passages behind both, concurrent queries gathered into
//! one call.
//!
//! The engine runs on dedicated threads (the local engine is a CPU-bound C call; on the async
//! workers it would stall every request). Callers queue work in two classes:
//! - **queries** (a live request waits on each): one text each; a free worker takes every
//!   query queued, up to `max_query_batch`, and embeds them in one call. Alone, a query goes at
//!   once (no waiting for company); under load the queue fills while the workers are busy,
//!   so batches form by themselves;
//! - **passages** (writes and background learning): cut into calls of at most
//!   `passages_per_call` texts (pieces of several callers share a call), taken only when no
//!   query waits, and by at most `passage_workers` workers at once (1 by default): the other
//!   workers stay free for live queries, and with one passage worker the writes of concurrent
//!   callers are embedded, and answered, in the order they were queued, as the single embedding
//!   thread did before the pool (the learning jobs of one user rely on it: a later statement
//!   reaches the write lock after an earlier one);
//! - **background passages** (an index rebuild re-embedding every memory of a user): the same
//!   calls as passages, taken only when no query and no passage waits, on the passage workers,
//!   and not started while a query call runs until they have waited [`BACKGROUND_PATIENCE`]: a
//!   rebuild yields the cores to live requests (a recall's other steps need a core too) and
//!   proceeds between them, and still proceeds under a steady stream of queries.
//!
//! A request whose caller has gone (a cancelled or timed-out request) is dropped from the queue
//! unembedded.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::oneshot;

use super::{EmbedError, Embedder};

/// Whether a text is a search query or a stored passage (e5 embeds them with different
/// prefixes, "query: " and "passage: ").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Query,
    Passage,
}

/// A blocking embedding engine the pool runs on its worker threads.
pub trait Engine: Send + Sync + 'static {
    /// The model's name (see [`Embedder::name`]).
    fn name(&self) -> String;

    /// The vector width.
    fn dim(&self) -> usize;

    /// Runs once on each worker thread before its first call (the local engine sets how many
    /// threads its calls from this thread use).
    fn start_worker(&self) {}

    /// Embeds `texts` in one call: one unit vector per text, in order.
    fn embed(&self, texts: &[&str], role: Role) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// How the pool is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// Worker threads, each making one engine call at a time.
    pub workers: usize,
    /// The most queries embedded in one call.
    pub max_query_batch: usize,
    /// The most passages embedded in one call.
    pub passages_per_call: usize,
    /// The most workers embedding passages at once.
    pub passage_workers: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_query_batch: 16,
            passages_per_call: 8,
            passage_workers: 1,
        }
    }
}

/// The longest background work waits for the query calls running beside it to end: under a
/// steady stream of live queries there may be no moment without one, and a rebuild must still
/// go on, one call at a time.
pub const BACKGROUND_PATIENCE: Duration = Duration::from_secs(1);

type Reply = oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>;
type Answer = oneshot::Receiver<Result<Vec<Vec<f32>>, EmbedError>>;

/// How urgent a caller's texts are: the queue each goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A live request's query.
    Query,
    /// Stored passages of a write or a learning job.
    Passage,
    /// Passages of background work (an index rebuild): after every query and passage.
    Background,
}

impl Class {
    fn role(self) -> Role {
        match self {
            Class::Query => Role::Query,
            Class::Passage | Class::Background => Role::Passage,
        }
    }
}

/// Texts queued by one caller, answered together.
struct Request {
    texts: Vec<String>,
    reply: Reply,
    /// When it was queued.
    queued: Instant,
}

/// What a worker takes in one go: requests of one class, embedded in one call.
struct Batch {
    class: Class,
    requests: Vec<Request>,
}

struct Pending {
    queries: VecDeque<Request>,
    passages: VecDeque<Request>,
    background: VecDeque<Request>,
    /// Query calls in progress.
    query_calls: usize,
    /// Passage calls in progress, background ones included.
    passage_calls: usize,
    closed: bool,
}

/// Requests waiting for a worker, by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Queued {
    pub queries: usize,
    /// Pieces of passages.
    pub passages: usize,
    /// Pieces of background passages.
    pub background: usize,
}

impl Pending {
    /// Up to `limit` texts' worth of requests from the front of `queue` (at least one).
    fn pieces(queue: &mut VecDeque<Request>, limit: usize) -> Vec<Request> {
        let mut requests = Vec::new();
        let mut count = 0;
        while let Some(next) = queue.front() {
            if !requests.is_empty() && count + next.texts.len() > limit {
                break;
            }
            count += next.texts.len();
            requests.extend(queue.pop_front());
        }
        requests
    }

    /// The next batch a free worker takes `now`, if any: every query queued (up to the batch
    /// size); else, when fewer than `passage_workers` passage calls run, passages up to a
    /// call's worth; else, when moreover no query call runs (or the oldest background piece
    /// has waited [`BACKGROUND_PATIENCE`]), background passages.
    fn take(&mut self, options: &PoolOptions, now: Instant) -> Option<Batch> {
        // Callers that gave up are not embedded for.
        self.queries.retain(|r| !r.reply.is_closed());
        self.passages.retain(|r| !r.reply.is_closed());
        self.background.retain(|r| !r.reply.is_closed());
        if !self.queries.is_empty() {
            let take = self.queries.len().min(options.max_query_batch.max(1));
            self.query_calls += 1;
            return Some(Batch {
                class: Class::Query,
                requests: self.queries.drain(..take).collect(),
            });
        }
        if self.passage_calls >= options.passage_workers.max(1) {
            return None;
        }
        let class = if !self.passages.is_empty() {
            Class::Passage
        } else if self.background.front().is_some_and(|oldest| {
            self.query_calls == 0 || now.saturating_duration_since(oldest.queued) >= BACKGROUND_PATIENCE
        }) {
            Class::Background
        } else {
            return None;
        };
        let queue = match class {
            Class::Passage => &mut self.passages,
            _ => &mut self.background,
        };
        let requests = Self::pieces(queue, options.passages_per_call.max(1));
        self.passage_calls += 1;
        Some(Batch { class, requests })
    }

    /// A call of `class` ended.
    fn done(&mut self, class: Class) {
        match class {
            Class::Query => self.query_calls = self.query_calls.saturating_sub(1),
            Class::Passage | Class::Background => self.passage_calls = self.passage_calls.saturating_sub(1),
        }
    }
}

/// The two queues the workers serve.
struct Queue {
    options: PoolOptions,
    state: Mutex<Pending>,
    ready: Condvar,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, class: Class, request: Request) {
        let mut pending = self.lock();
        match class {
            Class::Query => pending.queries.push_back(request),
            Class::Passage => pending.passages.push_back(request),
            Class::Background => pending.background.push_back(request),
        }
        drop(pending);
        self.ready.notify_one();
    }

    /// The next batch (see [`Pending::take`]), waiting for one; `None` once closed and drained.
    fn next(&self) -> Option<Batch> {
        let mut pending = self.lock();
        loop {
            let now = Instant::now();
            if let Some(batch) = pending.take(&self.options, now) {
                return Some(batch);
            }
            if pending.closed && pending.passages.is_empty() && pending.background.is_empty() {
                return None;
            }
            // Background work held back by query calls is taken when its patience runs out,
            // even if no call ends meanwhile.
            pending = match pending.background.front() {
                Some(oldest) => {
                    let left = BACKGROUND_PATIENCE.saturating_sub(now.saturating_duration_since(oldest.queued));
                    self.ready
                        .wait_timeout(pending, left.max(Duration::from_millis(1)))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self.ready.wait(pending).unwrap_or_else(PoisonError::into_inner),
            };
        }
    }

    /// A call ended: its worker is free, and a passage or background call may start.
    fn done(&self, class: Class) {
        self.lock().done(class);
        self.ready.notify_all();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Requests waiting for a worker.
    fn depth(&self) -> Queued {
        let pending = self.lock();
        Queued {
            queries: pending.queries.len(),
            passages: pending.passages.len(),
            background: pending.background.len(),
        }
    }
}

/// Closes the queue when the last handle goes, so the workers end.
struct Closer(Arc<Queue>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// An [`Embedder`] running a blocking [`Engine`] on a pool of worker threads.
pub struct EmbeddingPool<E: Engine> {
    engine: Arc<E>,
    queue: Arc<Queue>,
    _closer: Arc<Closer>,
}

impl<E: Engine> Clone for EmbeddingPool<E> {
    fn clone(&self) -> Self {
        Self {
            engine: self.engine.clone(),
            queue: self.queue.clone(),
            _closer: self._closer.clone(),
        }
    }
}

impl<E: Engine> fmt::Debug for EmbeddingPool<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingPool")
            .field("model", &self.engine.name())
            .field("options", &self.queue.options)
            .finish()
    }
}

impl<E: Engine> EmbeddingPool<E> {
    /// Starts `options.workers` threads (at least one) named `{name}-{i}`.
    pub fn start(engine: E, options: PoolOptions, name: &str) -> Result<Self, EmbedError> {
        let engine = Arc::new(engine);
        let queue = Arc::new(Queue {
            options,
            state: Mutex::new(Pending {
                queries: VecDeque::new(),
                passages: VecDeque::new(),
                background: VecDeque::new(),
                query_calls: 0,
                passage_calls: 0,
                closed: false,
            }),
            ready: Condvar::new(),
        });
        for i in 0..options.workers.max(1) {
            let engine = engine.clone();
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(engine.as_ref(), &queue))
                .map_err(|err| EmbedError::Config(format!("cannot start an embedding worker: {err}")))?;
        }
        Ok(Self {
            engine,
            _closer: Arc::new(Closer(queue.clone())),
            queue,
        })
    }

    /// The pool's layout.
    pub fn options(&self) -> PoolOptions {
        self.queue.options
    }

    /// The engine the workers run.
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// Requests waiting for a worker.
    pub fn queued(&self) -> Queued {
        self.queue.depth()
    }

    fn submit(&self, class: Class, texts: Vec<String>) -> Answer {
        let (reply, answer) = oneshot::channel();
        self.queue.push(
            class,
            Request {
                texts,
                reply,
                queued: Instant::now(),
            },
        );
        answer
    }

    /// Queues `texts` in pieces of a call's worth and gathers their vectors, in order.
    async fn pieces(&self, class: Class, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Every piece is queued at once; queries asked meanwhile go between them.
        let pieces: Vec<_> = texts
            .chunks(self.queue.options.passages_per_call.max(1))
            .map(|piece| self.submit(class, piece.to_vec()))
            .collect();
        let mut vectors = Vec::with_capacity(texts.len());
        for piece in pieces {
            vectors.extend(outcome(piece).await?);
        }
        Ok(vectors)
    }
}

async fn outcome(answer: Answer) -> Result<Vec<Vec<f32>>, EmbedError> {
    answer
        .await
        .map_err(|_| EmbedError::Backend("the embedding call failed without a result".into()))?
}

/// A worker: takes batches until the queue closes.
fn work<E: Engine>(engine: &E, queue: &Queue) {
    engine.start_worker();
    while let Some(batch) = queue.next() {
        let texts: Vec<&str> = batch
            .requests
            .iter()
            .flat_map(|r| r.texts.iter().map(String::as_str))
            .collect();
        // A panic in the engine fails the calls of this batch (their callers see the reply
        // dropped), not the worker.
        let class = batch.class;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.embed(&texts, class.role())));
        match result {
            Err(_panic) => drop(batch.requests),
            Ok(Ok(vectors)) if vectors.len() == texts.len() => {
                let mut vectors = vectors.into_iter();
                for request in batch.requests {
                    let mine = vectors.by_ref().take(request.texts.len()).collect();
                    let _ = request.reply.send(Ok(mine));
                }
            }
            Ok(Ok(vectors)) => {
                let message = format!("{} vectors for {} texts", vectors.len(), texts.len());
                for request in batch.requests {
                    let _ = request.reply.send(Err(EmbedError::BadResponse(message.clone())));
                }
            }
            Ok(Err(err)) => {
                for request in batch.requests {
                    let _ = request.reply.send(Err(err.clone()));
                }
            }
        }
        // Only now, its callers answered, may the next passage call (or, after a query, a
        // background one) start.
        queue.done(class);
    }
}

#[async_trait]
impl<E: Engine> Embedder for EmbeddingPool<E> {
    fn name(&self) -> String {
        self.engine.name()
    }

    fn dim(&self) -> usize {
        self.engine.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut vectors = outcome(self.submit(Class::Query, vec![text.to_string()])).await?;
        vectors
            .pop()
            .ok_or_else(|| EmbedError::BadResponse("no vector for the query".into()))
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pieces(Class::Passage, texts).await
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pieces(Class::Background, texts).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A call the fake engine received.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Call {
        pub role: Role,
        pub texts: Vec<String>,
    }

    /// An engine the test drives: each call is reported on `calls`, then waits for a go on
    /// `go` (when gated). Vectors are derived from the text, so a caller can check it got its
    /// own.
    pub(crate) struct Fake {
        calls: Mutex<mpsc::Sender<Call>>,
        go: Option<Mutex<mpsc::Receiver<()>>>,
    }

    pub(crate) fn vector_of(text: &str) -> Vec<f32> {
        let mut v = vec![text.len() as f32, text.bytes().map(f32::from).sum::<f32>(), 1.0];
        super::super::normalize(&mut v);
        v
    }

    impl Engine for Fake {
        fn name(&self) -> String {
            "fake".into()
        }
        fn dim(&self) -> usize {
            3
        }
        fn embed(&self, texts: &[&str], role: Role) -> Result<Vec<Vec<f32>>, EmbedError> {
            let call = Call {
                role,
                texts: texts.iter().map(|t| t.to_string()).collect(),
            };
            let _ = self.calls.lock().unwrap().send(call);
            if let Some(go) = &self.go {
                go.lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(30))
                    .map_err(|_| EmbedError::Timeout)?;
            }
            if texts.contains(&"fail") {
                return Err(EmbedError::Backend("asked to fail".into()));
            }
            Ok(texts.iter().map(|t| vector_of(t)).collect())
        }
    }

    /// A pool over a gated fake: (pool, calls made, go signal).
    fn gated(options: PoolOptions) -> (EmbeddingPool<Fake>, mpsc::Receiver<Call>, mpsc::Sender<()>) {
        let (calls, made) = mpsc::channel();
        let (go, gate) = mpsc::channel();
        let fake = Fake {
            calls: Mutex::new(calls),
            go: Some(Mutex::new(gate)),
        };
        (EmbeddingPool::start(fake, options, "test-embed").unwrap(), made, go)
    }

    fn options(workers: usize) -> PoolOptions {
        PoolOptions {
            workers,
            max_query_batch: 16,
            passages_per_call: 4,
            passage_workers: 1,
        }
    }

    fn texts(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix} {i}")).collect()
    }

    /// The next call the engine received (a worker is now inside it, waiting for a go). Polls,
    /// so that the test's own tasks run meanwhile.
    async fn next_call(made: &mpsc::Receiver<Call>) -> Call {
        for _ in 0..30_000 {
            if let Ok(call) = made.try_recv() {
                return call;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the engine was not called");
    }

    /// Waits (without a time limit deciding anything) until the queues hold what the test put.
    async fn until_queued<E: Engine>(pool: &EmbeddingPool<E>, queries: usize, passages: usize) {
        until_queued_all(pool, queries, passages, 0).await;
    }

    async fn until_queued_all<E: Engine>(pool: &EmbeddingPool<E>, queries: usize, passages: usize, background: usize) {
        let expected = Queued {
            queries,
            passages,
            background,
        };
        for _ in 0..30_000 {
            if pool.queued() == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the queues hold {:?}, expected {expected:?}", pool.queued());
    }

    #[tokio::test]
    async fn a_query_goes_ahead_of_queued_passages() {
        let (pool, made, go) = gated(options(1));
        // The one worker is busy with the first piece of a write...
        let writer = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_passages(&texts("passage", 12)).await }
        });
        assert_eq!(next_call(&made).await.texts, texts("passage", 4));
        until_queued(&pool, 0, 2).await;
        // ...when a query arrives: it is embedded right after the piece in progress.
        let query = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("what is the budget?").await }
        });
        until_queued(&pool, 1, 2).await;
        go.send(()).unwrap();
        let second = next_call(&made).await;
        assert_eq!(second.role, Role::Query);
        assert_eq!(second.texts, ["what is the budget?"]);
        go.send(()).unwrap();
        assert_eq!(query.await.unwrap().unwrap(), vector_of("what is the budget?"));
        for _ in 0..2 {
            assert_eq!(next_call(&made).await.role, Role::Passage);
            go.send(()).unwrap();
        }
        let written = writer.await.unwrap().unwrap();
        let expected: Vec<Vec<f32>> = texts("passage", 12).iter().map(|t| vector_of(t)).collect();
        assert_eq!(written, expected, "every passage got its own vector, in order");
    }

    #[tokio::test]
    async fn concurrent_queries_share_one_call_and_get_their_own_vectors() {
        let (pool, made, go) = gated(options(1));
        let first = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("first").await }
        });
        assert_eq!(next_call(&made).await.texts, ["first"], "alone, a query goes at once");
        // Five more arrive while the worker is busy: they wait together...
        let asked = texts("query", 5);
        let waiting: Vec<_> = asked
            .iter()
            .map(|text| {
                let pool = pool.clone();
                let text = text.clone();
                tokio::spawn(async move { pool.embed_query(&text).await })
            })
            .collect();
        until_queued(&pool, 5, 0).await;
        go.send(()).unwrap();
        // ...and are embedded in one call.
        let batch = next_call(&made).await;
        assert_eq!(batch.role, Role::Query);
        let mut seen = batch.texts.clone();
        seen.sort();
        assert_eq!(seen, asked);
        go.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap(), vector_of("first"));
        for (text, answer) in asked.iter().zip(waiting) {
            assert_eq!(answer.await.unwrap().unwrap(), vector_of(text));
        }
        assert!(made.try_recv().is_err(), "no other call");
    }

    #[tokio::test]
    async fn the_batch_size_is_bounded_and_pieces_of_writers_share_a_call() {
        let (pool, made, go) = gated(PoolOptions {
            workers: 1,
            max_query_batch: 2,
            passages_per_call: 4,
            passage_workers: 1,
        });
        let blocker = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_passages(&texts("blocker", 1)).await }
        });
        next_call(&made).await;
        let queries: Vec<_> = texts("query", 3)
            .into_iter()
            .map(|text| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.embed_query(&text).await })
            })
            .collect();
        let writers: Vec<_> = [2, 1, 2]
            .into_iter()
            .enumerate()
            .map(|(i, n)| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.embed_passages(&texts(&format!("writer {i}"), n)).await })
            })
            .collect();
        until_queued(&pool, 3, 3).await;
        go.send(()).unwrap();
        let mut sizes = Vec::new();
        for _ in 0..4 {
            let call = next_call(&made).await;
            sizes.push((call.role, call.texts.len()));
            go.send(()).unwrap();
        }
        assert_eq!(
            sizes,
            [
                (Role::Query, 2),
                (Role::Query, 1),
                // Two writers' pieces (2 + 1) in one call of at most 4; the third does not fit.
                (Role::Passage, 3),
                (Role::Passage, 2),
            ]
        );
        blocker.await.unwrap().unwrap();
        for query in queries {
            query.await.unwrap().unwrap();
        }
        for writer in writers {
            writer.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn passages_take_one_worker_in_order_and_the_others_stay_free_for_queries() {
        let (pool, made, go) = gated(options(2));
        // Two writers, one after the other: the first one's two pieces, then the second's.
        let first = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_passages(&texts("first", 8)).await }
        });
        assert_eq!(next_call(&made).await.texts, texts("first", 4));
        until_queued(&pool, 0, 1).await;
        let second = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_passages(&texts("second", 2)).await }
        });
        until_queued(&pool, 0, 2).await;
        // The second worker is idle, yet takes no passage while one passage call runs...
        // ...and a query goes to it at once.
        let query = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("what is the budget?").await }
        });
        let asked = next_call(&made).await;
        assert_eq!(
            (asked.role, asked.texts),
            (Role::Query, vec!["what is the budget?".to_string()])
        );
        assert_eq!(pool.queued().passages, 2, "the passages still wait");
        // Every call may go on (which worker takes which go does not matter)...
        for _ in 0..4 {
            go.send(()).unwrap();
        }
        query.await.unwrap().unwrap();
        // ...and the rest follow one call at a time, in the order they were queued.
        assert_eq!(next_call(&made).await.texts, texts("first", 8)[4..]);
        assert_eq!(next_call(&made).await.texts, texts("second", 2));
        first.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        assert!(made.try_recv().is_err(), "no other call");
    }

    #[tokio::test]
    async fn every_worker_runs_a_call_at_the_same_time() {
        let (pool, made, go) = gated(options(3));
        // Each query is asked once the previous one is inside the engine: three calls are in
        // the engine before any is let go, so three workers run them.
        let mut answers = Vec::new();
        for text in texts("query", 3) {
            answers.push(tokio::spawn({
                let pool = pool.clone();
                async move { pool.embed_query(&text).await }
            }));
            assert_eq!(next_call(&made).await.role, Role::Query);
        }
        for _ in 0..3 {
            go.send(()).unwrap();
        }
        for answer in answers {
            answer.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_failed_call_fails_its_callers_only_and_a_gone_caller_is_skipped() {
        let (pool, made, go) = gated(options(1));
        let blocker = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("blocker").await }
        });
        next_call(&made).await;
        // A caller who gives up while queued is not embedded for.
        let gone = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("gone").await }
        });
        until_queued(&pool, 1, 0).await;
        gone.abort();
        let _ = gone.await;
        let failing = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_passages(&["fail".to_string()]).await }
        });
        until_queued(&pool, 1, 1).await;
        go.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        let next = next_call(&made).await;
        assert_eq!(next.texts, ["fail"], "the gone caller's query was skipped");
        go.send(()).unwrap();
        assert!(matches!(failing.await.unwrap(), Err(EmbedError::Backend(_))));
        // The worker lives on.
        let after = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("after").await }
        });
        next_call(&made).await;
        go.send(()).unwrap();
        assert_eq!(after.await.unwrap().unwrap(), vector_of("after"));
    }

    /// A request the queue's tests push: (request, its answer).
    fn request(text: &str) -> (Request, Answer) {
        let (reply, answer) = oneshot::channel();
        (
            Request {
                texts: vec![text.to_string()],
                reply,
                queued: Instant::now(),
            },
            answer,
        )
    }

    fn pending() -> Pending {
        Pending {
            queries: VecDeque::new(),
            passages: VecDeque::new(),
            background: VecDeque::new(),
            query_calls: 0,
            passage_calls: 0,
            closed: false,
        }
    }

    /// What the queue hands out, one call at a time: (class, the call's texts joined by "+").
    fn taken(batch: Option<Batch>) -> Option<(Class, String)> {
        batch.map(|b| {
            let texts: Vec<&str> = b
                .requests
                .iter()
                .flat_map(|r| r.texts.iter().map(String::as_str))
                .collect();
            (b.class, texts.join("+"))
        })
    }

    #[test]
    fn background_passages_wait_for_every_query_and_passage() {
        let options = options(2);
        let mut pending = pending();
        let mut answers = Vec::new();
        // A rebuild queued first, then a write, then a query.
        for (class, text) in [
            (Class::Background, "rebuild 0"),
            (Class::Background, "rebuild 1"),
            (Class::Passage, "write"),
            (Class::Query, "query"),
        ] {
            let (request, answer) = request(text);
            answers.push(answer);
            match class {
                Class::Query => pending.queries.push_back(request),
                Class::Passage => pending.passages.push_back(request),
                Class::Background => pending.background.push_back(request),
            }
        }
        let mut order = Vec::new();
        while let Some(batch) = pending.take(&options, Instant::now()) {
            let class = batch.class;
            order.push(taken(Some(batch)).unwrap());
            // Each call ends before the next is taken (one worker).
            pending.done(class);
        }
        assert_eq!(
            order,
            [
                (Class::Query, "query".to_string()),
                (Class::Passage, "write".to_string()),
                // Two pieces of background work share a call, as passages do.
                (Class::Background, "rebuild 0+rebuild 1".to_string()),
            ]
        );
    }

    #[test]
    fn background_work_starts_beside_query_calls_only_once_its_patience_ran_out() {
        let options = options(2);
        let mut pending = pending();
        let (query, _query_answer) = request("query");
        pending.queries.push_back(query);
        let queued = Instant::now();
        assert_eq!(taken(pending.take(&options, queued)).unwrap().0, Class::Query);
        let (piece, _piece_answer) = request("rebuild 0");
        pending.background.push_back(piece);
        let queued = pending.background[0].queued;
        assert!(taken(pending.take(&options, queued + BACKGROUND_PATIENCE / 2)).is_none());
        assert_eq!(
            taken(pending.take(&options, queued + BACKGROUND_PATIENCE)),
            Some((Class::Background, "rebuild 0".to_string())),
            "a steady stream of queries does not hold a rebuild back for ever"
        );
    }

    #[test]
    fn no_background_call_starts_while_a_query_call_runs() {
        // Two workers: one is in a query call, the other is free and a rebuild's piece waits.
        let options = options(2);
        let mut pending = pending();
        // Every piece is queued after this moment: none has run out of patience.
        let at = Instant::now();
        let (query, _query_answer) = request("query");
        pending.queries.push_back(query);
        assert_eq!(taken(pending.take(&options, at)).unwrap().0, Class::Query);
        let (piece, _piece_answer) = request("rebuild 0");
        pending.background.push_back(piece);
        assert!(
            taken(pending.take(&options, at)).is_none(),
            "the free worker leaves the background piece while the query call runs"
        );
        // A write is not held back by the query: it is live work.
        let (write, _write_answer) = request("write");
        pending.passages.push_back(write);
        assert_eq!(
            taken(pending.take(&options, at)),
            Some((Class::Passage, "write".to_string()))
        );
        pending.done(Class::Passage);
        assert!(taken(pending.take(&options, at)).is_none(), "the query call still runs");
        // The query call ends: the background piece goes.
        pending.done(Class::Query);
        assert_eq!(
            taken(pending.take(&options, at)),
            Some((Class::Background, "rebuild 0".to_string()))
        );
        // And it holds the passage worker: a second background piece waits for it.
        let (second, _second_answer) = request("rebuild 1");
        pending.background.push_back(second);
        assert!(taken(pending.take(&options, at)).is_none());
        pending.done(Class::Background);
        assert_eq!(
            taken(pending.take(&options, at)),
            Some((Class::Background, "rebuild 1".to_string()))
        );
    }

    #[tokio::test]
    async fn a_rebuild_on_the_pool_yields_to_a_write_and_a_query_queued_after_it() {
        let (pool, made, go) = gated(options(1));
        let blocker = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("blocker").await }
        });
        next_call(&made).await;
        // While the one worker is busy: a rebuild's 8 passages (2 pieces), then a write, then
        // a query.
        let rebuild = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_background(&texts("rebuild", 8)).await }
        });
        until_queued_all(&pool, 0, 0, 2).await;
        let write = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_passages(&texts("write", 1)).await }
        });
        until_queued_all(&pool, 0, 1, 2).await;
        let query = tokio::spawn({
            let pool = pool.clone();
            async move { pool.embed_query("what is the budget?").await }
        });
        until_queued_all(&pool, 1, 1, 2).await;
        go.send(()).unwrap();
        let mut order = Vec::new();
        for _ in 0..4 {
            let call = next_call(&made).await;
            order.push((call.role, call.texts[0].clone()));
            go.send(()).unwrap();
        }
        assert_eq!(
            order,
            [
                (Role::Query, "what is the budget?".to_string()),
                (Role::Passage, "write 0".to_string()),
                (Role::Passage, "rebuild 0".to_string()),
                (Role::Passage, "rebuild 4".to_string()),
            ]
        );
        blocker.await.unwrap().unwrap();
        query.await.unwrap().unwrap();
        write.await.unwrap().unwrap();
        let rebuilt = rebuild.await.unwrap().unwrap();
        let expected: Vec<Vec<f32>> = texts("rebuild", 8).iter().map(|t| vector_of(t)).collect();
        assert_eq!(
            rebuilt, expected,
            "every background passage got its own vector, in order"
        );
    }
}
