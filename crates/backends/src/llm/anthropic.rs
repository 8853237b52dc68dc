//! Anthropic's Messages API (`POST {base_url}/v1/messages`).

use async_trait::async_trait;
use serde_json::{Value, json};
use thinkus_common::config::LlmConfig;

use super::{
    ChatRole, Completion, CompletionRequest, LanguageModel, LlmError, api_key, http_client, send_with_retries,
};

const API_VERSION: &str = "2023-06-01";

/// A Claude model.
#[derive(Debug, Clone)]
pub struct AnthropicMessages {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    fast_model: String,
    api_key: Option<String>,
    max_retries: u32,
}

impl AnthropicMessages {
    /// Builds the client, reading the API key from the variable `llm.api_key_env` names.
    pub fn from_config(config: &LlmConfig) -> Result<Self, LlmError> {
        Self::with_key(config, api_key(config)?)
    }

    /// Builds the client with an explicit API key.
    pub fn with_key(config: &LlmConfig, api_key: Option<String>) -> Result<Self, LlmError> {
        if config.model.is_empty() {
            return Err(LlmError::Config(
                "llm.model is required for the anthropic provider".into(),
            ));
        }
        let base = if config.base_url.is_empty() {
            "https://api.anthropic.com"
        } else {
            config.base_url.trim_end_matches('/')
        };
        Ok(Self {
            client: http_client(config)?,
            endpoint: format!("{base}/v1/messages"),
            model: config.model.clone(),
            fast_model: if config.fast_model.is_empty() {
                config.model.clone()
            } else {
                config.fast_model.clone()
            },
            api_key,
            max_retries: config.max_retries,
        })
    }

    fn body(&self, request: &CompletionRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    ChatRole::User => "user",
                    ChatRole::Assistant => "assistant",
                };
                json!({"role": role, "content": m.content})
            })
            .collect();
        let mut body = json!({
            "model": if request.fast { &self.fast_model } else { &self.model },
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "messages": messages,
        });
        if let Some(system) = &request.system {
            body["system"] = json!(system);
        }
        body
    }
}

#[async_trait]
impl LanguageModel for AnthropicMessages {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    async fn complete(&self, request: CompletionRequest) -> Result<Completion, LlmError> {
        let body = self.body(&request);
        let response = send_with_retries(
            || {
                let builder = self
                    .client
                    .post(&self.endpoint)
                    .header("anthropic-version", API_VERSION)
                    .json(&body);
                match &self.api_key {
                    Some(key) => builder.header("x-api-key", key),
                    None => builder,
                }
            },
            self.max_retries,
        )
        .await?;
        let text: String = response["content"]
            .as_array()
            .ok_or_else(|| LlmError::BadResponse("no content blocks".into()))?
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("");
        if text.is_empty() && response["stop_reason"] != "end_turn" {
            return Err(LlmError::BadResponse(format!(
                "empty answer (stop_reason {})",
                response["stop_reason"]
            )));
        }
        Ok(Completion {
            text,
            model: response["model"].as_str().unwrap_or(&self.model).to_string(),
            input_tokens: response["usage"]["input_tokens"].as_u64().unwrap_or(0) as u32,
            output_tokens: response["usage"]["output_tokens"].as_u64().unwrap_or(0) as u32,
        })
    }
}
