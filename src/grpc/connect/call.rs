//! A Connect unary call's request: its deadline, its body read within limits into memory
//! taken from the budget, and the gRPC request it stands for.

use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Body, Bytes};
use prost_reflect::MethodDescriptor;
use tonic::{
    Code,
    codegen::http::{self, HeaderMap, HeaderValue, Method, Request, Response, header},
};
use tower::Service;

use super::{
    answer::{self, Accounting},
    codec::{self, Encoding},
    layer::{Protocol, ProtocolLayer},
};
use crate::runtime::response_budget::Reservation;

/// A Connect unary call, as the gRPC call it stands for.
pub(super) async fn connect<S>(
    mut inner: S,
    layer: &ProtocolLayer,
    request: Request<tonic::body::Body>,
    method: &MethodDescriptor,
    encoding: Encoding,
    accounting: Accounting,
) -> Result<Response<tonic::body::Body>, S::Error>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
{
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let refuse = |code: Code, message: &str| Ok(answer::refused(layer, method, started, code, message));
    let deadline = match timeout_of(&parts.headers) {
        // A deadline of 0 has passed before the call began.
        Ok(Some(timeout)) if timeout.is_zero() => {
            return refuse(
                Code::DeadlineExceeded,
                "Connect-Timeout-Ms is 0: the deadline has passed",
            );
        }
        Ok(timeout) => timeout
            .unwrap_or(layer.request_timeout)
            .min(layer.request_timeout),
        Err(message) => return refuse(Code::InvalidArgument, &message),
    };
    let read = checked_body(layer, &parts.headers, body, accounting, deadline).await;
    let CheckedBody {
        tenant,
        body,
        reservation,
    } = match read {
        Ok(read) => read,
        Err((code, message)) => return refuse(code, &message),
    };
    let message = match codec::request_bytes(method, encoding, &body) {
        Ok(message) => message,
        Err(message) => return refuse(Code::InvalidArgument, &message),
    };
    drop((body, reservation));
    // What is left of the deadline once the body is in is the gRPC call's.
    let remaining = deadline.saturating_sub(started.elapsed());
    let response = inner.call(grpc_request(parts, message, remaining)).await?;
    let context = answer::Context {
        method,
        encoding,
        tenant: &tenant,
        accounting,
        remaining: deadline.saturating_sub(started.elapsed()),
    };
    Ok(answer::transcode(layer, response, context).await)
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
pub(super) fn unsupported(headers: &HeaderMap) -> Option<String> {
    let compressed = ["content-encoding", "connect-content-encoding"]
        .iter()
        .filter_map(|name| headers.get(*name))
        .any(|v| v.as_bytes() != b"identity");
    // HTTP/1.1 decodes `chunked` itself; any other transfer coding (`gzip, chunked`) would
    // leave the body encoded.
    let transfer_coded = headers.get_all("transfer-encoding").iter().any(|v| {
        v.to_str().map_or(true, |v| {
            v.split(',').map(str::trim).any(|coding| {
                !coding.eq_ignore_ascii_case("chunked") && !coding.eq_ignore_ascii_case("identity")
            })
        })
    });
    if transfer_coded {
        return Some("transfer codings other than chunked are not served: send the body uncompressed".into());
    }
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
/// A request's body, read after its headers were checked.
pub(super) struct CheckedBody {
    /// The tenant the headers name (empty for an exempt call that names none).
    pub(super) tenant: String,
    pub(super) body: Vec<u8>,
    /// The body's memory; drop it once the body is decoded.
    pub(super) reservation: Option<Reservation>,
}

/// The request's body, after the checks gRPC makes at a call's headers (a call the interceptor
/// will refuse is refused here, before its body is read), read within `wait` and counted in the
/// tenant's share of the replica's memory, which the reservation holds until the caller drops it.
pub(super) async fn checked_body(
    layer: &ProtocolLayer,
    headers: &HeaderMap,
    body: tonic::body::Body,
    accounting: Accounting,
    wait: Duration,
) -> Result<CheckedBody, (Code, String)> {
    if let Some(refusal) = unsupported(headers) {
        return Err((Code::Unimplemented, refusal));
    }
    let tenant = match (layer.tenants.check(headers), accounting) {
        (Ok(tenant), _) => tenant.as_str().to_owned(),
        (Err(status), Accounting::Counted) => return Err((status.code(), status.message().to_owned())),
        (Err(_), Accounting::Exempt) => String::new(),
    };
    let mut reservation = match accounting {
        Accounting::Counted => Some(
            layer
                .budget
                .reserve_up_to(layer.max_request_bytes.saturating_mul(2))
                .of_tenant(&tenant),
        ),
        Accounting::Exempt => None,
    };
    let body = read_body(body, layer.max_request_bytes, reservation.as_mut(), wait).await?;
    Ok(CheckedBody {
        tenant,
        body,
        reservation,
    })
}

async fn read_body(
    body: tonic::body::Body,
    max: usize,
    mut reservation: Option<&mut Reservation>,
    wait: Duration,
) -> Result<Vec<u8>, (Code, String)> {
    let read = async {
        let mut body = std::pin::pin!(body);
        let mut out = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
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
            if let Some(reservation) = reservation.as_deref_mut() {
                reservation
                    .grow(data.len())
                    .map_err(|refusal| (Code::ResourceExhausted, refusal.to_string()))?;
            }
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
/// extensions (the connection's peer and TLS certificates) kept, its message framed, its
/// deadline what is left of the call's.
pub(super) fn grpc_request(
    mut parts: http::request::Parts,
    message: Vec<u8>,
    remaining: Duration,
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
        "connection",
        "transfer-encoding",
    ] {
        headers.remove(name);
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Ok(value) = HeaderValue::from_str(&format!("{}m", remaining.as_millis().clamp(1, 99_999_999))) {
        headers.insert("grpc-timeout", value);
    }
    parts.method = Method::POST;
    parts.version = http::Version::HTTP_2;
    parts.extensions.insert(Protocol::Connect);
    Request::from_parts(parts, tonic::body::Body::new(Full::new(Bytes::from(framed))))
}
