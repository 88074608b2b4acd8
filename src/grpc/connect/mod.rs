//! HTTP and JSON on the gRPC port (docs/operations.md, "Protocols"): the Connect protocol's
//! unary calls (`POST /ctxd.v1.ContextService/<Method>` with `application/json` or
//! `application/proto`), gRPC-Web (tonic's own layer, next inside), and `GET /healthz` for load
//! balancers that cannot speak gRPC.
//!
//! A Connect call is transcoded into the gRPC call it stands for and sent down the same stack
//! as every gRPC call (metrics, request id, deadline, request body accounting, tenancy, the
//! handlers), so auth, limits, deadlines and logs are one pipeline; its answer, trailers and
//! all, is transcoded back: the message in the request's encoding, or Connect's error JSON
//! with the same BadRequest / ErrorInfo details and the HTTP status the protocol gives the
//! code. The outermost layer, so it also sees what the layers inside refuse.

mod codec;

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use prost_reflect::MethodDescriptor;
use tonic::{
    Code, Status,
    codegen::http::{self, HeaderMap, HeaderValue, Method, Request, Response, header},
};
use tower::{Layer, Service};

use super::TenantInterceptor;
use crate::response_budget::{Reservation, ResponseBudget};
use codec::Encoding;

/// How a call reached the server, as metrics label it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// gRPC over HTTP/2.
    Grpc,
    /// gRPC-Web (browsers).
    GrpcWeb,
    /// Connect's unary protocol (JSON or binary).
    Connect,
}

impl Protocol {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::GrpcWeb => "grpc_web",
            Protocol::Connect => "connect",
        }
    }
}

/// The health check path for load balancers (`GET`, 200 when serving, else 503).
const HEALTHZ: &str = "/healthz";

/// Serves Connect and the health path, and labels every call with its [`Protocol`].
#[derive(Debug, Clone)]
pub struct ProtocolLayer {
    budget: ResponseBudget,
    tenants: TenantInterceptor,
    max_request_bytes: usize,
    request_timeout: Duration,
}

impl ProtocolLayer {
    /// Connect bodies up to `max_request_bytes` are read within `request_timeout` (or the call's
    /// `Connect-Timeout-Ms`) into memory taken from `budget`, in the share of the tenant
    /// `tenants` resolves.
    pub fn new(
        budget: ResponseBudget,
        tenants: TenantInterceptor,
        max_request_bytes: usize,
        request_timeout: Duration,
    ) -> Self {
        Self {
            budget,
            tenants,
            max_request_bytes,
            request_timeout,
        }
    }
}

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
                    connect(inner, &layer, request, &method, encoding).await?
                }
                Route::Health => health(inner, &layer, request).await?,
                Route::Refused(status, message) => {
                    error_response(status, Code::InvalidArgument, message, &[])
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
    /// `GET /healthz`.
    Health,
    /// A Connect path called in a way the protocol does not allow.
    Refused(u16, String),
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
    if path == HEALTHZ && request.method() == Method::GET {
        return Route::Health;
    }
    let encoding = match content_type.as_str() {
        "application/json" => Some(Encoding::Json),
        "application/proto" => Some(Encoding::Proto),
        _ => None,
    };
    let method = codec::method(path);
    match (method, encoding) {
        (Some(_), _) if request.method() != Method::POST => Route::Refused(
            405,
            format!("{path} takes POST (Connect unary), not {}", request.method()),
        ),
        (Some(method), Some(encoding)) => Route::Connect(method, encoding),
        (Some(_), None) => Route::Refused(
            415,
            format!(
                "Content-Type `{content_type}` is not served: use application/json or application/proto \
                 (Connect), application/grpc, or application/grpc-web"
            ),
        ),
        (None, Some(_)) => Route::Refused(404, format!("no RPC at {path}")),
        (None, None) => Route::Pass(Protocol::Grpc),
    }
}

/// A Connect unary call, as the gRPC call it stands for.
async fn connect<S>(
    mut inner: S,
    layer: &ProtocolLayer,
    request: Request<tonic::body::Body>,
    method: &MethodDescriptor,
    encoding: Encoding,
) -> Result<Response<tonic::body::Body>, S::Error>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
{
    let (parts, body) = request.into_parts();
    let timeout = match timeout_of(&parts.headers) {
        Ok(timeout) => timeout,
        Err(message) => return Ok(connect_error(Code::InvalidArgument, &message, &[])),
    };
    if let Some(refusal) = unsupported(&parts.headers) {
        return Ok(connect_error(Code::Unimplemented, &refusal, &[]));
    }
    let tenant = layer.tenants.tenant_for(&parts.headers);
    let tenant = tenant.as_ref().map_or("", |t| t.as_str());
    let mut reservation = layer
        .budget
        .reserve_up_to(layer.max_request_bytes.saturating_mul(2))
        .of_tenant(tenant);
    let wait = timeout
        .unwrap_or(layer.request_timeout)
        .min(layer.request_timeout);
    let body = match read_body(body, layer.max_request_bytes, &mut reservation, wait).await {
        Ok(body) => body,
        Err((code, message)) => return Ok(connect_error(code, &message, &[])),
    };
    let message = match codec::request_bytes(method, encoding, &body) {
        Ok(message) => message,
        Err(message) => return Ok(connect_error(Code::InvalidArgument, &message, &[])),
    };
    drop((body, reservation));
    let grpc = grpc_request(parts, message, timeout);
    let response = inner.call(grpc).await?;
    Ok(connect_response(response, method, encoding, layer.request_timeout).await)
}

/// `Connect-Timeout-Ms` (at most 10 digits), if given.
fn timeout_of(headers: &HeaderMap) -> Result<Option<Duration>, String> {
    let Some(value) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default();
    match text.parse::<u64>() {
        Ok(ms) if !text.is_empty() && text.len() <= 10 => Ok(Some(Duration::from_millis(ms))),
        _ => Err(format!("Connect-Timeout-Ms `{text}` is not 1 to 10 digits")),
    }
}

/// Why the request's headers ask for what is not served: compression, another protocol version.
fn unsupported(headers: &HeaderMap) -> Option<String> {
    let compressed = ["content-encoding", "connect-content-encoding"]
        .iter()
        .filter_map(|name| headers.get(*name))
        .any(|v| v.as_bytes() != b"identity");
    if compressed {
        return Some("compressed request bodies are not served: send them uncompressed (identity)".into());
    }
    match headers.get("connect-protocol-version").map(HeaderValue::as_bytes) {
        Some(b"1") | None => None,
        Some(_) => Some("Connect-Protocol-Version must be 1".into()),
    }
}

/// The request body, whole, within `max` bytes (RESOURCE_EXHAUSTED past it, or past the memory
/// `reservation` may take) and `wait` (DEADLINE_EXCEEDED: a body sent slowly or never ended).
async fn read_body(
    body: tonic::body::Body,
    max: usize,
    reservation: &mut Reservation,
    wait: Duration,
) -> Result<Vec<u8>, (Code, String)> {
    let read = async {
        let mut body = std::pin::pin!(body);
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|status| {
                (
                    Code::InvalidArgument,
                    format!("reading the body: {}", status.message()),
                )
            })?;
            let Ok(data) = frame.into_data() else { continue };
            if out.len() + data.len() > max {
                return Err((
                    Code::ResourceExhausted,
                    format!("the request body is over the {max}-byte limit"),
                ));
            }
            reservation
                .grow(data.len())
                .map_err(|refusal| (Code::ResourceExhausted, refusal.to_string()))?;
            out.extend_from_slice(&data);
        }
        Ok(out)
    };
    tokio::time::timeout(wait, read).await.unwrap_or_else(|_| {
        Err((
            Code::DeadlineExceeded,
            format!("the request body did not arrive within {} ms", wait.as_millis()),
        ))
    })
}

/// The gRPC request a Connect call stands for: its headers (auth, tenant, request id) and
/// extensions (the connection's peer and TLS certificates) kept, its message framed.
fn grpc_request(
    mut parts: http::request::Parts,
    message: Vec<u8>,
    timeout: Option<Duration>,
) -> Request<tonic::body::Body> {
    let length = u32::try_from(message.len()).unwrap_or(u32::MAX);
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0);
    framed.extend_from_slice(&length.to_be_bytes());
    framed.extend_from_slice(&message);
    let headers = &mut parts.headers;
    for name in [
        "content-length",
        "content-encoding",
        "accept-encoding",
        "connect-protocol-version",
        "connect-timeout-ms",
    ] {
        headers.remove(name);
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Some(timeout) = timeout
        && let Ok(value) = HeaderValue::from_str(&format!("{}m", timeout.as_millis().min(99_999_999)))
    {
        headers.insert("grpc-timeout", value);
    }
    parts.method = Method::POST;
    parts.version = http::Version::HTTP_2;
    parts.extensions.insert(Protocol::Connect);
    Request::from_parts(parts, tonic::body::Body::new(Full::new(Bytes::from(framed))))
}

/// The gRPC answer as Connect's: the message in `encoding`, or the error JSON.
async fn connect_response(
    response: Response<tonic::body::Body>,
    method: &MethodDescriptor,
    encoding: Encoding,
    read_timeout: Duration,
) -> Response<tonic::body::Body> {
    let (parts, body) = response.into_parts();
    if let Some(status) = Status::from_header_map(&parts.headers) {
        // Trailers-only: the call ended before a message.
        return status_response(&status);
    }
    let collected = match tokio::time::timeout(read_timeout, body.collect()).await {
        Ok(Ok(collected)) => collected,
        Ok(Err(status)) => return status_response(&status),
        Err(_) => return connect_error(Code::DeadlineExceeded, "the answer was not produced in time", &[]),
    };
    let status = collected.trailers().and_then(Status::from_header_map);
    match status {
        Some(status) if status.code() == Code::Ok => {}
        Some(status) => return status_response(&status),
        None => return connect_error(Code::Internal, "the call ended without a status", &[]),
    }
    let data = collected.to_bytes();
    let message = data.get(5..).unwrap_or_default();
    let body = match codec::response_body(method, encoding, message) {
        Ok(body) => body,
        Err(e) => return connect_error(Code::Internal, &format!("encoding the answer: {e}"), &[]),
    };
    let mut response = Response::new(tonic::body::Body::new(Full::new(Bytes::from(body))));
    for (name, value) in parts
        .headers
        .iter()
        .filter(|(name, _)| !name.as_str().starts_with("grpc-"))
    {
        if name != header::CONTENT_TYPE {
            response.headers_mut().append(name.clone(), value.clone());
        }
    }
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    response
}

fn status_response(status: &Status) -> Response<tonic::body::Body> {
    connect_error(status.code(), status.message(), status.details())
}

/// Connect's error answer for `code`.
fn connect_error(code: Code, message: &str, details: &[u8]) -> Response<tonic::body::Body> {
    error_response(codec::http_status(code), code, message.to_owned(), details)
}

fn error_response(
    http_status: u16,
    code: Code,
    message: String,
    details: &[u8],
) -> Response<tonic::body::Body> {
    let body = codec::error_json(code, &message, details);
    let mut response = Response::new(tonic::body::Body::new(Full::new(Bytes::from(body))));
    *response.status_mut() =
        http::StatusCode::from_u16(http_status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if http_status == 405 {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    response
}

/// `GET /healthz`: the health service's answer for the whole server, 200 when it is serving,
/// 503 otherwise, with the same JSON body as `grpc.health.v1.Health/Check` over Connect.
async fn health<S>(
    inner: S,
    layer: &ProtocolLayer,
    request: Request<tonic::body::Body>,
) -> Result<Response<tonic::body::Body>, S::Error>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
{
    let method = codec::method("/grpc.health.v1.Health/Check").expect("health is served");
    let (mut parts, _) = request.into_parts();
    parts.uri = http::Uri::from_static("/grpc.health.v1.Health/Check");
    parts.method = Method::POST;
    let request = Request::from_parts(
        parts,
        tonic::body::Body::new(Full::new(Bytes::from_static(b"{}"))),
    );
    let response = connect(inner, layer, request, &method, Encoding::Json).await?;
    let (mut parts, body) = response.into_parts();
    let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let serving = parts.status == http::StatusCode::OK && bytes.as_ref() == br#"{"status":"SERVING"}"#;
    if !serving && parts.status == http::StatusCode::OK {
        parts.status = http::StatusCode::SERVICE_UNAVAILABLE;
    }
    Ok(Response::from_parts(
        parts,
        tonic::body::Body::new(Full::new(bytes)),
    ))
}
