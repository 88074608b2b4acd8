//! One conversation of the in-memory store: its log, calls, idempotency keys, summaries, memory
//! and search index, as the PostgreSQL store keeps their rows; what it answers, and how an
//! append lands in it.

use std::{collections::HashMap, time::SystemTime};

use crate::{
    domain::{
        CallState, ConversationId, CountedBatch, IdempotencyKey, IdempotencyRecord, KnownCall, Sequence,
        StoredMessage, Usage, WritePlan,
        append::StoredState,
        context::anchor::{LogEnd, LogPosition},
        conversation::{self, ActivityKey, ConversationStatus, micros},
        summary::Summary,
        working_memory::WorkingMemory,
    },
    store::RetentionRule,
};

use super::search_index::SearchIndex;

#[derive(Debug, Clone)]
pub(super) struct Conversation {
    /// Title, status, labels, times, expiry, origin (the counters are derived).
    pub(super) resource: Resource,
    /// Message with sequence `n` is at index `n - 1`.
    pub(super) messages: Vec<StoredMessage>,
    pub(super) calls: HashMap<String, KnownCall>,
    pub(super) idempotency: HashMap<String, IdempotencyRecord>,
    pub(super) pinned: Vec<Sequence>,
    pub(super) last_user_sequence: Option<Sequence>,
    pub(super) last_response_id: Option<String>,
    /// Every summary version, oldest first.
    pub(super) summaries: Vec<Summary>,
    pub(super) memory: Option<WorkingMemory>,
    /// Where the next message goes in the log's token stream.
    pub(super) end: LogEnd,
    /// Each message's place in it, as appended (redaction does not move it).
    pub(super) positions: Vec<LogPosition>,
    /// RedactMessage calls so far (see [`NewSummary::redactions`]).
    pub(super) redactions: u64,
    /// RewindConversation calls so far (see [`NewSummary::rewinds`]).
    pub(super) rewinds: u64,
    /// The messages' usage, summed.
    pub(super) usage: Usage,
    /// The messages' search documents and their index.
    pub(super) search: SearchIndex,
}

/// What a conversation's resource holds beside its log.
#[derive(Debug, Clone)]
pub(super) struct Resource {
    pub(super) title: String,
    pub(super) status: ConversationStatus,
    pub(super) labels: std::collections::BTreeMap<String, String>,
    pub(super) created_at: SystemTime,
    /// Kept at microsecond resolution, as PostgreSQL keeps it.
    pub(super) updated_at: SystemTime,
    pub(super) expire_time: Option<SystemTime>,
    pub(super) forked_from: Option<(ConversationId, Sequence)>,
}

impl Conversation {
    pub(super) fn new(now: SystemTime) -> Self {
        let now = conversation::to_micros(now);
        Self {
            resource: Resource {
                title: String::new(),
                status: ConversationStatus::Active,
                labels: Default::default(),
                created_at: now,
                updated_at: now,
                expire_time: None,
                forked_from: None,
            },
            messages: Vec::new(),
            calls: HashMap::new(),
            idempotency: HashMap::new(),
            pinned: Vec::new(),
            last_user_sequence: None,
            last_response_id: None,
            summaries: Vec::new(),
            memory: None,
            end: LogEnd::default(),
            positions: Vec::new(),
            redactions: 0,
            rewinds: 0,
            usage: Usage::default(),
            search: SearchIndex::default(),
        }
    }

    /// The version of its stored messages (see [`LogVersion`](crate::store::LogVersion)).
    pub(super) fn log_version(&self) -> crate::store::LogVersion {
        let created = self.resource.created_at.duration_since(std::time::UNIX_EPOCH);
        crate::store::LogVersion {
            created_micros: created.map_or(0, |d| d.as_micros() as i64),
            changes: self.redactions + self.rewinds,
            // The in-memory store keeps no cache to check it against.
            incarnation: 0,
        }
    }

    /// The conversation as a resource.
    pub(super) fn resource(&self, id: &ConversationId) -> conversation::Conversation {
        let r = &self.resource;
        conversation::Conversation {
            id: id.clone(),
            title: r.title.clone(),
            status: r.status,
            labels: r.labels.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
            last_sequence: self.last_sequence(),
            summary_through_sequence: self
                .summaries
                .last()
                .map_or(Sequence::ZERO, |s| s.through_sequence),
            memory_version: self.memory.as_ref().map_or(0, |m| m.version),
            expire_time: r.expire_time,
            forked_from: r.forked_from.clone(),
            usage: self.usage,
        }
    }

    /// The messages' usage, summed again (after a rewind or a fork took some).
    pub(super) fn recount_usage(&mut self) {
        self.usage = self
            .messages
            .iter()
            .fold(Usage::default(), |sum, m| sum.plus(m.message.usage));
    }

    pub(super) fn activity_key(&self, id: &ConversationId) -> ActivityKey {
        ActivityKey {
            micros: micros(self.resource.updated_at),
            id: id.clone(),
        }
    }

    /// True when `rule` says the conversation has expired.
    pub(super) fn expired(&self, rule: &RetentionRule) -> bool {
        match self.resource.expire_time {
            Some(at) => at <= rule.now,
            None => rule.inactive.is_some_and(|inactive| {
                rule.now
                    .duration_since(self.resource.updated_at)
                    .is_ok_and(|idle| idle > inactive)
            }),
        }
    }

    pub(super) fn last_sequence(&self) -> Sequence {
        self.messages.last().map_or(Sequence::ZERO, |m| m.sequence)
    }

    /// Redaction tombstones among the messages after `base` through `through`.
    pub(super) fn tombstones(&self, base: Sequence, through: Sequence) -> u64 {
        let (from, to) = (
            base.get() as usize,
            (through.get() as usize).min(self.messages.len()),
        );
        self.messages
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .filter(|m| m.message.content == conversation::REDACTED_CONTENT)
            .count() as u64
    }

    pub(super) fn at(&self, sequence: Sequence) -> Option<&StoredMessage> {
        (sequence.get() as usize)
            .checked_sub(1)
            .and_then(|i| self.messages.get(i))
    }

    /// The record under `key` and the state of the call ids among `call_ids` this
    /// conversation knows.
    pub(super) fn stored_state(
        &self,
        key: Option<&IdempotencyKey>,
        call_ids: &[String],
        time_of: Option<Sequence>,
    ) -> StoredState {
        let at = time_of.and_then(|s| self.messages.get(s.get().checked_sub(1)? as usize));
        StoredState {
            last_time: at.map(|m| m.message.occurred_at.unwrap_or(m.created_at)),
            idempotency: key.and_then(|k| self.idempotency.get(k.as_str()).copied()),
            known_calls: call_ids
                .iter()
                .filter_map(|id| self.calls.get(id).map(|k| (id.clone(), *k)))
                .collect(),
        }
    }

    /// Writes an accepted batch.
    pub(super) fn apply(&mut self, batch: &CountedBatch, write: &WritePlan) {
        let now = SystemTime::now();
        for (i, counted) in batch.messages.iter().enumerate() {
            let message = &counted.message;
            let sequence = write.sequence_of(i);
            if message.pinned && !message.exclude_from_context {
                self.pinned.push(sequence);
            }
            self.usage = self.usage.plus(message.usage);
            let position = self.end.place(message, counted.tokens.approx);
            self.positions.push(position);
            self.messages.push(StoredMessage {
                sequence,
                created_at: now,
                tokens: counted.tokens,
                reasoning_tokens: counted.reasoning_tokens,
                native_tokens: counted.native_tokens,
                call_sequence: write.call_sequences[i],
                turn_anchor: position.anchor(message),
                message: message.clone(),
            });
            self.search.push(counted.search.clone());
        }
        for (i, id) in &write.effects.new_calls {
            let call = KnownCall {
                state: CallState::Open,
                sequence: write.after.plus(*i as u64 + 1),
            };
            self.calls.insert(id.clone(), call);
        }
        for (_, id, sequence) in &write.effects.answered {
            let call = KnownCall {
                state: CallState::Answered,
                sequence: *sequence,
            };
            self.calls.insert(id.clone(), call);
        }
        self.last_user_sequence = write.newest_user.or(self.last_user_sequence);
        self.last_response_id = write.newest_response_id.clone().or(self.last_response_id.take());
        if let (Some(idempotency), Some(record)) = (&batch.idempotency, write.idempotency) {
            self.idempotency
                .insert(idempotency.key.as_str().to_owned(), record);
        }
    }
}
