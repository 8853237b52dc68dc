//! The vector index: dense embeddings and BM25 sparse vectors of memories, with the payload
//! needed to filter by scope, type, status, visibility, session, time and tags.
//!
//! Two implementations: [`edge::EdgeIndex`] (qdrant-edge, in-process, the embedded default)
//! and [`qdrant::QdrantIndex`] (a Qdrant server through qdrant-client). The relational store is
//! the source of truth; the index can always be rebuilt from it.

pub mod bm25;
pub mod edge;
pub mod qdrant;

use std::fmt::Debug;

use async_trait::async_trait;
use thinkus_common::model::{MemoryStatus, MemoryType, Visibility};

pub use bm25::{Bm25Encoder, SparseVector};

/// Name of the dense vector in both backends.
pub const DENSE_VECTOR: &str = "dense";
/// Name of the BM25 sparse vector in both backends (IDF applied by the index).
pub const SPARSE_VECTOR: &str = "bm25";

/// Errors of a vector index.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("invalid vector index request: {0}")]
    Invalid(String),
    #[error("the vector index expects {expected} dimensions, got {actual}")]
    Dimension { expected: usize, actual: usize },
    #[error("vector index unavailable: {0}")]
    Unavailable(String),
    #[error("vector index error: {0}")]
    Backend(String),
}

/// One memory as the index stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedPoint {
    /// The memory id (`mem_` + 32 hex digits); the point id is its UUID.
    pub id: String,
    pub user_id: String,
    pub role_id: String,
    /// `None` for cross-project memories.
    pub project_id: Option<String>,
    pub session_id: Option<String>,
    pub memory_type: MemoryType,
    pub visibility: Visibility,
    pub status: MemoryStatus,
    /// When it happened, in milliseconds since the epoch.
    pub occurred_at_ms: i64,
    pub tags: Vec<String>,
    pub dense: Vec<f32>,
    pub sparse: SparseVector,
}

impl IndexedPoint {
    /// The point of a memory, with its vectors.
    pub fn from_memory(memory: &thinkus_common::model::Memory, dense: Vec<f32>, sparse: SparseVector) -> Self {
        Self {
            id: memory.id.clone(),
            user_id: memory.scope.user_id.clone(),
            role_id: memory.scope.role_id.clone(),
            project_id: memory.scope.project_id.clone(),
            session_id: memory.scope.session_id.clone(),
            memory_type: memory.memory_type,
            visibility: memory.visibility,
            status: memory.status,
            occurred_at_ms: memory.occurred_at.timestamp_millis(),
            tags: memory.tags.clone(),
            dense,
            sparse,
        }
    }
}

/// Which of the two memory layers a search covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layers {
    /// The project's memories and the user's cross-project ones (plus global memories of other
    /// projects).
    #[default]
    Both,
    /// Only memories of the reader's project.
    Project,
    /// Only cross-project memories.
    CrossProject,
}

/// Who reads, which decides what is visible:
/// - a memory of the reader's project is visible when the reader's role owns it or its
///   visibility is `project` or `global`;
/// - a cross-project memory (no project) likewise: own role, or `project`/`global`;
/// - a memory of another project only when its visibility is `global` (and layers are `Both`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub role_id: String,
    pub project_id: Option<String>,
    pub layers: Layers,
}

/// What a search may return. Every condition must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorFilter {
    /// Required: the tenant boundary.
    pub user_id: String,
    /// Visibility rules; `None` means every memory of the user (administrative reads).
    pub reader: Option<Reader>,
    /// Only these types; empty means any.
    pub types: Vec<MemoryType>,
    /// Only these statuses; must not be empty.
    pub statuses: Vec<MemoryStatus>,
    /// Only these visibilities; empty means any.
    pub visibilities: Vec<Visibility>,
    /// Only memories of this session.
    pub session_id: Option<String>,
    /// Inclusive lower bound of `occurred_at_ms`.
    pub occurred_from_ms: Option<i64>,
    /// Exclusive upper bound of `occurred_at_ms`.
    pub occurred_to_ms: Option<i64>,
    /// Memories carrying all of these tags.
    pub tags: Vec<String>,
}

impl VectorFilter {
    /// Active memories of a user, whatever the role or project.
    pub fn user(user_id: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            reader: None,
            types: Vec::new(),
            statuses: vec![MemoryStatus::Active],
            visibilities: Vec::new(),
            session_id: None,
            occurred_from_ms: None,
            occurred_to_ms: None,
            tags: Vec::new(),
        }
    }

    /// Whether a stored memory passes the filter (the same rules as [`Self::matches`]).
    pub fn matches_memory(&self, memory: &thinkus_common::model::Memory) -> bool {
        self.matches(&IndexedPoint::from_memory(memory, Vec::new(), SparseVector::default()))
    }

    /// Reference semantics of the filter, used by tests and by callers that post-check.
    pub fn matches(&self, point: &IndexedPoint) -> bool {
        if point.user_id != self.user_id {
            return false;
        }
        if !self.statuses.contains(&point.status) {
            return false;
        }
        if !self.types.is_empty() && !self.types.contains(&point.memory_type) {
            return false;
        }
        if !self.visibilities.is_empty() && !self.visibilities.contains(&point.visibility) {
            return false;
        }
        if let Some(session) = &self.session_id
            && point.session_id.as_ref() != Some(session)
        {
            return false;
        }
        if self.occurred_from_ms.is_some_and(|from| point.occurred_at_ms < from) {
            return false;
        }
        if self.occurred_to_ms.is_some_and(|to| point.occurred_at_ms >= to) {
            return false;
        }
        if !self.tags.iter().all(|tag| point.tags.contains(tag)) {
            return false;
        }
        match &self.reader {
            None => true,
            Some(reader) => reader_sees(reader, point),
        }
    }
}

fn reader_sees(reader: &Reader, point: &IndexedPoint) -> bool {
    let shared = matches!(point.visibility, Visibility::Project | Visibility::Global);
    let owned_or_shared = point.role_id == reader.role_id || shared;
    match (&point.project_id, &reader.project_id) {
        (None, _) => reader.layers != Layers::Project && owned_or_shared,
        (Some(p), Some(r)) if p == r => reader.layers != Layers::CrossProject && owned_or_shared,
        (Some(_), _) => reader.layers == Layers::Both && point.visibility == Visibility::Global,
    }
}

/// A search result: the memory id and the backend's score (cosine for dense, BM25 for sparse).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHit {
    pub id: String,
    pub score: f32,
}

/// A vector index backend.
#[async_trait]
pub trait VectorIndex: Send + Sync + Debug {
    /// A short name for logs and metrics ("qdrant-edge", "qdrant").
    fn name(&self) -> &'static str;

    /// Creates the collection and payload indexes if missing; fails if the existing collection
    /// has another dense dimension.
    async fn ensure_ready(&self, dim: usize) -> Result<(), VectorError>;

    /// Inserts or replaces points. Visible to searches as soon as this returns.
    async fn upsert(&self, points: Vec<IndexedPoint>) -> Result<(), VectorError>;

    /// Changes the status payload of points (corrections, replacements, forgetting).
    async fn set_status(&self, ids: &[String], status: MemoryStatus) -> Result<(), VectorError>;

    /// Deletes points; unknown ids are ignored.
    async fn delete(&self, ids: &[String]) -> Result<(), VectorError>;

    /// Deletes every point of a user (before a rebuild).
    async fn delete_user(&self, user_id: &str) -> Result<(), VectorError>;

    /// Nearest neighbours of a dense query vector, best first, cosine similarity scores.
    async fn search_dense(
        &self,
        vector: &[f32],
        filter: &VectorFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError>;

    /// BM25 matches of a sparse query vector, best first.
    async fn search_sparse(
        &self,
        vector: &SparseVector,
        filter: &VectorFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError>;

    /// Points of one user, or of all users.
    async fn count(&self, user_id: Option<&str>) -> Result<u64, VectorError>;

    /// Every memory id of a user in the index (for reconciliation with the relational store).
    async fn list_ids(&self, user_id: &str) -> Result<Vec<String>, VectorError>;

    /// Makes everything written so far durable.
    async fn flush(&self) -> Result<(), VectorError>;
}

/// The UUID inside a memory id, used as the point id by both backends.
pub fn point_uuid(id: &str) -> Result<uuid::Uuid, VectorError> {
    id.strip_prefix("mem_")
        .and_then(|hex| uuid::Uuid::parse_str(hex).ok())
        .ok_or_else(|| VectorError::Invalid(format!("not a memory id: {id:?}")))
}

/// The memory id of a point UUID.
pub fn memory_id(uuid: &uuid::Uuid) -> String {
    format!("mem_{}", uuid.simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(role: &str, project: Option<&str>, visibility: Visibility) -> IndexedPoint {
        IndexedPoint {
            id: memory_id(&uuid::Uuid::now_v7()),
            user_id: "u1".into(),
            role_id: role.into(),
            project_id: project.map(str::to_string),
            session_id: None,
            memory_type: MemoryType::ProjectDecision,
            visibility,
            status: MemoryStatus::Active,
            occurred_at_ms: 0,
            tags: vec![],
            dense: vec![],
            sparse: SparseVector::default(),
        }
    }

    #[test]
    fn visibility_rules() {
        let mut filter = VectorFilter::user("u1");
        filter.reader = Some(Reader {
            role_id: "cto".into(),
            project_id: Some("p1".into()),
            layers: Layers::Both,
        });
        assert!(filter.matches(&point("cto", Some("p1"), Visibility::Private)));
        assert!(!filter.matches(&point("cfo", Some("p1"), Visibility::Private)));
        assert!(filter.matches(&point("cfo", Some("p1"), Visibility::Project)));
        assert!(
            filter.matches(&point("cto", None, Visibility::Private)),
            "own cross-project"
        );
        assert!(!filter.matches(&point("cfo", None, Visibility::Private)));
        assert!(filter.matches(&point("cfo", None, Visibility::Global)));
        assert!(
            !filter.matches(&point("cto", Some("p2"), Visibility::Project)),
            "other project"
        );
        assert!(filter.matches(&point("cfo", Some("p2"), Visibility::Global)));
        filter.reader.as_mut().unwrap().layers = Layers::Project;
        assert!(!filter.matches(&point("cto", None, Visibility::Private)));
        assert!(!filter.matches(&point("cfo", Some("p2"), Visibility::Global)));
    }

    #[test]
    fn ids_map_to_uuids_and_back() {
        let id = memory_id(&uuid::Uuid::now_v7());
        assert_eq!(memory_id(&point_uuid(&id).unwrap()), id);
        assert!(point_uuid("art_0000").is_err());
    }
}
