//! The built-in rule engine: a [`LanguageModel`] whose answers come from rules registered per
//! task by the services. It never touches the network and answers in microseconds.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;

use super::{Completion, CompletionRequest, LanguageModel, LlmError, LlmTask};

/// Rules for one task: from the task's structured input to the JSON answer an LLM would give.
pub trait RuleHandler: Send + Sync {
    fn answer(&self, input: &serde_json::Value) -> Result<String, LlmError>;
}

impl<F> RuleHandler for F
where
    F: Fn(&serde_json::Value) -> Result<String, LlmError> + Send + Sync,
{
    fn answer(&self, input: &serde_json::Value) -> Result<String, LlmError> {
        self(input)
    }
}

/// Inputs with at most this much text run inline; larger ones on the CPU pool.
pub const INLINE_INPUT_BYTES: usize = 16 * 1024;

/// The bytes of text in a JSON value (strings and keys), counted without serialising it.
fn text_bytes(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(text) => text.len(),
        serde_json::Value::Array(items) => items.iter().map(text_bytes).sum(),
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| k.len() + text_bytes(v)).sum(),
        _ => 8,
    }
}

/// The built-in engine. Tasks without registered rules answer `Unsupported`.
#[derive(Default, Clone)]
pub struct RuleEngine {
    handlers: Arc<RwLock<HashMap<LlmTask, Arc<dyn RuleHandler>>>>,
}

impl fmt::Debug for RuleEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tasks: Vec<&str> = self.handlers.read().keys().map(|t| t.as_str()).collect();
        tasks.sort_unstable();
        f.debug_struct("RuleEngine").field("tasks", &tasks).finish()
    }
}

impl RuleEngine {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) the rules of a task.
    pub fn register(&self, task: LlmTask, handler: Arc<dyn RuleHandler>) {
        self.handlers.write().insert(task, handler);
    }

    /// Whether the engine has rules for a task.
    pub fn supports(&self, task: LlmTask) -> bool {
        self.handlers.read().contains_key(&task)
    }
}

#[async_trait]
impl LanguageModel for RuleEngine {
    fn name(&self) -> String {
        "rules".into()
    }

    fn is_builtin(&self) -> bool {
        true
    }

    async fn complete(&self, request: CompletionRequest) -> Result<Completion, LlmError> {
        let handler = self
            .handlers
            .read()
            .get(&request.task)
            .cloned()
            .ok_or_else(|| LlmError::Unsupported(format!("the task {:?}", request.task.as_str())))?;
        // Rules are regular expressions and word lists over the input: microseconds for a
        // message, seconds for megabytes of them. Large inputs take a CPU turn off the async
        // workers (`thinkus_common::work`).
        let text = if text_bytes(&request.input) <= INLINE_INPUT_BYTES {
            handler.answer(&request.input)?
        } else {
            let input = request.input;
            thinkus_common::work::cpu("rules", move || handler.answer(&input))
                .await
                .map_err(|err| match err.code {
                    thinkus_common::ErrorCode::ResourceExhausted => LlmError::RateLimited {
                        retry_after: err.retry_after,
                    },
                    _ => LlmError::Unavailable(err.message),
                })??
        };
        Ok(Completion {
            text,
            model: "rules".into(),
            input_tokens: 0,
            output_tokens: 0,
        })
    }
}
