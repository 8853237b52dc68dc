//! Embedding models. Three implementations: [`local::LocalEmbedder`] (multilingual-e5-small,
//! 4-bit, in-process; the default), [`http::HttpEmbedder`] (any OpenAI-compatible embeddings
//! endpoint, concurrent requests with a bound) and [`hash::HashEmbedder`] (hashed character
//! n-grams: deterministic and fast, for tests). The local engine runs on a [`pool`] of worker
//! threads (queries ahead of passages, background passages behind both, concurrent queries in
//! one call); [`cache`] keeps recent query embeddings in front of any of them.

pub mod cache;
pub mod hash;
pub mod http;
#[cfg(feature = "local-embedder")]
pub mod local;
pub mod pool;

use std::fmt::Debug;

use async_trait::async_trait;

/// Errors of an embedder.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    #[error("embedder configuration: {0}")]
    Config(String),
    #[error("embedder unavailable: {0}")]
    Unavailable(String),
    #[error("embedder timed out")]
    Timeout,
    #[error("embedder answered badly: {0}")]
    BadResponse(String),
    #[error("embedder error: {0}")]
    Backend(String),
}

/// An embedding model. Vectors are L2-normalised so that dot product is cosine similarity.
#[async_trait]
pub trait Embedder: Send + Sync + Debug {
    /// The model's name, recorded with the index ("multilingual-e5-small-q4").
    fn name(&self) -> String;

    /// The vector width.
    fn dim(&self) -> usize;

    /// Embeds a search query.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError>;

    /// Embeds stored passages, one vector per text, in order.
    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Embeds passages for background work (an index rebuild): as [`Embedder::embed_passages`],
    /// but yielding to live work where the embedder queues it (the local [`pool`] takes them
    /// only when no query or passage waits and no query call runs). Embedders without a queue
    /// of their own embed them as passages.
    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_passages(texts).await
    }
}

/// Scales a vector to unit length (zero vectors stay zero).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in vector {
            *x /= norm;
        }
    }
}

/// Cosine similarity of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
