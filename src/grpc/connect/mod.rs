//! HTTP and JSON on the gRPC port (docs/operations.md, "Protocols"): the Connect protocol's
//! unary calls (`POST /ctxd.v1.ContextService/<Method>` with `application/json` or
//! `application/proto`) and server streaming (WatchChanges, `application/connect+json` or
//! `+proto`, in [`stream`]), gRPC-Web (tonic's own layer, next inside), and `GET /healthz` for load
//! balancers that cannot speak gRPC, and the Inspector's page at `/inspect` when it is on.
//!
//! A Connect call is transcoded into the gRPC call it stands for and sent down the same stack
//! as every gRPC call (metrics, request id, deadline, request body accounting, tenancy, the
//! handlers), so auth, limits, deadlines and logs are one pipeline; its answer, trailers and
//! all, is transcoded back: the message in the request's encoding, or Connect's error JSON
//! with the same BadRequest / ErrorInfo details and the HTTP status the protocol gives the
//! code. The outermost layer, so it also sees what the layers inside refuse.

mod answer;
mod call;
mod codec;
mod inspector;
mod layer;
mod stream;

pub use layer::{Protocol, ProtocolLayer};

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use prost_reflect::MethodDescriptor;
use tonic::{
    Code,
    codegen::http::{self, HeaderMap, Method, Request, Response, header},
};
use tower::{Layer, Service};

use answer::Accounting;
use codec::Encoding;

/// The health check path for load balancers (`GET`, 200 when serving, else 503).
const HEALTHZ: &str = "/healthz";

impl<S> Layer<S> for ProtocolLayer {
    type Service = ProtocolService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ProtocolService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`ProtocolLayer`] wraps around the server.
#[derive(Debug, Clone)]
pub struct ProtocolService<S> {
    inner: S,
    layer: ProtocolLayer,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<Request<tonic::body::Body>> for ProtocolService<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<tonic::body::Body>) -> Self::Future {
        let route = route(&request);
        if let Route::Pass(protocol) = route {
            request.extensions_mut().insert(protocol);
            return Box::pin(self.inner.call(request));
        }
        // The clone that was made ready goes with the call (tower's usual swap).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            Ok(match route {
                Route::Pass(_) => unreachable!("passed on above"),
                Route::Connect(method, encoding) => {
                    call::connect(inner, &layer, request, &method, encoding, Accounting::Counted).await?
                }
                Route::ConnectStream(method, encoding) => {
                    stream::connect(inner, &layer, request, &method, encoding).await?
                }
                Route::Health => health(inner, &layer, request).await?,
                Route::Inspector => {
                    inspector::answer(request.method(), request.uri().path(), layer.inspector)
                }
                Route::Refused(status, code, message) => {
                    tracing::info!(http_status = status, code = ?code, "request refused before any RPC");
                    answer::error_response(status, code, &message, &[], &HeaderMap::new())
                }
            })
        })
    }
}

/// What a request is.
enum Route {
    /// gRPC or gRPC-Web, or nothing ctxd serves over Connect: on to the layers inside.
    Pass(Protocol),
    /// A Connect unary call.
    Connect(MethodDescriptor, Encoding),
    /// A Connect server-streaming call.
    ConnectStream(MethodDescriptor, Encoding),
    /// `GET /healthz`.
    Health,
    /// The Inspector's files (`/inspect`, served or not).
    Inspector,
    /// A Connect path called in a way the protocol does not allow.
    Refused(u16, Code, String),
}

fn route(request: &Request<tonic::body::Body>) -> Route {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    if content_type.starts_with("application/grpc-web") {
        return Route::Pass(Protocol::GrpcWeb);
    }
    if content_type.starts_with("application/grpc") {
        return Route::Pass(Protocol::Grpc);
    }
    let path = request.uri().path();
    if path == HEALTHZ && (request.method() == Method::GET || request.method() == Method::HEAD) {
        return Route::Health;
    }
    if inspector::is_inspector(path) {
        return Route::Inspector;
    }
    let encoding = match content_type.as_str() {
        "application/json" => Some(Encoding::Json),
        "application/proto" => Some(Encoding::Proto),
        _ => None,
    };
    if let Some(method) = codec::streaming_method(path) {
        return match (stream::encoding(&content_type), request.method() == Method::POST) {
            (Some(encoding), true) => Route::ConnectStream(method, encoding),
            (_, false) => Route::Refused(
                405,
                Code::Unimplemented,
                format!("{path} takes POST (Connect streaming), not {}", request.method()),
            ),
            (None, true) => Route::Refused(
                415,
                Code::InvalidArgument,
                format!(
                    "{path} is server streaming: send application/connect+json or application/connect+proto \
                     (Connect streaming), application/grpc, or application/grpc-web"
                ),
            ),
        };
    }
    let method = codec::method(path);
    match (method, encoding) {
        (Some(_), _) if request.method() != Method::POST => Route::Refused(
            405,
            Code::Unimplemented,
            format!("{path} takes POST (Connect unary), not {}", request.method()),
        ),
        (Some(method), Some(encoding)) => Route::Connect(method, encoding),
        (Some(_), None) => Route::Refused(
            415,
            Code::InvalidArgument,
            format!(
                "Content-Type `{content_type}` is not served: use application/json or application/proto \
                 (Connect), application/grpc, or application/grpc-web"
            ),
        ),
        (None, Some(_)) => Route::Refused(404, Code::Unimplemented, format!("no RPC at {path}")),
        (None, None) => Route::Pass(Protocol::Grpc),
    }
}

/// `GET /healthz` (and `HEAD`): the health service's answer for the whole server, 200 when it
/// is serving, 503 otherwise, with the same JSON body as `grpc.health.v1.Health/Check` over
/// Connect. Its memory is not taken from the budget: a replica under load still answers it.
async fn health<S>(
    inner: S,
    layer: &ProtocolLayer,
    request: Request<tonic::body::Body>,
) -> Result<Response<tonic::body::Body>, S::Error>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
{
    let method = codec::method("/grpc.health.v1.Health/Check").expect("health is served");
    let head = request.method() == Method::HEAD;
    let (mut parts, _) = request.into_parts();
    parts.uri = http::Uri::from_static("/grpc.health.v1.Health/Check");
    parts.method = Method::POST;
    parts.headers.remove(header::CONTENT_TYPE);
    let request = Request::from_parts(
        parts,
        tonic::body::Body::new(Full::new(Bytes::from_static(b"{}"))),
    );
    let response = call::connect(inner, layer, request, &method, Encoding::Json, Accounting::Exempt).await?;
    let (mut parts, body) = response.into_parts();
    let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let serving = parts.status == http::StatusCode::OK && bytes.as_ref() == br#"{"status":"SERVING"}"#;
    if !serving && parts.status == http::StatusCode::OK {
        parts.status = http::StatusCode::SERVICE_UNAVAILABLE;
    }
    let bytes = if head { Bytes::new() } else { bytes };
    Ok(Response::from_parts(
        parts,
        tonic::body::Body::new(Full::new(bytes)),
    ))
}
