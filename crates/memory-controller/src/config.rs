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
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            use_llm: false,
            llm_timeout_ms: 3_000,
            max_message_bytes: 32 * 1024,
            learned: true,
        }
    }
}
