//! Memory controller settings.

use serde::{Deserialize, Serialize};

/// The memory controller's section of the configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// Decide with the configured LLM (when one is set) instead of the built-in rules.
    pub use_llm: bool,
    /// How long the LLM may take before the conservative default is used.
    pub llm_timeout_ms: u64,
    /// The longest message accepted, in bytes.
    pub max_message_bytes: usize,
    /// The built-in engine adds the learned heads (crates/learn/heads/controller.json) over the
    /// message's embedding to the rules. They read the local embedder's vectors only; with
    /// another embedder, or false here, the rules decide alone.
    pub learned: bool,
    /// The token budgets of the built-in engine's tiers (`[controller.budgets]`).
    pub budgets: BudgetTiers,
}

/// The token budgets of the built-in engine's tiers, after the design's (seed 000 section 3.1:
/// simple reference 200-500, deep 500-1500, full review 1500-3000). A decision that needs no
/// memory gets 0. The learned heads keep the rules' budget when they agree with the rules'
/// need and mode, and take the tier of their own need and mode otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetTiers {
    /// Memory may help: a look at the catalog.
    pub glance: u32,
    /// Memory may help, and the question asks for details (decision support, a question about
    /// something of the user's own).
    pub unsure_details: u32,
    /// Memory is needed, as an overview (lists, progress, "where were we").
    pub catalog: u32,
    /// Memory is needed, in detail: the deep tier.
    pub details: u32,
    /// Details about someone in the user's life, whose doings are scattered over many
    /// conversations: the top of the deep tier.
    pub person: u32,
    /// A full review, a question gathering many things ("how many times...", "which cities..."),
    /// or a portrait of someone: the full-review tier.
    pub full_review: u32,
}

impl Default for BudgetTiers {
    fn default() -> Self {
        Self {
            glance: 300,
            unsure_details: 600,
            catalog: 400,
            details: 1000,
            person: 1500,
            full_review: 2000,
        }
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            use_llm: false,
            llm_timeout_ms: 3_000,
            max_message_bytes: 32 * 1024,
            learned: true,
            budgets: BudgetTiers::default(),
        }
    }
}
