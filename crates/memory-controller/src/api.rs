//! The memory controller's domain API.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_common::ApiError;
use thinkus_common::model::{ControlDecision, EngineChoice, MemoryType, QueryEmbedding, Scope};

/// One user message to decide on.
#[derive(Debug, Clone, Default)]
pub struct DecideRequest {
    pub scope: Scope,
    pub message: String,
    pub message_count: u32,
    pub recent_messages: Vec<String>,
    pub type_hints: Vec<MemoryType>,
    pub engine: EngineChoice,
    pub now: Option<DateTime<Utc>>,
    /// The message's embedding, when the caller computed it (the gateway embeds each user
    /// message once); the rule engine does not read it.
    pub query_embedding: Option<QueryEmbedding>,
}

/// What the controller offers, in process or over gRPC.
#[async_trait]
pub trait ControllerApi: Send + Sync {
    async fn decide(&self, request: DecideRequest) -> Result<ControlDecision, ApiError>;
}
