//! [`SqlStore`]: the relational store over sqlx's `Any` driver, so PostgreSQL and SQLite share
//! one implementation. Queries are written with `?` placeholders and numbered for PostgreSQL;
//! only portable SQL is used (no LEAST, no arrays, no native booleans); times are BIGINT
//! milliseconds and lists are JSON text. SQLite writes go through one in-process lock so
//! deferred transactions never deadlock on lock upgrades.

use std::path::Path;
use std::sync::Once;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use sqlx::any::{AnyArguments, AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyPool, Arguments, Row, Transaction};
use thinkus_common::model::{
    ArtifactRef, Language, Memory, MemorySource, MemoryStatus, MemoryType, Message, Owner, Scope, Visibility,
};
use tracing::Instrument;

use super::{
    ArtifactRecord, ArtifactStore, Candidate, CandidateStatus, Change, ChangeKind, ErasureCounts, ErasureRecord,
    JobRecord, JobStatus, JobStore, MemoryOrder, MemoryQuery, MemoryStore, OwnerRecords, RetentionStore, SessionKey,
    SessionRecord, SessionStore, StoreError, SummaryRecord, WriteBatch,
};
use crate::filter::{Field, Plan};

static MIGRATOR_SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static MIGRATOR_POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Which database the store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The relational store.
#[derive(Debug)]
pub struct SqlStore {
    pool: AnyPool,
    backend: Backend,
    write_lock: Option<tokio::sync::Mutex<()>>,
    /// Batches waiting for the next group commit (SQLite only).
    group: Option<std::sync::Mutex<Vec<(WriteBatch, GroupReply)>>>,
    /// The in-process part of the owners' critical sections (`lock_owner`), striped by owner.
    owner_stripes: Vec<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// Owner sections holding a connection of the pool at once (PostgreSQL): at most half of
    /// it, so that the holders always find connections for their reads and commits.
    owner_seats: std::sync::Arc<tokio::sync::Semaphore>,
}

/// Stripes of the in-process owner locks.
const OWNER_STRIPES: usize = 64;
/// The first key of the owners' advisory locks (the second is `hashtext` of
/// [`owner_lock_key`]), apart from the keys sqlx's migrator locks: `pg_locks` shows it as
/// `classid = 29719`.
pub const OWNER_LOCK_CLASS: i64 = 0x7417;

/// The text whose `hashtext` is the second key of `owner`'s advisory lock (PostgreSQL): the
/// same in every process sharing the database.
pub fn owner_lock_key(owner: &Owner) -> String {
    format!("{}\u{1f}{}", owner.tenant_id, owner.user_id)
}

type GroupReply = tokio::sync::oneshot::Sender<Result<(), StoreError>>;

fn backend_error(err: sqlx::Error) -> StoreError {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            StoreError::Unavailable(err.to_string())
        }
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists(db.message().to_string()),
        other => StoreError::Backend(other.to_string()),
    }
}

fn ms(time: DateTime<Utc>) -> i64 {
    time.timestamp_millis()
}

fn from_ms(value: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(value).single().unwrap_or_default()
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("serialising plain data cannot fail")
}

/// The value of a JSON column. One that does not parse is an error naming the table, the row
/// and the column: a corrupt row is reported, never read as empty (no tags, no decisions).
fn parse_json<T: serde::de::DeserializeOwned>(
    table: &str,
    id: &str,
    column: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| {
        StoreError::Backend(format!(
            "{table} row {id}: column {column} does not hold valid JSON ({err})"
        ))
    })
}

fn parse_enum<T: std::str::FromStr>(column: &str, value: &str) -> Result<T, StoreError> {
    value
        .parse()
        .map_err(|_| StoreError::Backend(format!("unexpected {column} {value:?} in the database")))
}

/// A bound argument.
#[derive(Debug, Clone)]
enum Arg {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
    Float(f64),
}

/// A query under construction: SQL with `?` placeholders and its arguments, in order.
#[derive(Debug, Default)]
struct Query {
    sql: String,
    args: Vec<Arg>,
}

impl Query {
    fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_string(),
            args: Vec::new(),
        }
    }

    fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    fn arg(&mut self, arg: Arg) -> &mut Self {
        self.args.push(arg);
        self
    }

    fn text(&mut self, value: impl Into<String>) -> &mut Self {
        self.arg(Arg::Text(value.into()))
    }

    /// Binds an owner: its tenant, then its user (for `tenant_id = ? AND user_id = ?`).
    fn owner(&mut self, owner: &Owner) -> &mut Self {
        self.text(owner.tenant_id.clone()).text(owner.user_id.clone())
    }

    fn int(&mut self, value: i64) -> &mut Self {
        self.arg(Arg::Int(value))
    }

    /// Appends `column IN (?, ?, …)` for the given values.
    fn push_in(&mut self, column: &str, values: impl IntoIterator<Item = String>) -> &mut Self {
        let values: Vec<String> = values.into_iter().collect();
        if values.is_empty() {
            self.sql.push_str(" 1 = 0");
            return self;
        }
        self.sql
            .push_str(&format!(" {column} IN ({})", vec!["?"; values.len()].join(", ")));
        for value in values {
            self.args.push(Arg::Text(value));
        }
        self
    }
}

/// Numbers `?` placeholders as `$1, $2, …` for PostgreSQL (outside string literals).
fn number_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    let mut in_string = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                in_string = !in_string;
                out.push(c);
            }
            '?' if !in_string => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

fn arguments(args: &[Arg]) -> Result<AnyArguments<'static>, StoreError> {
    let mut out = AnyArguments::default();
    for arg in args {
        let result = match arg.clone() {
            Arg::Text(v) => out.add(v),
            Arg::OptText(v) => out.add(v),
            Arg::Int(v) => out.add(v),
            Arg::OptInt(v) => out.add(v),
            Arg::Float(v) => out.add(v),
        };
        result.map_err(|err| StoreError::Backend(format!("cannot bind an argument: {err}")))?;
    }
    Ok(out)
}

const MEMORY_COLUMNS: &str = "id, tenant_id, user_id, role_id, project_id, session_id, memory_type, content, summary, \
    importance, confidence, freshness, evidence_count, visibility, status, superseded_by, source, tags, \
    created_at, updated_at, last_accessed_at, access_count, context, related_decision_ids, artifact_refs, \
    language, speaker, occurred_at, subject, iteration_id, external_id, version";

fn memory_args(memory: &Memory) -> Vec<Arg> {
    vec![
        Arg::Text(memory.id.clone()),
        Arg::Text(memory.scope.tenant_id.clone()),
        Arg::Text(memory.scope.user_id.clone()),
        Arg::Text(memory.scope.role_id.clone()),
        Arg::OptText(memory.scope.project_id.clone()),
        Arg::OptText(memory.scope.session_id.clone()),
        Arg::Text(memory.memory_type.as_str().into()),
        Arg::Text(memory.content.clone()),
        Arg::Text(memory.summary.clone()),
        Arg::Int(i64::from(memory.importance)),
        Arg::Float(memory.confidence),
        Arg::Float(memory.freshness),
        Arg::Int(i64::from(memory.evidence_count)),
        Arg::Text(memory.visibility.as_str().into()),
        Arg::Text(memory.status.as_str().into()),
        Arg::OptText(memory.superseded_by.clone()),
        Arg::Text(memory.source.as_str().into()),
        Arg::Text(json(&memory.tags)),
        Arg::Int(ms(memory.created_at)),
        Arg::Int(ms(memory.updated_at)),
        Arg::OptInt(memory.last_accessed_at.map(ms)),
        Arg::Int(memory.access_count as i64),
        Arg::Text(memory.context.clone()),
        Arg::Text(json(&memory.related_decision_ids)),
        Arg::Text(json(&memory.artifact_refs)),
        Arg::Text(memory.language.as_str().into()),
        Arg::OptText(memory.speaker.clone()),
        Arg::Int(ms(memory.occurred_at)),
        Arg::OptText(memory.subject.clone()),
        Arg::OptText(memory.iteration_id.clone()),
        Arg::OptText(memory.external_id.clone()),
    ]
}

fn memory_from_row(row: &AnyRow) -> Result<Memory, StoreError> {
    let get_text = |name: &str| row.try_get::<String, _>(name).map_err(backend_error);
    let get_opt = |name: &str| row.try_get::<Option<String>, _>(name).map_err(backend_error);
    let get_int = |name: &str| row.try_get::<i64, _>(name).map_err(backend_error);
    let id = get_text("id")?;
    let artifact_refs: Vec<ArtifactRef> = parse_json("memories", &id, "artifact_refs", &get_text("artifact_refs")?)?;
    let list = |name: &str| -> Result<Vec<String>, StoreError> { parse_json("memories", &id, name, &get_text(name)?) };
    Ok(Memory {
        id: id.clone(),
        scope: Scope {
            tenant_id: get_text("tenant_id")?,
            user_id: get_text("user_id")?,
            role_id: get_text("role_id")?,
            project_id: get_opt("project_id")?,
            session_id: get_opt("session_id")?,
        },
        memory_type: parse_enum::<MemoryType>("memory_type", &get_text("memory_type")?)?,
        content: get_text("content")?,
        summary: get_text("summary")?,
        importance: get_int("importance")?.clamp(1, 5) as u8,
        confidence: row.try_get::<f64, _>("confidence").map_err(backend_error)?,
        freshness: row.try_get::<f64, _>("freshness").map_err(backend_error)?,
        evidence_count: get_int("evidence_count")?.max(0) as u32,
        visibility: parse_enum::<Visibility>("visibility", &get_text("visibility")?)?,
        status: parse_enum::<MemoryStatus>("status", &get_text("status")?)?,
        superseded_by: get_opt("superseded_by")?,
        source: parse_enum::<MemorySource>("source", &get_text("source")?)?,
        tags: list("tags")?,
        created_at: from_ms(get_int("created_at")?),
        updated_at: from_ms(get_int("updated_at")?),
        last_accessed_at: row
            .try_get::<Option<i64>, _>("last_accessed_at")
            .map_err(backend_error)?
            .map(from_ms),
        access_count: get_int("access_count")?.max(0) as u64,
        context: get_text("context")?,
        related_decision_ids: list("related_decision_ids")?,
        artifact_refs,
        language: parse_enum::<Language>("language", &get_text("language")?)?,
        speaker: get_opt("speaker")?,
        occurred_at: from_ms(get_int("occurred_at")?),
        subject: get_opt("subject")?,
        iteration_id: get_opt("iteration_id")?,
        external_id: get_opt("external_id")?,
        version: get_int("version")?,
    })
}

fn change_from_row(row: &AnyRow) -> Result<Change, StoreError> {
    Ok(Change {
        id: row.try_get("id").map_err(backend_error)?,
        tenant_id: row.try_get("tenant_id").map_err(backend_error)?,
        user_id: row.try_get("user_id").map_err(backend_error)?,
        memory_id: row.try_get("memory_id").map_err(backend_error)?,
        kind: parse_enum::<ChangeKind>("kind", &row.try_get::<String, _>("kind").map_err(backend_error)?)?,
        actor: row.try_get("actor").map_err(backend_error)?,
        reason: row.try_get("reason").map_err(backend_error)?,
        before: row.try_get("before_json").map_err(backend_error)?,
        after: row.try_get("after_json").map_err(backend_error)?,
        at: from_ms(row.try_get("at").map_err(backend_error)?),
    })
}

fn candidate_from_row(row: &AnyRow) -> Result<Candidate, StoreError> {
    Ok(Candidate {
        id: row.try_get("id").map_err(backend_error)?,
        scope: Scope {
            tenant_id: row.try_get("tenant_id").map_err(backend_error)?,
            user_id: row.try_get("user_id").map_err(backend_error)?,
            role_id: row.try_get("role_id").map_err(backend_error)?,
            project_id: row.try_get("project_id").map_err(backend_error)?,
            session_id: row.try_get("session_id").map_err(backend_error)?,
        },
        draft: row.try_get("draft").map_err(backend_error)?,
        reason: row.try_get("reason").map_err(backend_error)?,
        score: row.try_get("score").map_err(backend_error)?,
        evidence_count: row.try_get::<i64, _>("evidence_count").map_err(backend_error)?.max(0) as u32,
        status: parse_enum::<CandidateStatus>("status", &row.try_get::<String, _>("status").map_err(backend_error)?)?,
        content_key: row.try_get("content_key").map_err(backend_error)?,
        created_at: from_ms(row.try_get("created_at").map_err(backend_error)?),
        decided_at: row
            .try_get::<Option<i64>, _>("decided_at")
            .map_err(backend_error)?
            .map(from_ms),
        memory_id: row.try_get("memory_id").map_err(backend_error)?,
    })
}

fn artifact_from_row(row: &AnyRow) -> Result<ArtifactRecord, StoreError> {
    Ok(ArtifactRecord {
        id: row.try_get("id").map_err(backend_error)?,
        tenant_id: row.try_get("tenant_id").map_err(backend_error)?,
        user_id: row.try_get("user_id").map_err(backend_error)?,
        role_id: row.try_get("role_id").map_err(backend_error)?,
        project_id: row.try_get("project_id").map_err(backend_error)?,
        session_id: row.try_get("session_id").map_err(backend_error)?,
        tool_call_id: row.try_get("tool_call_id").map_err(backend_error)?,
        tool_name: row.try_get("tool_name").map_err(backend_error)?,
        mime_type: row.try_get("mime_type").map_err(backend_error)?,
        size_bytes: row.try_get::<i64, _>("size_bytes").map_err(backend_error)?.max(0) as u64,
        sha256: row.try_get("sha256").map_err(backend_error)?,
        blob_key: row.try_get("blob_key").map_err(backend_error)?,
        path: row.try_get("path").map_err(backend_error)?,
        line_count: row.try_get::<i64, _>("line_count").map_err(backend_error)?.max(0) as u64,
        kind: row.try_get("kind").map_err(backend_error)?,
        language: row.try_get("language").map_err(backend_error)?,
        compact: row.try_get("compact").map_err(backend_error)?,
        metadata: row.try_get("metadata").map_err(backend_error)?,
        created_at: from_ms(row.try_get("created_at").map_err(backend_error)?),
        expires_at: row
            .try_get::<Option<i64>, _>("expires_at")
            .map_err(backend_error)?
            .map(from_ms),
    })
}

fn session_from_row(row: &AnyRow) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        tenant_id: row.try_get("tenant_id").map_err(backend_error)?,
        user_id: row.try_get("user_id").map_err(backend_error)?,
        session_id: row.try_get("session_id").map_err(backend_error)?,
        role_id: row.try_get("role_id").map_err(backend_error)?,
        project_id: row.try_get("project_id").map_err(backend_error)?,
        message_count: row.try_get::<i64, _>("message_count").map_err(backend_error)?.max(0) as u32,
        last_message_at: from_ms(row.try_get("last_message_at").map_err(backend_error)?),
        summarized_until: row.try_get::<i64, _>("summarized_until").map_err(backend_error)? as i32,
        ended: row.try_get::<i64, _>("ended").map_err(backend_error)? != 0,
        summary_requested: row.try_get::<i64, _>("summary_requested").map_err(backend_error)? != 0,
    })
}

fn summary_from_row(row: &AnyRow) -> Result<SummaryRecord, StoreError> {
    let text = |name: &str| row.try_get::<String, _>(name).map_err(backend_error);
    let id = text("id")?;
    let list =
        |name: &str| -> Result<Vec<String>, StoreError> { parse_json("session_summaries", &id, name, &text(name)?) };
    Ok(SummaryRecord {
        id: id.clone(),
        tenant_id: text("tenant_id")?,
        user_id: text("user_id")?,
        role_id: text("role_id")?,
        project_id: row.try_get("project_id").map_err(backend_error)?,
        session_id: text("session_id")?,
        goal: text("goal")?,
        constraints: list("constraints")?,
        decisions: parse_json("session_summaries", &id, "decisions", &text("decisions")?)?,
        progress: list("progress")?,
        artifacts: parse_json("session_summaries", &id, "artifacts", &text("artifacts")?)?,
        next_actions: list("next_actions")?,
        risks: list("risks")?,
        open_questions: list("open_questions")?,
        trajectory_start: row.try_get::<i64, _>("trajectory_start").map_err(backend_error)? as i32,
        trajectory_end: row.try_get::<i64, _>("trajectory_end").map_err(backend_error)? as i32,
        language: text("language")?,
        engine: text("engine")?,
        created_at: from_ms(row.try_get("created_at").map_err(backend_error)?),
        updated_at: from_ms(row.try_get("updated_at").map_err(backend_error)?),
    })
}

fn job_from_row(row: &AnyRow) -> Result<JobRecord, StoreError> {
    Ok(JobRecord {
        id: row.try_get("id").map_err(backend_error)?,
        kind: row.try_get("kind").map_err(backend_error)?,
        tenant_id: row.try_get("tenant_id").map_err(backend_error)?,
        user_id: row.try_get("user_id").map_err(backend_error)?,
        session_id: row.try_get("session_id").map_err(backend_error)?,
        payload: row.try_get("payload").map_err(backend_error)?,
        status: parse_enum::<JobStatus>("status", &row.try_get::<String, _>("status").map_err(backend_error)?)?,
        attempts: row.try_get::<i64, _>("attempts").map_err(backend_error)?.max(0) as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts").map_err(backend_error)?.max(0) as u32,
        last_error: row.try_get("last_error").map_err(backend_error)?,
        run_after: from_ms(row.try_get("run_after").map_err(backend_error)?),
        lease_until: row
            .try_get::<Option<i64>, _>("lease_until")
            .map_err(backend_error)?
            .map(from_ms),
        dedupe_key: row.try_get("dedupe_key").map_err(backend_error)?,
        result: row.try_get("result").map_err(backend_error)?,
        created_at: from_ms(row.try_get("created_at").map_err(backend_error)?),
        updated_at: from_ms(row.try_get("updated_at").map_err(backend_error)?),
    })
}

/// The column of a field of a plan.
fn column(field: Field) -> &'static str {
    match field {
        Field::Tenant => "tenant_id",
        Field::User => "user_id",
        Field::Role => "role_id",
        Field::Project => "project_id",
        Field::Session => "session_id",
        Field::Type => "memory_type",
        Field::Visibility => "visibility",
        Field::Status => "status",
    }
}

/// Appends a plan (see [`crate::filter`]) as one parenthesised condition.
fn push_plan(query: &mut Query, plan: &Plan) {
    match plan {
        Plan::Never => {
            query.push("1 = 0");
        }
        Plan::All(plans) | Plan::Any(plans) => {
            let joint = if matches!(plan, Plan::All(_)) { " AND " } else { " OR " };
            query.push("(");
            for (i, inner) in plans.iter().enumerate() {
                if i > 0 {
                    query.push(joint);
                }
                push_plan(query, inner);
            }
            query.push(")");
        }
        Plan::Is(field, value) => {
            query.push(&format!("{} = ?", column(*field))).text(value.clone());
        }
        Plan::OneOf(field, values) => {
            query.push_in(column(*field), values.iter().cloned());
        }
        Plan::CrossProject(true) => {
            query.push("project_id IS NULL");
        }
        Plan::CrossProject(false) => {
            query.push("project_id IS NOT NULL");
        }
        Plan::OccurredWithin { from_ms, to_ms } => {
            query.push("(1 = 1");
            if let Some(from) = from_ms {
                query.push(" AND occurred_at >= ?").int(*from);
            }
            if let Some(to) = to_ms {
                query.push(" AND occurred_at < ?").int(*to);
            }
            query.push(")");
        }
        Plan::HasTag(tag) => {
            query
                .push("tags LIKE ? ESCAPE '\\'")
                .text(format!("%{}%", like_escape(&json(tag))));
        }
    }
}

/// Escapes LIKE wildcards; patterns use `ESCAPE '\'`.
fn like_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

fn memory_where(query: &mut Query, q: &MemoryQuery) {
    query.push(" WHERE ");
    push_plan(query, &q.filter.plan());
    if let Some(role) = &q.owner_role {
        query.push(" AND role_id = ?").text(role.clone());
    }
    if !q.exclude_types.is_empty() {
        query.push(" AND NOT");
        query.push_in("memory_type", q.exclude_types.iter().map(|t| t.as_str().to_string()));
    }
    if let Some(subject) = &q.subject {
        query.push(" AND subject = ?").text(subject.clone());
    }
    if let Some(iteration) = &q.iteration_id {
        query.push(" AND iteration_id = ?").text(iteration.clone());
    }
    if let Some(before) = q.created_before {
        query.push(" AND created_at < ?").int(ms(before));
    }
    if let Some(max) = q.max_importance {
        query.push(" AND importance <= ?").int(i64::from(max));
    }
    if let Some(max) = q.max_access_count {
        query.push(" AND access_count <= ?").int(max as i64);
    }
}

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
        #[derive(Debug)]
        struct Upto(Vec<sqlx::migrate::Migration>);
        impl<'s> sqlx::migrate::MigrationSource<'s> for Upto {
            fn resolve(
                self,
            ) -> futures::future::BoxFuture<'s, Result<Vec<sqlx::migrate::Migration>, sqlx::error::BoxDynError>>
            {
                Box::pin(async move { Ok(self.0) })
            }
        }
        let store = Self::open(url, max_connections).await?;
        let all = match store.backend {
            Backend::Sqlite => &MIGRATOR_SQLITE,
            Backend::Postgres => &MIGRATOR_POSTGRES,
        };
        let older = all.iter().filter(|m| m.version <= version).cloned().collect();
        let migrator = sqlx::migrate::Migrator::new(Upto(older))
            .await
            .map_err(|err| StoreError::Backend(format!("migrations: {err}")))?;
        migrator
            .run(&store.pool)
            .await
            .map_err(|err| StoreError::Backend(format!("migrations failed: {err}")))?;
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

    async fn open(url: &str, max_connections: u32) -> Result<Self, StoreError> {
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
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = match self.backend {
            Backend::Sqlite => &MIGRATOR_SQLITE,
            Backend::Postgres => &MIGRATOR_POSTGRES,
        };
        // PostgreSQL serialises concurrent migrators with an advisory lock; SQLite has none, so
        // when several processes open a fresh database at once, the losers of the race see a
        // rolled-back attempt and retry: by then the winner's migrations are recorded.
        let mut attempt = 0;
        loop {
            match migrator.run(&self.pool).await {
                Ok(()) => return Ok(()),
                Err(err) if self.backend == Backend::Sqlite && attempt < 20 => {
                    attempt += 1;
                    tracing::debug!(%err, attempt, "another process is migrating the database; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
                }
                Err(err) => return Err(StoreError::Backend(format!("migrations failed: {err}"))),
            }
        }
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
    fn owner_of_ids(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "+tenant_id = ? AND +user_id",
            Backend::Postgres => "tenant_id = ? AND user_id",
        }
    }

    fn sql(&self, sql: &str) -> String {
        match self.backend {
            Backend::Sqlite => sql.to_string(),
            Backend::Postgres => number_placeholders(sql),
        }
    }

    async fn fetch_all(&self, query: &Query) -> Result<Vec<AnyRow>, StoreError> {
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

    async fn fetch_optional(&self, query: &Query) -> Result<Option<AnyRow>, StoreError> {
        Ok(self.fetch_all(query).await?.into_iter().next())
    }

    /// The number a `SELECT COUNT(*) …` answers.
    async fn count(&self, query: &Query) -> Result<u64, StoreError> {
        let row = self.fetch_optional(query).await?;
        Ok(row
            .map(|r| r.try_get::<i64, _>(0).map_err(backend_error))
            .transpose()?
            .unwrap_or(0)
            .max(0) as u64)
    }

    async fn execute(&self, query: &Query) -> Result<u64, StoreError> {
        let _guard = self.lock_writes().await;
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

    async fn lock_writes(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_lock {
            Some(lock) => Some(lock.lock().await),
            None => None,
        }
    }

    async fn begin(&self) -> Result<Transaction<'static, Any>, StoreError> {
        self.pool.begin().await.map_err(backend_error)
    }

    async fn tx_execute(&self, tx: &mut Transaction<'static, Any>, query: &Query) -> Result<u64, StoreError> {
        let sql = self.sql(&query.sql);
        let args = arguments(&query.args)?;
        let result = sqlx::query_with(&sql, args)
            .execute(&mut **tx)
            .await
            .map_err(backend_error)?;
        Ok(result.rows_affected())
    }

    async fn tx_fetch_optional(
        &self,
        tx: &mut Transaction<'static, Any>,
        query: &Query,
    ) -> Result<Option<AnyRow>, StoreError> {
        let sql = self.sql(&query.sql);
        let args = arguments(&query.args)?;
        sqlx::query_with(&sql, args)
            .fetch_optional(&mut **tx)
            .await
            .map_err(backend_error)
    }

    /// Writes one batch inside a transaction; an error leaves the transaction to be rolled back
    /// (or rolled back to the batch's savepoint).
    async fn apply(&self, tx: &mut Transaction<'static, Any>, batch: &WriteBatch) -> Result<(), StoreError> {
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
            let assignments: Vec<String> = columns[3..columns.len() - 1]
                .iter()
                .map(|c| format!("{c} = ?"))
                .collect();
            let mut q = Query::new(&format!(
                "UPDATE memories SET {}, version = version + 1 WHERE id = ? AND tenant_id = ? AND user_id = ? AND version = ?",
                assignments.join(", ")
            ));
            let args = memory_args(memory);
            for arg in &args[3..] {
                q.arg(arg.clone());
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
    async fn group_commit(&self, batch: WriteBatch) -> Result<(), StoreError> {
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
    async fn commit_together(&self, queued: &[(WriteBatch, GroupReply)]) -> Vec<Result<(), StoreError>> {
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
        match tx.commit().await.map_err(backend_error) {
            Ok(()) => results,
            Err(err) => all_fail(&err),
        }
    }

    fn for_update(&self) -> &'static str {
        match self.backend {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        }
    }
}

/// The same error for every batch of a failed group commit.
fn copy_store_error(err: &StoreError) -> StoreError {
    match err {
        StoreError::NotFound(m) => StoreError::NotFound(m.clone()),
        StoreError::Conflict(m) => StoreError::Conflict(m.clone()),
        StoreError::AlreadyExists(m) => StoreError::AlreadyExists(m.clone()),
        StoreError::Invalid(m) => StoreError::Invalid(m.clone()),
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
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

#[async_trait]
impl MemoryStore for SqlStore {
    async fn commit(&self, batch: WriteBatch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.group.is_some() {
            return self.group_commit(batch).await;
        }
        let span = tracing::info_span!("db.commit", db.system = self.backend_name(), otel.kind = "client");
        let started = std::time::Instant::now();
        let mut tx = self.begin().instrument(span.clone()).await?;
        let result = self.apply(&mut tx, &batch).instrument(span).await;
        let outcome = match result {
            Ok(()) => tx.commit().await.map_err(backend_error),
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        };
        thinkus_common::metrics::METRICS
            .backend_latency
            .with_label_values(&[self.backend_name(), "commit"])
            .observe(started.elapsed().as_secs_f64());
        outcome
    }

    async fn get_memory(&self, owner: &Owner, id: &str) -> Result<Option<Memory>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ? AND id = ?"
        ));
        q.owner(owner).text(id);
        self.fetch_optional(&q).await?.as_ref().map(memory_from_row).transpose()
    }

    async fn get_memories(&self, owner: &Owner, ids: &[String]) -> Result<Vec<Memory>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = std::collections::HashMap::new();
        for chunk in ids.chunks(500) {
            let mut q = Query::new(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE {} = ? AND",
                self.owner_of_ids()
            ));
            q.owner(owner);
            q.push_in("id", chunk.iter().cloned());
            for row in self.fetch_all(&q).await? {
                let memory = memory_from_row(&row)?;
                found.insert(memory.id.clone(), memory);
            }
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    async fn find_external(&self, owner: &Owner, external_ids: &[String]) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        for chunk in external_ids.chunks(500) {
            let mut q = Query::new("SELECT external_id, id FROM memories WHERE tenant_id = ? AND user_id = ? AND");
            q.owner(owner);
            q.push_in("external_id", chunk.iter().cloned());
            for row in self.fetch_all(&q).await? {
                out.push((
                    row.try_get::<String, _>(0).map_err(backend_error)?,
                    row.try_get::<String, _>(1).map_err(backend_error)?,
                ));
            }
        }
        Ok(out)
    }

    async fn list_memories(&self, query: &MemoryQuery) -> Result<Vec<Memory>, StoreError> {
        let mut q = Query::new(&format!("SELECT {MEMORY_COLUMNS} FROM memories"));
        memory_where(&mut q, query);
        q.push(match query.order {
            MemoryOrder::Newest => " ORDER BY occurred_at DESC, id DESC",
            MemoryOrder::Oldest => " ORDER BY occurred_at ASC, id ASC",
            MemoryOrder::LeastValuable => " ORDER BY importance ASC, access_count ASC, created_at ASC, id ASC",
        });
        if query.limit > 0 {
            q.push(" LIMIT ? OFFSET ?")
                .int(query.limit as i64)
                .int(query.offset as i64);
        }
        self.fetch_all(&q).await?.iter().map(memory_from_row).collect()
    }

    async fn count_memories(&self, query: &MemoryQuery) -> Result<u64, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM memories");
        memory_where(&mut q, query);
        self.count(&q).await
    }

    async fn record_access(
        &self,
        owner: &Owner,
        ids: &[String],
        at: DateTime<Utc>,
        boost: f64,
        cap: f64,
    ) -> Result<Vec<(String, f64)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Query::new(&format!(
            "UPDATE memories SET last_accessed_at = ?, access_count = access_count + 1, \
             freshness = CASE WHEN freshness + ? > ? THEN ? ELSE freshness + ? END, version = version + 1 \
             WHERE {} = ? AND",
            self.owner_of_ids()
        ));
        q.int(ms(at))
            .arg(Arg::Float(boost))
            .arg(Arg::Float(cap))
            .arg(Arg::Float(cap))
            .arg(Arg::Float(boost))
            .owner(owner);
        q.push_in("id", ids.iter().cloned());
        self.execute(&q).await?;
        let mut read = Query::new(&format!(
            "SELECT id, freshness FROM memories WHERE {} = ? AND",
            self.owner_of_ids()
        ));
        read.owner(owner);
        read.push_in("id", ids.iter().cloned());
        self.fetch_all(&read)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>(0).map_err(backend_error)?,
                    row.try_get::<f64, _>(1).map_err(backend_error)?,
                ))
            })
            .collect()
    }

    async fn changes(&self, owner: &Owner, memory_id: &str) -> Result<Vec<Change>, StoreError> {
        let mut q = Query::new(
            "SELECT id, tenant_id, user_id, memory_id, kind, actor, reason, before_json, after_json, at FROM memory_changes \
             WHERE tenant_id = ? AND user_id = ? AND memory_id = ? ORDER BY at ASC, id ASC",
        );
        q.owner(owner).text(memory_id);
        self.fetch_all(&q).await?.iter().map(change_from_row).collect()
    }

    async fn get_idempotent(&self, owner: &Owner, key: &str) -> Result<Option<String>, StoreError> {
        let mut q =
            Query::new("SELECT response FROM idempotency WHERE tenant_id = ? AND user_id = ? AND request_key = ?");
        q.owner(owner).text(key);
        self.fetch_optional(&q)
            .await?
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .transpose()
    }

    async fn get_candidate(&self, owner: &Owner, id: &str) -> Result<Option<Candidate>, StoreError> {
        let mut q = Query::new("SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? AND id = ?");
        q.owner(owner).text(id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(candidate_from_row)
            .transpose()
    }

    async fn list_candidates(
        &self,
        owner: &Owner,
        role_id: Option<&str>,
        project_id: Option<&str>,
        status: CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<Candidate>, StoreError> {
        let mut q = Query::new("SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? AND status = ?");
        q.owner(owner).text(status.as_str());
        if let Some(role) = role_id {
            q.push(" AND role_id = ?").text(role);
        }
        if let Some(project) = project_id {
            q.push(" AND project_id = ?").text(project);
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .int(limit as i64)
            .int(offset as i64);
        self.fetch_all(&q).await?.iter().map(candidate_from_row).collect()
    }

    async fn find_pending_candidate(&self, owner: &Owner, content_key: &str) -> Result<Option<Candidate>, StoreError> {
        let mut q = Query::new(
            "SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? AND content_key = ? AND status = 'pending' \
             ORDER BY created_at ASC LIMIT 1",
        );
        q.owner(owner).text(content_key);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(candidate_from_row)
            .transpose()
    }

    async fn get_plan(&self, owner: &Owner) -> Result<Option<String>, StoreError> {
        let mut q = Query::new("SELECT plan FROM user_plans WHERE tenant_id = ? AND user_id = ?");
        q.owner(owner);
        self.fetch_optional(&q)
            .await?
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .transpose()
    }

    async fn set_plan(&self, owner: &Owner, plan: &str) -> Result<(), StoreError> {
        let mut q = Query::new(
            "INSERT INTO user_plans (tenant_id, user_id, plan, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (tenant_id, user_id) DO UPDATE SET plan = excluded.plan, updated_at = excluded.updated_at",
        );
        q.owner(owner).text(plan).int(ms(Utc::now()));
        self.execute(&q).await?;
        Ok(())
    }

    async fn count_by_status(&self) -> Result<Vec<(MemoryStatus, u64)>, StoreError> {
        let q = Query::new("SELECT status, COUNT(*) FROM memories GROUP BY status");
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                let status: String = row.try_get(0).map_err(backend_error)?;
                let count: i64 = row.try_get(1).map_err(backend_error)?;
                Ok((parse_enum::<MemoryStatus>("status", &status)?, count.max(0) as u64))
            })
            .collect()
    }

    async fn list_users(&self) -> Result<Vec<Owner>, StoreError> {
        let q = Query::new("SELECT DISTINCT tenant_id, user_id FROM memories ORDER BY tenant_id, user_id");
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                Ok(Owner::new(
                    row.try_get::<String, _>(0).map_err(backend_error)?,
                    row.try_get::<String, _>(1).map_err(backend_error)?,
                ))
            })
            .collect()
    }

    async fn list_roles(&self, owner: &Owner) -> Result<Vec<String>, StoreError> {
        let mut q = Query::new(
            "SELECT role_id FROM memories WHERE tenant_id = ? AND user_id = ? \
             UNION SELECT role_id FROM candidates WHERE tenant_id = ? AND user_id = ? ORDER BY 1",
        );
        q.owner(owner).owner(owner);
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .collect()
    }

    async fn owner_records(&self, owner: &Owner) -> Result<OwnerRecords, StoreError> {
        let select = |sql: &str| {
            let mut q = Query::new(sql);
            q.owner(owner);
            q
        };
        let memories = self
            .fetch_all(&select(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC"
            )))
            .await?
            .iter()
            .map(memory_from_row)
            .collect::<Result<_, _>>()?;
        let changes = self
            .fetch_all(&select(
                "SELECT id, tenant_id, user_id, memory_id, kind, actor, reason, before_json, after_json, at \
                 FROM memory_changes WHERE tenant_id = ? AND user_id = ? ORDER BY at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(change_from_row)
            .collect::<Result<_, _>>()?;
        let candidates = self
            .fetch_all(&select(
                "SELECT * FROM candidates WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(candidate_from_row)
            .collect::<Result<_, _>>()?;
        let plan = self.get_plan(owner).await?;
        let sessions = self
            .fetch_all(&select(
                "SELECT * FROM sessions WHERE tenant_id = ? AND user_id = ? ORDER BY last_message_at ASC, session_id ASC",
            ))
            .await?
            .iter()
            .map(session_from_row)
            .collect::<Result<_, _>>()?;
        let messages = self
            .fetch_all(&select(
                "SELECT session_id, idx, role, speaker, content, created_at FROM session_messages \
                 WHERE tenant_id = ? AND user_id = ? ORDER BY session_id ASC, idx ASC",
            ))
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>(0).map_err(backend_error)?,
                    Message {
                        index: row.try_get::<i64, _>(1).map_err(backend_error)?.max(0) as u32,
                        role: row.try_get(2).map_err(backend_error)?,
                        speaker: row.try_get(3).map_err(backend_error)?,
                        content: row.try_get(4).map_err(backend_error)?,
                        created_at: from_ms(row.try_get(5).map_err(backend_error)?),
                    },
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        let summaries = self
            .fetch_all(&select(
                "SELECT * FROM session_summaries WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(summary_from_row)
            .collect::<Result<_, _>>()?;
        let artifacts = self
            .fetch_all(&select(&format!(
                "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC"
            )))
            .await?
            .iter()
            .map(artifact_from_row)
            .collect::<Result<_, _>>()?;
        let jobs = self
            .fetch_all(&select(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, id ASC"
            )))
            .await?
            .iter()
            .map(job_from_row)
            .collect::<Result<_, _>>()?;
        let request_keys = self
            .fetch_all(&select(
                "SELECT request_key FROM idempotency WHERE tenant_id = ? AND user_id = ? ORDER BY created_at ASC, request_key ASC",
            ))
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>(0).map_err(backend_error))
            .collect::<Result<_, _>>()?;
        let erasures = self
            .fetch_all(&select(
                "SELECT id, tenant_id, user_id, actor, at, counts FROM erasures \
                 WHERE tenant_id = ? AND user_id = ? ORDER BY at ASC, id ASC",
            ))
            .await?
            .iter()
            .map(erasure_from_row)
            .collect::<Result<_, _>>()?;
        Ok(OwnerRecords {
            memories,
            changes,
            candidates,
            plan,
            sessions,
            messages,
            summaries,
            artifacts,
            jobs,
            request_keys,
            erasures,
        })
    }

    async fn erase_owner(&self, owner: &Owner, erasure: ErasureRecord) -> Result<ErasureCounts, StoreError> {
        let _guard = self.lock_writes().await;
        let mut tx = self.begin().await?;
        let result: Result<ErasureCounts, StoreError> = async {
            let mut artifacts = Query::new("SELECT COUNT(*) FROM artifacts WHERE tenant_id = ? AND user_id = ?");
            artifacts.owner(owner);
            let left = self
                .tx_fetch_optional(&mut tx, &artifacts)
                .await?
                .map(|row| row.try_get::<i64, _>(0).map_err(backend_error))
                .transpose()?
                .unwrap_or(0);
            if left > 0 {
                return Err(StoreError::Conflict(format!(
                    "user {:?} of tenant {:?} still has {left} artifacts: the artifact service removes them and their blobs first",
                    owner.user_id, owner.tenant_id
                )));
            }
            let mut counts = erasure.counts;
            for (table, count) in [
                ("memories", &mut counts.memories),
                ("memory_changes", &mut counts.changes),
                ("candidates", &mut counts.candidates),
                ("idempotency", &mut counts.idempotency),
                ("user_plans", &mut counts.plans),
                ("session_messages", &mut counts.session_messages),
                ("sessions", &mut counts.sessions),
                ("session_summaries", &mut counts.summaries),
                ("jobs", &mut counts.jobs),
            ] {
                let mut q = Query::new(&format!("DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?"));
                q.owner(owner);
                *count += self.tx_execute(&mut tx, &q).await?;
            }
            // Nothing removed anywhere (a repeated erasure): nothing to record.
            if counts.total() > 0 {
                let mut q = Query::new(
                    "INSERT INTO erasures (id, tenant_id, user_id, actor, at, counts) VALUES (?, ?, ?, ?, ?, ?)",
                );
                q.text(erasure.id.clone())
                    .owner(owner)
                    .text(erasure.actor.clone())
                    .int(ms(erasure.at))
                    .text(json(&counts));
                self.tx_execute(&mut tx, &q).await?;
            }
            Ok(counts)
        }
        .await;
        match result {
            Ok(counts) => {
                tx.commit().await.map_err(backend_error)?;
                Ok(counts)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }
}

fn erasure_from_row(row: &AnyRow) -> Result<ErasureRecord, StoreError> {
    let counts: String = row.try_get("counts").map_err(backend_error)?;
    Ok(ErasureRecord {
        id: row.try_get("id").map_err(backend_error)?,
        tenant_id: row.try_get("tenant_id").map_err(backend_error)?,
        user_id: row.try_get("user_id").map_err(backend_error)?,
        actor: row.try_get("actor").map_err(backend_error)?,
        at: from_ms(row.try_get("at").map_err(backend_error)?),
        counts: serde_json::from_str(&counts)
            .map_err(|err| StoreError::Backend(format!("unreadable erasure counts {counts:?}: {err}")))?,
    })
}

const ARTIFACT_COLUMNS: &str = "id, tenant_id, user_id, role_id, project_id, session_id, tool_call_id, tool_name, mime_type, \
    size_bytes, sha256, blob_key, path, line_count, kind, language, compact, metadata, created_at, expires_at";

#[async_trait]
impl super::OwnerSections for SqlStore {
    async fn lock_owner(&self, owner: &Owner) -> Result<super::OwnerLock, StoreError> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        owner.hash(&mut hasher);
        let stripe = self.owner_stripes[hasher.finish() as usize % OWNER_STRIPES].clone();
        // In-process first: this process's writers of one owner wait here, not on connections.
        let mut held: Vec<Box<dyn Send>> = vec![Box::new(stripe.lock_owned().await)];
        if self.backend == Backend::Postgres {
            let seat = self
                .owner_seats
                .clone()
                .acquire_owned()
                .await
                .map_err(|err| StoreError::Unavailable(err.to_string()))?;
            let mut tx = self.begin().await?;
            self.tx_execute(&mut tx, &Query::new("SET LOCAL lock_timeout = '30s'"))
                .await?;
            // The owner's key: a hash PostgreSQL computes, the same in every process. The lock
            // function returns `void`, which the `Any` driver cannot read: select a 1 beside it.
            let mut lock =
                Query::new("SELECT 1 FROM (SELECT pg_advisory_xact_lock(CAST(? AS INTEGER), hashtext(?))) AS locked");
            lock.int(OWNER_LOCK_CLASS).text(owner_lock_key(owner));
            let sql = self.sql(&lock.sql);
            let args = arguments(&lock.args)?;
            sqlx::query_with(&sql, args)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|err| match err {
                    sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03") => StoreError::Unavailable(
                        format!("the write lock of user {:?} was held for more than 30 s", owner.user_id),
                    ),
                    other => backend_error(other),
                })?;
            // Dropped in this order: the transaction (its rollback releases the lock), then the seat.
            held.push(Box::new(seat));
            held.push(Box::new(tx));
            held.reverse();
        }
        Ok(super::OwnerLock::new(held))
    }

    async fn job_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM jobs WHERE id = ? AND tenant_id = ? AND user_id = ?");
        q.text(id).owner(owner);
        Ok(self.count(&q).await? > 0)
    }

    async fn session_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM sessions WHERE tenant_id = ? AND user_id = ? AND session_id = ?");
        q.owner(owner).text(id);
        Ok(self.count(&q).await? > 0)
    }
}

#[async_trait]
impl ArtifactStore for SqlStore {
    async fn insert_artifact(&self, a: &ArtifactRecord) -> Result<(), StoreError> {
        let mut q = Query::new(&format!(
            "INSERT INTO artifacts ({ARTIFACT_COLUMNS}) VALUES ({})",
            vec!["?"; 20].join(", ")
        ));
        q.text(a.id.clone())
            .text(a.tenant_id.clone())
            .text(a.user_id.clone())
            .arg(Arg::OptText(a.role_id.clone()))
            .arg(Arg::OptText(a.project_id.clone()))
            .text(a.session_id.clone())
            .arg(Arg::OptText(a.tool_call_id.clone()))
            .arg(Arg::OptText(a.tool_name.clone()))
            .text(a.mime_type.clone())
            .int(a.size_bytes as i64)
            .text(a.sha256.clone())
            .text(a.blob_key.clone())
            .arg(Arg::OptText(a.path.clone()))
            .int(a.line_count as i64)
            .text(a.kind.clone())
            .text(a.language.clone())
            .text(a.compact.clone())
            .text(a.metadata.clone())
            .int(ms(a.created_at))
            .arg(Arg::OptInt(a.expires_at.map(ms)));
        self.execute(&q).await?;
        Ok(())
    }

    async fn get_artifact(&self, owner: &Owner, id: &str) -> Result<Option<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? AND id = ?"
        ));
        q.owner(owner).text(id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(artifact_from_row)
            .transpose()
    }

    async fn find_artifact(
        &self,
        owner: &Owner,
        session_id: &str,
        sha256: &str,
    ) -> Result<Option<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ? AND session_id = ? AND sha256 = ? \
             ORDER BY created_at ASC LIMIT 1"
        ));
        q.owner(owner).text(session_id).text(sha256);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(artifact_from_row)
            .transpose()
    }

    async fn list_artifacts(
        &self,
        owner: &Owner,
        session_id: Option<&str>,
        project_id: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE tenant_id = ? AND user_id = ?"
        ));
        q.owner(owner);
        if let Some(session) = session_id {
            q.push(" AND session_id = ?").text(session);
        }
        if let Some(project) = project_id {
            q.push(" AND project_id = ?").text(project);
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .int(limit as i64)
            .int(offset as i64);
        self.fetch_all(&q).await?.iter().map(artifact_from_row).collect()
    }

    async fn delete_artifact(&self, owner: &Owner, id: &str) -> Result<Option<ArtifactRecord>, StoreError> {
        let Some(record) = self.get_artifact(owner, id).await? else {
            return Ok(None);
        };
        let mut q = Query::new("DELETE FROM artifacts WHERE tenant_id = ? AND user_id = ? AND id = ?");
        q.owner(owner).text(id);
        if self.execute(&q).await? == 0 {
            return Ok(None);
        }
        Ok(Some(record))
    }

    async fn count_blob_refs(&self, blob_key: &str) -> Result<u64, StoreError> {
        let mut q = Query::new("SELECT COUNT(*) FROM artifacts WHERE blob_key = ?");
        q.text(blob_key);
        self.count(&q).await
    }

    async fn expired_artifacts(
        &self,
        now: DateTime<Utc>,
        owner: Option<&Owner>,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE expires_at IS NOT NULL AND expires_at <= ?"
        ));
        q.int(ms(now));
        if let Some(owner) = owner {
            q.push(" AND tenant_id = ? AND user_id = ?").owner(owner);
        }
        q.push(" ORDER BY expires_at ASC LIMIT ?").int(limit as i64);
        self.fetch_all(&q).await?.iter().map(artifact_from_row).collect()
    }
}

#[async_trait]
impl SessionStore for SqlStore {
    async fn append_messages(&self, key: &SessionKey, messages: &[Message]) -> Result<(u32, u32), StoreError> {
        if messages.is_empty() {
            return Err(StoreError::Invalid("no messages to append".into()));
        }
        let _guard = self.lock_writes().await;
        let mut tx = self.begin().await?;
        let result: Result<(u32, u32), StoreError> = async {
            let latest = messages.iter().map(|m| m.created_at).max().unwrap_or_else(Utc::now);
            let mut insert = Query::new(
                "INSERT INTO sessions (tenant_id, user_id, session_id, role_id, project_id, message_count, last_message_at, summarized_until, ended, summary_requested) \
                 VALUES (?, ?, ?, ?, ?, 0, ?, -1, 0, 0) ON CONFLICT (tenant_id, user_id, session_id) DO NOTHING",
            );
            insert
                .owner(&key.owner())
                .text(key.session_id.clone())
                .text(key.role_id.clone())
                .arg(Arg::OptText(key.project_id.clone()))
                .int(ms(latest));
            self.tx_execute(&mut tx, &insert).await?;
            let mut read = Query::new(&format!(
                "SELECT message_count FROM sessions WHERE tenant_id = ? AND user_id = ? AND session_id = ?{}",
                self.for_update()
            ));
            read.owner(&key.owner()).text(key.session_id.clone());
            let count = self
                .tx_fetch_optional(&mut tx, &read)
                .await?
                .ok_or_else(|| StoreError::Backend("the session row vanished".into()))?
                .try_get::<i64, _>(0)
                .map_err(backend_error)?;
            let first = count.max(0) as u32;
            for (i, message) in messages.iter().enumerate() {
                let mut q = Query::new(
                    "INSERT INTO session_messages (tenant_id, user_id, session_id, idx, role, speaker, content, created_at) \
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                );
                q.owner(&key.owner())
                    .text(key.session_id.clone())
                    .int(i64::from(first) + i as i64)
                    .text(message.role.clone())
                    .arg(Arg::OptText(message.speaker.clone()))
                    .text(message.content.clone())
                    .int(ms(message.created_at));
                self.tx_execute(&mut tx, &q).await?;
            }
            let total = first + messages.len() as u32;
            let mut update = Query::new(
                "UPDATE sessions SET message_count = ?, last_message_at = ?, ended = 0 WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
            );
            update
                .int(i64::from(total))
                .int(ms(latest))
                .owner(&key.owner())
                .text(key.session_id.clone());
            self.tx_execute(&mut tx, &update).await?;
            Ok((first, total))
        }
        .await;
        match result {
            Ok(value) => {
                tx.commit().await.map_err(backend_error)?;
                Ok(value)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }

    async fn get_messages(
        &self,
        owner: &Owner,
        session_id: &str,
        from: u32,
        to: u32,
    ) -> Result<Vec<Message>, StoreError> {
        let mut q = Query::new(
            "SELECT idx, role, speaker, content, created_at FROM session_messages \
             WHERE tenant_id = ? AND user_id = ? AND session_id = ? AND idx >= ? AND idx <= ? ORDER BY idx ASC",
        );
        q.owner(owner).text(session_id).int(i64::from(from)).int(i64::from(to));
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                Ok(Message {
                    index: row.try_get::<i64, _>(0).map_err(backend_error)?.max(0) as u32,
                    role: row.try_get(1).map_err(backend_error)?,
                    speaker: row.try_get(2).map_err(backend_error)?,
                    content: row.try_get(3).map_err(backend_error)?,
                    created_at: from_ms(row.try_get(4).map_err(backend_error)?),
                })
            })
            .collect()
    }

    async fn get_session(&self, owner: &Owner, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let mut q = Query::new("SELECT * FROM sessions WHERE tenant_id = ? AND user_id = ? AND session_id = ?");
        q.owner(owner).text(session_id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(session_from_row)
            .transpose()
    }

    async fn flag_session(
        &self,
        owner: &Owner,
        session_id: &str,
        ended: Option<bool>,
        summary_requested: Option<bool>,
    ) -> Result<(), StoreError> {
        let mut sets = Vec::new();
        let mut q = Query::default();
        if let Some(ended) = ended {
            sets.push("ended = ?");
            q.args.push(Arg::Int(i64::from(ended)));
        }
        if let Some(requested) = summary_requested {
            sets.push("summary_requested = ?");
            q.args.push(Arg::Int(i64::from(requested)));
        }
        if sets.is_empty() {
            return Ok(());
        }
        q.sql = format!(
            "UPDATE sessions SET {} WHERE tenant_id = ? AND user_id = ? AND session_id = ?",
            sets.join(", ")
        );
        q.owner(owner).text(session_id);
        if self.execute(&q).await? == 0 {
            return Err(StoreError::NotFound(format!("session {session_id:?}")));
        }
        Ok(())
    }

    async fn sessions_to_summarize(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let mut q = Query::new(
            "SELECT * FROM sessions WHERE message_count - 1 > summarized_until \
             AND (summary_requested = 1 OR ended = 1 OR last_message_at < ?) ORDER BY last_message_at ASC LIMIT ?",
        );
        q.int(ms(idle_before)).int(limit as i64);
        self.fetch_all(&q).await?.iter().map(session_from_row).collect()
    }

    async fn recent_sessions(
        &self,
        owner: &Owner,
        project_id: Option<&str>,
        role_id: Option<&str>,
        exclude_session: Option<&str>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let mut q = Query::new("SELECT * FROM sessions WHERE tenant_id = ? AND user_id = ?");
        q.owner(owner);
        match project_id {
            Some(project) => q.push(" AND project_id = ?").text(project),
            None => q.push(" AND project_id IS NULL"),
        };
        if let Some(role) = role_id {
            q.push(" AND role_id = ?").text(role);
        }
        if let Some(session) = exclude_session {
            q.push(" AND session_id <> ?").text(session);
        }
        q.push(" AND last_message_at <= ? ORDER BY last_message_at DESC, session_id DESC LIMIT ?")
            .int(ms(until))
            .int(limit as i64);
        self.fetch_all(&q).await?.iter().map(session_from_row).collect()
    }

    async fn put_summary(&self, s: &SummaryRecord, expected_end: Option<i32>) -> Result<(), StoreError> {
        let _guard = self.lock_writes().await;
        let mut tx = self.begin().await?;
        let result: Result<(), StoreError> = async {
            if let Some(expected) = expected_end {
                let mut read = Query::new(&format!(
                    "SELECT trajectory_end FROM session_summaries WHERE tenant_id = ? AND user_id = ? AND session_id = ?{}",
                    self.for_update()
                ));
                read.owner(&s.owner()).text(s.session_id.clone());
                let current = self
                    .tx_fetch_optional(&mut tx, &read)
                    .await?
                    .map(|row| row.try_get::<i64, _>(0).map_err(backend_error))
                    .transpose()?
                    .map(|v| v as i32)
                    .unwrap_or(-1);
                if current != expected {
                    return Err(StoreError::Conflict(format!(
                        "summary of session {:?} moved from message {expected} to {current}",
                        s.session_id
                    )));
                }
            }
            let mut q = Query::new(
                "INSERT INTO session_summaries (id, tenant_id, user_id, role_id, project_id, session_id, goal, constraints, decisions, progress, artifacts, next_actions, risks, open_questions, trajectory_start, trajectory_end, language, engine, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (tenant_id, user_id, session_id) DO UPDATE SET role_id = excluded.role_id, project_id = excluded.project_id, goal = excluded.goal, \
                 constraints = excluded.constraints, decisions = excluded.decisions, progress = excluded.progress, artifacts = excluded.artifacts, \
                 next_actions = excluded.next_actions, risks = excluded.risks, open_questions = excluded.open_questions, \
                 trajectory_start = excluded.trajectory_start, trajectory_end = excluded.trajectory_end, language = excluded.language, \
                 engine = excluded.engine, updated_at = excluded.updated_at",
            );
            q.text(s.id.clone())
                .text(s.tenant_id.clone())
                .text(s.user_id.clone())
                .text(s.role_id.clone())
                .arg(Arg::OptText(s.project_id.clone()))
                .text(s.session_id.clone())
                .text(s.goal.clone())
                .text(json(&s.constraints))
                .text(json(&s.decisions))
                .text(json(&s.progress))
                .text(json(&s.artifacts))
                .text(json(&s.next_actions))
                .text(json(&s.risks))
                .text(json(&s.open_questions))
                .int(i64::from(s.trajectory_start))
                .int(i64::from(s.trajectory_end))
                .text(s.language.clone())
                .text(s.engine.clone())
                .int(ms(s.created_at))
                .int(ms(s.updated_at));
            self.tx_execute(&mut tx, &q).await?;
            let mut session = Query::new(
                "UPDATE sessions SET summarized_until = ?, summary_requested = 0 \
                 WHERE tenant_id = ? AND user_id = ? AND session_id = ? AND summarized_until < ?",
            );
            session
                .int(i64::from(s.trajectory_end))
                .owner(&s.owner())
                .text(s.session_id.clone())
                .int(i64::from(s.trajectory_end));
            self.tx_execute(&mut tx, &session).await?;
            Ok(())
        }
        .await;
        match result {
            Ok(()) => tx.commit().await.map_err(backend_error),
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }

    async fn get_summary(&self, owner: &Owner, session_id: &str) -> Result<Option<SummaryRecord>, StoreError> {
        let mut q =
            Query::new("SELECT * FROM session_summaries WHERE tenant_id = ? AND user_id = ? AND session_id = ?");
        q.owner(owner).text(session_id);
        self.fetch_optional(&q)
            .await?
            .as_ref()
            .map(summary_from_row)
            .transpose()
    }

    async fn list_summaries(
        &self,
        owner: &Owner,
        project_id: Option<&str>,
        exclude_role: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SummaryRecord>, StoreError> {
        let mut q = Query::new("SELECT * FROM session_summaries WHERE tenant_id = ? AND user_id = ?");
        q.owner(owner);
        if let Some(project) = project_id {
            q.push(" AND project_id = ?").text(project);
        }
        if let Some(role) = exclude_role {
            q.push(" AND role_id <> ?").text(role);
        }
        q.push(" ORDER BY updated_at DESC, id DESC LIMIT ?").int(limit as i64);
        self.fetch_all(&q).await?.iter().map(summary_from_row).collect()
    }
}

const JOB_COLUMNS: &str = "id, kind, tenant_id, user_id, session_id, payload, status, attempts, max_attempts, last_error, \
    run_after, lease_until, dedupe_key, created_at, updated_at, result";

#[async_trait]
impl JobStore for SqlStore {
    async fn enqueue(&self, job: &JobRecord) -> Result<String, StoreError> {
        if let Some(key) = &job.dedupe_key {
            let mut q = Query::new("SELECT id FROM jobs WHERE dedupe_key = ? AND status IN ('pending', 'running')");
            q.text(key.clone());
            if let Some(row) = self.fetch_optional(&q).await? {
                return row.try_get::<String, _>(0).map_err(backend_error);
            }
        }
        let mut q = Query::new(&format!(
            "INSERT INTO jobs ({JOB_COLUMNS}) VALUES ({})",
            vec!["?"; 16].join(", ")
        ));
        q.text(job.id.clone())
            .text(job.kind.clone())
            .text(job.tenant_id.clone())
            .text(job.user_id.clone())
            .arg(Arg::OptText(job.session_id.clone()))
            .text(job.payload.clone())
            .text(job.status.as_str())
            .int(i64::from(job.attempts))
            .int(i64::from(job.max_attempts))
            .arg(Arg::OptText(job.last_error.clone()))
            .int(ms(job.run_after))
            .arg(Arg::OptInt(job.lease_until.map(ms)))
            .arg(Arg::OptText(job.dedupe_key.clone()))
            .int(ms(job.created_at))
            .int(ms(job.updated_at))
            .arg(Arg::OptText(job.result.clone()));
        match self.execute(&q).await {
            Ok(_) => Ok(job.id.clone()),
            // Lost a race on the dedupe key: the winner's job does the work.
            Err(StoreError::AlreadyExists(_)) if job.dedupe_key.is_some() => {
                let mut q = Query::new("SELECT id FROM jobs WHERE dedupe_key = ? AND status IN ('pending', 'running')");
                q.text(job.dedupe_key.clone().unwrap_or_default());
                match self.fetch_optional(&q).await? {
                    Some(row) => row.try_get::<String, _>(0).map_err(backend_error),
                    None => Err(StoreError::Conflict("dedupe key released concurrently".into())),
                }
            }
            Err(err) => Err(err),
        }
    }

    async fn claim(
        &self,
        kinds: &[&str],
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<JobRecord>, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, updated_at = ? WHERE id = (SELECT id FROM jobs j WHERE status = 'pending' AND run_after <= ? AND",
        );
        q.int(ms(lease_until)).int(ms(now)).int(ms(now));
        q.push_in("kind", kinds.iter().map(|k| k.to_string()));
        // A user's jobs of one kind run in the order they were queued: what the user said last is
        // learned last, whichever worker or replica is free first.
        q.push(
            " AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.tenant_id = j.tenant_id AND e.user_id = j.user_id \
             AND e.kind = j.kind AND e.status IN ('pending', 'running') \
             AND (e.created_at < j.created_at OR (e.created_at = j.created_at AND e.id < j.id)))",
        );
        q.push(" ORDER BY run_after ASC, id ASC LIMIT 1");
        if self.backend == Backend::Postgres {
            q.push(" FOR UPDATE SKIP LOCKED");
        }
        q.push(&format!(") AND status = 'pending' RETURNING {JOB_COLUMNS}"));
        let _guard = self.lock_writes().await;
        let sql = self.sql(&q.sql);
        let args = arguments(&q.args)?;
        let row = sqlx::query_with(&sql, args)
            .fetch_optional(&self.pool)
            .await
            .map_err(backend_error)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn complete_job(&self, id: &str, now: DateTime<Utc>, result: Option<&str>) -> Result<(), StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET status = 'succeeded', lease_until = NULL, last_error = NULL, updated_at = ?, result = ? WHERE id = ?",
        );
        q.int(ms(now)).arg(Arg::OptText(result.map(str::to_string))).text(id);
        if self.execute(&q).await? == 0 {
            return Err(StoreError::NotFound(format!("job {id:?}")));
        }
        Ok(())
    }

    async fn fail_job(
        &self,
        id: &str,
        error: &str,
        now: DateTime<Utc>,
        retry_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let error: String = error.chars().take(2000).collect();
        let mut q = match retry_at {
            Some(at) => {
                let mut q = Query::new(
                    "UPDATE jobs SET status = 'pending', lease_until = NULL, last_error = ?, run_after = ?, updated_at = ? WHERE id = ?",
                );
                q.text(error).int(ms(at)).int(ms(now));
                q
            }
            None => {
                let mut q = Query::new(
                    "UPDATE jobs SET status = 'failed', lease_until = NULL, last_error = ?, updated_at = ? WHERE id = ?",
                );
                q.text(error).int(ms(now));
                q
            }
        };
        q.text(id);
        if self.execute(&q).await? == 0 {
            return Err(StoreError::NotFound(format!("job {id:?}")));
        }
        Ok(())
    }

    async fn job_progress(
        &self,
        id: &str,
        progress: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET result = ?, lease_until = ?, updated_at = ? WHERE id = ? AND status = 'running'",
        );
        q.text(progress.to_string()).int(ms(lease_until)).int(ms(now)).text(id);
        Ok(self.execute(&q).await? > 0)
    }

    async fn requeue_expired(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET status = 'pending', lease_until = NULL, last_error = 'lease expired: the worker stopped', updated_at = ? \
             WHERE status = 'running' AND lease_until IS NOT NULL AND lease_until < ?",
        );
        q.int(ms(now)).int(ms(now));
        self.execute(&q).await
    }

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let mut q = Query::new(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?"));
        q.text(id);
        self.fetch_optional(&q).await?.as_ref().map(job_from_row).transpose()
    }

    async fn list_jobs(
        &self,
        owner: &Owner,
        session_id: Option<&str>,
        status: Option<JobStatus>,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut q = Query::new(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = ? AND user_id = ?"
        ));
        q.owner(owner);
        if let Some(session) = session_id {
            q.push(" AND session_id = ?").text(session);
        }
        if let Some(status) = status {
            q.push(" AND status = ?").text(status.as_str());
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?")
            .int(limit as i64)
            .int(offset as i64);
        self.fetch_all(&q).await?.iter().map(job_from_row).collect()
    }

    async fn job_counts(&self) -> Result<Vec<(String, JobStatus, u64)>, StoreError> {
        let q = Query::new("SELECT kind, status, COUNT(*) FROM jobs GROUP BY kind, status");
        self.fetch_all(&q)
            .await?
            .iter()
            .map(|row| {
                let kind: String = row.try_get(0).map_err(backend_error)?;
                let status: String = row.try_get(1).map_err(backend_error)?;
                let count: i64 = row.try_get(2).map_err(backend_error)?;
                Ok((kind, parse_enum::<JobStatus>("status", &status)?, count.max(0) as u64))
            })
            .collect()
    }
}

#[async_trait]
impl RetentionStore for SqlStore {
    async fn purge_idempotency(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut q = Query::new("DELETE FROM idempotency WHERE created_at < ?");
        q.int(ms(before));
        self.execute(&q).await
    }

    async fn purge_session_messages(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        // A message without a session row, or past the summary's end, is never purged (the
        // comparison with NULL or a larger index is not true).
        let mut q = Query::new(
            "DELETE FROM session_messages WHERE created_at < ? AND idx <= ( \
               SELECT s.summarized_until FROM sessions s WHERE s.tenant_id = session_messages.tenant_id \
               AND s.user_id = session_messages.user_id AND s.session_id = session_messages.session_id)",
        );
        q.int(ms(before));
        self.execute(&q).await
    }

    async fn purge_job_payloads(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut q = Query::new(
            "UPDATE jobs SET payload = '' WHERE status IN ('succeeded', 'failed') AND updated_at < ? AND payload <> ''",
        );
        q.int(ms(before));
        self.execute(&q).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_strings() {
        assert_eq!(
            number_placeholders("SELECT * FROM t WHERE a = ? AND b = '?' AND c IN (?, ?)"),
            "SELECT * FROM t WHERE a = $1 AND b = '?' AND c IN ($2, $3)"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/thinkus"),
            "postgres://app:***@db:5432/thinkus"
        );
        assert_eq!(redact("sqlite://data/x.db"), "sqlite://data/x.db");
    }
}
