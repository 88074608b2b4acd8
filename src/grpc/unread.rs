//! A response that holds part of the replica's memory ([`crate::runtime::response_budget`]) must be read
//! within the request timeout of being ready. A client that stops reading (a zero HTTP/2
//! window) otherwise holds it until its connection ends, and with it the memory other calls
//! need. When the time is up the response's content and its reservation are dropped at once,
//! whether or not the connection is polled again, and the stream is reset when it is.
//!
//! Large data frames are handed to HTTP/2 in copied slices, so the connection's send buffer
//! never keeps the whole response alive behind a slow reader.

use crate::runtime::response_budget::Reservation;
use std::{
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use hyper::body::{Body, Buf, Bytes, Frame, SizeHint};

/// The largest piece of a data frame handed to HTTP/2 at once.
const SLICE: usize = 256 << 10;

/// A response body dropped, with its memory, if it is not read within its time.
#[derive(Debug)]
pub(crate) struct ReadInTime {
    slot: Arc<Mutex<Option<Content>>>,
    timer: tokio::task::JoinHandle<()>,
}

/// What the response holds until it is read or its time is up.
#[derive(Debug)]
struct Content {
    body: tonic::body::Body,
    /// The rest of a large data frame, handed out in slices.
    pending: Bytes,
    _held: std::sync::Arc<Reservation>,
}

impl ReadInTime {
    /// `body`, holding `held`, to be read within `timeout`.
    pub(crate) fn new(body: tonic::body::Body, held: std::sync::Arc<Reservation>, timeout: Duration) -> Self {
        let slot = Arc::new(Mutex::new(Some(Content {
            body,
            pending: Bytes::new(),
            _held: held,
        })));
        let weak = Arc::downgrade(&slot);
        let timer = tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            if let Some(slot) = weak.upgrade() {
                let dropped = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                if dropped.is_some() {
                    tracing::info!(
                        timeout_ms = timeout.as_millis() as u64,
                        "response not read in time: dropped with its memory"
                    );
                }
            }
        });
        Self { slot, timer }
    }
}

impl Body for ReadInTime {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(content) = slot.as_mut() else {
            return Poll::Ready(Some(Err(tonic::Status::deadline_exceeded(
                "the response was not read within the request timeout",
            ))));
        };
        if content.pending.is_empty() {
            match Pin::new(&mut content.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if data.len() > SLICE => content.pending = data,
                    Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                other => return other,
            }
        }
        let n = content.pending.len().min(SLICE);
        let piece = Bytes::copy_from_slice(&content.pending[..n]);
        content.pending.advance(n);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref()
            .is_some_and(|c| c.pending.is_empty() && c.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

impl Drop for ReadInTime {
    fn drop(&mut self) {
        self.timer.abort();
    }
}
