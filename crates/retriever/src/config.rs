//! Retriever settings. The ranking weights were chosen on the LoCoMo development set (see the
//! measurements in docs/retrieval.md).

use serde::{Deserialize, Serialize};

/// How the dense and keyword rankings are combined into one relevance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal rank fusion: weight / (k + rank), scores ignored.
    Rrf,
    /// Distribution-based score fusion (Qdrant's DBSF): each list's scores are scaled by their
    /// mean +- 3 standard deviations to 0-1, then added with their weights. Keeps how far
    /// apart the hits are, which ranks alone lose.
    Dbsf,
    /// Min-max fusion: each list's scores are scaled so that its best hit is 1 and its last
    /// candidate 0, then added with their weights. Keeps the gaps like DBSF, but the best hit
    /// of each list always counts fully, however far it stands from the rest: one keyword
    /// match far ahead of the others is not flattened by a crowd of weak ones.
    MinMax,
}

impl RankingConfig {
    /// The weights for one query: its language's dense weight.
    pub fn for_query(&self, query: &str) -> RankingConfig {
        let mut ranking = self.clone();
        if thinkus_common::text::detect_language(query) == thinkus_common::model::Language::Zh {
            ranking.dense_weight = self.dense_weight_zh;
        }
        ranking
    }
}

/// How candidates are fused and ranked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RankingConfig {
    /// How the two rankings are combined.
    pub fusion: Fusion,
    /// The rank offset of reciprocal rank fusion: 1 / (k + rank).
    pub rrf_k: f64,
    /// Weight of the dense (embedding) ranking in the fusion.
    pub dense_weight: f64,
    /// Weight of the dense ranking for a query in Chinese, instead of `dense_weight`: BM25
    /// over segmented Chinese carries less than over English words (the same question and
    /// its answer are often cut into different words), so the embedding weighs more there,
    /// more than BM25 itself.
    pub dense_weight_zh: f64,
    /// Weight of the BM25 ranking in the fusion.
    pub keyword_weight: f64,
    /// Weight of relevance (the fused score, 0-1) in the final score.
    pub relevance: f64,
    /// Weight of importance (importance / 5) in the final score.
    pub importance: f64,
    /// Weight of freshness (freshness / 5) in the final score.
    pub freshness: f64,
    /// Share of the relevance of a conversation turn's best neighbour (the turn before or after
    /// it in its session) that it inherits: an answer is often only found through its question.
    pub neighbor: f64,
    /// Extra relevance for memories said by a person the query names (the speaker's first name
    /// as a word of the query). Added after the neighbour and session shares: it tells who
    /// said a turn, not what the turn says, so the turns around it must not inherit it.
    pub speaker: f64,
    /// Share of its session's relevance (the mean of the session's best three candidates) that
    /// every candidate of that session gains: a conversation whose turns match strongly is
    /// likely the one the question is about, and its weaker turns rise a little.
    pub session: f64,
}

impl Default for RankingConfig {
    /// Chosen on the LoCoMo development half (docs/retrieval.md): BM25 carries more signal
    /// than multilingual-e5-small on conversational recall, so it weighs twice the dense list;
    /// a question about someone is mostly answered by what that person said. For a Chinese
    /// query the embedding weighs 1.5 against BM25's 1 (`dense_weight_zh`, chosen on
    /// datasets/retrieval/zh-dev.json by leave-one-conversation-out cross-validation: three
    /// folds of four pick 1.5, the fourth 1.25; there the embedding alone beats BM25).
    fn default() -> Self {
        Self {
            fusion: Fusion::MinMax,
            rrf_k: 60.0,
            dense_weight: 0.5,
            dense_weight_zh: 1.5,
            keyword_weight: 1.0,
            relevance: 1.0,
            importance: 0.05,
            freshness: 0.05,
            neighbor: 0.4,
            speaker: 0.5,
            session: 0.5,
        }
    }
}

/// The retriever's section of the configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrieverConfig {
    /// The budget when a request gives none.
    pub default_budget_tokens: u32,
    /// The largest budget a request may ask for.
    pub max_budget_tokens: u32,
    /// Candidates taken from each of the dense and keyword searches.
    pub candidates: usize,
    /// Details expanded in details mode when a request gives no number.
    pub default_details: usize,
    /// Freshness gained by a details read, and its cap.
    pub access_boost: f64,
    pub freshness_cap: f64,
    /// The longest query accepted, in bytes.
    pub max_query_bytes: usize,
    pub ranking: RankingConfig,
}

impl Default for RetrieverConfig {
    fn default() -> Self {
        Self {
            default_budget_tokens: 500,
            max_budget_tokens: 32_000,
            candidates: 100,
            default_details: 5,
            access_boost: 0.5,
            freshness_cap: 5.0,
            max_query_bytes: 8 * 1024,
            ranking: RankingConfig::default(),
        }
    }
}
