//! Tracing and latency metrics for every vector index, blob store and embedder, whatever the
//! implementation: each call is a client span (`vector.search_dense`, `blob.get`,
//! `embed.query`...) with the backend's name, and its duration goes to the
//! `thinkus_backend_seconds` histogram. The relational store instruments its own queries.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use thinkus_common::metrics::METRICS;
use thinkus_common::model::{MemoryStatus, Owner};
use tracing::Instrument;

use crate::blob::{BlobError, BlobStore, ByteStream};
use crate::embed::{EmbedError, Embedder};
use crate::vector::{IndexedPoint, MemoryFilter, SparseVector, VectorError, VectorHit, VectorIndex};

async fn traced<T, E>(
    system: &str,
    backend: &'static str,
    operation: &'static str,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let span = tracing::info_span!(
        "backend",
        otel.name = format!("{system}.{operation}"),
        otel.kind = "client",
        backend.system = system,
        backend.name = backend,
        backend.operation = operation,
    );
    let started = Instant::now();
    let result = work.instrument(span).await;
    METRICS
        .backend_latency
        .with_label_values(&[backend, operation])
        .observe(started.elapsed().as_secs_f64());
    result
}

/// A vector index whose calls are traced and timed.
#[derive(Debug)]
pub struct TracedVectors(pub Arc<dyn VectorIndex>);

#[async_trait]
impl VectorIndex for TracedVectors {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    async fn ensure_ready(&self, dim: usize) -> Result<(), VectorError> {
        traced("vector", self.name(), "ensure_ready", self.0.ensure_ready(dim)).await
    }

    async fn upsert(&self, points: Vec<IndexedPoint>) -> Result<(), VectorError> {
        traced("vector", self.name(), "upsert", self.0.upsert(points)).await
    }

    async fn set_status(&self, ids: &[String], status: MemoryStatus) -> Result<(), VectorError> {
        traced("vector", self.name(), "set_status", self.0.set_status(ids, status)).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), VectorError> {
        traced("vector", self.name(), "delete", self.0.delete(ids)).await
    }

    async fn replace(&self, points: Vec<IndexedPoint>, stale: &[String]) -> Result<(), VectorError> {
        traced("vector", self.name(), "replace", self.0.replace(points, stale)).await
    }

    async fn delete_user(&self, owner: &Owner) -> Result<(), VectorError> {
        traced("vector", self.name(), "delete_user", self.0.delete_user(owner)).await
    }

    async fn search_dense(
        &self,
        vector: &[f32],
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        traced(
            "vector",
            self.name(),
            "search_dense",
            self.0.search_dense(vector, filter, limit),
        )
        .await
    }

    async fn search_sparse(
        &self,
        vector: &SparseVector,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        traced(
            "vector",
            self.name(),
            "search_sparse",
            self.0.search_sparse(vector, filter, limit),
        )
        .await
    }

    async fn count(&self, owner: Option<&Owner>) -> Result<u64, VectorError> {
        traced("vector", self.name(), "count", self.0.count(owner)).await
    }

    async fn list_ids(&self, owner: &Owner) -> Result<Vec<String>, VectorError> {
        traced("vector", self.name(), "list_ids", self.0.list_ids(owner)).await
    }

    async fn flush(&self) -> Result<(), VectorError> {
        traced("vector", self.name(), "flush", self.0.flush()).await
    }
}

/// A blob store whose calls are traced and timed.
#[derive(Debug)]
pub struct TracedBlobs(pub Arc<dyn BlobStore>);

#[async_trait]
impl BlobStore for TracedBlobs {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    async fn check(&self) -> Result<(), BlobError> {
        traced("blob", self.name(), "check", self.0.check()).await
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<(), BlobError> {
        traced("blob", self.name(), "put", self.0.put(key, data)).await
    }

    async fn put_stream(&self, key: &str, stream: ByteStream, max_bytes: u64) -> Result<u64, BlobError> {
        traced(
            "blob",
            self.name(),
            "put_stream",
            self.0.put_stream(key, stream, max_bytes),
        )
        .await
    }

    async fn get(&self, key: &str) -> Result<Bytes, BlobError> {
        traced("blob", self.name(), "get", self.0.get(key)).await
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, BlobError> {
        traced("blob", self.name(), "get_range", self.0.get_range(key, start, end)).await
    }

    async fn get_stream(&self, key: &str, chunk_size: usize) -> Result<ByteStream, BlobError> {
        traced("blob", self.name(), "get_stream", self.0.get_stream(key, chunk_size)).await
    }

    async fn size(&self, key: &str) -> Result<Option<u64>, BlobError> {
        traced("blob", self.name(), "size", self.0.size(key)).await
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), BlobError> {
        traced("blob", self.name(), "rename", self.0.rename(from, to)).await
    }

    async fn delete(&self, key: &str) -> Result<(), BlobError> {
        traced("blob", self.name(), "delete", self.0.delete(key)).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        traced("blob", self.name(), "list", self.0.list(prefix)).await
    }
}

/// An embedder whose calls are traced and timed.
#[derive(Debug)]
pub struct TracedEmbedder(pub Arc<dyn Embedder>);

#[async_trait]
impl Embedder for TracedEmbedder {
    fn name(&self) -> String {
        self.0.name()
    }

    fn dim(&self) -> usize {
        self.0.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        traced("embed", "embedder", "query", self.0.embed_query(text)).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        traced("embed", "embedder", "passages", self.0.embed_passages(texts)).await
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        traced("embed", "embedder", "background", self.0.embed_background(texts)).await
    }
}

/// Wraps a backend in its traced form.
pub fn vectors(index: Arc<dyn VectorIndex>) -> Arc<dyn VectorIndex> {
    Arc::new(TracedVectors(index))
}

/// Wraps a backend in its traced form.
pub fn blobs(store: Arc<dyn BlobStore>) -> Arc<dyn BlobStore> {
    Arc::new(TracedBlobs(store))
}

/// Wraps a backend in its traced form.
pub fn embedder(embedder: Arc<dyn Embedder>) -> Arc<dyn Embedder> {
    Arc::new(TracedEmbedder(embedder))
}
