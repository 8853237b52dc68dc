//! The conformance suite of [`LanguageModel`]: every engine answers a task with the JSON it is
//! asked for. Remote engines run against a mock server that checks the request and echoes the
//! JSON found after "Reply with exactly: " in the prompt; the rule engine gets a rule that
//! answers `input.reply`.

use std::sync::Arc;

use serde_json::json;

use crate::llm::json::extract_json;
use crate::llm::{CompletionRequest, LanguageModel, LlmTask, RuleEngine, RuleHandler};

/// The marker the mock servers look for.
pub const REPLY_MARKER: &str = "Reply with exactly: ";

/// Registers the echo rule the suite expects in a rule engine.
pub fn register_echo_rules(engine: &RuleEngine) {
    let echo: Arc<dyn RuleHandler> =
        Arc::new(|input: &serde_json::Value| Ok(input["reply"].as_str().unwrap_or_default().to_string()));
    for task in [
        LlmTask::Decide,
        LlmTask::Extract,
        LlmTask::Summarize,
        LlmTask::Merge,
        LlmTask::Compact,
    ] {
        engine.register(task, echo.clone());
    }
}

/// The suite of [`LanguageModel`].
pub async fn llm_suite(model: &dyn LanguageModel) {
    assert!(!model.name().is_empty());
    let cases = [
        (
            LlmTask::Decide,
            json!({"need_memory": "yes", "memory_types": ["project_decision"], "notes": "用户在追问历史决策"}),
        ),
        (
            LlmTask::Extract,
            json!([{"type": "user_preference", "content": "我喜欢简约的设计风格", "importance": 4}]),
        ),
        (
            LlmTask::Summarize,
            json!({"goal": "Pick a stack", "decisions": [{"what": "Next.js", "why": "SSR"}]}),
        ),
    ];
    for (task, expected) in cases {
        let reply = expected.to_string();
        let mut request = CompletionRequest::task(
            task,
            format!("Answer in JSON.\n{REPLY_MARKER}{reply}"),
            json!({"reply": reply}),
        );
        request.system = Some("You are a careful assistant.".into());
        request.max_tokens = 300;
        let completion = model
            .complete(request)
            .await
            .unwrap_or_else(|err| panic!("{} failed the {:?} task: {err}", model.name(), task));
        let value = extract_json(&completion.text)
            .unwrap_or_else(|| panic!("{}: no JSON in {:?}", model.name(), completion.text));
        assert_eq!(
            value,
            expected,
            "{} answers the {:?} task with the JSON asked for",
            model.name(),
            task
        );
        assert!(!completion.model.is_empty());
    }
}
