//! TLS on the listeners, as an option (issue 18): with `server.tls_cert_file` and
//! `server.tls_key_file` the gRPC listener and the REST facade speak TLS only, and with
//! `server.tls_ca_file` a node calls the services of another node at `https://` endpoints. Two
//! nodes: A runs every service but the gateway behind TLS, B runs the gateway (its gRPC and REST
//! listeners behind TLS too) and reaches A over TLS. The certificate is a test-only one made
//! with OpenSSL and checked in (tests/it/tls/README.md says how).

use std::collections::BTreeSet;
use std::time::Duration;

use thinkus_server::ServiceKind;
use thinkus_server::node::{self, NodeHandle};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::{nodes, support};

fn file(name: &str) -> std::path::PathBuf {
    support::workspace_root().join("tests/it/tls").join(name)
}

fn trusting() -> ClientTlsConfig {
    let ca = std::fs::read(file("ca.pem")).expect("the test CA");
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost")
}

async fn serving(channel: Channel, service: &str) -> bool {
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32)
}

/// Starts a node whose listener speaks TLS and waits, over TLS, until it serves.
async fn start(config: thinkus_server::Config, services: &[ServiceKind]) -> (NodeHandle, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let services: BTreeSet<ServiceKind> = services.iter().copied().collect();
    let handle = node::start(config, services.clone(), listener, None, CancellationToken::new())
        .await
        .expect("the node starts");
    let endpoint = Endpoint::from_shared(format!("https://localhost:{port}"))
        .unwrap()
        .tls_config(trusting())
        .unwrap();
    for service in &services {
        let mut served = false;
        for _ in 0..300 {
            if let Ok(channel) = endpoint.connect().await
                && serving(channel, service.grpc_name()).await
            {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(served, "{service} serves over TLS");
    }
    (handle, port)
}

fn with_tls(config: &mut thinkus_server::Config) {
    config.server.tls_cert_file = Some(file("server.pem"));
    config.server.tls_key_file = Some(file("server.key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_speak_tls_and_nodes_call_each_other_over_it() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut config_a = nodes::embedded_config(dir_a.path());
    config_a.embedder.uri = "hash://384".into();
    with_tls(&mut config_a);
    let services_a = [
        ServiceKind::KnowledgeManager,
        ServiceKind::Retriever,
        ServiceKind::MemoryController,
        ServiceKind::Artifact,
        ServiceKind::Summary,
    ];
    let (node_a, port_a) = start(config_a, &services_a).await;

    // Plain text is refused, and so is a client that does not trust the certificate's CA.
    let plain = Endpoint::from_shared(format!("http://127.0.0.1:{port_a}")).unwrap();
    let answered = match plain.connect().await {
        Ok(channel) => serving(channel, ServiceKind::Retriever.grpc_name()).await,
        Err(_) => false,
    };
    assert!(!answered, "a plain-text client is answered by a TLS listener");
    let untrusting = Endpoint::from_shared(format!("https://localhost:{port_a}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().with_native_roots().domain_name("localhost"))
        .unwrap();
    let answered = match untrusting.connect().await {
        Ok(channel) => serving(channel, ServiceKind::Retriever.grpc_name()).await,
        Err(_) => false,
    };
    assert!(!answered, "a client that does not trust the CA got an answer");

    // B calls A at https:// endpoints, trusting the test CA, and serves gRPC and REST over TLS.
    let mut config_b = nodes::embedded_config(dir_b.path());
    config_b.embedder.uri = "hash://384".into();
    with_tls(&mut config_b);
    config_b.server.tls_ca_file = Some(file("ca.pem"));
    let a = format!("https://localhost:{port_a}");
    config_b.endpoints.memory_controller = Some(a.clone());
    config_b.endpoints.retriever = Some(a.clone());
    config_b.endpoints.knowledge_manager = Some(a.clone());
    config_b.endpoints.artifact = Some(a.clone());
    config_b.endpoints.summary = Some(a);
    let rest_port = support::free_port();
    config_b.gateway.rest_listen = format!("127.0.0.1:{rest_port}");
    let (node_b, _) = start(config_b, &[ServiceKind::Gateway]).await;

    let ca = reqwest::Certificate::from_pem(&std::fs::read(file("ca.pem")).unwrap()).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .resolve("localhost", ([127, 0, 0, 1], rest_port).into())
        .build()
        .unwrap();
    let base = format!("https://localhost:{rest_port}");
    let written = http
        .post(format!("{base}/api/memory/write"))
        .json(
            &serde_json::json!({"userId": "tess", "roleId": "cfo", "projectId": "shop",
            "conversation": "user: 预算上限定为5万元，必须在下个月15号前上线\nassistant: 好的"}),
        )
        .send()
        .await
        .expect("REST over TLS");
    assert_eq!(written.status(), 200);
    let written: serde_json::Value = written.json().await.unwrap();
    assert!(!written["memories"].as_array().unwrap().is_empty(), "{written}");
    let recalled: serde_json::Value = http
        .post(format!("{base}/api/memory/retrieve"))
        .json(&serde_json::json!({"userId": "tess", "roleId": "cfo", "projectId": "shop", "query": "预算是多少", "mode": "details"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        recalled["rendered"].as_str().unwrap_or_default().contains("5万"),
        "the memory went B → A and back over TLS: {recalled}"
    );
    let plain_rest = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{rest_port}/api/memory/retrieve"))
        .json(&serde_json::json!({"userId": "tess", "roleId": "cfo", "query": "预算"}))
        .send()
        .await;
    assert!(
        plain_rest.is_err() || !plain_rest.unwrap().status().is_success(),
        "the REST facade answered plain HTTP"
    );
    node_b.shutdown().await.unwrap();
    node_a.shutdown().await.unwrap();
}

/// A key that does not belong to the certificate stops the start, naming the setting.
#[tokio::test]
async fn a_mismatched_key_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nodes::embedded_config(dir.path());
    config.embedder.uri = "hash://384".into();
    config.server.tls_cert_file = Some(file("server.pem"));
    config.server.tls_key_file = Some(file("ca.pem"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let services: BTreeSet<ServiceKind> = [ServiceKind::MemoryController].into_iter().collect();
    let err = node::start(config, services, listener, None, CancellationToken::new())
        .await
        .err()
        .expect("the start fails");
    assert!(err.to_string().contains("server.tls_key_file"), "{err:#}");
}
