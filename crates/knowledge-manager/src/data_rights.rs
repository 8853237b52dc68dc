//! Data rights of a user (issue 17): exporting everything a user owns as one JSON document
//! (`ExportUser`) and erasing it (`EraseUser`). Both act on one owner, a user of a tenant: the
//! same user id in another tenant is another person, whose data neither reads nor touches.
//!
//! Every table lives in the one database the services share, so the knowledge manager reads
//! and deletes all of them; the vector index is its own. Artifacts' blobs belong to the
//! artifact service: the gateway's `EraseUser` removes the artifacts through it first, and the
//! erasure here refuses to run while one is left, so no blob is ever orphaned.

use chrono::Utc;
use serde_json::{Value, json};
use thinkus_backends::sql::{
    ArtifactRecord, CandidateStatus, Change, ErasureCounts, ErasureRecord, JobRecord, OwnerRecords, SessionRecord,
    StoreError, SummaryRecord,
};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{Memory, Owner};

use crate::api::Erasure;
use crate::pending::StoredDraft;
use crate::service::KnowledgeManager;

/// The `format` of an export document.
pub const EXPORT_FORMAT: &str = "thinkus.user-export";
/// The `version` of the document's layout; bumped when a field changes meaning or goes away.
pub const EXPORT_VERSION: u32 = 1;

/// A JSON text stored in a column, as a value (a string when it is not JSON).
fn embedded(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn change_json(change: &Change) -> Value {
    json!({
        "id": change.id,
        "memory_id": change.memory_id,
        "kind": change.kind.as_str(),
        "actor": change.actor,
        "reason": change.reason,
        "before": change.before.as_deref().map(embedded),
        "after": change.after.as_deref().map(embedded),
        "at": change.at,
    })
}

/// A record as a JSON value; a failure is an error naming it, never a null in the export.
fn value_of<T: serde::Serialize>(record: &T, what: &str) -> Result<Value, ApiError> {
    serde_json::to_value(record).map_err(|err| ApiError::internal(format!("serialising {what}: {err}")))
}

fn memory_json(memory: &Memory, history: Vec<Value>) -> Result<Value, ApiError> {
    let mut value = value_of(memory, "a memory")?;
    if let Value::Object(fields) = &mut value {
        fields.insert("history".into(), Value::Array(history));
    }
    Ok(value)
}

fn session_json(session: &SessionRecord, messages: Vec<Value>) -> Value {
    json!({
        "session_id": session.session_id,
        "role_id": session.role_id,
        "project_id": session.project_id,
        "message_count": session.message_count,
        "last_message_at": session.last_message_at,
        "summarized_until": session.summarized_until,
        "ended": session.ended,
        "messages": messages,
    })
}

fn summary_json(summary: &SummaryRecord) -> Value {
    json!({
        "id": summary.id,
        "session_id": summary.session_id,
        "role_id": summary.role_id,
        "project_id": summary.project_id,
        "goal": summary.goal,
        "constraints": summary.constraints,
        "decisions": summary.decisions,
        "progress": summary.progress,
        "artifacts": summary.artifacts,
        "next_actions": summary.next_actions,
        "risks": summary.risks,
        "open_questions": summary.open_questions,
        "trajectory_start": summary.trajectory_start,
        "trajectory_end": summary.trajectory_end,
        "language": summary.language,
        "engine": summary.engine,
        "created_at": summary.created_at,
        "updated_at": summary.updated_at,
    })
}

/// An artifact's metadata (its content stays in the blob store: `ReadArtifact` and
/// `DownloadArtifact` fetch it by id).
fn artifact_json(artifact: &ArtifactRecord) -> Value {
    json!({
        "id": artifact.id,
        "role_id": artifact.role_id,
        "project_id": artifact.project_id,
        "session_id": artifact.session_id,
        "tool_call_id": artifact.tool_call_id,
        "tool_name": artifact.tool_name,
        "mime_type": artifact.mime_type,
        "size_bytes": artifact.size_bytes,
        "sha256": artifact.sha256,
        "path": artifact.path,
        "line_count": artifact.line_count,
        "kind": artifact.kind,
        "language": artifact.language,
        "compact": embedded(&artifact.compact),
        "metadata": embedded(&artifact.metadata),
        "created_at": artifact.created_at,
        "expires_at": artifact.expires_at,
    })
}

fn job_json(job: &JobRecord) -> Value {
    json!({
        "id": job.id,
        "kind": job.kind,
        "session_id": job.session_id,
        "status": job.status.as_str(),
        "attempts": job.attempts,
        "last_error": job.last_error,
        "payload": (!job.payload.is_empty()).then(|| embedded(&job.payload)),
        "result": job.result.as_deref().map(embedded),
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    })
}

/// Builds the export document of `records` (see `docs/write-path.md`, "Exporting and erasing
/// a user").
pub fn document(owner: &Owner, records: OwnerRecords) -> Result<Value, ApiError> {
    let OwnerRecords {
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
    } = records;
    // History by memory, in the order it happened; what is left belongs to deleted memories.
    let mut history: std::collections::BTreeMap<String, Vec<Value>> = std::collections::BTreeMap::new();
    for change in &changes {
        history
            .entry(change.memory_id.clone())
            .or_default()
            .push(change_json(change));
    }
    let memories_json: Vec<Value> = memories
        .iter()
        .map(|memory| memory_json(memory, history.remove(&memory.id).unwrap_or_default()))
        .collect::<Result<_, _>>()?;
    let deleted: Vec<Value> = history
        .into_iter()
        .map(|(memory_id, changes)| json!({"memory_id": memory_id, "history": changes}))
        .collect();
    let mut candidates_json = Vec::with_capacity(candidates.len());
    let mut conflicts_json = Vec::new();
    for candidate in &candidates {
        let stored = StoredDraft::read(candidate)?;
        let entry = json!({
            "id": candidate.id,
            "role_id": candidate.scope.role_id,
            "project_id": candidate.scope.project_id,
            "session_id": candidate.scope.session_id,
            "draft": stored.draft,
            "conflicts_with": stored.conflicts_with,
            "reason": candidate.reason,
            "score": candidate.score,
            "evidence_count": candidate.evidence_count,
            "status": candidate.status.as_str(),
            "created_at": candidate.created_at,
            "decided_at": candidate.decided_at,
            "memory_id": candidate.memory_id,
        });
        if candidate.status == CandidateStatus::Pending && !stored.conflicts_with.is_empty() {
            conflicts_json.push(json!({
                "candidate_id": candidate.id,
                "role_id": candidate.scope.role_id,
                "project_id": candidate.scope.project_id,
                "subject": stored.draft.subject,
                "current_memory_ids": stored.conflicts_with,
                "proposed": stored.draft,
                "evidence_count": candidate.evidence_count,
                "created_at": candidate.created_at,
            }));
        }
        candidates_json.push(entry);
    }
    let mut by_session: std::collections::BTreeMap<String, Vec<Value>> = std::collections::BTreeMap::new();
    for (session_id, message) in &messages {
        by_session
            .entry(session_id.clone())
            .or_default()
            .push(value_of(message, "a session message")?);
    }
    let sessions_json: Vec<Value> = sessions
        .iter()
        .map(|session| session_json(session, by_session.remove(&session.session_id).unwrap_or_default()))
        .collect();
    let counts = json!({
        "memories": memories.len(),
        "changes": changes.len(),
        "candidates": candidates.len(),
        "conflicts": conflicts_json.len(),
        "sessions": sessions.len(),
        "session_messages": messages.len(),
        "summaries": summaries.len(),
        "artifacts": artifacts.len(),
        "jobs": jobs.len(),
    });
    Ok(json!({
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": Utc::now(),
        "tenant_id": owner.tenant_id,
        "user_id": owner.user_id,
        "plan": plan,
        "counts": counts,
        "memories": memories_json,
        "deleted_memories": deleted,
        "candidates": candidates_json,
        "conflicts": conflicts_json,
        "sessions": sessions_json,
        "summaries": summaries.iter().map(summary_json).collect::<Vec<_>>(),
        "artifacts": artifacts.iter().map(artifact_json).collect::<Vec<_>>(),
        "jobs": jobs.iter().map(job_json).collect::<Vec<_>>(),
        "request_ids": request_keys,
        "erasures": erasures,
    }))
}

/// `ExportUser`: everything the owner holds, as one JSON document.
pub(crate) async fn export(km: &KnowledgeManager, owner: &Owner) -> Result<Value, ApiError> {
    let records = km.store.owner_records(owner).await?;
    document(owner, records)
}

/// `EraseUser`: under the owner's write lock (no write of the user interleaves), the vector
/// points first, then every row in one transaction with the record of the erasure. A failure
/// between the two leaves memories without points (not recallable), and a retry finishes.
pub(crate) async fn erase(
    km: &KnowledgeManager,
    owner: &Owner,
    actor: &str,
    artifacts_erased: u64,
) -> Result<Erasure, ApiError> {
    let _guard = km.lock_user(owner).await?;
    let vectors = km.vectors.count(Some(owner)).await?;
    if vectors > 0 {
        km.vectors.delete_user(owner).await?;
    }
    let id = new_id(IdKind::Erasure);
    let record = ErasureRecord {
        id: id.clone(),
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        actor: actor.to_string(),
        at: Utc::now(),
        counts: ErasureCounts {
            vectors,
            artifacts: artifacts_erased,
            ..Default::default()
        },
    };
    let counts = km.store.erase_owner(owner, record).await.map_err(|err| match err {
        StoreError::Conflict(message) => ApiError::failed_precondition(message),
        other => other.into(),
    })?;
    tracing::info!(
        tenant_id = %owner.tenant_id,
        user_id = %owner.user_id,
        actor,
        memories = counts.memories,
        rows = counts.rows(),
        vectors = counts.vectors,
        artifacts = counts.artifacts,
        "user erased"
    );
    Ok(Erasure {
        id: (counts.total() > 0).then_some(id),
        counts,
    })
}
