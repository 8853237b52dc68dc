//! Conversions between the knowledge manager's protobuf messages and its domain API.

use chrono::{DateTime, Utc};
use thinkus_backends::sql::{CandidateStatus, Change, ChangeKind};
use thinkus_common::ApiError;
use thinkus_common::convert::{
    ScopeRules, artifact_ref_from_proto, artifact_ref_to_proto, datetime_opt, engine_from_proto,
    engine_to_proto_choice, memory_to_proto, memory_type_to_proto, memory_types, message_to_proto, messages_from_proto,
    next_page, page_from_proto, page_to_proto, required_memory_type, scope_from_proto, scope_to_proto,
    source_from_proto, source_to_proto, status_from_proto, status_to_proto, timestamp, timestamp_opt,
    visibility_from_proto, visibility_to_proto,
};
use thinkus_common::model::{EngineChoice, Language, Memory, MemorySource, MemoryType, Owner, Scope, Visibility};
use thinkus_proto::common as pbc;
use thinkus_proto::knowledge as pb;

use crate::api::{
    CandidateView, Conflict, ConflictChoice, ConflictResolution, CorrectRequest, CorrectResult, CorrectionAction,
    FinalizeResult, ImportChange, ImportReport, IngestResult, IngestTurnsRequest, LearnRequest, LearnResult,
    ListRequest, MaintenanceReport, MarkdownFile, MemoryDraft, Owners, Quota, RememberRequest, Standing, Turn,
    ValueChange, WriteOutcome, WriteResult,
};

pub fn draft_from_proto(draft: Option<&pb::MemoryDraft>, field: &str) -> Result<MemoryDraft, ApiError> {
    let draft = draft.ok_or_else(|| ApiError::invalid(field, "is required"))?;
    let importance = match draft.importance {
        0 => None,
        i if (1..=5).contains(&i) => Some(i as u8),
        i => {
            return Err(ApiError::invalid(
                &format!("{field}.importance"),
                format!("must be 1-5, got {i}"),
            ));
        }
    };
    let confidence = if draft.confidence == 0.0 {
        None
    } else {
        Some(draft.confidence)
    };
    Ok(MemoryDraft {
        memory_type: required_memory_type(draft.r#type, &format!("{field}.type"))?,
        content: draft.content.clone(),
        summary: (!draft.summary.trim().is_empty()).then(|| draft.summary.clone()),
        importance,
        tags: draft.tags.clone(),
        visibility: visibility_from_proto(draft.visibility, &format!("{field}.visibility"))?,
        source: source_from_proto(draft.source, &format!("{field}.source"))?,
        confidence,
        context: draft.context.clone(),
        related_decision_ids: draft.related_decision_ids.clone(),
        artifact_refs: draft.artifact_refs.iter().map(artifact_ref_from_proto).collect(),
        occurred_at: datetime_opt(draft.occurred_at.as_ref(), &format!("{field}.occurred_at"))?,
        iteration_id: (!draft.iteration_id.is_empty()).then(|| draft.iteration_id.clone()),
        subject: (!draft.subject.is_empty()).then(|| draft.subject.clone()),
        speaker: None,
    })
}

pub fn draft_to_proto(draft: &MemoryDraft) -> pb::MemoryDraft {
    pb::MemoryDraft {
        r#type: memory_type_to_proto(draft.memory_type),
        content: draft.content.clone(),
        summary: draft.summary.clone().unwrap_or_default(),
        importance: draft.importance.map(i32::from).unwrap_or(0),
        tags: draft.tags.clone(),
        visibility: draft.visibility.map(visibility_to_proto).unwrap_or(0),
        source: draft.source.map(source_to_proto).unwrap_or(0),
        confidence: draft.confidence.unwrap_or(0.0),
        context: draft.context.clone(),
        related_decision_ids: draft.related_decision_ids.clone(),
        artifact_refs: draft.artifact_refs.iter().map(artifact_ref_to_proto).collect(),
        occurred_at: timestamp_opt(draft.occurred_at),
        iteration_id: draft.iteration_id.clone().unwrap_or_default(),
        subject: draft.subject.clone().unwrap_or_default(),
    }
}

fn outcome_to_proto(outcome: WriteOutcome) -> i32 {
    use pb::WriteOutcome as P;
    (match outcome {
        WriteOutcome::Created => P::Created,
        WriteOutcome::Reinforced => P::Reinforced,
        WriteOutcome::ReplacedOlder => P::ReplacedOlder,
        WriteOutcome::Queued => P::Queued,
        WriteOutcome::Rejected => P::Rejected,
        WriteOutcome::DuplicateRequest => P::DuplicateRequest,
        WriteOutcome::Refused => P::Refused,
    }) as i32
}

fn outcome_from_proto(value: i32) -> WriteOutcome {
    use pb::WriteOutcome as P;
    match P::try_from(value).unwrap_or(P::Unspecified) {
        P::Created => WriteOutcome::Created,
        P::Reinforced => WriteOutcome::Reinforced,
        P::ReplacedOlder => WriteOutcome::ReplacedOlder,
        P::Queued => WriteOutcome::Queued,
        P::DuplicateRequest => WriteOutcome::DuplicateRequest,
        P::Refused => WriteOutcome::Refused,
        P::Rejected | P::Unspecified => WriteOutcome::Rejected,
    }
}

pub fn write_result_to_proto(result: &WriteResult) -> pb::WriteResult {
    pb::WriteResult {
        outcome: outcome_to_proto(result.outcome),
        memory: result.memory.as_ref().map(memory_to_proto),
        replaced_ids: result.replaced_ids.clone(),
        candidate_id: result.candidate_id.clone().unwrap_or_default(),
        reason: result.reason.clone(),
        score: result.score,
        draft_type: result
            .draft
            .as_ref()
            .map(|d| thinkus_common::convert::memory_type_to_proto(d.memory_type))
            .unwrap_or_default(),
        draft_summary: result.draft.as_ref().map(|d| d.summary.clone()).unwrap_or_default(),
    }
}

pub fn write_result_from_proto(result: &pb::WriteResult) -> Result<WriteResult, ApiError> {
    Ok(WriteResult {
        outcome: outcome_from_proto(result.outcome),
        memory: result.memory.as_ref().map(memory_from_proto).transpose()?,
        replaced_ids: result.replaced_ids.clone(),
        candidate_id: (!result.candidate_id.is_empty()).then(|| result.candidate_id.clone()),
        reason: result.reason.clone(),
        score: result.score,
        draft: thinkus_common::convert::memory_type_from_proto(result.draft_type, "draft_type")?.map(|memory_type| {
            crate::api::DraftBrief {
                memory_type,
                summary: result.draft_summary.clone(),
            }
        }),
    })
}

/// Reads a memory sent by the knowledge manager (gRPC client side).
pub fn memory_from_proto(memory: &pbc::Memory) -> Result<Memory, ApiError> {
    use thinkus_common::convert::{datetime, memory_type_from_proto, status_from_proto};
    let upstream = |e: ApiError| {
        ApiError::internal(format!(
            "the knowledge manager sent an unreadable memory: {}",
            e.message
        ))
    };
    let scope = memory
        .scope
        .as_ref()
        .map(|s| scope_from_proto(Some(s), "scope", ScopeRules::USER))
        .transpose()
        .map_err(upstream)?
        .unwrap_or_default();
    let time = |t: &Option<prost_types::Timestamp>| -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
        Ok(t.as_ref()
            .map(|t| datetime(t, "time"))
            .transpose()
            .map_err(upstream)?
            .unwrap_or_default())
    };
    let optional = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Ok(Memory {
        id: memory.id.clone(),
        scope,
        memory_type: memory_type_from_proto(memory.r#type, "type")
            .map_err(upstream)?
            .ok_or_else(|| upstream(ApiError::invalid("type", "missing")))?,
        content: memory.content.clone(),
        summary: memory.summary.clone(),
        importance: memory.importance.clamp(1, 5) as u8,
        confidence: memory.confidence,
        freshness: memory.freshness,
        evidence_count: memory.evidence_count.max(0) as u32,
        visibility: visibility_from_proto(memory.visibility, "visibility")
            .map_err(upstream)?
            .unwrap_or(thinkus_common::model::Visibility::Private),
        status: status_from_proto(memory.status, "status")
            .map_err(upstream)?
            .unwrap_or(thinkus_common::model::MemoryStatus::Active),
        superseded_by: optional(&memory.superseded_by),
        source: source_from_proto(memory.source, "source")
            .map_err(upstream)?
            .unwrap_or(MemorySource::UserInput),
        tags: memory.tags.clone(),
        created_at: time(&memory.created_at)?,
        updated_at: time(&memory.updated_at)?,
        last_accessed_at: memory
            .last_accessed_at
            .as_ref()
            .map(|t| datetime(t, "last_accessed_at"))
            .transpose()
            .map_err(upstream)?,
        access_count: memory.access_count.max(0) as u64,
        context: memory.context.clone(),
        related_decision_ids: memory.related_decision_ids.clone(),
        artifact_refs: memory.artifact_refs.iter().map(artifact_ref_from_proto).collect(),
        language: memory.language.parse().unwrap_or(thinkus_common::model::Language::En),
        speaker: optional(&memory.speaker),
        occurred_at: time(&memory.occurred_at)?,
        subject: optional(&memory.subject),
        iteration_id: optional(&memory.iteration_id),
        external_id: optional(&memory.external_id),
        version: 0,
    })
}

pub fn turns_from_proto(turns: &[pb::Turn]) -> Result<Vec<Turn>, ApiError> {
    turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Ok(Turn {
                speaker: t.speaker.clone(),
                text: t.text.clone(),
                occurred_at: datetime_opt(t.occurred_at.as_ref(), &format!("turns[{i}].occurred_at"))?,
                external_id: (!t.external_id.is_empty()).then(|| t.external_id.clone()),
                caption: (!t.caption.is_empty()).then(|| t.caption.clone()),
                extracted_memory_ids: t.extracted_memory_ids.clone(),
            })
        })
        .collect()
}

pub fn turns_to_proto(turns: &[Turn]) -> Vec<pb::Turn> {
    turns
        .iter()
        .map(|t| pb::Turn {
            speaker: t.speaker.clone(),
            text: t.text.clone(),
            occurred_at: timestamp_opt(t.occurred_at),
            external_id: t.external_id.clone().unwrap_or_default(),
            caption: t.caption.clone().unwrap_or_default(),
            extracted_memory_ids: t.extracted_memory_ids.clone(),
        })
        .collect()
}

pub fn ingest_to_proto(result: &IngestResult) -> pb::IngestTurnsResponse {
    pb::IngestTurnsResponse {
        memory_ids: result.memory_ids.clone(),
        created: result.created as i32,
    }
}

pub fn learn_to_proto(result: &LearnResult) -> pb::LearnFromConversationResponse {
    pb::LearnFromConversationResponse {
        results: result.results.iter().map(write_result_to_proto).collect(),
        engine: result.engine.clone(),
        candidates: result.candidates as i32,
        refused: result.count(WriteOutcome::Refused) as i32,
    }
}

pub fn learn_from_proto(response: &pb::LearnFromConversationResponse) -> Result<LearnResult, ApiError> {
    Ok(LearnResult {
        results: response
            .results
            .iter()
            .map(write_result_from_proto)
            .collect::<Result<_, _>>()?,
        engine: response.engine.clone(),
        candidates: response.candidates.max(0) as u32,
    })
}

/// A correction action; `importance` is read for set_importance.
pub fn correction_from_proto(value: i32, importance: i32) -> Result<CorrectionAction, ApiError> {
    use pb::CorrectionAction as P;
    match P::try_from(value) {
        Ok(P::Suppress) => Ok(CorrectionAction::Suppress),
        Ok(P::Freeze) => Ok(CorrectionAction::Freeze),
        Ok(P::Replace) => Ok(CorrectionAction::Replace),
        Ok(P::Restore) => Ok(CorrectionAction::Restore),
        Ok(P::SetImportance) if (1..=5).contains(&importance) => Ok(CorrectionAction::SetImportance(importance as u8)),
        Ok(P::SetImportance) => Err(ApiError::invalid(
            "importance",
            format!("must be 1-5 to set the importance, got {importance}"),
        )),
        Ok(P::Unspecified) => Err(ApiError::invalid("action", "is required")),
        Err(_) => Err(ApiError::invalid(
            "action",
            format!("unknown correction action {value}"),
        )),
    }
}

/// The action and the importance field of a correction request.
pub fn correction_to_proto(action: CorrectionAction) -> (i32, i32) {
    use pb::CorrectionAction as P;
    let (action, importance) = match action {
        CorrectionAction::Suppress => (P::Suppress, 0),
        CorrectionAction::Freeze => (P::Freeze, 0),
        CorrectionAction::Replace => (P::Replace, 0),
        CorrectionAction::Restore => (P::Restore, 0),
        CorrectionAction::SetImportance(importance) => (P::SetImportance, i32::from(importance)),
    };
    (action as i32, importance)
}

pub fn change_kind_to_proto(kind: ChangeKind) -> i32 {
    use pb::ChangeKind as P;
    (match kind {
        ChangeKind::Create => P::Create,
        ChangeKind::Evidence => P::Evidence,
        ChangeKind::Merge => P::Merge,
        ChangeKind::Correction => P::Correction,
        ChangeKind::Decay => P::Decay,
        ChangeKind::Forget => P::Forget,
        ChangeKind::Delete => P::Delete,
        ChangeKind::Promote => P::Promote,
        ChangeKind::Supersede => P::Supersede,
    }) as i32
}

pub fn change_to_proto(change: &Change) -> pb::MemoryChange {
    pb::MemoryChange {
        id: change.id.clone(),
        memory_id: change.memory_id.clone(),
        kind: change_kind_to_proto(change.kind),
        actor: change.actor.clone(),
        reason: change.reason.clone(),
        before_json: change.before.clone().unwrap_or_default(),
        after_json: change.after.clone().unwrap_or_default(),
        at: Some(timestamp(change.at)),
    }
}

pub fn change_from_proto(change: &pb::MemoryChange, owner: &Owner) -> Change {
    use pb::ChangeKind as P;
    let kind = match P::try_from(change.kind).unwrap_or(P::Unspecified) {
        P::Create | P::Unspecified => ChangeKind::Create,
        P::Evidence => ChangeKind::Evidence,
        P::Merge => ChangeKind::Merge,
        P::Correction => ChangeKind::Correction,
        P::Decay => ChangeKind::Decay,
        P::Forget => ChangeKind::Forget,
        P::Delete => ChangeKind::Delete,
        P::Promote => ChangeKind::Promote,
        P::Supersede => ChangeKind::Supersede,
    };
    Change {
        id: change.id.clone(),
        tenant_id: owner.tenant_id.clone(),
        user_id: owner.user_id.clone(),
        memory_id: change.memory_id.clone(),
        kind,
        actor: change.actor.clone(),
        reason: change.reason.clone(),
        before: (!change.before_json.is_empty()).then(|| change.before_json.clone()),
        after: (!change.after_json.is_empty()).then(|| change.after_json.clone()),
        at: change
            .at
            .as_ref()
            .and_then(|t| thinkus_common::convert::datetime(t, "at").ok())
            .unwrap_or_default(),
    }
}

pub fn candidate_status_from_proto(value: i32) -> Result<CandidateStatus, ApiError> {
    use pb::CandidateStatus as P;
    match P::try_from(value) {
        Ok(P::Unspecified) | Ok(P::Pending) => Ok(CandidateStatus::Pending),
        Ok(P::Approved) => Ok(CandidateStatus::Approved),
        Ok(P::Rejected) => Ok(CandidateStatus::Rejected),
        Err(_) => Err(ApiError::invalid("status", format!("unknown candidate status {value}"))),
    }
}

pub fn candidate_status_to_proto(status: CandidateStatus) -> i32 {
    use pb::CandidateStatus as P;
    (match status {
        CandidateStatus::Pending => P::Pending,
        CandidateStatus::Approved => P::Approved,
        CandidateStatus::Rejected => P::Rejected,
    }) as i32
}

pub fn candidate_to_proto(candidate: &CandidateView) -> pb::Candidate {
    pb::Candidate {
        id: candidate.id.clone(),
        scope: Some(scope_to_proto(&candidate.scope)),
        draft: Some(draft_to_proto(&candidate.draft)),
        reason: candidate.reason.clone(),
        score: candidate.score,
        evidence_count: candidate.evidence_count as i32,
        status: candidate_status_to_proto(candidate.status),
        created_at: Some(timestamp(candidate.created_at)),
        decided_at: timestamp_opt(candidate.decided_at),
        memory_id: candidate.memory_id.clone().unwrap_or_default(),
        conflicts_with: candidate.conflicts_with.clone(),
    }
}

pub fn candidate_from_proto(candidate: &pb::Candidate) -> Result<CandidateView, ApiError> {
    Ok(CandidateView {
        id: candidate.id.clone(),
        scope: candidate
            .scope
            .as_ref()
            .map(|s| scope_from_proto(Some(s), "scope", ScopeRules::USER))
            .transpose()?
            .unwrap_or_else(Scope::default),
        draft: draft_from_proto(candidate.draft.as_ref(), "draft")?,
        reason: candidate.reason.clone(),
        score: candidate.score,
        evidence_count: candidate.evidence_count.max(0) as u32,
        status: candidate_status_from_proto(candidate.status)?,
        created_at: candidate
            .created_at
            .as_ref()
            .and_then(|t| thinkus_common::convert::datetime(t, "created_at").ok())
            .unwrap_or_default(),
        decided_at: candidate
            .decided_at
            .as_ref()
            .and_then(|t| thinkus_common::convert::datetime(t, "decided_at").ok()),
        memory_id: (!candidate.memory_id.is_empty()).then(|| candidate.memory_id.clone()),
        conflicts_with: candidate.conflicts_with.clone(),
    })
}

pub fn conflict_to_proto(conflict: &Conflict) -> pb::Conflict {
    pb::Conflict {
        id: conflict.id.clone(),
        scope: Some(scope_to_proto(&conflict.scope)),
        subject: conflict.subject.clone(),
        current: conflict.current.iter().map(memory_to_proto).collect(),
        proposed: Some(draft_to_proto(&conflict.proposed)),
        reason: conflict.reason.clone(),
        evidence_count: conflict.evidence_count as i32,
        created_at: Some(timestamp(conflict.created_at)),
        question: conflict.question.clone(),
    }
}

pub fn conflict_from_proto(conflict: &pb::Conflict) -> Result<Conflict, ApiError> {
    Ok(Conflict {
        id: conflict.id.clone(),
        scope: conflict
            .scope
            .as_ref()
            .map(|s| scope_from_proto(Some(s), "scope", ScopeRules::USER))
            .transpose()?
            .unwrap_or_default(),
        subject: conflict.subject.clone(),
        current: conflict
            .current
            .iter()
            .map(memory_from_proto)
            .collect::<Result<_, _>>()?,
        proposed: draft_from_proto(conflict.proposed.as_ref(), "proposed")?,
        reason: conflict.reason.clone(),
        evidence_count: conflict.evidence_count.max(0) as u32,
        created_at: conflict
            .created_at
            .as_ref()
            .and_then(|t| thinkus_common::convert::datetime(t, "created_at").ok())
            .unwrap_or_default(),
        question: conflict.question.clone(),
    })
}

pub fn conflict_choice_from_proto(value: i32) -> Result<ConflictChoice, ApiError> {
    match pb::ConflictChoice::try_from(value) {
        Ok(pb::ConflictChoice::Current) => Ok(ConflictChoice::Current),
        Ok(pb::ConflictChoice::Proposed) => Ok(ConflictChoice::Proposed),
        Ok(pb::ConflictChoice::Unspecified) => Err(ApiError::invalid("keep", "is required (current or proposed)")),
        Err(_) => Err(ApiError::invalid("keep", format!("unknown choice {value}"))),
    }
}

pub fn conflict_choice_to_proto(choice: ConflictChoice) -> i32 {
    (match choice {
        ConflictChoice::Current => pb::ConflictChoice::Current,
        ConflictChoice::Proposed => pb::ConflictChoice::Proposed,
    }) as i32
}

pub fn import_report_to_proto(report: &ImportReport) -> pb::ImportMemoryResponse {
    pb::ImportMemoryResponse {
        changes: report
            .changes
            .iter()
            .map(|c| pb::ImportChange {
                action: c.action.clone(),
                path: c.path.clone(),
                line: c.line as i32,
                memory_id: c.memory_id.clone().unwrap_or_default(),
                detail: c.detail.clone(),
            })
            .collect(),
        lines: report.lines as i32,
        replaced: report.replaced as i32,
        suppressed: report.suppressed as i32,
        created: report.created as i32,
        queued: report.queued as i32,
        skipped: report.skipped as i32,
    }
}

pub fn import_report_from_proto(response: &pb::ImportMemoryResponse) -> ImportReport {
    let count = |n: i32| n.max(0) as u32;
    ImportReport {
        changes: response
            .changes
            .iter()
            .map(|c| ImportChange {
                action: c.action.clone(),
                path: c.path.clone(),
                line: count(c.line),
                memory_id: (!c.memory_id.is_empty()).then(|| c.memory_id.clone()),
                detail: c.detail.clone(),
            })
            .collect(),
        lines: count(response.lines),
        replaced: count(response.replaced),
        suppressed: count(response.suppressed),
        created: count(response.created),
        queued: count(response.queued),
        skipped: count(response.skipped),
    }
}
pub fn value_change_to_proto(change: &ValueChange) -> pb::ValueChange {
    pb::ValueChange {
        old_value: change.old.clone(),
        new_value: change.new.clone().unwrap_or_default(),
        changed_at: Some(thinkus_common::convert::timestamp(change.at)),
        memory_id: change.memory_id.clone(),
        session_id: change.session_id.clone().unwrap_or_default(),
        statement: change.statement.clone(),
    }
}

pub fn value_change_from_proto(change: pb::ValueChange) -> Result<ValueChange, ApiError> {
    Ok(ValueChange {
        old: change.old_value,
        new: (!change.new_value.is_empty()).then_some(change.new_value),
        at: datetime_opt(change.changed_at.as_ref(), "changes.changed_at")?.unwrap_or_default(),
        memory_id: change.memory_id,
        session_id: (!change.session_id.is_empty()).then_some(change.session_id),
        statement: change.statement,
    })
}

/// Counts of an erasure, to the wire.
pub fn erasure_counts_to_proto(counts: &thinkus_backends::sql::ErasureCounts) -> pb::ErasureCounts {
    pb::ErasureCounts {
        memories: counts.memories,
        changes: counts.changes,
        candidates: counts.candidates,
        idempotency: counts.idempotency,
        plans: counts.plans,
        artifacts: counts.artifacts,
        sessions: counts.sessions,
        session_messages: counts.session_messages,
        summaries: counts.summaries,
        jobs: counts.jobs,
        vectors: counts.vectors,
    }
}

/// Counts of an erasure, from the wire.
pub fn erasure_counts_from_proto(counts: Option<&pb::ErasureCounts>) -> thinkus_backends::sql::ErasureCounts {
    let counts = counts.cloned().unwrap_or_default();
    thinkus_backends::sql::ErasureCounts {
        memories: counts.memories,
        changes: counts.changes,
        candidates: counts.candidates,
        idempotency: counts.idempotency,
        plans: counts.plans,
        artifacts: counts.artifacts,
        sessions: counts.sessions,
        session_messages: counts.session_messages,
        summaries: counts.summaries,
        jobs: counts.jobs,
        vectors: counts.vectors,
    }
}

/// An erasure, to the wire.
pub fn erasure_to_proto(erasure: &crate::api::Erasure) -> pb::EraseUserResponse {
    pb::EraseUserResponse {
        counts: Some(erasure_counts_to_proto(&erasure.counts)),
        erasure_id: erasure.id.clone().unwrap_or_default(),
    }
}

/// An erasure, from the wire.
pub fn erasure_from_proto(response: &pb::EraseUserResponse) -> crate::api::Erasure {
    crate::api::Erasure {
        id: (!response.erasure_id.is_empty()).then(|| response.erasure_id.clone()),
        counts: erasure_counts_from_proto(response.counts.as_ref()),
    }
}

fn index_job_status_to_proto(status: thinkus_backends::sql::JobStatus) -> i32 {
    use thinkus_backends::sql::JobStatus;
    (match status {
        JobStatus::Pending => pb::IndexJobStatus::Pending,
        JobStatus::Running => pb::IndexJobStatus::Running,
        JobStatus::Succeeded => pb::IndexJobStatus::Succeeded,
        JobStatus::Failed => pb::IndexJobStatus::Failed,
    }) as i32
}

fn index_job_status_from_proto(value: i32) -> Result<thinkus_backends::sql::JobStatus, ApiError> {
    use thinkus_backends::sql::JobStatus;
    match pb::IndexJobStatus::try_from(value) {
        Ok(pb::IndexJobStatus::Pending) => Ok(JobStatus::Pending),
        Ok(pb::IndexJobStatus::Running) => Ok(JobStatus::Running),
        Ok(pb::IndexJobStatus::Succeeded) => Ok(JobStatus::Succeeded),
        Ok(pb::IndexJobStatus::Failed) => Ok(JobStatus::Failed),
        _ => Err(ApiError::invalid(
            "job.status",
            format!("unknown index job status {value}"),
        )),
    }
}

/// The scope of a job's owners: a user, a tenant (no user) or everyone (neither).
pub fn owners_to_proto(owners: &Owners) -> pbc::Scope {
    match owners {
        Owners::One(owner) => pbc::Scope {
            tenant_id: owner.tenant_id.clone(),
            user_id: owner.user_id.clone(),
            ..Default::default()
        },
        Owners::Tenant(tenant) => pbc::Scope {
            tenant_id: tenant.clone(),
            ..Default::default()
        },
        Owners::All => pbc::Scope::default(),
    }
}

fn owners_from_proto(scope: Option<&pbc::Scope>) -> Owners {
    match scope {
        Some(scope) if !scope.user_id.is_empty() => {
            Owners::One(Owner::new(scope.tenant_id.clone(), scope.user_id.clone()))
        }
        Some(scope) if !scope.tenant_id.is_empty() => Owners::Tenant(scope.tenant_id.clone()),
        _ => Owners::All,
    }
}

pub fn index_job_to_proto(job: &crate::rebuild::IndexJob) -> pb::IndexJob {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    pb::IndexJob {
        id: job.id.clone(),
        status: index_job_status_to_proto(job.status),
        scope: Some(owners_to_proto(&job.owners)),
        users_total: count(job.progress.users_total),
        users_done: count(job.progress.users_done),
        staged: count(job.progress.staged),
        indexed: count(job.progress.indexed),
        removed: count(job.progress.removed),
        attempts: i32::try_from(job.attempts).unwrap_or(i32::MAX),
        last_error: job.last_error.clone().unwrap_or_default(),
        created_at: Some(timestamp(job.created_at)),
        updated_at: Some(timestamp(job.updated_at)),
    }
}

pub fn index_job_from_proto(job: Option<&pb::IndexJob>) -> Result<crate::rebuild::IndexJob, ApiError> {
    let job = job.ok_or_else(|| ApiError::invalid("job", "missing"))?;
    let count = |n: i64| n.max(0) as u64;
    Ok(crate::rebuild::IndexJob {
        id: job.id.clone(),
        status: index_job_status_from_proto(job.status)?,
        owners: owners_from_proto(job.scope.as_ref()),
        progress: crate::rebuild::RebuildProgress {
            users_total: count(job.users_total),
            users_done: count(job.users_done),
            staged: count(job.staged),
            indexed: count(job.indexed),
            removed: count(job.removed),
        },
        attempts: job.attempts.max(0) as u32,
        last_error: (!job.last_error.is_empty()).then(|| job.last_error.clone()),
        created_at: datetime_opt(job.created_at.as_ref(), "job.created_at")?.unwrap_or_default(),
        updated_at: datetime_opt(job.updated_at.as_ref(), "job.updated_at")?.unwrap_or_default(),
    })
}

// The gRPC client's side: domain calls to requests, responses to domain results.

/// The scope of an administrative call: one user, a tenant's users (no user id), or everyone
/// (no scope).
fn owners_scope(owners: &Owners) -> Option<pbc::Scope> {
    match owners {
        Owners::All => None,
        owners => Some(owners_to_proto(owners)),
    }
}

/// A memory the knowledge manager must have returned.
pub fn required_memory(memory: Option<&pbc::Memory>) -> Result<Memory, ApiError> {
    memory_from_proto(memory.ok_or_else(|| ApiError::internal("the knowledge manager returned no memory"))?)
}

pub fn memories_from_proto(memories: &[pbc::Memory]) -> Result<Vec<Memory>, ApiError> {
    memories.iter().map(memory_from_proto).collect()
}

/// A write result the knowledge manager must have returned.
pub fn required_write_result(result: Option<&pb::WriteResult>) -> Result<WriteResult, ApiError> {
    write_result_from_proto(result.ok_or_else(|| ApiError::internal("the knowledge manager returned no result"))?)
}

pub fn remember_request_to_proto(request: RememberRequest) -> pb::RememberRequest {
    pb::RememberRequest {
        scope: Some(scope_to_proto(&request.scope)),
        memory: Some(draft_to_proto(&request.draft)),
        request_id: request.request_id.unwrap_or_default(),
        skip_dedup: request.skip_dedup,
        bypass_admission: request.admission_bypassed_by.is_some(),
    }
}

pub fn remember_response_from_proto(response: &pb::RememberResponse) -> Result<WriteResult, ApiError> {
    required_write_result(response.result.as_ref())
}

pub fn ingest_request_to_proto(request: &IngestTurnsRequest) -> pb::IngestTurnsRequest {
    pb::IngestTurnsRequest {
        scope: Some(scope_to_proto(&request.scope)),
        turns: turns_to_proto(&request.turns),
        visibility: visibility_to_proto(request.visibility),
        job_id: request.job_id.clone().unwrap_or_default(),
    }
}

pub fn ingest_from_proto(response: pb::IngestTurnsResponse) -> IngestResult {
    IngestResult {
        memory_ids: response.memory_ids,
        created: response.created.max(0) as u32,
    }
}

pub fn learn_request_to_proto(request: LearnRequest) -> pb::LearnFromConversationRequest {
    pb::LearnFromConversationRequest {
        scope: Some(scope_to_proto(&request.scope)),
        messages: request.messages.iter().map(message_to_proto).collect(),
        engine: engine_to_proto_choice(request.engine),
        request_id: request.request_id.unwrap_or_default(),
        not_memorable: request.not_memorable,
        dry_run: request.dry_run,
        injected_memories: request.injected_memories,
        job_id: request.job_id.unwrap_or_default(),
    }
}

/// A read by one role, or the person's view of every role (a scope that names no role).
pub fn get_memory_request_to_proto(scope: &Scope, memory_id: String) -> pb::GetMemoryRequest {
    pb::GetMemoryRequest {
        scope: Some(scope_to_proto(scope)),
        memory_id,
        all_roles: scope.role_id.is_empty(),
    }
}

pub fn list_request_to_proto(request: &ListRequest) -> pb::ListMemoriesRequest {
    pb::ListMemoriesRequest {
        scope: Some(scope_to_proto(&request.scope)),
        all_roles: request.scope.role_id.is_empty(),
        types: request.types.iter().map(|t| memory_type_to_proto(*t)).collect(),
        statuses: request.statuses.iter().map(|s| status_to_proto(*s)).collect(),
        page: Some(page_to_proto(request.limit, request.offset)),
    }
}

pub fn correct_request_to_proto(request: CorrectRequest) -> pb::CorrectMemoryRequest {
    let (action, importance) = correction_to_proto(request.action);
    pb::CorrectMemoryRequest {
        scope: Some(scope_to_proto(&request.scope)),
        memory_id: request.memory_id,
        action,
        evidence: request.evidence,
        new_content: request.new_content.unwrap_or_default(),
        new_summary: request.new_summary.unwrap_or_default(),
        request_id: request.request_id.unwrap_or_default(),
        importance,
    }
}

pub fn correct_result_from_proto(response: &pb::CorrectMemoryResponse) -> Result<CorrectResult, ApiError> {
    Ok(CorrectResult {
        memory: required_memory(response.memory.as_ref())?,
        replacement: response.replacement.as_ref().map(memory_from_proto).transpose()?,
    })
}

pub fn merge_request_to_proto(
    scope: &Scope,
    memory_ids: Vec<String>,
    engine: EngineChoice,
    request_id: Option<String>,
) -> pb::MergeMemoriesRequest {
    pb::MergeMemoriesRequest {
        scope: Some(scope_to_proto(scope)),
        memory_ids,
        engine: engine_to_proto_choice(engine),
        request_id: request_id.unwrap_or_default(),
    }
}

pub fn delete_request_to_proto(scope: &Scope, memory_id: String, reason: String) -> pb::DeleteMemoryRequest {
    pb::DeleteMemoryRequest {
        scope: Some(scope_to_proto(scope)),
        memory_id,
        reason,
    }
}

pub fn history_request_to_proto(scope: &Scope, memory_id: String) -> pb::GetMemoryHistoryRequest {
    pb::GetMemoryHistoryRequest {
        scope: Some(scope_to_proto(scope)),
        memory_id,
        all_roles: scope.role_id.is_empty(),
    }
}

pub fn list_candidates_request_to_proto(
    scope: &Scope,
    status: CandidateStatus,
    limit: usize,
    offset: usize,
) -> pb::ListCandidatesRequest {
    pb::ListCandidatesRequest {
        scope: Some(scope_to_proto(scope)),
        status: candidate_status_to_proto(status),
        page: Some(page_to_proto(limit, offset)),
    }
}

pub fn approve_request_to_proto(
    scope: &Scope,
    candidate_id: String,
    edited_content: Option<String>,
) -> pb::ApproveCandidateRequest {
    pb::ApproveCandidateRequest {
        scope: Some(scope_to_proto(scope)),
        candidate_id,
        edited_content: edited_content.unwrap_or_default(),
    }
}

pub fn reject_request_to_proto(scope: &Scope, candidate_id: String, reason: String) -> pb::RejectCandidateRequest {
    pb::RejectCandidateRequest {
        scope: Some(scope_to_proto(scope)),
        candidate_id,
        reason,
    }
}

pub fn promote_request_to_proto(
    scope: &Scope,
    memory_id: String,
    target: Option<MemoryType>,
    title: Option<String>,
) -> pb::PromoteMemoryRequest {
    pb::PromoteMemoryRequest {
        scope: Some(scope_to_proto(scope)),
        memory_id,
        target_type: target.map(memory_type_to_proto).unwrap_or(0),
        title: title.unwrap_or_default(),
    }
}

pub fn finalize_request_to_proto(scope: &Scope, iteration_id: String) -> pb::FinalizeIterationRequest {
    pb::FinalizeIterationRequest {
        scope: Some(scope_to_proto(scope)),
        iteration_id,
    }
}

pub fn finalize_from_proto(response: pb::FinalizeIterationResponse) -> Result<FinalizeResult, ApiError> {
    Ok(FinalizeResult {
        promoted: memories_from_proto(&response.promoted)?,
        skipped_ids: response.skipped_ids,
    })
}

pub fn quota_request_to_proto(scope: &Scope) -> pb::GetQuotaRequest {
    pb::GetQuotaRequest {
        scope: Some(scope_to_proto(scope)),
    }
}

pub fn quota_from_proto(response: pb::GetQuotaResponse) -> Quota {
    Quota {
        plan: response.plan,
        used: response.used.max(0) as u64,
        limit: response.limit.max(0) as u64,
    }
}

pub fn set_plan_request_to_proto(owner: Owner, plan: String) -> pb::SetPlanRequest {
    pb::SetPlanRequest {
        scope: owners_scope(&Owners::One(owner)),
        plan,
    }
}

pub fn maintenance_request_to_proto(
    owners: &Owners,
    decay: bool,
    forget: bool,
    now: Option<DateTime<Utc>>,
) -> pb::RunMaintenanceRequest {
    pb::RunMaintenanceRequest {
        scope: owners_scope(owners),
        decay,
        forget,
        now: timestamp_opt(now),
    }
}

pub fn maintenance_from_proto(response: &pb::RunMaintenanceResponse) -> MaintenanceReport {
    MaintenanceReport {
        decayed: response.decayed.max(0) as u64,
        forgotten: response.forgotten.max(0) as u64,
    }
}

pub fn value_changes_request_to_proto(scope: &Scope, limit: usize) -> pb::ListValueChangesRequest {
    pb::ListValueChangesRequest {
        scope: Some(scope_to_proto(scope)),
        limit: limit.min(1000) as i32,
    }
}

pub fn rebuild_request_to_proto(owners: &Owners) -> pb::RebuildIndexRequest {
    pb::RebuildIndexRequest {
        scope: owners_scope(owners),
    }
}

pub fn index_job_request_to_proto(job_id: String) -> pb::GetIndexJobRequest {
    pb::GetIndexJobRequest { job_id }
}

pub fn list_conflicts_request_to_proto(scope: &Scope, limit: usize) -> pb::ListConflictsRequest {
    pb::ListConflictsRequest {
        scope: Some(scope_to_proto(scope)),
        limit: limit.min(200) as i32,
    }
}

pub fn resolve_request_to_proto(
    scope: &Scope,
    conflict_id: String,
    keep: ConflictChoice,
    reason: String,
) -> pb::ResolveConflictRequest {
    pb::ResolveConflictRequest {
        scope: Some(scope_to_proto(scope)),
        conflict_id,
        keep: conflict_choice_to_proto(keep),
        reason,
    }
}

pub fn resolution_from_proto(response: pb::ResolveConflictResponse) -> Result<ConflictResolution, ApiError> {
    Ok(ConflictResolution {
        kept: required_memory(response.kept.as_ref())?,
        replaced_ids: response.replaced_ids,
    })
}

pub fn standing_request_to_proto(scope: &Scope, limit: usize) -> pb::GetStandingRequest {
    pb::GetStandingRequest {
        scope: Some(scope_to_proto(scope)),
        limit: limit.min(200) as i32,
    }
}

pub fn standing_from_proto(response: &pb::GetStandingResponse) -> Result<Standing, ApiError> {
    Ok(Standing {
        rules: memories_from_proto(&response.rules)?,
        profile: memories_from_proto(&response.profile)?,
        conflicts: response
            .conflicts
            .iter()
            .map(conflict_from_proto)
            .collect::<Result<_, _>>()?,
        language: response.language.parse().unwrap_or(Language::En),
    })
}

pub fn export_memory_request_to_proto(scope: &Scope, language: Option<Language>) -> pb::ExportMemoryRequest {
    pb::ExportMemoryRequest {
        scope: Some(scope_to_proto(scope)),
        language: language.map(|l| l.as_str().to_string()).unwrap_or_default(),
    }
}

pub fn markdown_file_from_proto(file: pb::MemoryFile) -> MarkdownFile {
    MarkdownFile {
        path: file.path,
        content: file.content,
    }
}

pub fn markdown_file_to_proto(file: MarkdownFile) -> pb::MemoryFile {
    pb::MemoryFile {
        path: file.path,
        content: file.content,
    }
}

/// An import as its stream of messages: the header, then one message a file.
pub fn import_messages_to_proto(
    scope: &Scope,
    files: Vec<MarkdownFile>,
    dry_run: bool,
) -> impl Iterator<Item = pb::ImportMemoryRequest> + Send + 'static {
    use pb::import_memory_request::Item;
    let header = pb::ImportMemoryRequest {
        item: Some(Item::Header(pb::ImportHeader {
            scope: Some(scope_to_proto(scope)),
            dry_run,
        })),
    };
    std::iter::once(header).chain(files.into_iter().map(|file| pb::ImportMemoryRequest {
        item: Some(Item::File(markdown_file_to_proto(file))),
    }))
}

pub fn list_roles_request_to_proto(owner: Owner) -> pb::ListRolesRequest {
    pb::ListRolesRequest {
        scope: owners_scope(&Owners::One(owner)),
    }
}

pub fn export_user_request_to_proto(owner: Owner) -> pb::ExportUserRequest {
    pb::ExportUserRequest {
        scope: owners_scope(&Owners::One(owner)),
    }
}

pub fn erase_user_request_to_proto(owner: Owner, artifacts_erased: u64) -> pb::EraseUserRequest {
    pb::EraseUserRequest {
        scope: owners_scope(&Owners::One(owner)),
        artifacts_erased,
    }
}

// The server adapter's side: requests (their scope already read and authorized) to domain
// calls, domain results to responses.

/// An optional string field: empty means absent.
pub fn optional(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// The longest message of a conversation to learn from, in characters.
const MAX_LEARN_MESSAGE_CHARS: usize = 32 * 1024;

pub fn remember_request_from_proto(
    scope: Scope,
    body: &pb::RememberRequest,
    admission_bypassed_by: Option<String>,
) -> Result<RememberRequest, ApiError> {
    Ok(RememberRequest {
        scope,
        draft: draft_from_proto(body.memory.as_ref(), "memory")?,
        request_id: optional(&body.request_id),
        skip_dedup: body.skip_dedup,
        admission_bypassed_by,
    })
}

pub fn ingest_request_from_proto(scope: Scope, body: &pb::IngestTurnsRequest) -> Result<IngestTurnsRequest, ApiError> {
    let turns = turns_from_proto(&body.turns)?;
    let visibility = visibility_from_proto(body.visibility, "visibility")?.unwrap_or(Visibility::Private);
    Ok(IngestTurnsRequest {
        scope,
        turns,
        visibility,
        job_id: optional(&body.job_id),
    })
}

pub fn learn_request_from_proto(
    scope: Scope,
    body: &pb::LearnFromConversationRequest,
) -> Result<LearnRequest, ApiError> {
    let messages = messages_from_proto(&body.messages, "messages", MAX_LEARN_MESSAGE_CHARS)?;
    Ok(LearnRequest {
        scope,
        messages,
        engine: engine_from_proto(body.engine, "engine")?,
        request_id: optional(&body.request_id),
        not_memorable: body.not_memorable,
        dry_run: body.dry_run,
        injected_memories: body.injected_memories.clone(),
        job_id: optional(&body.job_id),
    })
}

pub fn list_request_from_proto(scope: Scope, body: &pb::ListMemoriesRequest) -> Result<ListRequest, ApiError> {
    let (limit, offset) = page_from_proto(body.page.as_ref(), "page")?;
    let statuses = body
        .statuses
        .iter()
        .enumerate()
        .map(|(i, s)| {
            status_from_proto(*s, &format!("statuses[{i}]"))?
                .ok_or_else(|| ApiError::invalid(&format!("statuses[{i}]"), "is unspecified"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ListRequest {
        scope,
        types: memory_types(&body.types, "types")?,
        statuses,
        limit,
        offset,
    })
}

pub fn memories_response(memories: &[Memory], limit: usize, offset: usize) -> pb::ListMemoriesResponse {
    pb::ListMemoriesResponse {
        page: Some(next_page(limit, offset, memories.len())),
        memories: memories.iter().map(memory_to_proto).collect(),
    }
}

pub fn correct_request_from_proto(scope: Scope, body: &pb::CorrectMemoryRequest) -> Result<CorrectRequest, ApiError> {
    Ok(CorrectRequest {
        scope,
        memory_id: body.memory_id.clone(),
        action: correction_from_proto(body.action, body.importance)?,
        evidence: body.evidence.clone(),
        new_content: optional(&body.new_content),
        new_summary: optional(&body.new_summary),
        request_id: optional(&body.request_id),
    })
}

pub fn correct_result_to_proto(result: &CorrectResult) -> pb::CorrectMemoryResponse {
    pb::CorrectMemoryResponse {
        memory: Some(memory_to_proto(&result.memory)),
        replacement: result.replacement.as_ref().map(memory_to_proto),
    }
}

pub fn history_response(changes: &[Change]) -> pb::GetMemoryHistoryResponse {
    pb::GetMemoryHistoryResponse {
        changes: changes.iter().map(change_to_proto).collect(),
    }
}

pub fn candidates_response(candidates: &[CandidateView], limit: usize, offset: usize) -> pb::ListCandidatesResponse {
    pb::ListCandidatesResponse {
        page: Some(next_page(limit, offset, candidates.len())),
        candidates: candidates.iter().map(candidate_to_proto).collect(),
    }
}

pub fn finalize_to_proto(result: FinalizeResult) -> pb::FinalizeIterationResponse {
    pb::FinalizeIterationResponse {
        promoted: result.promoted.iter().map(memory_to_proto).collect(),
        skipped_ids: result.skipped_ids,
    }
}

pub fn quota_to_proto(quota: Quota) -> pb::GetQuotaResponse {
    pb::GetQuotaResponse {
        plan: quota.plan,
        used: quota.used as i64,
        limit: quota.limit as i64,
    }
}

pub fn maintenance_to_proto(report: &MaintenanceReport) -> pb::RunMaintenanceResponse {
    pb::RunMaintenanceResponse {
        decayed: report.decayed as i64,
        forgotten: report.forgotten as i64,
    }
}

pub fn value_changes_response(changes: &[ValueChange]) -> pb::ListValueChangesResponse {
    pb::ListValueChangesResponse {
        changes: changes.iter().map(value_change_to_proto).collect(),
    }
}

pub fn conflicts_response(conflicts: &[Conflict]) -> pb::ListConflictsResponse {
    pb::ListConflictsResponse {
        conflicts: conflicts.iter().map(conflict_to_proto).collect(),
    }
}

pub fn resolution_to_proto(resolution: ConflictResolution) -> pb::ResolveConflictResponse {
    pb::ResolveConflictResponse {
        kept: Some(memory_to_proto(&resolution.kept)),
        replaced_ids: resolution.replaced_ids,
    }
}

pub fn standing_to_proto(standing: &Standing) -> pb::GetStandingResponse {
    pb::GetStandingResponse {
        rules: standing.rules.iter().map(memory_to_proto).collect(),
        profile: standing.profile.iter().map(memory_to_proto).collect(),
        conflicts: standing.conflicts.iter().map(conflict_to_proto).collect(),
        language: standing.language.as_str().to_string(),
    }
}
