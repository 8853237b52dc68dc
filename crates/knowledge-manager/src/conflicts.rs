//! Pending conflicts (seed 001 section 3.5.4, seed 004 section 10: "发生冲突时按证据数量与置信度
//! 决策"). A new value that contradicts an active memory replaces it at once when it is sure, as
//! an explicit correction is. When it is not (a confidence below
//! `knowledge.conflict_min_confidence`, or inferred by an executive), the old memory stays and
//! the new value waits beside it as a candidate that names the memories it contradicts: a
//! pending conflict. Contexts ask about it ("budget: $500 or $800? unconfirmed"); a person
//! resolves it (keep the current value, or the new one), and the history records who chose.

use chrono::Utc;
use thinkus_backends::sql::{Candidate, CandidateStatus, ChangeKind, WriteBatch};
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Memory, MemoryStatus, Scope};
use thinkus_common::text::{detect_language_of, summarize_to};

use crate::api::{Conflict, ConflictChoice, ConflictResolution, WriteResult};
use crate::pending::{self, StoredDraft};
use crate::service::{Gate, KnowledgeManager, WriteOptions, actor_of, update_record};
use crate::subject;

/// The question a conflict asks, in the language of its values: "budget: $500 or $800?
/// unconfirmed", "预算：$500 还是 $800？待确认".
pub fn question(subject_name: &str, current: &[Memory], proposed: &str) -> String {
    let language = detect_language_of(current.iter().map(|m| m.content.as_str()).chain([proposed]));
    question_in(subject_name, current, proposed, language)
}

/// The question a conflict asks, in `language` (the memory page's): its values as they are,
/// the subject's name and the words around them in that language.
pub fn question_in(subject_name: &str, current: &[Memory], proposed: &str, language: Language) -> String {
    let label = subject::label(subject_name, language);
    // Each side by the values it states that the other does not; its words when it states none.
    let side = |text: &str, other: &str| {
        let others = subject::values(other);
        let own: Vec<String> = subject::shown_values(text)
            .into_iter()
            .filter(|v| !subject::values(v).is_subset(&others))
            .collect();
        if own.is_empty() {
            summarize_to(text, 40)
        } else {
            own.join(" / ")
        }
    };
    let mut old: Vec<String> = Vec::new();
    for memory in current {
        let shown = side(&memory.content, proposed);
        if !old.contains(&shown) {
            old.push(shown);
        }
    }
    let new = side(
        proposed,
        &current.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join(" "),
    );
    match language {
        Language::Zh => format!("{label}：{} 还是 {new}？待确认", old.join(" / ")),
        Language::En => format!("{label}: {} or {new}? unconfirmed", old.join(" / ")),
    }
}

/// The conflict a pending candidate asks about, given the memories read for it (`read`, by
/// id): none when the values it questioned are no longer active (deleted, corrected).
fn conflict_of(
    candidate: Candidate,
    stored: StoredDraft,
    read: &std::collections::HashMap<String, Memory>,
) -> Option<Conflict> {
    let mut seen = std::collections::HashSet::new();
    let current: Vec<Memory> = stored
        .conflicts_with
        .iter()
        .filter(|id| seen.insert(id.as_str()))
        .filter_map(|id| read.get(id))
        .filter(|m| m.status == MemoryStatus::Active)
        .cloned()
        .collect();
    if current.is_empty() {
        // The value it questioned is gone (deleted, corrected): nothing left to choose between.
        return None;
    }
    let subject = stored
        .draft
        .subject
        .clone()
        .or_else(|| current.iter().find_map(|m| m.subject.clone()))
        .unwrap_or_default();
    Some(Conflict {
        question: question(&subject, &current, &stored.draft.content),
        id: candidate.id,
        scope: candidate.scope,
        subject,
        current,
        proposed: stored.draft,
        reason: candidate.reason,
        evidence_count: candidate.evidence_count,
        created_at: candidate.created_at,
    })
}

/// Pending conflicts of a user, newest first: of one role when the scope names one, of one
/// project (and the cross-project ones) when it names one. The memories the conflicts question
/// are read in one statement per `limit` conflicts (one for a context's), not one per conflict.
pub(crate) async fn list(km: &KnowledgeManager, scope: &Scope, limit: usize) -> Result<Vec<Conflict>, ApiError> {
    let role = (!scope.role_id.is_empty()).then_some(scope.role_id.as_str());
    let pending: Vec<Candidate> = km
        .store
        .list_candidates(&scope.owner(), role, None, CandidateStatus::Pending, 500, 0)
        .await?
        .into_iter()
        .filter(|candidate| {
            let in_project = match (&scope.project_id, &candidate.scope.project_id) {
                (Some(asked), Some(own)) => asked == own,
                _ => true,
            };
            in_project && candidate.content_key.starts_with("conflict:")
        })
        .collect();
    let mut conflicts = Vec::new();
    let mut pending = pending.into_iter().peekable();
    while conflicts.len() < limit && pending.peek().is_some() {
        // As many as may still be wanted, their memories in one read; a draft that cannot be
        // read fails the listing when its turn comes, after the conflicts before it.
        let batch: Vec<(Candidate, Result<StoredDraft, ApiError>)> = pending
            .by_ref()
            .take(limit - conflicts.len())
            .map(|candidate| {
                let stored = StoredDraft::read(&candidate);
                (candidate, stored)
            })
            .collect();
        let ids: Vec<String> = batch
            .iter()
            .filter_map(|(_, stored)| stored.as_ref().ok())
            .flat_map(|stored| stored.conflicts_with.iter().cloned())
            .collect();
        let read: std::collections::HashMap<String, Memory> = km
            .store
            .get_memories(&scope.owner(), &ids)
            .await?
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
        for (candidate, stored) in batch {
            if let Some(conflict) = conflict_of(candidate, stored?, &read) {
                conflicts.push(conflict);
            }
        }
    }
    Ok(conflicts)
}

/// Keeps the new value: written in the candidate's scope, it replaces the current memories;
/// the history of each names who chose. Returns the write and the replaced ids.
pub(crate) async fn keep_proposed(
    km: &KnowledgeManager,
    scope: &Scope,
    candidate: Candidate,
    reason: String,
) -> Result<(WriteResult, Vec<String>), ApiError> {
    let stored = StoredDraft::read(&candidate)?;
    let actor = actor_of(scope);
    let why = if reason.trim().is_empty() {
        format!("conflict {} resolved by {actor}: the new value was kept", candidate.id)
    } else {
        format!("conflict {} resolved by {actor}: {}", candidate.id, reason.trim())
    };
    let current: Vec<Memory> = km
        .store
        .get_memories(&candidate.scope.owner(), &stored.conflicts_with)
        .await?
        .into_iter()
        .filter(|m| m.status == MemoryStatus::Active)
        .collect();
    let mut draft = stored.draft;
    // A person confirmed it.
    draft.confidence = Some(1.0);
    let mut decided = candidate.clone();
    decided.status = CandidateStatus::Approved;
    decided.decided_at = Some(Utc::now());
    let options = WriteOptions {
        gate: Gate::person(),
        actor,
        candidate: Some(decided),
        replaces: current
            .into_iter()
            .map(|m| (m, ChangeKind::Correction, why.clone()))
            .collect(),
        ..Default::default()
    };
    let mut result = km.write(&candidate.scope, &draft, options).await?;
    result.candidate_id = Some(candidate.id);
    let replaced = result.replaced_ids.clone();
    Ok((result, replaced))
}

/// Keeps the current value: the new one is discarded, and each current memory is confirmed
/// (confidence 1.0) with a history entry naming who chose. With `allow_moot`, a conflict whose
/// current value is gone is simply discarded (a rejection); otherwise that is
/// FAILED_PRECONDITION.
pub(crate) async fn keep_current(
    km: &KnowledgeManager,
    scope: &Scope,
    mut candidate: Candidate,
    reason: String,
    allow_moot: bool,
) -> Result<Option<Memory>, ApiError> {
    let stored = StoredDraft::read(&candidate)?;
    let actor = actor_of(scope);
    let now = Utc::now();
    let current: Vec<Memory> = km
        .store
        .get_memories(&candidate.scope.owner(), &stored.conflicts_with)
        .await?
        .into_iter()
        .filter(|m| m.status == MemoryStatus::Active)
        .collect();
    if current.is_empty() && !allow_moot {
        return Err(ApiError::failed_precondition(format!(
            "the current value of conflict {} is no longer active: keep the new value or reject it",
            candidate.id
        )));
    }
    let why = if reason.trim().is_empty() {
        format!(
            "conflict {} resolved by {actor}: kept over {:?}",
            candidate.id,
            summarize_to(&stored.draft.content, 50)
        )
    } else {
        format!("conflict {} resolved by {actor}: {}", candidate.id, reason.trim())
    };
    candidate.status = CandidateStatus::Rejected;
    candidate.decided_at = Some(now);
    candidate.reason = format!("{} (resolved by {actor}: the current value was kept)", candidate.reason);
    let mut batch = WriteBatch {
        candidates: vec![candidate],
        ..Default::default()
    };
    let mut kept = None;
    for memory in current {
        let mut updated = memory.clone();
        updated.confidence = 1.0;
        updated.updated_at = now;
        batch.changes.push(update_record(
            &memory,
            &updated,
            ChangeKind::Correction,
            &actor,
            &why,
            now,
        )?);
        batch.updates.push(updated.clone());
        if kept.is_none() {
            updated.version += 1;
            kept = Some(updated);
        }
    }
    let _user = km.lock_user(&scope.owner()).await?;
    km.store.commit(batch).await.map_err(|err| match err {
        thinkus_backends::sql::StoreError::Conflict(m) => ApiError::new(
            thinkus_common::ErrorCode::AlreadyExists,
            format!("a concurrent change won: {m}; retry"),
        ),
        other => other.into(),
    })?;
    Ok(kept)
}

/// Resolves a pending conflict (checked as an approval: the conflict must belong to the
/// scope's user, and to its role and project when the scope names them).
pub(crate) async fn resolve(
    km: &KnowledgeManager,
    scope: Scope,
    conflict_id: String,
    keep: ConflictChoice,
    reason: String,
) -> Result<ConflictResolution, ApiError> {
    let candidate = pending::find(km.store.as_ref(), &scope, &conflict_id).await?;
    if StoredDraft::read(&candidate)?.conflicts_with.is_empty() {
        return Err(ApiError::not_found("conflict", &conflict_id));
    }
    match keep {
        ConflictChoice::Proposed => {
            let (result, replaced_ids) = keep_proposed(km, &scope, candidate, reason).await?;
            Ok(ConflictResolution {
                kept: result
                    .memory
                    .ok_or_else(|| ApiError::internal("the kept value was not written"))?,
                replaced_ids,
            })
        }
        ConflictChoice::Current => {
            let kept = keep_current(km, &scope, candidate, reason, false)
                .await?
                .ok_or_else(|| ApiError::internal("no current value was confirmed"))?;
            Ok(ConflictResolution {
                kept,
                replaced_ids: Vec::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use thinkus_common::model::{MemorySource, MemoryType};

    use super::*;

    fn memory(content: &str) -> Memory {
        Memory::new(
            Scope::new("u", "cfo"),
            MemoryType::Constraint,
            content.into(),
            MemorySource::UserInput,
            Utc::now(),
        )
    }

    #[test]
    fn questions_name_both_values_in_the_users_language() {
        assert_eq!(
            question(
                "budget",
                &[memory("The budget is $500")],
                "I think the budget is $800 now"
            ),
            "budget: $500 or $800? unconfirmed"
        );
        assert_eq!(
            question("budget", &[memory("预算是$500")], "预算可能是$800"),
            "预算：$500 还是 $800？待确认"
        );
        // Without values, each side by its words.
        let q = question("design_style", &[memory("我喜欢简约的设计风格")], "设计风格要华丽一些");
        assert!(
            q.starts_with("设计风格：我喜欢简约的设计风格 还是 设计风格要华丽一些"),
            "{q}"
        );
    }
}
