//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`): OpenAI, Azure
//! OpenAI's compatible endpoints, vLLM, Ollama, DeepSeek, Qwen and the like.

use async_trait::async_trait;
use serde_json::{Value, json};
use thinkus_common::config::LlmConfig;

use super::{
    ChatRole, Completion, CompletionRequest, LanguageModel, LlmError, api_key, http_client, send_with_retries,
};

/// A chat model behind an OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    fast_model: String,
    api_key: Option<String>,
    max_retries: u32,
}

impl OpenAiChat {
    /// Builds the client, reading the API key from the variable `llm.api_key_env` names.
    pub fn from_config(config: &LlmConfig) -> Result<Self, LlmError> {
        Self::with_key(config, api_key(config)?)
    }

    /// Builds the client with an explicit API key.
    pub fn with_key(config: &LlmConfig, api_key: Option<String>) -> Result<Self, LlmError> {
        if config.model.is_empty() {
            return Err(LlmError::Config("llm.model is required for the openai provider".into()));
        }
        let base = if config.base_url.is_empty() {
            "https://api.openai.com/v1"
        } else {
            config.base_url.trim_end_matches('/')
        };
        Ok(Self {
            client: http_client(config)?,
            endpoint: format!("{base}/chat/completions"),
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
        let mut messages = Vec::new();
        if let Some(system) = &request.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        for message in &request.messages {
            let role = match message.role {
                ChatRole::User => "user",
                ChatRole::Assistant => "assistant",
            };
            messages.push(json!({"role": role, "content": message.content}));
        }
        let mut body = json!({
            "model": if request.fast { &self.fast_model } else { &self.model },
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        });
        if request.json {
            // JSON mode needs an object at the top level; prompts that want arrays say so and
            // the parser accepts both, so only ask for it when the prompt mentions JSON.
            let mentions_json = request.messages.iter().any(|m| m.content.contains("JSON"));
            if mentions_json {
                body["response_format"] = json!({"type": "json_object"});
            }
        }
        body
    }
}

#[async_trait]
impl LanguageModel for OpenAiChat {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    async fn complete(&self, request: CompletionRequest) -> Result<Completion, LlmError> {
        let body = self.body(&request);
        let response = send_with_retries(
            || {
                let builder = self.client.post(&self.endpoint).json(&body);
                match &self.api_key {
                    Some(key) => builder.bearer_auth(key),
                    None => builder,
                }
            },
            self.max_retries,
        )
        .await?;
        let text = response["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| LlmError::BadResponse("no choices[0].message.content".into()))?
            .to_string();
        Ok(Completion {
            text,
            model: response["model"].as_str().unwrap_or(&self.model).to_string(),
            input_tokens: response["usage"]["prompt_tokens"].as_u64().unwrap_or(0) as u32,
            output_tokens: response["usage"]["completion_tokens"].as_u64().unwrap_or(0) as u32,
        })
    }
}
