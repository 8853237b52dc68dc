//! The knowledge manager's domain API.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thinkus_backends::sql::{Change, JobStatus};
use thinkus_common::ApiError;
use thinkus_common::model::{
    ArtifactRef, EngineChoice, Language, Memory, MemorySource, MemoryStatus, MemoryType, Message, Owner, Scope,
    Visibility,
};

/// The content of a memory to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryDraft {
    pub memory_type: MemoryType,
    pub content: String,
    /// Derived from the content when `None`; cut to 50 characters.
    pub summary: Option<String>,
    /// 1-5; `None` means 3.
    pub importance: Option<u8>,
    pub tags: Vec<String>,
    pub visibility: Option<Visibility>,
    pub source: Option<MemorySource>,
    /// 0-1; `None` means 1.0 for user input, the engine's estimate otherwise.
    pub confidence: Option<f64>,
    pub context: String,
    pub related_decision_ids: Vec<String>,
    pub artifact_refs: Vec<ArtifactRef>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub iteration_id: Option<String>,
    /// Detected from the content when `None`.
    pub subject: Option<String>,
    /// Who said it, for a conversation turn (a corrected turn keeps its speaker; turns are
    /// otherwise stored through `ingest_turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
}

impl MemoryDraft {
    pub fn new(memory_type: MemoryType, content: impl Into<String>) -> Self {
        Self {
            memory_type,
            content: content.into(),
            summary: None,
            importance: None,
            tags: Vec::new(),
            visibility: None,
            source: None,
            confidence: None,
            context: String::new(),
            related_decision_ids: Vec::new(),
            artifact_refs: Vec::new(),
            occurred_at: None,
            iteration_id: None,
            subject: None,
            speaker: None,
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOutcome {
    Created,
    Reinforced,
    ReplacedOlder,
    Queued,
    Rejected,
    DuplicateRequest,
    /// Admitted but refused by the role's quota: the reason names the plan and the limit.
    Refused,
}

impl WriteOutcome {
    /// The outcome as people read it ("replaced older").
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Reinforced => "reinforced",
            Self::ReplacedOlder => "replaced older",
            Self::Queued => "queued",
            Self::Rejected => "rejected",
            Self::DuplicateRequest => "duplicate request",
            Self::Refused => "refused",
        }
    }
}

/// The result of writing one draft.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteResult {
    pub outcome: WriteOutcome,
    pub memory: Option<Memory>,
    pub replaced_ids: Vec<String>,
    pub candidate_id: Option<String>,
    pub reason: String,
    pub score: f64,
    /// What the result is about when no memory was written (queued, rejected, refused).
    #[serde(default)]
    pub draft: Option<DraftBrief>,
}

impl WriteResult {
    pub fn rejected(reason: impl Into<String>, score: f64) -> Self {
        Self {
            outcome: WriteOutcome::Rejected,
            memory: None,
            replaced_ids: Vec::new(),
            candidate_id: None,
            reason: reason.into(),
            score,
            draft: None,
        }
    }

    /// The result, naming the draft it is about.
    pub fn about(mut self, draft: &MemoryDraft) -> Self {
        self.draft = Some(DraftBrief {
            memory_type: draft.memory_type,
            summary: draft
                .summary
                .clone()
                .filter(|s| !s.trim().is_empty())
                .map(|s| thinkus_common::text::summarize_to(&s, 50))
                .unwrap_or_else(|| thinkus_common::text::summarize_to(draft.content.trim(), 50)),
        });
        self
    }
}

/// A draft's type and summary, for results that wrote no memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftBrief {
    pub memory_type: MemoryType,
    pub summary: String,
}

/// An explicit memory write.
#[derive(Debug, Clone)]
pub struct RememberRequest {
    pub scope: Scope,
    pub draft: MemoryDraft,
    pub request_id: Option<String>,
    pub skip_dedup: bool,
    /// A trusted caller writes the draft without admission; names it for the history (the
    /// gRPC adapter allows it to keys that may act for every user).
    pub admission_bypassed_by: Option<String>,
}

/// One raw conversation turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    pub speaker: String,
    pub text: String,
    pub occurred_at: Option<DateTime<Utc>>,
    pub external_id: Option<String>,
    pub caption: Option<String>,
    /// The memories learned from the exchange this turn belongs to: a context shows either
    /// them or the turn, not both.
    pub extracted_memory_ids: Vec<String>,
}

/// Turns of one conversation to store.
#[derive(Debug, Clone)]
pub struct IngestTurnsRequest {
    pub scope: Scope,
    pub turns: Vec<Turn>,
    pub visibility: Visibility,
    /// The gateway job the turns come from: nothing is stored once an erasure deleted it.
    pub job_id: Option<String>,
}

/// The ids of stored turns, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestResult {
    pub memory_ids: Vec<String>,
    pub created: u32,
}

/// A listing of memories visible to a scope.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub scope: Scope,
    pub types: Vec<MemoryType>,
    pub statuses: Vec<MemoryStatus>,
    pub limit: usize,
    pub offset: usize,
}

/// A conversation to learn from.
#[derive(Debug, Clone, Default)]
pub struct LearnRequest {
    pub scope: Scope,
    pub messages: Vec<Message>,
    pub engine: EngineChoice,
    pub request_id: Option<String>,
    pub not_memorable: bool,
    pub dry_run: bool,
    pub injected_memories: Vec<String>,
    /// The gateway job the conversation comes from: nothing is written once an erasure
    /// deleted it.
    pub job_id: Option<String>,
}

/// What learning from a conversation did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnResult {
    pub results: Vec<WriteResult>,
    pub engine: String,
    pub candidates: u32,
}

impl LearnResult {
    /// How many candidates ended with `outcome`.
    pub fn count(&self, outcome: WriteOutcome) -> u32 {
        self.results.iter().filter(|r| r.outcome == outcome).count() as u32
    }
}

/// A value replaced by another ("$500" by "$800"), as said in a turn or found when a newer
/// memory replaced an older one.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueChange {
    pub old: String,
    /// `None` when only the old value was dropped.
    pub new: Option<String>,
    pub at: DateTime<Utc>,
    /// The turn or memory that states the change.
    pub memory_id: String,
    /// The session that turn or memory was said in.
    pub session_id: Option<String>,
    /// The sentence of that turn or memory that states the change, as it was said.
    pub statement: String,
}

impl ValueChange {
    /// The change as told to a reader who may not read what states it: the old value and when,
    /// without the new value, the record, its session or its sentence.
    pub fn old_value_only(self) -> Self {
        Self {
            new: None,
            memory_id: String::new(),
            session_id: None,
            statement: String::new(),
            ..self
        }
    }
}

/// Correction actions (seed 001 section 3.5.3), and the priority a person adjusts (section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionAction {
    Suppress,
    Freeze,
    Replace,
    Restore,
    /// A new importance, 1-5; freshness follows in proportion.
    SetImportance(u8),
}

impl CorrectionAction {
    /// The action as the history and people read it ("set importance").
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Suppress => "suppress",
            Self::Freeze => "freeze",
            Self::Replace => "replace",
            Self::Restore => "restore",
            Self::SetImportance(_) => "set importance",
        }
    }
}

/// A correction.
#[derive(Debug, Clone)]
pub struct CorrectRequest {
    pub scope: Scope,
    pub memory_id: String,
    pub action: CorrectionAction,
    pub evidence: String,
    pub new_content: Option<String>,
    pub new_summary: Option<String>,
    pub request_id: Option<String>,
}

/// A corrected memory and, for a replacement, its successor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectResult {
    pub memory: Memory,
    pub replacement: Option<Memory>,
}

/// A queued candidate, as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateView {
    pub id: String,
    pub scope: Scope,
    pub draft: MemoryDraft,
    pub reason: String,
    pub score: f64,
    pub evidence_count: u32,
    pub status: thinkus_backends::sql::CandidateStatus,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    pub memory_id: Option<String>,
    /// A pending conflict: the memories whose value this candidate contradicts.
    pub conflicts_with: Vec<String>,
}

/// A new value held beside the value it contradicts until a person chooses (seed 001 section
/// 3.5.4): it came with low confidence or from an inference. Its id is the candidate's.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub id: String,
    /// Where the new value would be written.
    pub scope: Scope,
    pub subject: String,
    /// The memories holding the current value, still active.
    pub current: Vec<Memory>,
    pub proposed: MemoryDraft,
    pub reason: String,
    pub evidence_count: u32,
    pub created_at: DateTime<Utc>,
    /// "budget: $500 or $800? unconfirmed" / "预算：$500 还是 $800？待确认".
    pub question: String,
}

/// The side of a conflict a person keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictChoice {
    /// The current value: the new one is discarded and the current one confirmed.
    Current,
    /// The new value: written, it replaces the current one.
    Proposed,
}

/// What resolving a conflict did.
#[derive(Debug, Clone, PartialEq)]
pub struct ConflictResolution {
    /// The memory holding the kept value.
    pub kept: Memory,
    /// The memories the new value replaced (when it was kept).
    pub replaced_ids: Vec<String>,
}

/// What goes into every context of a role (seed 004 section 10.4: "固定注入：BOSS.md +
/// Profile"), whatever the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// Standing rules the user gave: cross-project constraints and feedback, most important
    /// first.
    pub rules: Vec<Memory>,
    /// The profile: cross-project preferences and facts, most important first.
    pub profile: Vec<Memory>,
    /// Pending conflicts of the role and project.
    pub conflicts: Vec<Conflict>,
    /// The language most of these are in.
    pub language: Language,
}

/// One file of a Markdown export, its path relative to the export folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkdownFile {
    pub path: String,
    pub content: String,
}

/// What one line of an import did (or would do, in a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportChange {
    /// "replace", "suppress", "create", "queue" or "skip".
    pub action: String,
    pub path: String,
    /// 1-based; 0 for a deleted line.
    pub line: u32,
    pub memory_id: Option<String>,
    pub detail: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReport {
    pub changes: Vec<ImportChange>,
    pub lines: u32,
    pub replaced: u32,
    pub suppressed: u32,
    pub created: u32,
    pub queued: u32,
    pub skipped: u32,
}

/// A role's quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    pub plan: String,
    pub used: u64,
    /// 0 means unlimited.
    pub limit: u64,
}

/// Whose data an administrative sweep covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owners {
    /// One user of one tenant.
    One(Owner),
    /// Every user of a tenant (an admin key of that tenant).
    Tenant(String),
    /// Every user of every tenant (a service key, dev mode, the node's own schedule).
    All,
}

/// What a maintenance run changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub decayed: u64,
    pub forgotten: u64,
}

/// The result of finalising an iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalizeResult {
    pub promoted: Vec<Memory>,
    pub skipped_ids: Vec<String>,
}

/// How far a rebuild job got, kept as the job's result while it runs and once it is done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildProgress {
    /// Users to rebuild.
    pub users_total: u64,
    /// Users whose new points were swapped in.
    pub users_done: u64,
    /// Memories embedded aside for the user being rebuilt.
    pub staged: u64,
    /// Memories swapped into the index over the users done.
    pub indexed: u64,
    /// Points removed because their memory is no longer stored.
    pub removed: u64,
}

/// An index rebuild job as `GetIndexJob` shows it (run by `crate::rebuild`).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexJob {
    pub id: String,
    pub status: JobStatus,
    pub owners: Owners,
    pub progress: RebuildProgress,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What the knowledge manager offers, in process or over gRPC.
#[async_trait]
pub trait KnowledgeApi: Send + Sync {
    async fn remember(&self, request: RememberRequest) -> Result<WriteResult, ApiError>;
    async fn ingest_turns(&self, request: IngestTurnsRequest) -> Result<IngestResult, ApiError>;
    async fn learn(&self, request: LearnRequest) -> Result<LearnResult, ApiError>;
    /// A memory visible to the scope's role; with an empty role, the person's view (every
    /// role's memories): callers in this process are the person's tools (the memory page, the
    /// CLI, REST for a person), and over gRPC the client asks for it explicitly (`all_roles`),
    /// which the adapter requires of an empty role_id. Likewise `list_memories` and `history`.
    async fn get_memory(&self, scope: Scope, memory_id: String) -> Result<Memory, ApiError>;
    async fn list_memories(&self, request: ListRequest) -> Result<Vec<Memory>, ApiError>;
    async fn correct(&self, request: CorrectRequest) -> Result<CorrectResult, ApiError>;
    async fn merge(
        &self,
        scope: Scope,
        memory_ids: Vec<String>,
        engine: EngineChoice,
        request_id: Option<String>,
    ) -> Result<Memory, ApiError>;
    async fn delete(&self, scope: Scope, memory_id: String, reason: String) -> Result<(), ApiError>;
    async fn history(&self, scope: Scope, memory_id: String) -> Result<Vec<Change>, ApiError>;
    async fn list_candidates(
        &self,
        scope: Scope,
        status: thinkus_backends::sql::CandidateStatus,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<CandidateView>, ApiError>;
    async fn approve_candidate(
        &self,
        scope: Scope,
        candidate_id: String,
        edited_content: Option<String>,
    ) -> Result<WriteResult, ApiError>;
    async fn reject_candidate(&self, scope: Scope, candidate_id: String, reason: String) -> Result<(), ApiError>;
    async fn promote(
        &self,
        scope: Scope,
        memory_id: String,
        target: Option<MemoryType>,
        title: Option<String>,
    ) -> Result<Memory, ApiError>;
    async fn finalize_iteration(&self, scope: Scope, iteration_id: String) -> Result<FinalizeResult, ApiError>;
    async fn quota(&self, scope: Scope) -> Result<Quota, ApiError>;
    async fn set_plan(&self, owner: Owner, plan: String) -> Result<(), ApiError>;
    /// Sweeps one user, a tenant's users or everyone.
    async fn run_maintenance(
        &self,
        owners: Owners,
        decay: bool,
        forget: bool,
        now: Option<DateTime<Utc>>,
    ) -> Result<MaintenanceReport, ApiError>;
    /// Starts a job that rebuilds the index of one user, a tenant's users or everyone (or finds
    /// the same rebuild already queued or running).
    async fn rebuild_index(&self, owners: Owners) -> Result<IndexJob, ApiError>;
    /// An index rebuild job and its progress.
    async fn index_job(&self, job_id: String) -> Result<IndexJob, ApiError>;
    /// Pending conflicts of the scope's user (narrowed by role and project), newest first.
    async fn list_conflicts(&self, scope: Scope, limit: usize) -> Result<Vec<Conflict>, ApiError>;
    /// Keeps one side of a pending conflict.
    async fn resolve_conflict(
        &self,
        scope: Scope,
        conflict_id: String,
        keep: ConflictChoice,
        reason: String,
    ) -> Result<ConflictResolution, ApiError>;
    /// The standing rules, profile and pending conflicts of a role: cheap enough for every turn.
    async fn standing(&self, scope: Scope, limit: usize) -> Result<Standing, ApiError>;
    /// The user's memory as Markdown files (`scope.project_id` narrows to one project).
    async fn export_markdown(&self, scope: Scope, language: Option<Language>) -> Result<Vec<MarkdownFile>, ApiError>;
    /// Reads edited Markdown files back (see `markdown`).
    async fn import_markdown(
        &self,
        scope: Scope,
        files: Vec<MarkdownFile>,
        dry_run: bool,
    ) -> Result<ImportReport, ApiError>;
    /// The roles holding memories or candidates of an owner, sorted.
    async fn list_roles(&self, owner: Owner) -> Result<Vec<String>, ApiError>;
    /// The value changes the reader of `scope` may see, newest first, at most `limit`.
    async fn value_changes(&self, scope: Scope, limit: usize) -> Result<Vec<ValueChange>, ApiError>;
    /// Everything the owner holds, as one JSON document (`ExportUser`, see `data_rights`).
    async fn export_user(&self, owner: Owner) -> Result<serde_json::Value, ApiError>;
    /// Erases what the database and the vector index hold of the owner and records it
    /// (`EraseUser`, see `data_rights`); `artifacts_erased` were removed before by the
    /// artifact service.
    async fn erase_user(&self, owner: Owner, actor: String, artifacts_erased: u64) -> Result<Erasure, ApiError>;
}

/// What an erasure removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Erasure {
    /// The erasure's record; `None` when nothing was left to erase.
    pub id: Option<String>,
    pub counts: thinkus_backends::sql::ErasureCounts,
}
