//! Logs and traces. `init` once per process: an EnvFilter (RUST_LOG wins over the config), a
//! text or JSON log layer on stderr, and an OpenTelemetry layer exporting over OTLP/gRPC only
//! when an endpoint is configured. W3C trace context travels in gRPC metadata: clients inject
//! it ([`TraceContextInterceptor`]), servers extract it ([`server_span`]).

use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::service::Interceptor;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::TelemetryConfig;

/// Flushes pending spans when dropped (or on [`TelemetryGuard::shutdown`]).
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Exports what is left and stops the exporter. Call it while the Tokio runtime runs.
    pub async fn shutdown(mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(err) = provider.shutdown_with_timeout(Duration::from_secs(5)) {
                    tracing::warn!(%err, "trace exporter shutdown failed");
                }
            })
            .await;
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.force_flush();
        }
    }
}

/// The OTLP endpoint: the config, else the standard OTEL_EXPORTER_OTLP_ENDPOINT variable.
pub fn otlp_endpoint(config: &TelemetryConfig) -> Option<String> {
    config.otlp_endpoint.clone().filter(|e| !e.is_empty()).or_else(|| {
        std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .ok()
            .filter(|e| !e.is_empty())
    })
}

/// Installs logging and tracing for this process. `service_name` becomes the OpenTelemetry
/// `service.name` ("thinkus-retriever"). Must run inside a Tokio runtime when OTLP is on.
pub fn init(service_name: &str, config: &TelemetryConfig) -> anyhow::Result<TelemetryGuard> {
    global::set_text_map_propagator(TraceContextPropagator::new());

    // qdrant-edge warns at every start that two of Qdrant server's start-up steps did not run
    // (its feature flags, its multi-mmap check): the crate exports neither, and both defaults are
    // what an embedded index wants. Only those two modules are quieted; its other warnings stay.
    let default_filter = format!(
        "{},h2=warn,hyper=warn,hyper_util=warn,tower=warn,sqlx=warn,aws_smithy_runtime=warn,aws_config=warn,qdrant_edge=warn,\
         qdrant_edge::common::flags=error,qdrant_edge::common::mmap::ops=error,opentelemetry=warn,tonic=info",
        config.log_level
    );
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));

    // The log filter applies to the logs only: quieting the logs (RUST_LOG=warn) must not
    // silence the traces.
    let fmt_layer = match config.log_format.as_str() {
        "json" => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
        _ => tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };

    let (otel_layer, provider) = match otlp_endpoint(config) {
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(Duration::from_secs(5))
                .build()?;
            // The exporter speaks gRPC through tonic, which needs the Tokio reactor: the batch
            // processor therefore runs as a Tokio task, not on its own thread.
            let processor = opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
                exporter,
                opentelemetry_sdk::runtime::Tokio,
            )
            .build();
            let ratio = config.sample_ratio.clamp(0.0, 1.0);
            let provider = SdkTracerProvider::builder()
                .with_span_processor(processor)
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))))
                .with_resource(
                    Resource::builder()
                        .with_service_name(service_name.to_string())
                        .with_attribute(KeyValue::new("service.namespace", "thinkus"))
                        .build(),
                )
                .build();
            let tracer = provider.tracer("thinkus");
            global::set_tracer_provider(provider.clone());
            (
                Some(
                    tracing_opentelemetry::layer()
                        .with_tracer(tracer)
                        .with_filter(trace_filter())
                        .boxed(),
                ),
                Some(provider),
            )
        }
        None => (None, None),
    };

    Registry::default().with(fmt_layer).with(otel_layer).try_init()?;
    Ok(TelemetryGuard { provider })
}

/// What becomes a span in the exported traces: this product's spans at info level, not the
/// transport's internals (nor the exporter's own calls, which would trace themselves).
fn trace_filter() -> tracing_subscriber::filter::Targets {
    use tracing::level_filters::LevelFilter;
    tracing_subscriber::filter::Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("h2", LevelFilter::OFF)
        .with_target("hyper", LevelFilter::OFF)
        .with_target("hyper_util", LevelFilter::OFF)
        .with_target("tower", LevelFilter::OFF)
        .with_target("tonic", LevelFilter::OFF)
        .with_target("opentelemetry", LevelFilter::OFF)
        .with_target("opentelemetry_sdk", LevelFilter::OFF)
        .with_target("opentelemetry_otlp", LevelFilter::OFF)
        .with_target("sqlx", LevelFilter::OFF)
        .with_target("aws_smithy_runtime", LevelFilter::OFF)
        .with_target("qdrant_edge", LevelFilter::OFF)
}

struct MetadataExtractor<'a>(&'a http::HeaderMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// The remote parent context carried by request headers (W3C `traceparent`).
pub fn extract_context(headers: &http::HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&MetadataExtractor(headers))
}

/// Writes the current span's context into outgoing metadata.
pub fn inject_current(metadata: &mut MetadataMap) {
    let context = Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut MetadataInjector(metadata));
}

/// The Thinkus service a gRPC service belongs to ("thinkus.retriever.v1.RetrieverService" ->
/// "retriever"), so that spans name their service even when several run in one process.
pub fn thinkus_service(grpc_service: &str) -> &'static str {
    match grpc_service.split('.').nth(1) {
        Some("controller") => "memory-controller",
        Some("retriever") => "retriever",
        Some("knowledge") => "knowledge-manager",
        Some("artifact") => "artifact",
        Some("summary") => "summary",
        Some("gateway") => "gateway",
        _ => "other",
    }
}

/// The W3C `traceparent` of the current span, to carry a trace through a queue.
pub fn current_traceparent() -> Option<String> {
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&Span::current().context(), &mut carrier);
    carrier.remove("traceparent")
}

/// Makes `span` a child of the trace a queued job carried (see [`current_traceparent`]).
pub fn continue_trace(span: &Span, traceparent: Option<&str>) {
    if let Some(parent) = traceparent {
        let carrier: std::collections::HashMap<String, String> =
            [("traceparent".to_string(), parent.to_string())].into_iter().collect();
        let _ = span.set_parent(TraceContextPropagator::new().extract(&carrier));
    }
}

/// The span of one incoming gRPC request, child of the caller's span when the request carries
/// a trace context. Used as tonic's `trace_fn`.
pub fn server_span(request: &http::Request<()>) -> Span {
    let path = request.uri().path();
    let (service, method) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or(("unknown", path));
    let span = tracing::info_span!(
        "grpc.server",
        otel.name = %path.trim_start_matches('/'),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = %service,
        rpc.method = %method,
        thinkus.service = thinkus_service(service),
        otel.status_code = tracing::field::Empty,
    );
    let _ = span.set_parent(extract_context(request.headers()));
    span
}

/// A client interceptor that injects the current trace context, the time left before the
/// current task's deadline, and the credential to present (the caller's forwarded key, else
/// this process's own key).
#[derive(Debug, Clone, Default)]
pub struct TraceContextInterceptor {
    own_key: Option<String>,
}

impl TraceContextInterceptor {
    pub fn new(own_key: Option<String>) -> Self {
        Self { own_key }
    }
}

impl Interceptor for TraceContextInterceptor {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        inject_current(request.metadata_mut());
        if let Some(remaining) = crate::deadline::remaining() {
            request.set_timeout(remaining);
        }
        let key = crate::auth::forwarded_credential().or_else(|| self.own_key.clone());
        if let Some(key) = key
            && !request.metadata().contains_key("authorization")
        {
            let value = MetadataValue::try_from(format!("Bearer {key}"))
                .map_err(|_| tonic::Status::invalid_argument("the API key is not valid header text"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields of every span opened under it, as text.
    #[derive(Clone, Default)]
    struct SpanFields(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

    impl tracing::field::Visit for SpanFields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0
                .lock()
                .unwrap()
                .push((field.name().to_string(), format!("{value:?}")));
        }

        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            self.0
                .lock()
                .unwrap()
                .push((field.name().to_string(), value.to_string()));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanFields {
        fn on_new_span(
            &self,
            attributes: &tracing::span::Attributes<'_>,
            _: &tracing::span::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            attributes.record(&mut self.clone());
        }
    }

    fn server_span_fields(path: &str) -> std::collections::HashMap<String, String> {
        use tracing_subscriber::layer::SubscriberExt;
        let fields = SpanFields::default();
        let subscriber = tracing_subscriber::registry().with(fields.clone());
        tracing::subscriber::with_default(subscriber, || {
            let request = http::Request::builder().uri(path).body(()).unwrap();
            let span = server_span(&request);
            assert_eq!(span.metadata().map(|m| m.name()), Some("grpc.server"));
        });
        let fields = fields.0.lock().unwrap();
        fields.iter().cloned().collect()
    }

    #[test]
    fn server_span_reads_the_path() {
        let fields = server_span_fields("/thinkus.retriever.v1.RetrieverService/Recall");
        assert_eq!(fields["otel.name"], "thinkus.retriever.v1.RetrieverService/Recall");
        assert_eq!(fields["otel.kind"], "server");
        assert_eq!(fields["rpc.system"], "grpc");
        assert_eq!(fields["rpc.service"], "thinkus.retriever.v1.RetrieverService");
        assert_eq!(fields["rpc.method"], "Recall");
        assert_eq!(fields["thinkus.service"], "retriever");
        // A path that is not /service/method keeps the whole path as the method.
        let fields = server_span_fields("/healthz");
        assert_eq!(fields["rpc.service"], "unknown");
        assert_eq!(fields["rpc.method"], "/healthz");
        assert_eq!(fields["thinkus.service"], "other");
    }

    #[test]
    fn trace_context_round_trips_through_metadata() {
        use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
        let span_context = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let context = Context::new().with_remote_span_context(span_context);
        let mut metadata = MetadataMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut MetadataInjector(&mut metadata));
        let headers = metadata.into_headers();
        assert_eq!(
            headers.get("traceparent").unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let extracted = extract_context(&headers);
        assert_eq!(
            extracted.span().span_context().trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
    }
}
