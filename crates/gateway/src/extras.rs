//! What the gateway needs from the artifact and summary services, stated as two small ports so
//! the turn logic does not depend on how those services are reached.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Message, Scope};

use crate::api::ToolCall;

/// An artifact worth showing for a message: its compact, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct RelevantArtifact {
    pub id: String,
    pub text: String,
    pub score: f64,
    pub reason: String,
}

/// A tool output stored as an artifact.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredOutput {
    pub artifact_id: String,
    pub compact: thinkus_proto::common::ArtifactCompact,
}

/// The summary a new session starts from, rendered for the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct LastSummary {
    pub id: String,
    pub session_id: String,
    pub text: String,
    /// As of when: the last message it covers.
    pub at: DateTime<Utc>,
}

/// The artifact service, as the gateway uses it.
#[async_trait]
pub trait ArtifactPort: Send + Sync {
    /// The session's artifacts relevant to `message`, best first, at most `limit`.
    async fn relevant(
        &self,
        scope: &Scope,
        message: &str,
        limit: usize,
        language: Language,
    ) -> Result<Vec<RelevantArtifact>, ApiError>;

    /// Stores one tool output and returns its compact; the call is taken by value, so its
    /// output becomes the artifact's bytes without a copy.
    async fn store_tool_output(&self, scope: &Scope, call: ToolCall) -> Result<StoredOutput, ApiError>;
}

/// The summary service, as the gateway uses it.
#[async_trait]
pub trait SummaryPort: Send + Sync {
    /// The summary a new session of `scope` starts from (the previous session of its role in
    /// the project, brought up to date), rendered within `budget_tokens` for a reader at `now`.
    async fn last_summary(
        &self,
        scope: &Scope,
        budget_tokens: u32,
        language: Language,
        now: DateTime<Utc>,
    ) -> Result<Option<LastSummary>, ApiError>;

    /// Adds messages to the session's trajectory (the summary is kept current from them).
    /// `job_id` names the gateway job they come from: nothing is added once an erasure of the
    /// user deleted it.
    async fn record(&self, scope: &Scope, messages: Vec<Message>, job_id: Option<&str>) -> Result<(), ApiError>;

    /// Ends the session: its final summary is written (in the background).
    async fn end(&self, scope: &Scope) -> Result<(), ApiError>;
}
