//! Serving gRPC: health, reflection, the layer stack, authentication and admission, graceful
//! shutdown; and client channels.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tonic::codegen::InterceptedService;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::{TcpConnectInfo, TcpIncoming, TlsConnectInfo};
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tower::Service;

use crate::auth::{Authenticator, Origin, bearer_from_headers};
use crate::config::ServerConfig;
use crate::error::{ApiError, to_status};
use crate::limits::{Admission, TenantLimits};
use crate::metrics::GrpcMetricsLayer;
use crate::telemetry::{TraceContextInterceptor, server_span};
use crate::work::ByteBudget;

/// How a gRPC server behaves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub request_timeout: Duration,
    pub shutdown_grace: Duration,
    /// TLS on the listener (`crate::tls::ServerTls::grpc`); plain text without.
    pub tls: Option<tonic::transport::ServerTlsConfig>,
}

impl ServeOptions {
    pub fn from_config(config: &ServerConfig) -> Self {
        Self {
            request_timeout: Duration::from_millis(config.request_timeout_ms.max(1)),
            shutdown_grace: Duration::from_secs(config.shutdown_grace_secs),
            tls: None,
        }
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self::from_config(&ServerConfig::default())
    }
}

/// The health service of one server, with every service NOT_SERVING until [`Health::report`].
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

    /// Every service answers NOT_SERVING (shutdown started, or a backend is down).
    pub async fn not_serving(&self) {
        self.set(ServingStatus::NotServing).await;
    }

    /// The server ("") and every service answer `serving`, except those named in `held`, which
    /// answer NOT_SERVING (a service whose required upstream does not answer: the process is
    /// alive, so a liveness probe of "" passes, but readiness for that service fails).
    pub async fn report(&self, serving: bool, held: &[&str]) {
        let status = |ok: bool| match ok {
            true => ServingStatus::Serving,
            false => ServingStatus::NotServing,
        };
        self.reporter.set_service_status("", status(serving)).await;
        for service in &self.services {
            let ok = serving && !held.contains(&service.as_str());
            self.reporter.set_service_status(service, status(ok)).await;
        }
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
    // out below; the timeout bounds the whole request, its wait for a seat included.
    // Authentication, rates and seats are not layers of the whole server but wrap each
    // service in `routes` ([`Gate::guard`]): health and reflection stay outside them, so a
    // flood can never starve a liveness probe.
    let layers = tower::ServiceBuilder::new().layer(GrpcMetricsLayer);

    let drained = CancellationToken::new();
    let stop = shutdown.clone();
    let health_on_stop = health.clone();
    let drained_signal = drained.clone();
    let grace = options.shutdown_grace;
    let tls = options.tls.is_some();
    let mut server = Server::builder();
    if let Some(config) = options.tls {
        server = server.tls_config(config)?;
    }
    let server = server
        .trace_fn(server_span)
        .timeout(options.request_timeout)
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
    tracing::info!(%addr, tls, "grpc listening");
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

/// Authentication and admission in front of the services of one listener: every request is
/// authenticated (dev mode's exemption needs a loopback listener, a loopback peer and no proxy
/// header), then admitted by the process's [`Admission`] (its tenant's rate and a seat) before
/// the service sees it, under its deadline (`grpc-timeout`, capped by the request timeout).
/// A request whose first message is large (over [`LARGE_MESSAGE_BYTES`], as its length prefix
/// declares) then reserves that many bytes of `server.message_bytes_in_flight` before the
/// message is read, and holds them until it is answered: the buffers and decoded copies of
/// near-limit messages stay bounded however many come at once (the ones waiting are not read,
/// so HTTP/2 flow control holds their bytes back at the sender).
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

struct GateInner {
    authenticator: Arc<Authenticator>,
    admission: Admission,
    listener: Option<SocketAddr>,
    request_timeout: Duration,
    /// Bytes of large request messages read at once (`server.message_bytes_in_flight`).
    messages: ByteBudget,
}

/// Request messages larger than this reserve their size from `server.message_bytes_in_flight`;
/// smaller ones are bounded by the seats (at most this much each).
pub const LARGE_MESSAGE_BYTES: usize = 1024 * 1024;

/// Reads the head of a gRPC request's body until the first message's length prefix is in:
/// (the declared length, if one came; the body again, whole).
async fn first_message_length(body: Body) -> (Option<usize>, Body) {
    use futures::StreamExt as _;
    let mut data = axum::body::Body::new(body).into_data_stream();
    let mut head: Vec<Result<axum::body::Bytes, axum::Error>> = Vec::new();
    let mut prefix = [0u8; 5];
    let mut seen = 0;
    while seen < prefix.len() {
        match data.next().await {
            Some(Ok(chunk)) => {
                for byte in chunk.iter().take(prefix.len() - seen) {
                    prefix[seen] = *byte;
                    seen += 1;
                }
                head.push(Ok(chunk));
            }
            Some(Err(err)) => {
                head.push(Err(err));
                break;
            }
            None => break,
        }
    }
    let declared =
        (seen == prefix.len()).then(|| u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize);
    let whole = futures::stream::iter(head).chain(data);
    (declared, Body::new(axum::body::Body::from_stream(whole)))
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("listener", &self.inner.listener)
            .field("admission", &self.inner.admission)
            .finish()
    }
}

impl Gate {
    /// The gate of the listener bound to `listener`.
    pub fn new(
        authenticator: Arc<Authenticator>,
        admission: Admission,
        listener: Option<SocketAddr>,
        request_timeout: Duration,
        message_bytes_in_flight: usize,
    ) -> Self {
        Self {
            inner: Arc::new(GateInner {
                authenticator,
                admission,
                listener,
                request_timeout,
                messages: ByteBudget::new("server.message_bytes_in_flight", message_bytes_in_flight),
            }),
        }
    }

    /// Wraps one gRPC service.
    pub fn guard<S>(&self, service: S) -> Guarded<S> {
        Guarded {
            inner: service,
            gate: self.clone(),
        }
    }
}

/// A gRPC service behind a [`Gate`].
#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    gate: Gate,
}

impl<S: NamedService> NamedService for Guarded<S> {
    const NAME: &'static str = S::NAME;
}

/// The peer address tonic recorded for a connection, over TCP or TLS.
fn remote_addr(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.get_ref().remote_addr())
        })
}

impl<S> Service<http::Request<Body>> for Guarded<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        // The clone that was polled ready serves this request; the fresh one the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let gate = Arc::clone(&self.gate.inner);
        Box::pin(async move {
            let origin = Origin::of(gate.listener, remote_addr(request.extensions()), request.headers());
            let principal = match gate
                .authenticator
                .authenticate(bearer_from_headers(request.headers()), &origin)
            {
                Ok(principal) => principal,
                Err(err) => return Ok(to_status(&err).into_http()),
            };
            let timeout = request
                .headers()
                .get("grpc-timeout")
                .and_then(|value| value.to_str().ok())
                .and_then(crate::deadline::parse_grpc_timeout)
                .map_or(gate.request_timeout, |asked| asked.min(gate.request_timeout));
            let deadline = Instant::now() + timeout;
            let limits = TenantLimits {
                rate_per_second: principal.rate_per_second,
                concurrency: principal.max_concurrency,
            };
            let work = request.uri().path().to_string();
            let seat = match gate
                .admission
                .admit(&principal.tenant, limits, &work, Some(deadline))
                .await
            {
                Ok(seat) => seat,
                Err(err) => return Ok(to_status(&err).into_http()),
            };
            request.extensions_mut().insert(principal);
            let (parts, body) = request.into_parts();
            let (declared, body) = first_message_length(body).await;
            let request = http::Request::from_parts(parts, body);
            let reserved = match declared {
                Some(bytes) if bytes > LARGE_MESSAGE_BYTES => {
                    let reserve = gate.messages.reserve("message bytes", bytes);
                    match crate::deadline::with_deadline(Some(deadline), reserve).await {
                        Ok(reserved) => Some(reserved),
                        Err(err) => return Ok(to_status(&err).into_http()),
                    }
                }
                _ => None,
            };
            let response = crate::deadline::with_deadline(Some(deadline), inner.call(request)).await;
            drop((seat, reserved));
            response
        })
    }
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

/// A lazily connected channel speaking TLS with `tls` when `uri` is `https://` (plain `channel`
/// otherwise, where an `https://` URI trusts the system's roots).
pub fn channel_with_tls(
    uri: &str,
    connect_timeout: Duration,
    tls: Option<&tonic::transport::ClientTlsConfig>,
) -> Result<Channel, ApiError> {
    let Some(tls) = tls.filter(|_| uri.starts_with("https://")) else {
        return channel(uri, connect_timeout);
    };
    let endpoint = Endpoint::from_shared(uri.to_string())
        .map_err(|err| ApiError::invalid("endpoint", format!("{uri:?}: {err}")))?
        .tls_config(tls.clone())
        .map_err(|err| ApiError::invalid("endpoint", format!("{uri:?}: TLS: {err}")))?
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
