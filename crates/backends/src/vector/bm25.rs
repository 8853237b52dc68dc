//! BM25 as sparse vectors: documents carry saturated, length-normalised term frequencies; the
//! index multiplies in the inverse document frequency (Qdrant's `Idf` modifier); queries carry
//! one per distinct term. Terms come from [`thinkus_common::text::terms`]: jieba segments
//! Chinese, Snowball stems English, mixed text gets both.

use std::collections::BTreeMap;

use thinkus_common::text;

/// A sparse vector with sorted, distinct indices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseVector {
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

impl SparseVector {
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The dot product with another sparse vector (both sorted).
    pub fn dot(&self, other: &SparseVector) -> f32 {
        let (mut i, mut j, mut sum) = (0, 0, 0.0);
        while i < self.indices.len() && j < other.indices.len() {
            match self.indices[i].cmp(&other.indices[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    sum += self.values[i] * other.values[j];
                    i += 1;
                    j += 1;
                }
            }
        }
        sum
    }
}

/// The stable 32-bit id of a term (FNV-1a): the same in every process and backend.
pub fn term_id(term: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in term.as_bytes() {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Turns text into BM25 sparse vectors.
#[derive(Debug, Clone, Copy)]
pub struct Bm25Encoder {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f32,
    /// The expected document length in terms (memories are short).
    pub avg_len: f32,
}

impl Default for Bm25Encoder {
    fn default() -> Self {
        Self {
            k1: 1.2,
            b: 0.75,
            avg_len: 24.0,
        }
    }
}

impl Bm25Encoder {
    fn counts(text: &str) -> (BTreeMap<u32, u32>, usize) {
        let terms = text::terms(text);
        let len = terms.len();
        let mut counts = BTreeMap::new();
        for term in &terms {
            *counts.entry(term_id(term)).or_insert(0) += 1;
        }
        (counts, len)
    }

    /// The document side: tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len)).
    pub fn document(&self, text: &str) -> SparseVector {
        let (counts, len) = Self::counts(text);
        let norm = self.k1 * (1.0 - self.b + self.b * len as f32 / self.avg_len.max(1.0));
        let mut vector = SparseVector::default();
        for (id, tf) in counts {
            let tf = tf as f32;
            vector.indices.push(id);
            vector.values.push(tf * (self.k1 + 1.0) / (tf + norm));
        }
        vector
    }

    /// The query side: weight 1 for each distinct term.
    pub fn query(&self, text: &str) -> SparseVector {
        let (counts, _) = Self::counts(text);
        SparseVector {
            values: vec![1.0; counts.len()],
            indices: counts.into_keys().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_across_inflections_and_scripts() {
        let encoder = Bm25Encoder::default();
        let doc = encoder.document("We decided to deploy on Vercel; 我喜欢简约的设计风格");
        assert!(doc.indices.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert!(doc.dot(&encoder.query("deployment decisions")) > 0.0);
        assert!(doc.dot(&encoder.query("设计风格")) > 0.0);
        assert_eq!(doc.dot(&encoder.query("budget")), 0.0);
    }

    #[test]
    fn repeated_terms_saturate() {
        let encoder = Bm25Encoder::default();
        let once = encoder.document("budget");
        let many = encoder.document("budget budget budget budget budget budget");
        let q = encoder.query("budget");
        assert!(many.dot(&q) > once.dot(&q) * 0.5);
        assert!(many.dot(&q) < encoder.k1 + 1.0);
    }

    #[test]
    fn term_ids_are_stable() {
        assert_eq!(term_id("budget"), term_id("budget"));
        assert_ne!(term_id("budget"), term_id("预算"));
        assert_eq!(term_id(""), 0x811c_9dc5);
    }
}
