//! The embedded vector index: one qdrant-edge shard in a directory, in this process.
//!
//! What qdrant-edge 0.7.2 does, as read in its source and checked by the tests here:
//!
//! - **Read after write.** `EdgeShard::update` applies an operation to the segments before it
//!   returns, so a point is searchable as soon as [`VectorIndex::upsert`] returns; nothing is
//!   deferred (the `prevent_unoptimized` option, which would defer points, stays off).
//! - **Durability.** Every update is appended to qdrant-edge's write-ahead log, but 0.7.2
//!   neither replays that log when it loads a shard nor ever truncates it: only a flush of the
//!   segments makes a write durable (in `flushed_writes_survive_a_crash` a killed writer's 10
//!   flushed points all came back and none of its 10 unflushed ones), and a flush syncs many
//!   files: about 350 ms on the shared development disk even for a few points. So this type
//!   keeps its own log ([`super::wal`], `thinkus-wal.log`): every applied operation is appended
//!   to it, and with [`Flush::EveryWrite`] (the default) a write returns only once one
//!   `fdatasync` of that file covers it, shared by the writes that ran alongside (group
//!   commit); with `edge://DIR?flush_ms=N` the log is synced on a timer instead. Opening the
//!   index replays the log; a checkpoint (a flush of the segments, every 30 s or 64 MiB of
//!   log, and on [`VectorIndex::flush`]) empties it. An acknowledged write survives `kill -9`
//!   (tests/it/durability.rs); reconcile with the relational store (`list_ids`) anyway, for
//!   writes that failed after the store committed. qdrant-edge's own log keeps every write for
//!   the life of the directory (288 MiB after 110,000 points of 384 dimensions); do not delete
//!   it, since operation numbers would restart below the segments' versions and later writes
//!   would be skipped. Rebuilding into a fresh directory reclaims it.
//! - **Optimisation.** Edge has no background optimiser. Until [`EdgeIndex::optimize`] runs,
//!   every point stays in one appendable segment without an HNSW graph and a search is exact:
//!   it scores every point that passes the filter, found through the payload indexes, so its
//!   cost follows the tenant's size, not the collection's. Measured in release mode on the
//!   2-core machine with 110,000 points of 384 dimensions (10,000 for one user, 1,000 for
//!   each of 100 others), filtered by user and reader, p50 (p95): dense 4.6 ms (5.4) for the
//!   10,000-point user and 0.8 ms (0.9) for the others; sparse 0.7 ms (1.1) and 0.4 ms (0.7).
//!   One optimisation took 166 s and brought those to 2.3 ms (3.3), 0.4 ms (0.5), 0.5 ms (0.9)
//!   and 0.3 ms (0.4): optimised segments are immutable and stored in tenant order (the
//!   `user_id` index is a tenant index), and segments past the indexing threshold (about
//!   6,700 vectors of 384 dimensions) get an HNSW graph. Qdrant still searches exactly while
//!   the filtered set is below its full-scan threshold, which covers one user's memories at
//!   these sizes. Optimisation also vacuums deleted points. Run it after a bulk rebuild, or
//!   turn on [`EdgeIndex::set_auto_optimize`].
//! - **Threads.** `EdgeShard` is synchronous and guards itself with locks, so every call runs
//!   on tokio's blocking pool. Its `flush` panics instead of waiting if an update holds the
//!   log or the optimiser holds the segments at that moment, so this type makes flushes wait
//!   for both; writes and searches run alongside an optimisation (qdrant's optimiser proxies
//!   the segments it rebuilds).
//! - **Files.** `<dir>/edge_config.json` (vectors and their parameters), `<dir>/segments/`,
//!   `<dir>/temp_segments/` (while optimising), `<dir>/wal/`, `<dir>/payload_index.json`, and
//!   `<dir>/thinkus-index.lock`, which keeps a
//!   second process (or a second [`EdgeIndex`] in this one) from opening the same directory.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use async_trait::async_trait;
use qdrant_edge::external::ordered_float::OrderedFloat;
use qdrant_edge::{
    BoolIndexParams, Condition, CountRequest, CreateIndex, Distance, EdgeConfig, EdgeConfigBuilder, EdgeShard,
    EdgeSparseVectorParamsBuilder, EdgeVectorParamsBuilder, FieldCondition, FieldIndexOperations, Filter,
    HasIdCondition, IntegerIndexParams, IsEmptyCondition, JsonPath, KeywordIndexParams, Match, Modifier, NamedQuery,
    OperationError, Payload, PayloadFieldSchema, PayloadOps, PayloadSchemaParams, PointId, PointInsertOperations,
    PointOperations, PointStructPersisted, QueryEnum, Range, ScoredPoint, ScrollRequest, SearchRequest, SetPayloadOp,
    UpdateOperation, ValueVariants, VectorInternal, VectorPersisted, VectorStructPersisted, WithPayloadInterface,
    WithVector,
};
use serde_json::{Map, Value};
use thinkus_common::model::{DEFAULT_TENANT, MemoryStatus, Owner};

use super::wal::Wal;
use super::{
    DENSE_VECTOR, IndexedPoint, MemoryFilter, SPARSE_VECTOR, SparseVector, VectorError, VectorHit, VectorIndex,
    memory_id, point_uuid,
};
use crate::filter::Plan;

/// Payload keys shared by both backends, so a filter means the same thing in each.
pub(super) mod field {
    /// The owner's tenant; points written before tenancy have none until `ensure_ready`
    /// gives them [`thinkus_common::model::DEFAULT_TENANT`].
    pub const TENANT_ID: &str = "tenant_id";
    pub const USER_ID: &str = "user_id";
    pub const ROLE_ID: &str = "role_id";
    /// `true` for cross-project memories (no project id).
    pub const CROSS_PROJECT: &str = "cross_project";
    /// Absent for cross-project memories.
    pub const PROJECT_ID: &str = "project_id";
    /// Absent when the memory has no session.
    pub const SESSION_ID: &str = "session_id";
    pub const MEMORY_TYPE: &str = "memory_type";
    pub const VISIBILITY: &str = "visibility";
    pub const STATUS: &str = "status";
    pub const OCCURRED_AT_MS: &str = "occurred_at_ms";
    pub const TAGS: &str = "tags";

    /// Keyword-indexed fields other than the user field (the tenant index of the backends).
    pub const KEYWORDS: [&str; 8] = [
        TENANT_ID,
        ROLE_ID,
        PROJECT_ID,
        SESSION_ID,
        MEMORY_TYPE,
        VISIBILITY,
        STATUS,
        TAGS,
    ];

    /// The payload key of a field of a plan.
    pub fn key(field: crate::filter::Field) -> &'static str {
        use crate::filter::Field;
        match field {
            Field::Tenant => TENANT_ID,
            Field::User => USER_ID,
            Field::Role => ROLE_ID,
            Field::Project => PROJECT_ID,
            Field::Session => SESSION_ID,
            Field::Type => MEMORY_TYPE,
            Field::Visibility => VISIBILITY,
            Field::Status => STATUS,
        }
    }
}

/// Points per write-ahead-log record: large batches make one huge record. A swap
/// ([`VectorIndex::replace`]) writes one such record per step, so searches wait for one step
/// at most, not for the whole swap.
const UPSERT_CHUNK: usize = 256;
/// Ids per scroll page in [`VectorIndex::list_ids`].
const SCROLL_PAGE: usize = 1024;
const LOCK_FILE: &str = "thinkus-index.lock";
const CONFIG_FILE: &str = "edge_config.json";
const SEGMENTS_DIR: &str = "segments";

/// When writes become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flush {
    /// Before a write returns: a sync of the write-ahead log covers it, shared with the writes
    /// that ran alongside (group commit). The default: an acknowledged write survives a crash.
    #[default]
    EveryWrite,
    /// On a timer: writes return at once and a background thread syncs the log. A crash loses
    /// at most this much of the latest writes, which the knowledge manager's reconciliation
    /// at start repairs from the database.
    Every(std::time::Duration),
}

/// How often the segments are flushed and the write-ahead log emptied.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// A log this large is emptied at the next tick of the background thread.
const CHECKPOINT_BYTES: u64 = 64 * 1024 * 1024;
/// The background thread's tick.
const TICK: std::time::Duration = std::time::Duration::from_millis(200);

impl Flush {
    /// The policy of an `edge://DIR?flush_ms=N` URI's query (`None`, or `flush_ms=0`, for
    /// [`Flush::EveryWrite`]).
    pub fn from_query(query: Option<&str>) -> Result<Self, VectorError> {
        let Some(query) = query.filter(|q| !q.is_empty()) else {
            return Ok(Flush::EveryWrite);
        };
        let mut flush = Flush::EveryWrite;
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("flush_ms", value)) => {
                    let ms: u64 = value.parse().map_err(|_| {
                        VectorError::Invalid(format!("flush_ms={value:?} is not a number of milliseconds"))
                    })?;
                    flush = if ms == 0 {
                        Flush::EveryWrite
                    } else {
                        Flush::Every(std::time::Duration::from_millis(ms))
                    };
                }
                _ => {
                    return Err(VectorError::Invalid(format!(
                        "unknown edge:// option {pair:?} (flush_ms=N)"
                    )));
                }
            }
        }
        Ok(flush)
    }
}

/// The qdrant-edge backend: a shard in a local directory, searched in-process.
pub struct EdgeIndex {
    shared: Arc<Shared>,
    /// The log's thread; stopped and joined when the index is dropped, so that the directory's
    /// lock is released by then and the directory can be opened again at once.
    background: Option<Background>,
}

/// The thread that syncs and checkpoints the log on a schedule.
struct Background {
    /// Dropping it wakes the thread, which then stops.
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Drop for EdgeIndex {
    fn drop(&mut self) {
        if let Some(Background { stop, thread }) = self.background.take() {
            drop(stop);
            // The thread finishes the sync or checkpoint it is in, then drops its handle on
            // the shared state; a panic there was logged by the panic hook already.
            let _ = thread.join();
        }
    }
}

struct Shared {
    dir: PathBuf,
    /// Holds the directory's advisory lock for as long as the index lives.
    _lock: File,
    /// `None` until [`VectorIndex::ensure_ready`] creates the shard in a new directory.
    shard: RwLock<Option<Arc<EdgeShard>>>,
    /// Taken by every update and by flush: `EdgeShard::flush` panics instead of waiting when
    /// an update holds the write-ahead log. Holds this index's own log.
    writes: Mutex<Wal>,
    /// A second handle on the log's file, synced without holding `writes`.
    wal_file: File,
    /// Taken by optimisation and flush: flushing while the optimiser swaps segments would
    /// find the segment holder write-locked, which `EdgeShard::flush` also answers with a
    /// panic.
    maintenance: Mutex<()>,
    /// Points written between automatic optimisations; 0 when they are off.
    auto_optimize_every: AtomicU64,
    /// Points upserted and deleted since the last optimisation started.
    written_since_optimize: AtomicU64,
    /// Whether an automatic optimisation is running or queued.
    optimizing: AtomicBool,
    /// When writes become durable.
    flush: Flush,
    /// Write batches applied and logged so far (counted under `writes`).
    applied: AtomicU64,
    /// Write batches a finished sync of the log covers.
    synced: AtomicU64,
    /// One sync at a time; a write whose batch a running sync covers waits for it.
    syncing: tokio::sync::Mutex<()>,
    /// When the segments were last flushed and the log emptied.
    checkpointed: Mutex<std::time::Instant>,
    /// Searches hold it shared, [`VectorIndex::replace`] exclusively for each chunk it
    /// writes: replacing points that exist moves them between segments, and a search reading
    /// the segments one after another could otherwise find a moved point in neither. The lock
    /// is fair (first come, first served), so searches that arrive during a chunk run before
    /// the next one.
    swap: tokio::sync::RwLock<()>,
}

impl Drop for Shared {
    /// The last handle on the index closes the shard. qdrant-edge's own close flushes the
    /// segments and panics when it cannot write (a full disk, a removed directory), which at a
    /// process's exit would end it with a panic. So the close flushes first, as a checkpoint
    /// (which catches that panic); when that fails, the shard is left unclosed (forgotten: its
    /// memory goes with the process) and its log keeps every write, replayed at the next open.
    fn drop(&mut self) {
        let taken = self.shard.get_mut().unwrap_or_else(PoisonError::into_inner).take();
        let Some(shard) = taken.and_then(|shard| Arc::try_unwrap(shard).ok()) else {
            return;
        };
        if let Err(err) = self.checkpoint(&shard) {
            tracing::error!(
                dir = %self.dir.display(),
                error = %err,
                "the edge vector index could not flush as it closed; its log keeps the writes, replayed at the next start"
            );
            std::mem::forget(shard);
        }
    }
}

/// Sizes of the shard, for logs, metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeStats {
    /// Segments in the shard: one appendable segment until the first optimisation, then the
    /// optimised ones plus an appendable one for new writes.
    pub segments: usize,
    /// Points, approximately (a point being rewritten can be counted twice).
    pub points: usize,
}

impl fmt::Debug for EdgeIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeIndex")
            .field("dir", &self.shared.dir)
            .field("ready", &self.shared.current().is_some())
            .finish()
    }
}

impl EdgeIndex {
    /// Opens the index stored in `dir`, creating the directory if needed.
    ///
    /// An existing shard is loaded at once (this reads its segments, so it can take a while
    /// for a large index); a new directory gets its shard from the first
    /// [`VectorIndex::ensure_ready`], which fixes the dense dimension. Fails with
    /// [`VectorError::Unavailable`] when another index already holds the directory.
    pub fn open(dir: &Path) -> Result<Self, VectorError> {
        Self::open_with(dir, Flush::default())
    }

    /// [`EdgeIndex::open`] with a flush policy.
    pub fn open_with(dir: &Path, flush: Flush) -> Result<Self, VectorError> {
        fs::create_dir_all(dir)
            .map_err(|err| VectorError::Unavailable(format!("cannot create {}: {err}", dir.display())))?;
        let lock = File::create(dir.join(LOCK_FILE))
            .map_err(|err| VectorError::Unavailable(format!("cannot open the lock of {}: {err}", dir.display())))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(VectorError::Unavailable(format!(
                    "{} is already open in another index",
                    dir.display()
                )));
            }
            Err(TryLockError::Error(err)) => {
                return Err(VectorError::Unavailable(format!(
                    "cannot lock {}: {err}",
                    dir.display()
                )));
            }
        }

        let (mut wal, replay) = Wal::open(dir)
            .map_err(|err| VectorError::Unavailable(format!("cannot open the log of {}: {err}", dir.display())))?;
        if replay.torn_bytes > 0 {
            tracing::warn!(dir = %dir.display(), bytes = replay.torn_bytes, "dropped an unfinished record at the end of the edge index's log");
        }
        let shard = if shard_exists(dir) {
            let shard = EdgeShard::load(dir, None)
                .map_err(|err| VectorError::Backend(format!("cannot load the shard in {}: {err}", dir.display())))?;
            tracing::info!(dir = %dir.display(), "loaded the edge vector index");
            Some(Arc::new(shard))
        } else {
            None
        };
        if !replay.operations.is_empty() {
            match &shard {
                Some(shard) => replay_log(dir, shard, &mut wal, replay.operations)?,
                None => {
                    tracing::warn!(dir = %dir.display(), "the edge index's log has records but there is no shard: ignored");
                    wal.reset()
                        .map_err(|err| VectorError::Backend(format!("cannot empty the log: {err}")))?;
                }
            }
        }
        let wal_file = wal
            .sync_handle()
            .map_err(|err| VectorError::Unavailable(format!("cannot open the log of {}: {err}", dir.display())))?;

        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            _lock: lock,
            shard: RwLock::new(shard),
            writes: Mutex::new(wal),
            wal_file,
            maintenance: Mutex::new(()),
            auto_optimize_every: AtomicU64::new(0),
            written_since_optimize: AtomicU64::new(0),
            optimizing: AtomicBool::new(false),
            flush,
            applied: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            syncing: tokio::sync::Mutex::new(()),
            checkpointed: Mutex::new(std::time::Instant::now()),
            swap: tokio::sync::RwLock::new(()),
        });
        let background = spawn_background(Arc::downgrade(&shared))?;
        Ok(Self {
            shared,
            background: Some(background),
        })
    }

    /// The flush policy.
    pub fn flush_policy(&self) -> Flush {
        self.shared.flush
    }

    /// Returns once a sync of the log covers write batch `batch`, syncing if none does yet.
    async fn durable(&self, batch: u64) -> Result<(), VectorError> {
        if self.shared.synced.load(Ordering::Acquire) >= batch {
            return Ok(());
        }
        let _turn = self.shared.syncing.lock().await;
        // The sync that just ended may have covered this batch too.
        if self.shared.synced.load(Ordering::Acquire) >= batch {
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || shared.sync_log())
            .await
            .map_err(|err| VectorError::Backend(format!("the vector index task failed: {err}")))?
    }

    /// Flushes the segments and empties the log (what [`VectorIndex::flush`] does).
    pub async fn checkpoint(&self) -> Result<(), VectorError> {
        self.blocking(|shared, shard| shared.checkpoint(shard)).await
    }

    /// Runs qdrant's optimisers until they have nothing left to do: builds HNSW graphs for
    /// segments above the indexing threshold, merges small segments and vacuums deleted
    /// points. Returns whether anything changed.
    ///
    /// Blocks a thread of the blocking pool for as long as it takes (minutes for 100,000
    /// points of 384 dimensions on two cores); writes and searches go on meanwhile, flushes
    /// wait. Searches are exact and correct without it; it pays off when one filter selects
    /// many thousands of points, and it reclaims the space of deleted points.
    pub async fn optimize(&self) -> Result<bool, VectorError> {
        self.blocking(|shared, shard| shared.optimize(shard)).await
    }

    /// Optimises in the background once every `points` upserted or deleted points (`None`,
    /// the default, turns it off). The optimisation runs on tokio's blocking pool while
    /// writes and searches go on; a running one cannot be interrupted, so it delays flushes
    /// and the shutdown of the runtime until it ends, and keeps the directory locked even
    /// after the index is dropped. Repeated passes are cheap: they only rebuild segments
    /// that grew past the indexing threshold or hold many deleted points. 10,000 suits
    /// 384-dimension embeddings.
    pub fn set_auto_optimize(&self, points: Option<u64>) {
        self.shared
            .auto_optimize_every
            .store(points.unwrap_or(0), Ordering::Relaxed);
    }

    /// Segment and point counts of the shard.
    pub async fn stats(&self) -> Result<EdgeStats, VectorError> {
        self.blocking(|_, shard| {
            let info = shard.info();
            Ok(EdgeStats {
                segments: info.segments_count,
                points: info.points_count,
            })
        })
        .await
    }

    /// Counts written points and starts an automatic optimisation when they are due.
    fn count_writes(&self, points: usize) {
        let shared = &self.shared;
        let every = shared.auto_optimize_every.load(Ordering::Relaxed);
        if every == 0 {
            return;
        }
        let points = points as u64;
        let written = shared.written_since_optimize.fetch_add(points, Ordering::Relaxed) + points;
        if written < every || shared.optimizing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            shared.optimizing.store(false, Ordering::Release);
            return;
        };
        let shared = Arc::clone(shared);
        // Detached on purpose: the caller's write is done, and errors only need a log line.
        drop(runtime.spawn_blocking(move || {
            let result = shared
                .current()
                .map(|shard| shared.optimize(&shard))
                .unwrap_or(Ok(false));
            shared.optimizing.store(false, Ordering::Release);
            if let Err(err) = result {
                tracing::warn!(dir = %shared.dir.display(), error = %err, "automatic optimisation of the edge vector index failed");
            }
        }));
    }

    /// Runs `work` on the blocking pool with the shard, failing if there is none yet.
    async fn blocking<T, F>(&self, work: F) -> Result<T, VectorError>
    where
        T: Send + 'static,
        F: FnOnce(&Shared, &EdgeShard) -> Result<T, VectorError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || {
            let shard = shared.current().ok_or_else(|| {
                VectorError::Unavailable(format!(
                    "the vector index in {} has no shard yet: ensure_ready was not called",
                    shared.dir.display()
                ))
            })?;
            work(&shared, &shard)
        })
        .await
        .map_err(|err| VectorError::Backend(format!("the vector index task failed: {err}")))?
    }

    /// Applies update operations in order, serialised with flushes; with
    /// [`Flush::EveryWrite`], returns once they are durable.
    async fn update(&self, operations: Vec<UpdateOperation>) -> Result<(), VectorError> {
        if operations.is_empty() {
            return Ok(());
        }
        let batch = self.apply(operations).await?;
        self.acknowledge(batch).await
    }

    /// With [`Flush::EveryWrite`], returns once write batch `batch` (and every batch before
    /// it) is durable.
    async fn acknowledge(&self, batch: u64) -> Result<(), VectorError> {
        if self.shared.flush == Flush::EveryWrite {
            self.durable(batch).await?;
        }
        Ok(())
    }

    /// Applies update operations in order and appends them to the log, serialised with
    /// flushes, without waiting for a sync; returns the write batch that covers them.
    async fn apply(&self, operations: Vec<UpdateOperation>) -> Result<u64, VectorError> {
        self.blocking(move |shared, shard| {
            let mut wal = lock(&shared.writes);
            let mut result = Ok(());
            let mut applied = Vec::with_capacity(operations.len());
            for operation in operations {
                let logged = operation.clone();
                result = shard.update(operation).map_err(from_edge);
                if result.is_err() {
                    break;
                }
                applied.push(logged);
            }
            // The operations that were applied are logged, even when a later one failed.
            wal.append(&applied)
                .map_err(|err| VectorError::Unavailable(format!("cannot append to the index's log: {err}")))?;
            let batch = shared.applied.fetch_add(1, Ordering::AcqRel) + 1;
            result.map(|()| batch)
        })
        .await
    }

    async fn search(
        &self,
        query: VectorInternal,
        vector_name: &'static str,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        let Some(filter) = edge_filter(filter) else {
            return Ok(Vec::new());
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        let request = SearchRequest {
            query: QueryEnum::Nearest(NamedQuery {
                query,
                using: Some(vector_name.to_string()),
            }),
            filter: Some(filter),
            params: None,
            limit,
            offset: 0,
            with_payload: Some(WithPayloadInterface::Bool(false)),
            with_vector: Some(WithVector::Bool(false)),
            score_threshold: None,
        };
        let _swap = self.shared.swap.read().await;
        let points = self
            .blocking(move |_, shard| shard.search(request).map_err(from_edge))
            .await?;
        Ok(hits(points))
    }

    /// The points as qdrant-edge stores them, each checked; none for none, even before
    /// [`VectorIndex::ensure_ready`].
    fn point_structs(&self, points: &[IndexedPoint]) -> Result<Vec<PointStructPersisted>, VectorError> {
        if points.is_empty() {
            return Ok(Vec::new());
        }
        let dim = self
            .dense_dim()
            .ok_or_else(|| VectorError::Unavailable("the vector index has no shard yet".into()))?;
        points.iter().map(|point| point_struct(point, dim)).collect()
    }

    fn dense_dim(&self) -> Option<usize> {
        let shard = self.shared.current()?;
        let config = shard.config();
        config.vectors.get(DENSE_VECTOR).map(|params| params.size)
    }
}

/// Replays the operations of the log on a freshly loaded shard (they are idempotent: upserts,
/// payload changes and deletes by id), flushes the segments and empties the log.
fn replay_log(
    dir: &Path,
    shard: &EdgeShard,
    wal: &mut Wal,
    operations: Vec<UpdateOperation>,
) -> Result<(), VectorError> {
    let count = operations.len();
    let mut failed = 0;
    for operation in operations {
        if let Err(err) = shard.update(operation) {
            failed += 1;
            tracing::warn!(dir = %dir.display(), error = %err, "an operation of the edge index's log did not replay");
        }
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.flush())).map_err(|_| {
        VectorError::Unavailable(format!("cannot flush the shard in {} after the replay", dir.display()))
    })?;
    wal.reset()
        .map_err(|err| VectorError::Backend(format!("cannot empty the log of {}: {err}", dir.display())))?;
    tracing::warn!(dir = %dir.display(), replayed = count - failed, failed, "replayed the edge index's log after an unclean stop");
    Ok(())
}

/// Syncs the log on the timer of [`Flush::Every`] and checkpoints on schedule, until the
/// index is gone.
fn spawn_background(shared: std::sync::Weak<Shared>) -> Result<Background, VectorError> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("edge-log".into())
        .spawn(move || {
            let mut last_sync = std::time::Instant::now();
            loop {
                if stopped.recv_timeout(TICK) != Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if let Flush::Every(interval) = shared.flush
                    && last_sync.elapsed() >= interval
                {
                    last_sync = std::time::Instant::now();
                    if let Err(err) = shared.sync_log() {
                        tracing::error!(dir = %shared.dir.display(), %err, "scheduled sync of the index's log failed");
                    }
                }
                let log_bytes = lock(&shared.writes).len();
                let due = log_bytes >= CHECKPOINT_BYTES
                    || (log_bytes > 0 && lock(&shared.checkpointed).elapsed() >= CHECKPOINT_EVERY);
                if due
                    && let Some(shard) = shared.current()
                    && let Err(err) = shared.checkpoint(&shard)
                {
                    tracing::error!(dir = %shared.dir.display(), %err, "checkpoint of the edge index failed");
                }
            }
        })
        .map(|thread| Background { stop, thread })
        .map_err(|err| VectorError::Unavailable(format!("cannot start the index's log thread: {err}")))
}

impl Shared {
    /// Syncs the log; afterwards every batch applied before the sync started is durable.
    fn sync_log(&self) -> Result<(), VectorError> {
        let covered = self.applied.load(Ordering::Acquire);
        self.wal_file
            .sync_data()
            .map_err(|err| VectorError::Unavailable(format!("cannot sync the index's log: {err}")))?;
        self.synced.fetch_max(covered, Ordering::AcqRel);
        Ok(())
    }

    /// Flushes the segments and empties the log. `EdgeShard::flush` panics when it cannot
    /// write (a full disk, a removed directory): that is an error of this flush, not of the
    /// process, and the log keeps its records.
    fn checkpoint(&self, shard: &EdgeShard) -> Result<(), VectorError> {
        let _maintenance = lock(&self.maintenance);
        let mut wal = lock(&self.writes);
        let covered = self.applied.load(Ordering::Acquire);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.flush())).map_err(|panic| {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown cause");
            VectorError::Unavailable(format!("the edge vector index could not flush: {why}"))
        })?;
        wal.reset()
            .map_err(|err| VectorError::Unavailable(format!("cannot empty the index's log: {err}")))?;
        self.synced.fetch_max(covered, Ordering::AcqRel);
        *lock(&self.checkpointed) = std::time::Instant::now();
        Ok(())
    }

    fn optimize(&self, shard: &EdgeShard) -> Result<bool, VectorError> {
        let _maintenance = lock(&self.maintenance);
        self.written_since_optimize.store(0, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let changed = shard.optimize().map_err(from_edge)?;
        tracing::info!(
            dir = %self.dir.display(),
            changed,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "optimised the edge vector index"
        );
        Ok(changed)
    }

    fn current(&self) -> Option<Arc<EdgeShard>> {
        self.shard.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[async_trait]
impl VectorIndex for EdgeIndex {
    fn name(&self) -> &'static str {
        "qdrant-edge"
    }

    async fn ensure_ready(&self, dim: usize) -> Result<(), VectorError> {
        if dim == 0 {
            return Err(VectorError::Invalid("the dense dimension must be positive".into()));
        }
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || {
            let mut slot = shared.shard.write().unwrap_or_else(PoisonError::into_inner);
            let shard = match &*slot {
                Some(shard) => {
                    check_config(&shard.config(), dim)?;
                    Arc::clone(shard)
                }
                None => {
                    let shard = EdgeShard::new(&shared.dir, shard_config(dim)).map_err(|err| {
                        VectorError::Backend(format!("cannot create a shard in {}: {err}", shared.dir.display()))
                    })?;
                    tracing::info!(dir = %shared.dir.display(), dim, "created the edge vector index");
                    let shard = Arc::new(shard);
                    *slot = Some(Arc::clone(&shard));
                    shard
                }
            };
            drop(slot);
            // Idempotent: existing indexes are kept, missing ones (an older layout) are built.
            let _writes = lock(&shared.writes);
            for operation in payload_index_operations() {
                shard.update(operation).map_err(from_edge)?;
            }
            // Points written before tenancy belong to the default tenant, as their rows do.
            shard.update(default_tenant_operation()).map_err(from_edge)?;
            Ok(())
        })
        .await
        .map_err(|err| VectorError::Backend(format!("the vector index task failed: {err}")))?
    }

    async fn upsert(&self, points: Vec<IndexedPoint>) -> Result<(), VectorError> {
        if points.is_empty() {
            return Ok(());
        }
        let structs = self.point_structs(&points)?;
        let operations = chunks(structs, UPSERT_CHUNK)
            .into_iter()
            .map(upsert_operation)
            .collect();
        self.update(operations).await?;
        self.count_writes(points.len());
        Ok(())
    }

    async fn set_status(&self, ids: &[String], status: MemoryStatus) -> Result<(), VectorError> {
        let ids = point_ids(ids)?;
        if ids.is_empty() {
            return Ok(());
        }
        let mut payload = Map::new();
        payload.insert(field::STATUS.into(), Value::from(status.as_str()));
        // A filter on the ids rather than a list of points: unknown ids are skipped instead
        // of failing the whole operation.
        let has_id: HasIdCondition = ids.into_iter().collect();
        let operation = UpdateOperation::PayloadOperation(PayloadOps::SetPayload(SetPayloadOp {
            payload: Payload(payload),
            points: None,
            filter: Some(Filter::new_must(Condition::HasId(has_id))),
            key: None,
        }));
        self.update(vec![operation]).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), VectorError> {
        let ids = point_ids(ids)?;
        if ids.is_empty() {
            return Ok(());
        }
        let count = ids.len();
        self.update(vec![UpdateOperation::PointOperation(PointOperations::DeletePoints {
            ids,
        })])
        .await?;
        self.count_writes(count);
        Ok(())
    }

    /// Writes the points [`UPSERT_CHUNK`] at a time, each chunk under `swap` (so no search
    /// reads the segments while that chunk moves points between them) and searches of every
    /// user run between chunks; then deletes the stale points, and returns once one sync of
    /// the log covers it all. The log holds the chunks in the order they were applied and the
    /// deletion after them, so a crash part way leaves a prefix: every memory keeps its old
    /// point or has its new one, and no stale point is gone before every new point is written.
    async fn replace(&self, points: Vec<IndexedPoint>, stale: &[String]) -> Result<(), VectorError> {
        // Every point and id is checked before anything is written.
        let structs = self.point_structs(&points)?;
        let stale = point_ids(stale)?;
        let written = structs.len() + stale.len();
        let mut last = None;
        for chunk in chunks(structs, UPSERT_CHUNK) {
            let _swap = self.shared.swap.write().await;
            last = Some(self.apply(vec![upsert_operation(chunk)]).await?);
        }
        if !stale.is_empty() {
            // A deletion moves no other point: searches need not wait for it.
            let delete = UpdateOperation::PointOperation(PointOperations::DeletePoints { ids: stale });
            last = Some(self.apply(vec![delete]).await?);
        }
        self.count_writes(written);
        match last {
            Some(batch) => self.acknowledge(batch).await,
            None => Ok(()),
        }
    }

    async fn delete_user(&self, owner: &Owner) -> Result<(), VectorError> {
        let filter = owner_filter(owner);
        self.update(vec![UpdateOperation::PointOperation(
            PointOperations::DeletePointsByFilter(filter),
        )])
        .await
    }

    async fn search_dense(
        &self,
        vector: &[f32],
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        let dim = self
            .dense_dim()
            .ok_or_else(|| VectorError::Unavailable("the vector index has no shard yet".into()))?;
        check_dense(vector, dim)?;
        self.search(VectorInternal::Dense(vector.to_vec()), DENSE_VECTOR, filter, limit)
            .await
    }

    async fn search_sparse(
        &self,
        vector: &SparseVector,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        check_sparse(vector)?;
        if vector.is_empty() {
            return Ok(Vec::new());
        }
        let query = qdrant_edge::SparseVector {
            indices: vector.indices.clone(),
            values: vector.values.clone(),
        };
        self.search(VectorInternal::Sparse(query), SPARSE_VECTOR, filter, limit)
            .await
    }

    async fn count(&self, owner: Option<&Owner>) -> Result<u64, VectorError> {
        let filter = owner.map(owner_filter);
        self.blocking(move |_, shard| {
            let count = shard.count(CountRequest { filter, exact: true }).map_err(from_edge)?;
            Ok(count as u64)
        })
        .await
    }

    async fn list_ids(&self, owner: &Owner) -> Result<Vec<String>, VectorError> {
        let filter = owner_filter(owner);
        self.blocking(move |_, shard| {
            let mut ids = Vec::new();
            let mut offset = None;
            loop {
                let (records, next) = shard
                    .scroll(ScrollRequest {
                        offset,
                        limit: Some(SCROLL_PAGE),
                        filter: Some(filter.clone()),
                        with_payload: Some(WithPayloadInterface::Bool(false)),
                        with_vector: WithVector::Bool(false),
                        order_by: None,
                    })
                    .map_err(from_edge)?;
                ids.extend(records.iter().filter_map(|record| id_of(&record.id)));
                match next {
                    Some(next) => offset = Some(next),
                    None => return Ok(ids),
                }
            }
        })
        .await
    }

    async fn flush(&self) -> Result<(), VectorError> {
        self.checkpoint().await
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these leaves nothing inconsistent: `()`, an instant, or a
    // log whose length is updated only after a complete append.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn shard_exists(dir: &Path) -> bool {
    dir.join(CONFIG_FILE).is_file()
        || fs::read_dir(dir.join(SEGMENTS_DIR)).is_ok_and(|mut entries| entries.next().is_some())
}

fn shard_config(dim: usize) -> EdgeConfig {
    EdgeConfigBuilder::new()
        .vector(
            DENSE_VECTOR,
            EdgeVectorParamsBuilder::new(dim, Distance::Cosine).build(),
        )
        .sparse_vector(
            SPARSE_VECTOR,
            EdgeSparseVectorParamsBuilder::new().modifier(Modifier::Idf).build(),
        )
        .build()
}

fn check_config(config: &EdgeConfig, dim: usize) -> Result<(), VectorError> {
    let dense = config
        .vectors
        .get(DENSE_VECTOR)
        .ok_or_else(|| VectorError::Backend(format!("the shard has no {DENSE_VECTOR:?} vector")))?;
    if dense.size != dim {
        return Err(VectorError::Dimension {
            expected: dense.size,
            actual: dim,
        });
    }
    let sparse = config
        .sparse_vectors
        .get(SPARSE_VECTOR)
        .ok_or_else(|| VectorError::Backend(format!("the shard has no {SPARSE_VECTOR:?} vector")))?;
    if sparse.modifier != Some(Modifier::Idf) {
        return Err(VectorError::Backend(format!(
            "the {SPARSE_VECTOR:?} vector of the shard does not apply IDF"
        )));
    }
    Ok(())
}

/// Every point of an owner.
fn owner_filter(owner: &Owner) -> Filter {
    Filter {
        must: Some(vec![
            keyword(field::TENANT_ID, &owner.tenant_id),
            keyword(field::USER_ID, &owner.user_id),
        ]),
        ..Filter::new()
    }
}

/// Gives the points without a tenant (written before tenancy) the default tenant.
fn default_tenant_operation() -> UpdateOperation {
    let mut payload = Map::new();
    payload.insert(field::TENANT_ID.into(), Value::from(DEFAULT_TENANT));
    UpdateOperation::PayloadOperation(PayloadOps::SetPayload(SetPayloadOp {
        payload: Payload(payload),
        points: None,
        filter: Some(Filter::new_must(Condition::IsEmpty(IsEmptyCondition::from(path(
            field::TENANT_ID,
        ))))),
        key: None,
    }))
}

fn payload_index_operations() -> Vec<UpdateOperation> {
    let create = |key: &str, schema: PayloadFieldSchema| {
        UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(CreateIndex {
            field_name: path(key),
            field_schema: Some(schema),
        }))
    };
    let keyword = || PayloadFieldSchema::FieldParams(PayloadSchemaParams::Keyword(KeywordIndexParams::default()));
    let mut operations = vec![create(
        field::USER_ID,
        PayloadFieldSchema::FieldParams(PayloadSchemaParams::Keyword(KeywordIndexParams {
            is_tenant: Some(true),
            ..KeywordIndexParams::default()
        })),
    )];
    operations.extend(field::KEYWORDS.iter().map(|key| create(key, keyword())));
    operations.push(create(
        field::CROSS_PROJECT,
        PayloadFieldSchema::FieldParams(PayloadSchemaParams::Bool(BoolIndexParams::default())),
    ));
    operations.push(create(
        field::OCCURRED_AT_MS,
        PayloadFieldSchema::FieldParams(PayloadSchemaParams::Integer(IntegerIndexParams::default())),
    ));
    operations
}

/// Rejects a dense vector of another dimension or with a value that is not finite; both
/// backends check before they send anything.
pub(super) fn check_dense(vector: &[f32], dim: usize) -> Result<(), VectorError> {
    if vector.len() != dim {
        return Err(VectorError::Dimension {
            expected: dim,
            actual: vector.len(),
        });
    }
    if !vector.iter().all(|value| value.is_finite()) {
        return Err(VectorError::Invalid(
            "the dense vector has a value that is not finite".into(),
        ));
    }
    Ok(())
}

/// Rejects a sparse vector whose indices are not sorted and distinct, whose lengths differ
/// or whose values are not all finite.
pub(super) fn check_sparse(vector: &SparseVector) -> Result<(), VectorError> {
    if vector.indices.len() != vector.values.len() {
        return Err(VectorError::Invalid(format!(
            "the sparse vector has {} indices but {} values",
            vector.indices.len(),
            vector.values.len()
        )));
    }
    if !vector.indices.windows(2).all(|pair| pair[0] < pair[1]) {
        return Err(VectorError::Invalid(
            "the sparse vector indices are not sorted and distinct".into(),
        ));
    }
    if !vector.values.iter().all(|value| value.is_finite()) {
        return Err(VectorError::Invalid(
            "the sparse vector has a value that is not finite".into(),
        ));
    }
    Ok(())
}

fn point_struct(point: &IndexedPoint, dim: usize) -> Result<PointStructPersisted, VectorError> {
    let id = PointId::Uuid(point_uuid(&point.id)?);
    check_dense(&point.dense, dim)?;
    check_sparse(&point.sparse)?;
    let mut vectors = HashMap::new();
    vectors.insert(DENSE_VECTOR.to_string(), VectorPersisted::Dense(point.dense.clone()));
    // A memory without terms has no sparse vector at all rather than an empty one.
    if !point.sparse.is_empty() {
        vectors.insert(
            SPARSE_VECTOR.to_string(),
            VectorPersisted::Sparse(qdrant_edge::SparseVector {
                indices: point.sparse.indices.clone(),
                values: point.sparse.values.clone(),
            }),
        );
    }
    Ok(PointStructPersisted {
        id,
        vector: VectorStructPersisted::Named(vectors),
        payload: Some(Payload(payload(point))),
    })
}

/// The payload of a point; both backends store the same one.
pub(super) fn payload(point: &IndexedPoint) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert(field::TENANT_ID.into(), Value::from(point.tenant_id.as_str()));
    payload.insert(field::USER_ID.into(), Value::from(point.user_id.as_str()));
    payload.insert(field::ROLE_ID.into(), Value::from(point.role_id.as_str()));
    payload.insert(field::CROSS_PROJECT.into(), Value::from(point.project_id.is_none()));
    if let Some(project) = &point.project_id {
        payload.insert(field::PROJECT_ID.into(), Value::from(project.as_str()));
    }
    if let Some(session) = &point.session_id {
        payload.insert(field::SESSION_ID.into(), Value::from(session.as_str()));
    }
    payload.insert(field::MEMORY_TYPE.into(), Value::from(point.memory_type.as_str()));
    payload.insert(field::VISIBILITY.into(), Value::from(point.visibility.as_str()));
    payload.insert(field::STATUS.into(), Value::from(point.status.as_str()));
    payload.insert(field::OCCURRED_AT_MS.into(), Value::from(point.occurred_at_ms));
    payload.insert(
        field::TAGS.into(),
        Value::Array(point.tags.iter().map(|tag| Value::from(tag.as_str())).collect()),
    );
    payload
}

fn point_ids(ids: &[String]) -> Result<Vec<PointId>, VectorError> {
    ids.iter().map(|id| point_uuid(id).map(PointId::Uuid)).collect()
}

fn id_of(id: &PointId) -> Option<String> {
    match id {
        PointId::Uuid(uuid) => Some(memory_id(uuid)),
        PointId::NumId(num) => {
            tracing::warn!(id = num, "skipped a point with a numeric id in the vector index");
            None
        }
    }
}

fn hits(points: Vec<ScoredPoint>) -> Vec<VectorHit> {
    points
        .into_iter()
        .filter_map(|point| id_of(&point.id).map(|id| VectorHit { id, score: point.score }))
        .collect()
}

fn upsert_operation(points: Vec<PointStructPersisted>) -> UpdateOperation {
    UpdateOperation::PointOperation(PointOperations::UpsertPoints(PointInsertOperations::PointsList(points)))
}

fn chunks<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut chunks = Vec::with_capacity(items.len().div_ceil(size));
    let mut current = Vec::with_capacity(size.min(items.len()));
    for item in items {
        current.push(item);
        if current.len() == size {
            chunks.push(std::mem::replace(&mut current, Vec::with_capacity(size)));
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

fn from_edge(err: OperationError) -> VectorError {
    match err {
        OperationError::WrongVectorDimension {
            expected_dim,
            received_dim,
        } => VectorError::Dimension {
            expected: expected_dim,
            actual: received_dim,
        },
        OperationError::ValidationError { .. }
        | OperationError::WrongSparse
        | OperationError::WrongMulti
        | OperationError::VectorNameNotExists { .. }
        | OperationError::TypeError { .. } => VectorError::Invalid(err.to_string()),
        OperationError::Cancelled { .. } | OperationError::Timeout { .. } | OperationError::OutOfMemory { .. } => {
            VectorError::Unavailable(err.to_string())
        }
        other => VectorError::Backend(other.to_string()),
    }
}

fn path(key: &str) -> JsonPath {
    JsonPath {
        first_key: key.to_string(),
        rest: Vec::new(),
    }
}

fn keyword(key: &str, value: &str) -> Condition {
    Condition::Field(FieldCondition::new_match(
        path(key),
        Match::new_value(ValueVariants::String(value.to_string())),
    ))
}

fn any_keyword<'a>(key: &str, values: impl IntoIterator<Item = &'a str>) -> Condition {
    let values: Vec<String> = values.into_iter().map(str::to_string).collect();
    Condition::Field(FieldCondition::new_match(path(key), Match::from(values)))
}

fn flag(key: &str, value: bool) -> Condition {
    Condition::Field(FieldCondition::new_match(
        path(key),
        Match::new_value(ValueVariants::Bool(value)),
    ))
}

/// The qdrant-edge filter of a read (the translation of its [`Plan`]), or `None` when nothing
/// can match (qdrant has no filter that is always false).
fn edge_filter(filter: &MemoryFilter) -> Option<Filter> {
    match condition(&filter.plan())? {
        Condition::Filter(filter) => Some(filter),
        other => Some(Filter::new_must(other)),
    }
}

/// One condition of a plan; `None` only for [`Plan::Never`], which [`Plan::all`] and
/// [`Plan::any`] keep out of every larger plan.
fn condition(plan: &Plan) -> Option<Condition> {
    Some(match plan {
        Plan::Never => return None,
        Plan::All(plans) => Condition::Filter(Filter {
            must: Some(plans.iter().map(condition).collect::<Option<Vec<_>>>()?),
            ..Filter::new()
        }),
        Plan::Any(plans) => Condition::Filter(Filter {
            should: Some(plans.iter().map(condition).collect::<Option<Vec<_>>>()?),
            ..Filter::new()
        }),
        Plan::Is(f, value) => keyword(field::key(*f), value),
        Plan::OneOf(f, values) => any_keyword(field::key(*f), values.iter().map(String::as_str)),
        Plan::CrossProject(cross) => flag(field::CROSS_PROJECT, *cross),
        // Exact for every millisecond timestamp below 2^53 (the year 287,396).
        Plan::OccurredWithin { from_ms, to_ms } => Condition::Field(FieldCondition::new_range(
            path(field::OCCURRED_AT_MS),
            Range {
                gte: from_ms.map(|ms| OrderedFloat(ms as f64)),
                lt: to_ms.map(|ms| OrderedFloat(ms as f64)),
                gt: None,
                lte: None,
            },
        )),
        Plan::HasTag(tag) => keyword(field::TAGS, tag),
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::time::{Duration, Instant};

    use thinkus_common::model::{MemoryType, Visibility};

    use super::*;
    use crate::conformance::vector as conformance;
    use crate::filter::{Layers, Reader};
    use crate::vector::Bm25Encoder;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reopening_keeps_the_data_and_the_dimension() {
        let dir = tempfile::tempdir().expect("tempdir");
        let user = conformance::unique_user("reopen");
        let points = conformance::sample_points(&user, 20);
        {
            let index = EdgeIndex::open(dir.path()).expect("open");
            index.ensure_ready(conformance::DIM).await.expect("ready");
            index.upsert(points.clone()).await.expect("upsert");
            index.flush().await.expect("flush");
            assert!(
                matches!(EdgeIndex::open(dir.path()), Err(VectorError::Unavailable(_))),
                "a second index on the same directory must be refused"
            );
        }
        let index = EdgeIndex::open(dir.path()).expect("reopen");
        assert!(
            matches!(
                index.ensure_ready(conformance::DIM + 1).await,
                Err(VectorError::Dimension { expected, actual })
                    if expected == conformance::DIM && actual == conformance::DIM + 1
            ),
            "the reopened shard keeps its dimension"
        );
        index.ensure_ready(conformance::DIM).await.expect("ready");
        assert_eq!(index.count(Some(&user)).await.expect("count"), 20);
        let mut expected: Vec<String> = points.iter().map(|p| p.id.clone()).collect();
        let mut listed = index.list_ids(&user).await.expect("list");
        expected.sort();
        listed.sort();
        assert_eq!(listed, expected, "every id survives a reopen");
        let hits = index
            .search_dense(&points[3].dense, &MemoryFilter::user(&user), 1)
            .await
            .expect("search");
        assert_eq!(hits[0].id, points[3].id, "vectors survive a reopen");
        let hits = index
            .search_sparse(&points[5].sparse, &MemoryFilter::user(&user), 20)
            .await
            .expect("sparse search");
        assert_eq!(hits[0].id, points[5].id, "sparse vectors survive a reopen");
    }

    /// Points written before tenancy have no tenant in their payload: `ensure_ready` gives
    /// them the default tenant, as the migration does to their rows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn points_without_a_tenant_join_the_default_tenant() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = EdgeIndex::open(dir.path()).expect("open");
        index.ensure_ready(conformance::DIM).await.expect("ready");
        let owner = Owner::new(DEFAULT_TENANT, "pre-tenancy");
        let point = conformance::sample_points(&owner, 1).remove(0);
        let mut old = point_struct(&point, conformance::DIM).expect("point");
        if let Some(payload) = old.payload.as_mut() {
            payload.0.remove(field::TENANT_ID);
        }
        index
            .update(vec![UpdateOperation::PointOperation(PointOperations::UpsertPoints(
                PointInsertOperations::PointsList(vec![old]),
            ))])
            .await
            .expect("an old point");
        assert_eq!(
            index.count(Some(&owner)).await.expect("count"),
            0,
            "without a tenant the point matches no owner"
        );
        index.ensure_ready(conformance::DIM).await.expect("ready again");
        assert_eq!(index.count(Some(&owner)).await.expect("count"), 1);
        let hits = index
            .search_dense(&point.dense, &MemoryFilter::user(&owner), 1)
            .await
            .expect("search");
        assert_eq!(hits.first().map(|h| h.id.clone()), Some(point.id.clone()));
        assert_eq!(
            index
                .count(Some(&Owner::new("acme", "pre-tenancy")))
                .await
                .expect("count"),
            0,
            "the same user id in another tenant does not get it"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_directory_needs_ensure_ready() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = EdgeIndex::open(dir.path()).expect("open");
        assert!(matches!(index.count(None).await, Err(VectorError::Unavailable(_))));
        let points = conformance::sample_points(&conformance::unique_user("u"), 1);
        assert!(matches!(index.upsert(points).await, Err(VectorError::Unavailable(_))));
        assert!(matches!(index.ensure_ready(0).await, Err(VectorError::Invalid(_))));
        index.ensure_ready(conformance::DIM).await.expect("ready");
        assert_eq!(index.count(None).await.expect("count"), 0);
    }

    /// An index rebuild replaces a user's points while recall searches them: `replace` writes
    /// the points, removes the stale one, and searches running alongside (across
    /// optimisations and flushes) always find the points. Empty recalls during rebuilds were
    /// seen through the server (5 of 120 recalls during 20 rebuilds of a 3-memory user) but not
    /// here; tests/it/rebuild_index.rs checks recall during repeated swaps.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn searches_never_miss_points_being_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = Arc::new(EdgeIndex::open(dir.path()).expect("open"));
        index.ensure_ready(conformance::DIM).await.expect("ready");
        let user = conformance::unique_user("replace");
        let points = conformance::sample_points(&user, 40);
        index.upsert(points.clone()).await.expect("upsert");
        let stale = conformance::sample_points(&user, 1);
        let filter = MemoryFilter::user(&user);
        let searching = Arc::new(AtomicBool::new(true));
        let searcher = {
            let (index, searching, query) = (index.clone(), searching.clone(), points[7].dense.clone());
            tokio::spawn(async move {
                let (mut searches, mut empty, mut empty_sparse) = (0, 0, 0);
                let sparse = Bm25Encoder::default().query("memory number");
                while searching.load(Ordering::Acquire) {
                    let hits = index.search_dense(&query, &filter, 10).await.expect("search");
                    searches += 1;
                    if hits.is_empty() {
                        empty += 1;
                    }
                    let hits = index.search_sparse(&sparse, &filter, 10).await.expect("search");
                    if hits.is_empty() {
                        empty_sparse += 1;
                    }
                }
                (searches, empty, empty_sparse)
            })
        };
        for round in 0..40 {
            if round % 10 == 0 {
                // Points in a non-appendable segment are moved when replaced.
                index.optimize().await.expect("optimize");
            }
            index.upsert(stale.clone()).await.expect("a stale point");
            index
                .replace(points.clone(), &[stale[0].id.clone()])
                .await
                .expect("replace");
            index.flush().await.expect("flush");
        }
        searching.store(false, Ordering::Release);
        let (searches, empty, empty_sparse) = searcher.await.expect("searcher");
        assert!(searches > 0);
        assert_eq!(
            (empty, empty_sparse),
            (0, 0),
            "of {searches} dense and sparse searches, some found none of the 40 points"
        );
        assert_eq!(
            index.count(Some(&user)).await.expect("count"),
            40,
            "the stale point is gone"
        );
    }

    /// Closing an index whose segments cannot be written (here their directory is gone; a full
    /// disk does the same) does not panic: qdrant-edge's own close would flush and panic, which
    /// at a process's exit ends it with a panic (seen on a full disk).
    #[tokio::test]
    async fn an_index_that_cannot_flush_closes_without_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = EdgeIndex::open_with(dir.path(), Flush::Every(std::time::Duration::from_secs(3600))).expect("open");
        index.ensure_ready(conformance::DIM).await.expect("ready");
        index
            .upsert(conformance::sample_points(&Owner::new("conformance", "unflushed"), 10))
            .await
            .expect("upsert");
        std::fs::remove_dir_all(dir.path().join("segments")).expect("remove the segments");
        let closed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(index)));
        assert!(closed.is_ok(), "closing the index panicked");
        // The log still holds the writes the segments never got.
        let log = std::fs::metadata(dir.path().join(crate::vector::wal::FILE_NAME)).expect("the log");
        assert!(log.len() > 0, "the log was emptied");
    }

    /// A swap of many points lets searches of every user through between its chunks, and
    /// none of them misses a point: each memory has its old point or its new one, and the
    /// stale points go only at the end. Before the swap went by chunks it held every search
    /// out until its last point was written (the recalls that missed their deadline during a
    /// 10,000-memory rebuild, docs/benchmarks.md).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn searches_run_between_the_chunks_of_a_swap() {
        const POINTS: usize = 8 * UPSERT_CHUNK;
        let dir = tempfile::tempdir().expect("tempdir");
        let index = Arc::new(EdgeIndex::open(dir.path()).expect("open"));
        index.ensure_ready(conformance::DIM).await.expect("ready");
        let user = conformance::unique_user("swap");
        let other = conformance::unique_user("swap-other");
        let old = conformance::sample_points(&user, POINTS);
        let stale = conformance::sample_points(&user, 3);
        index.upsert(old.clone()).await.expect("upsert");
        index.upsert(stale.clone()).await.expect("stale points");
        index
            .upsert(conformance::sample_points(&other, 5))
            .await
            .expect("the other user");
        // Points in a non-appendable segment are moved when replaced.
        index.optimize().await.expect("optimize");
        // The same ids with other vectors (the sample generator is seeded by the count).
        let new: Vec<IndexedPoint> = old
            .iter()
            .zip(conformance::sample_points(&user, POINTS + 1))
            .map(|(old, fresh)| IndexedPoint {
                dense: fresh.dense,
                ..old.clone()
            })
            .collect();
        let ids: std::collections::BTreeSet<String> = old.iter().map(|p| p.id.clone()).collect();

        let swapping = Arc::new(AtomicBool::new(true));
        let searcher = {
            let (index, swapping, ids) = (index.clone(), swapping.clone(), ids.clone());
            // The point written last: a search that finds its old vector ran before the last chunk.
            let (last, query) = (new[POINTS - 1].id.clone(), new[POINTS - 1].dense.clone());
            let (user, other) = (user.clone(), other.clone());
            tokio::spawn(async move {
                // (asked, answered, of the user, before the last chunk) of every search.
                let mut searches = Vec::new();
                let mut turn = 0usize;
                while swapping.load(Ordering::Acquire) {
                    turn += 1;
                    let whose = if turn.is_multiple_of(2) { &user } else { &other };
                    let started = Instant::now();
                    let hits = index
                        .search_dense(&query, &MemoryFilter::user(whose), POINTS + 10)
                        .await
                        .expect("search");
                    let answered = Instant::now();
                    let mut before_last = false;
                    if whose == &user {
                        before_last = hits.iter().any(|h| h.id == last && h.score < 0.999);
                        let found: std::collections::BTreeSet<String> = hits.into_iter().map(|h| h.id).collect();
                        let missing = ids.difference(&found).count();
                        assert_eq!(missing, 0, "a search during the swap missed {missing} points");
                    } else {
                        assert_eq!(hits.len(), 5, "the other user's points");
                    }
                    searches.push((started, answered, whose == &user, before_last));
                }
                searches
            })
        };
        // Let the searcher start, then swap.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        index
            .replace(new.clone(), &stale.iter().map(|p| p.id.clone()).collect::<Vec<_>>())
            .await
            .expect("replace");
        let ended = Instant::now();
        swapping.store(false, Ordering::Release);
        let searches = searcher.await.expect("searcher");
        let during: Vec<(bool, bool)> = searches
            .iter()
            .filter(|(asked, answered, _, _)| *asked > started && *answered < ended)
            .map(|(_, _, own, before_last)| (*own, *before_last))
            .collect();
        let own = during.iter().filter(|(own, _)| *own).count();
        let between = during.iter().filter(|(_, before_last)| *before_last).count();
        let others = during.len() - own;
        let _ = writeln!(
            std::io::stderr(),
            "swap of {POINTS} points in {:.0?}: {} searches asked and answered during it, {own} of the \
             user's ({between} before its last chunk), {others} of another user",
            ended - started,
            during.len()
        );
        assert!(
            between >= 2 && others >= 2,
            "searches of the user (between the chunks) and of another user must be answered while a \
             swap of {} chunks runs: {between} and {others} were",
            POINTS / UPSERT_CHUNK
        );

        assert_eq!(
            index.count(Some(&user)).await.expect("count"),
            POINTS as u64,
            "the stale points are gone"
        );
        let listed: std::collections::BTreeSet<String> =
            index.list_ids(&user).await.expect("list").into_iter().collect();
        assert_eq!(listed, ids, "every point is there after the swap");
        for point in [&new[0], &new[POINTS / 2], &new[POINTS - 1]] {
            let hits = index
                .search_dense(&point.dense, &MemoryFilter::user(&user), 1)
                .await
                .expect("search");
            assert!(
                hits.first()
                    .is_some_and(|hit| hit.id == point.id && (hit.score - 1.0).abs() < 1e-4),
                "the new vector replaced the old one: {hits:?}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn optimize_keeps_results_and_searches_go_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = EdgeIndex::open(dir.path()).expect("open");
        index.ensure_ready(conformance::DIM).await.expect("ready");
        let user = conformance::unique_user("optimize");
        let points = conformance::sample_points(&user, 300);
        index.upsert(points.clone()).await.expect("upsert");
        let deleted: Vec<String> = points[..100].iter().map(|p| p.id.clone()).collect();
        index.delete(&deleted).await.expect("delete");
        let before = index
            .search_dense(&points[150].dense, &MemoryFilter::user(&user), 5)
            .await
            .expect("search");
        index.optimize().await.expect("optimize");
        index.flush().await.expect("flush after optimize");
        let after = index
            .search_dense(&points[150].dense, &MemoryFilter::user(&user), 5)
            .await
            .expect("search");
        assert_eq!(
            before.iter().map(|h| &h.id).collect::<Vec<_>>(),
            after.iter().map(|h| &h.id).collect::<Vec<_>>(),
            "optimisation must not change exact results"
        );
        assert_eq!(index.count(Some(&user)).await.expect("count"), 200);
        let stats = index.stats().await.expect("stats");
        assert!(stats.points >= 200, "stats count the points: {stats:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn automatic_optimisation_runs_in_the_background() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = EdgeIndex::open(dir.path()).expect("open");
        index.ensure_ready(conformance::DIM).await.expect("ready");
        let user = conformance::unique_user("auto");
        index
            .upsert(conformance::sample_points(&user, 150))
            .await
            .expect("upsert");
        assert_eq!(
            index.shared.written_since_optimize.load(Ordering::Relaxed),
            0,
            "off by default"
        );

        index.set_auto_optimize(Some(100));
        // Another count, other vectors: the sample generator is seeded by the count.
        let points = conformance::sample_points(&user, 151);
        index.upsert(points.clone()).await.expect("upsert");
        let deadline = Instant::now() + Duration::from_secs(60);
        while index.shared.optimizing.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the optimisation never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            index.shared.written_since_optimize.load(Ordering::Relaxed),
            0,
            "151 written points past a threshold of 100 start an optimisation"
        );
        index.flush().await.expect("flush after the optimisation");
        assert_eq!(index.count(Some(&user)).await.expect("count"), 301);
        let hits = index
            .search_dense(&points[42].dense, &MemoryFilter::user(&user), 1)
            .await
            .expect("search");
        assert_eq!(hits[0].id, points[42].id);
    }

    const CRASH_DIR: &str = "THINKUS_EDGE_CRASH_DIR";

    /// The writer of `flushed_writes_survive_a_crash`, run by it in a child process; does
    /// nothing without its directory variable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a helper that `flushed_writes_survive_a_crash` runs in a child process"]
    async fn crash_writer() {
        let Ok(dir) = std::env::var(CRASH_DIR) else {
            return;
        };
        let index = EdgeIndex::open(Path::new(&dir)).expect("open");
        index.ensure_ready(conformance::DIM).await.expect("ready");
        index
            .upsert(conformance::sample_points(&Owner::new("conformance", "flushed"), 10))
            .await
            .expect("upsert");
        index.flush().await.expect("flush");
        // Acknowledged but never flushed to the segments: only the log has them.
        index
            .upsert(conformance::sample_points(&Owner::new("conformance", "unflushed"), 10))
            .await
            .expect("upsert");
        // Ends the process without running destructors, as a crash would: nothing flushes
        // on the way out.
        std::process::exit(0);
    }

    #[test]
    fn flushed_writes_survive_a_crash() {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "vector::edge::tests::crash_writer",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CRASH_DIR, dir.path())
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run the writer");
        assert!(status.success(), "the writer failed: {status}");

        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let index = EdgeIndex::open(dir.path()).expect("reopen after the crash");
            index.ensure_ready(conformance::DIM).await.expect("ready");
            assert_eq!(
                index
                    .count(Some(&Owner::new("conformance", "flushed")))
                    .await
                    .expect("count"),
                10,
                "writes flushed before a crash survive it"
            );
            assert_eq!(
                index
                    .count(Some(&Owner::new("conformance", "unflushed")))
                    .await
                    .expect("count"),
                10,
                "acknowledged writes survive a crash without a flush: the log is replayed"
            );
            // Whatever survived is consistent: each point finds itself.
            for point in conformance::sample_points(&Owner::new("conformance", "flushed"), 10)
                .iter()
                .take(3)
            {
                let hits = index
                    .search_dense(
                        &point.dense,
                        &MemoryFilter::user(&Owner::new("conformance", "flushed")),
                        1,
                    )
                    .await
                    .expect("search");
                assert!(
                    hits.first().is_some_and(|hit| (hit.score - 1.0).abs() < 1e-4),
                    "a flushed vector is intact: {hits:?}"
                );
            }
        });
    }

    /// Synthetic memories at the product's scale: random unit vectors and BM25 documents
    /// whose words follow Zipf's law over a 20,000-word vocabulary, as natural text does.
    struct Corpus {
        rng: conformance::SplitMix,
        encoder: Bm25Encoder,
        vocabulary: Vec<String>,
        /// Cumulative Zipf weights of the vocabulary ranks.
        cumulative: Vec<f64>,
        next_time: i64,
    }

    impl Corpus {
        fn new(seed: u64) -> Self {
            let syllables = [
                "ba", "ke", "mi", "so", "tu", "ra", "le", "ni", "po", "gu", "da", "fe", "hi", "jo", "ku", "za", "ve",
                "wi", "yo", "xu",
            ];
            let vocabulary: Vec<String> = (0..20_000usize)
                .map(|mut i| {
                    let mut word = String::from("q");
                    for _ in 0..4 {
                        word.push_str(syllables[i % syllables.len()]);
                        i /= syllables.len();
                    }
                    word
                })
                .collect();
            let mut total = 0.0;
            let cumulative = (1..=vocabulary.len())
                .map(|rank| {
                    total += 1.0 / (rank as f64).powf(1.05);
                    total
                })
                .collect();
            Self {
                rng: conformance::SplitMix::new(seed),
                encoder: Bm25Encoder::default(),
                vocabulary,
                cumulative,
                next_time: 1_700_000_000_000,
            }
        }

        fn zipf_word(&mut self) -> &str {
            let total = self.cumulative.last().copied().unwrap_or(1.0);
            let target = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = self.cumulative.partition_point(|&c| c < target);
            &self.vocabulary[rank.min(self.vocabulary.len() - 1)]
        }

        fn text(&mut self) -> String {
            let words = 8 + self.rng.below(33);
            (0..words)
                .map(|_| self.zipf_word().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        }

        fn point(&mut self, user: &str, dim: usize) -> IndexedPoint {
            let text = self.text();
            self.next_time += 1 + self.rng.below(60_000) as i64;
            let rng = &mut self.rng;
            IndexedPoint {
                id: conformance::new_id(),
                tenant_id: "bench".into(),
                user_id: user.to_string(),
                role_id: rng.pick(&["cto", "cfo", "designer"]).to_string(),
                project_id: rng
                    .pick(&[Some("p1"), Some("p2"), Some("p3"), Some("p4"), Some("p5"), None])
                    .map(str::to_string),
                session_id: Some(format!("s{}", rng.below(50))),
                memory_type: *rng.pick(MemoryType::ALL),
                visibility: *rng.pick(Visibility::ALL),
                status: if rng.chance(90) {
                    MemoryStatus::Active
                } else {
                    *rng.pick(MemoryStatus::ALL)
                },
                occurred_at_ms: self.next_time,
                tags: if rng.chance(20) {
                    vec![rng.pick(&["infra", "cost", "design", "legal"]).to_string()]
                } else {
                    Vec::new()
                },
                dense: rng.unit_vector(dim),
                sparse: self.encoder.document(&text),
            }
        }

        /// Two to four content words: neither the commonest nor the rarest ranks.
        fn sparse_query(&mut self) -> SparseVector {
            let words = 2 + self.rng.below(3);
            let text = (0..words)
                .map(|_| self.vocabulary[20 + self.rng.below(3_000)].clone())
                .collect::<Vec<_>>()
                .join(" ");
            self.encoder.query(&text)
        }

        fn reader_filter(&mut self, user: &str) -> MemoryFilter {
            let mut filter = MemoryFilter::user(&Owner::new("bench", user));
            filter.reader = Some(Reader {
                role_id: self.rng.pick(&["cto", "cfo", "designer"]).to_string(),
                project_id: Some(format!("p{}", 1 + self.rng.below(5))),
                layers: Layers::Both,
            });
            filter
        }
    }

    fn median_and_p95(mut samples: Vec<Duration>) -> (Duration, Duration) {
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        (at(0.5), at(0.95))
    }

    fn dir_size(path: &Path) -> u64 {
        fs::read_dir(path).map_or(0, |entries| {
            entries
                .flatten()
                .map(|entry| match entry.metadata() {
                    Ok(meta) if meta.is_dir() => dir_size(&entry.path()),
                    Ok(meta) => meta.len(),
                    Err(_) => 0,
                })
                .sum()
        })
    }

    /// Times filtered searches of the heavy user and of small users; asserts that a stored
    /// vector finds its own point first (recall of the index) and that searches fill their
    /// limit.
    async fn time_searches(index: &EdgeIndex, corpus: &mut Corpus, stored: &[IndexedPoint], label: &str) {
        const QUERIES: usize = 200;
        const LIMIT: usize = 20;
        let mut found_self = 0;
        let mut tried_self = 0;
        for (who, user) in [
            ("heavy user, 10,000 points", "bench-heavy"),
            ("small users, 1,000 points", ""),
        ] {
            let mut dense = Vec::with_capacity(QUERIES);
            let mut sparse = Vec::with_capacity(QUERIES);
            let mut sparse_hits = 0;
            for i in 0..QUERIES {
                let user = if user.is_empty() {
                    format!("bench-user-{}", corpus.rng.below(100))
                } else {
                    user.to_string()
                };
                let filter = corpus.reader_filter(&user);
                let vector = corpus.rng.unit_vector(384);
                let started = Instant::now();
                let hits = index.search_dense(&vector, &filter, LIMIT).await.expect("dense");
                dense.push(started.elapsed());
                assert_eq!(hits.len(), LIMIT, "a filtered dense search fills its limit");

                let query = corpus.sparse_query();
                let started = Instant::now();
                let hits = index.search_sparse(&query, &filter, LIMIT).await.expect("sparse");
                sparse.push(started.elapsed());
                sparse_hits += hits.len();

                if i % 10 == 0 {
                    let target = &stored[corpus.rng.below(stored.len())];
                    let mut own = MemoryFilter::user(&Owner::new("bench", target.user_id.clone()));
                    own.statuses = MemoryStatus::ALL.to_vec();
                    let hits = index.search_dense(&target.dense, &own, 1).await.expect("dense");
                    tried_self += 1;
                    if hits.first().is_some_and(|hit| hit.id == target.id) {
                        found_self += 1;
                    } else {
                        let _ = writeln!(
                            std::io::stderr(),
                            "[{label}] missed {} ({:?}) of {}: got {hits:?}",
                            target.id,
                            target.status,
                            target.user_id
                        );
                    }
                }
            }
            let (dense_p50, dense_p95) = median_and_p95(dense);
            let (sparse_p50, sparse_p95) = median_and_p95(sparse);
            let _ = writeln!(
                std::io::stderr(),
                "[{label}] {who}: dense p50 {dense_p50:.2?} p95 {dense_p95:.2?}; \
                 sparse p50 {sparse_p50:.2?} p95 {sparse_p95:.2?} ({:.1} hits per query)",
                sparse_hits as f64 / QUERIES as f64
            );
            assert!(sparse_hits > 0, "sparse queries of common words find memories");
        }
        let _ = writeln!(
            std::io::stderr(),
            "[{label}] a stored vector found its own point first {found_self}/{tried_self} times"
        );
        assert!(found_self * 100 >= tried_self * 95, "recall: {found_self}/{tried_self}");
    }

    /// Run with `cargo test --release -- --ignored search_latency_at_scale`; prints to
    /// stderr even without `--nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a benchmark: inserts 110,000 points of 384 dimensions, minutes in release mode"]
    async fn search_latency_at_scale() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = EdgeIndex::open(dir.path()).expect("open");
        index.ensure_ready(384).await.expect("ready");
        let mut corpus = Corpus::new(0xbe7c);
        let mut log = std::io::stderr();

        let heavy = ("bench-heavy".to_string(), 10_000);
        let users = (0..100).map(|i| (format!("bench-user-{i}"), 1_000));
        let mut samples = Vec::new();
        let started = Instant::now();
        let mut written = 0;
        for (user, count) in std::iter::once(heavy).chain(users) {
            for _ in 0..count / 1_000 {
                let points: Vec<IndexedPoint> = (0..1_000).map(|_| corpus.point(&user, 384)).collect();
                samples.push(points[corpus.rng.below(points.len())].clone());
                index.upsert(points).await.expect("upsert");
                written += 1_000;
            }
        }
        let insert = started.elapsed();
        let started = Instant::now();
        index.flush().await.expect("flush");
        let _ = writeln!(
            log,
            "inserted {written} points (generation included) in {insert:.1?} ({:.0} points/s); flush {:.1?}",
            written as f64 / insert.as_secs_f64(),
            started.elapsed()
        );
        assert_eq!(index.count(None).await.expect("count"), written as u64);
        let _ = writeln!(log, "before optimize: {:?}", index.stats().await.expect("stats"));
        time_searches(&index, &mut corpus, &samples, "no optimize").await;

        let started = Instant::now();
        let changed = index.optimize().await.expect("optimize");
        let _ = writeln!(
            log,
            "optimize changed={changed} in {:.1?}; after: {:?}",
            started.elapsed(),
            index.stats().await.expect("stats")
        );
        time_searches(&index, &mut corpus, &samples, "optimized").await;

        // What durability costs per write batch: a small upsert, then a flush.
        let mut flushes = Vec::new();
        for _ in 0..20 {
            let points: Vec<IndexedPoint> = (0..10).map(|_| corpus.point("bench-user-0", 384)).collect();
            index.upsert(points).await.expect("upsert");
            let started = Instant::now();
            index.flush().await.expect("flush");
            flushes.push(started.elapsed());
        }
        let (flush_p50, flush_p95) = median_and_p95(flushes);
        let _ = writeln!(
            log,
            "flush after a 10-point upsert: p50 {flush_p50:.2?} p95 {flush_p95:.2?}"
        );
        let _ = writeln!(
            log,
            "disk: wal {} MiB, segments {} MiB",
            dir_size(&dir.path().join("wal")) >> 20,
            dir_size(&dir.path().join(SEGMENTS_DIR)) >> 20
        );
    }
}
