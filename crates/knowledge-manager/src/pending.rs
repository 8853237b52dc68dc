//! Pending candidates as the store holds them, and the two steps of the write path that touch
//! them. A candidate row's `draft` column is a [`StoredDraft`]: the memory to write and, for a
//! pending conflict, the memories whose value it contradicts. The write path holds an unsure
//! new value that contradicts active memories as a pending conflict ([`hold`]) and settles the
//! conflicts a sure write answers ([`settled_by`]); a person's decision starts from [`find`].
//!
//! This file sits under the write pipeline (`service.rs`), the candidate queue
//! (`candidates.rs`) and the conflicts a person resolves (`conflicts.rs`), and imports none of
//! them: it works on the store and the configuration alone.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thinkus_backends::sql::{Candidate, CandidateStatus, MemoryStore, WriteBatch};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, check_id, new_id};
use thinkus_common::model::{Memory, MemorySource, MemoryStatus, MemoryType, Owner, Scope};

use crate::admission;
use crate::api::{MemoryDraft, WriteOutcome, WriteResult};
use crate::config::KnowledgeConfig;

/// What a candidate row's `draft` column holds: the memory to write and, for a pending
/// conflict, the memories whose value it contradicts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredDraft {
    #[serde(flatten)]
    pub draft: MemoryDraft,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts_with: Vec<String>,
}

impl StoredDraft {
    pub(crate) fn read(candidate: &Candidate) -> Result<Self, ApiError> {
        serde_json::from_str(&candidate.draft)
            .map_err(|err| ApiError::internal(format!("unreadable candidate draft {}: {err}", candidate.id)))
    }

    pub(crate) fn json(&self) -> Result<String, ApiError> {
        thinkus_common::to_json(self, "a candidate's draft")
    }
}

/// The pending candidate `candidate_id` of the scope's user, for a decision: NOT_FOUND when the
/// user has none of that id, PERMISSION_DENIED when the scope names another role or project
/// than the candidate's, FAILED_PRECONDITION when it was already decided.
pub(crate) async fn find(store: &dyn MemoryStore, scope: &Scope, candidate_id: &str) -> Result<Candidate, ApiError> {
    check_id(IdKind::Candidate, "candidate_id", candidate_id)?;
    let candidate = store
        .get_candidate(&scope.owner(), candidate_id)
        .await?
        .ok_or_else(|| ApiError::not_found("candidate", candidate_id))?;
    if !scope.role_id.is_empty() && scope.role_id != candidate.scope.role_id {
        return Err(ApiError::permission_denied(format!(
            "candidate {candidate_id} belongs to role {:?}, not {:?}",
            candidate.scope.role_id, scope.role_id
        )));
    }
    if scope.project_id.is_some()
        && candidate.scope.project_id.is_some()
        && scope.project_id != candidate.scope.project_id
    {
        return Err(ApiError::permission_denied(format!(
            "candidate {candidate_id} belongs to project {:?}",
            candidate.scope.project_id.clone().unwrap_or_default()
        )));
    }
    if candidate.status != CandidateStatus::Pending {
        return Err(ApiError::failed_precondition(format!(
            "candidate {candidate_id} was already {}",
            candidate.status
        )));
    }
    Ok(candidate)
}

/// Why a new value is too unsure to replace what it contradicts, or `None` when it is sure.
pub(crate) fn unsure(config: &KnowledgeConfig, memory: &Memory) -> Option<String> {
    if config.conflict_on_inference && memory.source == MemorySource::Inference {
        return Some("inferred by an executive".into());
    }
    if memory.confidence < config.conflict_min_confidence {
        return Some(format!(
            "confidence {:.2} below {:.2}",
            memory.confidence, config.conflict_min_confidence
        ));
    }
    None
}

/// The branch of the contradiction step (under the user's write lock): an unsure new value
/// that contradicts active memories is held as a pending conflict instead of replacing them.
/// Returns the batch to commit and the write's result when it is held. The caller holds back
/// writes a person decided (an approval, an explicit replacement): those are never held.
pub(crate) async fn hold(
    store: &dyn MemoryStore,
    config: &KnowledgeConfig,
    memory: &Memory,
    contradicted: &[Memory],
    now: DateTime<Utc>,
) -> Result<Option<(WriteBatch, WriteResult)>, ApiError> {
    let Some(why) = unsure(config, memory) else {
        return Ok(None);
    };
    // Turns are a record of what was said, not a value to choose: only memories conflict.
    let current: Vec<String> = contradicted
        .iter()
        .filter(|m| m.status == MemoryStatus::Active && m.memory_type != MemoryType::ConversationTurn)
        .map(|m| m.id.clone())
        .collect();
    if current.is_empty() {
        return Ok(None);
    }
    let subject = memory.subject.clone().unwrap_or_default();
    let reason = format!("contradicts {} about {subject}: {why}", current.join(", "));
    // A conflict's key differs from a plain candidate's: the same words queued for another
    // reason are another candidate.
    let key = format!("conflict:{}", admission::content_key(&memory.content));
    let record = match store.find_pending_candidate(&memory.scope.owner(), &key).await? {
        Some(mut seen) => {
            let mut stored = StoredDraft::read(&seen)?;
            for id in &current {
                if !stored.conflicts_with.contains(id) {
                    stored.conflicts_with.push(id.clone());
                }
            }
            seen.draft = stored.json()?;
            seen.evidence_count += 1;
            seen.score = seen.score.max(memory.confidence);
            seen
        }
        None => {
            let draft = MemoryDraft {
                summary: Some(memory.summary.clone()),
                importance: Some(memory.importance),
                tags: memory.tags.clone(),
                visibility: Some(memory.visibility),
                source: Some(memory.source),
                confidence: Some(memory.confidence),
                context: memory.context.clone(),
                related_decision_ids: memory.related_decision_ids.clone(),
                artifact_refs: memory.artifact_refs.clone(),
                occurred_at: Some(memory.occurred_at),
                iteration_id: memory.iteration_id.clone(),
                subject: memory.subject.clone(),
                ..MemoryDraft::new(memory.memory_type, memory.content.clone())
            };
            Candidate {
                id: new_id(IdKind::Candidate),
                scope: memory.scope.clone(),
                draft: StoredDraft {
                    draft,
                    conflicts_with: current,
                }
                .json()?,
                reason: reason.clone(),
                score: memory.confidence,
                evidence_count: 1,
                status: CandidateStatus::Pending,
                content_key: key,
                created_at: now,
                decided_at: None,
                memory_id: None,
            }
        }
    };
    let result = WriteResult {
        outcome: WriteOutcome::Queued,
        memory: None,
        replaced_ids: Vec::new(),
        candidate_id: Some(record.id.clone()),
        reason: format!("pending conflict: {reason}"),
        score: memory.confidence,
        draft: None,
    };
    let batch = WriteBatch {
        candidates: vec![record],
        ..Default::default()
    };
    Ok(Some((batch, result)))
}

/// Pending conflicts a sure write settles: those whose current value it replaced (the question
/// they ask is answered). Returned decided, for the write's batch; `except` is a candidate the
/// write itself decides.
pub(crate) async fn settled_by(
    store: &dyn MemoryStore,
    owner: &Owner,
    replaced_ids: &[String],
    by: &str,
    except: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<Candidate>, ApiError> {
    let mut settled = Vec::new();
    for mut candidate in store
        .list_candidates(owner, None, None, CandidateStatus::Pending, 500, 0)
        .await?
    {
        if Some(candidate.id.as_str()) == except || !candidate.content_key.starts_with("conflict:") {
            continue;
        }
        let stored = StoredDraft::read(&candidate)?;
        if stored.conflicts_with.iter().any(|id| replaced_ids.contains(id)) {
            candidate.status = CandidateStatus::Rejected;
            candidate.decided_at = Some(now);
            candidate.reason = format!("{} (settled: {by} replaced the value it questioned)", candidate.reason);
            settled.push(candidate);
        }
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsure_values_are_held() {
        let config = KnowledgeConfig::default();
        let mut sure = Memory::new(
            Scope::new("u", "cfo"),
            MemoryType::Constraint,
            "The budget is $800".into(),
            MemorySource::UserInput,
            Utc::now(),
        );
        assert_eq!(unsure(&config, &sure), None);
        sure.confidence = 0.6;
        assert!(unsure(&config, &sure).unwrap().contains("0.60"));
        sure.confidence = 1.0;
        sure.source = MemorySource::Inference;
        assert_eq!(unsure(&config, &sure).as_deref(), Some("inferred by an executive"));
        let off = KnowledgeConfig {
            conflict_min_confidence: 0.0,
            conflict_on_inference: false,
            ..KnowledgeConfig::default()
        };
        assert_eq!(unsure(&off, &sure), None);
    }
}
