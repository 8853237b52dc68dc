//! PrepareTurn embeds the user's message once (issue 21): the gateway computes the vector and
//! hands it to the controller and to every recall of the turn, and looks up the last session
//! and the artifacts while the message is being embedded.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use thinkus_backends::embed::Embedder;
use thinkus_backends::vector::{IndexedPoint, MemoryFilter, SparseVector, VectorError, VectorHit, VectorIndex};
use thinkus_common::ApiError;
use thinkus_common::model::{ControlDecision, Language, MemoryStatus, Owner, QueryEmbedding, Scope};
use thinkus_gateway::api::{PrepareRequest, ToolCall};
use thinkus_gateway::extras::{ArtifactPort, LastSummary, RelevantArtifact, StoredOutput, SummaryPort};
use thinkus_memory_controller::ControllerApi;
use thinkus_memory_controller::api::DecideRequest;
use thinkus_proto::gateway::PrepareTurnRequest;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_retriever::RetrieverApi;
use thinkus_retriever::api::{DetailsRequest, DetailsResult, RecallRequest, RecallResult};
use thinkus_server::ServiceKind;
use tokio::sync::Barrier;

use crate::nodes;
use crate::support::{CountingEmbedder, remember_decision};

fn scope(user: &str) -> thinkus_proto::common::Scope {
    thinkus_proto::common::Scope {
        user_id: user.into(),
        role_id: "cto".into(),
        project_id: "shop".into(),
        session_id: "s1".into(),
        ..Default::default()
    }
}

/// A dated question about a time with no memories: the controller narrows the recall to 2019,
/// nothing is there, and the gateway recalls again over all time. Before the embedding moved to
/// the gateway, each recall embedded the message again (two embeddings per turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_embeds_its_message_once_across_both_recalls() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let services: BTreeSet<ServiceKind> = ServiceKind::ALL.into_iter().collect();
    let mut backends = thinkus_server::node::open_backends(&config, &services)
        .await
        .expect("open the backends");
    let counting = Arc::new(CountingEmbedder::new(backends.embedder.clone().expect("an embedder")));
    backends.embedder = Some(counting.clone());
    let node = nodes::start(config, &ServiceKind::ALL, Some(backends)).await;
    let mut client = GatewayServiceClient::new(nodes::channel(&node).await);

    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("fay")),
            message: "2019年3月我们定的前端框架是什么？".into(),
            recent_messages: vec!["好的".into()],
            ..Default::default()
        })
        .await
        .expect("prepare a turn")
        .into_inner();
    let trace = prepared.trace.expect("a trace");
    let reason = trace.decision.expect("a decision").reason;
    assert!(reason.contains("改为检索全部历史"), "both recalls ran: {reason}");
    assert!(trace.timings_ms.contains_key("embedding"), "{:?}", trace.timings_ms);
    assert_eq!(counting.queries(), 1, "one embedding for the turn");

    // Small talk needs no recall, but the message is still embedded once (the controller may
    // read the vector), never more.
    client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("fay")),
            message: "谢谢！".into(),
            recent_messages: vec!["好的".into()],
            ..Default::default()
        })
        .await
        .expect("prepare a turn");
    assert_eq!(counting.queries(), 2);
    node.shutdown().await.unwrap();
}

/// Records what the controller is asked.
struct RecordingController {
    inner: Arc<dyn ControllerApi>,
    seen: Mutex<Vec<Option<QueryEmbedding>>>,
}

#[async_trait]
impl ControllerApi for RecordingController {
    async fn decide(&self, request: DecideRequest) -> Result<ControlDecision, ApiError> {
        self.seen.lock().unwrap().push(request.query_embedding.clone());
        self.inner.decide(request).await
    }
}

/// Records what the retriever is asked.
struct RecordingRetriever {
    inner: Arc<dyn RetrieverApi>,
    seen: Mutex<Vec<Option<QueryEmbedding>>>,
}

#[async_trait]
impl RetrieverApi for RecordingRetriever {
    async fn recall(&self, request: RecallRequest) -> Result<RecallResult, ApiError> {
        self.seen.lock().unwrap().push(request.query_embedding.clone());
        self.inner.recall(request).await
    }
    async fn get_details(&self, request: DetailsRequest) -> Result<DetailsResult, ApiError> {
        self.inner.get_details(request).await
    }
}

/// An artifact service and a summary service whose lookups wait at the gate.
struct Gated(Arc<Barrier>);

#[async_trait]
impl ArtifactPort for Gated {
    async fn relevant(
        &self,
        _scope: &Scope,
        _message: &str,
        _limit: usize,
        _language: Language,
    ) -> Result<Vec<RelevantArtifact>, ApiError> {
        self.0.wait().await;
        Ok(Vec::new())
    }
    async fn store_tool_output(&self, _scope: &Scope, _call: ToolCall) -> Result<StoredOutput, ApiError> {
        Err(ApiError::internal("not used by this test"))
    }
}

#[async_trait]
impl SummaryPort for Gated {
    async fn last_summary(
        &self,
        _scope: &Scope,
        _budget_tokens: u32,
        _language: Language,
        _now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<LastSummary>, ApiError> {
        self.0.wait().await;
        Ok(None)
    }
    async fn record(
        &self,
        _scope: &Scope,
        _messages: Vec<thinkus_common::model::Message>,
        _job: Option<&str>,
    ) -> Result<(), ApiError> {
        Err(ApiError::internal("not used by this test"))
    }
    async fn end(&self, _scope: &Scope) -> Result<(), ApiError> {
        Err(ApiError::internal("not used by this test"))
    }
}

/// The embedding, the last session's summary and the artifacts wait for each other at one
/// gate: the turn is prepared only if the three run at the same time (one after the other,
/// the first would wait forever). The controller and both recalls get the one vector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lookups_run_while_the_message_is_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let gate = Arc::new(Barrier::new(3));
    let embedder = Arc::new(CountingEmbedder::gated(
        node.backends.embedder.clone().expect("an embedder"),
        gate.clone(),
    ));
    let controller = Arc::new(RecordingController {
        inner: node.apis.controller.clone().expect("the controller"),
        seen: Mutex::new(Vec::new()),
    });
    let retriever = Arc::new(RecordingRetriever {
        inner: node.apis.retriever.clone().expect("the retriever"),
        seen: Mutex::new(Vec::new()),
    });
    let gateway = thinkus_gateway::Gateway::new(
        thinkus_gateway::GatewayConfig::default(),
        thinkus_gateway::Upstreams {
            controller: controller.clone(),
            retriever: retriever.clone(),
            knowledge: node.apis.knowledge.clone().expect("the knowledge manager"),
            artifacts: Some(Arc::new(Gated(gate.clone()))),
            summaries: Some(Arc::new(Gated(gate))),
            embedder: Some(embedder.clone()),
            artifact_api: None,
            summary_api: None,
            addresses: Default::default(),
        },
        node.backends.store.clone().expect("the database"),
        node.backends.tokens,
        None,
    );
    let request = PrepareRequest {
        scope: Scope::new("gus", "cto").with_project("shop").with_session("s9"),
        message: "2019年3月我们定的前端框架是什么？".into(),
        // A new session: the last session's summary is looked up.
        recent_messages: Vec::new(),
        ..Default::default()
    };
    let prepared = tokio::time::timeout(Duration::from_secs(60), gateway.prepare(request))
        .await
        .expect("the embedding and the lookups ran together")
        .expect("prepared");
    assert!(prepared.timings_ms.contains_key("summary") && prepared.timings_ms.contains_key("artifacts"));
    assert_eq!(embedder.queries(), 1);

    let decided = controller.seen.lock().unwrap().clone();
    assert_eq!(decided.len(), 1);
    let vector = decided[0].clone().expect("the controller got the message's vector");
    assert_eq!(vector.model, "hash-ngram-384");
    assert_eq!(vector.values.len(), 384);
    let recalled = retriever.seen.lock().unwrap().clone();
    assert_eq!(recalled.len(), 2, "the dated recall and the one over all time");
    assert!(recalled.iter().all(|e| e.as_ref() == Some(&vector)), "{recalled:?}");
    node.shutdown().await.unwrap();
}

/// A vector from the retriever's own model is searched with, scaled to unit length; one of the
/// model's name but the wrong size is refused naming the field; one from another model is
/// ignored and the query embedded again; one without a query is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retriever_checks_a_given_vector_against_its_model() {
    use thinkus_proto::common::QueryEmbedding as Given;
    use thinkus_proto::retriever::RecallRequest as Recall;
    use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;

    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let services: BTreeSet<ServiceKind> = [ServiceKind::Retriever].into_iter().collect();
    let mut backends = thinkus_server::node::open_backends(&config, &services)
        .await
        .expect("open the backends");
    let hash = backends.embedder.clone().expect("an embedder");
    let counting = Arc::new(CountingEmbedder::new(hash.clone()));
    backends.embedder = Some(counting.clone());
    let node = nodes::start(config, &[ServiceKind::Retriever], Some(backends)).await;
    let mut client = RetrieverServiceClient::new(nodes::channel(&node).await);
    let recall = |query: &str, given: Option<Given>| Recall {
        scope: Some(thinkus_proto::common::Scope {
            user_id: "hal".into(),
            role_id: "cto".into(),
            ..Default::default()
        }),
        query: query.into(),
        query_embedding: given,
        ..Default::default()
    };
    let own = hash.embed_query("what is the budget?").await.unwrap();
    // Twice its length: the retriever scales it back.
    let doubled: Vec<f32> = own.iter().map(|v| v * 2.0).collect();
    client
        .recall(recall(
            "what is the budget?",
            Some(Given {
                model: "hash-ngram-384".into(),
                values: doubled,
            }),
        ))
        .await
        .expect("a recall with the caller's vector");
    assert_eq!(counting.queries(), 0, "nothing embedded again");

    let status = client
        .recall(recall(
            "what is the budget?",
            Some(Given {
                model: "hash-ngram-384".into(),
                values: vec![0.5; 12],
            }),
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().starts_with("query_embedding.values:"),
        "{}",
        status.message()
    );

    client
        .recall(recall(
            "what is the budget?",
            Some(Given {
                model: "another-model".into(),
                values: vec![0.5; 12],
            }),
        ))
        .await
        .expect("a vector of another model is ignored");
    assert_eq!(counting.queries(), 1, "embedded here instead");

    let status = client
        .recall(Recall {
            types: vec![thinkus_proto::common::MemoryType::ProjectDecision as i32],
            ..recall(
                "",
                Some(Given {
                    model: "hash-ngram-384".into(),
                    values: own,
                }),
            )
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().starts_with("query_embedding:"), "{}", status.message());
    node.shutdown().await.unwrap();
}

/// A vector index whose keyword searches wait at a gate.
#[derive(Debug)]
struct GatedKeywords {
    inner: Arc<dyn VectorIndex>,
    gate: Arc<Barrier>,
}

#[async_trait]
impl VectorIndex for GatedKeywords {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn ensure_ready(&self, dim: usize) -> Result<(), VectorError> {
        self.inner.ensure_ready(dim).await
    }
    async fn upsert(&self, points: Vec<IndexedPoint>) -> Result<(), VectorError> {
        self.inner.upsert(points).await
    }
    async fn set_status(&self, ids: &[String], status: MemoryStatus) -> Result<(), VectorError> {
        self.inner.set_status(ids, status).await
    }
    async fn delete(&self, ids: &[String]) -> Result<(), VectorError> {
        self.inner.delete(ids).await
    }
    async fn replace(&self, points: Vec<IndexedPoint>, stale: &[String]) -> Result<(), VectorError> {
        self.inner.replace(points, stale).await
    }
    async fn delete_user(&self, owner: &Owner) -> Result<(), VectorError> {
        self.inner.delete_user(owner).await
    }
    async fn search_dense(
        &self,
        vector: &[f32],
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.inner.search_dense(vector, filter, limit).await
    }
    async fn search_sparse(
        &self,
        vector: &SparseVector,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<VectorHit>, VectorError> {
        self.gate.wait().await;
        self.inner.search_sparse(vector, filter, limit).await
    }
    async fn count(&self, owner: Option<&Owner>) -> Result<u64, VectorError> {
        self.inner.count(owner).await
    }
    async fn list_ids(&self, owner: &Owner) -> Result<Vec<String>, VectorError> {
        self.inner.list_ids(owner).await
    }
    async fn flush(&self) -> Result<(), VectorError> {
        self.inner.flush().await
    }
}

/// A recall that embeds its query itself searches by keywords (and reads those hits) while the
/// query is embedded: the embedding and the keyword search wait for each other at one gate, so
/// the recall is answered only if they run at the same time. With the vector given, nothing
/// waits for an embedding and the keyword search runs beside the dense one as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_searches_by_keywords_while_its_query_is_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let retriever_config = config.retriever.clone();
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let scope = Scope::new("ivy", "cto").with_project("shop");
    let knowledge = node.apis.knowledge.clone().expect("the knowledge manager");
    for content in [
        "The checkout service moves to PostgreSQL 16 in March",
        "Design reviews happen on Thursdays",
    ] {
        remember_decision(knowledge.as_ref(), &scope, content).await;
    }
    let gate = Arc::new(Barrier::new(2));
    let hash = node.backends.embedder.clone().expect("an embedder");
    let embedder = Arc::new(CountingEmbedder::gated(hash.clone(), gate.clone()));
    let vectors = Arc::new(GatedKeywords {
        inner: node.backends.vectors.clone().expect("the vector index"),
        gate,
    });
    let retriever = thinkus_retriever::Retriever::new(
        retriever_config,
        node.backends.store.clone().expect("the database"),
        vectors,
        embedder.clone(),
        node.backends.tokens,
    );
    let request = RecallRequest {
        scope: scope.clone(),
        query: "When does checkout move to PostgreSQL?".into(),
        ..Default::default()
    };
    let recalled = tokio::time::timeout(Duration::from_secs(60), retriever.recall(request.clone()))
        .await
        .expect("the embedding and the keyword search ran together")
        .expect("recalled");
    assert_eq!(embedder.queries(), 1);
    assert!(
        recalled.catalog[0].summary.contains("PostgreSQL 16"),
        "{:?}",
        recalled.catalog
    );

    // The same question with its vector: no embedding; the keyword search passes the gate
    // with the dense search's company only if a second caller comes, so give it one.
    let given = QueryEmbedding {
        model: hash.name(),
        values: hash.embed_query(&request.query).await.unwrap(),
    };
    let with_vector = RecallRequest {
        query_embedding: Some(given),
        ..request
    };
    let (recalled, _) = tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join(retriever.recall(with_vector), embedder.embed_query("a second caller")),
    )
    .await
    .expect("answered");
    let recalled = recalled.expect("recalled with the given vector");
    assert!(recalled.catalog[0].summary.contains("PostgreSQL 16"));
    assert_eq!(embedder.queries(), 2, "only the second caller embedded");
    node.shutdown().await.unwrap();
}
