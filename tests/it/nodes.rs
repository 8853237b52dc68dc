//! Starting nodes in this process for the scenarios: each binds 127.0.0.1:0 and is waited
//! for until every service it runs reports SERVING.

use std::collections::BTreeSet;
use std::time::Duration;

use thinkus_backends::Backends;
use thinkus_common::config::{ApiKeyConfig, AuthMode};
use thinkus_server::node::{self, NodeHandle};
use thinkus_server::{Config, ServiceKind};
use tokio_util::sync::CancellationToken;

/// A configuration on embedded backends under `dir`, with the real local embedder.
pub fn embedded_config(dir: &std::path::Path) -> Config {
    let mut config = Config::default();
    config.server.data_dir = dir.to_path_buf();
    config.server.models_dir = crate::support::workspace_root().join("models");
    config.server.metrics_addr = None;
    config.knowledge.decay_interval_hours = 0;
    config
}

/// An API key of `tenant` for `users` (`"*"`: every user of the tenant), presented as `secret`.
pub fn api_key(tenant: &str, users: &[&str], secret: &str) -> ApiKeyConfig {
    ApiKeyConfig {
        tenant: tenant.into(),
        users: users.iter().map(|u| u.to_string()).collect(),
        key_sha256: thinkus_common::auth::key_sha256_hex(secret),
        ..Default::default()
    }
}

/// The keys of the two-tenant scenarios: `acme` for alice of acme, `globex` for bob of globex,
/// `globex_alice` for globex's own alice (the same user id as acme's: another person).
pub fn two_tenant_keys(acme: &str, globex: &str, globex_alice: &str) -> Vec<ApiKeyConfig> {
    vec![
        api_key("acme", &["alice"], acme),
        api_key("globex", &["bob"], globex),
        api_key("globex", &["alice"], globex_alice),
    ]
}

/// [`embedded_config`] that authenticates every caller by one of `keys`.
pub fn keyed_config(dir: &std::path::Path, keys: Vec<ApiKeyConfig>) -> Config {
    let mut config = embedded_config(dir);
    config.auth.mode = AuthMode::ApiKey;
    config.auth.keys = keys;
    config
}

/// Starts a node and waits until it serves.
pub async fn start(config: Config, services: &[ServiceKind], backends: Option<Backends>) -> NodeHandle {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let services: BTreeSet<ServiceKind> = services.iter().copied().collect();
    let handle = node::start(config, services.clone(), listener, backends, CancellationToken::new())
        .await
        .expect("the node starts");
    for service in &services {
        thinkus_common::grpc::wait_serving(&handle.url(), service.grpc_name(), Duration::from_secs(30))
            .await
            .expect("the service reports SERVING");
    }
    handle
}

/// A tonic channel to a node.
pub async fn channel(handle: &NodeHandle) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(handle.url())
        .unwrap()
        .connect()
        .await
        .expect("connect to the node")
}
