//! The gateway: prepares a turn's context within one budget and completes the turn through a
//! durable job queue.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thinkus_backends::embed::Embedder;
use thinkus_backends::llm::RuleEngine;
use thinkus_backends::llm::{ChatMessage, CompletionRequest, LanguageModel, LlmTask};
use thinkus_backends::sql::{JobRecord, JobStatus, JobStore};
use thinkus_common::model::{
    ControlDecision, Language, MemoryType, Message, NeedMemory, Owner, QueryEmbedding, RetrievalMode, Scope, TimeRange,
    Visibility, turn_line,
};
use thinkus_common::text::detect_language;
use thinkus_common::tokens::TokenCounter;
use thinkus_common::{ApiError, ErrorCode};
use thinkus_knowledge_manager::KnowledgeApi;
use thinkus_knowledge_manager::api::{Erasure, IngestTurnsRequest, LearnRequest, Turn, ValueChange};
use thinkus_knowledge_manager::changes::{Replaced, strike};
use thinkus_knowledge_manager::turns::extracted_ids;
use thinkus_memory_controller::api::DecideRequest;
use thinkus_memory_controller::rules::Signal;
use thinkus_memory_controller::{ControllerApi, ControllerConfig, MemoryController};
use thinkus_retriever::RetrieverApi;
use thinkus_retriever::api::{CatalogEntry, RecallRequest, RecallResult, ScoreParts};
use tracing::Instrument;

use crate::api::{
    CompleteRequest, Completed, ConverseRequest, Conversed, GatewayApi, JobsRequest, LearnReport, PrepareRequest,
    Prepared, Refusal, SectionKind, ToolCallResult, TraceItem, TraceKind,
};
use crate::config::GatewayConfig;
use crate::context::{Day, Entry, Packed, excerpt, pack, room_in_section};
use crate::extras::{ArtifactPort, SummaryPort};

/// The longest message a turn may carry.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;
/// Tool outputs up to this size have their tokens counted exactly; larger ones are estimated.
pub const EXACT_COUNT_BYTES: usize = 1024 * 1024;
/// Tool outputs up to this size are counted inline: less than a millisecond of CPU.
const INLINE_COUNT_BYTES: usize = 8 * 1024;
/// The smallest and largest budgets a caller may ask for.
pub const BUDGET_RANGE: std::ops::RangeInclusive<u32> = 100..=32_000;

/// The kinds of background jobs.
pub const LEARN_JOB: &str = "learn";
pub const SUMMARIZE_JOB: &str = "summarize";

/// The services the gateway calls.
#[derive(Clone)]
pub struct Upstreams {
    pub controller: Arc<dyn ControllerApi>,
    pub retriever: Arc<dyn RetrieverApi>,
    pub knowledge: Arc<dyn KnowledgeApi>,
    pub artifacts: Option<Arc<dyn ArtifactPort>>,
    pub summaries: Option<Arc<dyn SummaryPort>>,
    /// Embeds each user message once for the controller and the retriever; without it the
    /// retriever embeds the message itself.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The artifact and summary services themselves, for the REST routes that expose them
    /// (`crate::rest_records`).
    pub artifact_api: Option<Arc<dyn thinkus_artifact::ArtifactApi>>,
    pub summary_api: Option<Arc<dyn thinkus_summary::SummaryApi>>,
    /// Where each upstream answers, to name it in errors and in the trace.
    pub addresses: UpstreamAddresses,
}

/// Where each upstream of the gateway answers: its endpoint, or "in process".
#[derive(Debug, Clone)]
pub struct UpstreamAddresses {
    pub controller: String,
    pub retriever: String,
    pub knowledge: String,
    pub artifacts: String,
    pub summaries: String,
}

impl Default for UpstreamAddresses {
    fn default() -> Self {
        let local = || "in process".to_string();
        Self {
            controller: local(),
            retriever: local(),
            knowledge: local(),
            artifacts: local(),
            summaries: local(),
        }
    }
}

/// An upstream's error, naming the upstream and where it answers ("retriever
/// (http://retriever:50051): tcp connect error"), with its code kept.
fn upstream_error(name: &str, address: &str, error: ApiError) -> ApiError {
    ApiError {
        message: format!("{name} ({address}): {}", error.message),
        ..error
    }
}

/// Whether an upstream's error is its own failure (down, slow, broken), not the request's.
fn is_outage(error: &ApiError) -> bool {
    matches!(
        error.code,
        ErrorCode::Unavailable
            | ErrorCode::Timeout
            | ErrorCode::Internal
            | ErrorCode::ResourceExhausted
            | ErrorCode::Unimplemented
    )
}

/// The answer of an optional upstream: its value, or, when the upstream itself failed, none
/// and the trace's note naming it, where it answers, what failed and what the turn does
/// without it (`instead`). An error of the request stays an error, naming the upstream.
fn optional<T>(
    name: &str,
    address: &str,
    answer: Result<T, ApiError>,
    instead: &str,
) -> Result<(Option<T>, Option<String>), ApiError> {
    match answer {
        Ok(value) => Ok((Some(value), None)),
        Err(err) if is_outage(&err) => {
            tracing::warn!(%err, upstream = name, address, "an optional upstream failed: {instead}");
            Ok((
                None,
                Some(format!("{name} ({address}) failed: {}; {instead}", err.message)),
            ))
        }
        Err(err) => Err(upstream_error(name, address, err)),
    }
}

/// The gateway.
pub struct Gateway {
    pub(crate) config: GatewayConfig,
    pub(crate) upstreams: Upstreams,
    pub(crate) jobs: Arc<dyn JobStore>,
    pub(crate) tokens: TokenCounter,
    pub(crate) llm: Option<Arc<dyn LanguageModel>>,
    /// Recent PrepareTurn traces for the memory page (`crate::traces`), when it is served.
    pub(crate) traces: Option<crate::traces::TraceLog>,
    /// Decides with the built-in rules while the memory controller is down.
    fallback: MemoryController,
}

/// The input of a "learn" job: one exchange to extract memories from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LearnJob {
    pub scope: Scope,
    pub user_message: String,
    pub assistant_message: String,
    pub occurred_at: DateTime<Utc>,
    pub not_memorable: bool,
    pub request_id: Option<String>,
    pub injected_memory_ids: Vec<String>,
    /// The trace of the CompleteTurn that queued it: the job's spans continue that trace.
    #[serde(default)]
    pub traceparent: Option<String>,
}

/// The input of a "summarize" job: messages to add to the session's trajectory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummarizeJob {
    pub scope: Scope,
    pub messages: Vec<Message>,
    /// The messages end the session: it is ended once they are recorded.
    #[serde(default)]
    pub end_session: bool,
    #[serde(default)]
    pub traceparent: Option<String>,
}

fn require(value: &str, field: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(field, "is required"));
    }
    Ok(())
}

fn check_scope(scope: &Scope) -> Result<(), ApiError> {
    require(&scope.user_id, "scope.user_id")?;
    require(&scope.role_id, "scope.role_id")?;
    require(scope.session_id.as_deref().unwrap_or(""), "scope.session_id")
}

fn check_message(message: &str, field: &str) -> Result<(), ApiError> {
    require(message, field)?;
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("is {} bytes, more than {MAX_MESSAGE_BYTES}", message.len()),
        ));
    }
    Ok(())
}

fn millis(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

impl Gateway {
    pub fn new(
        config: GatewayConfig,
        upstreams: Upstreams,
        jobs: Arc<dyn JobStore>,
        tokens: TokenCounter,
        llm: Option<Arc<dyn LanguageModel>>,
    ) -> Self {
        Self {
            config,
            upstreams,
            jobs,
            tokens,
            llm,
            traces: None,
            fallback: MemoryController::new(ControllerConfig::default(), RuleEngine::new(), None),
        }
    }

    /// Keeps recent PrepareTurn traces (for the memory page).
    pub fn with_trace_log(mut self, traces: crate::traces::TraceLog) -> Self {
        self.traces = Some(traces);
        self
    }

    /// The recent traces, when they are kept.
    pub fn traces(&self) -> Option<&crate::traces::TraceLog> {
        self.traces.as_ref()
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// The services the gateway calls.
    pub fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    fn budget(&self, asked: Option<u32>) -> Result<u32, ApiError> {
        match asked {
            None | Some(0) => Ok(self.config.default_budget_tokens),
            Some(budget) if BUDGET_RANGE.contains(&budget) && budget <= self.config.max_budget_tokens => Ok(budget),
            Some(budget) => Err(ApiError::invalid(
                "budget_tokens",
                format!(
                    "{budget} is outside {}..={}",
                    BUDGET_RANGE.start(),
                    self.config.max_budget_tokens.min(*BUDGET_RANGE.end())
                ),
            )),
        }
    }

    /// The message's embedding, computed once per turn as a search query; `None` without an
    /// embedder, or when it fails (the retriever then embeds the message itself, and reports
    /// the failure if it fails too).
    async fn embed_message(&self, message: &str) -> Option<QueryEmbedding> {
        let embedder = self.upstreams.embedder.as_ref()?;
        let model = embedder.name();
        match embedder
            .embed_query(message)
            .instrument(tracing::info_span!("embed.query", embedder = %model))
            .await
        {
            Ok(values) => Some(QueryEmbedding { model, values }),
            Err(err) => {
                tracing::warn!(%err, "the message was not embedded in the gateway; the retriever embeds it");
                None
            }
        }
    }

    /// Prepares the context of one turn.
    ///
    /// The message is embedded once, then decided on with its vector (for a controller that
    /// reads it); meanwhile the last session's summary and the session's artifacts are looked
    /// up. The recall comes last, searching with the same vector: its budget is what the
    /// summary and artifacts leave, and by then the embedding, the costly part, is done.
    pub async fn prepare(&self, request: PrepareRequest) -> Result<Prepared, ApiError> {
        check_scope(&request.scope)?;
        check_message(&request.message, "message")?;
        let budget = self.budget(request.budget_tokens)?;
        let now = request.now.unwrap_or_else(Utc::now);
        let language = detect_language(&request.message);
        let mut timings = BTreeMap::new();

        let addresses = &self.upstreams.addresses;
        let understand = async {
            let started = Instant::now();
            let embedding = self.embed_message(&request.message).await;
            let embedded = embedding.as_ref().map(|_| millis(started));
            let started = Instant::now();
            let ask = DecideRequest {
                scope: request.scope.clone(),
                message: request.message.clone(),
                message_count: request.recent_messages.len() as u32,
                recent_messages: request.recent_messages.clone(),
                now: Some(now),
                query_embedding: embedding.clone(),
                ..Default::default()
            };
            // The controller is optional: while it is down, the built-in rules decide.
            let (decision, note) = optional(
                "memory-controller",
                &addresses.controller,
                self.upstreams.controller.decide(ask.clone()).await,
                "decided by the built-in rules",
            )?;
            let decision = match decision {
                Some(decision) => decision,
                None => self.fallback.decide(ask).await?,
            };
            Ok::<_, ApiError>((embedding, embedded, decision, millis(started), note))
        };
        // The last session and the artifacts are gathered before the recall: the memories get
        // what they leave. Both are optional: while one is down, its section is left out.
        let session_start = request.recent_messages.is_empty();
        let last_cap = (budget as f64 * self.config.last_session_share) as u32;
        // The summary is rendered to what its section leaves once headed, so that it is never
        // left out for its own size.
        let last_room = room_in_section(SectionKind::LastSession, last_cap, language, &self.tokens);
        let last_session = async {
            match &self.upstreams.summaries {
                Some(summaries) if session_start => {
                    let started = Instant::now();
                    let last = summaries.last_summary(&request.scope, last_room, language, now).await;
                    optional(
                        "summary",
                        &addresses.summaries,
                        last.map(|last| (last, millis(started))),
                        "no last-session section",
                    )
                }
                _ => Ok::<_, ApiError>((None, None)),
            }
        };
        let artifacts_cap = (budget as f64 * self.config.artifacts_share) as u32;
        let artifacts = async {
            match &self.upstreams.artifacts {
                Some(artifacts) => {
                    let started = Instant::now();
                    let relevant = artifacts
                        .relevant(
                            &request.scope,
                            &request.message,
                            self.config.artifacts_considered,
                            language,
                        )
                        .await;
                    optional(
                        "artifact",
                        &addresses.artifacts,
                        relevant.map(|relevant| (relevant, millis(started))),
                        "no artifact section",
                    )
                }
                None => Ok::<_, ApiError>((None, None)),
            }
        };
        // What was replaced since, so that nothing below shows an old value as current.
        let changes = async {
            let started = Instant::now();
            let changes = self
                .value_changes(&request.scope)
                .await
                .map_err(|err| upstream_error("knowledge-manager", &addresses.knowledge, err))?;
            Ok::<_, ApiError>((changes, millis(started)))
        };
        // The standing rules, profile and pending conflicts: in every context.
        let standing = async {
            if self.config.standing_share <= 0.0 {
                return Ok::<_, ApiError>(None);
            }
            let started = Instant::now();
            let standing = self
                .upstreams
                .knowledge
                .standing(request.scope.clone(), self.config.standing_considered.max(1))
                .await
                .map_err(|err| upstream_error("knowledge-manager", &addresses.knowledge, err))?;
            Ok(Some((standing, millis(started))))
        };
        let (
            (embedding, embedded, mut decision, decided, controller_note),
            (last_session, summary_note),
            (artifacts, artifacts_note),
            (said_changes, changes_took),
            standing,
        ) = tokio::try_join!(understand, last_session, artifacts, changes, standing)?;
        let changes: Vec<Replaced> = said_changes
            .iter()
            .map(|c| Replaced {
                old: c.old.clone(),
                new: c.new.clone(),
                at: c.at,
            })
            .collect();
        let degraded: Vec<String> = [controller_note, summary_note, artifacts_note]
            .into_iter()
            .flatten()
            .collect();
        timings.insert("changes".to_string(), changes_took);
        if let Some(embedded) = embedded {
            timings.insert("embedding".to_string(), embedded);
        }
        timings.insert("controller".to_string(), decided);

        let shown = Shown {
            language,
            now,
            changes: &changes,
            query: thinkus_common::text::term_set(&request.message),
            entry_cap: self.config.entry_cap_tokens,
            context_line_max_tokens: self.config.context_line_max_tokens,
            tokens: &self.tokens,
        };
        let mut items: Vec<TraceItem> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut reserved = 0u32;
        let mut standing_ids: std::collections::HashSet<String> = Default::default();
        if let Some((standing, took)) = standing {
            let cap = (budget as f64 * self.config.standing_share) as u32;
            let mut used = 0u32;
            let (rule, profile) = match language {
                Language::Zh => ("长期规则（每次都带上）", "用户画像（每次都带上）"),
                Language::En => ("standing rule (in every context)", "profile (in every context)"),
            };
            let conflict = match language {
                Language::Zh => "待用户确认的冲突",
                Language::En => "a conflict waiting for the user",
            };
            let memories: Vec<_> = standing
                .rules
                .iter()
                .map(|m| (m, rule))
                .chain(standing.profile.iter().map(|m| (m, profile)))
                .collect();
            standing_ids.extend(memories.iter().map(|(memory, _)| memory.id.clone()));
            // (trace id, confidence, why, the line), rules and profile first, then the conflicts
            // as their questions ("budget: $500 or $800? unconfirmed").
            let lines = memories
                .into_iter()
                .map(|(memory, reason)| {
                    let text = strike(
                        &memory_line(None, memory.content.trim()),
                        memory.occurred_at,
                        &changes,
                        language,
                    );
                    (memory.id.clone(), memory.confidence, reason, text)
                })
                .chain(
                    standing
                        .conflicts
                        .iter()
                        .map(|c| (c.id.clone(), 0.0, conflict, format!("- {}", c.question))),
                );
            for (id, confidence, reason, text) in lines {
                let tokens = self.tokens.count(&text) as u32;
                used += tokens;
                items.push(TraceItem {
                    kind: TraceKind::Memory,
                    id,
                    score: 0.0,
                    confidence,
                    reason: reason.to_string(),
                    included: false,
                    parts: None,
                    tokens,
                });
                entries.push(Entry {
                    kind: SectionKind::Standing,
                    text,
                    trace: items.len() - 1,
                    section_cap: Some(cap),
                    ..Default::default()
                });
            }
            reserved += used.min(cap);
            timings.insert("standing".to_string(), took);
        }
        if let Some((last, took)) = last_session {
            if let Some(mut last) = last {
                let said_at = summary_said_at(&said_changes, &last.session_id, last.at);
                let summary = strike(&as_section_text(&last.text), said_at, &changes, language);
                last.text = with_changes_said(
                    &summary,
                    &changed_in(&said_changes, &last.session_id, &summary, &changes, language),
                    language,
                    last_room,
                    &self.tokens,
                );
                let tokens = self.tokens.count(&last.text) as u32;
                items.push(TraceItem {
                    kind: TraceKind::Summary,
                    id: last.id.clone(),
                    score: 0.0,
                    confidence: 0.0,
                    reason: match language {
                        Language::Zh => format!("新会话开始，附上项目上次会话（{}）的摘要", last.session_id),
                        Language::En => format!(
                            "a new session starts: the project's last session ({}) summary",
                            last.session_id
                        ),
                    },
                    included: false,
                    parts: None,
                    tokens,
                });
                entries.push(Entry {
                    kind: SectionKind::LastSession,
                    text: last.text,
                    trace: items.len() - 1,
                    section_cap: Some(last_cap),
                    ..Default::default()
                });
                reserved += tokens.min(last_cap);
            }
            timings.insert("summary".to_string(), took);
        }
        // Artifacts sharing too few of the message's words to be about it (left out, with why).
        let mut weak_artifacts = Vec::new();
        if let Some((relevant, took)) = artifacts {
            let mut artifact_tokens = 0;
            for found in relevant {
                let tokens = self.tokens.count(&found.text) as u32;
                items.push(TraceItem {
                    kind: TraceKind::Artifact,
                    id: found.id,
                    score: found.score,
                    confidence: 0.0,
                    reason: found.reason,
                    included: false,
                    parts: None,
                    tokens,
                });
                if found.score < self.config.artifact_min_overlap {
                    weak_artifacts.push(items.len() - 1);
                    continue;
                }
                artifact_tokens += tokens;
                entries.push(Entry {
                    kind: SectionKind::Artifacts,
                    text: found.text,
                    trace: items.len() - 1,
                    section_cap: Some(artifacts_cap),
                    ..Default::default()
                });
            }
            reserved += artifact_tokens.min(artifacts_cap);
            timings.insert("artifacts".to_string(), took);
        }

        // The safety net under the controller's "no": a cheap catalog recall, kept only
        // where a memory matches the message strongly, in meaning and in words.
        let mut glance = None;
        if decision.need_memory == NeedMemory::No
            && self.config.probe_entries > 0
            && !thinkus_common::text::term_set(&request.message).is_empty()
        {
            let started = Instant::now();
            let probe = RecallRequest {
                scope: request.scope.clone(),
                query: request.message.clone(),
                mode: RetrievalMode::Catalog,
                time_range: Some(TimeRange::All),
                budget_tokens: Some(
                    self.config
                        .probe_budget_tokens
                        .clamp(*BUDGET_RANGE.start(), *BUDGET_RANGE.end()),
                ),
                language: Some(language),
                now: Some(now),
                query_embedding: embedding.clone(),
                ..Default::default()
            };
            let mut probed = self.recall(probe).await?;
            timings.insert("probe".to_string(), millis(started));
            let min = self.config.probe_min_similarity;
            probed
                .catalog
                .retain(|e| e.score.dense_similarity >= min && e.score.keyword_score > 0.0);
            probed.catalog.truncate(self.config.probe_entries);
            let outcome = if probed.catalog.is_empty() { "miss" } else { "hit" };
            thinkus_common::metrics::METRICS
                .catalog_probes
                .with_label_values(&[outcome])
                .inc();
            if let Some(best) = probed.catalog.first() {
                let similarity = best.score.dense_similarity;
                decision.need_memory = NeedMemory::Maybe;
                // A task that brings nothing to work on ("write the invite for Aiko", "帮我写个
                // 进展周报") takes its material from what was said before, which the memory
                // that matched it only points at: recalled in detail, as an unsure need.
                let task_without_material = decision.signals.first().map(String::as_str)
                    == Some(Signal::SelfContainedTask.as_str())
                    && !brings_material(&request.message);
                let (zh, en) = if task_without_material {
                    decision.retrieval_mode = RetrievalMode::Details;
                    decision.budget_tokens = self.config.probe_task_budget_tokens;
                    (
                        "，任务要用的材料消息里没有，按细节检索",
                        "; the task brings no material of its own: recalled in detail",
                    )
                } else {
                    ("，附上", ": included")
                };
                decision.reason = match language {
                    Language::Zh => format!(
                        "{}；但记忆目录里有强匹配（语义相似度{similarity:.2}，且有共同词）{zh}",
                        decision.reason
                    ),
                    Language::En => format!(
                        "{}; but the memory catalog holds a strong match (similarity {similarity:.2}, shared words){en}",
                        decision.reason
                    ),
                };
                if !task_without_material {
                    probed.details.clear();
                    probed.mode = RetrievalMode::Catalog;
                    glance = Some(probed);
                }
            }
        }

        let mut memory_budget = 0;
        if let Some(probed) = glance {
            memory_budget = self.config.probe_budget_tokens.min(budget.saturating_sub(reserved));
            memory_entries(&probed, &decision, &shown, &mut items, &mut entries);
        } else if decision.need_memory != NeedMemory::No {
            let started = Instant::now();
            memory_budget = decision
                .budget_tokens
                .max(1)
                .min(budget.saturating_sub(reserved).max(budget / 2));
            // The retriever counts its budget in its own, longer rendering (numbers, types,
            // headings): asked for twice the memory budget, it offers enough entries for the
            // gateway to fill the memory budget in the context's rendering.
            let offered_budget = memory_budget.saturating_mul(2).min(*BUDGET_RANGE.end());
            // The controller's types narrow the curated memories (decisions, constraints...);
            // the conversation itself stays eligible, since what was said is often all there
            // is ("what career has Caroline decided on?" names a decision no memory was
            // extracted for). Turns that stated a value a later memory replaced are replaced
            // with it (knowledge manager), so they stay out of sight like the memory.
            let mut types = decision.memory_types.clone();
            if !types.is_empty() && !types.contains(&MemoryType::ConversationTurn) {
                types.push(MemoryType::ConversationTurn);
            }
            let mut recall = RecallRequest {
                scope: request.scope.clone(),
                query: request.message.clone(),
                mode: decision.retrieval_mode,
                types,
                time_range: Some(decision.time_range),
                budget_tokens: Some(offered_budget),
                language: Some(language),
                now: Some(now),
                query_embedding: embedding,
                ..Default::default()
            };
            let mut recalled = self.recall(recall.clone()).await?;
            // The time range is the controller's reading of the message ("in June", "in
            // 2010"). When nothing was recorded in it, what the message asks about was told at
            // another time (a June of another year, a trip told of years later): the whole
            // history is searched instead, and the decision's reason says so.
            if recalled.catalog.is_empty() && decision.time_range != TimeRange::All {
                let range = decision.time_range.label();
                recall.time_range = Some(TimeRange::All);
                recalled = self.recall(recall).await?;
                decision.reason = match language {
                    Language::Zh => format!("{}；{range} 内没有记录，改为检索全部历史", decision.reason),
                    Language::En => format!("{}; nothing recorded in {range}: searched all time", decision.reason),
                };
            }
            timings.insert("retriever".to_string(), millis(started));
            memory_entries(&recalled, &decision, &shown, &mut items, &mut entries);
        }

        // A recalled memory far less relevant than the best one is noise for this message,
        // however much budget is left: the context stays lean.
        let mut left_out: BTreeMap<usize, (&str, &str)> =
            below_relevance_floor(&items, &entries, self.config.relevance_floor)
                .into_iter()
                .map(|trace| {
                    (
                        trace,
                        ("远不如最相关的记忆相关", "far less relevant than the best memory"),
                    )
                })
                .collect();
        // Each thing is said once: what the last session's summary already says, and a standing
        // memory recalled again (it stands among the standing ones), are left out, with why.
        for trace in repeated_in_last_session(&entries) {
            left_out.insert(trace, ("上次会话摘要里已有", "the last session's summary says it"));
        }
        for trace in weak_artifacts {
            left_out.insert(trace, ("低于产物的最低重合度", "below the artifacts' least overlap"));
        }
        for entry in entries.iter().filter(|e| e.kind != SectionKind::Standing) {
            if standing_ids.contains(&items[entry.trace].id) {
                left_out.insert(
                    entry.trace,
                    ("已在长期规则与偏好中", "it stands among the standing rules"),
                );
            }
        }
        entries.retain(|e| !left_out.contains_key(&e.trace));
        let mut packed = pack(&entries, budget, memory_budget, language, &self.tokens);
        // The other way round: what a memory shown above says in full is left out of the last
        // session's section.
        let repack = |kept: &[Entry]| pack(kept, budget, memory_budget, language, &self.tokens);
        if let Some(trimmed) = trim_last_session(&entries, &packed, repack) {
            if trimmed.emptied {
                left_out.insert(
                    trimmed.trace,
                    ("上面的记忆已说了它的每一项", "the memories above say each of its items"),
                );
            } else {
                let item = &mut items[trimmed.trace];
                let dropped = trimmed.dropped;
                item.reason = match language {
                    Language::Zh => format!("{}；其中{dropped}项上面的记忆已经说了，略去", item.reason),
                    Language::En => format!(
                        "{}; {dropped} of its items left out, a memory above says them",
                        item.reason
                    ),
                };
            }
            packed = trimmed.packed;
        }
        for (trace, tokens) in &packed.included {
            items[*trace].included = true;
            items[*trace].tokens = *tokens;
        }
        for (trace, item) in items.iter_mut().enumerate().filter(|(_, i)| !i.included) {
            let (zh, en) = left_out.get(&trace).copied().unwrap_or(("超出预算", "over budget"));
            item.reason = match language {
                Language::Zh => format!("{}（{zh}，未放入）", item.reason),
                Language::En => format!("{} (left out: {en})", item.reason),
            };
        }
        Ok(Prepared {
            context: packed.context,
            sections: packed.sections,
            tokens_used: packed.tokens,
            budget_tokens: budget,
            decision,
            items,
            timings_ms: timings,
            degraded,
        })
    }

    /// A recall by the retriever, its errors naming it.
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError> {
        self.upstreams
            .retriever
            .recall(request)
            .await
            .map_err(|err| upstream_error("retriever", &self.upstreams.addresses.retriever, err))
    }

    /// The values replaced in what the reader of `scope` may see, so that an older record
    /// shows its old values as replaced (`~~$500~~ (now $800, since 3 Nov)`).
    async fn value_changes(&self, scope: &Scope) -> Result<Vec<ValueChange>, ApiError> {
        self.upstreams
            .knowledge
            .value_changes(scope.clone(), self.config.value_changes_considered)
            .await
    }

    /// The tokens of a tool output: counted exactly up to [`EXACT_COUNT_BYTES`] on the CPU
    /// pool (`thinkus_common::work`), estimated at four bytes a token beyond, where only the
    /// decision to offload depends on it (a 15 MB output once took seconds of CPU to count).
    async fn tool_output_tokens(&self, output: &str) -> Result<u32, ApiError> {
        if output.len() > EXACT_COUNT_BYTES {
            return Ok(u32::try_from(output.len() / 4).unwrap_or(u32::MAX));
        }
        if output.len() <= INLINE_COUNT_BYTES {
            return Ok(self.tokens.count(output) as u32);
        }
        let tokens = self.tokens;
        let output = output.to_string();
        thinkus_common::work::cpu("token count", move || tokens.count(&output) as u32).await
    }

    /// Completes a turn: offloads large tool outputs, queues learning and the summary update.
    /// The request's messages and tool outputs are moved along, not copied: an output goes to
    /// the artifact service or back as its own replacement, the messages into the learn job
    /// and from there into the summary's.
    pub async fn complete(&self, mut request: CompleteRequest) -> Result<Completed, ApiError> {
        check_scope(&request.scope)?;
        check_message(&request.user_message, "user_message")?;
        if request.assistant_message.len() > 4 * MAX_MESSAGE_BYTES {
            return Err(ApiError::invalid("assistant_message", "is more than 128 KiB"));
        }
        for (i, call) in request.tool_calls.iter().enumerate() {
            require(&call.id, &format!("tool_calls[{i}].id"))?;
        }
        if let Some(id) = &request.request_id
            && (id.len() > 128 || id.chars().any(|c| c.is_control()))
        {
            return Err(ApiError::invalid(
                "request_id",
                "must be at most 128 printable characters",
            ));
        }
        let occurred_at = request.occurred_at.unwrap_or_else(Utc::now);

        let tool_calls = std::mem::take(&mut request.tool_calls);
        let mut results = Vec::with_capacity(tool_calls.len());
        for call in tool_calls {
            let original_tokens = self.tool_output_tokens(&call.output).await?;
            let offload = original_tokens > self.config.offload_threshold_tokens;
            match (&self.upstreams.artifacts, offload) {
                (Some(artifacts), true) => {
                    let id = call.id.clone();
                    let stored = artifacts.store_tool_output(&request.scope, call).await?;
                    results.push(ToolCallResult {
                        id,
                        offloaded: true,
                        artifact_id: Some(stored.artifact_id),
                        replacement: stored.compact.rendered.clone(),
                        compact: Some(stored.compact),
                        original_tokens,
                    });
                }
                _ => results.push(ToolCallResult {
                    id: call.id,
                    offloaded: false,
                    artifact_id: None,
                    compact: None,
                    replacement: call.output,
                    original_tokens,
                }),
            }
        }

        let mut job_ids = Vec::new();
        // The default tenant's keys are those written before tenancy, so a retry across the
        // upgrade still finds its job.
        let dedupe = |kind: &str| {
            request.request_id.as_ref().map(|id| {
                if request.scope.tenant_id == thinkus_common::model::DEFAULT_TENANT {
                    format!("{kind}:{}:{id}", request.scope.user_id)
                } else {
                    format!("{kind}:{}\u{1f}{}:{id}", request.scope.tenant_id, request.scope.user_id)
                }
            })
        };
        let learn = LearnJob {
            scope: request.scope.clone(),
            user_message: request.user_message,
            assistant_message: request.assistant_message,
            occurred_at,
            not_memorable: request.not_memorable,
            request_id: request.request_id.clone(),
            injected_memory_ids: request.injected_memory_ids,
            traceparent: thinkus_common::telemetry::current_traceparent(),
        };
        job_ids.push(
            self.enqueue(LEARN_JOB, &request.scope, &learn, dedupe(LEARN_JOB))
                .await?,
        );
        // An exchange that must not be remembered is not summarised either: the summary offers
        // its decisions to the knowledge manager, which would remember them.
        if self.upstreams.summaries.is_some() && !request.not_memorable {
            let mut assistant = learn.assistant_message;
            for result in results.iter().filter(|r| r.offloaded) {
                assistant.push_str("\n\n");
                assistant.push_str(&result.replacement);
            }
            let message = |role: &str, content: String| Message {
                role: role.to_string(),
                content,
                speaker: None,
                created_at: occurred_at,
                index: 0,
            };
            // A turn without an answer (a user message on its own) adds only that message.
            let mut messages = vec![message("user", learn.user_message)];
            if !assistant.trim().is_empty() {
                messages.push(message("assistant", assistant));
            }
            let summarize = SummarizeJob {
                scope: request.scope.clone(),
                messages,
                end_session: request.end_session,
                traceparent: thinkus_common::telemetry::current_traceparent(),
            };
            job_ids.push(
                self.enqueue(SUMMARIZE_JOB, &request.scope, &summarize, dedupe(SUMMARIZE_JOB))
                    .await?,
            );
        }
        let learning = if request.wait_for_learning {
            Some(self.wait_for_job(&job_ids[0]).await?)
        } else {
            None
        };
        Ok(Completed {
            tool_calls: results,
            job_ids,
            learning,
        })
    }

    /// The job once it finished, or as it stands after `gateway.learn_wait_ms`.
    async fn wait_for_job(&self, id: &str) -> Result<JobRecord, ApiError> {
        let deadline = Instant::now() + std::time::Duration::from_millis(self.config.learn_wait_ms);
        let pause = std::time::Duration::from_millis(self.config.poll_interval_ms.clamp(10, 200));
        loop {
            let job = self
                .jobs
                .get_job(id)
                .await?
                .ok_or_else(|| ApiError::internal(format!("the queued job {id} vanished")))?;
            let finished = matches!(job.status, JobStatus::Succeeded | JobStatus::Failed);
            if finished || Instant::now() >= deadline {
                return Ok(job);
            }
            tokio::time::sleep(pause).await;
        }
    }

    async fn enqueue<T: Serialize>(
        &self,
        kind: &str,
        scope: &Scope,
        payload: &T,
        dedupe_key: Option<String>,
    ) -> Result<String, ApiError> {
        let now = Utc::now();
        let payload = serde_json::to_string(payload).map_err(|err| ApiError::internal(err.to_string()))?;
        // A retried request (same dedupe key) finds its job whatever became of it: the job id is
        // derived from the key, so a finished job is not queued again.
        let id = match &dedupe_key {
            Some(key) => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(key.as_bytes());
                let id = format!("job_{}", hex::encode(&digest[..16]));
                if let Some(existing) = self.jobs.get_job(&id).await? {
                    return Ok(existing.id);
                }
                id
            }
            None => thinkus_common::ids::new_id(thinkus_common::ids::IdKind::Job),
        };
        let job = JobRecord {
            id: id.clone(),
            kind: kind.to_string(),
            tenant_id: scope.tenant_id.clone(),
            user_id: scope.user_id.clone(),
            session_id: scope.session_id.clone(),
            payload,
            status: JobStatus::Pending,
            attempts: 0,
            max_attempts: self.config.max_attempts,
            last_error: None,
            run_after: now,
            lease_until: None,
            dedupe_key,
            created_at: now,
            updated_at: now,
            result: None,
        };
        match self.jobs.enqueue(&job).await {
            Ok(queued) => Ok(queued),
            // A concurrent retry of the same request won the insert.
            Err(err) => match self.jobs.get_job(&id).await? {
                Some(existing) if job.dedupe_key.is_some() => Ok(existing.id),
                _ => Err(err.into()),
            },
        }
    }

    /// Runs one job's work, in a span that continues the trace of the turn that queued it.
    /// Returns what it did, to store with the job (a learn job's [`LearnReport`]).
    pub(crate) async fn run_job(&self, job: &JobRecord) -> Result<Option<String>, ApiError> {
        #[derive(Deserialize)]
        struct Traced {
            traceparent: Option<String>,
        }
        let span = tracing::info_span!("job.run", otel.name = format!("job {}", job.kind), job.id = %job.id, job.kind = %job.kind, job.attempt = job.attempts);
        let parent = serde_json::from_str::<Traced>(&job.payload)
            .ok()
            .and_then(|t| t.traceparent);
        thinkus_common::telemetry::continue_trace(&span, parent.as_deref());
        self.run_job_inner(job).instrument(span).await
    }

    async fn run_job_inner(&self, job: &JobRecord) -> Result<Option<String>, ApiError> {
        match job.kind.as_str() {
            LEARN_JOB => {
                let input: LearnJob = serde_json::from_str(&job.payload)
                    .map_err(|err| ApiError::invalid("payload", format!("not a learn job: {err}")))?;
                let report = self.learn(input, &job.id).await?;
                Ok(Some(
                    serde_json::to_string(&report).map_err(|err| ApiError::internal(err.to_string()))?,
                ))
            }
            SUMMARIZE_JOB => {
                let input: SummarizeJob = serde_json::from_str(&job.payload)
                    .map_err(|err| ApiError::invalid("payload", format!("not a summarize job: {err}")))?;
                match &self.upstreams.summaries {
                    Some(summaries) => {
                        summaries.record(&input.scope, input.messages, Some(&job.id)).await?;
                        if input.end_session {
                            summaries.end(&input.scope).await?;
                        }
                        Ok(None)
                    }
                    None => Err(ApiError::failed_precondition(
                        "endpoints.summary: no summary service is reachable from the gateway",
                    )),
                }
            }
            other => Err(ApiError::invalid("kind", format!("unknown job kind {other:?}"))),
        }
    }

    /// Extracts memories from the exchange, then stores it as raw turns (recallable word for
    /// word) that see no further than those memories: a turn outside any project, or one whose
    /// exchange taught a memory private to the role, is private to the role; otherwise it is
    /// shared with the project, like the project's decisions. Each turn names the memories
    /// learned from its exchange when they hold what it says ([`stand_ins`]), so a context
    /// shows one or the other.
    /// Returns what the extraction did, refusals included. The writes name the job: once an
    /// erasure of the user deleted it, the knowledge manager refuses them.
    async fn learn(&self, input: LearnJob, job_id: &str) -> Result<LearnReport, ApiError> {
        if input.not_memorable {
            return Ok(LearnReport::default());
        }
        // The answer follows the question: one millisecond later, so that the two turns of an
        // exchange read in the order they were said.
        let answered_at = input.occurred_at + chrono::Duration::milliseconds(1);
        let message = |role: &str, content: &str, index: u32, at: DateTime<Utc>| Message {
            role: role.to_string(),
            content: content.to_string(),
            speaker: None,
            created_at: at,
            index,
        };
        let learned = self
            .upstreams
            .knowledge
            .learn(LearnRequest {
                scope: input.scope.clone(),
                messages: vec![
                    message("user", &input.user_message, 0, input.occurred_at),
                    message("assistant", &input.assistant_message, 1, answered_at),
                ],
                request_id: input.request_id.clone(),
                // Ids: the knowledge manager reads them and compares the contents.
                injected_memories: input.injected_memory_ids.clone(),
                job_id: Some(job_id.to_string()),
                ..Default::default()
            })
            .await?;
        let memories: Vec<&thinkus_common::model::Memory> =
            learned.results.iter().filter_map(|r| r.memory.as_ref()).collect();
        let visibility = turn_visibility(&input.scope, memories.iter().map(|m| m.visibility));
        let turn_id = |speaker: &str| input.request_id.as_ref().map(|id| format!("{id}:{speaker}"));
        let mut turns = vec![Turn {
            speaker: "user".into(),
            text: input.user_message.clone(),
            occurred_at: Some(input.occurred_at),
            external_id: turn_id("user"),
            caption: None,
            extracted_memory_ids: stand_ins(&input.user_message, &memories),
        }];
        if !input.assistant_message.trim().is_empty() {
            turns.push(Turn {
                speaker: "assistant".into(),
                text: input.assistant_message.clone(),
                occurred_at: Some(answered_at),
                external_id: turn_id("assistant"),
                caption: None,
                extracted_memory_ids: stand_ins(&input.assistant_message, &memories),
            });
        }
        self.upstreams
            .knowledge
            .ingest_turns(IngestTurnsRequest {
                scope: input.scope.clone(),
                turns,
                visibility,
                job_id: Some(job_id.to_string()),
            })
            .await?;
        Ok(learn_report(&learned))
    }
}

#[async_trait]
impl GatewayApi for Gateway {
    /// Prepares a turn ([`Gateway::prepare`]) and, while the memory page is served, keeps its
    /// trace there: which memories the context used and why.
    async fn prepare_turn(&self, request: PrepareRequest) -> Result<Prepared, ApiError> {
        let Some(traces) = &self.traces else {
            return self.prepare(request).await;
        };
        let (scope, message, now) = (request.scope.clone(), request.message.clone(), request.now);
        let prepared = self.prepare(request).await?;
        traces.record(&scope, &message, now, &prepared);
        Ok(prepared)
    }

    async fn complete_turn(&self, request: CompleteRequest) -> Result<Completed, ApiError> {
        self.complete(request).await
    }

    /// Answers a message end to end with the configured LLM. The message goes three ways (the
    /// context, the LLM, the recorded exchange): two copies of it, not of the request.
    async fn converse(&self, request: ConverseRequest) -> Result<Conversed, ApiError> {
        let Some(llm) = self.llm.clone() else {
            return Err(ApiError::failed_precondition(
                "llm.uri: Converse needs a configured LLM (an OpenAI-compatible or Anthropic endpoint)",
            ));
        };
        let prepared = self
            .prepare_turn(PrepareRequest {
                scope: request.scope.clone(),
                message: request.message.clone(),
                budget_tokens: request.budget_tokens,
                recent_messages: Vec::new(),
                now: None,
            })
            .await?;
        let mut system = request
            .system_prompt
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| self.config.default_system_prompt.clone());
        if !prepared.context.is_empty() {
            system.push_str("\n\n# Context\n");
            system.push_str(&prepared.context);
        }
        let completion = llm
            .complete(CompletionRequest {
                system: Some(system),
                messages: vec![ChatMessage::user(request.message.clone())],
                max_tokens: 1024,
                temperature: 0.3,
                json: false,
                ..CompletionRequest::task(LlmTask::Converse, String::new(), serde_json::Value::Null)
            })
            .await
            .map_err(|err| ApiError::unavailable(format!("the LLM did not answer: {err}")))?;
        let injected = prepared
            .items
            .iter()
            .filter(|i| i.included && i.kind == TraceKind::Memory)
            .map(|i| i.id.clone())
            .collect();
        let completed = self
            .complete(CompleteRequest {
                scope: request.scope,
                user_message: request.message,
                assistant_message: completion.text.clone(),
                request_id: request.request_id,
                injected_memory_ids: injected,
                ..Default::default()
            })
            .await?;
        Ok(Conversed {
            reply: completion.text,
            prepared,
            completed,
        })
    }

    /// A user's jobs, newest first.
    async fn list_jobs(&self, request: JobsRequest) -> Result<Vec<JobRecord>, ApiError> {
        let scope = &request.scope;
        require(&scope.user_id, "scope.user_id")?;
        Ok(self
            .jobs
            .list_jobs(
                &scope.owner(),
                scope.session_id.as_deref(),
                request.status,
                request.limit,
                request.offset,
            )
            .await?)
    }

    async fn erase_user(&self, owner: Owner, actor: String) -> Result<Erasure, ApiError> {
        self.erase(&owner, &actor).await
    }
}

/// The visibility of a conversation turn: what the memories learned from it got, at most. A
/// turn outside any project is the role's own (as every memory learned there is); in a
/// project it is shared with the project unless its exchange taught something private.
pub(crate) fn turn_visibility(scope: &Scope, learned: impl IntoIterator<Item = Visibility>) -> Visibility {
    if scope.project_id.as_deref().is_none_or(str::is_empty) {
        return Visibility::Private;
    }
    if learned.into_iter().any(|v| v == Visibility::Private) {
        Visibility::Private
    } else {
        Visibility::Project
    }
}

/// The share of a turn's content terms that the memories learned from its exchange must hold
/// for the turn to give way to them in a context. A memory is often one clause of a turn ("glad
/// you bonded over nature" of a turn that goes on about a council meeting for adoption): a
/// turn that gave way to it would take the rest of what it said out of every context. The
/// margin under 1 is for what extraction words differently (a speaker's name, a pronoun).
pub(crate) const STAND_IN_COVERAGE: f64 = 0.8;

/// Whether `held` holds at least [`STAND_IN_COVERAGE`] of the content terms `said` (nothing
/// said is held).
fn holds_what_is_said(held: &std::collections::HashSet<String>, said: &std::collections::HashSet<String>) -> bool {
    let covered = said.iter().filter(|term| held.contains(*term)).count();
    covered as f64 >= STAND_IN_COVERAGE * said.len() as f64
}

/// The memories a turn gives way to in a context: those learned from its exchange, when
/// together they hold at least [`STAND_IN_COVERAGE`] of what the turn says (its content
/// terms); none otherwise, so the turn stays recallable beside them.
pub(crate) fn stand_ins(text: &str, learned: &[&thinkus_common::model::Memory]) -> Vec<String> {
    if learned.is_empty() {
        return Vec::new();
    }
    let said = thinkus_common::text::term_set(text);
    let held: std::collections::HashSet<String> = learned
        .iter()
        .flat_map(|m| {
            thinkus_common::text::term_set(&m.content)
                .into_iter()
                .chain(thinkus_common::text::term_set(&m.summary))
        })
        .collect();
    if holds_what_is_said(&held, &said) {
        learned.iter().map(|m| m.id.clone()).collect()
    } else {
        Vec::new()
    }
}

/// What learning did, as a job's result.
fn learn_report(learned: &thinkus_knowledge_manager::api::LearnResult) -> LearnReport {
    use thinkus_knowledge_manager::api::WriteOutcome;
    LearnReport {
        candidates: learned.candidates,
        written: learned.count(WriteOutcome::Created) + learned.count(WriteOutcome::ReplacedOlder),
        reinforced: learned.count(WriteOutcome::Reinforced),
        queued: learned.count(WriteOutcome::Queued),
        rejected: learned.count(WriteOutcome::Rejected),
        refused: learned.count(WriteOutcome::Refused),
        refusals: learned
            .results
            .iter()
            .filter(|r| r.outcome == WriteOutcome::Refused)
            .map(|r| Refusal {
                memory_type: r
                    .draft
                    .as_ref()
                    .map(|d| d.memory_type)
                    .unwrap_or(thinkus_common::model::MemoryType::Fact),
                summary: r.draft.as_ref().map(|d| d.summary.clone()).unwrap_or_default(),
                reason: r.reason.clone(),
            })
            .collect(),
    }
}

/// How recalled records are shown: in the reader's language and days, a long one cut to the
/// lines the message asks about ([`excerpt`]), values replaced since struck ([`strike`]).
struct Shown<'a> {
    language: Language,
    now: DateTime<Utc>,
    changes: &'a [Replaced],
    query: std::collections::HashSet<String>,
    entry_cap: u32,
    /// The longest turn shown with the turn before it ([`Shown::context_line`]).
    context_line_max_tokens: u32,
    tokens: &'a TokenCounter,
}

impl Shown<'_> {
    fn current(&self, text: &str, at: DateTime<Utc>) -> String {
        strike(
            &excerpt(text, &self.query, self.entry_cap, self.tokens),
            at,
            self.changes,
            self.language,
        )
    }

    /// The context line (the turn before) of a turn shown as `text`: only for a short turn,
    /// a reply that may not stand alone ("Yes, last Tuesday!"); a longer turn says what it is
    /// about, and the turn before it, often a long reply, would take the room of another
    /// memory. Empty when not shown.
    fn context_line(&self, text: &str, context: &str, at: DateTime<Utc>) -> String {
        if context.trim().is_empty() || self.tokens.exceeds(text, self.context_line_max_tokens as usize) {
            return String::new();
        }
        self.current(context.trim(), at)
    }
}

/// Turns recalled memories into context entries and trace items, best first. Each entry is
/// grouped under its day: "today", "yesterday", "3 days ago", beyond a week the date
/// (`thinkus_common::time::day`), since the reader may have to say when.
fn memory_entries(
    recalled: &RecallResult,
    decision: &ControlDecision,
    shown: &Shown,
    items: &mut Vec<TraceItem>,
    entries: &mut Vec<Entry>,
) {
    let (language, now) = (shown.language, shown.now);
    // A turn whose exchange taught one of the memories offered, and that named them as holding
    // what it says ([`stand_ins`]), gives way to that memory.
    let offered: std::collections::HashSet<&str> = recalled.catalog.iter().map(|e| e.id.as_str()).collect();
    let shown_as_memory = |tags: &[String]| extracted_ids(tags).any(|id| offered.contains(id));
    let current = |text: &str, at: DateTime<Utc>| shown.current(text, at);
    let why = |parts: &ScoreParts| match language {
        Language::Zh => format!(
            "相关度{:.2}，重要性{:.2}，新鲜度{:.2}（{}）",
            parts.relevance, parts.importance, parts.freshness, decision.reason
        ),
        Language::En => format!(
            "relevance {:.2}, importance {:.2}, freshness {:.2} ({})",
            parts.relevance, parts.importance, parts.freshness, decision.reason
        ),
    };
    let scores: BTreeMap<&str, &CatalogEntry> = recalled.catalog.iter().map(|e| (e.id.as_str(), e)).collect();
    // Details first (best first), then the catalog lines of the memories not detailed, so the
    // budget the retriever filled is used whole.
    let mut detailed: std::collections::BTreeSet<&str> = Default::default();
    if recalled.mode == RetrievalMode::Details {
        for detail in &recalled.details {
            detailed.insert(detail.id.as_str());
            if shown_as_memory(&detail.tags) {
                continue;
            }
            let entry = scores.get(detail.id.as_str());
            let parts = entry.map(|e| e.score.clone()).unwrap_or_default();
            // The line the turn after this one carries as its context (marked the same way, so
            // that the two are recognised as one).
            let line = detail
                .speaker
                .as_deref()
                .map(|speaker| current(&turn_line(speaker, &detail.content), detail.occurred_at));
            items.push(TraceItem {
                kind: TraceKind::Memory,
                id: detail.id.clone(),
                score: parts.score,
                confidence: detail.confidence,
                reason: why(&parts),
                included: false,
                parts: Some(parts),
                tokens: 0,
            });
            let text = current(
                &memory_line(detail.speaker.as_deref(), detail.content.trim()),
                detail.occurred_at,
            );
            entries.push(Entry {
                kind: SectionKind::of(detail.memory_type),
                context: shown.context_line(&text, &detail.context, detail.occurred_at),
                text,
                trace: items.len() - 1,
                section_cap: None,
                line,
                day: Some(Day::of(detail.occurred_at, now, language)),
            });
        }
    }
    for entry in recalled
        .catalog
        .iter()
        .filter(|e| !detailed.contains(e.id.as_str()) && !shown_as_memory(&e.tags))
    {
        items.push(TraceItem {
            kind: TraceKind::Memory,
            id: entry.id.clone(),
            score: entry.score.score,
            confidence: entry.confidence,
            reason: why(&entry.score),
            included: false,
            parts: Some(entry.score.clone()),
            tokens: 0,
        });
        entries.push(Entry {
            kind: SectionKind::of(entry.memory_type),
            text: current(
                &memory_line(entry.speaker.as_deref(), &entry.summary),
                entry.occurred_at,
            ),
            trace: items.len() - 1,
            day: Some(Day::of(entry.occurred_at, now, language)),
            ..Default::default()
        });
    }
}

/// Whether a message brings the material a task works on: content after a colon or on lines of
/// its own, a quoted passage, figures to work with (two or more), or the length of a pasted
/// text (the controller's rules read a task's cues before the same colon or quote). "write the
/// invite for Aiko" and "帮我写个进展周报" bring none; "把“买满58送可颂”翻译成英文" and "每天180单，
/// 客单价28块，营业额多少" do.
fn brings_material(message: &str) -> bool {
    /// Longer than this (in characters), a message carries its own text.
    const PASTED: usize = 200;
    let message = message.trim();
    if message.chars().count() > PASTED || message.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        return true;
    }
    let after_colon = message
        .split_once([':', '：'])
        .is_some_and(|(_, rest)| !rest.trim().is_empty());
    let quoted = [('“', '”'), ('「', '」'), ('『', '』'), ('"', '"'), ('`', '`')]
        .iter()
        .any(|&(open, close)| {
            message
                .split_once(open)
                .and_then(|(_, rest)| rest.split_once(close))
                .is_some_and(|(inside, _)| !inside.trim().is_empty())
        });
    after_colon || quoted || figures(message) >= 2
}

/// How many figures a text holds: runs of digits not part of a name ("k6", "Q3", "S3").
fn figures(text: &str) -> usize {
    let chars: Vec<char> = text.chars().collect();
    let mut count = 0;
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], ',' | '.') && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        let before = start.checked_sub(1).map(|k| chars[k]);
        let after = chars.get(i).copied();
        if !before.is_some_and(|c| c.is_ascii_alphabetic()) && !after.is_some_and(|c| c.is_ascii_alphabetic()) {
            count += 1;
        }
    }
    count
}

/// The trace indices of the recalled entries whose relevance is below `floor` times the best
/// recalled entry's (the retriever's fused relevance, 0-1 between the worst and best candidate).
fn below_relevance_floor(items: &[TraceItem], entries: &[Entry], floor: f64) -> Vec<usize> {
    if floor <= 0.0 {
        return Vec::new();
    }
    let recalled: Vec<(usize, f64)> = entries
        .iter()
        .filter(|e| e.kind.is_memory())
        .filter_map(|e| Some((e.trace, items[e.trace].parts.as_ref()?.relevance)))
        .collect();
    let best = recalled.iter().map(|(_, relevance)| *relevance).fold(0.0, f64::max);
    recalled
        .into_iter()
        .filter(|(_, relevance)| *relevance < floor * best)
        .map(|(trace, _)| trace)
        .collect()
}

/// The trace indices of the memory entries the last session's summary already holds (a decision
/// of that session, learned from it as a memory too; a turn the summary keeps in its own words):
/// those whose content terms it holds at least [`STAND_IN_COVERAGE`] of, as a turn gives way to
/// the memories that hold what it says. A summary rewrites what it keeps ("We decided that one
/// dollar earns one point (why: finance can audit it; user)"), so the same statement is
/// recognised by its words, not its characters. Short lines ("- yes", fewer than three content
/// terms) are too common to be the same statement.
fn repeated_in_last_session(entries: &[Entry]) -> std::collections::HashSet<usize> {
    let Some(last) = entries.iter().find(|e| e.kind == SectionKind::LastSession) else {
        return Default::default();
    };
    let held = thinkus_common::text::term_set(&last.text);
    entries
        .iter()
        .filter(|e| !matches!(e.kind, SectionKind::LastSession | SectionKind::Artifacts))
        .filter(|e| {
            let said = e.text.trim_start_matches("- ").trim();
            // A turn's speaker is not part of what it says.
            let said = match (&e.line, said.split_once(": ")) {
                (Some(_), Some((_, what))) => what,
                _ => said,
            };
            let terms = thinkus_common::text::term_set(said);
            terms.len() >= 3 && holds_what_is_said(&held, &terms)
        })
        .map(|e| e.trace)
        .collect()
}

/// A context laid out again with the last session's section trimmed ([`trim_last_session`]).
struct Trimmed {
    packed: Packed,
    /// The last session's entry.
    trace: usize,
    /// Its items left out.
    dropped: usize,
    /// Whether the section went whole (no item was left).
    emptied: bool,
}

/// The packed context again without the last session's items that a memory it shows says in
/// full ([`without_lines_shown`]), the section gone whole when no item is left, the same
/// entries laid out by `repack` in what that saves. `None` when the section is not shown, no
/// item is said above, or an entry would no longer fit (the first layout stands).
fn trim_last_session(entries: &[Entry], packed: &Packed, repack: impl Fn(&[Entry]) -> Packed) -> Option<Trimmed> {
    let chosen: std::collections::HashSet<usize> = packed.included.iter().map(|(t, _)| *t).collect();
    let last = entries
        .iter()
        .find(|e| e.kind == SectionKind::LastSession && chosen.contains(&e.trace))?;
    let shown: Vec<&str> = entries
        .iter()
        .filter(|e| e.kind != SectionKind::LastSession && chosen.contains(&e.trace))
        .map(|e| e.text.as_str())
        .collect();
    let (text, dropped) = without_lines_shown(&last.text, &shown);
    if dropped == 0 {
        return None;
    }
    // With no item left, the section would be its title alone: it goes.
    let emptied = !text.lines().any(|line| line.trim_start().starts_with("- "));
    let mut kept: Vec<Entry> = entries.iter().filter(|e| chosen.contains(&e.trace)).cloned().collect();
    if emptied {
        kept.retain(|e| e.kind != SectionKind::LastSession);
    } else if let Some(entry) = kept.iter_mut().find(|e| e.kind == SectionKind::LastSession) {
        entry.text = text;
    }
    let again = repack(&kept);
    // The same entries fit in less room; should one not, the first layout stands.
    (again.included.len() == packed.included.len() - usize::from(emptied)).then_some(Trimmed {
        packed: again,
        trace: last.trace,
        dropped,
        emptied,
    })
}

/// The last session's section without the summary's items that one of the `shown` entries
/// says in full: a bullet whose content terms (its current values, struck ones aside) an entry
/// holds at least [`STAND_IN_COVERAGE`] of, the entry saying more beside it (it was not left
/// out for the summary holding it, [`repeated_in_last_session`]). Short bullets (fewer than three
/// content terms) are too common to be the same statement; a heading left with no bullet goes
/// too. Returns the text and how many bullets were left out.
fn without_lines_shown(summary: &str, shown: &[&str]) -> (String, usize) {
    let terms = |text: &str| thinkus_common::text::term_set(&crate::context::current_text(text));
    let held: Vec<std::collections::HashSet<String>> = shown.iter().map(|text| terms(text)).collect();
    let lines: Vec<&str> = summary.lines().collect();
    let said_above = |line: &str| {
        let Some(item) = line.trim_start().strip_prefix("- ") else {
            return false;
        };
        let said = terms(item);
        said.len() >= 3 && held.iter().any(|held| holds_what_is_said(held, &said))
    };
    let dropped: Vec<bool> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| i > 0 && said_above(line))
        .collect();
    let count = dropped.iter().filter(|d| **d).count();
    if count == 0 {
        return (summary.to_string(), 0);
    }
    let is_heading = |line: &str| line.trim_start().starts_with("**");
    let mut out: Vec<&str> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if dropped[i] {
            continue;
        }
        // A heading whose bullets all went: the next line kept is another heading or nothing.
        if i > 0 && is_heading(line) {
            let next = (i + 1..lines.len()).find(|&j| !dropped[j] && !lines[j].trim().is_empty());
            if next.is_none_or(|j| is_heading(lines[j])) {
                continue;
            }
        }
        out.push(line);
    }
    // No blank lines left doubled or trailing by what went.
    let mut text = String::new();
    for line in out {
        if line.trim().is_empty() && (text.is_empty() || text.ends_with("\n\n")) {
            continue;
        }
        text.push_str(line);
        text.push('\n');
    }
    (text.trim_end().to_string(), count)
}

/// A rendered summary as the text of the context's last-session section: its own heading
/// ("## 📋 Last session summary (2 hours ago)") becomes its first line, as the section has one.
fn as_section_text(markdown: &str) -> String {
    match markdown.split_once('\n') {
        Some((first, rest)) if first.starts_with('#') => {
            format!(
                "{}\n{}",
                first.trim_start_matches('#').trim(),
                rest.trim_start_matches('\n')
            )
        }
        _ => markdown.to_string(),
    }
}

/// When a session's summary counts as said, for the values changed since: its sentences may
/// come from any time of the session ("Early bird: 20% off" from before "15% not 20%"), so
/// before the first change said in that session, else as of the last message it covers.
fn summary_said_at(said: &[ValueChange], session_id: &str, covered_until: DateTime<Utc>) -> DateTime<Utc> {
    said.iter()
        .filter(|c| c.session_id.as_deref() == Some(session_id))
        .map(|c| c.at - chrono::Duration::seconds(1))
        .fold(covered_until, DateTime::min)
}

/// The most changes said in the last session that its section lists.
const LAST_SESSION_CHANGES: usize = 5;

/// The statements of the changes said in session `session_id` that its summary does not carry
/// as current (a summary picks sentences by salience, and the budget raised in passing may not
/// be one of them), newest first, each with its old values struck.
fn changed_in(
    said: &[ValueChange],
    session_id: &str,
    summary: &str,
    changes: &[Replaced],
    language: Language,
) -> Vec<String> {
    let current = crate::context::current_text(summary);
    let mut out: Vec<String> = Vec::new();
    for change in said.iter().filter(|c| c.session_id.as_deref() == Some(session_id)) {
        let carried = match &change.new {
            Some(new) => crate::context::contains_value(&current, new),
            None => summary.contains(change.statement.as_str()),
        };
        let line = strike(&change.statement, change.at, changes, language);
        if carried || change.statement.trim().is_empty() || out.contains(&line) {
            continue;
        }
        out.push(line);
        if out.len() == LAST_SESSION_CHANGES {
            break;
        }
    }
    out
}

/// The last session's section: the summary's title line, the changes said in that session
/// under it, then the summary, within `cap` tokens: the summary's last lines give way first
/// (values struck in it can make it longer than it was rendered), then the last changes.
fn with_changes_said(summary: &str, changed: &[String], language: Language, cap: u32, tokens: &TokenCounter) -> String {
    let (title, body) = summary.split_once('\n').unwrap_or((summary, ""));
    let heading = match language {
        Language::Zh => "**该会话中改过的**",
        Language::En => "**Changed in that session**",
    };
    let mut lines: Vec<&str> = body.lines().collect();
    // The summary's own lines give way from its end (the struck values written beside the
    // old ones can make it longer than it was rendered), then the changes from theirs.
    let mut changes = changed.len();
    loop {
        let block: String = changed[..changes].iter().map(|line| format!("- {line}\n")).collect();
        let text = if block.is_empty() {
            format!("{title}\n{}", lines.join("\n"))
        } else {
            format!("{title}\n{heading}\n{block}\n{}", lines.join("\n"))
        };
        let text = text.trim_end().to_string();
        if tokens.count(&text) as u32 <= cap {
            return text;
        }
        if lines.pop().is_none() {
            if changes == 0 {
                return text;
            }
            changes -= 1;
        }
    }
}

/// A memory as a line of the context: "- Speaker: what was said", or "- what it says".
fn memory_line(speaker: Option<&str>, text: &str) -> String {
    match speaker {
        Some(speaker) => format!("- {speaker}: {text}"),
        None => format!("- {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_last_session_says_in_its_own_words_is_not_said_again() {
        let last = Entry {
            kind: SectionKind::LastSession,
            text: "📋 Last session summary (1 hour ago)\n**🧭 Decisions**\n- We decided that one dollar spent \
                   earns one point (why: finance can audit it; user; firm)\n**⏳ Pending**\n- Priya writes the \
                   ledger migration by Thursday."
                .into(),
            trace: 0,
            ..Default::default()
        };
        let turn = |text: &str, trace: usize| Entry {
            kind: SectionKind::Other,
            text: text.into(),
            trace,
            line: Some(text.trim_start_matches("- ").into()),
            ..Default::default()
        };
        let entries = vec![
            last,
            // The decision, as said: the summary rewrote it, and holds its words.
            turn(
                "- user: We decided that one dollar spent earns one point, because finance can audit it.",
                1,
            ),
            // A memory the summary holds word for word.
            Entry {
                kind: SectionKind::Decisions,
                text: "- Priya writes the ledger migration by Thursday.".into(),
                trace: 2,
                ..Default::default()
            },
            // Something else of the same session, and a short reply: both stay.
            turn(
                "- user: Points expire after twelve months, to keep the liability small.",
                3,
            ),
            turn("- user: Yes, one point.", 4),
        ];
        let mut repeated: Vec<usize> = repeated_in_last_session(&entries).into_iter().collect();
        repeated.sort();
        assert_eq!(repeated, vec![1, 2]);
    }

    #[test]
    fn the_last_session_leaves_out_what_a_memory_above_says_in_full() {
        let summary = "📋 Last session summary (1 hour ago)\n**Changed in that session**\n- Raise paid social to \
                       £9,500.\n\n**Constraints**\n- Tin supplier's slipped and the boxes land on the 20th now, so we \
                       can't launch on the 19th.\n\n**✅ Done**\n- Pull the numbers from the Meta test ads we ran over \
                       the weekend\n- Got a supplier call.";
        let shown = [
            "- assistant: Paid social raised to £9,500 (from ~~£6,000~~). I'll move the extra into the gift-giver ad set.",
            "- user: Bad news. Tin supplier's slipped and the boxes land on the 20th now, so we can't launch on the \
             19th. Move everything by four days.",
        ];
        let (text, dropped) = without_lines_shown(summary, &shown);
        assert_eq!(dropped, 2, "{text}");
        assert_eq!(
            text,
            "📋 Last session summary (1 hour ago)\n\n**✅ Done**\n- Pull the numbers from the Meta test ads we ran \
             over the weekend\n- Got a supplier call.",
            "the headings left with no bullet go too"
        );

        let summary = "📋 上次会话摘要 (1小时前)\n**该会话中改过的**\n- 刚跟装修队谈完，总价从~~35万~~加到42万。\n- 开业也得推，\
                       改到12月20日了，唉\n\n**约束**\n- 项目：营销预算 · 金额：3.0万\n\n**⏳ 待处理**\n- 待办记下：小周核对批次\
                       B20261104-07的41笔拉卡拉交易。";
        let shown = ["- user: 刚跟装修队谈完，总价从~~35万~~加到42万，消防要求改喷淋，多出来的7万里喷淋占一半。"];
        let (text, dropped) = without_lines_shown(summary, &shown);
        assert_eq!(dropped, 1, "{text}");
        assert!(!text.contains("总价"), "{text}");
        assert!(text.contains("**该会话中改过的**\n- 开业也得推"), "{text}");
        assert!(text.contains("营销预算") && text.contains("B20261104-07"), "{text}");

        // Nothing shown above says a line: the summary stands as it was.
        let (text, dropped) = without_lines_shown(summary, &["- user: 周报以后都用表格，一目了然。"]);
        assert_eq!((text.as_str(), dropped), (summary, 0));
    }

    #[test]
    fn a_turn_gives_way_only_to_memories_that_hold_what_it_says() {
        use thinkus_common::model::{Memory, MemorySource, MemoryType};
        let scope = thinkus_common::model::Scope::new("u1", "assistant");
        let memory = |content: &str| {
            Memory::new(
                scope.clone(),
                MemoryType::Fact,
                content.into(),
                MemorySource::Discussion,
                Utc::now(),
            )
        };
        let whole = memory("I passed the adoption agency interviews last Friday");
        let turn = "Caroline: I passed the adoption agency interviews last Friday!";
        assert_eq!(stand_ins(turn, &[&whole]), vec![whole.id.clone()]);
        // One clause of a turn that goes on about something else: the turn stays.
        let clause = memory("Glad you bonded over our love of nature");
        let long = "Caroline: Glad you bonded over our love of nature. Last Friday I went to a council \
                    meeting for adoption, so many people want to give children a loving home.";
        assert!(stand_ins(long, &[&clause]).is_empty());
        // Two memories holding the turn between them: it gives way to both.
        let meeting = memory(
            "Last Friday I went to a council meeting for adoption, so many people want to give children a loving home",
        );
        assert_eq!(stand_ins(long, &[&clause, &meeting]).len(), 2);
        // Chinese: the same rule over segmented words.
        let zh = memory("我们决定预算定为42万");
        assert_eq!(stand_ins("我们决定预算定为42万。", &[&zh]).len(), 1);
        assert!(stand_ins("我们决定预算定为42万，另外下周三要去杭州见投资人谈估值。", &[&zh]).is_empty());
        assert!(stand_ins("anything", &[]).is_empty());
    }

    #[test]
    fn the_relevance_floor_is_relative_to_the_best_recalled_memory() {
        let item = |relevance: Option<f64>| TraceItem {
            kind: TraceKind::Memory,
            id: String::new(),
            score: 0.0,
            confidence: 1.0,
            reason: String::new(),
            included: false,
            parts: relevance.map(|relevance| ScoreParts {
                relevance,
                ..Default::default()
            }),
            tokens: 0,
        };
        // A standing rule (no score), the best memory, one at half its relevance, one far below.
        let items = [item(None), item(Some(0.8)), item(Some(0.4)), item(Some(0.1))];
        let entries: Vec<Entry> = [
            SectionKind::Standing,
            SectionKind::Decisions,
            SectionKind::Other,
            SectionKind::Other,
        ]
        .into_iter()
        .enumerate()
        .map(|(trace, kind)| Entry {
            kind,
            trace,
            ..Default::default()
        })
        .collect();
        assert!(below_relevance_floor(&items, &entries, 0.0).is_empty(), "0 keeps all");
        assert_eq!(below_relevance_floor(&items, &entries, 0.4), vec![3]);
        assert_eq!(below_relevance_floor(&items, &entries, 0.6), vec![2, 3]);
        assert!(
            below_relevance_floor(&items, &entries, 1.0).len() == 2,
            "the best always stays"
        );
        // The default (chosen on the development sessions) leaves out a memory at a third of
        // the best's relevance and keeps one at nearly half of it.
        let items = [item(None), item(Some(0.9)), item(Some(0.4)), item(Some(0.3))];
        assert_eq!(
            below_relevance_floor(&items, &entries, GatewayConfig::default().relevance_floor),
            vec![3]
        );
    }

    #[test]
    fn the_last_session_lists_the_changes_its_summary_leaves_out() {
        let at = |h: u32| chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 17, h, 0, 0).unwrap();
        let change = |old: &str, new: Option<&str>, session: &str, statement: &str, h: u32| ValueChange {
            old: old.into(),
            new: new.map(Into::into),
            at: at(h),
            memory_id: format!("mem_{h}"),
            session_id: Some(session.into()),
            statement: statement.into(),
        };
        // Newest first, as the knowledge manager lists them.
        let said = vec![
            change("Moka", Some("北森"), "s4", "| ATS | Moka | 北森 |", 11),
            change("12月1日", Some("12月15日"), "s4", "到岗时间也放宽到12月15日", 10),
            change("25k-30k", Some("30k-35k"), "s4", "后端薪资上调到30k-35k", 10),
            change("3个", Some("2个"), "s1", "这次招2个后端，不是3个", 9),
        ];
        let replaced: Vec<Replaced> = said
            .iter()
            .map(|c| Replaced {
                old: c.old.clone(),
                new: c.new.clone(),
                at: c.at,
            })
            .collect();
        let summary =
            "📋 上次会话摘要 (1小时前)\n**✅ 已完成**\n- 到岗时间放宽到12月15日前\n- JD今天改掉重新发\n- 赵一鸣期望38k";
        let changed = changed_in(&said, "s4", summary, &replaced, Language::Zh);
        assert_eq!(
            changed,
            vec![
                "| ATS | ~~Moka~~ | 北森 |".to_string(),
                "后端薪资上调到30k-35k".to_string()
            ],
            "the start date the summary carries and another session's change are left out"
        );
        let tokens = TokenCounter::default();
        let whole = with_changes_said(summary, &changed, Language::Zh, 1000, &tokens);
        assert!(
            whole.starts_with("📋 上次会话摘要 (1小时前)\n**该会话中改过的**\n- | ATS | ~~Moka~~ | 北森 |\n- 后端薪资上调到30k-35k\n\n**✅ 已完成**"),
            "{whole}"
        );
        // Short of room, the summary's last lines give way, not the changes.
        let cap = tokens.count(&whole) as u32 - 1;
        let cut = with_changes_said(summary, &changed, Language::Zh, cap, &tokens);
        assert!(cut.contains("30k-35k") && !cut.contains("赵一鸣"), "{cut}");
        assert!(tokens.count(&cut) as u32 <= cap);
        assert_eq!(with_changes_said(summary, &[], Language::Zh, 1000, &tokens), summary);
        // With no change to say, a summary longer than its room still fits: its last lines go.
        let room = tokens.count(summary) as u32 - 1;
        let fitted = with_changes_said(summary, &[], Language::Zh, room, &tokens);
        assert!(
            tokens.count(&fitted) as u32 <= room && !fitted.contains("赵一鸣"),
            "{fitted}"
        );
        assert!(
            fitted.starts_with("📋 上次会话摘要 (1小时前)\n**✅ 已完成**"),
            "{fitted}"
        );

        // The summary's own sentences from before a change said in its session are struck.
        let said_at = summary_said_at(&said, "s4", at(12));
        assert_eq!(said_at, at(10) - chrono::Duration::seconds(1));
        assert_eq!(summary_said_at(&said, "s9", at(12)), at(12));
        assert_eq!(
            strike("- 薪资：25k-30k/月", said_at, &replaced, Language::Zh),
            "- 薪资：~~25k-30k~~（11月17日起为30k-35k）/月"
        );
    }

    #[test]
    fn a_turn_sees_no_further_than_what_it_taught() {
        let outside = Scope::new("u", "hr");
        let project = Scope::new("u", "cfo").with_project("shop");
        assert_eq!(turn_visibility(&outside, []), Visibility::Private);
        assert_eq!(turn_visibility(&outside, [Visibility::Project]), Visibility::Private);
        assert_eq!(turn_visibility(&project, []), Visibility::Project);
        assert_eq!(turn_visibility(&project, [Visibility::Project]), Visibility::Project);
        assert_eq!(
            turn_visibility(&project, [Visibility::Project, Visibility::Private]),
            Visibility::Private
        );
    }

    #[test]
    fn only_a_short_turn_brings_the_turn_before_it() {
        let tokens = TokenCounter::default();
        let now = Utc::now();
        use thinkus_retriever::api::MemoryDetails;
        let detail = |id: &str, content: &str, context: &str| MemoryDetails {
            id: id.into(),
            summary: content.into(),
            content: content.into(),
            context: context.into(),
            decisions: Vec::new(),
            refs: Vec::new(),
            memory_type: MemoryType::ConversationTurn,
            importance: 3,
            confidence: 1.0,
            occurred_at: now,
            relative_time: String::new(),
            tokens: 0,
            tags: Vec::new(),
            speaker: Some("user".into()),
            freshness: 3.0,
            status: thinkus_common::model::MemoryStatus::Active,
            superseded_by: None,
        };
        let reply_to = "assistant: The full breakdown, line by line: rent 3.2, fit-out 42, equipment 9, stock 3.";
        let recalled = RecallResult {
            mode: RetrievalMode::Details,
            catalog: Vec::new(),
            details: vec![
                detail("short-en", "Yes, last Tuesday!", reply_to),
                detail(
                    "long-en",
                    "Pull the October statement of the company account, tell me whether anything looks wrong, \
                     and how much is left on it now, because the opening is getting close",
                    reply_to,
                ),
                detail("short-zh", "对，就上周二。", "assistant：开店前一次性支出合计约63万。"),
                detail(
                    "long-zh",
                    "你把公司招行账户10月的流水拉一下，看看有没有什么不对劲的，顺便告诉我现在账上还有多少钱，开业前的资金缺口也一起算一下",
                    "assistant：开店前一次性支出合计约63万。",
                ),
            ],
            tokens_used: 0,
            budget_tokens: 0,
            candidates: 4,
            omitted_for_budget: 0,
            tokenizer: String::new(),
            rendered: String::new(),
        };
        let decision = ControlDecision {
            need_memory: NeedMemory::Yes,
            memory_types: Vec::new(),
            retrieval_mode: RetrievalMode::Details,
            budget_tokens: 1000,
            time_range: TimeRange::All,
            reason: String::new(),
            engine: String::new(),
            signals: Vec::new(),
            language: Language::En,
        };
        let contexts = |max: u32, language: Language| {
            let shown = Shown {
                language,
                now,
                changes: &[],
                query: Default::default(),
                entry_cap: 0,
                context_line_max_tokens: max,
                tokens: &tokens,
            };
            let (mut items, mut entries) = (Vec::new(), Vec::new());
            memory_entries(&recalled, &decision, &shown, &mut items, &mut entries);
            entries
                .into_iter()
                .map(|e| (items[e.trace].id.clone(), !e.context.is_empty()))
                .collect::<BTreeMap<_, _>>()
        };
        for language in [Language::En, Language::Zh] {
            let shown = contexts(30, language);
            // A reply that does not stand alone comes with what it answers, in both languages.
            assert!(shown["short-en"] && shown["short-zh"], "{shown:?}");
            // A turn that says what it is about stands alone: no room goes to the turn before.
            assert!(!shown["long-en"] && !shown["long-zh"], "{shown:?}");
        }
        assert!(
            contexts(0, Language::En).values().all(|shown| !shown),
            "0 never shows it"
        );
        assert!(contexts(10_000, Language::En).values().all(|shown| *shown));
    }
}
