//! LearnFromConversation with a language model (issue 17), over gRPC on SQLite and PostgreSQL:
//! an OpenAI-compatible mock answers the extraction, its candidates pass admission and are
//! written; when the model fails, the rules extract instead and the response says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use thinkus_common::config::{LlmConfig, LlmProvider};
use thinkus_proto::common::{Engine, Message, Scope};
use thinkus_proto::knowledge::{LearnFromConversationRequest, LearnFromConversationResponse, WriteOutcome};

use crate::knowledge::{Backend, Node, start};

#[derive(Clone)]
struct Mock {
    down: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
}

/// Answers every chat completion with two extracted memories, or 500 while `down`.
async fn chat(State(mock): State<Mock>, Json(body): Json<Value>) -> axum::response::Response {
    mock.calls.fetch_add(1, Ordering::SeqCst);
    if mock.down.load(Ordering::SeqCst) {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the model is down").into_response();
    }
    assert_eq!(body["model"], "test-model");
    let answer = json!({"memories": [
        {"type": "project_decision", "content": "The launch of the shop moves to the ninth of May",
         "importance": 4, "confidence": 0.9, "project_specific": true},
        {"type": "risk", "content": "The payment provider may not approve the account in time",
         "importance": 4, "confidence": 0.85, "project_specific": true}
    ]});
    Json(json!({
        "model": "test-model",
        "choices": [{"message": {"role": "assistant", "content": format!("```json\n{answer}\n```")}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 60}
    }))
    .into_response()
}

async fn serve() -> (String, Mock) {
    let mock = Mock {
        down: Arc::new(AtomicBool::new(false)),
        calls: Arc::new(AtomicUsize::new(0)),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), mock)
}

async fn learn(node: &Node, scope: &Scope, text: &str, request_id: &str) -> LearnFromConversationResponse {
    node.km()
        .learn_from_conversation(LearnFromConversationRequest {
            scope: Some(scope.clone()),
            messages: vec![Message {
                role: "user".into(),
                content: text.into(),
                ..Default::default()
            }],
            engine: Engine::Llm as i32,
            request_id: request_id.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn the_model_extracts_and_the_rules_stand_in(backend: Backend) {
    let (base_url, mock) = serve().await;
    let Some(node) = start(backend, |config| {
        config.llm = LlmConfig {
            provider: LlmProvider::Openai,
            base_url,
            model: "test-model".into(),
            timeout_ms: 5000,
            max_retries: 0,
            ..Default::default()
        };
    })
    .await
    else {
        return;
    };
    let me = Scope {
        user_id: "llm-learner".into(),
        role_id: "cto".into(),
        project_id: "shop".into(),
        ..Default::default()
    };

    // The model's two memories are written, as the model worded them.
    let learned = learn(&node, &me, "Let's talk about the launch and the payments.", "llm-1").await;
    assert_eq!(learned.engine, "llm", "{learned:?}");
    assert_eq!(learned.candidates, 2, "{learned:?}");
    let written: Vec<String> = learned
        .results
        .iter()
        .filter(|r| r.outcome == WriteOutcome::Created as i32)
        .filter_map(|r| r.memory.as_ref().map(|m| m.content.clone()))
        .collect();
    assert_eq!(
        written,
        vec![
            "The launch of the shop moves to the ninth of May",
            "The payment provider may not approve the account in time"
        ],
        "{learned:?}"
    );
    let calls = mock.calls.load(Ordering::SeqCst);
    assert!(calls >= 1, "the model was asked");

    // The model fails: the rules extract the same conversation instead.
    mock.down.store(true, Ordering::SeqCst);
    let fallback = learn(
        &node,
        &me,
        "We decided to use PostgreSQL as the main database.",
        "llm-2",
    )
    .await;
    assert!(mock.calls.load(Ordering::SeqCst) > calls, "the model was asked again");
    assert_eq!(fallback.engine, "rules", "{fallback:?}");
    assert!(fallback.candidates >= 1, "{fallback:?}");
    assert!(
        fallback
            .results
            .iter()
            .any(|r| r.outcome == WriteOutcome::Created as i32
                && r.memory.as_ref().is_some_and(|m| m.content.contains("PostgreSQL"))),
        "the rules' memory is written: {fallback:?}"
    );
    node.stop().await;
}

on_both_backends!(the_model_extracts_and_the_rules_stand_in);
