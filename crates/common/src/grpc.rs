//! Serving gRPC: health, reflection, the layer stack, graceful shutdown; and client channels.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::codegen::InterceptedService;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::metrics::GrpcMetricsLayer;
use crate::telemetry::{TraceContextInterceptor, server_span};

/// How a gRPC server behaves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub request_timeout: Duration,
    pub concurrency_limit: usize,
    pub shutdown_grace: Duration,
}

impl ServeOptions {
    pub fn from_config(config: &ServerConfig) -> Self {
        Self {
            request_timeout: Duration::from_millis(config.request_timeout_ms.max(1)),
            concurrency_limit: config.concurrency_limit.max(1),
            shutdown_grace: Duration::from_secs(config.shutdown_grace_secs),
        }
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self::from_config(&ServerConfig::default())
    }
}

/// The health service of one server, with every service NOT_SERVING until [`Health::serving`].
#[derive(Clone)]
pub struct Health {
    reporter: HealthReporter,
    services: Vec<String>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health").field("services", &self.services).finish()
    }
}

impl Health {
    /// Creates the reporter and the health service to mount.
    pub async fn new(
        services: &[&str],
    ) -> (
        Self,
        tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    ) {
        let (reporter, service) = tonic_health::server::health_reporter();
        let health = Self {
            reporter,
            services: services.iter().map(|s| s.to_string()).collect(),
        };
        health.set(ServingStatus::NotServing).await;
        (health, service)
    }

    async fn set(&self, status: ServingStatus) {
        self.reporter.set_service_status("", status).await;
        for service in &self.services {
            self.reporter.set_service_status(service, status).await;
        }
    }

    /// Every service answers SERVING (call once the backends answered).
    pub async fn serving(&self) {
        self.set(ServingStatus::Serving).await;
    }

    /// Every service answers NOT_SERVING (shutdown started, or a backend is down).
    pub async fn not_serving(&self) {
        self.set(ServingStatus::NotServing).await;
    }
}

/// Serves `routes` plus health and reflection on `listener` until `shutdown` is cancelled,
/// then drains in-flight requests for at most the grace period.
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    health: Health,
    health_service: tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(thinkus_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(thinkus_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let addr = listener.local_addr()?;

    // Layer order, outermost first: metrics see every request, including those shed or timed
    // out below; the deadline bounds the time a request waits for a concurrency slot too; the
    // global limit protects the backends across connections, and tonic's load shedding turns
    // "no slot free" into UNAVAILABLE at once instead of an unbounded queue.
    let layers =
        tower::ServiceBuilder::new()
            .layer(GrpcMetricsLayer)
            .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
                options.concurrency_limit,
            ));

    let drained = CancellationToken::new();
    let stop = shutdown.clone();
    let health_on_stop = health.clone();
    let drained_signal = drained.clone();
    let grace = options.shutdown_grace;
    let server = Server::builder()
        .trace_fn(server_span)
        .timeout(options.request_timeout)
        .load_shed(true)
        .layer(layers)
        .add_routes(routes)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_alpha)
        // Accepted connections without Nagle's algorithm: a response is several small writes
        // (headers, data, trailers), and Nagle held each one back until the client's delayed
        // ACK, 40 ms later. `Server::tcp_nodelay` applies only to listeners tonic binds itself.
        .serve_with_incoming_shutdown(TcpIncoming::from(listener).with_nodelay(Some(true)), async move {
            stop.cancelled().await;
            health_on_stop.not_serving().await;
            drained_signal.cancel();
        });
    tracing::info!(%addr, "grpc listening");
    tokio::select! {
        result = server => result?,
        _ = async {
            drained.cancelled().await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!(?grace, "grace period over, closing remaining connections");
        }
    }
    tracing::info!(%addr, "grpc stopped");
    Ok(())
}

/// Binds a TCP listener, naming the address on failure.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|err| anyhow::anyhow!("cannot listen on {addr}: {err}"))
}

/// A lazily connected channel to another service. `uri` is `http://host:port`.
pub fn channel(uri: &str, connect_timeout: Duration) -> Result<Channel, ApiError> {
    let endpoint = Endpoint::from_shared(uri.to_string())
        .map_err(|err| ApiError::invalid("endpoint", format!("{uri:?}: {err}")))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    Ok(endpoint.connect_lazy())
}

/// A channel wrapped with the client interceptor (trace context and credentials).
pub type ClientChannel = InterceptedService<Channel, TraceContextInterceptor>;

/// Wraps a channel with trace-context injection and the credential to present.
pub fn client_channel(channel: Channel, own_key: Option<String>) -> ClientChannel {
    InterceptedService::new(channel, TraceContextInterceptor::new(own_key))
}

/// Waits until the health service at `uri` reports SERVING for `service`, or the deadline.
pub async fn wait_serving(uri: &str, service: &str, deadline: Duration) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    loop {
        let attempt = async {
            let channel = Endpoint::from_shared(uri.to_string())?.connect().await?;
            let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
            let response = client
                .check(tonic_health::pb::HealthCheckRequest {
                    service: service.to_string(),
                })
                .await?;
            anyhow::Ok(response.into_inner().status)
        };
        if let Ok(status) = attempt.await
            && status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        {
            return Ok(());
        }
        if started.elapsed() > deadline {
            anyhow::bail!("{service} at {uri} did not report SERVING within {deadline:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
