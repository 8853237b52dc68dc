//! Language models behind one trait. Three implementations: [`openai::OpenAiChat`] (any
//! OpenAI-compatible chat completions endpoint), [`anthropic::AnthropicMessages`] (Anthropic's
//! Messages API) and [`rules::RuleEngine`], the built-in engine: each service registers the
//! rules for its task (decide, extract, summarize, merge, compact) and the engine answers in
//! the same JSON an LLM would, so both go through the same parser.

pub mod anthropic;
pub mod json;
pub mod openai;
pub mod rules;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use thinkus_common::config::{LlmConfig, LlmProvider};

pub use rules::{RuleEngine, RuleHandler};

/// The tasks the services ask a language model to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmTask {
    /// The memory controller's decision for one message.
    Decide,
    /// Memory candidates from a conversation.
    Extract,
    /// A structured session summary.
    Summarize,
    /// One memory from several similar ones.
    Merge,
    /// A short summary of an artifact.
    Compact,
    /// An answer to the user (the gateway's Converse).
    Converse,
}

impl LlmTask {
    pub fn as_str(self) -> &'static str {
        match self {
            LlmTask::Decide => "decide",
            LlmTask::Extract => "extract",
            LlmTask::Summarize => "summarize",
            LlmTask::Merge => "merge",
            LlmTask::Compact => "compact",
            LlmTask::Converse => "converse",
        }
    }
}

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    User,
    Assistant,
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: ChatRole,
    pub content: String,
}

impl ChatMessage {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: ChatRole::User,
            content: content.into(),
        }
    }
}

/// A request to a language model.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    pub task: LlmTask,
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The conversation; for one-shot tasks, one user message holding the prompt.
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    pub temperature: f32,
    /// The answer must be JSON (remote models are asked for a JSON object when they support it).
    pub json: bool,
    /// Use the cheaper, faster model when one is configured (the controller's decisions).
    pub fast: bool,
    /// The task's input as data, for the rule engine (remote models read the prompt instead).
    pub input: serde_json::Value,
}

impl CompletionRequest {
    /// A one-shot task: one prompt, structured input for the rules, a JSON answer.
    pub fn task(task: LlmTask, prompt: String, input: serde_json::Value) -> Self {
        Self {
            task,
            system: None,
            messages: vec![ChatMessage::user(prompt)],
            max_tokens: 1024,
            temperature: 0.0,
            json: true,
            fast: false,
            input,
        }
    }
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    /// The model that answered ("rules" for the built-in engine).
    pub model: String,
    pub input_tokens: u32,
    pub output_tokens: u32,
}

/// Errors of a language model.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{0} is not supported by this engine")]
    Unsupported(String),
    #[error("language model configuration: {0}")]
    Config(String),
    #[error("the language model refused the credentials: {0}")]
    Auth(String),
    #[error("the language model is rate limiting")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the language model timed out")]
    Timeout,
    #[error("language model unavailable: {0}")]
    Unavailable(String),
    #[error("the language model answered badly: {0}")]
    BadResponse(String),
}

/// A language model.
#[async_trait]
pub trait LanguageModel: Send + Sync + Debug {
    /// "rules", "openai:gpt-4o-mini", "anthropic:claude-…".
    fn name(&self) -> String;

    /// True for the built-in rule engine.
    fn is_builtin(&self) -> bool {
        false
    }

    /// Answers one request.
    async fn complete(&self, request: CompletionRequest) -> Result<Completion, LlmError>;
}

/// Builds the configured remote model, or `None` when the provider is the rule engine.
pub fn from_config(config: &LlmConfig) -> Result<Option<Arc<dyn LanguageModel>>, LlmError> {
    match config.provider {
        LlmProvider::Rules => Ok(None),
        LlmProvider::Openai => Ok(Some(Arc::new(openai::OpenAiChat::from_config(config)?))),
        LlmProvider::Anthropic => Ok(Some(Arc::new(anthropic::AnthropicMessages::from_config(config)?))),
    }
}

/// Reads the API key named by `api_key_env`; an empty name means no key (local servers).
pub(crate) fn api_key(config: &LlmConfig) -> Result<Option<String>, LlmError> {
    if config.api_key_env.is_empty() {
        return Ok(None);
    }
    std::env::var(&config.api_key_env).map(Some).map_err(|_| {
        LlmError::Config(format!(
            "llm.api_key_env: the variable {} is not set",
            config.api_key_env
        ))
    })
}

/// Shared HTTP handling: timeouts, retries with backoff on 429 and 5xx, error mapping.
pub(crate) async fn send_with_retries(
    build: impl Fn() -> reqwest::RequestBuilder,
    max_retries: u32,
) -> Result<serde_json::Value, LlmError> {
    let mut attempt = 0;
    loop {
        let result = build().send().await;
        let retry_after;
        match result {
            Ok(response) => {
                let status = response.status();
                if status.is_success() {
                    return response
                        .json::<serde_json::Value>()
                        .await
                        .map_err(|err| LlmError::BadResponse(format!("not JSON: {err}")));
                }
                let header_delay = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .map(Duration::from_secs_f64);
                let body = response.text().await.unwrap_or_default();
                let body: String = body.chars().take(300).collect();
                match status.as_u16() {
                    401 | 403 => return Err(LlmError::Auth(format!("{status}: {body}"))),
                    429 => {
                        if attempt >= max_retries {
                            return Err(LlmError::RateLimited {
                                retry_after: header_delay,
                            });
                        }
                        retry_after = header_delay;
                    }
                    500..=599 => {
                        if attempt >= max_retries {
                            return Err(LlmError::Unavailable(format!("{status}: {body}")));
                        }
                        retry_after = None;
                    }
                    _ => return Err(LlmError::BadResponse(format!("{status}: {body}"))),
                }
            }
            Err(err) if err.is_timeout() => return Err(LlmError::Timeout),
            Err(err) => {
                if attempt >= max_retries {
                    return Err(LlmError::Unavailable(err.to_string()));
                }
                retry_after = None;
            }
        }
        let backoff = Duration::from_millis(200 * 2u64.pow(attempt));
        tokio::time::sleep(retry_after.unwrap_or(backoff).min(Duration::from_secs(10))).await;
        attempt += 1;
    }
}

/// An HTTP client with the configured timeout.
pub(crate) fn http_client(config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .timeout(Duration::from_millis(config.timeout_ms.max(1)))
        .build()
        .map_err(|err| LlmError::Config(err.to_string()))
}
