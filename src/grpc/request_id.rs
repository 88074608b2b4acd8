//! Request ids: `x-request-id` is read from the call (or generated) and echoed on the response,
//! and the per-RPC span carries it, so a client's report can be matched with the server's logs.

use std::{
    future::Future,
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
    task::{Context, Poll},
    time::{SystemTime, UNIX_EPOCH},
};

use tonic::codegen::http::{HeaderValue, Request, Response};
use tower::{Layer, Service};

/// Header carrying the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Adds request ids to every call.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestIdLayer;

impl<S> Layer<S> for RequestIdLayer {
    type Service = RequestId<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestId { inner }
    }
}

/// The service [`RequestIdLayer`] wraps around the server.
#[derive(Debug, Clone)]
pub struct RequestId<S> {
    inner: S,
}

impl<S, B, R> Service<Request<B>> for RequestId<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let id = request
            .headers()
            .get(REQUEST_ID_HEADER)
            .filter(|v| !v.is_empty() && v.len() <= 128)
            .cloned()
            .unwrap_or_else(generate);
        request.headers_mut().insert(REQUEST_ID_HEADER, id.clone());
        let future = self.inner.call(request);
        Box::pin(async move {
            let mut response = future.await?;
            response.headers_mut().insert(REQUEST_ID_HEADER, id);
            Ok(response)
        })
    }
}

/// A process-unique id: start time and a counter, hex.
fn generate() -> HeaderValue {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    HeaderValue::from_str(&format!("{start:016x}-{n:08x}"))
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}
