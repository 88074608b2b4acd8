//! The append sequence, written once for every store: claim the batch's sequences with the
//! conversation locked, read what the decision needs, [`plan`], then write the plan or roll
//! back. A store supplies its transaction ([`AppendTx`]) and only reads and writes; the
//! decision and its order are here.
//!
//! A batch that [`needs_state`] says any conversation accepts skips the state read, so a store
//! can send its claim and its write as two round trips (PostgreSQL pipelines `BEGIN` with the
//! claim, and the rows with `COMMIT`).

use std::{collections::HashMap, future::Future, time::SystemTime};

use super::{
    AppendOutcome, AppendPlan, AppendRejection, AppendState, CountedBatch, IdempotencyRecord, WritePlan,
    needs_state, plan,
};
use crate::domain::{
    ids::{IdempotencyKey, Sequence},
    tool_protocol::{KnownCall, mentioned_call_ids},
};

/// One conversation's append transaction, as a store runs it. Dropped before
/// [`AppendTx::write`] or [`AppendTx::roll_back`] (the call was cancelled), it must leave
/// nothing written.
pub trait AppendTx: Send {
    /// The store's error; refusals of the plan become one.
    type Error: From<AppendRejection> + Send;

    /// Opens the transaction with the conversation locked (created on first use), claims the
    /// batch's sequences and log positions, and returns the conversation's last sequence before
    /// them.
    fn claim(&mut self, batch: &CountedBatch) -> impl Future<Output = Result<Sequence, Self::Error>> + Send;

    /// Reads, in the claimed transaction, the record stored under `key`, the stored state of
    /// `call_ids` (absent ids were never made), and with `time_of`, the time of the message at
    /// that sequence (its `occurred_at`, or its `created_at`).
    fn read_state(
        &mut self,
        key: Option<&IdempotencyKey>,
        call_ids: &[String],
        time_of: Option<Sequence>,
    ) -> impl Future<Output = Result<StoredState, Self::Error>> + Send;

    /// Writes `plan` for `batch` and commits (once the call has claimed its commit).
    fn write(
        &mut self,
        batch: &CountedBatch,
        plan: &WritePlan,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Ends the transaction without writing: nothing the claim did stays. Also called after a
    /// failed step, where the transaction may have ended already.
    fn roll_back(&mut self) -> impl Future<Output = ()> + Send;
}

/// What [`AppendTx::read_state`] reads beyond the last sequence.
#[derive(Debug, Clone, Default)]
pub struct StoredState {
    /// The record stored under the batch's key, if any.
    pub idempotency: Option<IdempotencyRecord>,
    /// The stored state of each call id the batch mentions that the conversation knows.
    pub known_calls: HashMap<String, KnownCall>,
    /// The time of the log's last message, when the batch's first message has an
    /// `occurred_at` to check against it.
    pub last_time: Option<SystemTime>,
}

/// Appends `batch` through `tx`: claims, reads what [`plan`] needs, and writes the plan, or
/// rolls back for a replay, a refusal or a failure.
pub async fn drive<T: AppendTx>(mut tx: T, batch: &CountedBatch) -> Result<AppendOutcome, T::Error> {
    let decided = decide(&mut tx, batch).await;
    let written = match decided {
        Ok(AppendPlan::Write(write)) => tx.write(batch, &write).await.map(|()| write.outcome),
        Ok(AppendPlan::Replay(outcome)) => {
            tx.roll_back().await;
            return Ok(outcome);
        }
        Err(error) => Err(error),
    };
    if written.is_err() {
        tx.roll_back().await;
    }
    written
}

async fn decide<T: AppendTx>(tx: &mut T, batch: &CountedBatch) -> Result<AppendPlan, T::Error> {
    let last_sequence = tx.claim(batch).await?;
    let stored = match needs_state(batch) {
        false => StoredState::default(),
        true => {
            let key = batch.idempotency.as_ref().map(|i| &i.key);
            let call_ids = mentioned_call_ids(batch.iter_messages());
            let dated = batch
                .iter_messages()
                .next()
                .is_some_and(|m| m.occurred_at.is_some());
            let time_of = Some(last_sequence).filter(|&s| dated && s > Sequence::ZERO);
            tx.read_state(key, &call_ids, time_of).await?
        }
    };
    let state = AppendState {
        last_sequence,
        idempotency: stored.idempotency,
        known_calls: stored.known_calls,
        last_time: stored.last_time,
    };
    Ok(plan(batch, &state)?)
}
