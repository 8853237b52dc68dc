//! Index rebuilds as durable jobs. `RebuildIndex` queues a job in the database's job queue and
//! answers at once; a worker of the node that runs the knowledge manager takes it, so the job
//! outlives the request, reports its progress in the job's record (`GetIndexJob`, and the
//! user's `ListJobs` for a one-user rebuild), and a job cut by a crash goes back to the queue
//! when its lease runs out and starts again.
//!
//! Each user's memories are embedded aside first, while the index keeps serving its old points;
//! then, under the user's write lock, what changed meanwhile is embedded again, the new points
//! overwrite the old ones by id ([`thinkus_backends::vector::VectorIndex::replace`], which the
//! edge index writes a few hundred points at a time, letting searches of every user run in
//! between), and the points of memories no longer stored are removed after them. No memory is
//! ever missing from the index: the old points are never deleted first, a search during the
//! swap finds each memory with its old or its new point, and a crash before or during the swap
//! leaves every memory with one of them (the job then runs again).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use thinkus_backends::sql::{JobRecord, JobStatus, JobStore, MemoryOrder, MemoryQuery};
use thinkus_backends::vector::{IndexedPoint, MemoryFilter};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{Memory, Owner};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::Owners;
pub use crate::api::{IndexJob, RebuildProgress};
use crate::service::KnowledgeManager;

/// The job kind of index rebuilds in the job queue.
pub const REBUILD_JOB: &str = "rebuild_index";

/// Runs of a rebuild job before it fails for good.
const MAX_ATTEMPTS: u32 = 3;

/// Memories embedded per batch.
const EMBED_BATCH: usize = 64;

impl IndexJob {
    fn from_record(record: &JobRecord) -> Self {
        Self {
            id: record.id.clone(),
            status: record.status,
            owners: owners_of(record),
            progress: record
                .result
                .as_deref()
                .and_then(|result| serde_json::from_str(result).ok())
                .unwrap_or_default(),
            attempts: record.attempts,
            last_error: record.last_error.clone(),
            created_at: record.created_at,
            updated_at: record.updated_at,
        }
    }
}

/// The job's owner columns: one user, a tenant's users (no user) or everyone (neither). User
/// ids are never empty, so a tenant-wide job is in no user's job list.
fn owner_columns(owners: &Owners) -> (String, String) {
    match owners {
        Owners::One(owner) => (owner.tenant_id.clone(), owner.user_id.clone()),
        Owners::Tenant(tenant) => (tenant.clone(), String::new()),
        Owners::All => (String::new(), String::new()),
    }
}

fn owners_of(record: &JobRecord) -> Owners {
    match (record.tenant_id.is_empty(), record.user_id.is_empty()) {
        (_, false) => Owners::One(Owner::new(record.tenant_id.clone(), record.user_id.clone())),
        (false, true) => Owners::Tenant(record.tenant_id.clone()),
        (true, true) => Owners::All,
    }
}

/// Reports progress to the job's record and keeps its lease, at every step and on a heartbeat
/// while a step takes long; the run stops when the job is no longer this worker's (its lease ran
/// out and it went back to the queue).
struct Reporter<'a> {
    jobs: &'a dyn JobStore,
    id: &'a str,
    lease: chrono::Duration,
    progress: std::sync::Mutex<RebuildProgress>,
}

/// The run lost its job: another worker may hold it now, so it must not be touched.
const LOST: &str = "no longer held by this worker (its lease ran out)";

impl Reporter<'_> {
    fn progress(&self) -> RebuildProgress {
        *self.progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn update(&self, change: impl FnOnce(&mut RebuildProgress)) -> Result<(), ApiError> {
        change(&mut self.progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        self.report().await
    }

    async fn report(&self) -> Result<(), ApiError> {
        let now = Utc::now();
        let progress = serde_json::to_string(&self.progress()).map_err(|err| ApiError::internal(err.to_string()))?;
        if self
            .jobs
            .job_progress(self.id, &progress, now, now + self.lease)
            .await?
        {
            Ok(())
        } else {
            Err(ApiError::failed_precondition(format!(
                "index rebuild job {} is {LOST}",
                self.id
            )))
        }
    }

    /// Renews the lease every third of it until the job is lost (or the store fails).
    async fn heartbeat(&self) -> ApiError {
        let every = (self.lease / 3).to_std().unwrap_or(Duration::from_secs(1));
        loop {
            tokio::time::sleep(every).await;
            if let Err(err) = self.report().await {
                return err;
            }
        }
    }
}

impl KnowledgeManager {
    fn job_queue(&self) -> Result<&Arc<dyn JobStore>, ApiError> {
        self.jobs.as_ref().ok_or_else(|| {
            ApiError::failed_precondition("this knowledge manager has no job queue to rebuild the index")
        })
    }

    /// Queues a rebuild of the owners' index (or finds the same rebuild already queued or
    /// running) and wakes this node's worker.
    pub async fn start_rebuild(&self, owners: Owners) -> Result<IndexJob, ApiError> {
        let jobs = self.job_queue()?;
        let (tenant_id, user_id) = owner_columns(&owners);
        let now = Utc::now();
        let record = JobRecord {
            id: new_id(IdKind::Job),
            kind: REBUILD_JOB.into(),
            dedupe_key: Some(format!("{REBUILD_JOB}:{tenant_id}:{user_id}")),
            tenant_id,
            user_id,
            session_id: None,
            payload: "{}".into(),
            status: JobStatus::Pending,
            attempts: 0,
            max_attempts: MAX_ATTEMPTS,
            last_error: None,
            run_after: now,
            lease_until: None,
            result: None,
            created_at: now,
            updated_at: now,
        };
        let id = jobs.enqueue(&record).await?;
        self.rebuild_queued.notify_one();
        self.find_index_job(&id).await
    }

    /// A rebuild job; NOT_FOUND naming the id when there is none (or it is another kind).
    pub async fn find_index_job(&self, id: &str) -> Result<IndexJob, ApiError> {
        match self.job_queue()?.get_job(id).await? {
            Some(record) if record.kind == REBUILD_JOB => Ok(IndexJob::from_record(&record)),
            _ => Err(ApiError::not_found("index job", id)),
        }
    }

    /// Takes one due rebuild job, if any, and runs it to its end, or until `stop`, when the job
    /// goes back to the queue at once (the next start takes it without waiting for its lease).
    /// Returns whether there was one.
    pub async fn run_rebuild_job(&self, stop: &CancellationToken) -> Result<bool, ApiError> {
        let jobs = self.job_queue()?.clone();
        let now = Utc::now();
        let lease = chrono::Duration::seconds(self.config.rebuild_lease_secs.clamp(1, 86_400) as i64);
        let Some(record) = jobs.claim(&[REBUILD_JOB], now, now + lease).await? else {
            return Ok(false);
        };
        let reporter = Reporter {
            jobs: jobs.as_ref(),
            id: &record.id,
            lease,
            progress: std::sync::Mutex::new(RebuildProgress::default()),
        };
        let owners = owners_of(&record);
        let outcome = tokio::select! {
            outcome = self.rebuild(&owners, &reporter) => Some(outcome),
            err = reporter.heartbeat() => Some(Err(err)),
            _ = stop.cancelled() => None,
        };
        let progress = reporter.progress();
        let metrics = &thinkus_common::metrics::METRICS;
        match outcome {
            Some(Ok(())) => {
                let result = serde_json::to_string(&progress).map_err(|err| ApiError::internal(err.to_string()))?;
                jobs.complete_job(&record.id, Utc::now(), Some(&result)).await?;
                metrics.job_runs.with_label_values(&[REBUILD_JOB, "succeeded"]).inc();
                tracing::info!(job = %record.id, indexed = progress.indexed, removed = progress.removed, "index rebuilt");
            }
            Some(Err(err)) if err.message.contains(LOST) => {
                tracing::warn!(job = %record.id, "index rebuild stopped: its lease ran out and it went back to the queue");
            }
            Some(Err(err)) => {
                let retry_at = (record.attempts < record.max_attempts.max(1))
                    .then(|| Utc::now() + chrono::Duration::seconds(10 * i64::from(record.attempts)));
                let outcome = if retry_at.is_some() { "retried" } else { "failed" };
                metrics.job_runs.with_label_values(&[REBUILD_JOB, outcome]).inc();
                tracing::warn!(job = %record.id, attempts = record.attempts, error = %err, outcome, "index rebuild failed");
                jobs.fail_job(&record.id, &err.message, Utc::now(), retry_at).await?;
            }
            None => {
                tracing::info!(job = %record.id, "index rebuild stopped by the shutdown; back in the queue");
                jobs.fail_job(&record.id, "stopped by a shutdown", Utc::now(), Some(Utc::now()))
                    .await?;
            }
        }
        Ok(true)
    }

    async fn rebuild(&self, owners: &Owners, reporter: &Reporter<'_>) -> Result<(), ApiError> {
        let users = self.users(owners.clone()).await?;
        reporter
            .update(|progress| progress.users_total = users.len() as u64)
            .await?;
        for user in users {
            let (indexed, removed) = self.rebuild_owner(&user, reporter).await?;
            reporter
                .update(|progress| {
                    progress.users_done += 1;
                    progress.staged = 0;
                    progress.indexed += indexed;
                    progress.removed += removed;
                })
                .await?;
        }
        self.vectors.flush().await?;
        Ok(())
    }

    /// Every stored memory of an owner, any status, oldest first.
    async fn stored_memories(&self, owner: &Owner) -> Result<Vec<Memory>, ApiError> {
        let mut memories = Vec::new();
        loop {
            let page = self
                .store
                .list_memories(&MemoryQuery {
                    order: MemoryOrder::Oldest,
                    limit: 1000,
                    offset: memories.len(),
                    ..MemoryQuery::of(MemoryFilter::any_status(owner))
                })
                .await?;
            if page.is_empty() {
                return Ok(memories);
            }
            memories.extend(page);
        }
    }

    /// The points of `memories`. `aside`: embedded as background passages, after every live
    /// query and write (the index keeps serving meanwhile); otherwise as passages, ahead of
    /// background work (under the user's write lock, the user's writes wait for them).
    async fn embed_points(&self, memories: &[&Memory], aside: bool) -> Result<Vec<IndexedPoint>, ApiError> {
        let texts: Vec<String> = memories.iter().map(|memory| Self::index_text(memory)).collect();
        let vectors = if aside {
            self.embedder.embed_background(&texts).await?
        } else {
            self.embedder.embed_passages(&texts).await?
        };
        Ok(memories
            .iter()
            .zip(vectors)
            .map(|(memory, dense)| self.point(memory, dense))
            .collect())
    }

    /// Rebuilds one user's points aside, then swaps them in. Returns the points written and
    /// the points removed.
    async fn rebuild_owner(&self, owner: &Owner, reporter: &Reporter<'_>) -> Result<(u64, u64), ApiError> {
        // Aside: the index is not touched while the user's memories are embedded.
        let memories = self.stored_memories(owner).await?;
        let mut staged: HashMap<String, (i64, IndexedPoint)> = HashMap::with_capacity(memories.len());
        for chunk in memories.chunks(EMBED_BATCH) {
            let chunk: Vec<&Memory> = chunk.iter().collect();
            for (memory, point) in chunk.iter().zip(self.embed_points(&chunk, true).await?) {
                staged.insert(memory.id.clone(), (memory.version, point));
            }
            let count = staged.len() as u64;
            reporter.update(|progress| progress.staged = count).await?;
        }
        drop(memories);

        // The swap, under the user's write lock: no write of the user runs between this last
        // look at the store and the update of the index, and what changed while the rest was
        // embedded is embedded again.
        let _user = self.lock_user(owner).await?;
        let current = self.stored_memories(owner).await?;
        let changed: Vec<&Memory> = current
            .iter()
            .filter(|memory| {
                staged
                    .get(&memory.id)
                    .is_none_or(|(version, _)| *version != memory.version)
            })
            .collect();
        let mut points: Vec<IndexedPoint> = Vec::with_capacity(current.len());
        for chunk in changed.chunks(EMBED_BATCH) {
            points.extend(self.embed_points(chunk, false).await?);
        }
        let changed: HashSet<&str> = changed.iter().map(|memory| memory.id.as_str()).collect();
        for memory in &current {
            if !changed.contains(memory.id.as_str())
                && let Some((_, point)) = staged.remove(&memory.id)
            {
                points.push(point);
            }
        }
        let stored: HashSet<&str> = current.iter().map(|memory| memory.id.as_str()).collect();
        let extra: Vec<String> = self
            .vectors
            .list_ids(owner)
            .await?
            .into_iter()
            .filter(|id| !stored.contains(id.as_str()))
            .collect();
        let indexed = points.len() as u64;
        self.vectors.replace(points, &extra).await?;
        Ok((indexed, extra.len() as u64))
    }
}

/// Runs the node's rebuild worker until `shutdown`: takes due rebuild jobs (woken at once by a
/// rebuild queued on this node, otherwise every few seconds) and returns jobs whose worker died
/// to the queue.
pub fn spawn_worker(km: Arc<KnowledgeManager>, shutdown: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(jobs) = km.job_queue().cloned() else {
            return;
        };
        // Dead workers' jobs are looked for at least as often as a lease runs out.
        let idle = Duration::from_secs(km.config.rebuild_lease_secs.clamp(1, 5));
        while !shutdown.is_cancelled() {
            if let Err(err) = jobs.requeue_expired(Utc::now()).await {
                tracing::error!(%err, "the job queue does not answer");
            }
            loop {
                match km.run_rebuild_job(&shutdown).await {
                    Ok(true) if !shutdown.is_cancelled() => continue,
                    Ok(_) => break,
                    Err(err) => {
                        tracing::error!(%err, "the index rebuild worker failed");
                        break;
                    }
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = km.rebuild_queued.notified() => {}
                _ = tokio::time::sleep(idle) => {}
            }
        }
    })
}
