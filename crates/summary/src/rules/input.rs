//! What the rules are given: the messages and the previous summary.

use serde::Deserialize;
use thinkus_common::model::ArtifactRef;

use crate::api::SummaryContent;

/// One message as the rules read it.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct RuleMessage {
    pub index: u32,
    pub role: String,
    pub speaker: Option<String>,
    pub content: String,
}

/// The rules' input: the new messages, the summary so far and the session's artifacts.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct RulesInput {
    pub messages: Vec<RuleMessage>,
    pub previous: Option<SummaryContent>,
    pub artifacts: Vec<ArtifactRef>,
    pub max_share: f64,
    /// The share never cuts below this many characters (a short session keeps its points).
    pub min_chars: usize,
    pub max_items: usize,
}

impl Default for RulesInput {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            previous: None,
            artifacts: Vec::new(),
            max_share: 0.23,
            min_chars: 300,
            max_items: 12,
        }
    }
}
