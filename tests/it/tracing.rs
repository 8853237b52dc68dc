//! Traces across services (issue 9): the services run as separate `thinkus` processes
//! exporting OTLP to a receiver in this test. One PrepareTurn is one trace rooted at the
//! gateway's span, with the memory controller's and the retriever's server spans and the
//! database, vector index and embedder calls under them; one CompleteTurn's trace continues
//! through the durable queue into the knowledge manager's spans. Each process also serves
//! Prometheus metrics.

use std::collections::{BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use thinkus_proto::common::Scope;
use thinkus_proto::gateway::gateway_service_client::GatewayServiceClient;
use thinkus_proto::gateway::{CompleteTurnRequest, JobStatus, ListJobsRequest, PrepareTurnRequest};

use crate::support::{ChildGuard, free_port};

/// One exported span, with its process's service name.
#[derive(Debug, Clone)]
struct Collected {
    process: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_id: Vec<u8>,
    attributes: HashMap<String, String>,
}

#[derive(Default, Clone)]
struct Receiver {
    spans: Arc<Mutex<Vec<Collected>>>,
}

fn text(attributes: &[KeyValue]) -> HashMap<String, String> {
    attributes
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                AnyValue::DoubleValue(d) => d.to_string(),
                _ => return None,
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let resource = text(&resource_spans.resource.map(|r| r.attributes).unwrap_or_default());
            let process = resource.get("service.name").cloned().unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(Collected {
                        process: process.clone(),
                        name: span.name.clone(),
                        trace_id: span.trace_id.clone(),
                        span_id: span.span_id.clone(),
                        parent_id: span.parent_span_id.clone(),
                        attributes: text(&span.attributes),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A `thinkus serve` process exporting traces to `otlp`.
fn spawn(services: &str, port: u16, metrics: u16, dir: &std::path::Path, otlp: &str, extra: &[String]) -> ChildGuard {
    let mut command = Command::new(env!("CARGO_BIN_EXE_thinkus"));
    command
        .args(["serve", "--services", services])
        .args(["--set", &format!("server.grpc_addr=127.0.0.1:{port}")])
        .args(["--set", &format!("server.metrics_addr=127.0.0.1:{metrics}")])
        .args(["--set", &format!("server.data_dir={}", dir.display())])
        .args(["--set", "embedder.uri=hash://384"])
        .args(["--set", &format!("telemetry.otlp_endpoint={otlp}")])
        .args(["--set", "gateway.poll_interval_ms=20"])
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for setting in extra {
        command.args(["--set", setting]);
    }
    ChildGuard(command.spawn().expect("start thinkus"))
}

/// Stops a process with SIGTERM so it drains and flushes its spans.
fn terminate(child: &mut ChildGuard) {
    let _ = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status();
    for _ in 0..100 {
        if child.0.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn scope(session: &str) -> Scope {
    Scope {
        user_id: "olga".into(),
        role_id: "cto".into(),
        project_id: "shop".into(),
        session_id: session.into(),
        ..Default::default()
    }
}

/// The spans of one trace reachable from `root`, checking that every span's parent is in it.
fn trace_of<'a>(spans: &'a [Collected], root: &Collected) -> Vec<&'a Collected> {
    let trace: Vec<&Collected> = spans.iter().filter(|s| s.trace_id == root.trace_id).collect();
    let ids: BTreeSet<&[u8]> = trace.iter().map(|s| s.span_id.as_slice()).collect();
    for span in &trace {
        if span.span_id != root.span_id {
            assert!(
                ids.contains(span.parent_id.as_slice()),
                "span {} ({}) has a parent outside the trace",
                span.name,
                span.process
            );
        }
    }
    trace
}

fn has(trace: &[&Collected], what: impl Fn(&Collected) -> bool) -> bool {
    trace.iter().any(|s| what(s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turn_is_one_trace_across_the_services() {
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let dir = tempfile::tempdir().unwrap();
    let (controller_port, store_port, gateway_port) = (free_port(), free_port(), free_port());
    let metrics_port = free_port();
    let mut controller = spawn(
        "memory-controller",
        controller_port,
        free_port(),
        dir.path(),
        &otlp,
        &[],
    );
    // The embedded vector index has one owner: the retriever and the knowledge manager share a
    // process here (with a Qdrant server they run apart).
    let store_metrics = free_port();
    let mut store = spawn(
        "knowledge-manager,retriever",
        store_port,
        store_metrics,
        dir.path(),
        &otlp,
        &[],
    );
    let remote = |name: &str, port: u16| format!("endpoints.{name}=http://127.0.0.1:{port}");
    let mut gateway = spawn(
        "gateway,artifact,summary",
        gateway_port,
        metrics_port,
        dir.path(),
        &otlp,
        &[
            remote("memory_controller", controller_port),
            remote("retriever", store_port),
            remote("knowledge_manager", store_port),
        ],
    );
    for (port, service) in [
        (controller_port, "thinkus.controller.v1.MemoryControllerService"),
        (store_port, "thinkus.retriever.v1.RetrieverService"),
        (store_port, "thinkus.knowledge.v1.KnowledgeManagerService"),
        (gateway_port, "thinkus.gateway.v1.GatewayService"),
    ] {
        thinkus_common::grpc::wait_serving(&format!("http://127.0.0.1:{port}"), service, Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{service} on {port} is not serving: {err}"));
    }

    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{gateway_port}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = GatewayServiceClient::new(channel);
    client
        .complete_turn(CompleteTurnRequest {
            scope: Some(scope("s1")),
            user_message: "We decided to use PostgreSQL for the orders service because we need transactions.".into(),
            assistant_message: "Noted: PostgreSQL for orders.".into(),
            request_id: "trace-turn-1".into(),
            tool_calls: vec![thinkus_proto::gateway::ToolCall {
                id: "call-1".into(),
                name: "explain_schema".into(),
                output: (1..=200)
                    .map(|n| format!("CREATE TABLE orders_{n} (id bigint primary key, total numeric);\n"))
                    .collect(),
                path: "schema.sql".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .expect("complete a turn");
    for _ in 0..400 {
        let jobs = client
            .list_jobs(ListJobsRequest {
                scope: Some(scope("")),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .jobs;
        if !jobs.is_empty() && jobs.iter().all(|j| j.status == JobStatus::Succeeded as i32) {
            break;
        }
        assert!(jobs.iter().all(|j| j.status != JobStatus::Failed as i32), "{jobs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let prepared = client
        .prepare_turn(PrepareTurnRequest {
            scope: Some(scope("s2")),
            message: "What database did we decide on for the orders service?".into(),
            recent_messages: vec!["hi".into()],
            ..Default::default()
        })
        .await
        .expect("prepare a turn")
        .into_inner();
    assert!(prepared.context.contains("PostgreSQL"), "{}", prepared.context);

    // Each process serves Prometheus metrics, with the requests it answered.
    let metrics = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("thinkus_grpc_requests_total"), "{metrics}");
    assert!(metrics.contains("PrepareTurn"), "{metrics}");
    assert!(
        metrics.contains("thinkus_job_runs_total{kind=\"learn\",outcome=\"succeeded\"}"),
        "{metrics}"
    );
    // Memories by status are counted every 10 s.
    let mut metrics = String::new();
    for _ in 0..60 {
        metrics = reqwest::get(format!("http://127.0.0.1:{store_metrics}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("thinkus_memories{status=\"active\"}") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(metrics.contains("thinkus_memories{status=\"active\"}"), "{metrics}");
    assert!(metrics.contains("thinkus_backend_duration_seconds"), "{metrics}");

    for child in [&mut gateway, &mut store, &mut controller] {
        terminate(child);
    }
    server.abort();
    let spans = receiver.spans.lock().unwrap().clone();

    let root_of = |method: &str| {
        spans
            .iter()
            .find(|s| s.name == format!("thinkus.gateway.v1.GatewayService/{method}"))
            .unwrap_or_else(|| panic!("no {method} span among {} spans", spans.len()))
            .clone()
    };
    let prepare = root_of("PrepareTurn");
    assert!(prepare.parent_id.is_empty(), "the gateway's span is the root");
    assert_eq!(prepare.process, "thinkus-artifact+summary+gateway");
    let trace = trace_of(&spans, &prepare);
    let server_of = |trace: &[&Collected], service: &str| {
        has(trace, |s| {
            s.attributes.get("thinkus.service").map(String::as_str) == Some(service)
                && s.attributes.get("otel.kind").is_none_or(|k| k == "server")
        })
    };
    assert!(server_of(&trace, "memory-controller"), "{trace:#?}");
    assert!(has(&trace, |s| s.process == "thinkus-memory-controller"));
    assert!(server_of(&trace, "retriever"));
    assert!(has(&trace, |s| s.name == "vector.search_dense"));
    assert!(has(&trace, |s| s.name == "vector.search_sparse"));
    assert!(has(&trace, |s| s.name == "embed.query"));
    assert!(has(&trace, |s| s.name.starts_with("db.")));

    let complete = root_of("CompleteTurn");
    assert!(complete.parent_id.is_empty());
    let trace = trace_of(&spans, &complete);
    assert!(
        has(&trace, |s| s.name == "job learn"),
        "the queued job continues the trace"
    );
    assert!(server_of(&trace, "knowledge-manager"));
    assert!(has(&trace, |s| s.name == "vector.upsert"));
    assert!(has(&trace, |s| s.name == "db.commit"));
    assert!(
        has(&trace, |s| s.name.starts_with("blob.put")),
        "the tool output went to the blob store"
    );
}
