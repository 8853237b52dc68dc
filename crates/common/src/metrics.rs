//! Prometheus metrics: one registry per process, served as text on `/metrics`.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};

/// Every metric the services record.
pub struct Metrics {
    pub registry: Registry,
    /// gRPC requests by service, method and status code.
    pub grpc_requests: IntCounterVec,
    /// gRPC latency by service, method and status code.
    pub grpc_latency: HistogramVec,
    /// Memories by status (refreshed by the knowledge manager's sweeps).
    pub memories: IntGaugeVec,
    /// Background jobs by kind and status (refreshed by the gateway's worker).
    pub queue_depth: IntGaugeVec,
    /// Finished job runs by kind and outcome (succeeded, retried, failed).
    pub job_runs: IntCounterVec,
    /// Maintenance sweeps run, by kind (decay, forget, purge).
    pub sweeps: IntCounterVec,
    /// Items changed by maintenance sweeps, by kind.
    pub sweep_changes: IntCounterVec,
    /// Failures of the LLM engines by task (decide, extract, summarize, ...).
    pub llm_failures: IntCounterVec,
    /// Writes the quota refused, by plan (after its cleanup found no room).
    pub quota_refusals: IntCounterVec,
    /// Latency of backend calls by backend and operation.
    pub backend_latency: HistogramVec,
    /// The gateway's catalog probes under the controller's "no", by outcome (hit, miss).
    pub catalog_probes: IntCounterVec,
    /// Requests refused with RESOURCE_EXHAUSTED before any work, by what was full.
    pub shed: IntCounterVec,
    /// The effective seats tenants' shares are cut from (`thinkus_common::limits`).
    pub effective_seats: IntGauge,
    /// Vector index points repaired from the database, by when (start, rebuild).
    pub index_repaired: IntCounterVec,
}

fn register<T: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: T) -> T {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric names are unique");
    metric
}

/// The process-wide metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let registry = Registry::new();
    let latency_buckets = vec![
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    Metrics {
        grpc_requests: register(
            &registry,
            IntCounterVec::new(
                Opts::new("thinkus_grpc_requests_total", "gRPC requests served"),
                &["service", "method", "code"],
            )
            .expect("valid metric"),
        ),
        grpc_latency: register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new("thinkus_grpc_request_duration_seconds", "gRPC request latency")
                    .buckets(latency_buckets.clone()),
                &["service", "method", "code"],
            )
            .expect("valid metric"),
        ),
        memories: register(
            &registry,
            IntGaugeVec::new(Opts::new("thinkus_memories", "memories by status"), &["status"]).expect("valid metric"),
        ),
        queue_depth: register(
            &registry,
            IntGaugeVec::new(
                Opts::new("thinkus_queue_jobs", "background jobs by kind and status"),
                &["kind", "status"],
            )
            .expect("valid metric"),
        ),
        job_runs: register(
            &registry,
            IntCounterVec::new(
                Opts::new("thinkus_job_runs_total", "background job runs by outcome"),
                &["kind", "outcome"],
            )
            .expect("valid metric"),
        ),
        sweeps: register(
            &registry,
            IntCounterVec::new(Opts::new("thinkus_sweeps_total", "maintenance sweeps run"), &["kind"])
                .expect("valid metric"),
        ),
        sweep_changes: register(
            &registry,
            IntCounterVec::new(
                Opts::new("thinkus_sweep_changes_total", "items changed by maintenance sweeps"),
                &["kind"],
            )
            .expect("valid metric"),
        ),
        llm_failures: register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "thinkus_llm_failures_total",
                    "LLM calls that failed or could not be parsed",
                ),
                &["task"],
            )
            .expect("valid metric"),
        ),
        quota_refusals: register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "thinkus_quota_refusals_total",
                    "memory writes refused by a full role's quota, by plan",
                ),
                &["plan"],
            )
            .expect("valid metric"),
        ),
        backend_latency: register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new("thinkus_backend_duration_seconds", "backend call latency").buckets(latency_buckets),
                &["backend", "operation"],
            )
            .expect("valid metric"),
        ),
        catalog_probes: register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "thinkus_gateway_catalog_probes_total",
                    "catalog probes run under the controller's \"no\", by outcome (hit: a strong match was included)",
                ),
                &["outcome"],
            )
            .expect("valid metric"),
        ),
        effective_seats: register(
            &registry,
            IntGauge::new(
                "thinkus_admission_effective_seats",
                "the seats the machine serves side by side, that tenants' shares are cut from",
            )
            .expect("valid metric"),
        ),
        shed: register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "thinkus_requests_shed_total",
                    "requests refused with RESOURCE_EXHAUSTED before any work, by what was full",
                ),
                &["reason"],
            )
            .expect("valid metric"),
        ),
        index_repaired: register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "thinkus_index_repaired_points_total",
                    "vector index points added or removed to agree with the database",
                ),
                &["when"],
            )
            .expect("valid metric"),
        ),
        registry,
    }
});

/// The metrics in the Prometheus text format.
pub fn render() -> String {
    let mut buffer = Vec::new();
    let encoder = TextEncoder::new();
    let _ = encoder.encode(&METRICS.registry.gather(), &mut buffer);
    String::from_utf8(buffer).unwrap_or_default()
}

/// Serves `/metrics` until `shutdown` is cancelled.
pub async fn serve(addr: SocketAddr, shutdown: CancellationToken) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_on(listener, shutdown).await
}

/// Serves `/metrics` on a bound listener until `shutdown` is cancelled.
pub async fn serve_on(listener: tokio::net::TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async { ([(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], render()) }),
    );
    tracing::info!(addr = %listener.local_addr()?, "metrics listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

/// A tower layer recording request counts and latency per gRPC method and status.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcMetricsLayer;

impl<S> Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner }
    }
}

/// See [`GrpcMetricsLayer`].
#[derive(Debug, Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
}

impl<S, B, ResBody> Service<http::Request<B>> for GrpcMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let path = request.uri().path().trim_start_matches('/').to_string();
        let started = Instant::now();
        let future = self.inner.call(request);
        Box::pin(async move {
            let result = future.await;
            let (service, method) = path.split_once('/').unwrap_or(("unknown", path.as_str()));
            let service = service.rsplit('.').next().unwrap_or(service);
            // Errors come back "trailers-only", with grpc-status in the headers; successful
            // unary calls put it in the trailers, after the body: absent here means OK.
            let code = match &result {
                Ok(response) => response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map(|c| format!("{:?}", tonic::Code::from(c)))
                    .unwrap_or_else(|| "Ok".to_string()),
                Err(_) => "Unavailable".to_string(),
            };
            let labels = [service, method, code.as_str()];
            METRICS.grpc_requests.with_label_values(&labels).inc();
            METRICS
                .grpc_latency
                .with_label_values(&labels)
                .observe(started.elapsed().as_secs_f64());
            result
        })
    }
}

/// Times a backend call into `thinkus_backend_duration_seconds`.
pub async fn time_backend<F: Future>(backend: &str, operation: &str, future: F) -> F::Output {
    let started = Instant::now();
    let output = future.await;
    METRICS
        .backend_latency
        .with_label_values(&[backend, operation])
        .observe(started.elapsed().as_secs_f64());
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_registered_metrics() {
        METRICS.sweeps.with_label_values(&["decay"]).inc();
        let text = render();
        assert!(text.contains("thinkus_sweeps_total{kind=\"decay\"}"), "{text}");
    }
}
