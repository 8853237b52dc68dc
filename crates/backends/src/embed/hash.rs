//! Hashed n-gram embeddings: words (stemmed, segmented) and character trigrams hashed into a
//! fixed number of signed buckets. No model, no network, deterministic: for fast tests.

use async_trait::async_trait;
use thinkus_common::text;

use super::{EmbedError, Embedder, normalize};

/// The hashed n-gram embedder.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dim: usize,
}

impl HashEmbedder {
    pub fn new(dim: usize) -> Self {
        Self { dim: dim.max(8) }
    }

    fn bucket(&self, feature: &str, seed: u64) -> (usize, f32) {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
        for byte in feature.as_bytes() {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let index = (hash % self.dim as u64) as usize;
        let sign = if (hash >> 63) == 0 { 1.0 } else { -1.0 };
        (index, sign)
    }

    /// The embedding of a text (queries and passages alike).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0f32; self.dim];
        for term in text::terms(text) {
            let (i, s) = self.bucket(&term, 1);
            vector[i] += 2.0 * s;
            let chars: Vec<char> = term.chars().collect();
            if chars.len() >= 3 {
                for gram in chars.windows(3) {
                    let gram: String = gram.iter().collect();
                    let (i, s) = self.bucket(&gram, 2);
                    vector[i] += s;
                }
            } else if chars.len() == 2 {
                for c in &chars {
                    let (i, s) = self.bucket(&c.to_string(), 3);
                    vector[i] += 0.5 * s;
                }
            }
        }
        normalize(&mut vector);
        vector
    }
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn name(&self) -> String {
        format!("hash-ngram-{}", self.dim)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed(text))
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }
}
