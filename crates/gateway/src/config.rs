//! The gateway's settings (`[gateway]` in the config file).

use serde::{Deserialize, Serialize};

/// How the gateway prepares and completes turns, runs its queue, and limits tenants.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// The context budget when a PrepareTurn gives none.
    pub default_budget_tokens: u32,
    /// The largest budget a caller may ask for.
    pub max_budget_tokens: u32,
    /// The largest share of the budget artifact compacts may take.
    pub artifacts_share: f64,
    /// The largest share of the budget the last session's summary may take.
    pub last_session_share: f64,
    /// The largest share of the budget the standing rules, profile and pending conflicts may
    /// take (they come in every context).
    pub standing_share: f64,
    /// How many standing rules and profile facts are read per turn.
    pub standing_considered: usize,
    /// How many of the session's artifacts, and of the project's earlier sessions', are
    /// considered for a turn.
    pub artifacts_considered: usize,
    /// An artifact is shown only when at least this share of the message's terms are in its
    /// path, tool, type or compact summary (1 when the message names it): one word a long
    /// message shares with a tool output is a coincidence (a code review pulling in a CI log at
    /// 0.04). 0 shows every artifact of the session sharing a word with the message. 0.1 chosen
    /// on the development sessions, where the artifacts their checks ask about match at 0.15 and
    /// 0.25 (docs/benchmarks.md).
    pub artifact_min_overlap: f64,
    /// How many of the reader's value changes (old value -> new value) are read per turn to
    /// mark replaced values in older records.
    pub value_changes_considered: usize,
    /// The catalog probe under the controller's "no": at most this many memories matching the
    /// message strongly are included anyway (0 turns the probe off).
    pub probe_entries: usize,
    /// The dense similarity (cosine, of the embedding model in use) a memory needs to pass
    /// the probe; it must share a word with the message too.
    pub probe_min_similarity: f64,
    /// The budget of the probe's recall and of what it includes, in tokens.
    pub probe_budget_tokens: u32,
    /// The memory budget, in tokens, of a probe hit on a message the controller read as a
    /// self-contained task while it brings no material of its own ("write the invite for
    /// Aiko"): recalled in detail like an unsure need (the controller's `unsure_details` tier).
    pub probe_task_budget_tokens: u32,
    /// A recalled memory whose relevance is below this share of the best recalled memory's is
    /// left out of the context, budget or not (0 keeps every memory the budget holds). 0.4 lost no
    /// needed fact on the development sessions and kept LoCoMo's evidence in context; 0.5 lost
    /// LoCoMo evidence, 0.6 needed facts (docs/benchmarks.md).
    pub relevance_floor: f64,
    /// A recalled record longer than this many tokens (an assistant's table, a long analysis)
    /// is shown as the lines sharing the most words with the message, whole, within it; "…"
    /// marks the rest. 0 (the default) shows records whole: at 100, chosen on the development
    /// sessions, the frozen sessions lost 4 of 35 needed facts, said in words the question did
    /// not use (docs/benchmarks.md).
    pub entry_cap_tokens: u32,
    /// A recalled conversation turn shows the turn before it (its context line) only when the
    /// turn itself is at most this many tokens: a short reply ("Yes, last Tuesday!") needs what
    /// it answers, a longer turn says what it is about, and the turn before it, often a long
    /// reply, would only take room. 0 never shows it. 30 chosen on the development sessions
    /// (docs/benchmarks.md).
    pub context_line_max_tokens: u32,
    /// Tool outputs above this many tokens are stored as artifacts and replaced by compacts.
    pub offload_threshold_tokens: u32,
    /// Background workers taking jobs from the queue.
    pub workers: usize,
    /// How often an idle worker looks for work, in milliseconds.
    pub poll_interval_ms: u64,
    /// How long a worker holds a job before another may take it, in seconds.
    pub lease_seconds: u64,
    /// The longest a CompleteTurn with `wait_for_learning` waits for its learning job, in
    /// milliseconds.
    pub learn_wait_ms: u64,
    /// Runs of a job before it is failed for good.
    pub max_attempts: u32,
    /// The first retry's delay in milliseconds; each later one doubles, up to `retry_max_ms`.
    pub retry_base_ms: u64,
    /// The longest retry delay in milliseconds.
    pub retry_max_ms: u64,
    /// The REST/JSON facade's listen address ("" turns it off).
    pub rest_listen: String,
    /// The memory page's listen address ("" turns it off; `crate::ui`). Same keys as REST.
    pub ui_listen: String,
    /// Recent PrepareTurn traces the page keeps in memory, in all (20 per user at most); kept
    /// only while the page is served.
    pub ui_traces: usize,
    /// The secret the memory page seals its sessions with (`crate::ui::session`), at least 32
    /// bytes and the same on every gateway replica behind one address, so that each accepts the
    /// others' sessions and CSRF tokens. Empty: a random secret of this process (one replica).
    pub ui_session_secret: String,
    /// The system prompt of Converse when the caller gives none.
    pub default_system_prompt: String,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            default_budget_tokens: 2000,
            max_budget_tokens: 32_000,
            artifacts_share: 0.25,
            last_session_share: 0.3,
            standing_share: 0.2,
            standing_considered: 20,
            artifacts_considered: 20,
            artifact_min_overlap: 0.1,
            value_changes_considered: 200,
            probe_entries: 3,
            probe_min_similarity: 0.85,
            probe_budget_tokens: 300,
            probe_task_budget_tokens: 600,
            relevance_floor: 0.4,
            entry_cap_tokens: 0,
            context_line_max_tokens: 30,
            offload_threshold_tokens: 500,
            workers: 2,
            poll_interval_ms: 200,
            lease_seconds: 120,
            learn_wait_ms: 10_000,
            max_attempts: 5,
            retry_base_ms: 2_000,
            retry_max_ms: 300_000,
            rest_listen: String::new(),
            ui_listen: String::new(),
            ui_traces: 500,
            ui_session_secret: String::new(),
            default_system_prompt: "You are a helpful executive assistant. Use the context when it is relevant; \
                answer in the user's language."
                .into(),
        }
    }
}

impl GatewayConfig {
    /// Checks the settings, naming the first bad key.
    pub fn validate(&self) -> Result<(), String> {
        if self.default_budget_tokens == 0 || self.default_budget_tokens > self.max_budget_tokens {
            return Err("gateway.default_budget_tokens: must be between 1 and gateway.max_budget_tokens".into());
        }
        for (key, share) in [
            ("gateway.artifacts_share", self.artifacts_share),
            ("gateway.last_session_share", self.last_session_share),
            ("gateway.standing_share", self.standing_share),
            ("gateway.relevance_floor", self.relevance_floor),
            ("gateway.artifact_min_overlap", self.artifact_min_overlap),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(format!("{key}: must be between 0 and 1"));
            }
        }
        if !(-1.0..=1.0).contains(&self.probe_min_similarity) {
            return Err("gateway.probe_min_similarity: must be a cosine similarity, between -1 and 1".into());
        }
        if self.max_attempts == 0 {
            return Err("gateway.max_attempts: must be at least 1".into());
        }
        if self.lease_seconds == 0 {
            return Err("gateway.lease_seconds: must be at least 1".into());
        }
        if !self.ui_session_secret.is_empty() && self.ui_session_secret.len() < crate::ui::session::MIN_SECRET_BYTES {
            return Err(format!(
                "gateway.ui_session_secret: must be at least {} bytes (e.g. `openssl rand -hex 32`), or empty",
                crate::ui::session::MIN_SECRET_BYTES
            ));
        }
        Ok(())
    }
}
