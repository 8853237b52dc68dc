//! The summary service end to end: incremental updates that read only the new messages,
//! cross-role reads, both engines (the rules, and an LLM behind a local mock OpenAI-compatible
//! server), a failed LLM call keeping the previous summary, bad input, the idle sweep, and the
//! gRPC surface with decisions offered to the knowledge manager. On SQLite and PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Json;
use axum::extract::State;
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::sync::Mutex;
use thinkus_backends::llm::openai::OpenAiChat;
use thinkus_backends::llm::{LanguageModel, RuleEngine};
use thinkus_backends::sql::{
    OwnerLock, OwnerSections, SessionKey, SessionRecord, SessionStore, SqlStore, StoreError, SummaryRecord,
};
use thinkus_common::config::{LlmConfig, LlmProvider};
use thinkus_common::model::{EngineChoice, MemoryType, Message, Owner, Scope};
use thinkus_common::tokens::TokenCounter;
use thinkus_common::{ApiError, ErrorCode};
use thinkus_summary::api::{GenerateRequest, ListRequest, RecordRequest, RenderRequest, SummaryApi};
use thinkus_summary::{Summarizer, SummaryConfig};

use crate::support;

/// A session store that records which message ranges were read.
struct Counting {
    inner: Arc<SqlStore>,
    reads: Mutex<Vec<(u32, u32)>>,
}

#[async_trait]
impl OwnerSections for Counting {
    async fn lock_owner(&self, owner: &Owner) -> Result<OwnerLock, StoreError> {
        self.inner.lock_owner(owner).await
    }
    async fn job_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        self.inner.job_exists(owner, id).await
    }
    async fn session_exists(&self, owner: &Owner, id: &str) -> Result<bool, StoreError> {
        self.inner.session_exists(owner, id).await
    }
}

#[async_trait]
impl SessionStore for Counting {
    async fn append_messages(&self, key: &SessionKey, messages: &[Message]) -> Result<(u32, u32), StoreError> {
        self.inner.append_messages(key, messages).await
    }
    async fn get_messages(&self, user: &Owner, session: &str, from: u32, to: u32) -> Result<Vec<Message>, StoreError> {
        self.reads.lock().unwrap().push((from, to));
        self.inner.get_messages(user, session, from, to).await
    }
    async fn get_session(&self, user: &Owner, session: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.get_session(user, session).await
    }
    async fn flag_session(
        &self,
        user: &Owner,
        session: &str,
        ended: Option<bool>,
        requested: Option<bool>,
    ) -> Result<(), StoreError> {
        self.inner.flag_session(user, session, ended, requested).await
    }
    async fn sessions_to_summarize(&self, idle: DateTime<Utc>, limit: usize) -> Result<Vec<SessionRecord>, StoreError> {
        self.inner.sessions_to_summarize(idle, limit).await
    }
    async fn last_session_with_summary(
        &self,
        user: &Owner,
        project: Option<&str>,
        role: Option<&str>,
        exclude: Option<&str>,
        until: DateTime<Utc>,
    ) -> Result<Option<(SessionRecord, Option<SummaryRecord>)>, StoreError> {
        self.inner
            .last_session_with_summary(user, project, role, exclude, until)
            .await
    }
    async fn put_summary(&self, summary: &SummaryRecord, expected: Option<i32>) -> Result<(), StoreError> {
        self.inner.put_summary(summary, expected).await
    }
    async fn get_summary(&self, user: &Owner, session: &str) -> Result<Option<SummaryRecord>, StoreError> {
        self.inner.get_summary(user, session).await
    }
    async fn list_summaries(
        &self,
        user: &Owner,
        project: Option<&str>,
        exclude_role: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SummaryRecord>, StoreError> {
        self.inner.list_summaries(user, project, exclude_role, limit).await
    }
}

/// The mock LLM: answers a fixed summary, or fails, and keeps every prompt.
#[derive(Clone)]
struct Mock {
    fail: Arc<std::sync::atomic::AtomicBool>,
    prompts: Arc<Mutex<Vec<String>>>,
}

async fn completions(State(mock): State<Mock>, Json(body): Json<Value>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let prompt = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    mock.prompts.lock().unwrap().push(prompt.clone());
    if mock.fail.load(std::sync::atomic::Ordering::SeqCst) {
        return (axum::http::StatusCode::OK, "<html>overloaded</html>").into_response();
    }
    // A partial answer (no "risks"): the previous risks must survive.
    let summary = json!({
        "goal": "Plan the billing migration",
        "decisions": [{"what": "Use Stripe for billing", "why": "it supports refunds", "who": "cfo", "confidence": "high"}],
        "progress": ["Exported the old invoices"],
        "next_actions": ["Import invoices into Stripe"],
        "open_questions": ["Do we need VAT invoices?"]
    });
    Json(json!({
        "model": "test-model",
        "choices": [{"message": {"role": "assistant", "content": format!("Sure:\n```json\n{summary}\n```")}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
    .into_response()
}

async fn mock_llm() -> (Arc<dyn LanguageModel>, Mock) {
    let mock = Mock {
        fail: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        prompts: Arc::new(Mutex::new(Vec::new())),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = LlmConfig {
        provider: LlmProvider::Openai,
        base_url: format!("http://{addr}/v1"),
        model: "test-model".into(),
        timeout_ms: 2000,
        max_retries: 0,
        ..Default::default()
    };
    (Arc::new(OpenAiChat::with_key(&config, None).unwrap()), mock)
}

fn msg(role: &str, speaker: Option<&str>, content: &str) -> Message {
    Message {
        role: role.into(),
        content: content.into(),
        speaker: speaker.map(str::to_string),
        created_at: Utc::now(),
        index: 0,
    }
}

fn scope(user: &str, role: &str, project: &str, session: &str) -> Scope {
    Scope::new(user, role).with_project(project).with_session(session)
}

fn assert_code(result: Result<impl std::fmt::Debug, ApiError>, code: ErrorCode, field: &str) {
    let err = result.expect_err("bad input is refused");
    assert_eq!(err.code, code, "{err:?}");
    assert!(err.message.contains(field), "the error names {field}: {err:?}");
}

async fn scenario(store: Arc<SqlStore>) {
    let user = format!("u-{}", uuid::Uuid::now_v7().simple());
    let counting = Arc::new(Counting {
        inner: store.clone(),
        reads: Mutex::new(Vec::new()),
    });
    let (llm, mock) = mock_llm().await;
    let config = SummaryConfig {
        auto_update_every: 0,
        idle_timeout_secs: 60,
        ..Default::default()
    };
    let service = Summarizer::new(
        config,
        counting.clone(),
        RuleEngine::new(),
        Some(llm),
        TokenCounter::default(),
        None,
        None,
    );
    let cto = scope(&user, "cto", "p1", "s1");

    // Rules, first pass: every message is read.
    service
        .record(RecordRequest {
            scope: cto.clone(),
            messages: vec![
                msg(
                    "user",
                    None,
                    "今天我想讨论一下课程平台的技术方案。预算是$500，必须在2周内完成。",
                ),
                msg(
                    "cto",
                    Some("David"),
                    "我们决定使用Stripe作为支付方案，因为接入简单，用户在美国。",
                ),
                msg("cto", Some("David"), "视频播放可能会有版权问题，需要Tom确认。"),
                msg("user", None, "是否需要支持多语言？"),
            ],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    let first = service
        .generate(GenerateRequest {
            scope: cto.clone(),
            engine: EngineChoice::Rules,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(first.messages_read, 4);
    assert_eq!((first.summary.trajectory_start, first.summary.trajectory_end), (0, 3));
    assert_eq!(first.summary.language.as_str(), "zh");
    assert_eq!(first.summary.engine, "rules");
    assert!(
        first
            .summary
            .decisions
            .iter()
            .any(|d| d.what.contains("Stripe") && d.why.contains("接入简单"))
    );
    assert!(
        first.summary.risks.iter().any(|r| r.contains("版权")),
        "{:?}",
        first.summary
    );

    // Incremental: only the two new messages are read, and merged.
    counting.reads.lock().unwrap().clear();
    service
        .record(RecordRequest {
            scope: cto.clone(),
            messages: vec![
                msg("cto", Some("David"), "需求分析已经完成了。预算调整到$800。"),
                msg("cto", Some("David"), "下一步我会搭建项目骨架。"),
            ],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    let second = service
        .generate(GenerateRequest {
            scope: cto.clone(),
            engine: EngineChoice::Rules,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(second.messages_read, 2);
    assert_eq!(
        *counting.reads.lock().unwrap(),
        vec![(4, 5)],
        "only the messages after trajectory_end are read"
    );
    assert_eq!(second.summary.id, first.summary.id, "one summary per session");
    assert_eq!((second.summary.trajectory_start, second.summary.trajectory_end), (0, 5));
    assert!(
        second.summary.decisions.iter().any(|d| d.what.contains("Stripe")),
        "kept"
    );
    assert!(
        second.summary.progress.iter().any(|p| p.contains("需求分析")),
        "{:?}",
        second.summary
    );
    assert!(
        second.summary.next_actions.iter().any(|n| n.contains("骨架")),
        "{:?}",
        second.summary
    );
    // The budget changed: the old figure is gone, the deadline said with it stays.
    let constraints = second.summary.constraints.join(" | ");
    assert!(
        constraints.contains("$800") && !constraints.contains("$500") && constraints.contains("2周"),
        "{constraints}"
    );
    let current = service
        .generate(GenerateRequest {
            scope: cto.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(current.messages_read, 0, "nothing new to read");

    // Rendering in the user's language, within a budget.
    let render_for = |role: &str| {
        service.render(RenderRequest {
            scope: Scope::new(&user, role).with_project("p1"),
            session_id: "s1".into(),
            budget_tokens: Some(400),
            ..Default::default()
        })
    };
    let rendered = render_for("cto").await.unwrap();
    assert!(
        rendered.markdown.contains("上次会话摘要")
            && rendered.markdown.contains("Stripe")
            && rendered.markdown.contains("$800")
            && !rendered.markdown.contains("$500"),
        "{}",
        rendered.markdown
    );
    assert!(rendered.tokens <= 400);
    // Another role of the project reads only what the session gave the project, its decisions:
    // the rest is written from every message, what the user told the cto alone included.
    let shared = render_for("designer").await.unwrap();
    assert!(
        shared.markdown.contains("Stripe")
            && !shared.markdown.contains("$800")
            && !shared.markdown.contains("版权")
            && !shared.markdown.contains("骨架"),
        "{}",
        shared.markdown
    );
    let small = service
        .render(RenderRequest {
            scope: Scope::new(&user, "designer"),
            session_id: "s1".into(),
            budget_tokens: Some(40),
            language: Some(thinkus_common::model::Language::En),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(small.tokens <= 40, "{small:?}");

    // Another role of the project: Elena picks up David's summary.
    let designer = scope(&user, "designer", "p1", "s2");
    service
        .generate(GenerateRequest {
            scope: designer.clone(),
            messages: vec![msg(
                "user",
                None,
                "We decided to use a minimal layout because the audience is busy.",
            )],
            engine: EngineChoice::Rules,
            ..Default::default()
        })
        .await
        .unwrap();
    let others = service
        .list(ListRequest {
            scope: Scope::new(&user, "designer").with_project("p1"),
            limit: 5,
            other_roles_only: true,
        })
        .await
        .unwrap();
    assert_eq!(others.len(), 1);
    assert_eq!(others[0].scope.role_id, "cto");
    let all = service
        .list(ListRequest {
            scope: Scope::new(&user, "designer").with_project("p1"),
            limit: 5,
            other_roles_only: false,
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter()
            .map(|s| s.scope.session_id.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["s2", "s1"],
        "newest first"
    );
    let picked = service
        .get(Scope::new(&user, "designer").with_project("p1"), "s1".into())
        .await
        .unwrap();
    assert_eq!(picked.scope.role_id, "cto");
    assert!(
        picked.constraints.is_empty() && picked.risks.is_empty() && !picked.decisions.is_empty(),
        "{picked:?}"
    );
    assert!(!others[0].decisions.is_empty() && others[0].constraints.is_empty());
    // The role that held it, and the person's view (no role), read all of it.
    for reader in ["cto", ""] {
        let whole = service
            .get(Scope::new(&user, reader).with_project("p1"), "s1".into())
            .await
            .unwrap();
        assert!(!whole.constraints.is_empty() && !whole.risks.is_empty(), "{whole:?}");
    }
    assert_code(
        service
            .get(Scope::new(&user, "designer").with_project("p2"), "s1".into())
            .await,
        ErrorCode::NotFound,
        "session_id",
    );
    assert_code(
        service.get(Scope::new("someone-else", "cto"), "s1".into()).await,
        ErrorCode::NotFound,
        "session_id",
    );

    // Bad input names the field.
    assert_code(
        service
            .generate(GenerateRequest {
                scope: scope(&user, "cto", "p1", "nope"),
                ..Default::default()
            })
            .await,
        ErrorCode::NotFound,
        "scope.session_id",
    );
    assert_code(
        service
            .record(RecordRequest {
                scope: cto.clone(),
                messages: vec![],
                phase_completed: false,
                job_id: None,
            })
            .await,
        ErrorCode::InvalidArgument,
        "messages",
    );
    assert_code(
        service
            .generate(GenerateRequest {
                scope: cto.clone(),
                trajectory_start: Some(99),
                ..Default::default()
            })
            .await,
        ErrorCode::InvalidArgument,
        "trajectory_start",
    );
    assert_code(
        service
            .generate(GenerateRequest {
                scope: cto.clone(),
                trajectory_start: Some(3),
                trajectory_end: Some(1),
                ..Default::default()
            })
            .await,
        ErrorCode::InvalidArgument,
        "trajectory_end",
    );

    // The LLM engine: the prompt carries only the new messages and the summary so far; a
    // partial answer keeps the fields it did not carry.
    let billing = scope(&user, "cfo", "p1", "s3");
    service
        .record(RecordRequest {
            scope: billing.clone(),
            messages: vec![
                msg("user", None, "We must finish the billing migration by June."),
                msg("user", None, "I'm worried the old invoices might not import cleanly."),
            ],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    service
        .generate(GenerateRequest {
            scope: billing.clone(),
            engine: EngineChoice::Rules,
            ..Default::default()
        })
        .await
        .unwrap();
    service
        .record(RecordRequest {
            scope: billing.clone(),
            messages: vec![msg(
                "cfo",
                None,
                "We decided to use Stripe for billing because it supports refunds.",
            )],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    let by_llm = service
        .generate(GenerateRequest {
            scope: billing.clone(),
            engine: EngineChoice::Llm,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_llm.summary.engine, "llm");
    assert_eq!(by_llm.messages_read, 1);
    assert_eq!(by_llm.summary.goal, "Plan the billing migration");
    assert!(
        by_llm.summary.risks.iter().any(|r| r.contains("invoices")),
        "kept: {:?}",
        by_llm.summary
    );
    let prompt = mock.prompts.lock().unwrap().last().cloned().unwrap();
    assert!(prompt.contains("[2] cfo: We decided to use Stripe"), "{prompt}");
    assert!(!prompt.contains("[0] user"), "old messages are not re-sent: {prompt}");
    assert!(prompt.contains("已有摘要"), "the summary so far is given: {prompt}");

    // A failed LLM call keeps the previous summary intact.
    mock.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    service
        .record(RecordRequest {
            scope: billing.clone(),
            messages: vec![msg("user", None, "Let's also add invoices in euros.")],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    let failed = service
        .generate(GenerateRequest {
            scope: billing.clone(),
            engine: EngineChoice::Llm,
            ..Default::default()
        })
        .await;
    assert!(failed.is_err(), "{failed:?}");
    let kept = service.get(billing.clone(), "s3".into()).await.unwrap();
    assert_eq!(kept, by_llm.summary, "the previous summary is intact");

    // The idle sweep brings idle sessions up to date (here, with the failing LLM back up).
    mock.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let updated = service
        .sweep(Utc::now() + chrono::Duration::seconds(120))
        .await
        .unwrap();
    assert!(updated >= 1, "the idle session is summarised");
    assert_eq!(service.get(billing, "s3".into()).await.unwrap().trajectory_end, 3);

    // A user asking for a summary schedules one in the background.
    let asked = scope(&user, "cto", "p1", "s4");
    let result = service
        .record(RecordRequest {
            scope: asked.clone(),
            messages: vec![
                msg("cto", None, "I finished the API design document."),
                msg("user", None, "好的，帮我总结一下。"),
            ],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    assert!(result.summary_scheduled);
    let mut found = None;
    for _ in 0..100 {
        if let Ok(summary) = service.get(asked.clone(), "s4".into()).await {
            found = Some(summary);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(found.expect("summarised in the background").trajectory_end, 1);

    // Issue 16: the session a new one continues. A designer's session that ended an hour ago
    // has no summary yet: it is written on the spot, dated by its last message.
    let said = Utc::now() - chrono::Duration::hours(1);
    let designer = scope(&user, "designer", "p2", "d1");
    service
        .record(RecordRequest {
            scope: designer.clone(),
            messages: vec![
                Message {
                    created_at: said - chrono::Duration::minutes(5),
                    ..msg("user", None, "The goal is a new logo for the shop.")
                },
                Message {
                    created_at: said,
                    ..msg(
                        "designer",
                        None,
                        "We decided on a blue wordmark because it reads well small.",
                    )
                },
            ],
            phase_completed: false,
            job_id: None,
        })
        .await
        .unwrap();
    let next = scope(&user, "designer", "p2", "d2");
    let previous = service
        .previous(next.clone(), Utc::now())
        .await
        .unwrap()
        .expect("the last session of the designer in p2");
    assert_eq!(previous.scope.session_id.as_deref(), Some("d1"));
    assert_eq!(previous.trajectory_end, 1, "brought up to date");
    assert_eq!(previous.updated_at.timestamp_millis(), said.timestamp_millis());
    assert!(
        !previous.goal.is_empty(),
        "the role that held it reads its goal: {previous:?}"
    );
    // Another role of the project, without a session of its own there, continues it too, from
    // what it gave the project (its decisions) and nothing else.
    let cto_in_p2 = service
        .previous(scope(&user, "cto", "p2", "c1"), Utc::now())
        .await
        .unwrap()
        .expect("the project's last session");
    assert_eq!(cto_in_p2.scope.session_id.as_deref(), Some("d1"));
    assert!(
        !cto_in_p2.decisions.is_empty() && cto_in_p2.goal.is_empty() && cto_in_p2.progress.is_empty(),
        "{cto_in_p2:?}"
    );
    // Not before it was held, not from another project, not for another user, not itself.
    let before = said - chrono::Duration::minutes(10);
    assert!(service.previous(next.clone(), before).await.unwrap().is_none());
    let elsewhere = scope(&user, "designer", "p9", "x1");
    assert!(service.previous(elsewhere, Utc::now()).await.unwrap().is_none());
    let stranger = scope(&format!("{user}-other"), "designer", "p2", "d2");
    assert!(service.previous(stranger, Utc::now()).await.unwrap().is_none());
    assert!(service.previous(designer, Utc::now()).await.unwrap().is_none());
    assert_code(
        service.previous(scope(&user, " ", "p2", "d2"), Utc::now()).await,
        ErrorCode::InvalidArgument,
        "scope.role_id",
    );
}

#[tokio::test]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("summary.db").display());
    scenario(Arc::new(SqlStore::connect(&url, 4).await.unwrap())).await;
}

#[tokio::test]
async fn postgres() {
    let Some(admin) = support::server_from_env("TEST_DATABASE_URL", "PostgreSQL") else {
        return;
    };
    let url = support::fresh_postgres_database(&admin).await;
    scenario(Arc::new(SqlStore::connect(&url, 8).await.unwrap())).await;
}

mod grpc {
    use thinkus_proto::common as pbc;
    use thinkus_proto::summary as pb;
    use thinkus_proto::summary::summary_service_client::SummaryServiceClient;
    use thinkus_server::ServiceKind;

    use super::*;
    use crate::nodes;

    fn pscope(role: &str, session: &str) -> Option<pbc::Scope> {
        Some(pbc::Scope {
            user_id: "grpc-user".into(),
            role_id: role.into(),
            project_id: "p1".into(),
            session_id: session.into(),
            ..Default::default()
        })
    }

    fn pmsg(role: &str, content: &str) -> pbc::Message {
        pbc::Message {
            role: role.into(),
            content: content.into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn over_grpc_with_decisions_offered_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = nodes::embedded_config(dir.path());
        config.embedder.uri = "hash://384".into();
        let node = nodes::start(config, &[ServiceKind::KnowledgeManager, ServiceKind::Summary], None).await;
        let mut client = SummaryServiceClient::new(nodes::channel(&node).await);

        let recorded = client
            .record_messages(pb::RecordMessagesRequest {
                scope: pscope("cto", "g1"),
                // Said in March: the decision is dated by its message, not when the summary ran.
                messages: vec![
                    pbc::Message {
                        created_at: Some(prost_types::Timestamp {
                            seconds: 1_804_150_800,
                            nanos: 0,
                        }),
                        ..pmsg("user", "The goal is to plan the course platform.")
                    },
                    pbc::Message {
                        created_at: Some(prost_types::Timestamp {
                            seconds: 1_804_151_100,
                            nanos: 0,
                        }),
                        ..pmsg(
                            "cto",
                            "- We decided to use PostgreSQL for the course catalog because the team knows it well.",
                        )
                    },
                ],
                phase_completed: true,
                job_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!((recorded.first_index, recorded.message_count), (0, 2));
        assert!(recorded.summary_scheduled, "a phase completion schedules an update");
        let mut summary = None;
        for _ in 0..100 {
            if let Ok(found) = client
                .get_summary(pb::GetSummaryRequest {
                    scope: pscope("designer", ""),
                    session_id: "g1".into(),
                })
                .await
            {
                summary = found.into_inner().summary;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let summary = summary.expect("the background update stored a summary");
        assert_eq!(summary.trajectory_end, 1);
        assert!(summary.id.starts_with("sum_"));
        assert!(
            summary.decisions.iter().any(|d| d.what.contains("PostgreSQL")),
            "{summary:?}"
        );

        // The background update offers its decision after storing the summary: wait for it.
        let knowledge = node.apis.knowledge.clone().unwrap();
        let postgres_decisions = || async {
            knowledge
                .list_memories(thinkus_knowledge_manager::api::ListRequest {
                    scope: Scope::new("grpc-user", "cto").with_project("p1"),
                    types: vec![MemoryType::ProjectDecision],
                    limit: 50,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_iter()
                .filter(|m| m.content.contains("PostgreSQL"))
                .collect::<Vec<_>>()
        };
        for _ in 0..200 {
            if !postgres_decisions().await.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Regenerating offers the same decision again: it is remembered once.
        let regenerated = client
            .generate_summary(pb::GenerateSummaryRequest {
                scope: pscope("cto", "g1"),
                trajectory_start: Some(0),
                engine: pbc::Engine::Rules as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(regenerated.messages_read, 2);
        let postgres = postgres_decisions().await;
        assert_eq!(postgres.len(), 1, "offered without duplicates: {postgres:?}");
        assert_eq!(
            postgres[0].occurred_at.timestamp(),
            1_804_151_100,
            "dated when it was said: {postgres:?}"
        );
        assert!(postgres[0].content.starts_with("Use PostgreSQL"), "{postgres:?}");

        let rendered = client
            .render_summary(pb::RenderSummaryRequest {
                scope: pscope("designer", ""),
                session_id: "g1".into(),
                budget_tokens: 300,
                language: "en".into(),
                now: None,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            rendered.markdown.contains("PostgreSQL") && rendered.tokens <= 300,
            "{rendered:?}"
        );
        let listed = client
            .list_summaries(pb::ListSummariesRequest {
                scope: pscope("designer", ""),
                limit: 0,
                other_roles_only: true,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(listed.summaries.len(), 1);

        // Bad input over the wire names the field.
        let status = client
            .record_messages(pb::RecordMessagesRequest {
                scope: pscope("cto", "g1"),
                messages: vec![],
                phase_completed: false,
                job_id: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("messages"), "{status:?}");
        let status = client
            .generate_summary(pb::GenerateSummaryRequest {
                scope: pscope("cto", "missing"),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert!(status.message().contains("scope.session_id"), "{status:?}");
        let status = client
            .generate_summary(pb::GenerateSummaryRequest {
                scope: pscope("cto", "g1"),
                trajectory_end: Some(7),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("trajectory_end"), "{status:?}");
        let status = client
            .generate_summary(pb::GenerateSummaryRequest {
                scope: pscope("cto", "g1"),
                trajectory_start: Some(-1),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        let ended = client
            .end_session(pb::EndSessionRequest {
                scope: pscope("cto", "g1"),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!ended.summary_scheduled, "nothing left to summarise");
        node.shutdown().await.unwrap();
    }
}
