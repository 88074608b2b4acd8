//! The in-memory store runs the domain's drivers ([`crate::domain::append::drive`],
//! [`crate::domain::conversation::fork`], [`crate::domain::conversation::rewind`]) over its
//! transactions, none of which ever waits: one poll runs a driver to its end, on the caller's
//! thread, with the store's mutex held.

use std::{
    future::Future,
    pin::pin,
    task::{Context, Poll, Waker},
};

use crate::store::StoreError;

/// The output of `future`, which never waits: polled once.
pub(super) fn run_now<T>(future: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => Err(StoreError::internal("an in-memory store step waited")),
    }
}
