//! Keeping memories true: corrections, merges, promotions of iteration knowledge.

use chrono::Utc;
use serde_json::json;
use thinkus_backends::filter::MemoryFilter;
use thinkus_backends::llm::json::{extract_json, int_field, str_field};
use thinkus_backends::llm::{CompletionRequest, LlmTask};
use thinkus_backends::sql::{ChangeKind, MemoryQuery, WriteBatch};
use thinkus_common::ApiError;
use thinkus_common::model::{EngineChoice, Memory, MemorySource, MemoryStatus, MemoryType, Owner, Scope, Visibility};
use thinkus_common::text::summarize_to;

use crate::api::{CorrectRequest, CorrectResult, CorrectionAction, FinalizeResult, MemoryDraft};
use crate::prompts;
use crate::service::{Gate, KnowledgeManager, WriteOptions, actor_of, request_key, update_record};

/// The memory a write chain wrote for a person's correction, merge or promotion; a draft that
/// admission rejects (noise, a temporary state) is FAILED_PRECONDITION naming `field`.
fn admitted(result: crate::api::WriteResult, field: &str) -> Result<Memory, ApiError> {
    match result.memory {
        Some(memory) => Ok(memory),
        None => Err(ApiError::failed_precondition(format!(
            "{field}: not admitted as a memory: {}",
            result.reason
        ))),
    }
}

/// A draft that carries a memory's attributes over to a successor.
fn successor_draft(memory: &Memory, content: String, summary: Option<String>) -> MemoryDraft {
    MemoryDraft {
        summary,
        importance: Some(memory.importance),
        tags: memory.tags.clone(),
        visibility: Some(memory.visibility),
        source: Some(memory.source),
        confidence: Some(1.0),
        context: memory.context.clone(),
        related_decision_ids: memory.related_decision_ids.clone(),
        artifact_refs: memory.artifact_refs.clone(),
        iteration_id: memory.iteration_id.clone(),
        subject: memory.subject.clone(),
        speaker: memory.speaker.clone(),
        occurred_at: (memory.memory_type == MemoryType::ConversationTurn).then_some(memory.occurred_at),
        ..MemoryDraft::new(memory.memory_type, content)
    }
}

pub(crate) async fn correct(km: &KnowledgeManager, request: CorrectRequest) -> Result<CorrectResult, ApiError> {
    let actor = actor_of(&request.scope);
    correct_as(km, request, actor).await
}

/// A correction recorded in the history as made by `actor` ("import" for a Markdown import).
pub(crate) async fn correct_as(
    km: &KnowledgeManager,
    request: CorrectRequest,
    actor: String,
) -> Result<CorrectResult, ApiError> {
    let memory = km
        .visible_memory(&request.scope, &request.memory_id, "memory_id")
        .await?;
    let key = request_key("correct", &request.request_id)?;
    if let Some(stored) = km.replay(&request.scope.owner(), &key).await? {
        return serde_json::from_str(&stored)
            .map_err(|err| ApiError::internal(format!("unreadable stored response: {err}")));
    }
    let now = Utc::now();
    let evidence = if request.evidence.trim().is_empty() {
        "corrected".to_string()
    } else {
        request.evidence.trim().to_string()
    };
    if request.action == CorrectionAction::Replace {
        let content = request
            .new_content
            .clone()
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| ApiError::invalid("new_content", "is required to replace a memory"))?;
        if memory.status == MemoryStatus::Replaced {
            return Err(ApiError::failed_precondition(format!(
                "memory {} was already replaced by {}",
                memory.id,
                memory.superseded_by.clone().unwrap_or_default()
            )));
        }
        let draft = successor_draft(&memory, content, request.new_summary.clone());
        let options = WriteOptions {
            gate: Gate::person(),
            skip_dedup: true,
            skip_quota: true,
            request_key: None,
            actor: actor.clone(),
            replaces: vec![(memory.clone(), ChangeKind::Correction, format!("replace: {evidence}"))],
            ..Default::default()
        };
        // The successor belongs to the memory's owner, whoever corrects it.
        let written = km.write(&memory.scope, &draft, options).await?;
        let replacement = admitted(written, "new_content")?;
        let old = km
            .store
            .get_memory(&memory.scope.owner(), &memory.id)
            .await?
            .ok_or_else(|| ApiError::not_found("memory", &memory.id))?;
        let result = CorrectResult {
            memory: old,
            replacement: Some(replacement),
        };
        store_correction_result(km, &request.scope.owner(), &key, &result).await;
        return Ok(result);
    }

    let mut updated = memory.clone();
    match request.action {
        CorrectionAction::Suppress => {
            updated.confidence = (updated.confidence - 0.3).max(0.0);
            updated.status = MemoryStatus::Suppressed;
        }
        CorrectionAction::Freeze => updated.status = MemoryStatus::Frozen,
        CorrectionAction::Restore => {
            if !matches!(memory.status, MemoryStatus::Suppressed | MemoryStatus::Frozen) {
                return Err(ApiError::failed_precondition(format!(
                    "only suppressed or frozen memories can be restored; {} is {}",
                    memory.id, memory.status
                )));
            }
            updated.status = MemoryStatus::Active;
        }
        CorrectionAction::SetImportance(importance) => {
            if !(1..=5).contains(&importance) {
                return Err(ApiError::invalid(
                    "importance",
                    format!("must be 1-5, got {importance}"),
                ));
            }
            // Freshness is importance after decay: it keeps its proportion.
            let ratio = memory.freshness / f64::from(memory.importance.max(1));
            updated.importance = importance;
            updated.freshness = ((f64::from(importance) * ratio) * 100.0).round() / 100.0;
        }
        CorrectionAction::Replace => {
            return Err(ApiError::internal("a replacement is written by the branch above"));
        }
    }
    updated.updated_at = now;
    let batch = WriteBatch {
        updates: vec![updated.clone()],
        changes: vec![update_record(
            &memory,
            &updated,
            ChangeKind::Correction,
            actor,
            match request.action {
                CorrectionAction::SetImportance(importance) => {
                    format!("set importance: {} -> {importance}: {evidence}", memory.importance)
                }
                action => format!("{}: {evidence}", action.as_str()),
            },
            now,
        )?],
        ..Default::default()
    };
    km.store.commit(batch).await.map_err(|err| match err {
        thinkus_backends::sql::StoreError::Conflict(m) => ApiError::new(
            thinkus_common::ErrorCode::AlreadyExists,
            format!("a concurrent change won: {m}; retry"),
        ),
        other => other.into(),
    })?;
    updated.version += 1;
    km.index(Vec::new(), vec![(updated.id.clone(), updated.status)], Vec::new())
        .await;
    let result = CorrectResult {
        memory: updated,
        replacement: None,
    };
    store_correction_result(km, &request.scope.owner(), &key, &result).await;
    Ok(result)
}

async fn store_correction_result(km: &KnowledgeManager, owner: &Owner, key: &Option<String>, result: &CorrectResult) {
    if let Some(key) = key {
        // The correction is written: an answer that cannot be kept for a replay is logged and
        // not stored, so a retry runs again instead of replaying an empty answer.
        let response = match thinkus_common::to_json(result, "a correction's answer") {
            Ok(response) => response,
            Err(err) => {
                tracing::error!(error = %err, "the correction's answer is not kept for replays");
                return;
            }
        };
        let _ = km
            .store
            .commit(WriteBatch {
                idempotency: Some(thinkus_backends::sql::IdempotencyRecord {
                    tenant_id: owner.tenant_id.clone(),
                    user_id: owner.user_id.clone(),
                    key: key.clone(),
                    response,
                    created_at: Utc::now(),
                }),
                ..Default::default()
            })
            .await;
    }
}

pub(crate) async fn merge(
    km: &KnowledgeManager,
    scope: Scope,
    memory_ids: Vec<String>,
    engine: EngineChoice,
    request_id: Option<String>,
) -> Result<Memory, ApiError> {
    if memory_ids.len() < 2 || memory_ids.len() > 50 {
        return Err(ApiError::invalid("memory_ids", "must hold 2-50 memory ids"));
    }
    let key = request_key("merge", &request_id)?;
    if let Some(stored) = km.replay(&scope.owner(), &key).await? {
        let result: crate::api::WriteResult = serde_json::from_str(&stored)
            .map_err(|err| ApiError::internal(format!("unreadable stored response: {err}")))?;
        return result
            .memory
            .ok_or_else(|| ApiError::internal("stored merge without memory"));
    }
    let mut memories = Vec::with_capacity(memory_ids.len());
    for (i, id) in memory_ids.iter().enumerate() {
        let memory = km.visible_memory(&scope, id, &format!("memory_ids[{i}]")).await?;
        if memories.iter().any(|m: &Memory| m.id == memory.id) {
            return Err(ApiError::invalid(&format!("memory_ids[{i}]"), "is listed twice"));
        }
        memories.push(memory);
    }
    let first = memories[0].clone();
    for (i, memory) in memories.iter().enumerate() {
        if memory.status != MemoryStatus::Active {
            return Err(ApiError::failed_precondition(format!(
                "memory_ids[{i}]: {} is {}, only active memories can be merged",
                memory.id, memory.status
            )));
        }
        if memory.memory_type != first.memory_type {
            return Err(ApiError::invalid(
                &format!("memory_ids[{i}]"),
                format!(
                    "is a {}, the others are {}: only memories of one type merge",
                    memory.memory_type, first.memory_type
                ),
            ));
        }
        if memory.scope.role_id != first.scope.role_id || memory.scope.project_id != first.scope.project_id {
            return Err(ApiError::invalid(
                &format!("memory_ids[{i}]"),
                "belongs to another role or project than the first memory",
            ));
        }
    }
    let contents: Vec<String> = memories.iter().map(|m| m.content.clone()).collect();
    let engine = km.engine(engine)?;
    let mut call = CompletionRequest::task(LlmTask::Merge, prompts::merge(&contents), json!({"contents": contents}));
    call.max_tokens = 500;
    let answer = match engine.complete(call).await {
        Ok(completion) => extract_json(&completion.text),
        Err(err) if !engine.is_builtin() => {
            thinkus_common::metrics::METRICS
                .llm_failures
                .with_label_values(&["merge"])
                .inc();
            tracing::warn!(%err, "the LLM merge failed; merging with the rules");
            None
        }
        Err(err) => return Err(err.into()),
    };
    let answer = match answer.filter(|a| str_field(a, "mergedContent").is_some()) {
        Some(answer) => answer,
        None => crate::rules::merge(&json!({"contents": contents}))?,
    };
    let content = str_field(&answer, "mergedContent").unwrap_or_default().to_string();
    let importance = memories.iter().map(|m| m.importance).max().unwrap_or(3);
    let importance = int_field(&answer, "importance")
        .map(|i| i.clamp(1, 5) as u8)
        .unwrap_or(importance)
        .max(importance);
    let confidence = (memories.iter().map(|m| m.confidence).fold(1.0, f64::min) + 0.1).min(1.0);
    let mut tags: Vec<String> = Vec::new();
    for tag in memories.iter().flat_map(|m| m.tags.iter()) {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    let visibility = memories
        .iter()
        .map(|m| m.visibility)
        .max_by_key(|v| v.reach())
        .unwrap_or(Visibility::Private);
    let draft = MemoryDraft {
        summary: str_field(&answer, "mergedSummary").map(str::to_string),
        importance: Some(importance),
        tags,
        visibility: Some(visibility),
        source: Some(MemorySource::Consolidation),
        confidence: Some(confidence),
        subject: first.subject.clone(),
        ..MemoryDraft::new(first.memory_type, content)
    };
    let evidence: u32 = memories.iter().map(|m| m.evidence_count).sum();
    let options = WriteOptions {
        gate: Gate::person(),
        skip_dedup: true,
        skip_quota: true,
        request_key: key,
        actor: actor_of(&scope),
        replaces: memories
            .iter()
            .map(|m| {
                (
                    m.clone(),
                    ChangeKind::Merge,
                    format!("merged with {} others", memories.len() - 1),
                )
            })
            .collect(),
        evidence_count: Some(evidence),
        ..Default::default()
    };
    let written = km.write(&first.scope, &draft, options).await?;
    admitted(written, "memory_ids")
}

fn promotion_target(source: MemoryType, target: Option<MemoryType>) -> Result<MemoryType, ApiError> {
    let allowed = match source {
        MemoryType::Insight => MemoryType::ProjectDecision,
        MemoryType::Learning => MemoryType::Pattern,
        other => {
            return Err(ApiError::invalid(
                "memory_id",
                format!("is a {other}: only insights (to decisions) and learnings (to patterns) are promoted"),
            ));
        }
    };
    match target {
        None => Ok(allowed),
        Some(t) if t == allowed => Ok(t),
        Some(t) => Err(ApiError::invalid(
            "target_type",
            format!("a {source} is promoted to a {allowed}, not a {t}"),
        )),
    }
}

/// Promotes one insight or learning, refusing a title the project already has.
pub(crate) async fn promote(
    km: &KnowledgeManager,
    scope: Scope,
    memory_id: String,
    target: Option<MemoryType>,
    title: Option<String>,
) -> Result<Memory, ApiError> {
    let memory = km.visible_memory(&scope, &memory_id, "memory_id").await?;
    let target = promotion_target(memory.memory_type, target)?;
    promote_memory(km, &scope, &memory, target, title).await
}

fn normalise_title(title: &str) -> String {
    title.to_lowercase().chars().filter(|c| c.is_alphanumeric()).collect()
}

async fn promote_memory(
    km: &KnowledgeManager,
    scope: &Scope,
    memory: &Memory,
    target: MemoryType,
    title: Option<String>,
) -> Result<Memory, ApiError> {
    let title = title
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| memory.summary.clone());
    let project = memory.scope.project_id.clone().or_else(|| scope.project_id.clone());
    let existing = km
        .store
        .list_memories(&MemoryQuery {
            limit: 1000,
            ..MemoryQuery::of(MemoryFilter {
                types: vec![target],
                ..MemoryFilter::user(&memory.scope.owner())
            })
        })
        .await?;
    let key = normalise_title(&title);
    if let Some(clash) = existing
        .iter()
        .filter(|m| m.scope.project_id == project)
        .find(|m| normalise_title(&m.summary) == key || normalise_title(&m.content) == normalise_title(&memory.content))
    {
        return Err(ApiError::new(
            thinkus_common::ErrorCode::AlreadyExists,
            format!(
                "title: the project already has the {target} {:?} ({})",
                clash.summary, clash.id
            ),
        ));
    }
    let owner = Scope {
        project_id: project,
        ..memory.scope.clone()
    };
    let draft = MemoryDraft {
        summary: Some(summarize_to(&title, 50)),
        importance: Some(memory.importance.max(4)),
        tags: {
            let mut tags = memory.tags.clone();
            tags.push("promoted".into());
            tags
        },
        visibility: Some(if owner.project_id.is_some() {
            Visibility::Project
        } else {
            Visibility::Global
        }),
        source: Some(MemorySource::Promotion),
        confidence: Some(memory.confidence),
        context: memory.context.clone(),
        iteration_id: memory.iteration_id.clone(),
        related_decision_ids: memory.related_decision_ids.clone(),
        ..MemoryDraft::new(target, memory.content.clone())
    };
    let now = Utc::now();
    let mut marked = memory.clone();
    if !marked.tags.iter().any(|t| t == "promoted") {
        marked.tags.push("promoted".into());
    }
    marked.updated_at = now;
    let options = WriteOptions {
        gate: Gate::person(),
        skip_dedup: true,
        actor: actor_of(scope),
        extra_changes: vec![update_record(
            memory,
            &marked,
            ChangeKind::Promote,
            actor_of(scope),
            format!("promoted to a {target}"),
            now,
        )?],
        ..Default::default()
    };
    let written = admitted(km.write(&owner, &draft, options).await?, "memory_id")?;
    km.store
        .commit(WriteBatch {
            updates: vec![marked],
            ..Default::default()
        })
        .await?;
    Ok(written)
}

/// Promotes the critical (importance 5) insights of an iteration to project decisions.
pub(crate) async fn finalize_iteration(
    km: &KnowledgeManager,
    scope: Scope,
    iteration_id: String,
) -> Result<FinalizeResult, ApiError> {
    if scope.project_id.is_none() {
        return Err(ApiError::invalid(
            "scope.project_id",
            "is required to finalize an iteration",
        ));
    }
    if iteration_id.trim().is_empty() {
        return Err(ApiError::invalid("iteration_id", "is required"));
    }
    let insights = km
        .store
        .list_memories(&MemoryQuery {
            iteration_id: Some(iteration_id.clone()),
            limit: 1000,
            ..MemoryQuery::of(MemoryFilter {
                types: vec![MemoryType::Insight],
                ..MemoryFilter::user(&scope.owner())
            })
        })
        .await?;
    let mut result = FinalizeResult {
        promoted: Vec::new(),
        skipped_ids: Vec::new(),
    };
    for insight in insights
        .iter()
        .filter(|m| m.importance >= 5 && m.scope.project_id == scope.project_id)
        .filter(|m| !m.tags.iter().any(|t| t == "promoted"))
    {
        match promote_memory(km, &scope, insight, MemoryType::ProjectDecision, None).await {
            Ok(decision) => result.promoted.push(decision),
            Err(err) if err.code == thinkus_common::ErrorCode::AlreadyExists => {
                result.skipped_ids.push(insight.id.clone())
            }
            Err(err) => return Err(err),
        }
    }
    Ok(result)
}
