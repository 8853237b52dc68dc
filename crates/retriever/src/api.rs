//! The retriever's domain API: what it is asked and what it answers, with no protobuf types.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thinkus_backends::vector::Layers;
use thinkus_common::ApiError;
use thinkus_common::model::{
    ArtifactRef, Language, MemoryStatus, MemoryType, QueryEmbedding, RetrievalMode, Scope, TimeRange, Visibility,
};

/// A recall.
#[derive(Debug, Clone, Default)]
pub struct RecallRequest {
    pub scope: Scope,
    pub query: String,
    pub mode: RetrievalMode,
    pub types: Vec<MemoryType>,
    pub time_range: Option<TimeRange>,
    /// `None` means the configured default.
    pub budget_tokens: Option<u32>,
    /// `None` means as many as the budget allows.
    pub limit: Option<usize>,
    /// Empty means active only.
    pub statuses: Vec<MemoryStatus>,
    pub visibilities: Vec<Visibility>,
    pub tags: Vec<String>,
    pub session_only: bool,
    pub layers: Layers,
    /// `None` means the configured default.
    pub details_limit: Option<usize>,
    pub language: Option<Language>,
    pub now: Option<DateTime<Utc>>,
    /// The query's embedding, when the caller computed it (the gateway embeds each user message
    /// once): searched with instead of embedding `query` again, unless it came from another
    /// model.
    pub query_embedding: Option<QueryEmbedding>,
}

/// Why a memory ranked where it did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreParts {
    pub score: f64,
    pub relevance: f64,
    pub dense_similarity: f64,
    pub keyword_score: f64,
    pub dense_rank: u32,
    pub keyword_rank: u32,
    pub importance: f64,
    pub freshness: f64,
    /// "project" or "cross_project".
    pub layer: &'static str,
}

/// A catalog entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub id: String,
    pub summary: String,
    pub memory_type: MemoryType,
    pub importance: u8,
    pub occurred_at: DateTime<Utc>,
    pub relative_time: String,
    pub tags: Vec<String>,
    pub score: ScoreParts,
    pub tokens: u32,
    pub speaker: Option<String>,
    pub confidence: f64,
    pub role_id: String,
    pub status: MemoryStatus,
}

/// The details of one memory.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryDetails {
    pub id: String,
    pub summary: String,
    pub content: String,
    pub context: String,
    /// Summaries of related decisions.
    pub decisions: Vec<String>,
    pub refs: Vec<ArtifactRef>,
    pub memory_type: MemoryType,
    pub importance: u8,
    pub confidence: f64,
    pub occurred_at: DateTime<Utc>,
    pub relative_time: String,
    pub tokens: u32,
    pub tags: Vec<String>,
    pub speaker: Option<String>,
    pub freshness: f64,
    pub status: MemoryStatus,
    pub superseded_by: Option<String>,
}

/// The answer to a recall.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallResult {
    pub mode: RetrievalMode,
    pub catalog: Vec<CatalogEntry>,
    pub details: Vec<MemoryDetails>,
    pub tokens_used: u32,
    pub budget_tokens: u32,
    pub candidates: u32,
    pub omitted_for_budget: u32,
    pub tokenizer: String,
    pub rendered: String,
}

/// A details read.
#[derive(Debug, Clone, Default)]
pub struct DetailsRequest {
    pub scope: Scope,
    pub ids: Vec<String>,
    /// `None` means no limit.
    pub budget_tokens: Option<u32>,
    pub language: Option<Language>,
    pub skip_access_update: bool,
    pub now: Option<DateTime<Utc>>,
}

/// The answer to a details read.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailsResult {
    pub details: Vec<MemoryDetails>,
    pub tokens_used: u32,
    pub omitted_for_budget: Vec<String>,
    pub rendered: String,
}

/// What the retriever offers, in process or over gRPC.
#[async_trait]
pub trait RetrieverApi: Send + Sync {
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError>;
    async fn get_details(&self, request: DetailsRequest) -> Result<DetailsResult, ApiError>;
}
