//! [`SqlStore`]: the relational store over sqlx's `Any` driver, so PostgreSQL and SQLite share
//! one implementation. Queries are written with `?` placeholders and numbered for PostgreSQL;
//! only portable SQL is used (no LEAST, no arrays, no native booleans); times are BIGINT
//! milliseconds and lists are JSON text. SQLite writes go through one in-process lock so
//! deferred transactions never deadlock on lock upgrades.
//!
//! The store is split by concern: this file holds the pool, the migrations, transactions and
//! SQLite's group commits; `query.rs` builds queries, `rows.rs` reads rows; each trait the store
//! implements has its file (`memories.rs`, `sections.rs`, `artifacts.rs`, `sessions.rs`,
//! `jobs.rs`, `retention.rs`).

use std::path::Path;
use std::sync::Once;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyPool, Row, Transaction};
use thinkus_common::model::Owner;
use tracing::Instrument;

use super::query::{Arg, MEMORY_COLUMNS, Query, arguments, memory_args, ms, number_placeholders};
use super::rows::backend_error;
use super::watch;
use super::{StoreError, WriteBatch};

/// Runs `op` until it succeeds, up to 20 more times 0.1 s, 0.2 s, ... apart while `retry` holds.
/// SQLite has no lock to wait on when several processes open a fresh file at once: the losers
/// find the database busy or their migrations rolled back, and by the next attempt the winner
/// is done.
pub(super) async fn again_while_busy<T, E, F>(retry: bool, mut op: impl FnMut() -> F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: std::future::Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Err(err) if retry && attempt < 20 => {
                attempt += 1;
                tracing::debug!(%err, attempt, "another process holds the database; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
            }
            result => return result,
        }
    }
}

/// Which database the store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The relational store.
#[derive(Debug)]
pub struct SqlStore {
    pub(super) pool: AnyPool,
    pub(super) backend: Backend,
    pub(super) write_lock: Option<tokio::sync::Mutex<()>>,
    /// Batches waiting for the next group commit (SQLite only).
    pub(super) group: Option<std::sync::Mutex<Vec<(WriteBatch, GroupReply)>>>,
    /// The in-process part of the owners' critical sections (`lock_owner`), striped by owner.
    pub(super) owner_stripes: Vec<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// Owner sections holding a connection of the pool at once (PostgreSQL): at most half of
    /// it, so that the holders always find connections for their reads and commits.
    pub(super) owner_seats: std::sync::Arc<tokio::sync::Semaphore>,
}

/// Stripes of the in-process owner locks.
pub(super) const OWNER_STRIPES: usize = 64;

/// The first key of the owners' advisory locks (the second is `hashtext` of
/// [`owner_lock_key`]), apart from the keys sqlx's migrator locks: `pg_locks` shows it as
/// `classid = 29719`.
pub const OWNER_LOCK_CLASS: i64 = 0x7417;

/// The text whose `hashtext` is the second key of `owner`'s advisory lock (PostgreSQL): the
/// same in every process sharing the database.
pub fn owner_lock_key(owner: &Owner) -> String {
    format!("{}\u{1f}{}", owner.tenant_id, owner.user_id)
}

pub(super) type GroupReply = tokio::sync::oneshot::Sender<Result<(), StoreError>>;

impl SqlStore {
    /// Connects to `sqlite://path` or `postgres://…` and applies the migrations.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let store = Self::open(url, max_connections).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects and applies the migrations up to `version` only: a database as an older
    /// release left it, to test the migrations that follow.
    #[cfg(any(test, feature = "testing"))]
    pub async fn connect_at_version(url: &str, max_connections: u32, version: i64) -> Result<Self, StoreError> {
        let store = Self::open(url, max_connections).await?;
        store.migrate_to(version).await?;
        Ok(store)
    }

    /// Runs raw SQL (tests that write rows the way an older release did).
    #[cfg(any(test, feature = "testing"))]
    pub async fn execute_raw(&self, sql: &str) -> Result<u64, StoreError> {
        self.execute(&Query::new(sql)).await
    }

    /// Runs a raw `SELECT COUNT(*) …` (tests that look at the tables themselves).
    #[cfg(any(test, feature = "testing"))]
    pub async fn count_raw(&self, sql: &str) -> Result<i64, StoreError> {
        let row = self
            .fetch_optional(&Query::new(sql))
            .await?
            .ok_or_else(|| StoreError::Backend("COUNT(*) returned no row".into()))?;
        row.try_get::<i64, _>(0).map_err(backend_error)
    }

    pub(super) async fn open(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        static DRIVERS: Once = Once::new();
        DRIVERS.call_once(sqlx::any::install_default_drivers);

        let (backend, url) = if let Some(path) = url.strip_prefix("sqlite://") {
            let file = path.split('?').next().unwrap_or(path);
            if let Some(parent) = Path::new(file).parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|err| StoreError::Unavailable(format!("cannot create {}: {err}", parent.display())))?;
            }
            let url = if url.contains('?') {
                url.to_string()
            } else {
                format!("{url}?mode=rwc")
            };
            (Backend::Sqlite, url)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Backend::Postgres, url.to_string())
        } else {
            return Err(StoreError::Invalid(format!(
                "storage.database: unsupported URI {:?} (use sqlite:// or postgres://)",
                redact(url)
            )));
        };
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(&url)
            .await
            .map_err(|err| StoreError::Unavailable(format!("{}: {err}", redact(&url))))?;
        let store = Self {
            pool,
            backend,
            write_lock: (backend == Backend::Sqlite).then(|| tokio::sync::Mutex::new(())),
            group: (backend == Backend::Sqlite).then(|| std::sync::Mutex::new(Vec::new())),
            owner_stripes: (0..OWNER_STRIPES)
                .map(|_| std::sync::Arc::new(tokio::sync::Mutex::new(())))
                .collect(),
            owner_seats: std::sync::Arc::new(tokio::sync::Semaphore::new((max_connections / 2).max(1) as usize)),
        };
        if backend == Backend::Sqlite {
            store.write_ahead().await?;
        }
        Ok(store)
    }

    /// Puts a SQLite database in write-ahead-log mode (a setting the file keeps). In SQLite's
    /// default rollback-journal mode a commit locks out every reader while it writes and syncs
    /// the journal and then the file; with the log, readers go on while one writer appends and a
    /// commit syncs once. A process that finds the database busy (another one opening it at the
    /// same moment) retries; a file system without the shared memory the log needs keeps the
    /// journal, with a warning.
    async fn write_ahead(&self) -> Result<(), StoreError> {
        let mode = again_while_busy(true, || {
            sqlx::query_scalar::<_, String>("PRAGMA journal_mode = WAL").fetch_one(&self.pool)
        })
        .await
        .map_err(|err| StoreError::Unavailable(format!("PRAGMA journal_mode = WAL: {err}")))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "SQLite cannot use its write-ahead log here; reads wait for each commit");
        }
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(())
    }

    /// Closes the pool (waits for connections to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The owner condition of a read by ids, `… = ? AND … = ? AND id IN (…)`. SQLite, without
    /// statistics, estimates that a user has few rows and walks the user's index row by row
    /// checking each id; its unary `+` keeps the column off the index, so the ids are looked
    /// up by primary key (measured: 150 candidates among 10,000 memories of one user, p50 6.5
    /// ms before). PostgreSQL plans with statistics.
    pub(super) fn owner_of_ids(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "+tenant_id = ? AND +user_id",
            Backend::Postgres => "tenant_id = ? AND user_id",
        }
    }

    pub(super) fn sql(&self, sql: &str) -> String {
        match self.backend {
            Backend::Sqlite => sql.to_string(),
            Backend::Postgres => number_placeholders(sql),
        }
    }

    pub(super) async fn fetch_all(&self, query: &Query) -> Result<Vec<AnyRow>, StoreError> {
        watch::note(&query.sql);
        let sql = self.sql(&query.sql);
        let args = arguments(&query.args)?;
        let span = tracing::info_span!("db.query", db.system = self.backend_name(), otel.kind = "client");
        thinkus_common::metrics::time_backend(
            self.backend_name(),
            "query",
            sqlx::query_with(&sql, args).fetch_all(&self.pool).instrument(span),
        )
        .await
        .map_err(backend_error)
    }

    pub(super) async fn fetch_optional(&self, query: &Query) -> Result<Option<AnyRow>, StoreError> {
        Ok(self.fetch_all(query).await?.into_iter().next())
    }

    /// The number a `SELECT COUNT(*) …` answers.
    pub(super) async fn count(&self, query: &Query) -> Result<u64, StoreError> {
        let row = self.fetch_optional(query).await?;
        Ok(row
            .map(|r| r.try_get::<i64, _>(0).map_err(backend_error))
            .transpose()?
            .unwrap_or(0)
            .max(0) as u64)
    }

    pub(super) async fn execute(&self, query: &Query) -> Result<u64, StoreError> {
        let _guard = self.lock_writes().await;
        watch::note(&query.sql);
        let sql = self.sql(&query.sql);
        let args = arguments(&query.args)?;
        let span = tracing::info_span!("db.execute", db.system = self.backend_name(), otel.kind = "client");
        let result = thinkus_common::metrics::time_backend(
            self.backend_name(),
            "execute",
            sqlx::query_with(&sql, args).execute(&self.pool).instrument(span),
        )
        .await
        .map_err(backend_error)?;
        Ok(result.rows_affected())
    }

    pub(super) async fn lock_writes(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_lock {
            Some(lock) => Some(lock.lock().await),
            None => None,
        }
    }

    pub(super) async fn begin(&self) -> Result<Transaction<'static, Any>, StoreError> {
        watch::note("BEGIN");
        self.pool.begin().await.map_err(backend_error)
    }

    pub(super) async fn commit(&self, tx: Transaction<'static, Any>) -> Result<(), StoreError> {
        watch::note("COMMIT");
        tx.commit().await.map_err(backend_error)
    }

    pub(super) async fn tx_execute(
        &self,
        tx: &mut Transaction<'static, Any>,
        query: &Query,
    ) -> Result<u64, StoreError> {
        watch::note(&query.sql);
        let sql = self.sql(&query.sql);
        let args = arguments(&query.args)?;
        let result = sqlx::query_with(&sql, args)
            .execute(&mut **tx)
            .await
            .map_err(backend_error)?;
        Ok(result.rows_affected())
    }

    pub(super) async fn tx_fetch_optional(
        &self,
        tx: &mut Transaction<'static, Any>,
        query: &Query,
    ) -> Result<Option<AnyRow>, StoreError> {
        watch::note(&query.sql);
        let sql = self.sql(&query.sql);
        let args = arguments(&query.args)?;
        sqlx::query_with(&sql, args)
            .fetch_optional(&mut **tx)
            .await
            .map_err(backend_error)
    }

    /// Writes one batch inside a transaction; an error leaves the transaction to be rolled back
    /// (or rolled back to the batch's savepoint).
    pub(super) async fn apply(&self, tx: &mut Transaction<'static, Any>, batch: &WriteBatch) -> Result<(), StoreError> {
        if let Some(record) = &batch.idempotency {
            let mut q = Query::new(
                "INSERT INTO idempotency (tenant_id, user_id, request_key, response, created_at) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (tenant_id, user_id, request_key) DO NOTHING",
            );
            q.text(record.tenant_id.clone())
                .text(record.user_id.clone())
                .text(record.key.clone())
                .text(record.response.clone())
                .int(ms(record.created_at));
            if self.tx_execute(tx, &q).await? == 0 {
                return Err(StoreError::Conflict(format!(
                    "request {:?} was already applied",
                    record.key
                )));
            }
        }
        for memory in &batch.inserts {
            let placeholders = vec!["?"; 32].join(", ");
            let mut q = Query::new(&format!(
                "INSERT INTO memories ({MEMORY_COLUMNS}) VALUES ({placeholders})"
            ));
            for arg in memory_args(memory) {
                q.arg(arg);
            }
            q.int(memory.version);
            self.tx_execute(tx, &q).await.map_err(|err| match err {
                StoreError::AlreadyExists(msg) => StoreError::AlreadyExists(format!("memory {}: {msg}", memory.id)),
                other => other,
            })?;
        }
        for memory in &batch.updates {
            let columns: Vec<&str> = MEMORY_COLUMNS.split(", ").collect();
            // id, tenant_id and user_id identify the row; version is checked, then bumped.
            // The access statistics are `record_access`'s, which leaves the version: an update
            // made from an earlier read keeps the reads counted since (the count stays, the
            // later of the two access times wins).
            let mut assignments: Vec<String> = Vec::new();
            let mut args: Vec<Arg> = Vec::new();
            for (column, arg) in columns[3..columns.len() - 1].iter().zip(&memory_args(memory)[3..]) {
                match *column {
                    "access_count" => {}
                    "last_accessed_at" => {
                        assignments.push(
                            "last_accessed_at = CASE WHEN last_accessed_at IS NULL OR last_accessed_at < ? THEN ? \
                             ELSE last_accessed_at END"
                                .into(),
                        );
                        args.extend([arg.clone(), arg.clone()]);
                    }
                    column => {
                        assignments.push(format!("{column} = ?"));
                        args.push(arg.clone());
                    }
                }
            }
            let mut q = Query::new(&format!(
                "UPDATE memories SET {}, version = version + 1 WHERE id = ? AND tenant_id = ? AND user_id = ? AND version = ?",
                assignments.join(", ")
            ));
            for arg in args {
                q.arg(arg);
            }
            q.text(memory.id.clone())
                .owner(&memory.scope.owner())
                .int(memory.version);
            if self.tx_execute(tx, &q).await? == 0 {
                return Err(StoreError::Conflict(format!(
                    "memory {} changed since version {}",
                    memory.id, memory.version
                )));
            }
        }
        for (owner, id) in &batch.deletes {
            let mut q = Query::new("DELETE FROM memories WHERE tenant_id = ? AND user_id = ? AND id = ?");
            q.owner(owner).text(id.clone());
            self.tx_execute(tx, &q).await?;
        }
        for change in &batch.changes {
            let mut q = Query::new(
                "INSERT INTO memory_changes (id, tenant_id, user_id, memory_id, kind, actor, reason, before_json, after_json, at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            );
            q.text(change.id.clone())
                .text(change.tenant_id.clone())
                .text(change.user_id.clone())
                .text(change.memory_id.clone())
                .text(change.kind.as_str())
                .text(change.actor.clone())
                .text(change.reason.clone())
                .arg(Arg::OptText(change.before.clone()))
                .arg(Arg::OptText(change.after.clone()))
                .int(ms(change.at));
            self.tx_execute(tx, &q).await?;
        }
        // A deleted memory's history keeps its records (who changed what, when, why) but none
        // of its content: every before/after image of it is dropped, the deletion's own too.
        for (owner, id) in &batch.deletes {
            let mut q = Query::new(
                "UPDATE memory_changes SET before_json = NULL, after_json = NULL \
                 WHERE tenant_id = ? AND user_id = ? AND memory_id = ?",
            );
            q.owner(owner).text(id.clone());
            self.tx_execute(tx, &q).await?;
        }
        for candidate in &batch.candidates {
            let mut q = Query::new(
                "INSERT INTO candidates (id, tenant_id, user_id, role_id, project_id, session_id, draft, reason, score, evidence_count, status, content_key, created_at, decided_at, memory_id) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (id) DO UPDATE SET draft = excluded.draft, reason = excluded.reason, score = excluded.score, \
                 evidence_count = excluded.evidence_count, status = excluded.status, decided_at = excluded.decided_at, memory_id = excluded.memory_id",
            );
            q.text(candidate.id.clone())
                .text(candidate.scope.tenant_id.clone())
                .text(candidate.scope.user_id.clone())
                .text(candidate.scope.role_id.clone())
                .arg(Arg::OptText(candidate.scope.project_id.clone()))
                .arg(Arg::OptText(candidate.scope.session_id.clone()))
                .text(candidate.draft.clone())
                .text(candidate.reason.clone())
                .arg(Arg::Float(candidate.score))
                .int(i64::from(candidate.evidence_count))
                .text(candidate.status.as_str())
                .text(candidate.content_key.clone())
                .int(ms(candidate.created_at))
                .arg(Arg::OptInt(candidate.decided_at.map(ms)))
                .arg(Arg::OptText(candidate.memory_id.clone()));
            self.tx_execute(tx, &q).await?;
        }
        Ok(())
    }

    /// SQLite allows one writer and every commit waits for the disk (fsync of the WAL), so
    /// batches that arrive while a commit runs are committed together by the next one: one
    /// transaction, each batch inside its own savepoint, so a batch that fails (a conflict, a
    /// replayed request) is rolled back alone and gets its own error, and the others are
    /// acknowledged once the shared COMMIT is durable.
    pub(super) async fn group_commit(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let Some(group) = &self.group else {
            return Err(StoreError::Backend("group commit without a queue".into()));
        };
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        group
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((batch, reply));
        // Whoever holds the write lock commits everything queued; a batch queued meanwhile is
        // taken by that holder or by the next one (possibly this caller).
        let _guard = self.lock_writes().await;
        if let Ok(result) = answer.try_recv() {
            return result;
        }
        let queued: Vec<(WriteBatch, GroupReply)> =
            std::mem::take(&mut *group.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let span = tracing::info_span!(
            "db.commit",
            db.system = self.backend_name(),
            otel.kind = "client",
            batches = queued.len()
        );
        let started = std::time::Instant::now();
        let results = self.commit_together(&queued).instrument(span).await;
        thinkus_common::metrics::METRICS
            .backend_latency
            .with_label_values(&[self.backend_name(), "commit"])
            .observe(started.elapsed().as_secs_f64());
        for ((_, reply), result) in queued.into_iter().zip(results) {
            let _ = reply.send(result);
        }
        answer
            .try_recv()
            .unwrap_or_else(|_| Err(StoreError::Backend("the group commit lost a batch".into())))
    }

    /// One transaction for several batches; the result of each, in order.
    pub(super) async fn commit_together(&self, queued: &[(WriteBatch, GroupReply)]) -> Vec<Result<(), StoreError>> {
        let all_fail = |err: &StoreError| -> Vec<Result<(), StoreError>> {
            queued.iter().map(|_| Err(copy_store_error(err))).collect()
        };
        let mut tx = match self.begin().await {
            Ok(tx) => tx,
            Err(err) => return all_fail(&err),
        };
        let mut results = Vec::with_capacity(queued.len());
        for (batch, _) in queued {
            let step = async {
                if queued.len() > 1 {
                    self.tx_execute(&mut tx, &Query::new("SAVEPOINT batch")).await?;
                }
                let applied = self.apply(&mut tx, batch).await;
                if queued.len() > 1 {
                    if applied.is_err() {
                        self.tx_execute(&mut tx, &Query::new("ROLLBACK TO SAVEPOINT batch"))
                            .await?;
                    }
                    self.tx_execute(&mut tx, &Query::new("RELEASE SAVEPOINT batch")).await?;
                }
                Ok::<_, StoreError>(applied)
            }
            .await;
            match step {
                Ok(applied) => results.push(applied),
                // The savepoint itself failed: the transaction cannot be trusted.
                Err(err) => {
                    let _ = tx.rollback().await;
                    return all_fail(&err);
                }
            }
        }
        if results.iter().all(Result::is_err) {
            let _ = tx.rollback().await;
            return results;
        }
        match self.commit(tx).await {
            Ok(()) => results,
            Err(err) => all_fail(&err),
        }
    }

    pub(super) fn for_update(&self) -> &'static str {
        match self.backend {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        }
    }
}

/// The same error for every batch of a failed group commit.
pub(super) fn copy_store_error(err: &StoreError) -> StoreError {
    match err {
        StoreError::NotFound(m) => StoreError::NotFound(m.clone()),
        StoreError::Conflict(m) => StoreError::Conflict(m.clone()),
        StoreError::AlreadyExists(m) => StoreError::AlreadyExists(m.clone()),
        StoreError::Invalid(m) => StoreError::Invalid(m.clone()),
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Full(m) => StoreError::Full(m.clone()),
        StoreError::Backend(m) => StoreError::Backend(m.clone()),
    }
}

/// Hides the password of a connection URI in messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::MemoryStore;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/thinkus"),
            "postgres://app:***@db:5432/thinkus"
        );
        assert_eq!(redact("sqlite://data/x.db"), "sqlite://data/x.db");
    }

    #[tokio::test]
    async fn a_sqlite_database_keeps_a_write_ahead_log() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("wal.db").display());
        let store = SqlStore::connect(&url, 2).await.unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        store.set_plan(&Owner::new("t", "u"), "pro").await.unwrap();
        assert!(dir.path().join("wal.db-wal").exists(), "commits go to the log");
        // A commit does not wait for a reader: in the rollback-journal mode it needs every
        // reader gone, and waits out the busy timeout (5 s) while one reads.
        let mut reader = store.pool.begin().await.unwrap();
        let before: String = sqlx::query_scalar("SELECT plan FROM user_plans")
            .fetch_one(&mut *reader)
            .await
            .unwrap();
        assert_eq!(before, "pro");
        tokio::time::timeout(
            std::time::Duration::from_secs(2),
            store.set_plan(&Owner::new("t", "u"), "team"),
        )
        .await
        .expect("the commit does not wait for the reader")
        .unwrap();
        let during: String = sqlx::query_scalar("SELECT plan FROM user_plans")
            .fetch_one(&mut *reader)
            .await
            .unwrap();
        assert_eq!(during, "pro", "the reader keeps the snapshot it started with");
        reader.rollback().await.unwrap();
        assert_eq!(
            store.get_plan(&Owner::new("t", "u")).await.unwrap().as_deref(),
            Some("team")
        );
    }

    #[tokio::test]
    async fn a_full_database_refuses_the_write_as_resource_exhausted_and_keeps_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("full.db").display());
        // One connection, so that the page limit below holds for every statement.
        let store = SqlStore::connect(&url, 1).await.unwrap();
        let kept = Owner::new("t", "kept");
        store.set_plan(&kept, "pro").await.unwrap();
        // SQLite's own limit on the file's pages makes the database full, as a full disk does.
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        sqlx::query(&format!("PRAGMA max_page_count = {}", pages + 8))
            .execute(&store.pool)
            .await
            .unwrap();
        let large = "x".repeat(64 * 1024);
        let mut refused = None;
        for i in 0..64 {
            if let Err(err) = store.set_plan(&Owner::new("t", format!("u{i}")), &large).await {
                refused = Some(err);
                break;
            }
        }
        let err = refused.expect("a write past the page limit is refused");
        assert!(matches!(err, StoreError::Full(_)), "{err:?}");
        let api = thinkus_common::ApiError::from(err);
        assert_eq!(api.code, thinkus_common::error::ErrorCode::ResourceExhausted);
        assert!(api.message.contains("storage is full"), "{}", api.message);
        assert!(api.retry_after.is_some());
        // What was stored before stays readable, and writes go on once there is room.
        assert_eq!(store.get_plan(&kept).await.unwrap().as_deref(), Some("pro"));
        sqlx::query("PRAGMA max_page_count = 1073741823")
            .execute(&store.pool)
            .await
            .unwrap();
        store.set_plan(&Owner::new("t", "after"), &large).await.unwrap();
    }
}
