//! Reading rows: each table's row as its record, times from BIGINT milliseconds, JSON and enum
//! columns checked (a corrupt value is an error naming the row and the column), and sqlx's errors
//! as the store's.

use chrono::{DateTime, TimeZone, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;
use thinkus_common::model::{ArtifactRef, Language, Memory, MemorySource, MemoryStatus, MemoryType, Scope, Visibility};

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
        other => StoreError::Backend(other.to_string()),
    }
}

pub(super) fn from_ms(value: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(value).single().unwrap_or_default()
}

/// The value of a JSON column. One that does not parse is an error naming the table, the row
/// and the column: a corrupt row is reported, never read as empty (no tags, no decisions).
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(
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

pub(super) fn parse_enum<T: std::str::FromStr>(column: &str, value: &str) -> Result<T, StoreError> {
    value
        .parse()
        .map_err(|_| StoreError::Backend(format!("unexpected {column} {value:?} in the database")))
}

pub(super) fn memory_from_row(row: &AnyRow) -> Result<Memory, StoreError> {
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

pub(super) fn change_from_row(row: &AnyRow) -> Result<Change, StoreError> {
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

pub(super) fn candidate_from_row(row: &AnyRow) -> Result<Candidate, StoreError> {
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

pub(super) fn artifact_from_row(row: &AnyRow) -> Result<ArtifactRecord, StoreError> {
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

pub(super) fn session_from_row(row: &AnyRow) -> Result<SessionRecord, StoreError> {
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

pub(super) fn summary_from_row(row: &AnyRow) -> Result<SummaryRecord, StoreError> {
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

pub(super) fn job_from_row(row: &AnyRow) -> Result<JobRecord, StoreError> {
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

pub(super) fn erasure_from_row(row: &AnyRow) -> Result<ErasureRecord, StoreError> {
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
