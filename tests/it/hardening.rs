//! Hostile load and hostile origins (issue 18): a tenant that floods a process with idle upload
//! streams holds no more than its seats, the liveness probe and the other tenants are served
//! at once, and the flooding tenant is told to come back later (RESOURCE_EXHAUSTED with
//! Retry-After over gRPC, 429 over REST) instead of queueing; dev mode skips the key only on a
//! loopback listener and never through a proxy.

use std::time::{Duration, Instant};

use thinkus_common::config::AuthMode;
use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
use thinkus_proto::artifact::{ArtifactHeader, UploadArtifactRequest, upload_artifact_request};
use thinkus_proto::common::Scope;
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use thinkus_server::ServiceKind;
use tonic::Code;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use crate::nodes;

fn scope(user: &str) -> Scope {
    Scope {
        tenant_id: String::new(),
        user_id: user.into(),
        role_id: "cto".into(),
        project_id: "p1".into(),
        session_id: "s1".into(),
    }
}

fn with_key<T>(message: T, secret: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {secret}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

async fn recall(channel: Channel, user: &str, secret: Option<&str>) -> Result<(), tonic::Status> {
    let message = RecallRequest {
        scope: Some(scope(user)),
        query: "budget".into(),
        ..Default::default()
    };
    let request = match secret {
        Some(secret) => with_key(message, secret),
        None => tonic::Request::new(message),
    };
    RetrieverServiceClient::new(channel).recall(request).await.map(drop)
}

/// An upload that sends its header and then nothing: it holds a seat until it is dropped or
/// the request times out.
async fn idle_upload(channel: Channel, user: &str, secret: &str) -> Result<(), tonic::Status> {
    let header = UploadArtifactRequest {
        part: Some(upload_artifact_request::Part::Header(ArtifactHeader {
            scope: Some(scope(user)),
            path: "big.log".into(),
            ..Default::default()
        })),
    };
    let stream = futures::stream::iter(vec![header]).chain(futures::stream::pending());
    ArtifactServiceClient::new(channel)
        .upload_artifact(with_key(stream, secret))
        .await
        .map(drop)
}

use futures::StreamExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_starves_neither_health_nor_other_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    config.auth.mode = AuthMode::ApiKey;
    config.auth.keys = vec![
        nodes::api_key("flood", &["mallory"], "flood-secret"),
        nodes::api_key("quiet", &["alice"], "quiet-secret"),
    ];
    config.server.concurrency_limit = 4;
    config.server.tenant_concurrency_limit = 2;
    config.server.queue_timeout_ms = 300;
    let port = crate::support::free_port();
    config.gateway.rest_listen = format!("127.0.0.1:{port}");
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;

    // 32 idle upload streams: two hold the tenant's seats, the rest are shed after a short wait.
    let floods: Vec<_> = (0..32)
        .map(|_| tokio::spawn(idle_upload(channel.clone(), "mallory", "flood-secret")))
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (answered, holding): (Vec<_>, Vec<_>) = floods.into_iter().partition(|f| f.is_finished());
    assert_eq!(holding.len(), 2, "the tenant holds its two seats, no more");
    for flood in answered {
        let err = flood.await.unwrap().unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted, "{}", err.message());
    }

    // The liveness probe answers at once.
    let started = Instant::now();
    thinkus_common::grpc::wait_serving(&node.url(), "", Duration::from_secs(1))
        .await
        .expect("health is outside the limits");
    assert!(started.elapsed() < Duration::from_secs(1));

    // Another tenant is served; the flooding one is told when to come back.
    recall(channel.clone(), "alice", Some("quiet-secret"))
        .await
        .expect("the quiet tenant is served");
    let err = recall(channel.clone(), "mallory", Some("flood-secret"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{}", err.message());
    assert!(err.message().contains("tenant concurrency"), "{}", err.message());
    assert!(err.metadata().get("retry-after").is_some(), "a retry-after hint");

    // The REST facade shares the seats: 429 with Retry-After for the flood, 200 for the others.
    let http = reqwest::Client::new();
    let body = serde_json::json!({"userId": "mallory", "roleId": "cto", "query": "budget"});
    let limited = http
        .post(format!("http://127.0.0.1:{port}/api/memory/retrieve"))
        .bearer_auth("flood-secret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().get("retry-after").is_some());
    let served = http
        .post(format!("http://127.0.0.1:{port}/api/memory/retrieve"))
        .bearer_auth("quiet-secret")
        .json(&serde_json::json!({"userId": "alice", "roleId": "cto", "query": "budget"}))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);

    // Once the flood stops, its seats are free again.
    for flood in holding {
        flood.abort();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match recall(channel.clone(), "mallory", Some("flood-secret")).await {
            Ok(()) => break,
            Err(err) if err.code() == Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("the flood's seats were not freed: {err}"),
        }
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_needs_a_loopback_listener_and_no_proxy_header() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    let port = crate::support::free_port();
    config.gateway.rest_listen = format!("127.0.0.1:{port}");
    let node = nodes::start(config.clone(), &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;
    recall(channel.clone(), "alice", None)
        .await
        .expect("loopback, no proxy: served");

    let mut request = tonic::Request::new(RecallRequest {
        scope: Some(scope("alice")),
        query: "budget".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-forwarded-for", "203.0.113.9".parse().unwrap());
    let err = RetrieverServiceClient::new(channel).recall(request).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert!(err.message().contains("x-forwarded-for"), "{}", err.message());

    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/memory/retrieve");
    let body = serde_json::json!({"userId": "alice", "roleId": "cto", "query": "budget"});
    let served = http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(served.status(), 200);
    let proxied = http
        .post(&url)
        .header("forwarded", "for=203.0.113.9")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), 401);
    node.shutdown().await.unwrap();

    // The same process bound to every interface serves no request without a key, even from
    // loopback; health still answers.
    config.gateway.rest_listen = String::new();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let services = ServiceKind::ALL.iter().copied().collect();
    let open = thinkus_server::node::start(
        config,
        services,
        listener,
        None,
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    thinkus_common::grpc::wait_serving(&url, "", Duration::from_secs(30))
        .await
        .expect("health answers without a key");
    let channel = tonic::transport::Endpoint::from_shared(url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let err = recall(channel, "alice", None).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert!(err.message().contains("bound to loopback"), "{}", err.message());
    open.shutdown().await.unwrap();
}

/// Sends a unary request to `path` whose message declares `declared` bytes and only its first
/// kilobyte: the server reads the length prefix and waits for the rest, which comes when the
/// returned sender is dropped (then the body ends short).
async fn held_message(
    channel: Channel,
    path: &'static str,
    declared: u32,
) -> (
    tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    tokio::task::JoinHandle<()>,
) {
    use tonic::codegen::Service as _;
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    let mut head = vec![0u8];
    head.extend(declared.to_be_bytes());
    head.extend(std::iter::repeat_n(0u8, 1024));
    sender.send(Ok(bytes::Bytes::from(head))).await.unwrap();
    let body = axum::body::Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(receiver));
    let request = tonic::codegen::http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(tonic::body::Body::new(body))
        .unwrap();
    let mut service = channel;
    futures::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let call = service.call(request);
    (sender, tokio::spawn(async move { drop(call.await) }))
}

async fn recall_of(channel: Channel, query: String) -> Result<(), tonic::Status> {
    let mut request = tonic::Request::new(RecallRequest {
        scope: Some(scope("alice")),
        query,
        ..Default::default()
    });
    request.set_timeout(Duration::from_millis(500));
    RetrieverServiceClient::new(channel)
        .max_encoding_message_size(usize::MAX)
        .recall(request)
        .await
        .map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_wait_for_their_bytes_and_small_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    config.server.message_bytes_in_flight = 4 << 20;
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;

    // A 3 MiB message is being read: another 2 MiB do not fit beside it in 4 MiB, so a second
    // large message waits for them and, past its deadline, is shed naming the setting.
    let (sender, held) = held_message(
        channel.clone(),
        "/thinkus.retriever.v1.RetrieverService/Recall",
        3 << 20,
    )
    .await;
    let large = "budget ".repeat((2 << 20) / 7);
    let mut shed = None;
    for _ in 0..600 {
        match recall_of(channel.clone(), large.clone()).await {
            Err(status) if status.code() == Code::ResourceExhausted => {
                shed = Some(status);
                break;
            }
            // Read before the held one was: it reached the service.
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let shed = shed.expect("a large message waits while another holds the bytes");
    assert!(
        shed.message().contains("server.message_bytes_in_flight"),
        "{}",
        shed.message()
    );
    assert!(shed.metadata().get("retry-after").is_some(), "a retry-after hint");
    // Small messages are not counted: served at once.
    recall(channel.clone(), "alice", None)
        .await
        .expect("a small message is read beside the held one");

    // The held message ends (short): its bytes are free, and the large one is read (and refused
    // by the service for its length, not by the budget).
    drop(sender);
    held.await.unwrap();
    let after = recall_of(channel.clone(), large).await.unwrap_err();
    assert_ne!(after.code(), Code::ResourceExhausted, "{}", after.message());
    node.shutdown().await.unwrap();
}
