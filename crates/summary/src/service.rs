//! The summary service: keeps one structured summary per session, updated incrementally from
//! the messages after its `trajectory_end`, by the configured LLM or the built-in rules.
//!
//! Updates run in the background when a message asks for a summary, a phase completes, a
//! session ends or goes idle, or too many messages are unsummarised; RecordMessages only
//! appends and returns. One update per session runs at a time: a trigger arriving during one
//! makes it run once more. A failed engine call stores nothing, so the previous summary stays
//! as it was (and the session stays flagged for the next sweep).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use thinkus_backends::llm::{CompletionRequest, LanguageModel, LlmTask, RuleEngine};
use thinkus_backends::sql::{ArtifactStore, SessionKey, SessionStore, StoreError};
use thinkus_common::ids::{IdKind, new_id};
use thinkus_common::model::{
    ArtifactRef, Decision, DecisionConfidence, EngineChoice, Language, MemorySource, MemoryType, Message, Owner, Scope,
    Visibility,
};
use thinkus_common::tokens::TokenCounter;
use thinkus_common::{ApiError, ErrorCode};
use thinkus_knowledge_manager::KnowledgeApi;
use thinkus_knowledge_manager::api::{MemoryDraft, RememberRequest};
use tokio_util::sync::CancellationToken;

use crate::api::{
    GenerateRequest, GenerateResult, ListRequest, RecordRequest, RecordResult, RenderRequest, Rendered, SessionSummary,
    SummaryApi, SummaryContent,
};
use crate::config::SummaryConfig;
use crate::rules::{self, RuleMessage, RulesInput};
use crate::{parse, prompts, render};

/// The summary service.
#[derive(Clone)]
pub struct Summarizer {
    inner: Arc<Inner>,
}

struct Inner {
    config: SummaryConfig,
    sessions: Arc<dyn SessionStore>,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    knowledge: Option<Arc<dyn KnowledgeApi>>,
    rules: RuleEngine,
    llm: Option<Arc<dyn LanguageModel>>,
    tokens: TokenCounter,
    /// Sessions being updated in the background, and whether another pass was asked for.
    in_flight: Mutex<HashMap<(Owner, String), bool>>,
}

fn session_not_found(session_id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("scope.session_id: session {session_id:?} not found"),
    )
}

fn summary_not_found(session_id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("session_id: no summary of session {session_id:?}"),
    )
}

fn rule_message(message: &Message) -> RuleMessage {
    RuleMessage {
        index: message.index,
        role: message.role.clone(),
        speaker: message.speaker.clone(),
        content: message.content.clone(),
    }
}

/// When the decision `what` was said: the last message read that holds its words (a summary's
/// decision is cut from a sentence, and may end with "…"); none when no message does (an
/// LLM's paraphrase).
fn said_at(what: &str, said: &[(DateTime<Utc>, String)]) -> Option<DateTime<Utc>> {
    let words = what.trim().trim_end_matches(['…', '.', '。']).trim_end();
    let cut: String = words.chars().take(48).collect();
    if cut.chars().count() < 8 {
        return None;
    }
    let cut = cut.to_lowercase();
    said.iter()
        .rev()
        .find(|(_, content)| content.to_lowercase().contains(&cut))
        .map(|(at, _)| *at)
}

/// A stable request id for offering one decision of one session, so that repeated summaries
/// offer it once.
fn decision_request_id(user_id: &str, session_id: &str, decision: &Decision) -> String {
    let normalized: String = decision
        .what
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    let digest = Sha256::digest(format!("{user_id}\u{1f}{session_id}\u{1f}{normalized}").as_bytes());
    format!("summary-decision-{}", &hex::encode(digest)[..32])
}

impl Summarizer {
    /// The service over a session store, registering its rules in `rules`. `llm` is the
    /// configured remote model, if any; `artifacts` attaches the session's stored artifacts;
    /// `knowledge` receives the decisions of summaries.
    pub fn new(
        config: SummaryConfig,
        sessions: Arc<dyn SessionStore>,
        rules: RuleEngine,
        llm: Option<Arc<dyn LanguageModel>>,
        tokens: TokenCounter,
        artifacts: Option<Arc<dyn ArtifactStore>>,
        knowledge: Option<Arc<dyn KnowledgeApi>>,
    ) -> Self {
        rules::register(&rules);
        Self {
            inner: Arc::new(Inner {
                config,
                sessions,
                artifacts,
                knowledge,
                rules,
                llm,
                tokens,
                in_flight: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn config(&self) -> &SummaryConfig {
        &self.inner.config
    }

    /// The engine for a request: the configured LLM unless rules are asked for or none is set.
    fn engine(&self, choice: EngineChoice) -> Result<Arc<dyn LanguageModel>, ApiError> {
        match (choice, &self.inner.llm) {
            (EngineChoice::Rules, _) | (EngineChoice::Configured, None) => Ok(Arc::new(self.inner.rules.clone())),
            (_, Some(llm)) => Ok(llm.clone()),
            (EngineChoice::Llm, None) => Err(ApiError::failed_precondition(
                "engine: no LLM is configured (set llm.provider)",
            )),
        }
    }

    fn check_messages(&self, messages: &[Message], required: bool) -> Result<(), ApiError> {
        let max = self.inner.config.max_messages_per_call;
        if (required && messages.is_empty()) || messages.len() > max {
            return Err(ApiError::invalid("messages", format!("must hold 1-{max} messages")));
        }
        for (i, message) in messages.iter().enumerate() {
            if message.role.trim().is_empty() {
                return Err(ApiError::invalid(&format!("messages[{i}].role"), "is required"));
            }
            if message.content.trim().is_empty() {
                return Err(ApiError::invalid(&format!("messages[{i}].content"), "is empty"));
            }
            let chars = message.content.chars().count();
            if chars > self.inner.config.max_message_chars {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].content"),
                    format!(
                        "is {chars} characters, the limit is {}",
                        self.inner.config.max_message_chars
                    ),
                ));
            }
        }
        Ok(())
    }

    fn session_id(scope: &Scope) -> Result<&str, ApiError> {
        scope
            .session_id
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ApiError::invalid("scope.session_id", "is required"))
    }

    async fn append(&self, scope: &Scope, session_id: &str, messages: &[Message]) -> Result<(u32, u32), ApiError> {
        if scope.role_id.is_empty() {
            let exists = self
                .inner
                .sessions
                .get_session(&scope.owner(), session_id)
                .await?
                .is_some();
            if !exists {
                return Err(ApiError::invalid("scope.role_id", "is required to start a session"));
            }
        }
        let key = SessionKey {
            tenant_id: scope.tenant_id.clone(),
            user_id: scope.user_id.clone(),
            session_id: session_id.to_string(),
            role_id: scope.role_id.clone(),
            project_id: scope.project_id.clone(),
        };
        Ok(self.inner.sessions.append_messages(&key, messages).await?)
    }

    /// Runs an update in the background unless one runs for the session already, in which
    /// case that one runs once more when it is done.
    fn schedule(&self, owner: &Owner, session_id: &str) {
        let key = (owner.clone(), session_id.to_string());
        {
            let mut in_flight = self.inner.in_flight.lock();
            if let Some(again) = in_flight.get_mut(&key) {
                *again = true;
                return;
            }
            in_flight.insert(key.clone(), false);
        }
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                match this.update(&key.0, &key.1, None, None, EngineChoice::Configured).await {
                    Ok(result) => tracing::info!(
                        session_id = %key.1,
                        messages_read = result.messages_read,
                        trajectory_end = result.summary.trajectory_end,
                        "session summary updated"
                    ),
                    Err(err) => tracing::warn!(session_id = %key.1, %err, "session summary not updated"),
                }
                let mut in_flight = this.inner.in_flight.lock();
                match in_flight.get_mut(&key) {
                    Some(again) if *again => *again = false,
                    _ => {
                        in_flight.remove(&key);
                        break;
                    }
                }
            }
        });
    }

    /// Whether a background update of the session is running.
    pub fn is_updating(&self, owner: &Owner, session_id: &str) -> bool {
        self.inner
            .in_flight
            .lock()
            .contains_key(&(owner.clone(), session_id.to_string()))
    }

    async fn session_artifacts(&self, owner: &Owner, session_id: &str) -> Vec<ArtifactRef> {
        let Some(store) = &self.inner.artifacts else {
            return Vec::new();
        };
        match store.list_artifacts(owner, Some(session_id), None, 20, 0).await {
            Ok(records) => records
                .into_iter()
                .rev()
                .map(|a| ArtifactRef {
                    locator: a.path.clone().unwrap_or_default(),
                    desc: match &a.tool_name {
                        Some(tool) => format!("{tool} ({})", a.kind),
                        None => a.kind.clone(),
                    },
                    reference: a.id,
                })
                .collect(),
            Err(err) => {
                tracing::warn!(%err, session_id, "the session's artifacts could not be listed");
                Vec::new()
            }
        }
    }

    /// One engine pass over `messages` on top of `base`.
    async fn run_engine(
        &self,
        engine: &Arc<dyn LanguageModel>,
        messages: &[Message],
        base: Option<&SummaryContent>,
        artifacts: &[ArtifactRef],
    ) -> Result<SummaryContent, ApiError> {
        let config = &self.inner.config;
        let input = RulesInput {
            messages: messages.iter().map(rule_message).collect(),
            previous: base.cloned(),
            artifacts: artifacts.to_vec(),
            max_share: config.rules_max_share,
            min_chars: config.rules_min_chars,
            max_items: config.max_items_per_section,
        };
        let prompt = prompts::summarize(messages, base, artifacts, config.prompt_message_chars)?;
        let input = serde_json::to_value(&input).map_err(|err| ApiError::internal(err.to_string()))?;
        let mut call = CompletionRequest::task(LlmTask::Summarize, prompt, input);
        call.max_tokens = config.llm_max_tokens;
        let failed = || {
            thinkus_common::metrics::METRICS
                .llm_failures
                .with_label_values(&["summarize"])
                .inc();
        };
        let completion = engine.complete(call).await.map_err(|err| {
            failed();
            tracing::warn!(%err, engine = %engine.name(), "the summary engine failed; the previous summary is kept");
            ApiError::from(err)
        })?;
        let parsed = parse::parse(&completion.text).ok_or_else(|| {
            failed();
            tracing::warn!(engine = %engine.name(), "the summary answer holds no summary; the previous summary is kept");
            ApiError::unavailable("the language model's answer held no readable summary; the previous summary is kept")
        })?;
        let mut content = parsed.over(base.cloned().unwrap_or_default());
        if !engine.is_builtin() {
            // A model may drop the stored artifacts or write long lists: the same merge and
            // caps as the rules apply.
            let known = SummaryContent {
                artifacts: artifacts.to_vec(),
                ..Default::default()
            };
            content = rules::merge(SummaryContent::default(), content, config.max_items_per_section);
            content = rules::merge(content, known, config.max_items_per_section);
        }
        Ok(content)
    }

    /// Brings a session's summary up to date (or over the range asked).
    pub async fn update(
        &self,
        owner: &Owner,
        session_id: &str,
        start: Option<u32>,
        end: Option<u32>,
        choice: EngineChoice,
    ) -> Result<GenerateResult, ApiError> {
        let mut attempts = 0;
        loop {
            match self.update_once(owner, session_id, start, end, choice).await {
                Err(err) if err.code == ErrorCode::AlreadyExists && attempts < 2 => {
                    // Another update stored its summary first: start again from it.
                    attempts += 1;
                }
                other => return other,
            }
        }
    }

    async fn update_once(
        &self,
        owner: &Owner,
        session_id: &str,
        start: Option<u32>,
        end: Option<u32>,
        choice: EngineChoice,
    ) -> Result<GenerateResult, ApiError> {
        let store = &self.inner.sessions;
        let session = store
            .get_session(owner, session_id)
            .await?
            .ok_or_else(|| session_not_found(session_id))?;
        if session.message_count == 0 {
            return Err(ApiError::invalid("scope.session_id", "the session has no messages"));
        }
        let last = session.message_count - 1;
        for (field, value) in [("trajectory_start", start), ("trajectory_end", end)] {
            if let Some(value) = value
                && value > last
            {
                return Err(ApiError::invalid(
                    field,
                    format!("is {value} but the session's messages are 0-{last}"),
                ));
            }
        }
        if let (Some(s), Some(e)) = (start, end)
            && e < s
        {
            return Err(ApiError::invalid(
                "trajectory_end",
                format!("{e} is before trajectory_start {s}"),
            ));
        }
        let previous = store
            .get_summary(owner, session_id)
            .await?
            .map(SessionSummary::from_record);
        let previous_end = previous.as_ref().map(|p| p.trajectory_end).unwrap_or(-1);
        let from = start.unwrap_or((previous_end + 1).max(0) as u32);
        let to = end.unwrap_or(last);
        if let Some(s) = start
            && i64::from(s) > i64::from(previous_end) + 1
        {
            return Err(ApiError::invalid(
                "trajectory_start",
                format!(
                    "{s} would leave messages unsummarised: the summary ends at message {previous_end}, start at {} or before",
                    previous_end + 1
                ),
            ));
        }
        if from > to {
            return match previous {
                Some(summary) if end.is_none() => Ok(GenerateResult {
                    summary,
                    messages_read: 0,
                }),
                _ => Err(ApiError::invalid(
                    "trajectory_end",
                    format!("{to} is before the first unsummarised message {from}"),
                )),
            };
        }
        let regenerate = start == Some(0);
        let base_summary = if regenerate { None } else { previous.as_ref() };
        let engine = self.engine(choice)?;
        let artifacts = self.session_artifacts(owner, session_id).await;
        let mut content = base_summary.map(SessionSummary::content);
        let mut language = base_summary.map(|s| s.language);
        let mut read = 0u32;
        // The summary is as of the last message it covers: the conversation's clock, not the
        // machine's (a replayed or queued conversation is summarised as of when it was said).
        let mut as_of: Option<DateTime<Utc>> = None;
        // When each message read was said, to date the decisions offered from them: kept only
        // where decisions are offered.
        let offering = self.inner.knowledge.is_some() && self.inner.config.offer_decisions;
        let mut said: Vec<(DateTime<Utc>, String)> = Vec::new();
        let mut position = from;
        while position <= to {
            let chunk_end = to.min(position.saturating_add(self.inner.config.max_messages_per_update - 1));
            let messages = store.get_messages(owner, session_id, position, chunk_end).await?;
            read += messages.len() as u32;
            as_of = as_of.max(messages.iter().map(|m| m.created_at).max());
            if offering {
                said.extend(messages.iter().map(|m| (m.created_at, m.content.clone())));
            }
            if language.is_none() {
                let rule_messages: Vec<RuleMessage> = messages.iter().map(rule_message).collect();
                language = Some(rules::language_of(&rule_messages));
            }
            content = Some(
                self.run_engine(&engine, &messages, content.as_ref(), &artifacts)
                    .await?,
            );
            position = chunk_end + 1;
        }
        let content = content.unwrap_or_default();
        // The store keeps milliseconds: the summary returned is the one a read gives back.
        let now = as_of
            .max(previous.as_ref().map(|p| p.updated_at))
            .unwrap_or_else(Utc::now)
            .trunc_subsecs(3);
        let summary = SessionSummary {
            id: previous
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_else(|| new_id(IdKind::Summary)),
            scope: Scope {
                tenant_id: owner.tenant_id.clone(),
                user_id: owner.user_id.clone(),
                role_id: session.role_id.clone(),
                project_id: session.project_id.clone(),
                session_id: Some(session_id.to_string()),
            },
            goal: content.goal,
            constraints: content.constraints,
            decisions: content.decisions,
            progress: content.progress,
            artifacts: content.artifacts,
            next_actions: content.next_actions,
            risks: content.risks,
            open_questions: content.open_questions,
            trajectory_start: match base_summary {
                Some(p) => p.trajectory_start.min(from as i32),
                None => from as i32,
            },
            trajectory_end: match base_summary {
                Some(p) => p.trajectory_end.max(to as i32),
                None => to as i32,
            },
            language: language.unwrap_or(Language::En),
            engine: if engine.is_builtin() { "rules" } else { "llm" }.to_string(),
            created_at: previous.as_ref().map(|p| p.created_at).unwrap_or(now),
            updated_at: now,
        };
        {
            // In the user's write section, which an erasure holds too: a summary of messages
            // erased meanwhile is not stored (nor are its decisions offered).
            let _section = store.lock_owner(owner).await?;
            if !store.session_exists(owner, session_id).await? {
                return Err(ApiError::failed_precondition(format!(
                    "session {session_id} no longer exists (user {:?} was erased): its summary is dropped",
                    owner.user_id
                )));
            }
            match store.put_summary(&summary.to_record(), Some(previous_end)).await {
                Ok(()) => {}
                Err(StoreError::Conflict(message)) => {
                    return Err(ApiError::new(ErrorCode::AlreadyExists, message));
                }
                Err(err) => return Err(err.into()),
            }
        }
        let offered: HashSet<String> = previous
            .iter()
            .flat_map(|p| p.decisions.iter().map(|d| d.what.clone()))
            .collect();
        self.offer_decisions(&summary, &offered, &said).await;
        Ok(GenerateResult {
            summary,
            messages_read: read,
        })
    }

    /// Offers the summary's new decisions to the knowledge manager as project decisions, each
    /// dated when it was said ([`said_at`]), never when the summary ran: a decision summarised
    /// an hour later is no newer than the change said after it. A request id derived from the
    /// session and the decision makes repeated offers of the same decision no-ops; the knowledge
    /// manager's own deduplication merges similar ones.
    async fn offer_decisions(
        &self,
        summary: &SessionSummary,
        already: &HashSet<String>,
        said: &[(DateTime<Utc>, String)],
    ) {
        let Some(knowledge) = &self.inner.knowledge else { return };
        if !self.inner.config.offer_decisions || summary.scope.role_id.is_empty() {
            return;
        }
        let session_id = summary.scope.session_id.clone().unwrap_or_default();
        for decision in summary.decisions.iter().filter(|d| !already.contains(&d.what)) {
            let content = match (decision.why.is_empty(), summary.language) {
                (true, _) => decision.what.clone(),
                (false, Language::Zh) => format!("{}，理由：{}", decision.what, decision.why),
                (false, Language::En) => format!("{} (why: {})", decision.what, decision.why),
            };
            let mut draft = MemoryDraft::new(MemoryType::ProjectDecision, content);
            draft.source = Some(MemorySource::Summary);
            draft.occurred_at = Some(said_at(&decision.what, said).unwrap_or(summary.updated_at));
            draft.importance = Some(4);
            draft.confidence = Some(match decision.confidence {
                DecisionConfidence::High => 0.9,
                DecisionConfidence::Medium => 0.75,
                DecisionConfidence::Low => 0.5,
            });
            draft.visibility = Some(if summary.scope.project_id.is_some() {
                Visibility::Project
            } else {
                Visibility::Private
            });
            // The memory's context is read in the user's language like the memory itself.
            draft.context = match summary.language {
                Language::Zh => format!("在会话 {session_id} 中决定（{}）", decision.who),
                Language::En => format!("decided in session {session_id} ({})", decision.who),
            };
            let request = RememberRequest {
                scope: summary.scope.clone(),
                draft,
                request_id: Some(decision_request_id(&summary.scope.user_id, &session_id, decision)),
                skip_dedup: false,
                // A summary's decisions pass the admission every memory passes.
                admission_bypassed_by: None,
            };
            match knowledge.remember(request).await {
                Ok(result) => tracing::debug!(outcome = ?result.outcome, "decision offered to the knowledge manager"),
                Err(err) => tracing::warn!(%err, "a decision could not be offered to the knowledge manager"),
            }
        }
    }

    /// Summarises the sessions that ended, went idle or asked for a summary; returns how many
    /// were updated.
    pub async fn sweep(&self, now: DateTime<Utc>) -> Result<usize, ApiError> {
        let config = &self.inner.config;
        let idle_before = if config.idle_timeout_secs > 0 {
            now - chrono::Duration::seconds(config.idle_timeout_secs.min(i64::MAX as u64 / 2) as i64)
        } else {
            DateTime::<Utc>::UNIX_EPOCH
        };
        let due = self
            .inner
            .sessions
            .sessions_to_summarize(idle_before, config.sweep_batch.max(1))
            .await?;
        let mut updated = 0;
        for session in due {
            if self.is_updating(&session.owner(), &session.session_id) {
                continue;
            }
            match self
                .update(
                    &session.owner(),
                    &session.session_id,
                    None,
                    None,
                    EngineChoice::Configured,
                )
                .await
            {
                Ok(result) if result.messages_read > 0 => updated += 1,
                Ok(_) => {}
                Err(err) => tracing::warn!(session_id = %session.session_id, %err, "idle session not summarised"),
            }
        }
        Ok(updated)
    }

    /// The background task of a node: sweeps every `sweep_interval_secs` until shutdown.
    pub async fn run_sweeper(self, shutdown: CancellationToken) {
        let interval = Duration::from_secs(self.inner.config.sweep_interval_secs.max(1));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            match self.sweep(Utc::now()).await {
                Ok(0) => {}
                Ok(updated) => tracing::info!(updated, "idle sessions summarised"),
                Err(err) => tracing::warn!(%err, "the idle-session sweep failed"),
            }
        }
    }

    /// The budget of a rendering (`None`: the configured default), refused out of its range.
    fn render_budget(&self, budget_tokens: Option<u32>) -> Result<u32, ApiError> {
        let config = &self.inner.config;
        let budget = budget_tokens.unwrap_or(config.default_render_tokens);
        if budget == 0 || budget > config.max_render_tokens {
            return Err(ApiError::invalid(
                "budget_tokens",
                format!("must be 1-{}", config.max_render_tokens),
            ));
        }
        Ok(budget)
    }

    /// A summary as Markdown within `budget` (checked), in `language` (`None`: its own).
    fn rendered(
        &self,
        summary: &SessionSummary,
        budget: u32,
        language: Option<Language>,
        now: Option<DateTime<Utc>>,
    ) -> Rendered {
        let markdown = render::markdown(
            summary,
            language.unwrap_or(summary.language),
            budget,
            now.unwrap_or_else(Utc::now),
            &self.inner.tokens,
        );
        let tokens = self.inner.tokens.count(&markdown) as u32;
        Rendered { markdown, tokens }
    }

    async fn visible_summary(&self, scope: &Scope, session_id: &str) -> Result<SessionSummary, ApiError> {
        if session_id.is_empty() {
            return Err(ApiError::invalid("session_id", "is required"));
        }
        let record = self
            .inner
            .sessions
            .get_summary(&scope.owner(), session_id)
            .await?
            .ok_or_else(|| summary_not_found(session_id))?;
        if let Some(project) = &scope.project_id
            && record.project_id.as_deref() != Some(project.as_str())
        {
            return Err(summary_not_found(session_id));
        }
        SessionSummary::from_record(record)
            .seen_by(&scope.role_id)
            .ok_or_else(|| summary_not_found(session_id))
    }
}

#[async_trait]
impl SummaryApi for Summarizer {
    async fn record(&self, request: RecordRequest) -> Result<RecordResult, ApiError> {
        let session_id = Self::session_id(&request.scope)?.to_string();
        if request.scope.role_id.is_empty() {
            return Err(ApiError::invalid("scope.role_id", "is required"));
        }
        self.check_messages(&request.messages, true)?;
        let owner = &request.scope.owner();
        // The messages of a gateway job are appended in the user's write section, which an
        // erasure holds too, while the job exists: an erasure deletes the user's jobs, and what
        // a job still running brings afterwards is dropped.
        let section = match &request.job_id {
            Some(job) => {
                let section = self.inner.sessions.lock_owner(owner).await?;
                if !self.inner.sessions.job_exists(owner, job).await? {
                    return Err(ApiError::failed_precondition(format!(
                        "job {job} no longer exists (user {:?} was erased while it ran): its messages are dropped",
                        owner.user_id
                    )));
                }
                Some(section)
            }
            None => None,
        };
        let (first_index, message_count) = self.append(&request.scope, &session_id, &request.messages).await?;
        drop(section);
        let asked = request
            .messages
            .iter()
            .any(|m| m.role == "user" && rules::asks_for_summary(&m.content));
        let behind = match self.inner.sessions.get_session(owner, &session_id).await? {
            Some(session) => i64::from(session.message_count) - 1 - i64::from(session.summarized_until),
            None => i64::from(message_count),
        };
        let every = i64::from(self.inner.config.auto_update_every);
        let scheduled = asked || request.phase_completed || (every > 0 && behind >= every);
        if scheduled {
            self.inner
                .sessions
                .flag_session(owner, &session_id, None, Some(true))
                .await?;
            self.schedule(owner, &session_id);
        }
        Ok(RecordResult {
            first_index,
            message_count,
            summary_scheduled: scheduled,
        })
    }

    async fn generate(&self, request: GenerateRequest) -> Result<GenerateResult, ApiError> {
        let session_id = Self::session_id(&request.scope)?.to_string();
        self.check_messages(&request.messages, false)?;
        if !request.messages.is_empty() {
            self.append(&request.scope, &session_id, &request.messages).await?;
        }
        self.update(
            &request.scope.owner(),
            &session_id,
            request.trajectory_start,
            request.trajectory_end,
            request.engine,
        )
        .await
    }

    async fn get(&self, scope: Scope, session_id: String) -> Result<SessionSummary, ApiError> {
        self.visible_summary(&scope, &session_id).await
    }

    async fn list(&self, request: ListRequest) -> Result<Vec<SessionSummary>, ApiError> {
        if request.limit == 0 || request.limit > 50 {
            return Err(ApiError::invalid("limit", "must be 1-50"));
        }
        let exclude = if request.other_roles_only {
            if request.scope.role_id.is_empty() {
                return Err(ApiError::invalid("scope.role_id", "is required with other_roles_only"));
            }
            Some(request.scope.role_id.as_str())
        } else {
            None
        };
        let records = self
            .inner
            .sessions
            .list_summaries(
                &request.scope.owner(),
                request.scope.project_id.as_deref(),
                exclude,
                request.limit,
            )
            .await?;
        Ok(records
            .into_iter()
            .filter_map(|record| SessionSummary::from_record(record).seen_by(&request.scope.role_id))
            .collect())
    }

    async fn render(&self, request: RenderRequest) -> Result<Rendered, ApiError> {
        let budget = self.render_budget(request.budget_tokens)?;
        let summary = self.visible_summary(&request.scope, &request.session_id).await?;
        Ok(self.rendered(&summary, budget, request.language, request.now))
    }

    /// The summary [`previous`](SummaryApi::previous) finds is the one `render` would read
    /// again for the scope (the same row, seen by the same role): it is rendered as it is.
    async fn previous_rendered(
        &self,
        scope: Scope,
        now: DateTime<Utc>,
        budget_tokens: u32,
        language: Language,
    ) -> Result<Option<(SessionSummary, Rendered)>, ApiError> {
        let budget = self.render_budget(Some(budget_tokens))?;
        let Some(previous) = self.previous(scope, now).await? else {
            return Ok(None);
        };
        let rendered = self.rendered(&previous, budget, Some(language), Some(now));
        Ok(Some((previous, rendered)))
    }

    async fn previous(&self, scope: Scope, now: DateTime<Utc>) -> Result<Option<SessionSummary>, ApiError> {
        if scope.role_id.trim().is_empty() {
            return Err(ApiError::invalid("scope.role_id", "is required"));
        }
        let store = &self.inner.sessions;
        // The session and its summary in one read.
        let find = |role: Option<String>| {
            let scope = &scope;
            async move {
                store
                    .last_session_with_summary(
                        &scope.owner(),
                        scope.project_id.as_deref(),
                        role.as_deref(),
                        scope.session_id.as_deref(),
                        now,
                    )
                    .await
            }
        };
        let mut found = find(Some(scope.role_id.clone())).await?;
        if found.is_none() && scope.project_id.is_some() {
            found = find(None).await?;
        }
        let Some((session, stored)) = found else {
            return Ok(None);
        };
        // A session that ended a minute ago has no summary yet, or one that stops before its
        // last messages: the new session starts from all of it.
        let behind = i64::from(session.message_count) - 1 > i64::from(session.summarized_until);
        let summary = if behind {
            let updated = self
                .update(
                    &session.owner(),
                    &session.session_id,
                    None,
                    None,
                    EngineChoice::Configured,
                )
                .await?;
            Some(updated.summary)
        } else {
            stored.map(SessionSummary::from_record)
        };
        // Another role's session gives only what it shared with the project, and nothing when
        // it shared nothing.
        Ok(summary.and_then(|summary| {
            let own = summary.scope.role_id == scope.role_id;
            summary
                .seen_by(&scope.role_id)
                .filter(|shown| own || !shown.content().is_empty())
        }))
    }

    async fn end_session(&self, scope: Scope) -> Result<bool, ApiError> {
        let session_id = Self::session_id(&scope)?.to_string();
        let session = self
            .inner
            .sessions
            .get_session(&scope.owner(), &session_id)
            .await?
            .ok_or_else(|| session_not_found(&session_id))?;
        self.inner
            .sessions
            .flag_session(&scope.owner(), &session_id, Some(true), None)
            .await?;
        let behind = i64::from(session.message_count) - 1 > i64::from(session.summarized_until);
        if behind {
            self.schedule(&scope.owner(), &session_id);
        }
        Ok(behind)
    }
}
