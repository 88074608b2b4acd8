//! Connect's server streaming (`application/connect+json`, `application/connect+proto`), for
//! WatchChanges over HTTP/1.1 and HTTP/2: the request's one enveloped message becomes the gRPC
//! call's, and the gRPC response's messages are re-enveloped as they come, each in the request's
//! encoding, ending with Connect's end-of-stream message (`{}`, or `{"error": ...}` with the same
//! details a gRPC caller gets). The HTTP status is 200 once the call is made; errors travel in
//! the end-of-stream message, as the protocol says.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame};
use prost_reflect::MethodDescriptor;
use tonic::{
    Code, Status,
    codegen::http::{HeaderMap, HeaderValue, Request, Response, header},
};
use tower::Service;

use super::{
    answer::{self, Accounting},
    call,
    codec::{self, Encoding},
    layer::ProtocolLayer,
};

/// An envelope's flag: the end-of-stream message.
const END_STREAM: u8 = 0b10;

/// The encoding a streaming Content-Type names.
pub(super) fn encoding(content_type: &str) -> Option<Encoding> {
    match content_type {
        "application/connect+json" => Some(Encoding::Json),
        "application/connect+proto" => Some(Encoding::Proto),
        _ => None,
    }
}

fn content_type(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Json => "application/connect+json",
        Encoding::Proto => "application/connect+proto",
    }
}

/// A Connect server-streaming call, as the gRPC call it stands for.
pub(super) async fn connect<S>(
    mut inner: S,
    layer: &ProtocolLayer,
    request: Request<tonic::body::Body>,
    method: &MethodDescriptor,
    encoding: Encoding,
) -> Result<Response<tonic::body::Body>, S::Error>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
{
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let end = |code: Code, message: &str| {
        answer::refused(layer, method, started, code, message);
        Ok(ended(encoding, code, message, &[], &HeaderMap::new()))
    };
    let checked = call::checked_body(
        layer,
        &parts.headers,
        body,
        Accounting::Counted,
        layer.request_timeout,
    )
    .await;
    let call::CheckedBody {
        body, reservation, ..
    } = match checked {
        Ok(read) => read,
        Err((code, message)) => return end(code, &message),
    };
    let message =
        match unwrap_envelope(&body).and_then(|message| codec::request_bytes(method, encoding, message)) {
            Ok(message) => message,
            Err(message) => return end(Code::InvalidArgument, &message),
        };
    drop((body, reservation));
    let response = inner
        .call(call::grpc_request(parts, message, layer.request_timeout))
        .await?;
    let (parts, body) = response.into_parts();
    if let Some(status) = Status::from_header_map(&parts.headers) {
        // Trailers-only: the call ended before a message.
        return Ok(ended(
            encoding,
            status.code(),
            status.message(),
            status.details(),
            &parts.headers,
        ));
    }
    let body = Restream {
        inner: body,
        buffer: Vec::new(),
        method: method.clone(),
        encoding,
        done: false,
    };
    Ok(streaming_response(
        encoding,
        tonic::body::Body::new(body),
        &parts.headers,
    ))
}

/// The one message of a streaming request: a five-byte envelope (flags, length) and its bytes.
fn unwrap_envelope(body: &[u8]) -> Result<&[u8], String> {
    let (head, message) = body
        .split_at_checked(5)
        .ok_or("the body is not an enveloped message (five bytes of flags and length first)")?;
    if head[0] != 0 {
        return Err("compressed or flagged request messages are not served: send flags 0".into());
    }
    let length = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if length != message.len() {
        return Err(format!(
            "the envelope says {length} bytes and {} follow: send exactly one message",
            message.len()
        ));
    }
    Ok(message)
}

fn envelope(flags: u8, payload: &[u8]) -> Bytes {
    let length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(5 + payload.len());
    out.push(flags);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(payload);
    Bytes::from(out)
}

/// The end-of-stream message for `code`: `{}` when OK, else `{"error": ...}`.
fn end_message(code: Code, message: &str, details: &[u8]) -> Bytes {
    let json = match code {
        Code::Ok => b"{}".to_vec(),
        _ => {
            let mut json = b"{\"error\":".to_vec();
            json.extend(codec::error_json(code, message, details));
            json.push(b'}');
            json
        }
    };
    envelope(END_STREAM, &json)
}

/// A stream that ended before its first message.
fn ended(
    encoding: Encoding,
    code: Code,
    message: &str,
    details: &[u8],
    headers: &HeaderMap,
) -> Response<tonic::body::Body> {
    let body = tonic::body::Body::new(Full::new(end_message(code, message, details)));
    streaming_response(encoding, body, headers)
}

fn streaming_response(
    encoding: Encoding,
    body: tonic::body::Body,
    headers: &HeaderMap,
) -> Response<tonic::body::Body> {
    let mut response = Response::new(body);
    for (name, value) in headers {
        if !name.as_str().starts_with("grpc-")
            && name != header::CONTENT_TYPE
            && name != header::CONTENT_LENGTH
        {
            response.headers_mut().append(name.clone(), value.clone());
        }
    }
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(encoding)),
    );
    response
}

/// The gRPC response body, re-enveloped for Connect as its messages come.
struct Restream {
    inner: tonic::body::Body,
    /// gRPC bytes received and not yet re-enveloped (less than a whole message).
    buffer: Vec<u8>,
    method: MethodDescriptor,
    encoding: Encoding,
    done: bool,
}

impl Restream {
    /// The next whole gRPC message in the buffer, re-enveloped.
    fn next_message(&mut self) -> Option<Result<Bytes, Bytes>> {
        let head = self.buffer.get(..5)?;
        let length = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if self.buffer.len() < 5 + length {
            return None;
        }
        let message: Vec<u8> = self.buffer.drain(..5 + length).skip(5).collect();
        Some(
            match codec::response_body(&self.method, self.encoding, &message) {
                Ok(payload) => Ok(envelope(0, &payload)),
                Err(_) => Err(end_message(
                    Code::Internal,
                    "a response message could not be encoded",
                    &[],
                )),
            },
        )
    }

    fn finish(&mut self, frame: Bytes) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.done = true;
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }
}

impl Body for Restream {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match this.next_message() {
                Some(Ok(message)) => return Poll::Ready(Some(Ok(Frame::data(message)))),
                Some(Err(end)) => return this.finish(end),
                None => {}
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.buffer.extend_from_slice(&data),
                    Err(frame) => {
                        let trailers = frame.into_trailers().unwrap_or_default();
                        let end = match Status::from_header_map(&trailers) {
                            Some(status) => end_message(status.code(), status.message(), status.details()),
                            None => end_message(Code::Ok, "", &[]),
                        };
                        return this.finish(end);
                    }
                },
                Poll::Ready(Some(Err(status))) => {
                    return this.finish(end_message(status.code(), status.message(), status.details()));
                }
                Poll::Ready(None) => {
                    return this.finish(end_message(
                        Code::Internal,
                        "the stream ended without its status",
                        &[],
                    ));
                }
            }
        }
    }
}
