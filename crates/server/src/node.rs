//! A node: one process serving a set of services on one gRPC address, with the backends those
//! services need, clients for the services it calls (in process when it runs them, over gRPC at
//! the configured endpoints otherwise), health, metrics and background jobs.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use thinkus_artifact::{ArtifactApi, ArtifactGrpc, ArtifactGrpcClient, ArtifactService};
use thinkus_backends::{Backends, BackendsConfig, Needs};
use thinkus_common::auth::Authenticator;
use thinkus_common::grpc::{Gate, Health, ServeOptions, channel_with_tls, client_channel};
use thinkus_common::limits::Admission;
use thinkus_knowledge_manager::learned::LearnedExtraction;
use thinkus_knowledge_manager::{KnowledgeApi, KnowledgeGrpc, KnowledgeGrpcClient, KnowledgeManager};
use thinkus_memory_controller::learned::Learned;
use thinkus_memory_controller::{ControllerApi, ControllerGrpcClient, MemoryController};
use thinkus_retriever::{Retriever, RetrieverApi, RetrieverGrpc, RetrieverGrpcClient};
use thinkus_summary::{Summarizer, SummaryApi, SummaryGrpc, SummaryGrpcClient};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::{Routes, RoutesBuilder};

use crate::config::Config;
use crate::services::ServiceKind;

/// The domain APIs a node reaches, in process or remote.
#[derive(Clone)]
pub struct Apis {
    pub controller: Option<Arc<dyn ControllerApi>>,
    pub retriever: Option<Arc<dyn RetrieverApi>>,
    pub knowledge: Option<Arc<dyn KnowledgeApi>>,
    pub artifact: Option<Arc<dyn ArtifactApi>>,
    pub summary: Option<Arc<dyn SummaryApi>>,
}

/// A running node.
pub struct NodeHandle {
    pub addr: SocketAddr,
    pub services: BTreeSet<ServiceKind>,
    pub apis: Apis,
    pub backends: Backends,
    shutdown: CancellationToken,
    server: JoinHandle<anyhow::Result<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl NodeHandle {
    /// The gRPC base URL of the node.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving, drains, waits for the background jobs.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        self.server.await.context("the server task panicked")?
    }

    /// Waits until the node stops (its shutdown token is cancelled elsewhere).
    pub async fn wait(self) -> anyhow::Result<()> {
        let result = self.server.await.context("the server task panicked")?;
        for task in self.tasks {
            let _ = task.await;
        }
        result
    }
}

fn backends_config(config: &Config) -> BackendsConfig {
    BackendsConfig {
        storage: config.storage.resolved(&config.server.data_dir),
        embedder: config.embedder.clone(),
        models_dir: config.server.models_dir.clone(),
        llm: config.llm.clone(),
        tokenizer: config.tokenizer.encoding.clone(),
    }
}

/// What a set of services needs opened in this process.
pub fn needs_of(services: &BTreeSet<ServiceKind>) -> Needs {
    services
        .iter()
        .fold(Needs::default(), |needs, kind| needs.union(kind.needs()))
}

/// Opens the backends a set of services needs.
pub async fn open_backends(config: &Config, services: &BTreeSet<ServiceKind>) -> anyhow::Result<Backends> {
    Ok(Backends::open(&backends_config(config), needs_of(services)).await?)
}

fn required<T: Clone>(value: &Option<T>, what: &str) -> anyhow::Result<T> {
    value
        .clone()
        .ok_or_else(|| anyhow::anyhow!("{what} was not opened for this node"))
}

/// How this node reaches a service's API: the service itself when it runs here, else its gRPC
/// client at the configured endpoint, else not at all.
fn reach<T: ?Sized>(
    local: &Option<Arc<T>>,
    remote: Option<thinkus_common::grpc::ClientChannel>,
    grpc_client: impl FnOnce(thinkus_common::grpc::ClientChannel) -> Arc<T>,
) -> Option<Arc<T>> {
    local.clone().or_else(|| remote.map(grpc_client))
}

/// Starts a node on `listener`. `backends` may be given to share already opened backends (an
/// embedded vector index can be opened by one owner only).
pub async fn start(
    config: Config,
    services: BTreeSet<ServiceKind>,
    listener: TcpListener,
    backends: Option<Backends>,
    shutdown: CancellationToken,
) -> anyhow::Result<NodeHandle> {
    anyhow::ensure!(!services.is_empty(), "no service to run");
    for kind in &services {
        for dependency in kind.depends_on() {
            if !services.contains(dependency) && config.endpoint(*dependency).is_none() {
                anyhow::bail!(
                    "endpoints.{}: {} calls the {}, which this process does not run; set its address",
                    dependency.name().replace('-', "_"),
                    kind,
                    dependency
                );
            }
        }
    }
    // TLS first: a wrong certificate or key stops the start before anything is opened.
    let server_tls = match (&config.server.tls_cert_file, &config.server.tls_key_file) {
        (Some(cert), Some(key)) => Some(thinkus_common::tls::ServerTls::load(cert, key)?),
        (None, None) => None,
        _ => anyhow::bail!("server.tls_cert_file and server.tls_key_file: set both for TLS, or neither"),
    };
    let client_tls = match &config.server.tls_ca_file {
        Some(ca) => Some(thinkus_common::tls::client_tls(Some(ca))?),
        None => None,
    };
    let backends = match backends {
        Some(backends) => backends,
        None => open_backends(&config, &services).await?,
    };
    let max = config.server.max_message_bytes;
    let connect_timeout = Duration::from_millis(config.endpoints.connect_timeout_ms.max(500));
    let own_key = config.client_key();
    let remote = |kind: ServiceKind| -> anyhow::Result<Option<thinkus_common::grpc::ClientChannel>> {
        match config.endpoint(kind) {
            Some(uri) => Ok(Some(client_channel(
                channel_with_tls(uri, connect_timeout, client_tls.as_ref())?,
                own_key.clone(),
            ))),
            None => Ok(None),
        }
    };

    let manager: Option<Arc<KnowledgeManager>> = if services.contains(&ServiceKind::KnowledgeManager) {
        let jobs: Arc<dyn thinkus_backends::sql::JobStore> = required(&backends.store, "the database")?;
        let manager = KnowledgeManager::new(
            config.knowledge.clone(),
            required(&backends.store, "the database")?,
            required(&backends.vectors, "the vector index")?,
            required(&backends.embedder, "the embedder")?,
            backends.rules.clone(),
            backends.llm.clone(),
        )
        .with_jobs(jobs);
        Some(Arc::new(match config.knowledge.learned {
            true => manager
                .with_learned(LearnedExtraction::builtin().context("the knowledge manager's built-in weight file")?),
            false => manager,
        }))
    } else {
        None
    };
    let knowledge_local: Option<Arc<dyn KnowledgeApi>> = manager.clone().map(|m| m as Arc<dyn KnowledgeApi>);
    let retriever: Option<Arc<Retriever>> = if services.contains(&ServiceKind::Retriever) {
        Some(Arc::new(Retriever::new(
            config.retriever.clone(),
            required(&backends.store, "the database")?,
            required(&backends.vectors, "the vector index")?,
            required(&backends.embedder, "the embedder")?,
            backends.tokens,
        )))
    } else {
        None
    };
    let retriever_local: Option<Arc<dyn RetrieverApi>> = retriever.clone().map(|r| r as Arc<dyn RetrieverApi>);
    let controller_local: Option<Arc<dyn ControllerApi>> = if services.contains(&ServiceKind::MemoryController) {
        let controller = MemoryController::new(config.controller.clone(), backends.rules.clone(), backends.llm.clone());
        let controller = match config.controller.learned {
            true => controller.with_learned(
                Learned::builtin().context("the controller's built-in weight file")?,
                backends.embedder.clone(),
            ),
            false => controller,
        };
        Some(Arc::new(controller))
    } else {
        None
    };
    let artifact_local: Option<Arc<ArtifactService>> = if services.contains(&ServiceKind::Artifact) {
        Some(Arc::new(ArtifactService::new(
            config.artifact.clone(),
            required(&backends.store, "the database")?,
            required(&backends.blobs, "the blob store")?,
            backends.llm.clone(),
            backends.tokens,
        )))
    } else {
        None
    };
    let apis = Apis {
        artifact: reach(
            &artifact_local.clone().map(|local| local as Arc<dyn ArtifactApi>),
            remote(ServiceKind::Artifact)?,
            |channel| Arc::new(ArtifactGrpcClient::new(channel, max)),
        ),
        controller: reach(&controller_local, remote(ServiceKind::MemoryController)?, |channel| {
            Arc::new(ControllerGrpcClient::new(channel, max))
        }),
        knowledge: reach(&knowledge_local, remote(ServiceKind::KnowledgeManager)?, |channel| {
            Arc::new(KnowledgeGrpcClient::new(channel, max))
        }),
        retriever: reach(&retriever_local, remote(ServiceKind::Retriever)?, |channel| {
            Arc::new(RetrieverGrpcClient::new(channel, max))
        }),
        summary: None,
    };
    // The summary service offers decisions to the knowledge manager, wherever that runs.
    let summarizer: Option<Summarizer> = if services.contains(&ServiceKind::Summary) {
        let store = required(&backends.store, "the database")?;
        Some(Summarizer::new(
            config.summary.clone(),
            store.clone(),
            backends.rules.clone(),
            backends.llm.clone(),
            backends.tokens,
            Some(store),
            apis.knowledge.clone(),
        ))
    } else {
        None
    };
    let apis = Apis {
        summary: reach(
            &summarizer.clone().map(|local| Arc::new(local) as Arc<dyn SummaryApi>),
            remote(ServiceKind::Summary)?,
            |channel| Arc::new(SummaryGrpcClient::new(channel, max)),
        ),
        ..apis
    };

    let authenticator = Arc::new(Authenticator::from_config(&config.auth)?);
    // One admission for the whole process: a tenant's rate and seats span every service it
    // calls here, over gRPC and REST alike.
    let admission = Admission::from_config(&config.server);
    let request_timeout = Duration::from_millis(config.server.request_timeout_ms.max(1));
    let grpc_addr = listener.local_addr()?;
    let gate = Gate::new(
        authenticator.clone(),
        admission.clone(),
        Some(grpc_addr),
        request_timeout,
        config.server.message_bytes_in_flight,
    );
    if config.auth.mode == thinkus_common::config::AuthMode::Dev && !grpc_addr.ip().is_loopback() {
        tracing::warn!(
            %grpc_addr,
            "dev auth mode on a listener that is not bound to loopback: requests without a key are refused; \
             configure auth.mode = \"api_key\""
        );
    }
    let mut builder = RoutesBuilder::default();
    let mut background: Vec<Background> = Vec::new();
    for kind in &services {
        match kind {
            ServiceKind::Retriever => {
                builder.add_service(
                    gate.guard(RetrieverGrpc::new(required(&retriever_local, "the retriever")?).into_server(max)),
                );
            }
            ServiceKind::KnowledgeManager => {
                builder.add_service(
                    gate.guard(
                        KnowledgeGrpc::new(required(&knowledge_local, "the knowledge manager")?).into_server(max),
                    ),
                );
            }
            ServiceKind::MemoryController => {
                builder.add_service(
                    gate.guard(
                        thinkus_memory_controller::MemoryControllerGrpc::new(required(
                            &controller_local,
                            "the memory controller",
                        )?)
                        .into_server(max),
                    ),
                );
            }
            ServiceKind::Artifact => {
                builder.add_service(
                    gate.guard(ArtifactGrpc::new(required(&artifact_local, "the artifact service")?).into_server(max)),
                );
            }
            ServiceKind::Summary => {
                builder.add_service(gate.guard(
                    SummaryGrpc::new(Arc::new(required(&summarizer, "the summary service")?) as Arc<dyn SummaryApi>)
                        .into_server(max),
                ));
            }
            ServiceKind::Gateway => {
                let gateway = gateway_local(&config, &services, &apis, &backends)?;
                builder.add_service(gate.guard(thinkus_gateway::GatewayGrpc::new(gateway.clone()).into_server(max)));
                if !config.gateway.rest_listen.is_empty() {
                    let rest = TcpListener::bind(&config.gateway.rest_listen).await.with_context(|| {
                        format!("gateway.rest_listen: cannot listen on {}", config.gateway.rest_listen)
                    })?;
                    tracing::info!(addr = %rest.local_addr()?, "REST facade listening");
                    background.push(Background::Rest(rest, gateway.clone()));
                }
                if !config.gateway.ui_listen.is_empty() {
                    let ui = TcpListener::bind(&config.gateway.ui_listen)
                        .await
                        .with_context(|| format!("gateway.ui_listen: cannot listen on {}", config.gateway.ui_listen))?;
                    tracing::info!(addr = %ui.local_addr()?, "memory page listening");
                    background.push(Background::Ui(ui, gateway.clone()));
                }
                background.push(Background::Workers(gateway));
            }
        }
    }
    let routes: Routes = builder.routes();

    let names: Vec<&str> = services.iter().map(|k| k.grpc_name()).collect();
    let (health, health_service) = Health::new(&names).await;
    let addr = grpc_addr;
    let mut options = ServeOptions::from_config(&config.server);
    options.tls = server_tls.as_ref().map(thinkus_common::tls::ServerTls::grpc);
    let server_shutdown = shutdown.clone();
    let server = tokio::spawn(thinkus_common::grpc::serve(
        listener,
        routes,
        health.clone(),
        health_service,
        options,
        server_shutdown,
    ));

    let mut tasks = Vec::new();
    // A node that runs the knowledge manager reconciles the vector index with the database
    // before it reports SERVING: writes acknowledged before a crash are in the database, and
    // searches must not miss them.
    let (reconciled, reconciled_watch) = tokio::sync::watch::channel(manager.is_none());
    let upstreams = required_upstreams(&config, &services, connect_timeout, client_tls.as_ref())?;
    tasks.push(tokio::spawn(watch_health(
        backends.clone(),
        health,
        upstreams,
        reconciled_watch,
        shutdown.clone(),
    )));
    let reloaded = authenticator.clone();
    thinkus_common::shutdown::on_sighup(shutdown.clone(), move || match reloaded.reload() {
        Ok(count) => tracing::info!(count, "api keys reloaded"),
        Err(err) => tracing::error!(%err, "api keys not reloaded, keeping the previous ones"),
    });
    for job in background {
        match job {
            Background::Workers(gateway) => {
                tasks.extend(thinkus_gateway::jobs::spawn_workers(gateway, shutdown.clone()));
            }
            Background::Rest(listener, gateway) => {
                let state = thinkus_gateway::rest::RestState {
                    gateway,
                    authenticator: authenticator.clone(),
                    admission: admission.clone(),
                    listener: listener.local_addr().ok(),
                    request_timeout,
                };
                let (stop, tls) = (shutdown.clone(), server_tls.clone());
                tasks.push(tokio::spawn(async move {
                    if let Err(err) = thinkus_gateway::rest::serve(listener, state, tls, stop).await {
                        tracing::error!(%err, "the REST facade stopped");
                    }
                }));
            }
            Background::Ui(listener, gateway) => {
                let state = thinkus_gateway::ui::UiState::new(
                    gateway,
                    authenticator.clone(),
                    admission.clone(),
                    listener.local_addr().ok(),
                    request_timeout,
                );
                let (stop, tls) = (shutdown.clone(), server_tls.clone());
                tasks.push(tokio::spawn(async move {
                    if let Err(err) = thinkus_gateway::ui::serve(listener, state, tls, stop).await {
                        tracing::error!(%err, "the memory page stopped");
                    }
                }));
            }
        }
    }
    if let Some(retriever) = retriever {
        // Recalls mark what they showed read without waiting for the write.
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move { retriever.record_accesses(stop).await }));
    }
    if manager.is_some()
        && let Some(store) = backends.store.clone()
    {
        tasks.push(tokio::spawn(publish_memory_counts(store, shutdown.clone())));
    }
    if let Some(store) = backends.store.clone()
        && config.storage.retention.sweep_interval_secs > 0
    {
        tasks.push(tokio::spawn(retention(
            store,
            config.storage.retention.clone(),
            shutdown.clone(),
        )));
    }
    if let Some(km) = &manager {
        // Index rebuilds run as jobs that outlive their request (RebuildIndex, GetIndexJob).
        tasks.push(thinkus_knowledge_manager::rebuild::spawn_worker(
            km.clone(),
            shutdown.clone(),
        ));
        tasks.push(tokio::spawn(maintenance(
            km.clone(),
            Duration::from_secs(config.knowledge.decay_interval_hours * 3600),
            shutdown.clone(),
            reconciled,
        )));
    }
    if let Some(summarizer) = &summarizer
        && config.summary.sweep_interval_secs > 0
    {
        // Idle, ended and flagged sessions get their summary from this sweep.
        tasks.push(tokio::spawn(summarizer.clone().run_sweeper(shutdown.clone())));
    }
    if let Some(artifacts) = &artifact_local {
        // Expired artifacts are removed on the schedule of artifact.purge_interval_secs.
        tasks.push(tokio::spawn(artifacts.clone().run_expiry(shutdown.clone())));
    }
    tracing::info!(%addr, services = ?services.iter().map(|k| k.name()).collect::<Vec<_>>(), "node started");
    Ok(NodeHandle {
        addr,
        services,
        apis,
        backends,
        shutdown,
        server,
        tasks,
    })
}

/// Work a node runs beside its gRPC server.
enum Background {
    /// The gateway's queue workers.
    Workers(Arc<thinkus_gateway::Gateway>),
    /// The gateway's REST facade.
    Rest(TcpListener, Arc<thinkus_gateway::Gateway>),
    /// The memory page.
    Ui(TcpListener, Arc<thinkus_gateway::Gateway>),
}

/// Where the gateway's upstreams answer: in this process, or at their configured endpoint.
fn upstream_addresses(config: &Config, services: &BTreeSet<ServiceKind>) -> thinkus_gateway::UpstreamAddresses {
    let at = |kind: ServiceKind| match config.endpoint(kind) {
        Some(uri) if !services.contains(&kind) => uri.to_string(),
        _ => "in process".to_string(),
    };
    thinkus_gateway::UpstreamAddresses {
        controller: at(ServiceKind::MemoryController),
        retriever: at(ServiceKind::Retriever),
        knowledge: at(ServiceKind::KnowledgeManager),
        artifacts: at(ServiceKind::Artifact),
        summaries: at(ServiceKind::Summary),
    }
}

/// The gateway over the node's clients of the other services (the one a node serves; tests
/// call it in process).
pub fn gateway_local(
    config: &Config,
    services: &BTreeSet<ServiceKind>,
    apis: &Apis,
    backends: &Backends,
) -> anyhow::Result<Arc<thinkus_gateway::Gateway>> {
    let upstreams = thinkus_gateway::Upstreams {
        controller: required(&apis.controller, "the memory controller client")?,
        retriever: required(&apis.retriever, "the retriever client")?,
        knowledge: required(&apis.knowledge, "the knowledge manager client")?,
        artifacts: apis.artifact.clone().map(|api| {
            Arc::new(thinkus_gateway::adapters::Artifacts(api)) as Arc<dyn thinkus_gateway::extras::ArtifactPort>
        }),
        summaries: apis.summary.clone().map(|api| {
            Arc::new(thinkus_gateway::adapters::Summaries(api)) as Arc<dyn thinkus_gateway::extras::SummaryPort>
        }),
        embedder: backends.embedder.clone(),
        artifact_api: apis.artifact.clone(),
        summary_api: apis.summary.clone(),
        addresses: upstream_addresses(config, services),
    };
    let jobs: Arc<dyn thinkus_backends::sql::JobStore> = required(&backends.store, "the database")?;
    let gateway = thinkus_gateway::Gateway::new(
        config.gateway.clone(),
        upstreams,
        jobs,
        backends.tokens,
        backends.llm.clone(),
    );
    // The memory page shows recent turns' traces: kept only while it is served.
    Ok(Arc::new(if config.gateway.ui_listen.is_empty() {
        gateway
    } else {
        gateway.with_trace_log(thinkus_gateway::traces::TraceLog::new(20, config.gateway.ui_traces))
    }))
}

/// A service another process runs that a service of this node cannot answer without.
struct RequiredUpstream {
    /// The service of this node that needs it.
    needed_by: &'static str,
    kind: ServiceKind,
    uri: String,
    health: tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
}

impl RequiredUpstream {
    /// Whether it reports SERVING within 2 s; the reason when not.
    async fn check(&self) -> Result<(), String> {
        let mut health = self.health.clone();
        let request = tonic_health::pb::HealthCheckRequest {
            service: self.kind.grpc_name().to_string(),
        };
        match tokio::time::timeout(Duration::from_secs(2), health.check(request)).await {
            Err(_) => Err("no answer within 2 s".to_string()),
            Ok(Err(status)) => Err(status.message().to_string()),
            Ok(Ok(answer)) => match answer.into_inner().status() {
                tonic_health::pb::health_check_response::ServingStatus::Serving => Ok(()),
                other => Err(format!("reports {}", other.as_str_name())),
            },
        }
    }
}

/// The remote upstreams the node's services require ([`ServiceKind::requires`]).
fn required_upstreams(
    config: &Config,
    services: &BTreeSet<ServiceKind>,
    connect_timeout: Duration,
    tls: Option<&tonic::transport::ClientTlsConfig>,
) -> anyhow::Result<Vec<RequiredUpstream>> {
    let mut upstreams = Vec::new();
    for service in services {
        for &kind in service.requires() {
            let Some(uri) = config.endpoint(kind).filter(|_| !services.contains(&kind)) else {
                continue;
            };
            upstreams.push(RequiredUpstream {
                needed_by: service.grpc_name(),
                kind,
                uri: uri.to_string(),
                health: tonic_health::pb::health_client::HealthClient::new(channel_with_tls(
                    uri,
                    connect_timeout,
                    tls,
                )?),
            });
        }
    }
    Ok(upstreams)
}

/// Reports SERVING while the backends answer and the index has been reconciled, NOT_SERVING
/// otherwise. A service whose required upstream (another process) does not report SERVING
/// answers NOT_SERVING on its own name while the server ("") stays SERVING: readiness keeps
/// traffic away, liveness does not restart a process that cannot help it.
async fn watch_health(
    backends: Backends,
    health: Health,
    upstreams: Vec<RequiredUpstream>,
    mut reconciled: tokio::sync::watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let mut serving = None;
    // Set when the reconciliation task ended without saying so (it failed hard): serve anyway.
    let mut gave_up = false;
    loop {
        let ok = match backends.check().await {
            Ok(()) => *reconciled.borrow_and_update() || gave_up,
            Err(err) => {
                tracing::warn!(%err, "a backend does not answer");
                false
            }
        };
        let mut held = Vec::new();
        for upstream in &upstreams {
            if let Err(reason) = upstream.check().await {
                tracing::warn!(
                    service = upstream.needed_by,
                    upstream = %upstream.kind,
                    address = %upstream.uri,
                    %reason,
                    "a required upstream does not answer"
                );
                held.push(upstream.needed_by);
            }
        }
        let state = (ok, held.clone());
        if serving.as_ref() != Some(&state) && !shutdown.is_cancelled() {
            health.report(ok, &held).await;
            serving = Some(state);
        }
        let pause = if ok && held.is_empty() {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(1)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
            // Reconciliation finished: check at once.
            changed = reconciled.changed(), if !*reconciled.borrow() && !gave_up => {
                gave_up = changed.is_err();
            }
        }
    }
}

/// Publishes the number of memories by status (`thinkus_memories{status}`) every 10 s.
async fn publish_memory_counts(store: Arc<thinkus_backends::sql::SqlStore>, shutdown: CancellationToken) {
    use thinkus_backends::sql::MemoryStore;
    loop {
        match store.count_by_status().await {
            Ok(counts) => {
                for (status, count) in counts {
                    thinkus_common::metrics::METRICS
                        .memories
                        .with_label_values(&[status.as_str()])
                        .set(count as i64);
                }
            }
            Err(err) => tracing::warn!(%err, "cannot count memories for the metrics"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
    }
}

/// Purges, on schedule, the records the retention settings no longer keep (idempotency
/// records, summarised session messages, finished jobs' payloads). Every node that opens the
/// database runs it; the purges are idempotent, so several nodes may.
async fn retention(
    store: Arc<thinkus_backends::sql::SqlStore>,
    config: thinkus_common::config::RetentionConfig,
    shutdown: CancellationToken,
) {
    let interval = Duration::from_secs(config.sweep_interval_secs);
    loop {
        match thinkus_backends::sql::sweep_retention(store.as_ref(), &config, chrono::Utc::now()).await {
            Ok(report) => tracing::info!(
                idempotency = report.idempotency,
                session_messages = report.session_messages,
                job_payloads = report.job_payloads,
                "retention sweep"
            ),
            Err(err) => tracing::error!(%err, "retention sweep failed"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// One scheduled run of the decay and forgetting sweeps over every user. The knowledge
/// manager counts them itself (`thinkus_sweeps_total`, `thinkus_sweep_changes_total`), as it
/// does for RunMaintenance; this only logs what they changed.
async fn scheduled_sweep(km: &dyn KnowledgeApi) {
    match km
        .run_maintenance(thinkus_knowledge_manager::api::Owners::All, true, true, None)
        .await
    {
        Ok(report) => tracing::info!(
            decayed = report.decayed,
            forgotten = report.forgotten,
            "maintenance sweep"
        ),
        Err(err) => tracing::error!(%err, "maintenance sweep failed"),
    }
}

/// Reconciles the vector index with the store at start (writes acknowledged just before a
/// crash are in the store, maybe not yet in the index), says so on `reconciled` so that health
/// turns SERVING, then runs the decay and forgetting sweeps on schedule.
async fn maintenance(
    km: Arc<KnowledgeManager>,
    interval: Duration,
    shutdown: CancellationToken,
    reconciled: tokio::sync::watch::Sender<bool>,
) {
    let started = std::time::Instant::now();
    match km.reconcile_all().await {
        Ok(repaired) => {
            thinkus_common::metrics::METRICS
                .index_repaired
                .with_label_values(&["start"])
                .inc_by(repaired);
            if repaired > 0 {
                tracing::warn!(
                    repaired,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "the vector index was behind the store and was repaired"
                );
            } else {
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "the vector index agrees with the store"
                );
            }
        }
        // Serving with an index that may miss recent writes beats not serving at all; the
        // error says to rebuild.
        Err(err) => tracing::error!(%err, "index reconciliation failed; run `thinkus admin rebuild-index`"),
    }
    let _ = reconciled.send(true);
    if interval.is_zero() {
        return;
    }
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        scheduled_sweep(km.as_ref()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduled sweep counted each sweep and its changes twice (once in the knowledge
    /// manager, once here): one run is one sweep of each kind, and one memory decayed and
    /// forgotten is one change of each.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scheduled_sweep_is_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.server.data_dir = dir.path().to_path_buf();
        config.server.metrics_addr = None;
        config.embedder.uri = "hash://384".into();
        config.knowledge.decay_interval_hours = 0;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let services: BTreeSet<ServiceKind> = [ServiceKind::KnowledgeManager].into_iter().collect();
        let node = start(config, services, listener, None, CancellationToken::new())
            .await
            .expect("the node starts");
        let km = node.apis.knowledge.clone().expect("the knowledge manager runs here");
        // One old memory of little value: the sweep decays it, then forgets it.
        let then = chrono::Utc::now() - chrono::Duration::days(400);
        let mut old = thinkus_common::model::Memory::new(
            thinkus_common::model::Scope::new("sweep-once", "cto").with_tenant(thinkus_common::model::DEFAULT_TENANT),
            thinkus_common::model::MemoryType::ActionItem,
            "Order coffee beans".into(),
            thinkus_common::model::MemorySource::UserInput,
            then,
        );
        old.importance = 1;
        thinkus_backends::sql::MemoryStore::commit(
            node.backends.store.as_ref().expect("the database").as_ref(),
            thinkus_backends::sql::WriteBatch {
                inserts: vec![old],
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let metrics = &thinkus_common::metrics::METRICS;
        let counts = || {
            ["decay", "forget"].map(|kind| {
                (
                    metrics.sweeps.with_label_values(&[kind]).get(),
                    metrics.sweep_changes.with_label_values(&[kind]).get(),
                )
            })
        };
        let before = counts();
        scheduled_sweep(km.as_ref()).await;
        let after = counts();
        for (kind, (b, a)) in ["decay", "forget"].iter().zip(before.iter().zip(after.iter())) {
            assert_eq!(a.0 - b.0, 1, "{kind} sweeps counted");
            assert_eq!(a.1 - b.1, 1, "{kind} changes counted");
        }
        node.shutdown().await.unwrap();
    }
}
