//! Fusion of the dense and keyword rankings, and the final score: relevance, importance and
//! freshness, weighted by [`RankingConfig`]. Pure functions, tested on their own.

use std::collections::HashMap;

use thinkus_backends::vector::VectorHit;

use crate::config::RankingConfig;

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

/// Weighted reciprocal rank fusion, normalised so that the top of both lists scores 1.
pub fn fuse(dense: &[VectorHit], keyword: &[VectorHit], config: &RankingConfig) -> HashMap<String, Evidence> {
    let mut out: HashMap<String, Evidence> = HashMap::new();
    let k = config.rrf_k.max(0.0);
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
    let dense_weight = if dense.is_empty() { 0.0 } else { config.dense_weight };
    let keyword_weight = if keyword.is_empty() { 0.0 } else { config.keyword_weight };
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
    out
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

    #[test]
    fn agreement_wins_and_top_of_both_is_one() {
        let config = RankingConfig::default();
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
        let config = RankingConfig::default();
        let fused = fuse(&hits(&["a"]), &[], &config);
        assert!((fused["a"].relevance - 1.0).abs() < 1e-9);
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
