//! An append waiting in a group commit's queue, and what its batch answers it.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::{
    domain::{AppendOutcome, CountedBatch, TenantId},
    runtime::deadline::Deadline,
    store::StoreError,
};

/// An append waiting in a batch.
#[derive(Debug)]
pub(super) struct Member {
    pub(super) tenant: TenantId,
    pub(super) batch: Arc<CountedBatch>,
    pub(super) deadline: Option<Deadline>,
    pub(super) reply: oneshot::Sender<Verdict>,
}

/// What a batch answers a member.
#[derive(Debug)]
pub(super) enum Verdict {
    /// The batch wrote it, or failed it.
    Done(Result<AppendOutcome, StoreError>),
    /// Take the single path (locked elsewhere, new, expired, alone, or the batch failed before
    /// anything could commit).
    Single,
}

impl Member {
    pub(super) fn answer(self, verdict: Verdict) {
        let _ = self.reply.send(verdict);
    }

    pub(super) fn key(&self) -> (&str, &str) {
        (self.tenant.as_str(), self.batch.conversation_id.as_str())
    }
}
