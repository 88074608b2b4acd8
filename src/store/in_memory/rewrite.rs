//! Changes to a conversation's past: a fork copies a prefix, a redaction tombstones a message,
//! a rewind drops a suffix; each with what was derived from the changed messages. Forks and
//! rewinds are decided by [`conversation::fork`] and [`conversation::rewind`] over the
//! transactions here ([`MemoryFork`], [`MemoryRewind`]).

use std::time::SystemTime;

use crate::{
    domain::{
        CallState, PayloadHash, Sequence,
        context::{anchor::LogEnd, cost::CountedLate},
        conversation::{self, ForkPlan, ForkSource, ForkTx, RewindTx},
        working_memory::WorkingMemory,
    },
    store::{Redaction, Rewind, StoreError},
};

use super::entry::Conversation;

/// A fork's reads of an in-memory source; [`conversation::fork`] decides, and the new
/// conversation it writes is for the caller to insert.
pub(super) struct MemoryFork<'a> {
    pub(super) source: &'a Conversation,
    pub(super) now: SystemTime,
}

impl ForkTx for MemoryFork<'_> {
    type Forked = Conversation;
    type Error = StoreError;

    async fn read_source(&mut self, through: Sequence) -> Result<ForkSource, StoreError> {
        let source = self.source;
        let after = source.messages.get(through.get() as usize..).unwrap_or_default();
        Ok(ForkSource {
            last: source.last_sequence(),
            split_call: after
                .iter()
                .filter_map(|m| m.call_sequence)
                .find(|&call| call <= through),
            summary: source
                .summaries
                .iter()
                .rev()
                .find(|s| s.through_sequence <= through)
                .cloned(),
            memory: source.memory.clone(),
        })
    }

    async fn write(&mut self, plan: ForkPlan) -> Result<Conversation, StoreError> {
        Ok(self.source.forked(plan, self.now))
    }
}

/// A rewind of an in-memory conversation; [`conversation::rewind`] decides.
pub(super) struct MemoryRewind<'a>(pub(super) &'a mut Conversation);

impl RewindTx for MemoryRewind<'_> {
    type Rewound = Rewind;
    type Error = StoreError;

    async fn lock(&mut self) -> Result<Sequence, StoreError> {
        Ok(self.0.last_sequence())
    }

    async fn write(&mut self, after: Sequence) -> Result<Rewind, StoreError> {
        Ok(self.0.rewind(after))
    }
}

impl Conversation {
    /// A new conversation holding this one's log through `plan.through`, as the plan says (its
    /// origin is for the caller to set).
    fn forked(&self, plan: ForkPlan, now: SystemTime) -> Conversation {
        let through = plan.through;
        let kept = through.get() as usize;
        let mut fork = Conversation::new(now);
        fork.resource.title = self.resource.title.clone();
        fork.resource.labels = self.resource.labels.clone();
        fork.messages = self.messages[..kept].to_vec();
        fork.calls = self
            .calls
            .iter()
            .filter(|(_, call)| call.sequence <= through)
            .map(|(id, call)| (id.clone(), *call))
            .collect();
        fork.pinned = self.pinned.iter().copied().filter(|s| *s <= through).collect();
        fork.recount_newest();
        fork.recount_usage();
        fork.summaries = plan.summary.into_iter().collect();
        fork.memory = plan.memory.map(|m| WorkingMemory {
            updated_at: Some(now),
            ..m
        });
        // The source's placement, as appended: the end is where message `through + 1` was
        // placed (or the source's end), the newest turn start the one before it.
        fork.positions = self.positions[..kept].to_vec();
        fork.search = self.search.prefix(kept);
        fork.end = self.end_before(kept);
        fork
    }

    /// The newest user message and response id among the messages, as appends count them
    /// ([`ForkPlan::opens_user_turn`], [`ForkPlan::response_id`]).
    fn recount_newest(&mut self) {
        self.last_user_sequence = self
            .messages
            .iter()
            .rev()
            .find(|m| ForkPlan::opens_user_turn(&m.message))
            .map(|m| m.sequence);
        self.last_response_id = self
            .messages
            .iter()
            .rev()
            .find_map(|m| ForkPlan::response_id(&m.message))
            .map(str::to_owned);
    }

    /// The log's end for a log of its first `kept` messages: where message `kept + 1` was
    /// placed, as appended (the whole log's end when there is none).
    fn end_before(&self, kept: usize) -> LogEnd {
        match self.positions.get(kept) {
            Some(next) => LogEnd {
                offset: next.offset,
                last_turn: next.previous_turn,
            },
            None => self.end,
        }
    }

    /// Redacts the message at `sequence` and what was derived from it.
    pub(super) fn redact(&mut self, sequence: Sequence) -> Result<Redaction, StoreError> {
        let index = (sequence.get() as usize)
            .checked_sub(1)
            .filter(|i| *i < self.messages.len())
            .ok_or(StoreError::MessageNotFound)?;
        self.redactions += 1;
        let message = conversation::redacted(&self.messages[index]);
        self.messages[index] = message.clone();
        self.search.forget(index);
        let before = self.summaries.len();
        self.summaries
            .retain(|s| !conversation::summary_covers(s.through_sequence, sequence));
        let summaries_removed = (before - self.summaries.len()) as u64;
        if let Some(memory) = &mut self.memory {
            conversation::forget_in_memory(memory, sequence);
            memory.version += 1;
            memory.updated_at = Some(SystemTime::now());
        }
        for record in self.idempotency.values_mut() {
            let outcome = &record.outcome;
            if conversation::append_covers(outcome.first_sequence, outcome.last_sequence, sequence) {
                record.payload_hash = PayloadHash::REDACTED;
            }
        }
        Ok(Redaction {
            message,
            summaries_removed,
            summary_through_sequence: self
                .summaries
                .last()
                .map_or(Sequence::ZERO, |s| s.through_sequence),
            memory_version: self.memory.as_ref().map_or(0, |m| m.version),
        })
    }

    /// Keeps `counts` where their message is still there and lacks them (see
    /// [`crate::store::Store::store_late_counts`]).
    pub(super) fn keep_late_counts(&mut self, counts: &[CountedLate]) {
        for late in counts {
            let index = (late.sequence.get() as usize).checked_sub(1);
            let Some(stored) = index.and_then(|i| self.messages.get_mut(i)) else {
                continue;
            };
            stored.keep_late(late);
        }
    }

    /// Removes the messages after `after` (within the log: [`conversation::rewind`] checked)
    /// and what was derived from them (see [`crate::store::Store::rewind_conversation`]).
    fn rewind(&mut self, after: Sequence) -> Rewind {
        let kept = after.get() as usize;
        self.rewinds += 1;
        let removed = self.messages.split_off(kept);
        // Calls the removed messages made go; calls they answered are open again.
        self.calls.retain(|_, call| call.sequence <= after);
        for result in removed.iter().filter(|m| m.call_sequence.is_some()) {
            let answered = result.message.tool_call_id.as_ref();
            if let Some(call) = answered.and_then(|id| self.calls.get_mut(id)) {
                call.state = CallState::Open;
            }
        }
        self.idempotency
            .retain(|_, record| record.outcome.last_sequence <= after);
        self.pinned.retain(|s| *s <= after);
        self.recount_newest();
        self.recount_usage();
        self.end = self.end_before(kept);
        self.positions.truncate(kept);
        self.search.truncate(kept);
        let before = self.summaries.len();
        self.summaries.retain(|s| s.through_sequence <= after);
        let summaries_removed = (before - self.summaries.len()) as u64;
        if let Some(memory) = &mut self.memory {
            conversation::rewound_memory(memory, after);
            memory.version += 1;
            memory.updated_at = Some(SystemTime::now());
        }
        Rewind {
            messages_removed: removed.len() as u64,
            last_sequence: after,
            summaries_removed,
            summary_through_sequence: self
                .summaries
                .last()
                .map_or(Sequence::ZERO, |s| s.through_sequence),
            memory_version: self.memory.as_ref().map_or(0, |m| m.version),
        }
    }
}
