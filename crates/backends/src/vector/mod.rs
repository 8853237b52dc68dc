//! The vector index: dense embeddings and BM25 sparse vectors of memories, with the payload
//! needed to filter by scope, type, status, visibility, session, time and tags.
//!
//! Two implementations: [`edge::EdgeIndex`] (qdrant-edge, in-process, the embedded default)
//! and [`qdrant::QdrantIndex`] (a Qdrant server through qdrant-client). The relational store is
//! the source of truth; the index can always be rebuilt from it.

pub mod bm25;
pub mod edge;
pub mod qdrant;
mod wal;

use std::fmt::Debug;

use async_trait::async_trait;
use thinkus_common::model::{MemoryStatus, MemoryType, Owner, Visibility};

pub use crate::filter::{Layers, MemoryFilter, Reader};
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
    /// The owner's tenant.
    pub tenant_id: String,
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
            tenant_id: memory.scope.tenant_id.clone(),
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

    /// Replaces points (inserting those missing) and deletes the `stale` ones, for an index
    /// rebuild's swap: each point is overwritten in place by its id, never deleted first, and
    /// the stale points go only once every new point is written. It is not one step for
    /// searches: a search during the swap finds every point, some with the old vectors and
    /// payload and some with the new ones, and the stale points until the end. The edge index
    /// writes the points a few hundred at a time and keeps searches out only while one such
    /// chunk is written (a point moved between segments would otherwise be found in neither),
    /// so searches of every user go on during the swap; a crash part way leaves every point
    /// with its old or new version. A Qdrant server gets one upsert then one delete; a search
    /// running meanwhile on another node may miss a point the server moves between its
    /// segments.
    async fn replace(&self, points: Vec<IndexedPoint>, stale: &[String]) -> Result<(), VectorError>;

    /// Deletes every point of an owner (at an erasure).
    async fn delete_user(&self, owner: &Owner) -> Result<(), VectorError>;

    /// Nearest neighbours of a dense query vector, best first, cosine similarity scores.
    async fn search_dense(
        &self,
        vector: &[f32],
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError>;

    /// BM25 matches of a sparse query vector, best first.
    async fn search_sparse(
        &self,
        vector: &SparseVector,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError>;

    /// Points of one owner, or of all.
    async fn count(&self, owner: Option<&Owner>) -> Result<u64, VectorError>;

    /// Every memory id of an owner in the index (for reconciliation with the relational store).
    async fn list_ids(&self, owner: &Owner) -> Result<Vec<String>, VectorError>;

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

    #[test]
    fn ids_map_to_uuids_and_back() {
        let id = memory_id(&uuid::Uuid::now_v7());
        assert_eq!(memory_id(&point_uuid(&id).unwrap()), id);
        assert!(point_uuid("art_0000").is_err());
    }
}
