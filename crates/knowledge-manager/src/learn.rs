//! Learning from a conversation: extract candidates (LLM or rules), admit them, and write them
//! through the write pipeline (which deduplicates and resolves contradictions), queueing what
//! needs a person's approval.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use thinkus_backends::llm::json::{extract_json, int_field, str_field, str_list};
use thinkus_backends::llm::{CompletionRequest, LlmTask};
use thinkus_backends::sql::{IdempotencyRecord, WriteBatch};
use thinkus_common::ApiError;
use thinkus_common::ids::{IdKind, check_id, new_id};
use thinkus_common::model::{MemorySource, MemoryStatus, MemoryType, Message, Scope, Visibility};

use crate::admission;
pub use crate::admission::{Admission, Extracted, admit};
use crate::api::{LearnRequest, LearnResult, MemoryDraft, WriteOutcome, WriteResult};
use crate::prompts;
use crate::service::{Gate, KnowledgeManager, WriteOptions, actor_of, request_key};

/// Reads an engine's answer: fenced or wrapped JSON, an array or `{"memories": [...]}`,
/// truncated output. A candidate with a missing or unknown type or an empty content is
/// dropped and logged; loose types (numbers as strings) are accepted.
pub fn parse_candidates(text: &str) -> Vec<Extracted> {
    let Some(value) = extract_json(text) else {
        tracing::warn!(answer = %text.chars().take(200).collect::<String>(), "extraction answer has no JSON");
        return Vec::new();
    };
    let items = match value {
        Value::Array(items) => items,
        Value::Object(ref map) => match map.get("memories").or_else(|| map.get("candidates")) {
            Some(Value::Array(items)) => items.clone(),
            _ => vec![value],
        },
        _ => Vec::new(),
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let parsed = parse_one(item);
            if parsed.is_none() {
                tracing::warn!(index = i, candidate = %item, "dropped a malformed extraction candidate");
            }
            parsed
        })
        .collect()
}

fn parse_one(item: &Value) -> Option<Extracted> {
    let memory_type: MemoryType = str_field(item, "type")?.parse().ok()?;
    if memory_type == MemoryType::ConversationTurn {
        return None;
    }
    let content = str_field(item, "content")?.to_string();
    let importance = int_field(item, "importance").unwrap_or(3).clamp(1, 5) as u8;
    let confidence = item
        .get("confidence")
        .and_then(|v| v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok())))
        .unwrap_or(0.8)
        .clamp(0.0, 1.0);
    let project_specific = thinkus_backends::llm::json::bool_field(item, "project_specific")
        .or_else(|| thinkus_backends::llm::json::bool_field(item, "isProjectSpecific"))
        .unwrap_or(true);
    let relevant_role = str_field(item, "relevant_role")
        .or_else(|| str_field(item, "relevantAgent"))
        .filter(|r| r.len() <= 64 && r.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
        .map(str::to_string);
    Some(Extracted {
        memory_type,
        content,
        summary: str_field(item, "summary").map(str::to_string),
        importance,
        tags: str_list(item, "tags").into_iter().take(16).collect(),
        relevant_role,
        project_specific,
        confidence,
    })
}

/// Where a candidate is written, and as what: the owner (its relevant role; no project for a
/// cross-project fact) and the draft. `said_at` is when the conversation it was extracted from
/// took place: the memory's `occurred_at` (a replayed or late-processed exchange keeps its own
/// time).
fn plan(scope: &Scope, candidate: &Extracted, said_at: DateTime<Utc>) -> (Scope, MemoryDraft) {
    let mut owner = scope.clone();
    if let Some(role) = &candidate.relevant_role {
        owner.role_id = role.clone();
    }
    if !candidate.project_specific {
        // Profile facts and cross-project knowledge belong to no single project.
        owner.project_id = None;
    }
    // What the user likes and how they judge work stays with the role it was told to; what is
    // known of a project (a fact, a decision, a constraint...) is for every role of the project.
    let visibility = match candidate.memory_type {
        MemoryType::UserPreference | MemoryType::Feedback => Visibility::Private,
        _ if owner.project_id.is_some() => Visibility::Project,
        _ => Visibility::Private,
    };
    let draft = MemoryDraft {
        summary: candidate.summary.clone(),
        importance: Some(candidate.importance),
        tags: candidate.tags.clone(),
        visibility: Some(visibility),
        source: Some(MemorySource::Discussion),
        confidence: Some(candidate.confidence),
        occurred_at: Some(said_at),
        ..MemoryDraft::new(candidate.memory_type, candidate.content.clone())
    };
    (owner, draft)
}

/// Queues a candidate for a person's approval, counting a repeated observation on the pending
/// one (the Markdown import queues what admission holds back).
pub(crate) async fn queue(
    km: &KnowledgeManager,
    scope: &Scope,
    candidate: &Extracted,
    reason: &str,
    score: f64,
    said_at: DateTime<Utc>,
) -> Result<WriteResult, ApiError> {
    let (owner, draft) = plan(scope, candidate, said_at);
    km.queue(&owner, &draft, reason, score, &None).await
}

/// The contents of the memories that were in a conversation's prompt: ids (as the gateway
/// passes them) are read, so that admission compares what was said with what was injected;
/// anything else is taken as the text itself.
async fn injected_contents(km: &KnowledgeManager, scope: &Scope, injected: &[String]) -> Result<Vec<String>, ApiError> {
    let (ids, mut texts): (Vec<String>, Vec<String>) = injected
        .iter()
        .take(500)
        .cloned()
        .partition(|entry| check_id(IdKind::Memory, "injected_memories", entry).is_ok());
    for memory in km.store.get_memories(&scope.owner(), &ids).await? {
        if !memory.summary.is_empty() && !memory.content.starts_with(memory.summary.trim_end_matches('…')) {
            texts.push(memory.summary);
        }
        texts.push(memory.content);
    }
    Ok(texts)
}

/// A profile memory observed often and surely enough becomes long-term: shared with every
/// role (seed 004 section 9: confidence and evidence thresholds).
async fn promote_profile(km: &KnowledgeManager, result: &mut WriteResult) -> Result<(), ApiError> {
    let Some(memory) = result.memory.as_ref() else {
        return Ok(());
    };
    let eligible = admission::is_profile(memory.memory_type)
        && memory.scope.project_id.is_none()
        && memory.visibility == Visibility::Private
        && memory.status == MemoryStatus::Active
        && memory.evidence_count >= km.config.profile_min_evidence
        && memory.confidence >= km.config.profile_min_confidence
        && !admission::time_sensitive(&memory.content);
    if !eligible {
        return Ok(());
    }
    let mut stored = km
        .store
        .get_memory(&memory.scope.owner(), &memory.id)
        .await?
        .ok_or_else(|| ApiError::not_found("memory", &memory.id))?;
    let before = thinkus_common::to_json(&stored, "a memory's image")?;
    stored.visibility = Visibility::Global;
    stored.updated_at = Utc::now();
    let after = thinkus_common::to_json(&stored, "a memory's image")?;
    km.store
        .commit(WriteBatch {
            updates: vec![stored.clone()],
            changes: vec![thinkus_backends::sql::Change {
                id: new_id(IdKind::Change),
                tenant_id: stored.scope.tenant_id.clone(),
                user_id: stored.scope.user_id.clone(),
                memory_id: stored.id.clone(),
                kind: thinkus_backends::sql::ChangeKind::Promote,
                actor: "system:profile".into(),
                reason: format!(
                    "long-term profile: {} observations, confidence {:.2}",
                    stored.evidence_count, stored.confidence
                ),
                before: Some(before),
                after: Some(after),
                at: stored.updated_at,
            }],
            ..Default::default()
        })
        .await?;
    stored.version += 1;
    let dense = km
        .embedder
        .embed_passages(&[KnowledgeManager::index_text(&stored)])
        .await?;
    if let Some(dense) = dense.into_iter().next() {
        km.index(vec![km.point(&stored, dense)], Vec::new(), Vec::new()).await;
    }
    result.reason = format!("{}; promoted to the long-term profile", result.reason);
    result.memory = Some(stored);
    Ok(())
}

/// The extraction request both engines answer: the seed's prompt for an LLM and the same
/// conversation as JSON for the rules (`crate::rules::extract`).
pub fn extraction_call(messages: &[Message], role_id: &str, project_id: Option<&str>) -> CompletionRequest {
    let input = json!({
        "messages": messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
        "role_id": role_id,
        "project_id": project_id,
    });
    let prompt = prompts::extract(messages, role_id, project_id);
    let mut call = CompletionRequest::task(LlmTask::Extract, prompt, input);
    call.max_tokens = 2000;
    call
}

pub(crate) async fn learn(km: &KnowledgeManager, request: LearnRequest) -> Result<LearnResult, ApiError> {
    if request.messages.is_empty() || request.messages.len() > 200 {
        return Err(ApiError::invalid("messages", "must hold 1-200 messages"));
    }
    let key = request_key("learn", &request.request_id)?;
    if let Some(stored) = km.replay(&request.scope.owner(), &key).await? {
        let mut result: LearnResult = serde_json::from_str(&stored)
            .map_err(|err| ApiError::internal(format!("unreadable stored response: {err}")))?;
        for r in &mut result.results {
            r.outcome = WriteOutcome::DuplicateRequest;
        }
        return Ok(result);
    }
    if request.not_memorable {
        return Ok(LearnResult {
            results: vec![WriteResult::rejected("the conversation is marked not memorable", 0.0)],
            engine: "none".into(),
            candidates: 0,
        });
    }
    let engine = km.engine(request.engine)?;
    let call = extraction_call(
        &request.messages,
        &request.scope.role_id,
        request.scope.project_id.as_deref(),
    );
    let input = call.input.clone();
    // The learned clause head joins the rules when the built-in engine extracts and the
    // embedder is the one it was trained on (knowledge.learned, on by default).
    let learned = km
        .learned
        .as_ref()
        .filter(|l| engine.is_builtin() && l.reads(km.embedder.as_ref()));
    let (candidates, engine_name) = match learned {
        Some(learned) => match learned.extract(km.embedder.as_ref(), &input).await {
            Ok(answer) => (parse_candidates(&answer.to_string()), "learned"),
            Err(err) => {
                tracing::warn!(%err, "the clauses could not be embedded; the rules extract alone");
                (parse_candidates(&crate::rules::extract(&input).to_string()), "rules")
            }
        },
        None => match engine.complete(call).await {
            Ok(completion) => (
                parse_candidates(&completion.text),
                if engine.is_builtin() { "rules" } else { "llm" },
            ),
            Err(err) if !engine.is_builtin() => {
                thinkus_common::metrics::METRICS
                    .llm_failures
                    .with_label_values(&["extract"])
                    .inc();
                tracing::warn!(%err, "the LLM extraction failed; falling back to the rules");
                (parse_candidates(&crate::rules::extract(&input).to_string()), "rules")
            }
            Err(err) => return Err(err.into()),
        },
    };

    let said_at = request
        .messages
        .iter()
        .map(|m| m.created_at)
        .max()
        .unwrap_or_else(Utc::now);
    let injected = injected_contents(km, &request.scope, &request.injected_memories).await?;
    // Every candidate goes through the write chain, whose admission the plan below already
    // knows (the same function): it says which candidates will be embedded and written.
    let planned: Vec<(Scope, MemoryDraft, Admission, f64)> = candidates
        .iter()
        .map(|candidate| {
            let (owner, draft) = plan(&request.scope, candidate, said_at);
            let (admission, score) = admit(&km.config, &Extracted::of(&owner, &draft), &injected);
            (owner, draft, admission, score)
        })
        .collect();
    // One embedding call for every candidate to write; the writes then run one by one, so each
    // one's duplicate and contradiction checks see the ones before it.
    let mut embeddings = if request.dry_run {
        Vec::new()
    } else {
        let now = Utc::now();
        let texts: Vec<String> = planned
            .iter()
            .filter(|(_, _, admission, _)| *admission == Admission::Write)
            .map(|(owner, draft, _, _)| KnowledgeManager::index_text(&km.new_memory(owner, draft, now)))
            .collect();
        km.embedder.embed_passages(&texts).await?
    }
    .into_iter();
    let mut results = Vec::with_capacity(planned.len());
    for (owner, draft, admission, score) in planned {
        if request.dry_run {
            results.push(match admission {
                Admission::Reject(reason) => WriteResult::rejected(reason, score).about(&draft),
                Admission::Queue(reason) => WriteResult {
                    outcome: WriteOutcome::Queued,
                    reason: format!("dry run: {reason}"),
                    ..WriteResult::rejected("", score)
                },
                Admission::Write => WriteResult {
                    outcome: WriteOutcome::Created,
                    reason: "dry run: would be written".into(),
                    ..WriteResult::rejected("", score)
                },
            });
            continue;
        }
        let options = WriteOptions {
            gate: Gate::Check {
                injected: injected.clone(),
                by_person: false,
            },
            actor: actor_of(&request.scope),
            job_id: request.job_id.clone(),
            dense: (admission == Admission::Write).then(|| embeddings.next()).flatten(),
            ..Default::default()
        };
        let result = match km.write(&owner, &draft, options).await {
            Ok(mut written) => {
                written.score = score;
                promote_profile(km, &mut written).await?;
                written
            }
            Err(err) if err.code == thinkus_common::ErrorCode::ResourceExhausted => WriteResult {
                outcome: WriteOutcome::Refused,
                reason: err.message,
                ..WriteResult::rejected("", score).about(&draft)
            },
            Err(err) => return Err(err),
        };
        results.push(result);
    }
    let learned = LearnResult {
        results,
        engine: engine_name.into(),
        candidates: candidates.len() as u32,
    };
    let refused = learned.count(WriteOutcome::Refused);
    if refused > 0 {
        tracing::warn!(
            owner = %request.scope.owner(),
            role_id = %request.scope.role_id,
            refused,
            "learned memories were refused by the quota"
        );
    }
    if let (Some(key), false) = (key, request.dry_run) {
        let record = IdempotencyRecord {
            tenant_id: request.scope.tenant_id.clone(),
            user_id: request.scope.user_id.clone(),
            key,
            response: thinkus_common::to_json(&learned, "a learn answer")?,
            created_at: Utc::now(),
        };
        let _fence = km.fence_job(&request.scope.owner(), &request.job_id).await?;
        // Losing this race only means a concurrent twin wrote its record first.
        let _ = km
            .store
            .commit(WriteBatch {
                idempotency: Some(record),
                ..Default::default()
            })
            .await;
    }
    Ok(learned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_is_robust() {
        let text = "```json\n[{\"type\":\"user_preference\",\"content\":\"我喜欢简约\",\"importance\":\"4\"},{\"type\":\"nonsense\",\"content\":\"x\"},{\"content\":\"no type\"},{\"type\":\"risk\",\"content\":\"\"},{\"type\":\"constraint\",\"content\":\"预算$800\",\"importance\":9, \"project_specific\": \"false\"}]\n```";
        let parsed = parse_candidates(text);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].importance, 4);
        assert_eq!(parsed[1].importance, 5, "out-of-range importance is clamped");
        assert!(!parsed[1].project_specific);
        assert!(parse_candidates("I could not find anything.").is_empty());
        let wrapped = parse_candidates("{\"memories\": [{\"type\":\"risk\",\"content\":\"供应商可能延期\"}]}");
        assert_eq!(wrapped.len(), 1);
        let truncated = parse_candidates("[{\"type\":\"risk\",\"content\":\"a risk\"},{\"type\":\"constr");
        assert_eq!(truncated.len(), 1);
    }
}
