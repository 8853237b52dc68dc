//! The artifact service's domain API: what it is asked and what it answers, with no protobuf
//! types.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Owner, Scope};

/// A content as it streams in or out, chunk by chunk.
pub type ContentStream = BoxStream<'static, Result<Bytes, ApiError>>;

/// The structure a compact was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    Code,
    Json,
    Table,
    Log,
    Document,
    Text,
    Binary,
}

impl ArtifactKind {
    /// The stable name stored with the metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Code => "code",
            ArtifactKind::Json => "json",
            ArtifactKind::Table => "table",
            ArtifactKind::Log => "log",
            ArtifactKind::Document => "document",
            ArtifactKind::Text => "text",
            ArtifactKind::Binary => "binary",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [
            ArtifactKind::Code,
            ArtifactKind::Json,
            ArtifactKind::Table,
            ArtifactKind::Log,
            ArtifactKind::Document,
            ArtifactKind::Text,
            ArtifactKind::Binary,
        ]
        .into_iter()
        .find(|k| k.as_str() == value)
    }

    /// Whether the content is text (every locator works) rather than bytes.
    pub fn is_text(self) -> bool {
        self != ArtifactKind::Binary
    }
}

/// What a content is and whose, given when it is stored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewArtifact {
    /// user_id and session_id are required.
    pub scope: Scope,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    /// Detected from the content and path when `None`.
    pub mime_type: Option<String>,
    pub path: Option<String>,
    /// `None` uses the configured retention.
    pub expires_at: Option<DateTime<Utc>>,
    pub metadata: BTreeMap<String, String>,
    /// The compact's language; detected from the content when `None`.
    pub language: Option<Language>,
}

/// A stored artifact's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactInfo {
    pub id: String,
    pub scope: Scope,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub mime_type: String,
    pub size_bytes: u64,
    pub sha256: String,
    pub path: Option<String>,
    /// Lines of text content, 0 for binary.
    pub line_count: u64,
    pub kind: ArtifactKind,
    pub language: Language,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub metadata: BTreeMap<String, String>,
}

/// A way to read part of an artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocatorKind {
    Lines,
    Bytes,
    JsonPath,
    Search,
}

/// A supported locator with an example to copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocatorExample {
    pub kind: LocatorKind,
    pub example: String,
}

/// What is injected into a context instead of the content (fewer than 500 tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compact {
    /// The artifact id to read it with.
    pub reference: String,
    /// What it is, in the compact's language.
    pub type_label: String,
    pub path: Option<String>,
    pub summary: String,
    /// "200 lines / 4.2 KB".
    pub size: String,
    pub locators: Vec<LocatorExample>,
    /// The injection format, ready to paste into a prompt.
    pub rendered: String,
    /// Tokens of `rendered`.
    pub tokens: u32,
    pub language: Language,
}

/// A stored artifact and its compact.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredArtifact {
    pub artifact: ArtifactInfo,
    pub compact: Compact,
    /// The same bytes were already stored in this session: the existing artifact is returned.
    pub deduplicated: bool,
}

/// The part of an artifact to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locator {
    /// 1-based inclusive lines; `end: None` reads to the last line.
    Lines { start: u64, end: Option<u64> },
    /// 0-based bytes, end exclusive; `end: None` reads to the end.
    Bytes { start: u64, end: Option<u64> },
    /// An RFC 9535 JSONPath expression.
    JsonPath(String),
    /// A case-insensitive keyword.
    Search(String),
}

impl Locator {
    /// The name of the request field carrying this locator (errors name it).
    pub fn field(&self) -> &'static str {
        match self {
            Locator::Lines { .. } => "lines",
            Locator::Bytes { .. } => "bytes",
            Locator::JsonPath(_) => "json_path",
            Locator::Search(_) => "search",
        }
    }
}

/// A partial read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    pub scope: Scope,
    pub artifact_id: String,
    pub locator: Locator,
    /// `None` means the default (1 MiB).
    pub max_bytes: Option<usize>,
}

/// One keyword hit with its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub line: u64,
    pub start_line: u64,
    pub end_line: u64,
    pub text: String,
}

/// The part read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadResult {
    /// Lines, text bytes, the JSONPath matches as a JSON array or the rendered search hits.
    pub content: String,
    /// Bytes of binary content (then `content` is empty).
    pub data: Vec<u8>,
    /// First line (1-based) or byte (0-based) returned.
    pub start: u64,
    /// Last line (inclusive) or byte (exclusive) returned.
    pub end: u64,
    /// The requested range went past the end: only what exists was returned.
    pub past_end: bool,
    /// The result was cut at the byte limit.
    pub truncated: bool,
    /// A note for the reader, in the artifact's language.
    pub note: String,
    pub total_lines: u64,
    pub total_bytes: u64,
    pub hits: Vec<SearchHit>,
    pub matches: u64,
}

/// A listing of artifacts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// user_id is required; session_id and project_id narrow.
    pub scope: Scope,
    pub limit: usize,
    pub offset: usize,
}

/// What a purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeResult {
    pub removed: u64,
    pub blobs_removed: u64,
}

/// What the artifact service offers, in process or over gRPC. Every call is scoped to one user:
/// another user's artifact is NOT_FOUND, never PERMISSION_DENIED.
#[async_trait]
pub trait ArtifactApi: Send + Sync {
    /// Stores a content held in memory.
    async fn create(&self, header: NewArtifact, content: Bytes) -> Result<StoredArtifact, ApiError>;

    /// Stores a content streamed in chunks, enforcing the size limit while it streams.
    async fn upload(&self, header: NewArtifact, content: ContentStream) -> Result<StoredArtifact, ApiError>;

    /// An artifact's metadata and its compact in `language` (its own when `None`).
    async fn get(
        &self,
        scope: Scope,
        artifact_id: String,
        language: Option<Language>,
    ) -> Result<(ArtifactInfo, Compact), ApiError>;

    /// Reads part of an artifact.
    async fn read(&self, request: ReadRequest) -> Result<ReadResult, ApiError>;

    /// Streams the whole content.
    async fn download(&self, scope: Scope, artifact_id: String) -> Result<ContentStream, ApiError>;

    /// Artifacts of a user, newest first, with their compacts.
    async fn list(&self, request: ListRequest) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError>;

    /// The artifacts a turn of the scope's session may be about: the newest `limit` of the
    /// session and, when the scope names a project, the newest `limit` of the project's (any
    /// session's), each once; the session's first, each part newest first. In process one
    /// read; over gRPC two listings.
    async fn list_near(&self, scope: Scope, limit: usize) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
        let mut listed = self
            .list(ListRequest {
                scope: scope.clone(),
                limit,
                offset: 0,
            })
            .await?;
        if scope.project_id.is_some() {
            let known: std::collections::BTreeSet<String> = listed.iter().map(|(info, _)| info.id.clone()).collect();
            let project = self
                .list(ListRequest {
                    scope: Scope {
                        session_id: None,
                        ..scope
                    },
                    limit,
                    offset: 0,
                })
                .await?;
            listed.extend(project.into_iter().filter(|(info, _)| !known.contains(&info.id)));
        }
        Ok(listed)
    }

    /// Deletes an artifact; its content goes when no other artifact shares it.
    async fn delete(&self, scope: Scope, artifact_id: String) -> Result<(), ApiError>;

    /// Removes the artifacts expired at `now` (the clock when `None`), of one user or all.
    async fn purge_expired(&self, owner: Option<Owner>, now: Option<DateTime<Utc>>) -> Result<PurgeResult, ApiError>;
}
