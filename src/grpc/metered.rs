//! Counts every finished `ContextService` call by method and gRPC code, wherever it ended: in a
//! handler, in the tenant interceptor, at the decoding limit or at the deadline. It is the
//! outermost layer, so a call is observed once, when its status is known: from the response
//! headers for an error (gRPC "trailers-only"), else from the body's trailers; a response the
//! client stops reading counts as CANCELLED. The body also keeps the response's memory
//! reservation (see [`crate::runtime::response_budget`]), so it is freed when the body is, sent or not,
//! or when the client has not read it in time ([`super::unread`]).

use crate::runtime::response_budget::Reservation;
use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use opentelemetry::trace::TraceContextExt as _;
use tonic::codegen::http::{HeaderMap, Request, Response};
use tower::{Layer, Service};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::{METHODS, code_name, connect::Protocol, unread::ReadInTime};
use crate::{runtime::traces, service::metrics::ServerMetrics};

/// The gRPC service whose calls are counted.
const SERVICE_PREFIX: &str = "/ctxd.v1.ContextService/";

/// Observes every `ContextService` call in its server's `ctxd_rpc_duration_seconds`.
#[derive(Debug, Clone)]
pub struct MeteredLayer {
    metrics: ServerMetrics,
    read_timeout: Duration,
}

impl MeteredLayer {
    /// Counts calls in `metrics`, the server's own; a response holding memory must be read
    /// within `read_timeout`.
    pub fn new(metrics: ServerMetrics, read_timeout: Duration) -> Self {
        Self {
            metrics,
            read_timeout,
        }
    }
}

impl<S> Layer<S> for MeteredLayer {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metered {
            inner,
            metrics: self.metrics.clone(),
            read_timeout: self.read_timeout,
        }
    }
}

/// The service [`MeteredLayer`] wraps around the server.
#[derive(Debug, Clone)]
pub struct Metered<S> {
    inner: S,
    metrics: ServerMetrics,
    read_timeout: Duration,
}

impl<S, B> Service<Request<B>> for Metered<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let protocol = request
            .extensions()
            .get::<Protocol>()
            .copied()
            .unwrap_or(Protocol::Grpc);
        let method = request
            .uri()
            .path()
            .strip_prefix(SERVICE_PREFIX)
            .and_then(known_method);
        let Some(method) = method else {
            return Box::pin(self.inner.call(request));
        };
        let span = server_span(&request, method);
        let future = {
            let _entered = span.enter();
            self.inner.call(request)
        }
        .instrument(span.clone());
        let read_timeout = self.read_timeout;
        let call = Call {
            method,
            protocol,
            started: Instant::now(),
            metrics: self.metrics.clone(),
            span,
        };
        call.span.record("ctxd.protocol", protocol.label());
        Box::pin(async move {
            let mut response = future.await?;
            if let Some(code) = status_code(response.headers()) {
                call.finish(code);
                return Ok(response);
            }
            let held = response.extensions_mut().remove::<std::sync::Arc<Reservation>>();
            Ok(response.map(|body| {
                let inner = match held {
                    Some(held) => tonic::body::Body::new(ReadInTime::new(body, held, read_timeout)),
                    None => body,
                };
                tonic::body::Body::new(MeteredBody {
                    inner,
                    call: Some(call),
                })
            }))
        })
    }
}

/// Label values are fixed strings, never the caller's path: an unknown method is not counted
/// (tonic answers it UNIMPLEMENTED).
fn known_method(name: &str) -> Option<&'static str> {
    METHODS.iter().copied().find(|m| *m == name)
}

/// One call being measured.
#[derive(Debug)]
struct Call {
    method: &'static str,
    protocol: Protocol,
    started: Instant,
    metrics: ServerMetrics,
    /// The call's span, kept open until its status is known.
    span: tracing::Span,
}

impl Call {
    fn finish(self, code: tonic::Code) {
        self.span.record("rpc.grpc.status_code", code as i32);
        if server_error(code) {
            self.span.record("otel.status_code", "ERROR");
        }
        self.metrics.observe_rpc(
            self.method,
            code_name(code),
            self.protocol.label(),
            self.started.elapsed(),
        );
    }
}

/// The exported span of one call, whatever its protocol: a server span after the RPC
/// conventions, continuing the caller's trace (W3C `traceparent`, from gRPC metadata or HTTP
/// headers alike). It lasts until the call's status is known (the body's trailers); the
/// interceptor records its tenant.
fn server_span<B>(request: &Request<B>, method: &'static str) -> tracing::Span {
    let span = tracing::info_span!(
        target: traces::SPAN_TARGET,
        "rpc",
        otel.name = %format_args!("ctxd.v1.ContextService/{method}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        rpc.system = "grpc",
        rpc.service = "ctxd.v1.ContextService",
        rpc.method = method,
        rpc.grpc.status_code = tracing::field::Empty,
        ctxd.tenant = tracing::field::Empty,
        ctxd.protocol = tracing::field::Empty,
    );
    if span.is_disabled() {
        // Traces off: no caller context to read.
        return span;
    }
    let parent = traces::remote_parent(request.headers());
    if parent.has_active_span() {
        let _ = span.set_parent(parent);
    }
    span
}

/// Whether `code` is the server's failure (the RPC conventions' error codes for a server span),
/// not the caller's.
fn server_error(code: tonic::Code) -> bool {
    use tonic::Code::*;
    matches!(
        code,
        Unknown | DeadlineExceeded | Unimplemented | Internal | Unavailable | DataLoss
    )
}

/// The `grpc-status` in `headers`, if any.
fn status_code(headers: &HeaderMap) -> Option<tonic::Code> {
    let value = headers.get("grpc-status")?;
    let code = value.to_str().ok()?.parse::<i32>().ok()?;
    Some(tonic::Code::from_i32(code))
}

/// A response body that reports its call when the trailers pass (or the body is dropped).
#[derive(Debug)]
struct MeteredBody {
    inner: tonic::body::Body,
    call: Option<Call>,
}

impl Body for MeteredBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let code = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame
                .trailers_ref()
                .map(|t| status_code(t).unwrap_or(tonic::Code::Unknown)),
            Poll::Ready(Some(Err(status))) => Some(status.code()),
            Poll::Ready(None) => Some(tonic::Code::Unknown),
            Poll::Pending => None,
        };
        if let Some(code) = code
            && let Some(call) = self.call.take()
        {
            call.finish(code);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for MeteredBody {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            call.finish(tonic::Code::Cancelled);
        }
    }
}
