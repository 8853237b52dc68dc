//! The relational store: memories and their history, candidates, plans, artifacts' metadata,
//! sessions (messages and summaries) and the job queue. One implementation,
//! [`store::SqlStore`], over sqlx for PostgreSQL and SQLite, with migrations per backend;
//! traits per area so services depend on what they use and each area has its conformance suite.

mod artifacts;
mod jobs;
mod memories;
mod migrations;
mod query;
pub mod records;
mod retention;
mod rows;
mod sections;
mod sessions;
pub mod store;
pub mod watch;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_common::model::{Memory, MemoryStatus, MemoryType, Owner};

pub use records::*;
pub use store::{OWNER_LOCK_CLASS, SqlStore, owner_lock_key};
pub use watch::statements_of;

use crate::filter::MemoryFilter;

/// Errors of the relational store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    /// A concurrent change won: re-read and retry.
    #[error("conflicting concurrent change: {0}")]
    Conflict(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("invalid store request: {0}")]
    Invalid(String),
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database's storage is full (SQLite's SQLITE_FULL, PostgreSQL's disk_full): the
    /// write was refused whole, what was stored stays, and writes succeed again once an
    /// operator frees space.
    #[error("the database's storage is full: {0}")]
    Full(String),
    #[error("database error: {0}")]
    Backend(String),
}

/// The order of a memory listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryOrder {
    /// Newest occurrence first.
    #[default]
    Newest,
    /// Oldest occurrence first.
    Oldest,
    /// Least valuable first: lowest importance, then fewest accesses, then oldest (the order
    /// in which quota clean-ups give memories up).
    LeastValuable,
}

/// A memory listing: the memories that pass a [`MemoryFilter`] (the one visibility rule every
/// backend shares), narrowed further by what only the relational store keeps.
#[derive(Debug, Clone, Default)]
pub struct MemoryQuery {
    /// Owner, reader, types, statuses, visibilities, session, time and tags.
    pub filter: MemoryFilter,
    /// Only memories owned by this role.
    pub owner_role: Option<String>,
    /// Exclude these types (quotas do not count conversation turns).
    pub exclude_types: Vec<MemoryType>,
    pub subject: Option<String>,
    pub iteration_id: Option<String>,
    /// Only memories created before this time (forgetting looks at old memories).
    pub created_before: Option<DateTime<Utc>>,
    /// Only memories with importance at most this.
    pub max_importance: Option<u8>,
    /// Only memories accessed at most this many times.
    pub max_access_count: Option<u64>,
    pub order: MemoryOrder,
    /// 0 means no limit.
    pub limit: usize,
    pub offset: usize,
}

impl MemoryQuery {
    /// Every memory that passes `filter`, newest first.
    pub fn of(filter: MemoryFilter) -> Self {
        Self {
            filter,
            ..Default::default()
        }
    }
}

/// Changes written together, atomically.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub inserts: Vec<Memory>,
    /// Full rows; each must carry the version it was read at (it is stored bumped by one).
    pub updates: Vec<Memory>,
    /// (owner, memory_id); the memory's history keeps its records, without their before and
    /// after images (its content), including those of `changes` in the same batch.
    pub deletes: Vec<(Owner, String)>,
    pub changes: Vec<Change>,
    /// Inserted or replaced.
    pub candidates: Vec<Candidate>,
    pub idempotency: Option<IdempotencyRecord>,
}

impl WriteBatch {
    pub fn is_empty(&self) -> bool {
        self.inserts.is_empty()
            && self.updates.is_empty()
            && self.deletes.is_empty()
            && self.changes.is_empty()
            && self.candidates.is_empty()
            && self.idempotency.is_none()
    }
}

/// The critical section of one owner's writes, held until dropped (see
/// [`MemoryStore::lock_owner`]). On PostgreSQL it holds a transaction with an advisory lock
/// on a connection of its own; dropping it rolls that back, which releases the lock.
pub struct OwnerLock {
    _held: Vec<Box<dyn Send>>,
}

impl OwnerLock {
    pub(crate) fn new(held: Vec<Box<dyn Send>>) -> Self {
        Self { _held: held }
    }
}

impl std::fmt::Debug for OwnerLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnerLock")
    }
}

/// The critical sections of owners' writes, and what fences a write that comes from earlier
/// work: shared by the services that write an owner's data (the knowledge manager, the
/// summary service) and by the erasure.
#[async_trait]
pub trait OwnerSections: Send + Sync {
    /// Enters the critical section of `owner`'s writes: until the guard is dropped, no other
    /// holder of the same owner's section runs, in this process or, on PostgreSQL, in any
    /// process sharing the database (a transaction-scoped advisory lock on the owner, so a
    /// process that dies releases it with its connection). SQLite is single-process: an
    /// in-process lock suffices. Waits at most 30 s for another holder, then `Unavailable`.
    async fn lock_owner(&self, owner: &Owner) -> Result<OwnerLock, StoreError>;

    /// Whether the job `id` of `owner` is still in the queue, in any state: an erasure of the
    /// owner deletes it, and the writes of a job that ran meanwhile are refused.
    async fn job_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError>;

    /// Whether the session `id` of `owner` exists: an erasure of the owner deletes it, and a
    /// summary of it written meanwhile, or a decision that summary offers, is refused.
    async fn session_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError>;
}

/// Memories, their history, candidates, idempotency records and plans.
#[async_trait]
pub trait MemoryStore: OwnerSections {
    /// Applies a batch in one transaction. `Conflict` when an update's version is stale or an
    /// idempotency key was taken concurrently; nothing is applied then.
    async fn commit(&self, batch: WriteBatch) -> Result<(), StoreError>;

    async fn get_memory(&self, owner: &Owner, id: &str) -> Result<Option<Memory>, StoreError>;

    /// The memories of `ids` that exist, in the order of `ids`.
    async fn get_memories(&self, owner: &Owner, ids: &[String]) -> Result<Vec<Memory>, StoreError>;

    /// (external_id, memory_id) of the given external ids that exist for the user.
    async fn find_external(&self, owner: &Owner, external_ids: &[String]) -> Result<Vec<(String, String)>, StoreError>;

    async fn list_memories(&self, query: &MemoryQuery) -> Result<Vec<Memory>, StoreError>;

    /// [`list_memories`](Self::list_memories), and in the same statement the memories that
    /// replaced those listed (`superseded_by`, the owner's), each once, in no particular order.
    async fn list_memories_and_successors(&self, query: &MemoryQuery)
    -> Result<(Vec<Memory>, Vec<Memory>), StoreError>;

    async fn count_memories(&self, query: &MemoryQuery) -> Result<u64, StoreError>;

    /// Marks memories read: last access time, access count + 1, freshness + `boost` capped at
    /// `cap`. Returns how many of them were marked. The version stays: reads are not edits, and a
    /// person's correction of a memory an employee has just recalled must not meet a conflict.
    /// An update made from an earlier read keeps the reads counted since (the count stays, the
    /// later access time wins); the freshness it writes is its own, so a boost counted since is
    /// lost to it.
    async fn record_access(
        &self,
        owner: &Owner,
        ids: &[String],
        at: DateTime<Utc>,
        boost: f64,
        cap: f64,
    ) -> Result<u64, StoreError>;

    /// The history of a memory, oldest first (a deleted memory's without its content).
    async fn changes(&self, owner: &Owner, memory_id: &str) -> Result<Vec<Change>, StoreError>;

    /// The stored response of an earlier request with this key.
    async fn get_idempotent(&self, owner: &Owner, key: &str) -> Result<Option<String>, StoreError>;

    async fn get_candidate(&self, owner: &Owner, id: &str) -> Result<Option<Candidate>, StoreError>;

    /// Candidates of a user, newest first; role and project narrow when given.
    async fn list_candidates(
        &self,
        owner: &Owner,
        role_id: Option<&str>,
        project_id: Option<&str>,
        status: CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Candidate>, StoreError>;

    /// A pending candidate of the user with the same content key, if any.
    async fn find_pending_candidate(&self, owner: &Owner, content_key: &str) -> Result<Option<Candidate>, StoreError>;

    async fn get_plan(&self, owner: &Owner) -> Result<Option<String>, StoreError>;

    async fn set_plan(&self, owner: &Owner, plan: &str) -> Result<(), StoreError>;

    /// Memory counts per status, over every user.
    async fn count_by_status(&self) -> Result<Vec<(MemoryStatus, u64)>, StoreError>;

    /// Every owner with at least one memory, in every tenant.
    async fn list_users(&self) -> Result<Vec<Owner>, StoreError>;

    /// The roles of an owner: every role owning a memory or a candidate of the owner, sorted.
    async fn list_roles(&self, owner: &Owner) -> Result<Vec<String>, StoreError>;

    /// Everything the database holds of an owner, in every table (memories, history,
    /// candidates, plan, sessions and their messages, summaries, artifacts' metadata, jobs,
    /// request keys, earlier erasures): what `ExportUser` reads. Every table lives in the one
    /// database all services share.
    async fn owner_records(&self, owner: &Owner) -> Result<OwnerRecords, StoreError>;

    /// Deletes every row of an owner in one transaction, in every table but `artifacts`
    /// (their blobs belong to the artifact service, which must remove them first): `Conflict`,
    /// and nothing deleted, while the owner still has an artifact. When anything was removed,
    /// writes `erasure` in the same transaction, with the rows counted here added to the counts
    /// it carries (vector points, artifacts and blobs removed before by their owners). Returns
    /// the counts recorded; a second call finds nothing, records nothing and returns the
    /// caller's counts alone.
    async fn erase_owner(&self, owner: &Owner, erasure: ErasureRecord) -> Result<ErasureCounts, StoreError>;
}

/// Artifact metadata (the contents live in the blob store).
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    async fn insert_artifact(&self, artifact: &ArtifactRecord) -> Result<(), StoreError>;

    async fn get_artifact(&self, owner: &Owner, id: &str) -> Result<Option<ArtifactRecord>, StoreError>;

    /// An artifact of the same session with the same content.
    async fn find_artifact(
        &self,
        owner: &Owner,
        session_id: &str,
        sha256: &str,
    ) -> Result<Option<ArtifactRecord>, StoreError>;

    /// Artifacts of a user, newest first, narrowed to a session or project when given.
    async fn list_artifacts(
        &self,
        owner: &Owner,
        session_id: Option<&str>,
        project_id: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError>;

    /// The artifacts a turn of `session_id` in `project_id` may be about, in one statement: the
    /// newest `limit` of the session (in the project) and the newest `limit` of the project
    /// (the session's among them), each once, newest first.
    async fn list_artifacts_near(
        &self,
        owner: &Owner,
        session_id: &str,
        project_id: &str,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError>;

    /// Deletes an artifact's metadata and returns it.
    async fn delete_artifact(&self, owner: &Owner, id: &str) -> Result<Option<ArtifactRecord>, StoreError>;

    /// How many artifacts point at a blob.
    async fn count_blob_refs(&self, blob_key: &str) -> Result<u64, StoreError>;

    /// Artifacts expired at `now`, of one owner or all.
    async fn expired_artifacts(
        &self,
        now: DateTime<Utc>,
        owner: Option<&Owner>,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError>;
}

/// Sessions: their messages (the trajectory) and their summaries.
#[async_trait]
pub trait SessionStore: OwnerSections {
    /// Appends messages, assigning their indexes. Returns (first index, messages in session).
    async fn append_messages(
        &self,
        key: &SessionKey,
        messages: &[thinkus_common::model::Message],
    ) -> Result<(u32, u32), StoreError>;

    /// Messages `from..=to` of a session, in order.
    async fn get_messages(
        &self,
        owner: &Owner,
        session_id: &str,
        from: u32,
        to: u32,
    ) -> Result<Vec<thinkus_common::model::Message>, StoreError>;

    async fn get_session(&self, owner: &Owner, session_id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// Sets flags on a session (ended, summary requested).
    async fn flag_session(
        &self,
        owner: &Owner,
        session_id: &str,
        ended: Option<bool>,
        summary_requested: Option<bool>,
    ) -> Result<(), StoreError>;

    /// Sessions with messages not yet summarised that went idle before `idle_before` or asked
    /// for a summary.
    async fn sessions_to_summarize(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>, StoreError>;

    /// The latest session of a user whose last message came at or before `until`, with its
    /// summary if it has one, in one statement: of `project_id` (or, when `None`, of those
    /// outside any project), of one role when given, leaving one session out when given.
    async fn last_session_with_summary(
        &self,
        owner: &Owner,
        project_id: Option<&str>,
        role_id: Option<&str>,
        exclude_session: Option<&str>,
        until: DateTime<Utc>,
    ) -> Result<Option<(SessionRecord, Option<SummaryRecord>)>, StoreError>;

    /// Writes a summary (one per session) and records how far the session is summarised. With
    /// `expected_end`, fails with `Conflict` unless the stored summary still ends there.
    async fn put_summary(&self, summary: &SummaryRecord, expected_end: Option<i32>) -> Result<(), StoreError>;

    async fn get_summary(&self, owner: &Owner, session_id: &str) -> Result<Option<SummaryRecord>, StoreError>;

    /// Summaries of a user, most recently updated first; of one project when given, leaving
    /// out one role's when asked.
    async fn list_summaries(
        &self,
        owner: &Owner,
        project_id: Option<&str>,
        exclude_role: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SummaryRecord>, StoreError>;
}

/// What the retention sweep purges (`thinkus_common::config::RetentionConfig`). Each call
/// returns how many records it purged.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Deletes the idempotency records written before `before`, in every tenant.
    async fn purge_idempotency(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Deletes the session messages sent before `before` that their session's summary already
    /// covers (never one still to be summarised), in every tenant.
    async fn purge_session_messages(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Empties the payload of the jobs that finished (succeeded, or failed for good) before
    /// `before`, in every tenant; their status, error and result stay.
    async fn purge_job_payloads(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// What one retention sweep purged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub idempotency: u64,
    pub session_messages: u64,
    pub job_payloads: u64,
}

/// Purges what `config` no longer keeps at `now` (a setting of 0 keeps its records), and
/// counts it in `thinkus_sweeps_total{kind="retention"}` and
/// `thinkus_sweep_changes_total{kind="idempotency"|"session_messages"|"job_payloads"}`.
pub async fn sweep_retention(
    store: &dyn RetentionStore,
    config: &thinkus_common::config::RetentionConfig,
    now: DateTime<Utc>,
) -> Result<RetentionReport, StoreError> {
    let before = |days: u32| (days > 0).then(|| now - chrono::Duration::days(i64::from(days)));
    let mut report = RetentionReport::default();
    if let Some(at) = before(config.idempotency_days) {
        report.idempotency = store.purge_idempotency(at).await?;
    }
    if let Some(at) = before(config.session_messages_days) {
        report.session_messages = store.purge_session_messages(at).await?;
    }
    if let Some(at) = before(config.job_payload_days) {
        report.job_payloads = store.purge_job_payloads(at).await?;
    }
    let metrics = &thinkus_common::metrics::METRICS;
    metrics.sweeps.with_label_values(&["retention"]).inc();
    for (kind, count) in [
        ("idempotency", report.idempotency),
        ("session_messages", report.session_messages),
        ("job_payloads", report.job_payloads),
    ] {
        metrics.sweep_changes.with_label_values(&[kind]).inc_by(count);
    }
    Ok(report)
}

/// The durable job queue.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Queues a job; with a dedupe key already queued, returns the existing job's id.
    async fn enqueue(&self, job: &JobRecord) -> Result<String, StoreError>;

    /// Takes the next due job of the given kinds and leases it until `lease_until`. A job waits
    /// while an earlier job of its user and kind is pending or running (a retried one included),
    /// so a user's jobs of one kind run one at a time, in the order they were queued.
    async fn claim(
        &self,
        kinds: &[&str],
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<JobRecord>, StoreError>;

    /// Marks a job succeeded, with what it did (`result`, serialised by its producer).
    async fn complete_job(&self, id: &str, now: DateTime<Utc>, result: Option<&str>) -> Result<(), StoreError>;

    /// Records a failure: retried at `retry_at`, or failed for good when `None`.
    async fn fail_job(
        &self,
        id: &str,
        error: &str,
        now: DateTime<Utc>,
        retry_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError>;

    /// Records the progress of a running job (`result`, serialised by its producer) and extends
    /// its lease to `lease_until`. Returns false when the job is no longer running (its lease
    /// ran out and it went back to the queue, or it finished): the caller must stop.
    async fn job_progress(
        &self,
        id: &str,
        progress: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Returns jobs whose lease expired (their worker died) to the queue.
    async fn requeue_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError>;

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError>;

    /// Jobs of a user, newest first.
    async fn list_jobs(
        &self,
        owner: &Owner,
        session_id: Option<&str>,
        status: Option<JobStatus>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<JobRecord>, StoreError>;

    /// Job counts per kind and status.
    async fn job_counts(&self) -> Result<Vec<(String, JobStatus, u64)>, StoreError>;
}
