//! Summary service settings: triggers, limits, the rule engine's length and the rendering
//! budget.

use serde::{Deserialize, Serialize};

/// The summary service's section of the configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummaryConfig {
    /// A session without a new message for this long is over: its summary is brought up to
    /// date by the node's background sweep. 0 disables the sweep (explicit calls, summary
    /// requests and phase completions still update).
    pub idle_timeout_secs: u64,
    /// Seconds between two sweeps for idle, ended or flagged sessions.
    pub sweep_interval_secs: u64,
    /// Sessions summarised per sweep.
    pub sweep_batch: usize,
    /// Unsummarised messages after which RecordMessages schedules an update by itself (0:
    /// never), so a long session is never far behind.
    pub auto_update_every: u32,
    /// Messages per RecordMessages or GenerateSummary call.
    pub max_messages_per_call: usize,
    /// The longest message accepted, in characters.
    pub max_message_chars: usize,
    /// Messages read per update at most; a longer tail is summarised in several passes so that
    /// each LLM prompt stays bounded.
    pub max_messages_per_update: u32,
    /// The characters of one message shown to the LLM (the design cuts at 500).
    pub prompt_message_chars: usize,
    /// Items kept per list section (the oldest go first when a section is full).
    pub max_items_per_section: usize,
    /// The rule engine writes at most this share of the characters it reads (each update).
    pub rules_max_share: f64,
    /// ... but may always write this many characters, so a short session keeps its points.
    pub rules_min_chars: usize,
    /// Output tokens asked of the LLM.
    pub llm_max_tokens: u32,
    /// The rendering budget when a request gives none.
    pub default_render_tokens: u32,
    /// The largest rendering budget a request may ask for.
    pub max_render_tokens: u32,
    /// Offer the decisions of a summary to the knowledge manager as memories.
    pub offer_decisions: bool,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        Self {
            idle_timeout_secs: 1800,
            sweep_interval_secs: 60,
            sweep_batch: 20,
            auto_update_every: 40,
            max_messages_per_call: 500,
            max_message_chars: 32 * 1024,
            max_messages_per_update: 200,
            prompt_message_chars: 500,
            max_items_per_section: 12,
            rules_max_share: 0.23,
            rules_min_chars: 300,
            llm_max_tokens: 2000,
            default_render_tokens: 800,
            max_render_tokens: 8000,
            offer_decisions: true,
        }
    }
}

impl SummaryConfig {
    /// Checks the values parsing cannot; the error names the key (under `summary.`).
    pub fn validate(&self) -> Result<(), String> {
        if self.max_messages_per_call == 0 || self.max_messages_per_call > 10_000 {
            return Err("summary.max_messages_per_call: must be within 1-10000".into());
        }
        if self.max_messages_per_update == 0 {
            return Err("summary.max_messages_per_update: must be at least 1".into());
        }
        if !(0.01..=1.0).contains(&self.rules_max_share) {
            return Err("summary.rules_max_share: must be within 0.01-1".into());
        }
        if self.max_items_per_section == 0 {
            return Err("summary.max_items_per_section: must be at least 1".into());
        }
        if self.default_render_tokens == 0 || self.default_render_tokens > self.max_render_tokens {
            return Err("summary.default_render_tokens: must be between 1 and summary.max_render_tokens".into());
        }
        if self.idle_timeout_secs > 0 && self.sweep_interval_secs == 0 {
            return Err("summary.sweep_interval_secs: must be at least 1 when idle_timeout_secs is set".into());
        }
        Ok(())
    }
}
