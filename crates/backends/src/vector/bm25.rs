//! BM25 as sparse vectors: documents carry saturated, length-normalised term frequencies; the
//! index multiplies in the inverse document frequency (Qdrant's `Idf` modifier); queries carry
//! one per distinct term. Terms come from [`thinkus_common::text::search_terms`]: jieba
//! segments Chinese (and its ideographs also count in adjacent pairs), Snowball stems English,
//! mixed text gets both.

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
    /// Weighted term frequencies of fields and the weighted length, in terms.
    fn counts(fields: &[(&str, f32)]) -> (BTreeMap<u32, f32>, f32) {
        let mut counts = BTreeMap::new();
        let mut len = 0.0;
        for (text, weight) in fields {
            if *weight <= 0.0 {
                continue;
            }
            let terms = text::search_terms(text);
            len += weight * terms.len() as f32;
            for term in &terms {
                *counts.entry(term_id(term)).or_insert(0.0) += weight;
            }
        }
        (counts, len)
    }

    /// The document side: tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len)).
    pub fn document(&self, text: &str) -> SparseVector {
        self.document_fields(&[(text, 1.0)])
    }

    /// The document side of a text made of weighted fields (BM25F): a term's frequency is the
    /// sum of its occurrences times the weight of the field they are in, and so is the length,
    /// before saturation. A field of weight 0.25 counts a quarter as much as one of weight 1,
    /// which saturation alone cannot do: repeating a term four times is far from four times
    /// the score.
    pub fn document_fields(&self, fields: &[(&str, f32)]) -> SparseVector {
        let (counts, len) = Self::counts(fields);
        let norm = self.k1 * (1.0 - self.b + self.b * len / self.avg_len.max(1.0));
        let mut vector = SparseVector::default();
        for (id, tf) in counts {
            vector.indices.push(id);
            vector.values.push(tf * (self.k1 + 1.0) / (tf + norm));
        }
        vector
    }

    /// The query side: weight 1 for each distinct term.
    pub fn query(&self, text: &str) -> SparseVector {
        let (counts, _) = Self::counts(&[(text, 1.0)]);
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
        // A word segmented differently on each side (a voice-input error: 降压要 for 降压药)
        // still meets through its ideographs.
        let said = encoder.document("医生开了个降压要，一天一片");
        assert!(said.dot(&encoder.query("降压药怎么吃")) > 0.0);
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
    fn a_light_field_counts_less() {
        let encoder = Bm25Encoder::default();
        let q = encoder.query("pottery");
        let own = encoder.document_fields(&[("I signed up for a pottery class", 1.0), ("Mel: how are you", 0.25)]);
        let context = encoder.document_fields(&[("I signed up for a class", 1.0), ("Mel: my pottery class", 0.25)]);
        assert!(context.dot(&q) > 0.0, "the light field still matches");
        assert!(
            own.dot(&q) > 1.5 * context.dot(&q),
            "{} vs {}",
            own.dot(&q),
            context.dot(&q)
        );
        // Weight 1 everywhere is plain BM25 over the concatenation.
        let whole = encoder.document("Mel: my pottery class I signed up");
        let split = encoder.document_fields(&[("Mel: my pottery class", 1.0), ("I signed up", 1.0)]);
        assert_eq!(whole, split);
        assert!(encoder.document_fields(&[("pottery", 0.0)]).is_empty());
    }

    #[test]
    fn term_ids_are_stable() {
        assert_eq!(term_id("budget"), term_id("budget"));
        assert_ne!(term_id("budget"), term_id("预算"));
        assert_eq!(term_id(""), 0x811c_9dc5);
    }
}
