//! OpenTelemetry traces: the exporter (OTLP, batched and bounded), the W3C trace context of
//! calls in and out, and the spans every layer opens. Only spans whose target is
//! [`SPAN_TARGET`] leave the process, and never an event: span fields are ids, names, counts and
//! codes, so nothing exported can carry message content, whatever a log line says.

use opentelemetry::{
    Context, KeyValue,
    propagation::{Extractor, Injector, TextMapPropagator as _},
    trace::{SpanContext, TraceContextExt as _, TracerProvider as _},
};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::{
    Resource, propagation::TraceContextPropagator, resource::EnvResourceDetector, trace::SdkTracerProvider,
};
use tonic::codegen::http::{HeaderMap, HeaderName, HeaderValue};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of the spans that are exported; every other span and every event stays local.
pub const SPAN_TARGET: &str = "ctxd::otel";

/// The service name when OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name none.
const DEFAULT_SERVICE_NAME: &str = "ctxd";

/// How long the last spans may take to leave at shutdown.
const SHUTDOWN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the trace exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the OTLP trace exporter")]
pub struct ExporterError {
    #[source]
    source: opentelemetry_otlp::ExporterBuildError,
}

pub use opentelemetry_sdk::trace::Sampler;

/// Where spans go and which are kept.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The collector's URL, as the exporter takes it (with `/v1/traces` for HTTP).
    pub endpoint: String,
    /// OTLP over gRPC; else protobuf over HTTP.
    pub grpc: bool,
    /// Which traces are kept.
    pub sampler: Sampler,
    /// The service name, when configured.
    pub service_name: Option<String>,
}

/// The running exporter; [`Exporter::shutdown`] sends what is queued.
#[derive(Debug, Clone)]
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Builds the exporter for `export`, with the service's resource (OTEL_SERVICE_NAME,
    /// OTEL_RESOURCE_ATTRIBUTES). Spans are queued (OTEL_BSP_MAX_QUEUE_SIZE, 2,048 by default)
    /// and sent in batches by a thread of their own: a slow or dead collector drops spans, it
    /// never holds a call or grows memory. Must run inside the Tokio runtime (gRPC export).
    pub fn start(export: ExportOptions) -> Result<Self, ExporterError> {
        // An https collector needs the process-wide TLS provider; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let builder = opentelemetry_otlp::SpanExporter::builder();
        let exporter = match export.grpc {
            true => builder.with_tonic().with_endpoint(&export.endpoint).build(),
            false => builder
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(&export.endpoint)
                .build(),
        }
        .map_err(|source| ExporterError { source })?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(export.sampler)
            .with_resource(resource(export.service_name.as_deref()))
            .build();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        Ok(Self { provider })
    }

    /// The tracer spans are exported with.
    pub fn tracer(&self) -> opentelemetry_sdk::trace::Tracer {
        self.provider.tracer("ctxd")
    }

    /// Sends the queued spans (waiting at most a few seconds) and stops the export thread.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_PATIENCE));
        if let Ok(Err(error)) = flushed.await {
            tracing::warn!(%error, "traces not all sent at shutdown");
        }
    }
}

/// The resource: the SDK's and OTEL_RESOURCE_ATTRIBUTES, named by OTEL_SERVICE_NAME, else by
/// a `service.name` in the attributes, else `ctxd`.
fn resource(service_name: Option<&str>) -> Resource {
    let key = opentelemetry::Key::from_static_str("service.name");
    let from_env = Resource::builder_empty()
        .with_detector(Box::new(EnvResourceDetector::new()))
        .build();
    let name = match (service_name, from_env.get(&key)) {
        (Some(name), _) => Some(name.to_owned()),
        (None, Some(_)) => None,
        (None, None) => Some(DEFAULT_SERVICE_NAME.to_owned()),
    };
    let builder = Resource::builder();
    match name {
        Some(name) => builder.with_service_name(name).build(),
        None => builder.build(),
    }
}

/// The trace context a call came with (W3C `traceparent` and `tracestate`, in gRPC metadata or
/// HTTP headers alike); empty when it has none.
pub fn remote_parent(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Headers(headers))
}

/// Writes the current span's trace context into an outgoing request's headers, so the
/// embeddings or summarizer endpoint continues the trace.
pub fn inject_current(headers: &mut HeaderMap) {
    // The OpenTelemetry context, not the tracing span's: the innermost *exported* span is
    // the parent (entering one makes it current; spans that stay local do not).
    let context = Context::current();
    TraceContextPropagator::new().inject_context(&context, &mut HeadersMut(headers));
}

/// `work`, to be spawned, carrying the current span and trace context: what it does is part
/// of the calling span's trace, on whichever worker it runs.
pub fn carried<F: std::future::Future>(work: F) -> impl std::future::Future<Output = F::Output> {
    use opentelemetry::trace::FutureExt as _;
    use tracing::Instrument as _;
    work.instrument(Span::current()).with_context(Context::current())
}

/// The current span's context, for background work queued by this call to link to; `None`
/// when the call is not traced.
pub fn current_link() -> Option<SpanContext> {
    let context = Context::current();
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| span_context.clone())
}

/// Links a background span (created with `parent: None`) to the call that queued it, when that
/// call was traced.
pub fn linked(span: Span, queued_by: Option<SpanContext>) -> Span {
    if let Some(link) = queued_by {
        span.add_link(link);
    }
    span
}

/// Records the `server.address` and `server.port` of the endpoint at `base_url` on `span`.
pub fn record_server(span: &Span, base_url: &str) {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return;
    };
    if let Some(host) = url.host_str() {
        span.record("server.address", host);
    }
    if let Some(port) = url.port_or_known_default() {
        span.record("server.port", i64::from(port));
    }
}

/// Records an attribute on `span` without declaring it as a field (counts and names only).
pub fn attribute(span: &Span, key: &'static str, value: impl Into<opentelemetry::Value>) {
    if !span.is_disabled() {
        span.set_attribute(key, value);
    }
}

/// Records several attributes on `span`; `values` is not built when the span is not exported.
pub fn attributes<I: IntoIterator<Item = KeyValue>>(span: &Span, values: impl FnOnce() -> I) {
    if span.is_disabled() {
        return;
    }
    for KeyValue { key, value, .. } in values() {
        span.set_attribute(key, value);
    }
}

/// A client span for one store call: its statements, named by their main operation and table
/// (the database conventions' `{operation} {table}`), never their values.
pub fn db(operation: &'static str, table: &'static str) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "db",
        otel.name = %format_args!("{operation} {table}"),
        otel.kind = "client",
        db.system.name = "postgresql",
        db.operation.name = operation,
        db.collection.name = table,
    )
}

/// Reads W3C headers from a request.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Writes W3C headers into a request.
struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            self.0.insert(name, value);
        }
    }
}
