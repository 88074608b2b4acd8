//! Every call gets a deadline: the caller's (`grpc-timeout`) or the server's request timeout,
//! whichever is sooner. The layer puts it in the request's extensions as a [`Deadline`] value,
//! which the handlers pass down ([`of`]), so the store gives the database no more time than the
//! caller gives ctxd; if the handler is still running when it passes, the call ends with
//! DEADLINE_EXCEEDED (tonic's own timeout would say CANCELLED).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tonic::codegen::http::{HeaderMap, Request, Response};
use tower::{Layer, Service};

use crate::runtime::deadline::Deadline;

/// How much sooner than the caller's deadline this layer ends a call. tonic's server applies
/// the caller's `grpc-timeout` too, outside every layer, and answers CANCELLED when it passes:
/// ending first (timers tick in milliseconds) makes the answer DEADLINE_EXCEEDED, or the
/// claimed commit's outcome.
const TONIC_LEAD: Duration = Duration::from_millis(2);

/// Bounds every call by the sooner of the caller's deadline and `limit`.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    limit: Duration,
}

impl DeadlineLayer {
    /// Calls last at most `limit`, or less when the caller says so.
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            limit: self.limit,
        }
    }
}

/// The service [`DeadlineLayer`] wraps around the server.
#[derive(Debug, Clone)]
pub struct DeadlineService<S> {
    inner: S,
    limit: Duration,
}

impl<S, B> Service<Request<B>> for DeadlineService<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let allowed = caller_timeout(request.headers()).map_or(self.limit, |t| t.min(self.limit));
        let deadline = Deadline::after(allowed.saturating_sub(TONIC_LEAD));
        request.extensions_mut().insert(deadline.clone());
        let mut future = Box::pin(self.inner.call(request));
        Box::pin(async move {
            match tokio::time::timeout_at(deadline.call(), &mut future).await {
                Ok(result) => result,
                // A write claimed its commit first: its outcome is the answer, however late
                // (the store bounded its statements by the work deadline).
                Err(_) if !deadline.abandon() => future.await,
                Err(_) => {
                    tracing::info!(
                        code = "DEADLINE_EXCEEDED",
                        allowed_ms = allowed.as_millis() as u64,
                        "request ran out of time"
                    );
                    let status = tonic::Status::deadline_exceeded(format!(
                        "the call did not finish within its deadline ({} ms); nothing was stored",
                        allowed.as_millis()
                    ));
                    Ok(status.into_http())
                }
            }
        })
    }
}

/// The call's deadline that [`DeadlineLayer`] set: `None` only for a server built without it
/// (tests that serve the handlers directly).
pub fn of<T>(request: &tonic::Request<T>) -> Option<Deadline> {
    request.extensions().get::<Deadline>().cloned()
}

/// The caller's `grpc-timeout` (at most eight digits and a unit, per the gRPC HTTP/2 spec);
/// a malformed value is ignored, as if absent.
fn caller_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-timeout", value.parse().unwrap());
        caller_timeout(&headers)
    }

    #[test]
    fn grpc_timeout_units_and_malformed_values() {
        assert_eq!(parsed("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parsed("1500m"), Some(Duration::from_millis(1500)));
        assert_eq!(parsed("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parsed("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parsed("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parsed("10n"), Some(Duration::from_nanos(10)));
        for bad in ["", "S", "123456789S", "12x", "-1S", "1.5S", "1 S"] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
        assert_eq!(caller_timeout(&HeaderMap::new()), None);
    }
}
