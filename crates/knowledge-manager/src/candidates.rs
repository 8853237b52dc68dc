//! The candidate queue (seed 004 section 10): memories a person approves or rejects. Approval
//! writes the candidate into its own scope, and refuses an approver acting for another role or
//! project than the candidate's.

use chrono::Utc;
use thinkus_backends::sql::{CandidateStatus, WriteBatch};
use thinkus_common::ApiError;
use thinkus_common::model::{Scope, Visibility};

use crate::admission;
use crate::api::{CandidateView, WriteResult};
use crate::pending::{self, StoredDraft};
use crate::service::{Gate, KnowledgeManager, WriteOptions, actor_of};

pub(crate) fn view(candidate: thinkus_backends::sql::Candidate) -> Result<CandidateView, ApiError> {
    let stored = StoredDraft::read(&candidate)?;
    Ok(CandidateView {
        id: candidate.id,
        scope: candidate.scope,
        draft: stored.draft,
        reason: candidate.reason,
        score: candidate.score,
        evidence_count: candidate.evidence_count,
        status: candidate.status,
        created_at: candidate.created_at,
        decided_at: candidate.decided_at,
        memory_id: candidate.memory_id,
        conflicts_with: stored.conflicts_with,
    })
}

pub(crate) async fn list(
    km: &KnowledgeManager,
    scope: Scope,
    status: CandidateStatus,
    limit: usize,
    offset: usize,
) -> Result<Vec<CandidateView>, ApiError> {
    let role = (!scope.role_id.is_empty()).then_some(scope.role_id.as_str());
    km.store
        .list_candidates(&scope.owner(), role, scope.project_id.as_deref(), status, limit, offset)
        .await?
        .into_iter()
        .map(view)
        .collect()
}

pub(crate) async fn approve(
    km: &KnowledgeManager,
    scope: Scope,
    candidate_id: String,
    edited_content: Option<String>,
) -> Result<WriteResult, ApiError> {
    let candidate = pending::find(km.store.as_ref(), &scope, &candidate_id).await?;
    let stored = StoredDraft::read(&candidate)?;
    if !stored.conflicts_with.is_empty() && edited_content.as_deref().is_none_or(|c| c.trim().is_empty()) {
        // Approving a pending conflict keeps its new value.
        return crate::conflicts::keep_proposed(km, &scope, candidate, String::new())
            .await
            .map(|(result, _)| result);
    }
    let mut draft = stored.draft;
    if let Some(content) = edited_content.filter(|c| !c.trim().is_empty()) {
        draft.content = content;
        draft.summary = None;
    }
    // A person approved it: it is long-term, shared with every role when it is profile
    // information, or with the project otherwise.
    draft.visibility = Some(
        if admission::is_profile(draft.memory_type) && candidate.scope.project_id.is_none() {
            Visibility::Global
        } else if candidate.scope.project_id.is_some() {
            Visibility::Project
        } else {
            Visibility::Private
        },
    );
    draft.confidence = Some(1.0);
    let mut decided = candidate.clone();
    decided.status = CandidateStatus::Approved;
    decided.decided_at = Some(Utc::now());
    let options = WriteOptions {
        // A person approved it: admission still rejects noise, and no longer queues it.
        gate: Gate::person(),
        actor: actor_of(&scope),
        candidate: Some(decided),
        ..Default::default()
    };
    let mut result = km.write(&candidate.scope, &draft, options).await?;
    result.candidate_id = Some(candidate.id);
    Ok(result)
}

pub(crate) async fn reject(
    km: &KnowledgeManager,
    scope: Scope,
    candidate_id: String,
    reason: String,
) -> Result<(), ApiError> {
    let mut candidate = pending::find(km.store.as_ref(), &scope, &candidate_id).await?;
    if !StoredDraft::read(&candidate)?.conflicts_with.is_empty() {
        // Rejecting a pending conflict keeps the current value.
        crate::conflicts::keep_current(km, &scope, candidate, reason, true).await?;
        return Ok(());
    }
    candidate.status = CandidateStatus::Rejected;
    candidate.decided_at = Some(Utc::now());
    if !reason.trim().is_empty() {
        candidate.reason = format!("{} (rejected: {})", candidate.reason, reason.trim());
    }
    km.store
        .commit(WriteBatch {
            candidates: vec![candidate],
            ..Default::default()
        })
        .await?;
    Ok(())
}
