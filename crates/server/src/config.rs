//! The root configuration: the shared sections and one section per service, so the all-in-one
//! process reads one file. Loaded in layers (defaults, file, THINKUS__ environment, --set
//! flags) and validated once, naming the key at fault.

use std::path::Path;

use serde::{Deserialize, Serialize};
use thinkus_common::config::{
    AuthConfig, ConfigError, EmbedderConfig, EndpointsConfig, LlmConfig, LlmProvider, ServerConfig, StorageConfig,
    TelemetryConfig, TokenizerConfig, load_layered,
};
use thinkus_knowledge_manager::KnowledgeConfig;
use thinkus_memory_controller::ControllerConfig;
use thinkus_retriever::RetrieverConfig;

use crate::services::ServiceKind;

/// Everything a Thinkus Memory process is configured with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub telemetry: TelemetryConfig,
    pub storage: StorageConfig,
    pub embedder: EmbedderConfig,
    pub llm: LlmConfig,
    pub tokenizer: TokenizerConfig,
    pub endpoints: EndpointsConfig,
    pub controller: ControllerConfig,
    pub retriever: RetrieverConfig,
    pub knowledge: KnowledgeConfig,
    pub artifact: thinkus_artifact::ArtifactConfig,
    pub summary: thinkus_summary::SummaryConfig,
    pub gateway: thinkus_gateway::GatewayConfig,
}

impl Config {
    /// Loads and validates the configuration.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let config: Config = load_layered(file, overrides)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the values that parsing cannot: URI schemes, required companions, ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let storage = self.storage.resolved(&self.server.data_dir);
        if !(storage.database.starts_with("sqlite://")
            || storage.database.starts_with("postgres://")
            || storage.database.starts_with("postgresql://"))
        {
            return Err(ConfigError::invalid(
                "storage.database",
                "use sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DB",
            ));
        }
        if !(storage.vectors.starts_with("edge://")
            || storage.vectors.starts_with("qdrant://")
            || storage.vectors.starts_with("qdrants://"))
        {
            return Err(ConfigError::invalid(
                "storage.vectors",
                "use edge://PATH (in-process) or qdrant://HOST:6334 (a Qdrant server)",
            ));
        }
        if !(storage.blobs.starts_with("file://") || storage.blobs.starts_with("s3://")) {
            return Err(ConfigError::invalid(
                "storage.blobs",
                "use file://PATH or s3://BUCKET/PREFIX?endpoint=…",
            ));
        }
        let embedder = self.embedder.uri.as_str();
        if !(embedder.starts_with("local://")
            || embedder.starts_with("hash://")
            || embedder.starts_with("http://")
            || embedder.starts_with("https://"))
        {
            return Err(ConfigError::invalid(
                "embedder.uri",
                "use local:// (multilingual-e5-small), http(s)://HOST/v1 or hash://384",
            ));
        }
        if (embedder.starts_with("http://") || embedder.starts_with("https://")) && self.embedder.dim.is_none() {
            return Err(ConfigError::invalid("embedder.dim", "is required for an HTTP embedder"));
        }
        if self.llm.provider != LlmProvider::Rules && self.llm.model.is_empty() {
            return Err(ConfigError::invalid(
                "llm.model",
                "is required when llm.provider is not rules",
            ));
        }
        if thinkus_common::tokens::Encoding::parse(&self.tokenizer.encoding).is_none() {
            return Err(ConfigError::invalid(
                "tokenizer.encoding",
                "use cl100k_base, o200k_base, p50k_base or r50k_base",
            ));
        }
        if self.retriever.default_budget_tokens == 0
            || self.retriever.default_budget_tokens > self.retriever.max_budget_tokens
        {
            return Err(ConfigError::invalid(
                "retriever.default_budget_tokens",
                "must be between 1 and retriever.max_budget_tokens",
            ));
        }
        let tiers = &self.controller.budgets;
        for (key, value) in [
            ("controller.budgets.glance", tiers.glance),
            ("controller.budgets.unsure_details", tiers.unsure_details),
            ("controller.budgets.catalog", tiers.catalog),
            ("controller.budgets.details", tiers.details),
            ("controller.budgets.person", tiers.person),
            ("controller.budgets.full_review", tiers.full_review),
        ] {
            // A tier of 0 would ask for memory and recall none.
            if value == 0 || value > self.retriever.max_budget_tokens {
                return Err(ConfigError::invalid(
                    key,
                    "must be between 1 and retriever.max_budget_tokens",
                ));
            }
        }
        let server = &self.server;
        for (key, value) in [
            ("server.concurrency_limit", server.concurrency_limit),
            ("server.tenant_concurrency_limit", server.tenant_concurrency_limit),
        ] {
            if value == 0 {
                return Err(ConfigError::invalid(key, "must be at least 1"));
            }
        }
        if server.tenant_concurrency_limit > server.concurrency_limit {
            return Err(ConfigError::invalid(
                "server.tenant_concurrency_limit",
                "must not exceed server.concurrency_limit",
            ));
        }
        if !(server.tenant_rate_per_second >= 0.0 && server.tenant_rate_per_second.is_finite()) {
            return Err(ConfigError::invalid(
                "server.tenant_rate_per_second",
                "must be 0 (off) or a positive number",
            ));
        }
        if !(server.tenant_rate_burst >= 1.0 && server.tenant_rate_burst.is_finite()) {
            return Err(ConfigError::invalid("server.tenant_rate_burst", "must be at least 1"));
        }
        self.gateway
            .validate()
            .map_err(|message| match message.split_once(": ") {
                Some((key, why)) => ConfigError::invalid(key, why),
                None => ConfigError::invalid("gateway", message),
            })?;
        if !(0.0..=1.0).contains(&self.knowledge.conflict_min_confidence) {
            return Err(ConfigError::invalid(
                "knowledge.conflict_min_confidence",
                "must be within 0-1",
            ));
        }
        if !(0.0..=1.0).contains(&self.knowledge.dedup_threshold) {
            return Err(ConfigError::invalid("knowledge.dedup_threshold", "must be within 0-1"));
        }
        if !(0.0..1.0).contains(&self.knowledge.decay_rate) || self.knowledge.decay_rate == 0.0 {
            return Err(ConfigError::invalid(
                "knowledge.decay_rate",
                "must be within 0-1 (exclusive)",
            ));
        }
        if self
            .knowledge
            .quotas
            .limit(&self.knowledge.quotas.default_plan)
            .is_none()
        {
            return Err(ConfigError::invalid(
                "knowledge.quotas.default_plan",
                "use unlimited, seed, growth, scale or enterprise",
            ));
        }
        self.summary
            .validate()
            .map_err(|message| match message.split_once(": ") {
                Some((key, why)) => ConfigError::invalid(key, why),
                None => ConfigError::invalid("summary", message),
            })?;
        self.artifact
            .validate()
            .map_err(|message| match message.split_once(": ") {
                Some((key, why)) => ConfigError::invalid(key, why),
                None => ConfigError::invalid("artifact", message),
            })?;
        thinkus_common::auth::Authenticator::from_config(&self.auth)?;
        Ok(())
    }

    /// The address of a service this process does not run, when one is configured.
    pub fn endpoint(&self, kind: ServiceKind) -> Option<&str> {
        let value = match kind {
            ServiceKind::MemoryController => &self.endpoints.memory_controller,
            ServiceKind::Retriever => &self.endpoints.retriever,
            ServiceKind::KnowledgeManager => &self.endpoints.knowledge_manager,
            ServiceKind::Artifact => &self.endpoints.artifact,
            ServiceKind::Summary => &self.endpoints.summary,
            ServiceKind::Gateway => &None,
        };
        value.as_deref().filter(|v| !v.is_empty())
    }

    /// The key this process presents to other services.
    pub fn client_key(&self) -> Option<String> {
        self.auth
            .client_key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| std::env::var("THINKUS_API_KEY").ok().filter(|k| !k.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().expect("the embedded defaults validate");
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = Config::load(None, &["storage.database=mysql://x".into()]).unwrap_err();
        assert!(err.to_string().starts_with("storage.database"), "{err}");
        let err = Config::load(None, &["llm.provider=openai".into()]).unwrap_err();
        assert!(err.to_string().starts_with("llm.model"), "{err}");
        let err = Config::load(None, &["embedder.uri=http://localhost:8000/v1".into()]).unwrap_err();
        assert!(err.to_string().starts_with("embedder.dim"), "{err}");
        let err = Config::load(None, &["knowledge.quotas.default_plan=gold".into()]).unwrap_err();
        assert!(err.to_string().starts_with("knowledge.quotas.default_plan"), "{err}");
        let err = Config::load(None, &["controller.budgets.details=0".into()]).unwrap_err();
        assert!(err.to_string().starts_with("controller.budgets.details"), "{err}");
        let err = Config::load(None, &["controller.budgets.full_review=1000000".into()]).unwrap_err();
        assert!(err.to_string().starts_with("controller.budgets.full_review"), "{err}");
        let err = Config::load(None, &["auth.mode=api_key".into()]).unwrap_err();
        assert!(err.to_string().starts_with("auth.keys"), "{err}");
    }
}
