//! Fusion of the dense and keyword rankings, and the final score: relevance, importance and
//! freshness, weighted by [`RankingConfig`]. Pure functions, tested on their own.

use std::collections::HashMap;

use thinkus_backends::vector::VectorHit;

use crate::config::{Fusion, RankingConfig};

/// A candidate's evidence from both searches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    pub dense_similarity: f64,
    pub keyword_score: f64,
    /// 1-based, 0 when absent from that list.
    pub dense_rank: u32,
    pub keyword_rank: u32,
    /// Fused relevance from 0 to 1.
    pub relevance: f64,
}

/// Fuses the two rankings as configured; the relevance of the best possible candidate is 1.
pub fn fuse(dense: &[VectorHit], keyword: &[VectorHit], config: &RankingConfig) -> HashMap<String, Evidence> {
    let mut out: HashMap<String, Evidence> = HashMap::new();
    for (i, hit) in dense.iter().enumerate() {
        let entry = out.entry(hit.id.clone()).or_default();
        entry.dense_rank = i as u32 + 1;
        entry.dense_similarity = f64::from(hit.score);
    }
    for (i, hit) in keyword.iter().enumerate() {
        let entry = out.entry(hit.id.clone()).or_default();
        entry.keyword_rank = i as u32 + 1;
        entry.keyword_score = f64::from(hit.score);
    }
    // Only the lists that exist count towards the maximum: a query without keywords is not
    // penalised for an empty keyword list.
    let dense_weight = if dense.is_empty() {
        0.0
    } else {
        config.dense_weight.max(0.0)
    };
    let keyword_weight = if keyword.is_empty() {
        0.0
    } else {
        config.keyword_weight.max(0.0)
    };
    match config.fusion {
        Fusion::Rrf => {
            let k = config.rrf_k.max(0.0);
            let max = (dense_weight + keyword_weight) / (k + 1.0);
            for evidence in out.values_mut() {
                let mut fused = 0.0;
                if evidence.dense_rank > 0 {
                    fused += dense_weight / (k + f64::from(evidence.dense_rank));
                }
                if evidence.keyword_rank > 0 {
                    fused += keyword_weight / (k + f64::from(evidence.keyword_rank));
                }
                evidence.relevance = if max > 0.0 { fused / max } else { 0.0 };
            }
        }
        Fusion::Dbsf | Fusion::MinMax => {
            let scale = if config.fusion == Fusion::Dbsf {
                Scale::of
            } else {
                Scale::min_max
            };
            let dense_scale = scale(dense);
            let keyword_scale = scale(keyword);
            let max = dense_weight + keyword_weight;
            for evidence in out.values_mut() {
                let mut fused = 0.0;
                if evidence.dense_rank > 0 {
                    fused += dense_weight * dense_scale.apply(evidence.dense_similarity);
                }
                if evidence.keyword_rank > 0 {
                    fused += keyword_weight * keyword_scale.apply(evidence.keyword_score);
                }
                evidence.relevance = if max > 0.0 { fused / max } else { 0.0 };
            }
        }
    }
    out
}

/// Maps a list's scores to 0-1 by their mean +- 3 standard deviations (DBSF).
struct Scale {
    low: f64,
    width: f64,
}

impl Scale {
    fn of(hits: &[VectorHit]) -> Self {
        if hits.len() < 2 {
            // One hit: nothing to compare it with, it is the best.
            return Self { low: 0.0, width: 0.0 };
        }
        let n = hits.len() as f64;
        let mean = hits.iter().map(|h| f64::from(h.score)).sum::<f64>() / n;
        let variance = hits.iter().map(|h| (f64::from(h.score) - mean).powi(2)).sum::<f64>() / n;
        let sd = variance.sqrt();
        Self {
            low: mean - 3.0 * sd,
            width: 6.0 * sd,
        }
    }

    /// Maps a list's scores to 0-1 from its lowest to its highest.
    fn min_max(hits: &[VectorHit]) -> Self {
        let scores = hits.iter().map(|h| f64::from(h.score));
        let low = scores.clone().fold(f64::INFINITY, f64::min);
        let high = scores.fold(f64::NEG_INFINITY, f64::max);
        if hits.len() < 2 || high - low <= f64::EPSILON {
            // One hit, or hits all alike: each is as good as the best.
            return Self { low: 0.0, width: 0.0 };
        }
        Self { low, width: high - low }
    }

    fn apply(&self, score: f64) -> f64 {
        if self.width <= f64::EPSILON {
            1.0
        } else {
            ((score - self.low) / self.width).clamp(0.0, 1.0)
        }
    }
}

/// The final score of a memory.
pub fn final_score(relevance: f64, importance: u8, freshness: f64, config: &RankingConfig) -> f64 {
    config.relevance * relevance
        + config.importance * f64::from(importance) / 5.0
        + config.freshness * (freshness / 5.0).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(ids: &[&str]) -> Vec<VectorHit> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| VectorHit {
                id: id.to_string(),
                score: 1.0 - i as f32 * 0.1,
            })
            .collect()
    }

    fn rrf() -> RankingConfig {
        RankingConfig {
            fusion: Fusion::Rrf,
            dense_weight: 1.0,
            keyword_weight: 1.0,
            ..RankingConfig::default()
        }
    }

    #[test]
    fn agreement_wins_and_top_of_both_is_one() {
        let config = rrf();
        let fused = fuse(&hits(&["a", "b", "c"]), &hits(&["a", "c"]), &config);
        assert!((fused["a"].relevance - 1.0).abs() < 1e-9);
        assert!(
            fused["c"].relevance > fused["b"].relevance,
            "in both lists beats one list"
        );
        assert_eq!(fused["c"].keyword_rank, 2);
        assert_eq!(fused["b"].keyword_rank, 0);
    }

    #[test]
    fn a_missing_list_does_not_cap_relevance() {
        for config in [rrf(), RankingConfig::default()] {
            let fused = fuse(&hits(&["a"]), &[], &config);
            assert!((fused["a"].relevance - 1.0).abs() < 1e-9, "{:?}", config.fusion);
        }
    }

    /// Hits with their scores, in order.
    fn scored(pairs: &[(&str, f32)]) -> Vec<VectorHit> {
        pairs
            .iter()
            .map(|(id, score)| VectorHit {
                id: id.to_string(),
                score: *score,
            })
            .collect()
    }

    #[test]
    fn dbsf_keeps_score_gaps_and_weights() {
        let config = RankingConfig {
            fusion: Fusion::Dbsf,
            ..RankingConfig::default()
        };
        // "k" leads the keyword list by far; "d" leads the dense list by a hair.
        let dense = scored(&[("d", 0.86), ("k", 0.85), ("x", 0.84), ("y", 0.70)]);
        let keyword = scored(&[("k", 12.0), ("d", 2.0), ("x", 1.9), ("y", 1.8)]);
        let fused = fuse(&dense, &keyword, &config);
        assert!(fused["k"].relevance > fused["d"].relevance);
        assert!(fused.values().all(|e| (0.0..=1.0).contains(&e.relevance)));
        assert_eq!(fused["d"].dense_rank, 1);
    }

    #[test]
    fn min_max_puts_each_lists_best_at_one() {
        let config = RankingConfig {
            fusion: Fusion::MinMax,
            ..RankingConfig::default()
        };
        let dense = scored(&[("d", 0.86), ("k", 0.85), ("y", 0.70)]);
        let keyword = scored(&[("k", 12.0), ("d", 2.0), ("y", 1.0)]);
        let fused = fuse(&dense, &keyword, &config);
        assert!(
            (fused["k"].relevance - (0.5 * 0.9375 + 1.0) / 1.5).abs() < 1e-6,
            "{:?}",
            fused["k"]
        );
        assert!(fused["y"].relevance.abs() < 1e-9, "last of both lists");
        assert!(fused["k"].relevance > fused["d"].relevance);
        // Hits all alike, or alone: each counts fully.
        let alike = fuse(&scored(&[("a", 0.5), ("b", 0.5)]), &[], &config);
        assert!((alike["a"].relevance - 1.0).abs() < 1e-9 && (alike["b"].relevance - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_chinese_query_weighs_the_embedding_above_the_keywords() {
        let ranking = RankingConfig::default();
        // "d" leads the dense list, "k" the keyword list, each last in the other.
        let dense = scored(&[("d", 0.9), ("k", 0.5)]);
        let keyword = scored(&[("k", 9.0), ("d", 1.0)]);
        let zh = fuse(&dense, &keyword, &ranking.for_query("阿杰在二手平台淘的手表花了多少钱"));
        assert!(zh["d"].relevance > zh["k"].relevance, "{zh:?}");
        let en = fuse(
            &dense,
            &keyword,
            &ranking.for_query("How much did the second-hand watch cost?"),
        );
        assert!(en["k"].relevance > en["d"].relevance, "{en:?}");
    }

    #[test]
    fn importance_and_freshness_break_ties() {
        let config = RankingConfig::default();
        let high = final_score(0.5, 5, 5.0, &config);
        let low = final_score(0.5, 1, 0.5, &config);
        assert!(high > low);
        assert!(
            final_score(0.9, 1, 0.0, &config) > final_score(0.5, 5, 5.0, &config),
            "relevance dominates"
        );
    }
}
