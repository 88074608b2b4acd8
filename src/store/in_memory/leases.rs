//! The in-memory store's leases: held flags cleared when the lease is dropped.

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use async_trait::async_trait;

use super::state::Key;
use crate::store::HeldLease;

/// The retention sweeper's lease of the in-memory store: cleared on drop.
#[derive(Debug)]
pub(super) struct SweeperLease(pub(super) Arc<AtomicBool>);

#[async_trait]
impl HeldLease for SweeperLease {
    async fn release(self: Box<Self>) {}
}

impl Drop for SweeperLease {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A background-summarizer lease of the in-memory store: removed from the held set on drop.
#[derive(Debug)]
pub(super) struct MemoryLease {
    pub(super) held: Arc<Mutex<HashSet<Key>>>,
    pub(super) key: Key,
}

#[async_trait]
impl HeldLease for MemoryLease {
    async fn release(self: Box<Self>) {}
}

impl Drop for MemoryLease {
    fn drop(&mut self) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}
