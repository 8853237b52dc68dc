//! Artifact service settings.

use serde::{Deserialize, Serialize};

/// The artifact service's section of the configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArtifactConfig {
    /// The largest content accepted, in bytes; enforced while the content streams in.
    pub max_bytes: u64,
    /// How long an artifact is kept when its header sets no expiry, in hours; 0 keeps it
    /// until it is deleted.
    pub default_ttl_hours: u64,
    /// The most tokens a compact may take (the design asks for fewer than 500); a content
    /// over 2,000 tokens gets at most a tenth of its own (`service::compact_cap`).
    pub compact_max_tokens: usize,
    /// The head of a content its compact is built from, in bytes: larger contents are
    /// summarised from this head (their size, line count and hash still cover everything).
    pub analyze_max_bytes: usize,
    /// The size of the chunks a download streams, in bytes.
    pub chunk_bytes: usize,
    /// Bytes of recently read contents kept in memory for partial reads (contents are
    /// immutable, so the cache never serves stale data); 0 disables it.
    pub read_cache_bytes: usize,
    /// How often expired artifacts are purged, in seconds; 0 turns the scheduled job off.
    pub purge_interval_secs: u64,
    /// Ask the configured language model for the summary part of compacts (when one is
    /// configured); the structural summary is the fallback.
    pub llm_summaries: bool,
    /// The largest artifact a JSONPath read parses, in bytes; a larger one is refused with
    /// INVALID_ARGUMENT (read it with lines, bytes or search). A parsed document takes up to
    /// about 20 times its size in memory (small records).
    pub json_path_max_bytes: u64,
    /// Bytes of content parsed at once: the analysis of uploads and JSONPath reads. A request
    /// waits for its content's bytes (an input larger than this waits for all of them) no
    /// longer than its deadline, then is shed with RESOURCE_EXHAUSTED. Bounds the memory of
    /// the parsed trees to about 20 times this, however many such requests come at once.
    pub parse_bytes_in_flight: usize,
}

impl Default for ArtifactConfig {
    fn default() -> Self {
        Self {
            max_bytes: 64 * 1024 * 1024,
            default_ttl_hours: 0,
            compact_max_tokens: 480,
            analyze_max_bytes: 16 * 1024 * 1024,
            chunk_bytes: 256 * 1024,
            read_cache_bytes: 256 * 1024 * 1024,
            purge_interval_secs: 3600,
            llm_summaries: true,
            json_path_max_bytes: 4 * 1024 * 1024,
            parse_bytes_in_flight: 4 * 1024 * 1024,
        }
    }
}

impl ArtifactConfig {
    /// Checks the values parsing cannot; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_bytes == 0 {
            return Err("artifact.max_bytes: must be positive".into());
        }
        if !(50..500).contains(&self.compact_max_tokens) {
            return Err("artifact.compact_max_tokens: must be within 50-499".into());
        }
        if self.analyze_max_bytes < 4096 {
            return Err("artifact.analyze_max_bytes: must be at least 4096".into());
        }
        if !(1024..=4 * 1024 * 1024).contains(&self.chunk_bytes) {
            return Err("artifact.chunk_bytes: must be within 1 KiB-4 MiB".into());
        }
        if self.json_path_max_bytes == 0 {
            return Err("artifact.json_path_max_bytes: must be positive".into());
        }
        if self.parse_bytes_in_flight < 1024 {
            return Err("artifact.parse_bytes_in_flight: must be at least 1024".into());
        }
        Ok(())
    }
}
