//! Every request body as it arrives, before tonic buffers it:
//!
//! - counted against the replica's memory budget ([`crate::runtime::response_budget`]), the same amount
//!   that message pages and responses come out of, and against the calling tenant's share of
//!   it, held until the call has answered: a body that would pass either ends the call with
//!   RESOURCE_EXHAUSTED, so bodies sent slowly or never finished cannot take the replica's
//!   memory, nor one tenant's the others' (tonic buffers each message whole, up to the request
//!   size limit);
//! - checked as gRPC framing for the unary services (ctxd's and health): exactly one message,
//!   whole, uncompressed unless `grpc-encoding` says otherwise. Malformed framing is the
//!   caller's fault, INVALID_ARGUMENT with a plain message (tonic would say INTERNAL, or accept
//!   a second message and drop it).

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use tonic::{
    Status,
    codegen::http::{HeaderMap, Request, Response},
};
use tower::{Layer, Service};

use super::TenantInterceptor;
use crate::runtime::response_budget::{Refusal, Reservation, ResponseBudget};

/// The health service, whose request is also decoded here (its codec would call bytes that
/// are not a `HealthCheckRequest` INTERNAL).
const HEALTH: &str = "/grpc.health.v1.Health/";

/// The unary services whose framing is checked (reflection streams its requests).
const UNARY_SERVICES: [&str; 2] = ["/ctxd.v1.ContextService/", HEALTH];

/// The most a health check request may be (it names a service).
const MAX_HEALTH_REQUEST: usize = 4096;

/// Counts and checks every request body (see the module docs).
#[derive(Debug, Clone)]
pub struct RequestBodyLayer {
    budget: ResponseBudget,
    max_request_bytes: usize,
    tenants: TenantInterceptor,
}

impl RequestBodyLayer {
    /// Bodies come out of `budget`, each counted against the share of the tenant `tenants`
    /// resolves; one at most twice `max_request_bytes` (tonic refuses a larger message itself,
    /// RESOURCE_EXHAUSTED).
    pub fn new(budget: ResponseBudget, max_request_bytes: usize, tenants: TenantInterceptor) -> Self {
        Self {
            budget,
            max_request_bytes,
            tenants,
        }
    }
}

impl<S> Layer<S> for RequestBodyLayer {
    type Service = RequestBody<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestBody {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`RequestBodyLayer`] wraps around the server.
#[derive(Debug, Clone)]
pub struct RequestBody<S> {
    inner: S,
    layer: RequestBodyLayer,
}

impl<S> Service<Request<tonic::body::Body>> for RequestBody<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        let path = request.uri().path();
        let framing = UNARY_SERVICES
            .iter()
            .any(|service| path.starts_with(service))
            .then(|| Framing::new(encoded(request.headers()), path.starts_with(HEALTH)));
        // Twice the largest message: what tonic buffers, and the frame around it.
        let limit = self.layer.max_request_bytes.saturating_mul(2);
        // A call the interceptor will refuse is counted under no tenant's name but its own.
        let tenant = self.layer.tenants.tenant_for(request.headers());
        let tenant = tenant.as_ref().map_or("", |t| t.as_str());
        let reservation = self.layer.budget.reserve_up_to(limit).of_tenant(tenant);
        let held = Arc::new(Mutex::new(reservation));
        let (parts, body) = request.into_parts();
        let body = tonic::body::Body::new(CheckedBody {
            inner: body,
            held: held.clone(),
            framing,
            ended: false,
        });
        let future = self.inner.call(Request::from_parts(parts, body));
        Box::pin(async move {
            let response = future.await;
            // The request is decoded and handled: its memory is free again.
            drop(held);
            response
        })
    }
}

/// Whether the request says its messages may be compressed.
fn encoded(headers: &HeaderMap) -> bool {
    headers
        .get("grpc-encoding")
        .is_some_and(|v| v.as_bytes() != b"identity")
}

/// A request body counted into its call's reservation and, for unary services, checked as
/// gRPC framing.
#[derive(Debug)]
struct CheckedBody {
    inner: tonic::body::Body,
    held: Arc<Mutex<Reservation>>,
    framing: Option<Framing>,
    ended: bool,
}

impl Body for CheckedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => frame,
            // A body that fails to arrive (cut short, malformed chunking, a gRPC-Web body
            // that ends early) is the sender's doing, not a server bug.
            Poll::Ready(Some(Err(status))) => {
                self.ended = true;
                return Poll::Ready(Some(Err(unreadable(status))));
            }
            Poll::Ready(None) => {
                self.ended = true;
                return Poll::Ready(self.framing.as_ref().and_then(|f| f.finish().err()).map(Err));
            }
        };
        if let Some(data) = frame.data_ref() {
            let grown = self
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .grow(data.len());
            if let Err(refusal) = grown {
                self.ended = true;
                return Poll::Ready(Some(Err(refused(refusal))));
            }
            if let Some(framing) = &mut self.framing
                && let Err(status) = framing.feed(data)
            {
                self.ended = true;
                return Poll::Ready(Some(Err(status)));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        // The end is seen by polling, so that a body ending inside a message is reported.
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// A body read error as the caller's: INVALID_ARGUMENT, unless it already says more.
fn unreadable(status: Status) -> Status {
    match status.code() {
        // The transport's own words (hyper's "IncompleteBody") say nothing to a caller.
        tonic::Code::Internal | tonic::Code::Unknown => Status::invalid_argument(
            "the request body could not be read whole: it ended early or its framing is broken",
        ),
        _ => status,
    }
}

fn refused(refusal: Refusal) -> Status {
    match refusal {
        Refusal::Busy { total } => Status::resource_exhausted(format!(
            "the replica's memory for requests and responses ({total} bytes) is in use by \
             other calls; retry later"
        )),
        Refusal::TenantBusy { share } => Status::resource_exhausted(format!(
            "this tenant's calls hold its share of the replica's memory ({share} bytes); retry \
             when they have finished"
        )),
        Refusal::TooLarge { limit } => {
            Status::resource_exhausted(format!("the request body is larger than {limit} bytes"))
        }
    }
}

/// Where a unary request's body is in its gRPC framing: a 5-byte prefix (compressed flag,
/// big-endian length), then the message.
#[derive(Debug)]
struct Framing {
    compressed_allowed: bool,
    /// The message so far, kept to be decoded (health checks only).
    kept: Option<Vec<u8>>,
    messages: u32,
    prefix: [u8; 5],
    prefix_len: usize,
    /// Message bytes still to come (after a complete prefix).
    remaining: u64,
    /// Whether the message is marked compressed.
    prefix_compressed: bool,
}

impl Framing {
    fn new(compressed_allowed: bool, health: bool) -> Self {
        Self {
            compressed_allowed,
            kept: health.then(Vec::new),
            messages: 0,
            prefix: [0; 5],
            prefix_len: 0,
            remaining: 0,
            prefix_compressed: false,
        }
    }

    /// Follows `data` through the framing; the first violation is the call's answer.
    fn feed(&mut self, mut data: &[u8]) -> Result<(), Status> {
        while !data.is_empty() {
            if self.remaining > 0 {
                let take = (self.remaining as usize).min(data.len());
                if let Some(kept) = &mut self.kept {
                    if kept.len() + take > MAX_HEALTH_REQUEST {
                        return Err(malformed("a health check request is a short service name"));
                    }
                    kept.extend_from_slice(&data[..take]);
                }
                self.remaining -= take as u64;
                data = &data[take..];
                if self.remaining == 0 {
                    self.check_kept()?;
                }
                continue;
            }
            let take = (5 - self.prefix_len).min(data.len());
            self.prefix[self.prefix_len..self.prefix_len + take].copy_from_slice(&data[..take]);
            self.prefix_len += take;
            data = &data[take..];
            if self.prefix_len == 5 {
                self.prefix_len = 0;
                self.start_message()?;
            }
        }
        Ok(())
    }

    fn start_message(&mut self) -> Result<(), Status> {
        match self.prefix[0] {
            0 => {}
            1 if self.compressed_allowed => {}
            1 => {
                return Err(malformed(
                    "a message is marked compressed but the request names no grpc-encoding",
                ));
            }
            _ => return Err(malformed("a message's compressed flag is neither 0 nor 1")),
        }
        self.prefix_compressed = self.prefix[0] == 1;
        self.messages += 1;
        if self.messages > 1 {
            return Err(malformed("a unary call carries exactly one message"));
        }
        let len = u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]);
        self.remaining = u64::from(len);
        if len == 0 {
            self.check_kept()?;
        }
        Ok(())
    }

    /// A kept (health check) message must decode; checked as soon as it is whole, before
    /// tonic decodes it.
    fn check_kept(&self) -> Result<(), Status> {
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        if self.prefix_compressed {
            return Err(malformed("health checks are not compressed"));
        }
        use prost::Message as _;
        tonic_health::pb::HealthCheckRequest::decode(kept.as_slice())
            .map(drop)
            .map_err(|_| malformed("the message is not a HealthCheckRequest"))
    }

    /// The body ended: it must have carried one whole message.
    fn finish(&self) -> Result<(), Status> {
        if self.prefix_len > 0 || self.remaining > 0 {
            return Err(malformed("the request body ended inside a message"));
        }
        if self.messages == 0 {
            return Err(malformed("the request body carries no message"));
        }
        Ok(())
    }
}

fn malformed(problem: &str) -> Status {
    Status::invalid_argument(format!("malformed gRPC request: {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    fn check(chunks: &[&[u8]], compressed_allowed: bool) -> Result<(), tonic::Code> {
        let mut framing = Framing::new(compressed_allowed, false);
        for chunk in chunks {
            framing.feed(chunk).map_err(|s| s.code())?;
        }
        framing.finish().map_err(|s| s.code())
    }

    #[test]
    fn one_whole_message_passes_in_any_chunking() {
        let body = framed(0, b"hello world");
        for split in 0..=body.len() {
            let (a, b) = body.split_at(split);
            assert_eq!(check(&[a, b], false), Ok(()), "split at {split}");
        }
        assert_eq!(
            check(&[&framed(0, b"")], false),
            Ok(()),
            "an empty message is a message"
        );
        assert_eq!(check(&[&framed(1, b"xx")], true), Ok(()));
    }

    #[test]
    fn malformed_framing_is_invalid_argument() {
        let invalid = Err(tonic::Code::InvalidArgument);
        let body = framed(0, b"hello");
        assert_eq!(check(&[&body[..7]], false), invalid, "truncated message");
        assert_eq!(check(&[&body[..3]], false), invalid, "truncated prefix");
        assert_eq!(check(&[], false), invalid, "empty body");
        assert_eq!(
            check(&[&framed(1, b"x")], false),
            invalid,
            "compressed, no encoding"
        );
        assert_eq!(check(&[&framed(2, b"x")], true), invalid, "unknown flag");
        let two = [framed(0, b"a"), framed(0, b"b")].concat();
        assert_eq!(check(&[&two], false), invalid, "two messages");
    }

    #[test]
    fn a_health_check_must_decode() {
        let health = |body: &[u8]| {
            let mut framing = Framing::new(false, true);
            framing
                .feed(body)
                .and_then(|()| framing.finish())
                .map_err(|s| s.code())
        };
        assert_eq!(health(&framed(0, b"")), Ok(()));
        assert_eq!(health(&framed(0, &[0x0a, 0x02, b'c', b'x'])), Ok(()));
        assert_eq!(health(&framed(0, &[0xff; 8])), Err(tonic::Code::InvalidArgument));
        let long = framed(0, &vec![0; MAX_HEALTH_REQUEST + 1]);
        assert_eq!(health(&long), Err(tonic::Code::InvalidArgument));
    }
}
