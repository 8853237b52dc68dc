//! Capacity shedding (issue 21): a saturated process refuses at once, with RESOURCE_EXHAUSTED
//! and a `retry-after`, a request whose wait for a seat and work cannot fit its deadline
//! (`grpc-timeout`), instead of queueing it until its caller has given up; a request with room
//! waits its turn and is served.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
use thinkus_proto::artifact::{ArtifactHeader, UploadArtifactRequest, upload_artifact_request};
use thinkus_proto::common::Scope;
use thinkus_proto::retriever::RecallRequest;
use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
use thinkus_server::ServiceKind;
use tonic::Code;
use tonic::transport::Channel;

use crate::nodes;

fn scope() -> Scope {
    Scope {
        user_id: "alice".into(),
        role_id: "cto".into(),
        project_id: "p1".into(),
        session_id: "s1".into(),
        ..Default::default()
    }
}

/// An upload that sends its header and then nothing for `idle` (forever when None): it holds
/// its seat all that time.
async fn slow_upload(channel: Channel, idle: Option<Duration>) -> Result<(), tonic::Status> {
    let header = UploadArtifactRequest {
        part: Some(upload_artifact_request::Part::Header(ArtifactHeader {
            scope: Some(scope()),
            path: "slow.log".into(),
            ..Default::default()
        })),
    };
    let silence = futures::stream::once(async move {
        match idle {
            Some(idle) => tokio::time::sleep(idle).await,
            None => futures::future::pending::<()>().await,
        }
    })
    .filter_map(|()| async { None::<UploadArtifactRequest> });
    let stream = futures::stream::iter(vec![header]).chain(silence);
    ArtifactServiceClient::new(channel)
        .upload_artifact(stream)
        .await
        .map(drop)
}

async fn recall(channel: Channel, timeout: Duration) -> Result<(), tonic::Status> {
    let mut request = tonic::Request::new(RecallRequest {
        scope: Some(scope()),
        query: "budget".into(),
        ..Default::default()
    });
    request.set_timeout(timeout);
    RetrieverServiceClient::new(channel).recall(request).await.map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_process_sheds_at_once_what_cannot_meet_its_deadline_and_serves_what_can() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    config.server.concurrency_limit = 1;
    config.server.tenant_concurrency_limit = 1;
    config.server.queue_timeout_ms = 20_000;
    let node = nodes::start(config, &ServiceKind::ALL, None).await;
    let channel = nodes::channel(&node).await;

    // Admission learns that a request holds its seat about a second.
    let timed = slow_upload(channel.clone(), Some(Duration::from_secs(1))).await;
    assert!(
        !matches!(&timed, Err(status) if status.code() == Code::ResourceExhausted),
        "{timed:?}"
    );
    // Then one upload holds the only seat.
    let holder = tokio::spawn(slow_upload(channel.clone(), None));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A recall that must be done within 500 ms would wait about a second: refused at once,
    // before its deadline, told when to come back.
    let asked = Instant::now();
    let err = recall(channel.clone(), Duration::from_millis(500)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("would pass the deadline"), "{}", err.message());
    assert_eq!(err.metadata().get("retry-after").unwrap(), "1");
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "answered before its deadline"
    );

    // A recall with room waits its turn, and is served once the seat is free.
    let patient = tokio::spawn(recall(channel.clone(), Duration::from_secs(20)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!patient.is_finished(), "it waits for the seat");
    holder.abort();
    patient.await.unwrap().expect("served once the seat is free");
    node.shutdown().await.unwrap();
}
