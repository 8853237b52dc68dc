//! The conformance suite of [`LanguageModel`], one function per behaviour (the test binary
//! stamps each into its own test per engine): every engine answers a task with the JSON it is
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

/// A model has a name.
pub async fn a_model_names_itself(model: &dyn LanguageModel) {
    assert!(!model.name().is_empty());
}

/// The decide task is answered with the JSON asked for.
pub async fn answers_the_decide_task_with_the_json_asked(model: &dyn LanguageModel) {
    let expected = json!({"need_memory": "yes", "memory_types": ["project_decision"], "notes": "用户在追问历史决策"});
    answers_with_the_json_asked(model, LlmTask::Decide, expected).await;
}

/// The extract task is answered with the JSON asked for.
pub async fn answers_the_extract_task_with_the_json_asked(model: &dyn LanguageModel) {
    let expected = json!([{"type": "user_preference", "content": "我喜欢简约的设计风格", "importance": 4}]);
    answers_with_the_json_asked(model, LlmTask::Extract, expected).await;
}

/// The summarize task is answered with the JSON asked for.
pub async fn answers_the_summarize_task_with_the_json_asked(model: &dyn LanguageModel) {
    let expected = json!({"goal": "Pick a stack", "decisions": [{"what": "Next.js", "why": "SSR"}]});
    answers_with_the_json_asked(model, LlmTask::Summarize, expected).await;
}

/// Asks `model` for `task` with a prompt that says which JSON to reply, and checks the reply.
async fn answers_with_the_json_asked(model: &dyn LanguageModel, task: LlmTask, expected: serde_json::Value) {
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
    let value =
        extract_json(&completion.text).unwrap_or_else(|| panic!("{}: no JSON in {:?}", model.name(), completion.text));
    assert_eq!(
        value,
        expected,
        "{} answers the {:?} task with the JSON asked for",
        model.name(),
        task
    );
    assert!(!completion.model.is_empty());
}
