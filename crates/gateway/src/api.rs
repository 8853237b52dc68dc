//! The gateway's domain API: a turn to prepare, the context it gets, a turn to complete, and
//! what the gateway offers ([`GatewayApi`]), with no protobuf types but the artifact compact it
//! passes through.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_backends::sql::{JobRecord, JobStatus};
use thinkus_common::ApiError;
use thinkus_common::model::{ControlDecision, Owner, Scope};
use thinkus_knowledge_manager::api::Erasure;

/// A user message about to be answered.
#[derive(Debug, Clone, Default)]
pub struct PrepareRequest {
    pub scope: Scope,
    pub message: String,
    /// `None`: the configured default.
    pub budget_tokens: Option<u32>,
    pub recent_messages: Vec<String>,
    pub now: Option<DateTime<Utc>>,
}

/// The sections of a prepared context, in the order they appear (seed 002 section 4.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SectionKind {
    /// The user's standing rules and profile, and the conflicts waiting for the user: in every
    /// context, first (seed 004 section 10.4).
    Standing,
    Decisions,
    Preferences,
    Conclusions,
    Insights,
    #[default]
    Other,
    Artifacts,
    LastSession,
}

/// One section of the context.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub kind: SectionKind,
    pub title: String,
    pub text: String,
    pub tokens: u32,
}

/// What a trace item refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    Memory,
    Artifact,
    Summary,
}

/// One thing put into (or left out of) the context, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceItem {
    pub kind: TraceKind,
    pub id: String,
    pub score: f64,
    pub confidence: f64,
    pub reason: String,
    pub included: bool,
    pub parts: Option<thinkus_retriever::api::ScoreParts>,
    pub tokens: u32,
}

/// The context to answer a turn with.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub context: String,
    pub sections: Vec<Section>,
    pub tokens_used: u32,
    pub budget_tokens: u32,
    pub decision: ControlDecision,
    pub items: Vec<TraceItem>,
    pub timings_ms: BTreeMap<String, f64>,
    /// The optional upstreams the turn went without, each naming the upstream, where it
    /// answers, what failed and what the context lacks for it.
    pub degraded: Vec<String>,
}

/// One tool call of the assistant's turn.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub output: String,
    pub mime_type: String,
    pub path: String,
}

/// What became of one tool output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallResult {
    pub id: String,
    pub offloaded: bool,
    pub artifact_id: Option<String>,
    pub compact: Option<thinkus_proto::common::ArtifactCompact>,
    pub replacement: String,
    pub original_tokens: u32,
}

/// A finished exchange.
#[derive(Debug, Clone, Default)]
pub struct CompleteRequest {
    pub scope: Scope,
    pub user_message: String,
    pub assistant_message: String,
    pub tool_calls: Vec<ToolCall>,
    pub not_memorable: bool,
    pub request_id: Option<String>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub injected_memory_ids: Vec<String>,
    /// The turn ends its session: its summary is completed once the exchange is recorded.
    pub end_session: bool,
    /// Wait for the learning job (up to `gateway.learn_wait_ms`) and report it.
    pub wait_for_learning: bool,
}

/// What completing a turn did.
#[derive(Debug, Clone, PartialEq)]
pub struct Completed {
    pub tool_calls: Vec<ToolCallResult>,
    pub job_ids: Vec<String>,
    /// With `wait_for_learning`: the learning job when the wait ended.
    pub learning: Option<thinkus_backends::sql::JobRecord>,
}

/// A message to answer end to end (`Converse`): prepared, asked of the configured LLM, completed.
#[derive(Debug, Clone, Default)]
pub struct ConverseRequest {
    pub scope: Scope,
    pub message: String,
    /// `None`: the configured default.
    pub budget_tokens: Option<u32>,
    /// The executive's persona; a neutral one when `None`.
    pub system_prompt: Option<String>,
    pub request_id: Option<String>,
}

/// The answer to a [`ConverseRequest`] and what went into it.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversed {
    pub reply: String,
    pub prepared: Prepared,
    pub completed: Completed,
}

/// A page of a user's jobs (`scope.session_id` narrows to one session).
#[derive(Debug, Clone)]
pub struct JobsRequest {
    pub scope: Scope,
    /// `None`: every status.
    pub status: Option<JobStatus>,
    pub limit: usize,
    pub offset: usize,
}

/// What the gateway offers, in process (the [`crate::Gateway`] itself) or over gRPC
/// ([`crate::GatewayGrpcClient`]). The REST facade and the memory page call the service in
/// process; they are not RPCs of their own.
#[async_trait]
pub trait GatewayApi: Send + Sync {
    /// The context of one turn, within its budget, with a trace of what was used and why.
    async fn prepare_turn(&self, request: PrepareRequest) -> Result<Prepared, ApiError>;
    /// Offloads large tool outputs, queues learning and the summary update.
    async fn complete_turn(&self, request: CompleteRequest) -> Result<Completed, ApiError>;
    /// Prepares, asks the configured LLM, completes.
    async fn converse(&self, request: ConverseRequest) -> Result<Conversed, ApiError>;
    /// A user's jobs, newest first. Over gRPC a job carries what the wire does (its payload,
    /// lease and dedupe key stay in the gateway).
    async fn list_jobs(&self, request: JobsRequest) -> Result<Vec<JobRecord>, ApiError>;
    /// Erases everything `owner` owns. `actor` names who erased in the erasure's record in
    /// process; over gRPC the gateway names it from the caller's credential instead.
    async fn erase_user(&self, owner: Owner, actor: String) -> Result<Erasure, ApiError>;
}

/// What a learning job did (stored as the job's result).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LearnReport {
    pub candidates: u32,
    pub written: u32,
    pub reinforced: u32,
    pub queued: u32,
    pub rejected: u32,
    pub refused: u32,
    pub refusals: Vec<Refusal>,
}

/// A memory the quota refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Refusal {
    pub memory_type: thinkus_common::model::MemoryType,
    pub summary: String,
    pub reason: String,
}
