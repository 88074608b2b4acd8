//! A Connect call's answer: the gRPC response transcoded into the request's encoding, in memory
//! taken from the budget and held until the client reads it (or its time is up, as for every
//! response), or Connect's error JSON with the same details and the HTTP status the protocol
//! gives the code.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use prost_reflect::MethodDescriptor;
use tonic::{
    Code, Status,
    codegen::http::{self, HeaderMap, HeaderValue, Response, header},
};

use super::{
    codec::{self, Encoding},
    layer::ProtocolLayer,
};
use crate::grpc::{METHODS, code_name, unread::ReadInTime};

/// How a call's memory is accounted: under the tenant its headers name, or not at all (the
/// health check, which must answer whatever the budget holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Accounting {
    /// Counted in the response budget.
    Counted,
    /// The health check's empty body and small answer.
    Exempt,
}

/// What the answer is transcoded for.
pub(super) struct Context<'a> {
    pub(super) method: &'a MethodDescriptor,
    pub(super) encoding: Encoding,
    pub(super) tenant: &'a str,
    pub(super) accounting: Accounting,
    /// What is left of the call's deadline for reading the gRPC answer.
    pub(super) remaining: Duration,
}

/// The gRPC answer as Connect's: the message in the request's encoding, or the error JSON.
pub(super) async fn transcode(
    layer: &ProtocolLayer,
    response: Response<tonic::body::Body>,
    context: Context<'_>,
) -> Response<tonic::body::Body> {
    let (parts, body) = response.into_parts();
    if let Some(status) = Status::from_header_map(&parts.headers) {
        // Trailers-only: the call ended before a message.
        return status_response(&status, &parts.headers);
    }
    let mut reservation = match context.accounting {
        Accounting::Counted => Some(layer.budget.reserve().of_tenant(context.tenant)),
        Accounting::Exempt => None,
    };
    let wait = context.remaining.max(Duration::from_millis(1));
    let collected = match tokio::time::timeout(wait, body.collect()).await {
        Ok(Ok(collected)) => collected,
        Ok(Err(status)) => return status_response(&status, &parts.headers),
        Err(_) => {
            return connect_error(
                Code::DeadlineExceeded,
                "the answer was not produced in time",
                &[],
                &parts.headers,
            );
        }
    };
    match collected.trailers().and_then(Status::from_header_map) {
        Some(status) if status.code() == Code::Ok => {}
        Some(status) => return status_response(&status, &parts.headers),
        None => {
            return connect_error(
                Code::Internal,
                "the call ended without a status",
                &[],
                &parts.headers,
            );
        }
    }
    let data = collected.to_bytes();
    // The collected message and its transcoding, counted like any response. JSON takes the
    // message decoded (about twice its bytes) and its text, which escaping makes up to six
    // times as long (a control character is `\u0001`): eight times in all; proto twice.
    let factor = match context.encoding {
        Encoding::Json => 8,
        Encoding::Proto => 2,
    };
    if let Some(reservation) = reservation.as_mut()
        && let Err(refusal) = reservation.grow(data.len().saturating_mul(factor))
    {
        let message = format!("{refusal}; ask for application/proto, which is smaller");
        return connect_error(Code::ResourceExhausted, &message, &[], &parts.headers);
    }
    let message = data.slice(5.min(data.len())..);
    let (method, encoding) = (context.method.clone(), context.encoding);
    let encoded = crate::service::offload(context.tenant, message.len(), move |_| {
        codec::response_body(&method, encoding, &message)
    })
    .await;
    let body = match encoded {
        Ok(body) => Bytes::from(body),
        Err(e) => {
            return connect_error(
                Code::Internal,
                &format!("encoding the answer: {e}"),
                &[],
                &parts.headers,
            );
        }
    };
    answered(layer, body, reservation, &parts.headers, encoding)
}

/// The successful answer: `body` holding its memory until read (or its time is up), the gRPC
/// response's other headers, the encoding's type.
fn answered(
    layer: &ProtocolLayer,
    body: Bytes,
    reservation: Option<crate::runtime::response_budget::Reservation>,
    headers: &HeaderMap,
    encoding: Encoding,
) -> Response<tonic::body::Body> {
    let body = tonic::body::Body::new(Full::new(body));
    let body = match reservation {
        Some(reservation) => {
            let held = std::sync::Arc::new(reservation);
            tonic::body::Body::new(ReadInTime::new(body, held, layer.request_timeout))
        }
        None => body,
    };
    let mut response = Response::new(body);
    copy_headers(headers, response.headers_mut());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    response
}

/// The response headers a Connect answer keeps (request id and the like), not gRPC's own.
fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from.iter() {
        let grpc = name.as_str().starts_with("grpc-");
        if !grpc && name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            to.append(name.clone(), value.clone());
        }
    }
}

fn status_response(status: &Status, headers: &HeaderMap) -> Response<tonic::body::Body> {
    connect_error(status.code(), status.message(), status.details(), headers)
}

/// A call refused by this layer before the gRPC stack saw it: logged (its code, never its
/// content) and counted in `ctxd_rpc_duration_seconds{protocol="connect"}` like any call.
pub(super) fn refused(
    layer: &ProtocolLayer,
    method: &MethodDescriptor,
    started: Instant,
    code: Code,
    message: &str,
) -> Response<tonic::body::Body> {
    tracing::info!(method = method.name(), code = ?code, "connect call refused before the gRPC call");
    if method.parent_service().full_name() == "ctxd.v1.ContextService"
        && let Some(name) = METHODS.iter().copied().find(|m| *m == method.name())
    {
        layer
            .metrics
            .observe_rpc(name, code_name(code), "connect", started.elapsed());
    }
    connect_error(code, message, &[], &HeaderMap::new())
}

/// Connect's error answer for `code`, keeping `headers`' non-gRPC ones (the request id).
pub(super) fn connect_error(
    code: Code,
    message: &str,
    details: &[u8],
    headers: &HeaderMap,
) -> Response<tonic::body::Body> {
    error_response(codec::http_status(code), code, message, details, headers)
}

/// An error answer with an explicit HTTP status (405, 415 for what precedes a call).
pub(super) fn error_response(
    http_status: u16,
    code: Code,
    message: &str,
    details: &[u8],
    headers: &HeaderMap,
) -> Response<tonic::body::Body> {
    let body = codec::error_json(code, message, details);
    let mut response = Response::new(tonic::body::Body::new(Full::new(Bytes::from(body))));
    *response.status_mut() =
        http::StatusCode::from_u16(http_status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    copy_headers(headers, response.headers_mut());
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
