//! AppendMessage in memory: the store's side of the append ([`AppendTx`]) over the locked map.
//! The sequence and the decision are [`drive`]'s; nothing here waits, so the driver runs to its
//! end in one poll, under the one mutex.

use std::time::SystemTime;

use super::{
    ready::run_now,
    state::{Key, State},
};
use crate::{
    domain::{
        AppendOutcome, CountedBatch, IdempotencyKey, Sequence, WritePlan,
        append::{AppendTx, StoredState, drive},
        changes::{ChangeKind, NewChange},
    },
    runtime::deadline::Deadline,
    store::StoreError,
};

/// Appends `batch` to the conversation at `key` of the locked `state`.
pub(super) fn append(
    state: &mut State,
    key: Key,
    batch: &CountedBatch,
    deadline: Option<&Deadline>,
) -> Result<AppendOutcome, StoreError> {
    let tx = MemoryAppend {
        state,
        key,
        now: SystemTime::now(),
        deadline,
    };
    run_now(drive(tx, batch))
}

/// The in-memory side of one append: the map, locked by the caller for the whole append.
struct MemoryAppend<'a> {
    state: &'a mut State,
    key: Key,
    now: SystemTime,
    deadline: Option<&'a Deadline>,
}

impl AppendTx for MemoryAppend<'_> {
    type Error = StoreError;

    async fn claim(&mut self, _batch: &CountedBatch) -> Result<Sequence, StoreError> {
        match self.state.get(&self.key) {
            Some(c) if c.resource.expire_time.is_some_and(|at| at <= self.now) => Err(StoreError::Expired),
            Some(c) => Ok(c.last_sequence()),
            None => Ok(Sequence::ZERO),
        }
    }

    async fn read_state(
        &mut self,
        key: Option<&IdempotencyKey>,
        call_ids: &[String],
        time_of: Option<Sequence>,
    ) -> Result<StoredState, StoreError> {
        let Some(conversation) = self.state.get(&self.key) else {
            return Ok(StoredState::default());
        };
        Ok(conversation.stored_state(key, call_ids, time_of))
    }

    async fn write(&mut self, batch: &CountedBatch, plan: &WritePlan) -> Result<(), StoreError> {
        crate::store::claim_commit(self.deadline)?;
        self.state.touch(&self.key, self.now).apply(batch, plan);
        let last = plan.after.plus(batch.messages.len() as u64);
        let change = NewChange::new(ChangeKind::Appended, plan.after.plus(1), last);
        self.state.changes.record(&self.key, change, self.now);
        Ok(())
    }

    /// Nothing was changed before the write.
    async fn roll_back(&mut self) {}
}
