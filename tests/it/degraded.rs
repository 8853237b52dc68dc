//! Issue 16: PrepareTurn under the controller's "no" (the catalog probe includes a memory that
//! matches the message strongly) and with upstreams down (degraded mode: an optional upstream
//! is gone without, and the trace says so; a required one fails the call, naming itself and
//! where it answers), and a turn that ends its session.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use thinkus_common::model::{ControlDecision, Language, MemoryType, Message, NeedMemory, RetrievalMode, Scope};
use thinkus_common::{ApiError, ErrorCode};
use thinkus_gateway::api::{CompleteRequest, PrepareRequest, ToolCall};
use thinkus_gateway::extras::{ArtifactPort, LastSummary, RelevantArtifact, StoredOutput, SummaryPort};
use thinkus_gateway::{Gateway, GatewayConfig, UpstreamAddresses, Upstreams};
use thinkus_knowledge_manager::api::{MemoryDraft, RememberRequest};
use thinkus_memory_controller::ControllerApi;
use thinkus_memory_controller::api::DecideRequest;
use thinkus_retriever::RetrieverApi;
use thinkus_retriever::api::{DetailsRequest, DetailsResult, RecallRequest, RecallResult};
use thinkus_server::ServiceKind;
use thinkus_server::node::NodeHandle;

use crate::nodes;
use crate::support::remember_decision;

/// A controller that says "no memory needed" to everything, or fails while `down`.
struct Controller {
    inner: Arc<dyn ControllerApi>,
    down: AtomicBool,
}

#[async_trait]
impl ControllerApi for Controller {
    async fn decide(&self, request: DecideRequest) -> Result<ControlDecision, ApiError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable("tcp connect error"));
        }
        let mut decision = self.inner.decide(request).await?;
        decision.need_memory = NeedMemory::No;
        decision.reason = "always no (test)".into();
        Ok(decision)
    }
}

/// A retriever that fails while `down`.
struct Retriever {
    inner: Arc<dyn RetrieverApi>,
    down: AtomicBool,
}

#[async_trait]
impl RetrieverApi for Retriever {
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable("tcp connect error"));
        }
        self.inner.recall(request).await
    }
    async fn get_details(&self, request: DetailsRequest) -> Result<DetailsResult, ApiError> {
        self.inner.get_details(request).await
    }
}

/// An artifact service and a summary service that are down.
struct Down;

#[async_trait]
impl ArtifactPort for Down {
    async fn relevant(&self, _: &Scope, _: &str, _: usize, _: Language) -> Result<Vec<RelevantArtifact>, ApiError> {
        Err(ApiError::unavailable("tcp connect error"))
    }
    async fn store_tool_output(&self, _: &Scope, _: ToolCall) -> Result<StoredOutput, ApiError> {
        Err(ApiError::unavailable("tcp connect error"))
    }
}

#[async_trait]
impl SummaryPort for Down {
    async fn last_summary(
        &self,
        _: &Scope,
        _: u32,
        _: Language,
        _: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<LastSummary>, ApiError> {
        Err(ApiError::unavailable("tcp connect error"))
    }
    async fn record(&self, _: &Scope, _: Vec<Message>, _: Option<&str>) -> Result<(), ApiError> {
        Err(ApiError::unavailable("tcp connect error"))
    }
    async fn end(&self, _: &Scope) -> Result<(), ApiError> {
        Err(ApiError::unavailable("tcp connect error"))
    }
}

struct Setup {
    node: NodeHandle,
    gateway: Gateway,
    controller: Arc<Controller>,
    retriever: Arc<Retriever>,
}

async fn setup(dir: &std::path::Path, down: bool) -> Setup {
    let node = nodes::start(nodes::embedded_config(dir), &ServiceKind::ALL, None).await;
    let controller = Arc::new(Controller {
        inner: node.apis.controller.clone().expect("the controller"),
        down: AtomicBool::new(false),
    });
    let retriever = Arc::new(Retriever {
        inner: node.apis.retriever.clone().expect("the retriever"),
        down: AtomicBool::new(false),
    });
    let addresses = UpstreamAddresses {
        controller: "http://controller:50051".into(),
        retriever: "http://retriever:50051".into(),
        artifacts: "http://artifact:50051".into(),
        summaries: "http://summary:50051".into(),
        ..Default::default()
    };
    let gateway = Gateway::new(
        GatewayConfig::default(),
        Upstreams {
            controller: controller.clone(),
            retriever: retriever.clone(),
            knowledge: node.apis.knowledge.clone().expect("the knowledge manager"),
            artifacts: if down {
                Some(Arc::new(Down))
            } else {
                Some(Arc::new(thinkus_gateway::adapters::Artifacts(
                    node.apis.artifact.clone().expect("the artifact service"),
                )))
            },
            summaries: if down {
                Some(Arc::new(Down))
            } else {
                Some(Arc::new(thinkus_gateway::adapters::Summaries(
                    node.apis.summary.clone().expect("the summary service"),
                )))
            },
            embedder: node.backends.embedder.clone(),
            artifact_api: None,
            summary_api: None,
            addresses,
        },
        node.backends.store.clone().expect("the database"),
        node.backends.tokens,
        None,
    );
    Setup {
        node,
        gateway,
        controller,
        retriever,
    }
}

async fn remember(setup: &Setup, scope: &Scope, content: &str) {
    let knowledge = setup.node.apis.knowledge.clone().expect("the knowledge manager");
    remember_decision(knowledge.as_ref(), scope, content).await;
}

fn ask(scope: &Scope, message: &str) -> PrepareRequest {
    PrepareRequest {
        scope: scope.clone(),
        message: message.into(),
        recent_messages: vec!["ok".into()],
        ..Default::default()
    }
}

fn probes(outcome: &str) -> u64 {
    thinkus_common::metrics::METRICS
        .catalog_probes
        .with_label_values(&[outcome])
        .get()
}

/// The controller says "no" to a plain question about the user's own project: a memory that
/// answers it strongly is included anyway (counted), in both languages; small talk and an
/// unrelated question still get nothing; with the probe off, nothing either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strong_match_is_included_under_the_controllers_no() {
    let dir = tempfile::tempdir().unwrap();
    let mut setup = setup(dir.path(), false).await;
    let scope = Scope::new("ivy", "cfo").with_project("shop").with_session("s2");
    remember(&setup, &scope, "The marketing budget of the shop launch is $800.").await;
    remember(&setup, &scope, "商城上线的营销预算是8万元。").await;
    remember(
        &setup,
        &scope,
        "The user prefers replies in English with figures in USD.",
    )
    .await;

    let hits = probes("hit");
    for (question, figure) in [
        ("What's the marketing budget for the shop launch?", "$800"),
        ("商城上线的营销预算是多少？", "8万元"),
    ] {
        let prepared = setup.gateway.prepare(ask(&scope, question)).await.expect("prepared");
        assert!(prepared.context.contains(figure), "{question}: {}", prepared.context);
        assert_eq!(prepared.decision.need_memory, NeedMemory::Maybe, "{question}");
        assert!(
            prepared.decision.reason.contains("always no (test)")
                && (prepared.decision.reason.contains("strong match") || prepared.decision.reason.contains("强匹配")),
            "{}",
            prepared.decision.reason
        );
        assert!(prepared.timings_ms.contains_key("probe"));
        assert!(prepared.items.iter().filter(|i| i.included).count() <= 3);
    }
    assert!(probes("hit") >= hits + 2);

    for unrelated in [
        "Thanks, that's all for today!",
        "Translate 'good morning' into French.",
        "谢谢！",
    ] {
        let prepared = setup.gateway.prepare(ask(&scope, unrelated)).await.expect("prepared");
        assert!(prepared.context.is_empty(), "{unrelated}: {}", prepared.context);
        assert_eq!(prepared.decision.need_memory, NeedMemory::No);
    }

    setup.gateway = Gateway::new(
        GatewayConfig {
            probe_entries: 0,
            ..GatewayConfig::default()
        },
        setup.gateway.upstreams().clone(),
        setup.node.backends.store.clone().unwrap(),
        setup.node.backends.tokens,
        None,
    );
    let off = setup
        .gateway
        .prepare(ask(&scope, "What's the marketing budget for the shop launch?"))
        .await
        .expect("prepared");
    assert!(off.context.is_empty(), "the probe is off: {}", off.context);
    setup.node.shutdown().await.unwrap();
}

/// A self-contained task that brings no material of its own ("write the invite for …") takes
/// its material from memory: a strong catalog match under the controller's "no" is recalled in
/// detail, as an unsure need; a task that brings its material gets the catalog's glance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_without_material_is_recalled_in_detail_on_a_strong_match() {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path(), false).await;
    let scope = Scope::new("kim", "cto").with_project("shop").with_session("s3");
    remember(
        &setup,
        &scope,
        "The shop launch event is on Thursday 18 March at 1:00 pm in the Mile End office.",
    )
    .await;
    let bare = setup
        .gateway
        .prepare(ask(&scope, "Write the invite text for the shop launch event."))
        .await
        .expect("prepared");
    assert_eq!(bare.decision.need_memory, NeedMemory::Maybe, "{}", bare.decision.reason);
    assert_eq!(
        bare.decision.retrieval_mode,
        RetrievalMode::Details,
        "{}",
        bare.decision.reason
    );
    assert!(
        bare.decision.reason.contains("recalled in detail"),
        "{}",
        bare.decision.reason
    );
    assert!(bare.context.contains("18 March"), "{}", bare.context);

    let with_material = setup
        .gateway
        .prepare(ask(
            &scope,
            "Write the invite text for the shop launch event: Thursday 18 March, 1:00 pm, Mile End office.",
        ))
        .await
        .expect("prepared");
    assert!(
        !with_material.decision.reason.contains("recalled in detail"),
        "{}",
        with_material.decision.reason
    );
    assert_ne!(with_material.decision.retrieval_mode, RetrievalMode::Details);
    setup.node.shutdown().await.unwrap();
}

/// With the controller, the artifact and the summary services down, PrepareTurn answers with
/// what it has: the built-in rules decide, there is no artifact or last-session section, and
/// the trace names each upstream gone without and where it answers. A required upstream down
/// fails the call, its error naming the upstream and its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_turn_degrades_without_optional_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path(), true).await;
    let scope = Scope::new("jon", "cto").with_project("shop").with_session("s1");
    remember(
        &setup,
        &scope,
        "We decided to use PostgreSQL for the shop because the team knows it.",
    )
    .await;
    setup.controller.down.store(true, Ordering::SeqCst);

    // The first turn of a session: the last session would be looked up.
    let prepared = setup
        .gateway
        .prepare(PrepareRequest {
            scope: scope.clone(),
            message: "Which database did we decide on for the shop?".into(),
            ..Default::default()
        })
        .await
        .expect("prepared without the controller, the artifacts and the summaries");
    assert_eq!(prepared.decision.engine, "rules");
    assert!(prepared.context.contains("PostgreSQL"), "{}", prepared.context);
    let notes = prepared.degraded.join("\n");
    for (name, address) in [
        ("memory-controller", "http://controller:50051"),
        ("artifact", "http://artifact:50051"),
        ("summary", "http://summary:50051"),
    ] {
        assert!(
            notes.contains(&format!("{name} ({address}) failed: tcp connect error")),
            "{notes}"
        );
    }
    assert!(notes.contains("built-in rules"), "{notes}");
    assert!(
        prepared
            .sections
            .iter()
            .all(|s| s.text.is_empty() || !s.title.is_empty())
    );

    // The controller back, in the middle of a session (no last-session lookup): only the
    // artifact service is gone without.
    setup.controller.down.store(false, Ordering::SeqCst);
    let later = setup
        .gateway
        .prepare(ask(&scope, "Which database did we decide on for the shop?"))
        .await
        .expect("prepared");
    assert!(
        later.decision.reason.starts_with("always no (test)"),
        "the controller decides again"
    );
    assert_eq!(later.degraded.len(), 1, "{:?}", later.degraded);
    assert!(
        later.degraded[0].starts_with("artifact (http://artifact:50051) failed"),
        "{:?}",
        later.degraded
    );

    setup.retriever.down.store(true, Ordering::SeqCst);
    setup.controller.down.store(false, Ordering::SeqCst);
    let err = setup
        .gateway
        .prepare(ask(&scope, "Which database did we decide on for the shop?"))
        .await
        .expect_err("the retriever is required");
    assert_eq!(err.code, ErrorCode::Unavailable);
    assert!(
        err.message
            .contains("retriever (http://retriever:50051): tcp connect error"),
        "{}",
        err.message
    );
    setup.node.shutdown().await.unwrap();
}

/// A turn that ends its session writes the session's summary once the exchange is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_ends_the_session_completes_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path(), false).await;
    let scope = Scope::new("kim", "cto").with_project("shop").with_session("s1");
    setup
        .gateway
        .complete(CompleteRequest {
            scope: scope.clone(),
            user_message: "We decided to launch the loyalty program on 1 December. That's all, bye!".into(),
            assistant_message: "Noted: launch on 1 December. Bye!".into(),
            request_id: Some("kim-1".into()),
            end_session: true,
            ..Default::default()
        })
        .await
        .expect("completed");
    let summaries = setup.node.apis.summary.clone().unwrap();
    let mut ended = None;
    for _ in 0..600 {
        let _ = thinkus_gateway::jobs::run_once(&setup.gateway).await;
        if let Ok(summary) = summaries.get(scope.clone(), "s1".into()).await {
            ended = Some(summary);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let summary = ended.expect("the ended session is summarised");
    assert_eq!(summary.trajectory_end, 1, "both messages are in it");
    setup.node.shutdown().await.unwrap();
}

/// Issue 19 (seed 004 section 10.4): the user's standing rules come in every context, first,
/// even when the controller says no memory is needed, and a standing rule recalled again is
/// shown once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standing_rules_come_in_every_context() {
    let dir = tempfile::tempdir().unwrap();
    let setup = setup(dir.path(), false).await;
    let scope = Scope::new("lou", "cfo").with_project("shop").with_session("s1");
    let everywhere = Scope::new("lou", "cfo").with_session("s0");
    setup
        .node
        .apis
        .knowledge
        .clone()
        .unwrap()
        .remember(RememberRequest {
            scope: everywhere,
            draft: MemoryDraft::new(
                MemoryType::Constraint,
                "Always report figures in 万元 with one decimal.",
            ),
            request_id: None,
            skip_dedup: true,
            admission_bypassed_by: None,
        })
        .await
        .expect("remember a standing rule");
    remember(&setup, &scope, "The marketing budget of the shop launch is $800.").await;

    // The controller says "no" to everything here: the rule comes anyway, first.
    let thanks = setup.gateway.prepare(ask(&scope, "Thanks!")).await.expect("prepared");
    assert!(
        thanks.context.starts_with("## Standing rules and profile"),
        "{}",
        thanks.context
    );
    assert!(thanks.context.contains("万元 with one decimal"), "{}", thanks.context);
    assert!(thanks.tokens_used <= thanks.budget_tokens);
    let asked = setup
        .gateway
        .prepare(ask(
            &scope,
            "How should you report the figures of the marketing budget?",
        ))
        .await
        .expect("prepared");
    assert_eq!(
        asked.context.matches("万元 with one decimal").count(),
        1,
        "{}",
        asked.context
    );
    // Another user has none of it.
    let other = Scope::new("max", "cfo").with_project("shop").with_session("s1");
    let theirs = setup.gateway.prepare(ask(&other, "Thanks!")).await.expect("prepared");
    assert!(theirs.context.is_empty(), "{}", theirs.context);
    setup.node.shutdown().await.unwrap();
}

/// gRPC health of `service` ("" for the whole server) at `channel`.
async fn health_of(channel: &tonic::transport::Channel, service: &str) -> i32 {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .map(|answer| answer.into_inner().status)
        .unwrap_or(-1)
}

/// Whether the health of `service` at `channel` becomes `want` within 20 s.
async fn health_becomes(
    channel: &tonic::transport::Channel,
    service: &str,
    want: tonic_health::pb::health_check_response::ServingStatus,
) -> bool {
    for _ in 0..200 {
        if health_of(channel, service).await == want as i32 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The gateway's health follows its required upstreams: with the retriever (another process)
/// gone, the gateway's service answers NOT_SERVING while the server ("") and the services that
/// need no upstream stay SERVING (readiness takes the gateway out of rotation, a liveness probe
/// of "" does not restart it); SERVING again once the retriever answers at its address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_health_follows_its_required_upstreams() {
    use tonic_health::pb::health_check_response::ServingStatus;

    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let all = ServiceKind::ALL.iter().copied().collect();
    let backends = thinkus_server::node::open_backends(&config, &all).await.unwrap();
    let port = crate::support::free_port();
    let start_retriever = |config: thinkus_server::Config, backends| async move {
        // The address is free again shortly after the previous node stopped.
        let mut tries = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
                Ok(listener) => break listener,
                Err(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("127.0.0.1:{port} stays taken: {err}"),
            }
        };
        let services = [ServiceKind::Retriever].into_iter().collect();
        let node = thinkus_server::node::start(
            config,
            services,
            listener,
            Some(backends),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .expect("the retriever starts");
        thinkus_common::grpc::wait_serving(&node.url(), ServiceKind::Retriever.grpc_name(), Duration::from_secs(30))
            .await
            .unwrap();
        node
    };
    let retriever = start_retriever(config.clone(), backends.clone()).await;
    config.endpoints.retriever = Some(retriever.url());
    let gateway = nodes::start(
        config.clone(),
        &[
            ServiceKind::Gateway,
            ServiceKind::KnowledgeManager,
            ServiceKind::MemoryController,
            ServiceKind::Artifact,
            ServiceKind::Summary,
        ],
        Some(backends.clone()),
    )
    .await;
    let channel = nodes::channel(&gateway).await;
    let gateway_name = ServiceKind::Gateway.grpc_name();
    let knowledge_name = ServiceKind::KnowledgeManager.grpc_name();
    assert_eq!(health_of(&channel, gateway_name).await, ServingStatus::Serving as i32);

    retriever.shutdown().await.unwrap();
    assert!(
        health_becomes(&channel, gateway_name, ServingStatus::NotServing).await,
        "the gateway reports NOT_SERVING within 20 s of losing its retriever"
    );
    assert_eq!(
        health_of(&channel, "").await,
        ServingStatus::Serving as i32,
        "the server itself"
    );
    assert_eq!(
        health_of(&channel, knowledge_name).await,
        ServingStatus::Serving as i32,
        "a service that needs no upstream"
    );

    let retriever = start_retriever(config, backends).await;
    assert!(
        health_becomes(&channel, gateway_name, ServingStatus::Serving).await,
        "SERVING again within 20 s of the retriever's return"
    );
    gateway.shutdown().await.unwrap();
    retriever.shutdown().await.unwrap();
}
