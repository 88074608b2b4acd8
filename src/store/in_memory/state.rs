//! One conversation of the in-memory store and the map that holds them: appends, forks and
//! redactions applied to plain data under the store's lock.

use std::{
    collections::{BTreeSet, HashMap},
    ops::{Deref, DerefMut},
    time::SystemTime,
};

use crate::{
    domain::{
        AppendBatch, AppendState, CallState, ConversationId, IdempotencyRecord, KnownCall, PayloadHash,
        Sequence, StoredMessage, TenantId, Usage, WritePlan,
        context::anchor::{LogEnd, LogPosition},
        conversation::{
            self, ActivityKey, ConversationPage, ConversationStatus, ForkPlan, ForkSource, ListQuery, micros,
        },
        summary::Summary,
        tool_protocol::mentioned_call_ids,
        working_memory::WorkingMemory,
    },
    store::{Redaction, RetentionRule, Rewind, StoreError},
};

use super::search_index::SearchIndex;

/// A conversation's place in the store: its tenant and its id.
pub(super) type Key = (TenantId, ConversationId);

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
    fn recount_usage(&mut self) {
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

    /// What [`plan`] needs to decide `batch`.
    pub(super) fn append_state(&self, batch: &AppendBatch) -> AppendState {
        AppendState {
            last_sequence: self.last_sequence(),
            idempotency: batch
                .idempotency_key
                .as_ref()
                .and_then(|k| self.idempotency.get(k.as_str()).copied()),
            known_calls: mentioned_call_ids(&batch.messages)
                .into_iter()
                .filter_map(|id| self.calls.get(&id).map(|k| (id, *k)))
                .collect(),
        }
    }

    /// Writes an accepted batch.
    pub(super) fn apply(&mut self, batch: &AppendBatch, write: WritePlan) {
        let now = SystemTime::now();
        for (i, message) in batch.messages.iter().enumerate() {
            let sequence = write.sequence_of(i);
            if message.pinned && !message.exclude_from_context {
                self.pinned.push(sequence);
            }
            let tokens = batch.tokens.get(i).copied().unwrap_or_default();
            self.usage = self.usage.plus(message.usage);
            let position = self.end.place(message, tokens.approx);
            self.positions.push(position);
            self.messages.push(StoredMessage {
                sequence,
                created_at: now,
                tokens,
                reasoning_tokens: batch.reasoning_tokens.get(i).copied().unwrap_or_default(),
                native_tokens: batch.native_tokens.get(i).copied().unwrap_or_default(),
                call_sequence: write.call_sequences[i],
                turn_anchor: position.anchor(message),
                message: message.clone(),
            });
            self.search.push(batch.search.get(i).cloned().unwrap_or_default());
        }
        for (i, id) in write.effects.new_calls {
            let call = KnownCall {
                state: CallState::Open,
                sequence: write.after.plus(i as u64 + 1),
            };
            self.calls.insert(id, call);
        }
        for (_, id, sequence) in write.effects.answered {
            let call = KnownCall {
                state: CallState::Answered,
                sequence,
            };
            self.calls.insert(id, call);
        }
        self.last_user_sequence = write.newest_user.or(self.last_user_sequence);
        self.last_response_id = write.newest_response_id.or(self.last_response_id.take());
        if let (Some(k), Some(record)) = (&batch.idempotency_key, write.idempotency) {
            self.idempotency.insert(k.as_str().to_owned(), record);
        }
    }
}

/// The conversations, and each tenant's listing order beside them.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) conversations: HashMap<Key, Conversation>,
    /// Every conversation's [`ActivityKey`], by tenant.
    pub(super) activity: HashMap<TenantId, BTreeSet<ActivityKey>>,
}

impl Deref for State {
    type Target = HashMap<Key, Conversation>;

    fn deref(&self) -> &Self::Target {
        &self.conversations
    }
}

impl DerefMut for State {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conversations
    }
}

impl State {
    /// Records activity on the conversation at `now` (creating it when missing), keeping the
    /// listing order.
    pub(super) fn touch(&mut self, key: &Key, now: SystemTime) -> &mut Conversation {
        let now = conversation::to_micros(now);
        let index = self.activity.entry(key.0.clone()).or_default();
        let conversation = self
            .conversations
            .entry(key.clone())
            .or_insert_with(|| Conversation::new(now));
        index.remove(&conversation.activity_key(&key.1));
        conversation.resource.updated_at = now;
        index.insert(conversation.activity_key(&key.1));
        conversation
    }

    /// A page of the tenant's conversations matching `query`, newest activity first.
    pub(super) fn list(&self, tenant: &TenantId, query: &ListQuery) -> ConversationPage {
        let Some(index) = self.activity.get(tenant) else {
            return ConversationPage {
                conversations: Vec::new(),
                has_more: false,
            };
        };
        let newest_first: Box<dyn Iterator<Item = &ActivityKey>> = match &query.after {
            Some(after) => Box::new(index.range(..after).rev()),
            None => Box::new(index.iter().rev()),
        };
        let mut matching = newest_first.filter_map(|k| {
            let c = self.get(&(tenant.clone(), k.id.clone()))?;
            let resource = c.resource(&k.id);
            query.matches(&resource).then_some(resource)
        });
        let conversations: Vec<_> = matching.by_ref().take(query.limit).collect();
        let has_more = matching.next().is_some();
        ConversationPage {
            conversations,
            has_more,
        }
    }

    /// Removes a conversation and its place in the listing.
    pub(super) fn remove(&mut self, key: &Key) -> Option<Conversation> {
        let removed = self.conversations.remove(key)?;
        if let Some(index) = self.activity.get_mut(&key.0) {
            index.remove(&removed.activity_key(&key.1));
        }
        Some(removed)
    }
}

impl Conversation {
    /// A new conversation holding this one's log through `through`, as [`ForkPlan`] decides
    /// (its origin is for the caller to set).
    pub(super) fn fork(&self, through: Sequence, now: SystemTime) -> Result<Conversation, StoreError> {
        let kept = through.get() as usize;
        let after = self.messages.get(kept..).unwrap_or_default();
        let source = ForkSource {
            last: self.last_sequence(),
            split_call: after
                .iter()
                .filter_map(|m| m.call_sequence)
                .find(|&call| call <= through),
            summary: self
                .summaries
                .iter()
                .rev()
                .find(|s| s.through_sequence <= through)
                .cloned(),
            memory: self.memory.clone(),
        };
        let plan = ForkPlan::decide(through, source).map_err(|refusal| StoreError::Invalid {
            violations: refusal.violations(),
        })?;
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
        Ok(fork)
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

    /// Removes the messages after `after` and what was derived from them (see
    /// [`crate::store::Store::rewind_conversation`]).
    pub(super) fn rewind(
        &mut self,
        after: Sequence,
        expected_last: Option<Sequence>,
    ) -> Result<Rewind, StoreError> {
        let last = self.last_sequence();
        conversation::check_rewind(after, last, expected_last).map_err(|refusal| match refusal {
            conversation::RewindRefusal::Stale { current } => StoreError::SequenceMismatch { current },
            conversation::RewindRefusal::PastEnd { last } => StoreError::Invalid {
                violations: conversation::RewindRefusal::violations(last),
            },
        })?;
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
        Ok(Rewind {
            messages_removed: removed.len() as u64,
            last_sequence: after,
            summaries_removed,
            summary_through_sequence: self
                .summaries
                .last()
                .map_or(Sequence::ZERO, |s| s.through_sequence),
            memory_version: self.memory.as_ref().map_or(0, |m| m.version),
        })
    }
}
