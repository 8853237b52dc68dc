//! The summary service's domain API: what it is asked and what it answers, with no protobuf
//! types.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thinkus_backends::sql::SummaryRecord;
use thinkus_common::ApiError;
use thinkus_common::model::{ArtifactRef, Decision, EngineChoice, Language, Message, Scope};

/// A session's structured summary (seed 000 section 2.3).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// "sum_" followed by a UUIDv7.
    pub id: String,
    /// The user, the role that held the session, its project and the session itself.
    pub scope: Scope,
    pub goal: String,
    pub constraints: Vec<String>,
    pub decisions: Vec<Decision>,
    pub progress: Vec<String>,
    pub artifacts: Vec<ArtifactRef>,
    pub next_actions: Vec<String>,
    pub risks: Vec<String>,
    pub open_questions: Vec<String>,
    /// Index of the first message covered.
    pub trajectory_start: i32,
    /// Index of the last message covered (inclusive).
    pub trajectory_end: i32,
    pub language: Language,
    /// "rules" or "llm": the engine of the last update.
    pub engine: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl SessionSummary {
    /// Reads a stored summary; an unknown language reads as English.
    pub fn from_record(record: SummaryRecord) -> Self {
        Self {
            id: record.id,
            scope: Scope {
                tenant_id: record.tenant_id,
                user_id: record.user_id,
                role_id: record.role_id,
                project_id: record.project_id,
                session_id: Some(record.session_id),
            },
            goal: record.goal,
            constraints: record.constraints,
            decisions: record.decisions,
            progress: record.progress,
            artifacts: record.artifacts,
            next_actions: record.next_actions,
            risks: record.risks,
            open_questions: record.open_questions,
            trajectory_start: record.trajectory_start,
            trajectory_end: record.trajectory_end,
            language: record.language.parse().unwrap_or(Language::En),
            engine: record.engine,
            created_at: record.created_at,
            updated_at: record.updated_at,
        }
    }

    /// The row to store.
    pub fn to_record(&self) -> SummaryRecord {
        SummaryRecord {
            id: self.id.clone(),
            tenant_id: self.scope.tenant_id.clone(),
            user_id: self.scope.user_id.clone(),
            role_id: self.scope.role_id.clone(),
            project_id: self.scope.project_id.clone(),
            session_id: self.scope.session_id.clone().unwrap_or_default(),
            goal: self.goal.clone(),
            constraints: self.constraints.clone(),
            decisions: self.decisions.clone(),
            progress: self.progress.clone(),
            artifacts: self.artifacts.clone(),
            next_actions: self.next_actions.clone(),
            risks: self.risks.clone(),
            open_questions: self.open_questions.clone(),
            trajectory_start: self.trajectory_start,
            trajectory_end: self.trajectory_end,
            language: self.language.as_str().to_string(),
            engine: self.engine.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// The summary as `reader_role` may read it. The role that held the session, and the
    /// person's view (no role), read all of it. Another role reads only what the session gave
    /// its project: the decisions, which the summary offers the knowledge manager as project
    /// decisions visible to every role of the project, and the artifacts, which the artifact
    /// service finds for every role of the project. The rest (goal, constraints, progress, next
    /// steps, risks, open questions) is written from every message, a preference or feedback told
    /// to that role alone included, and stays with it, as the memories and turns learned from
    /// such an exchange do. Outside any project nothing is shared: `None`, as every memory and
    /// turn learned there is private to its role.
    pub fn seen_by(self, reader_role: &str) -> Option<Self> {
        if reader_role.is_empty() || reader_role == self.scope.role_id {
            return Some(self);
        }
        self.scope.project_id.as_ref()?;
        Some(Self {
            goal: String::new(),
            constraints: Vec::new(),
            progress: Vec::new(),
            next_actions: Vec::new(),
            risks: Vec::new(),
            open_questions: Vec::new(),
            ..self
        })
    }

    /// The content of the summary without its bookkeeping, as the engines read and write it.
    pub fn content(&self) -> SummaryContent {
        SummaryContent {
            goal: self.goal.clone(),
            constraints: self.constraints.clone(),
            decisions: self.decisions.clone(),
            progress: self.progress.clone(),
            artifacts: self.artifacts.clone(),
            next_actions: self.next_actions.clone(),
            risks: self.risks.clone(),
            open_questions: self.open_questions.clone(),
        }
    }
}

/// The sections of a summary, in the JSON shape of the design's prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SummaryContent {
    pub goal: String,
    pub constraints: Vec<String>,
    pub decisions: Vec<Decision>,
    pub progress: Vec<String>,
    pub artifacts: Vec<ArtifactRef>,
    pub next_actions: Vec<String>,
    pub risks: Vec<String>,
    pub open_questions: Vec<String>,
}

impl SummaryContent {
    pub fn is_empty(&self) -> bool {
        self.goal.is_empty()
            && self.constraints.is_empty()
            && self.decisions.is_empty()
            && self.progress.is_empty()
            && self.artifacts.is_empty()
            && self.next_actions.is_empty()
            && self.risks.is_empty()
            && self.open_questions.is_empty()
    }
}

/// Messages to append to a session.
#[derive(Debug, Clone, Default)]
pub struct RecordRequest {
    /// user_id, role_id and session_id are required.
    pub scope: Scope,
    /// 1 to the configured maximum, oldest first.
    pub messages: Vec<Message>,
    /// The messages close a phase: an update is scheduled.
    pub phase_completed: bool,
    /// The gateway job the messages come from: nothing is appended once an erasure of the
    /// user deleted it.
    pub job_id: Option<String>,
}

/// The session after an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordResult {
    pub first_index: u32,
    pub message_count: u32,
    /// An update of the summary was scheduled in the background.
    pub summary_scheduled: bool,
}

/// A summary update.
#[derive(Debug, Clone, Default)]
pub struct GenerateRequest {
    /// user_id and session_id are required; role_id is needed only when `messages` create the
    /// session.
    pub scope: Scope,
    /// Appended before summarising, optional.
    pub messages: Vec<Message>,
    /// Summarise from here instead of after the stored summary's end (0: regenerate).
    pub trajectory_start: Option<u32>,
    /// Summarise up to here (inclusive) instead of the last message.
    pub trajectory_end: Option<u32>,
    pub engine: EngineChoice,
}

/// The summary after an update.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateResult {
    pub summary: SessionSummary,
    /// Messages read for this update (0 when the summary was already current).
    pub messages_read: u32,
}

/// A listing of recent summaries.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    /// user_id is required; project_id narrows to one project (every role's summaries of it).
    pub scope: Scope,
    /// 1-50.
    pub limit: usize,
    /// Leave out the summaries of `scope.role_id`.
    pub other_roles_only: bool,
}

/// A rendering of one summary.
#[derive(Debug, Clone, Default)]
pub struct RenderRequest {
    /// Who asks: the summary must be this user's (and of this project when one is set).
    pub scope: Scope,
    pub session_id: String,
    /// `None` means the configured default.
    pub budget_tokens: Option<u32>,
    /// `None` means the summary's language.
    pub language: Option<Language>,
    pub now: Option<DateTime<Utc>>,
}

/// A summary as Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub markdown: String,
    pub tokens: u32,
}

/// What the summary service offers, in process or over gRPC.
#[async_trait]
pub trait SummaryApi: Send + Sync {
    /// Appends messages; a summary request, a phase completion or a long unsummarised tail
    /// schedules an update in the background. Never waits for a summary.
    async fn record(&self, request: RecordRequest) -> Result<RecordResult, ApiError>;
    /// Summarises the session now, incrementally.
    async fn generate(&self, request: GenerateRequest) -> Result<GenerateResult, ApiError>;
    /// The summary of one session of the scope's user (and project, when set).
    async fn get(&self, scope: Scope, session_id: String) -> Result<SessionSummary, ApiError>;
    /// Recent summaries of a user (and project), newest first, every role's.
    async fn list(&self, request: ListRequest) -> Result<Vec<SessionSummary>, ApiError>;
    /// One summary as Markdown within a token budget.
    async fn render(&self, request: RenderRequest) -> Result<Rendered, ApiError>;
    /// Marks the session ended; true when an update was scheduled.
    async fn end_session(&self, scope: Scope) -> Result<bool, ApiError>;
    /// The summary a new session of `scope` starts from: the latest session of the same role
    /// in the scope's project whose last message came at or before `now` (or, when the role
    /// has none, of any role in the project), other than the scope's own session, brought up to
    /// date first when messages came after its summary. `None` when there is none.
    async fn previous(&self, scope: Scope, now: DateTime<Utc>) -> Result<Option<SessionSummary>, ApiError>;
    /// [`previous`](Self::previous) and that summary rendered within `budget_tokens` in
    /// `language`, as [`render`](Self::render) renders it for the scope's project (a new
    /// session's first context). In process the summary is read once; over gRPC these are the
    /// two calls.
    async fn previous_rendered(
        &self,
        scope: Scope,
        now: DateTime<Utc>,
        budget_tokens: u32,
        language: Language,
    ) -> Result<Option<(SessionSummary, Rendered)>, ApiError> {
        let Some(previous) = self.previous(scope.clone(), now).await? else {
            return Ok(None);
        };
        let rendered = self
            .render(RenderRequest {
                session_id: previous.scope.session_id.clone().unwrap_or_default(),
                scope: Scope {
                    session_id: None,
                    ..scope
                },
                budget_tokens: Some(budget_tokens),
                language: Some(language),
                now: Some(now),
            })
            .await?;
        Ok(Some((previous, rendered)))
    }
}
