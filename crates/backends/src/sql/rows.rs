//! Reading rows: each table's row as its record, times from BIGINT milliseconds, and sqlx's
//! errors as the store's. A stored value the record cannot hold (JSON that does not parse, an
//! unknown enum value, a time out of range, a negative count) is an error naming the table, the
//! row and the column: a corrupt row is reported, never read as a default (no tags, 1970, 0).

use chrono::{DateTime, TimeZone, Utc};
use sqlx::any::{Any, AnyRow};
use sqlx::{Decode, Row, Type};
use thinkus_common::model::{
    ArtifactRef, Language, Memory, MemorySource, MemoryStatus, MemoryType, Message, Scope, Visibility,
};

use super::{
    ArtifactRecord, Candidate, CandidateStatus, Change, ChangeKind, ErasureRecord, JobRecord, JobStatus, SessionRecord,
    StoreError, SummaryRecord,
};

pub(super) fn backend_error(err: sqlx::Error) -> StoreError {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            StoreError::Unavailable(err.to_string())
        }
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists(db.message().to_string()),
        // SQLite's SQLITE_FULL (13) and PostgreSQL's disk_full (SQLSTATE 53100; a SQLSTATE has
        // five characters, so the two cannot be confused).
        sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("13" | "53100")) => {
            StoreError::Full(db.message().to_string())
        }
        other => StoreError::Backend(other.to_string()),
    }
}

pub(super) fn parse_enum<T: std::str::FromStr>(column: &str, value: &str) -> Result<T, StoreError> {
    value
        .parse()
        .map_err(|_| StoreError::Backend(format!("unexpected {column} {value:?} in the database")))
}

/// One row being read, named by its table and its id, so that a column that cannot be read is
/// reported with both.
struct Cells<'r> {
    row: &'r AnyRow,
    table: &'static str,
    id: String,
}

impl<'r> Cells<'r> {
    /// The row of `table` whose id is in the column `id_column`.
    fn new(row: &'r AnyRow, table: &'static str, id_column: &str) -> Result<Self, StoreError> {
        let id = row.try_get::<String, _>(id_column).map_err(backend_error)?;
        Ok(Self { row, table, id })
    }

    /// The row of `table` named by `id` (rows whose key spans several columns).
    fn named(row: &'r AnyRow, table: &'static str, id: String) -> Self {
        Self { row, table, id }
    }

    fn corrupt(&self, column: &str, what: std::fmt::Arguments<'_>) -> StoreError {
        StoreError::Backend(format!("{} row {}: column {column} {what}", self.table, self.id))
    }

    fn get<T: Decode<'r, Any> + Type<Any>>(&self, column: &str) -> Result<T, StoreError> {
        self.row.try_get::<T, _>(column).map_err(backend_error)
    }

    /// A time stored as milliseconds since the epoch.
    fn time(&self, column: &str) -> Result<DateTime<Utc>, StoreError> {
        self.time_of(column, self.get::<i64>(column)?)
    }

    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.get::<Option<i64>>(column)?
            .map(|ms| self.time_of(column, ms))
            .transpose()
    }

    fn time_of(&self, column: &str, ms: i64) -> Result<DateTime<Utc>, StoreError> {
        Utc.timestamp_millis_opt(ms)
            .single()
            .ok_or_else(|| self.corrupt(column, format_args!("holds {ms}, not a time in milliseconds")))
    }

    /// An integer within the range of the record's type (so a count or a size is never negative).
    fn int<T: TryFrom<i64>>(&self, column: &str) -> Result<T, StoreError> {
        let value = self.get::<i64>(column)?;
        T::try_from(value).map_err(|_| {
            self.corrupt(
                column,
                format_args!("holds {value}, out of the range of a {}", std::any::type_name::<T>()),
            )
        })
    }

    /// A JSON column.
    fn json<T: serde::de::DeserializeOwned>(&self, column: &str) -> Result<T, StoreError> {
        let text = self.get::<String>(column)?;
        serde_json::from_str(&text)
            .map_err(|err| self.corrupt(column, format_args!("does not hold valid JSON ({err})")))
    }

    /// The scope columns of a memory or a candidate.
    fn scope(&self) -> Result<Scope, StoreError> {
        Ok(Scope {
            tenant_id: self.get("tenant_id")?,
            user_id: self.get("user_id")?,
            role_id: self.get("role_id")?,
            project_id: self.get("project_id")?,
            session_id: self.get("session_id")?,
        })
    }

    /// A column holding one of the names of an enum.
    fn parse<T: std::str::FromStr>(&self, column: &str) -> Result<T, StoreError> {
        let value = self.get::<String>(column)?;
        value
            .parse()
            .map_err(|_| self.corrupt(column, format_args!("holds the unknown value {value:?}")))
    }
}

pub(super) fn memory_from_row(row: &AnyRow) -> Result<Memory, StoreError> {
    let cells = Cells::new(row, "memories", "id")?;
    Ok(Memory {
        id: cells.id.clone(),
        scope: cells.scope()?,
        memory_type: cells.parse::<MemoryType>("memory_type")?,
        content: cells.get("content")?,
        summary: cells.get("summary")?,
        importance: cells.get::<i64>("importance")?.clamp(1, 5) as u8,
        confidence: cells.get("confidence")?,
        freshness: cells.get("freshness")?,
        evidence_count: cells.int("evidence_count")?,
        visibility: cells.parse::<Visibility>("visibility")?,
        status: cells.parse::<MemoryStatus>("status")?,
        superseded_by: cells.get("superseded_by")?,
        source: cells.parse::<MemorySource>("source")?,
        tags: cells.json("tags")?,
        created_at: cells.time("created_at")?,
        updated_at: cells.time("updated_at")?,
        last_accessed_at: cells.opt_time("last_accessed_at")?,
        access_count: cells.int("access_count")?,
        context: cells.get("context")?,
        related_decision_ids: cells.json("related_decision_ids")?,
        artifact_refs: cells.json::<Vec<ArtifactRef>>("artifact_refs")?,
        language: cells.parse::<Language>("language")?,
        speaker: cells.get("speaker")?,
        occurred_at: cells.time("occurred_at")?,
        subject: cells.get("subject")?,
        iteration_id: cells.get("iteration_id")?,
        external_id: cells.get("external_id")?,
        version: cells.get("version")?,
    })
}

pub(super) fn change_from_row(row: &AnyRow) -> Result<Change, StoreError> {
    let cells = Cells::new(row, "memory_changes", "id")?;
    Ok(Change {
        id: cells.get("id")?,
        tenant_id: cells.get("tenant_id")?,
        user_id: cells.get("user_id")?,
        memory_id: cells.get("memory_id")?,
        kind: cells.parse::<ChangeKind>("kind")?,
        actor: cells.get("actor")?,
        reason: cells.get("reason")?,
        before: cells.get("before_json")?,
        after: cells.get("after_json")?,
        at: cells.time("at")?,
    })
}

pub(super) fn candidate_from_row(row: &AnyRow) -> Result<Candidate, StoreError> {
    let cells = Cells::new(row, "candidates", "id")?;
    Ok(Candidate {
        id: cells.get("id")?,
        scope: cells.scope()?,
        draft: cells.get("draft")?,
        reason: cells.get("reason")?,
        score: cells.get("score")?,
        evidence_count: cells.int("evidence_count")?,
        status: cells.parse::<CandidateStatus>("status")?,
        content_key: cells.get("content_key")?,
        created_at: cells.time("created_at")?,
        decided_at: cells.opt_time("decided_at")?,
        memory_id: cells.get("memory_id")?,
    })
}

pub(super) fn artifact_from_row(row: &AnyRow) -> Result<ArtifactRecord, StoreError> {
    let cells = Cells::new(row, "artifacts", "id")?;
    Ok(ArtifactRecord {
        id: cells.get("id")?,
        tenant_id: cells.get("tenant_id")?,
        user_id: cells.get("user_id")?,
        role_id: cells.get("role_id")?,
        project_id: cells.get("project_id")?,
        session_id: cells.get("session_id")?,
        tool_call_id: cells.get("tool_call_id")?,
        tool_name: cells.get("tool_name")?,
        mime_type: cells.get("mime_type")?,
        size_bytes: cells.int("size_bytes")?,
        sha256: cells.get("sha256")?,
        blob_key: cells.get("blob_key")?,
        path: cells.get("path")?,
        line_count: cells.int("line_count")?,
        kind: cells.get("kind")?,
        language: cells.get("language")?,
        compact: cells.get("compact")?,
        metadata: cells.get("metadata")?,
        created_at: cells.time("created_at")?,
        expires_at: cells.opt_time("expires_at")?,
    })
}

pub(super) fn session_from_row(row: &AnyRow) -> Result<SessionRecord, StoreError> {
    session_from_columns(row, "")
}

/// A session whose columns are named `{prefix}tenant_id`, ... (beside another table's in a join).
pub(super) fn session_from_columns(row: &AnyRow, prefix: &str) -> Result<SessionRecord, StoreError> {
    let column = |name: &str| format!("{prefix}{name}");
    let cells = Cells::new(row, "sessions", &column("session_id"))?;
    Ok(SessionRecord {
        tenant_id: cells.get(&column("tenant_id"))?,
        user_id: cells.get(&column("user_id"))?,
        session_id: cells.get(&column("session_id"))?,
        role_id: cells.get(&column("role_id"))?,
        project_id: cells.get(&column("project_id"))?,
        message_count: cells.int(&column("message_count"))?,
        last_message_at: cells.time(&column("last_message_at"))?,
        summarized_until: cells.int(&column("summarized_until"))?,
        ended: cells.get::<i64>(&column("ended"))? != 0,
        summary_requested: cells.get::<i64>(&column("summary_requested"))? != 0,
    })
}

/// A message of the session `session_id` (the row is named `session/index`).
pub(super) fn message_from_row(row: &AnyRow, session_id: &str) -> Result<Message, StoreError> {
    let index = row.try_get::<i64, _>("idx").map_err(backend_error)?;
    let cells = Cells::named(row, "session_messages", format!("{session_id}/{index}"));
    Ok(Message {
        index: cells.int("idx")?,
        role: cells.get("role")?,
        speaker: cells.get("speaker")?,
        content: cells.get("content")?,
        created_at: cells.time("created_at")?,
    })
}

pub(super) fn summary_from_row(row: &AnyRow) -> Result<SummaryRecord, StoreError> {
    let cells = Cells::new(row, "session_summaries", "id")?;
    Ok(SummaryRecord {
        id: cells.id.clone(),
        tenant_id: cells.get("tenant_id")?,
        user_id: cells.get("user_id")?,
        role_id: cells.get("role_id")?,
        project_id: cells.get("project_id")?,
        session_id: cells.get("session_id")?,
        goal: cells.get("goal")?,
        constraints: cells.json("constraints")?,
        decisions: cells.json("decisions")?,
        progress: cells.json("progress")?,
        artifacts: cells.json("artifacts")?,
        next_actions: cells.json("next_actions")?,
        risks: cells.json("risks")?,
        open_questions: cells.json("open_questions")?,
        trajectory_start: cells.int("trajectory_start")?,
        trajectory_end: cells.int("trajectory_end")?,
        language: cells.get("language")?,
        engine: cells.get("engine")?,
        created_at: cells.time("created_at")?,
        updated_at: cells.time("updated_at")?,
    })
}

pub(super) fn job_from_row(row: &AnyRow) -> Result<JobRecord, StoreError> {
    let cells = Cells::new(row, "jobs", "id")?;
    Ok(JobRecord {
        id: cells.get("id")?,
        kind: cells.get("kind")?,
        tenant_id: cells.get("tenant_id")?,
        user_id: cells.get("user_id")?,
        session_id: cells.get("session_id")?,
        payload: cells.get("payload")?,
        status: cells.parse::<JobStatus>("status")?,
        attempts: cells.int("attempts")?,
        max_attempts: cells.int("max_attempts")?,
        last_error: cells.get("last_error")?,
        run_after: cells.time("run_after")?,
        lease_until: cells.opt_time("lease_until")?,
        dedupe_key: cells.get("dedupe_key")?,
        result: cells.get("result")?,
        created_at: cells.time("created_at")?,
        updated_at: cells.time("updated_at")?,
    })
}

pub(super) fn erasure_from_row(row: &AnyRow) -> Result<ErasureRecord, StoreError> {
    let cells = Cells::new(row, "erasures", "id")?;
    Ok(ErasureRecord {
        id: cells.get("id")?,
        tenant_id: cells.get("tenant_id")?,
        user_id: cells.get("user_id")?,
        actor: cells.get("actor")?,
        at: cells.time("at")?,
        counts: cells.json("counts")?,
    })
}
