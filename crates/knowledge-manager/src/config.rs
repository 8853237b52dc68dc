//! Knowledge manager settings: limits, admission, deduplication, decay, forgetting, quotas.

use serde::{Deserialize, Serialize};

/// Memory limits per role, by plan (seed 002 section 6); 0 means unlimited.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaConfig {
    /// The plan of users without one recorded (`SetPlan`). A self-hosted deployment has no
    /// billing, so it is `unlimited` unless set.
    pub default_plan: String,
    pub seed: u64,
    pub growth: u64,
    pub scale: u64,
    pub enterprise: u64,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            default_plan: UNLIMITED.into(),
            seed: 50,
            growth: 200,
            scale: 500,
            enterprise: 0,
        }
    }
}

/// The plan without a limit.
pub const UNLIMITED: &str = "unlimited";

impl QuotaConfig {
    /// The plans, as `SetPlan` and `default_plan` name them.
    pub const PLANS: [&'static str; 5] = [UNLIMITED, "seed", "growth", "scale", "enterprise"];

    /// The limit of a plan (0: unlimited); `None` for an unknown plan name.
    pub fn limit(&self, plan: &str) -> Option<u64> {
        match plan {
            UNLIMITED => Some(0),
            "seed" => Some(self.seed),
            "growth" => Some(self.growth),
            "scale" => Some(self.scale),
            "enterprise" => Some(self.enterprise),
            _ => None,
        }
    }
}

/// The knowledge manager's section of the configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KnowledgeConfig {
    /// The longest memory content accepted, in characters.
    pub max_content_chars: usize,
    /// The longest conversation turn accepted, in characters.
    pub max_turn_chars: usize,
    /// Minimum admission score of an extracted candidate (seed 000 evaluateCandidate).
    pub admission_threshold: f64,
    /// The built-in extraction adds the learned clause head (crates/learn/heads/extract.json)
    /// to the rules. It reads the local embedder's vectors only; with another embedder, or
    /// false here, the rules extract alone.
    pub learned: bool,
    /// Cosine similarity (of passage embeddings) at or above which a new memory reinforces an
    /// existing one of the same owner and type instead of being written, unless the two name
    /// different values (`subject::values_conflict`). Calibrated for multilingual-e5-small,
    /// whose cosines are compressed near 1 (tests/it/dedup_calibration.rs, 12 zh+en pairs each):
    /// paraphrases 0.950-0.995 (min: "we'll go with Stripe for payments" / "we decided to use
    /// Stripe for payments"), distinct statements of the same kind 0.826-0.942 (max: Stripe
    /// vs PostgreSQL decisions, which the value check separates; without names 0.941: "我担心
    /// 供应商会延期交货" / "我担心核心开发会离职"). The seed's 0.85 would merge most distinct
    /// preferences. Other embedders need their own calibration (hash:// scores far lower).
    pub dedup_threshold: f64,
    /// Profile facts (preferences, style, stack, personal information) become long-term
    /// memories only with this confidence and evidence (seed 004 section 9); otherwise they
    /// wait in the candidate queue.
    pub profile_min_confidence: f64,
    pub profile_min_evidence: u32,
    /// Daily freshness decay: freshness = importance * rate ^ days since the last access.
    pub decay_rate: f64,
    /// Hours between decay sweeps (0 disables the schedule; RunMaintenance still works).
    pub decay_interval_hours: u64,
    /// Seconds an index rebuild job stays with its worker between two progress reports; a job
    /// whose worker died goes back to the queue this long after its last report.
    pub rebuild_lease_secs: u64,
    /// Forgetting (seed 002 section 5.2): memories older than this many days, with importance at
    /// most `forget_max_importance` and at most `forget_max_access` reads, are forgotten.
    pub forget_after_days: i64,
    pub forget_max_importance: u8,
    pub forget_max_access: u64,
    pub quotas: QuotaConfig,
    /// Pending conflicts (seed 001 section 3.5.4): a new value that contradicts an active one
    /// replaces it at once only when it is sure. Below this confidence it waits beside the old
    /// one, as a conflict a person resolves (ListConflicts, ResolveConflict), and contexts ask
    /// "budget: $500 or $800? unconfirmed". 0 turns the hold off for unsure values.
    pub conflict_min_confidence: f64,
    /// Whether a value an executive inferred (source `inference`) is held the same way,
    /// whatever its confidence.
    pub conflict_on_inference: bool,
}

impl Default for KnowledgeConfig {
    fn default() -> Self {
        Self {
            max_content_chars: 16 * 1024,
            max_turn_chars: 16 * 1024,
            admission_threshold: 0.6,
            learned: true,
            dedup_threshold: 0.945,
            profile_min_confidence: 0.9,
            profile_min_evidence: 3,
            decay_rate: 0.95,
            decay_interval_hours: 24,
            rebuild_lease_secs: 60,
            forget_after_days: 180,
            forget_max_importance: 2,
            forget_max_access: 2,
            quotas: QuotaConfig::default(),
            conflict_min_confidence: 0.8,
            conflict_on_inference: true,
        }
    }
}
