//! The in-memory store: the embedded default, so `cargo run` works anywhere. Data lives in the
//! process and is lost on restart. One mutex guards all conversations; every operation under it
//! is a bounded in-memory step, never an await.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    ops::{Deref, DerefMut},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::SystemTime,
};

use async_trait::async_trait;

use super::{
    HeldLease, Lease, MemoryState, MessagePage, NewSummary, Redaction, RetentionRule, Store, StoreError,
    SummaryState, Swept,
};
use crate::domain::{
    AppendBatch, AppendOutcome, AppendPlan, AppendState, CallState, ConversationId, IdempotencyRecord,
    KnownCall, PayloadHash, Sequence, StoredMessage, TenantId, WritePlan,
    append::plan,
    context::{ContextSnapshot, PageRequest, SummarySection, TokenCounts, anchor::LogEnd},
    conversation::{
        self, ActivityKey, ConversationPage, ConversationPatch, ConversationStatus, ForkRefusal, ListQuery,
        micros,
    },
    summary::Summary,
    tool_protocol::mentioned_call_ids,
    working_memory::WorkingMemory,
};

type Key = (TenantId, ConversationId);

#[derive(Debug, Clone)]
struct Conversation {
    /// Title, status, labels, times, expiry, origin (the counters are derived).
    resource: Resource,
    /// Message with sequence `n` is at index `n - 1`.
    messages: Vec<StoredMessage>,
    calls: HashMap<String, KnownCall>,
    idempotency: HashMap<String, IdempotencyRecord>,
    pinned: Vec<Sequence>,
    last_user_sequence: Option<Sequence>,
    last_response_id: Option<String>,
    /// Every summary version, oldest first.
    summaries: Vec<Summary>,
    memory: Option<WorkingMemory>,
    /// Where the next message goes in the log's token stream.
    end: LogEnd,
    /// Each message's place in it, as appended (redaction does not move it).
    positions: Vec<crate::domain::context::anchor::LogPosition>,
    /// RedactMessage calls so far (see [`NewSummary::redactions`]).
    redactions: u64,
}

/// What a conversation's resource holds beside its log.
#[derive(Debug, Clone)]
struct Resource {
    title: String,
    status: ConversationStatus,
    labels: std::collections::BTreeMap<String, String>,
    created_at: SystemTime,
    /// Kept at microsecond resolution, as PostgreSQL keeps it.
    updated_at: SystemTime,
    expire_time: Option<SystemTime>,
    forked_from: Option<(ConversationId, Sequence)>,
}

impl Conversation {
    fn new(now: SystemTime) -> Self {
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
        }
    }

    /// The conversation as a resource.
    fn resource(&self, id: &ConversationId) -> conversation::Conversation {
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
        }
    }

    fn activity_key(&self, id: &ConversationId) -> ActivityKey {
        ActivityKey {
            micros: micros(self.resource.updated_at),
            id: id.clone(),
        }
    }

    /// True when `rule` says the conversation has expired.
    fn expired(&self, rule: &RetentionRule) -> bool {
        match self.resource.expire_time {
            Some(at) => at <= rule.now,
            None => rule.inactive.is_some_and(|inactive| {
                rule.now
                    .duration_since(self.resource.updated_at)
                    .is_ok_and(|idle| idle > inactive)
            }),
        }
    }

    fn last_sequence(&self) -> Sequence {
        self.messages.last().map_or(Sequence::ZERO, |m| m.sequence)
    }

    fn at(&self, sequence: Sequence) -> Option<&StoredMessage> {
        (sequence.get() as usize)
            .checked_sub(1)
            .and_then(|i| self.messages.get(i))
    }

    /// What [`plan`] needs to decide `batch`.
    fn append_state(&self, batch: &AppendBatch) -> AppendState {
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
    fn apply(&mut self, batch: &AppendBatch, write: WritePlan) {
        let now = SystemTime::now();
        for (i, message) in batch.messages.iter().enumerate() {
            let sequence = write.sequence_of(i);
            if message.pinned && !message.exclude_from_context {
                self.pinned.push(sequence);
            }
            let tokens = batch.tokens.get(i).copied().unwrap_or_default();
            let position = self.end.place(message, tokens.approx);
            self.positions.push(position);
            self.messages.push(StoredMessage {
                sequence,
                created_at: now,
                tokens,
                reasoning_tokens: batch.reasoning_tokens.get(i).copied().unwrap_or_default(),
                call_sequence: write.call_sequences[i],
                turn_anchor: position.anchor(message),
                message: message.clone(),
            });
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
struct State {
    conversations: HashMap<Key, Conversation>,
    /// Every conversation's [`ActivityKey`], by tenant.
    activity: HashMap<TenantId, BTreeSet<ActivityKey>>,
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
    fn touch(&mut self, key: &Key, now: SystemTime) -> &mut Conversation {
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

    /// Removes a conversation and its place in the listing.
    fn remove(&mut self, key: &Key) -> Option<Conversation> {
        let removed = self.conversations.remove(key)?;
        if let Some(index) = self.activity.get_mut(&key.0) {
            index.remove(&removed.activity_key(&key.1));
        }
        Some(removed)
    }
}

/// Conversations held in process memory.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    conversations: Mutex<State>,
    leases: Arc<Mutex<HashSet<Key>>>,
    /// True while the retention sweeper's lease is held.
    sweeping: Arc<std::sync::atomic::AtomicBool>,
}

/// The retention sweeper's lease of the in-memory store: cleared on drop.
#[derive(Debug)]
struct SweeperLease(Arc<std::sync::atomic::AtomicBool>);

#[async_trait]
impl HeldLease for SweeperLease {
    async fn release(self: Box<Self>) {}
}

impl Drop for SweeperLease {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// A background-summarizer lease of the in-memory store: removed from the held set on drop.
#[derive(Debug)]
struct MemoryLease {
    held: Arc<Mutex<HashSet<Key>>>,
    key: Key,
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

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No operation leaves a conversation half-changed before a panic could occur, so the
        // data behind a poisoned lock is still consistent.
        self.conversations.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(tenant: &TenantId, conversation: &ConversationId) -> Key {
    (tenant.clone(), conversation.clone())
}

#[async_trait]
impl Store for InMemoryStore {
    async fn append_messages(
        &self,
        tenant: &TenantId,
        batch: &AppendBatch,
    ) -> Result<AppendOutcome, StoreError> {
        let mut conversations = self.lock();
        let key = key(tenant, &batch.conversation_id);
        let state = conversations
            .get(&key)
            .map_or_else(AppendState::default, |c| c.append_state(batch));
        let write = match plan(batch, &state)? {
            AppendPlan::Replay(outcome) => return Ok(outcome),
            AppendPlan::Write(write) => write,
        };
        let outcome = write.outcome;
        conversations.touch(&key, SystemTime::now()).apply(batch, write);
        Ok(outcome)
    }

    async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        limit: usize,
        max_bytes: usize,
    ) -> Result<MessagePage, StoreError> {
        let conversations = self.lock();
        let conversation = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let start = (after.get() as usize).min(conversation.messages.len());
        let rest = &conversation.messages[start..];
        let (messages, reached) = capped(rest.iter().take(limit), max_bytes);
        Ok(MessagePage {
            messages,
            has_more: rest.len() > limit || reached,
        })
    }

    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<u64, StoreError> {
        let removed = self
            .lock()
            .remove(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        Ok(removed.messages.len() as u64)
    }

    async fn open_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first_page: usize,
        max_bytes: usize,
    ) -> Result<(ContextSnapshot, Vec<StoredMessage>, bool), StoreError> {
        let conversations = self.lock();
        let c = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let newest = c
            .messages
            .iter()
            .rev()
            .filter(|m| !m.message.exclude_from_context)
            .take(first_page);
        let snapshot = ContextSnapshot {
            last_sequence: c.last_sequence(),
            last_user_sequence: c.last_user_sequence,
            last_response_id: c.last_response_id.clone(),
            pinned: c.pinned.iter().filter_map(|s| c.at(*s).cloned()).collect(),
            summary: c.summaries.last().map(|s| SummarySection {
                text: s.text.clone(),
                through_sequence: s.through_sequence,
            }),
            memory: c.memory.clone(),
            pending_calls: HashMap::new(),
        };
        let (newest, reached) = capped(newest, max_bytes);
        Ok((snapshot, newest, reached))
    }

    async fn tail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        page: PageRequest,
    ) -> Result<(Vec<StoredMessage>, bool), StoreError> {
        let conversations = self.lock();
        let Some(c) = conversations.get(&key(tenant, conversation)) else {
            return Ok((Vec::new(), false));
        };
        let end = (page.before.get() as usize)
            .saturating_sub(1)
            .min(c.messages.len());
        let start = (page.floor.get() as usize).min(end);
        let newest_first = c.messages[start..end]
            .iter()
            .rev()
            .filter(|m| !m.message.exclude_from_context)
            .take(page.limit);
        Ok(capped(newest_first, page.max_bytes))
    }

    async fn open_calls(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[String],
    ) -> Result<HashMap<String, Sequence>, StoreError> {
        let conversations = self.lock();
        let Some(c) = conversations.get(&key(tenant, conversation)) else {
            return Ok(HashMap::new());
        };
        let is_open = |id: &str| matches!(c.calls.get(id), Some(k) if k.state == CallState::Open);
        let mut open = HashMap::new();
        for id in ids.iter().filter(|id| is_open(id)) {
            let sequence = c.calls[id].sequence;
            let Some(call_message) = c.at(sequence) else {
                continue;
            };
            for call in call_message
                .message
                .tool_calls
                .iter()
                .filter(|call| is_open(&call.id))
            {
                open.insert(call.id.clone(), sequence);
            }
        }
        Ok(open)
    }

    async fn summary_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        max_bytes: usize,
    ) -> Result<SummaryState, StoreError> {
        let conversations = self.lock();
        let c = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let summary = c.summaries.last().cloned();
        let watermark = summary.as_ref().map_or(0, |s| s.through_sequence.get() as usize);
        let (messages, reached) = capped(c.messages[watermark.min(c.messages.len())..].iter(), max_bytes);
        Ok(SummaryState {
            summary,
            messages,
            complete: !reached,
            last_sequence: c.last_sequence(),
            redactions: c.redactions,
        })
    }

    async fn store_summary(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: Sequence,
        summary: NewSummary,
    ) -> Result<Summary, StoreError> {
        let mut conversations = self.lock();
        let c = conversations
            .get_mut(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let current = c.summaries.last().map_or(Sequence::ZERO, |s| s.through_sequence);
        if current != base
            || summary.through_sequence <= base
            || summary.through_sequence > c.last_sequence()
            || summary.redactions != c.redactions
        {
            return Err(StoreError::SummaryMoved { current });
        }
        let stored = Summary {
            text: summary.text,
            through_sequence: summary.through_sequence,
            summarizer: summary.summarizer,
            version: c.summaries.len() as u64 + 1,
            updated_at: SystemTime::now(),
        };
        c.summaries.push(stored.clone());
        Ok(stored)
    }

    async fn memory_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        messages_up_to: Option<usize>,
    ) -> Result<MemoryState, StoreError> {
        let conversations = self.lock();
        let c = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let memory = c.memory.clone().unwrap_or_default();
        let from = (memory.through_sequence.get() as usize).min(c.messages.len());
        let (messages, reached) = match messages_up_to {
            Some(max_bytes) => capped(c.messages[from..].iter(), max_bytes),
            None => (Vec::new(), false),
        };
        Ok(MemoryState {
            memory,
            messages,
            complete: !reached,
            last_sequence: c.last_sequence(),
        })
    }

    async fn store_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        expected_version: u64,
        memory: &WorkingMemory,
    ) -> Result<WorkingMemory, StoreError> {
        let mut conversations = self.lock();
        let c = conversations
            .get_mut(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let current = c.memory.as_ref().map_or(0, |m| m.version);
        if current != expected_version {
            return Err(StoreError::MemoryVersionMismatch { current });
        }
        let stored = WorkingMemory {
            version: current + 1,
            updated_at: Some(SystemTime::now()),
            ..memory.clone()
        };
        c.memory = Some(stored.clone());
        Ok(stored)
    }

    async fn try_summarizer_lease(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<Lease>, StoreError> {
        let key = key(tenant, conversation);
        if !self.lock().contains_key(&key) {
            return Ok(None);
        }
        let mut held = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        if !held.insert(key.clone()) {
            return Ok(None);
        }
        Ok(Some(Lease::new(MemoryLease {
            held: self.leases.clone(),
            key,
        })))
    }

    async fn get_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<conversation::Conversation, StoreError> {
        let conversations = self.lock();
        let c = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        Ok(c.resource(conversation))
    }

    async fn update_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        patch: &ConversationPatch,
        allow_missing: bool,
    ) -> Result<conversation::Conversation, StoreError> {
        let mut conversations = self.lock();
        let key = key(tenant, conversation);
        if !allow_missing && !conversations.contains_key(&key) {
            return Err(StoreError::NotFound);
        }
        let c = conversations.touch(&key, SystemTime::now());
        let mut resource = c.resource(conversation);
        patch.apply_to(&mut resource);
        c.resource.title = resource.title;
        c.resource.status = resource.status;
        c.resource.labels = resource.labels;
        c.resource.expire_time = resource.expire_time.map(conversation::to_micros);
        Ok(c.resource(conversation))
    }

    async fn list_conversations(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<ConversationPage, StoreError> {
        let state = self.lock();
        let Some(index) = state.activity.get(tenant) else {
            return Ok(ConversationPage {
                conversations: Vec::new(),
                has_more: false,
            });
        };
        let newest_first: Box<dyn Iterator<Item = &ActivityKey>> = match &query.after {
            Some(after) => Box::new(index.range(..after).rev()),
            None => Box::new(index.iter().rev()),
        };
        let mut matching = newest_first.filter_map(|k| {
            let c = state.get(&(tenant.clone(), k.id.clone()))?;
            let resource = c.resource(&k.id);
            query.matches(&resource).then_some(resource)
        });
        let conversations: Vec<_> = matching.by_ref().take(query.limit).collect();
        let has_more = matching.next().is_some();
        Ok(ConversationPage {
            conversations,
            has_more,
        })
    }

    async fn fork_conversation(
        &self,
        tenant: &TenantId,
        source: &ConversationId,
        through: Sequence,
        target: &ConversationId,
    ) -> Result<conversation::Conversation, StoreError> {
        let mut conversations = self.lock();
        let c = conversations
            .get(&key(tenant, source))
            .ok_or(StoreError::NotFound)?;
        let last = c.last_sequence();
        if through > last {
            return Err(StoreError::Invalid {
                violations: ForkRefusal::PastEnd { last }.violations(),
            });
        }
        let kept = through.get() as usize;
        let splits_group = c.messages[kept..]
            .iter()
            .any(|m| m.call_sequence.is_some_and(|call| call <= through));
        if splits_group {
            return Err(StoreError::Invalid {
                violations: ForkRefusal::InsideToolGroup.violations(),
            });
        }
        let target_key = key(tenant, target);
        if conversations.contains_key(&target_key) {
            return Err(StoreError::AlreadyExists);
        }
        let now = SystemTime::now();
        let mut fork = Conversation::new(now);
        fork.resource.forked_from = Some((source.clone(), through));
        fork.resource.title = c.resource.title.clone();
        fork.resource.labels = c.resource.labels.clone();
        fork.messages = c.messages[..kept].to_vec();
        fork.calls = c
            .calls
            .iter()
            .filter(|(_, call)| call.sequence <= through)
            .map(|(id, call)| (id.clone(), *call))
            .collect();
        fork.pinned = c.pinned.iter().copied().filter(|s| *s <= through).collect();
        let in_context = fork.messages.iter().filter(|m| !m.message.exclude_from_context);
        fork.last_user_sequence = in_context
            .filter(|m| m.message.role == crate::domain::Role::User)
            .map(|m| m.sequence)
            .next_back();
        fork.last_response_id = fork
            .messages
            .iter()
            .rev()
            .find(|m| m.message.role == crate::domain::Role::Assistant && !m.message.response_id.is_empty())
            .map(|m| m.message.response_id.clone());
        fork.summaries = c
            .summaries
            .iter()
            .rev()
            .find(|s| s.through_sequence <= through)
            .map(|s| crate::domain::summary::Summary {
                version: 1,
                ..s.clone()
            })
            .into_iter()
            .collect();
        fork.memory = c
            .memory
            .as_ref()
            .and_then(|m| conversation::memory_within(m, through))
            .map(|m| WorkingMemory {
                updated_at: Some(now),
                ..m
            });
        // The source's placement, as appended: the end is where message `through + 1` was
        // placed (or the source's end), the newest turn start the one before it.
        fork.positions = c.positions[..kept].to_vec();
        fork.end = match c.positions.get(kept) {
            Some(next) => LogEnd {
                offset: next.offset,
                last_turn: next.previous_turn,
            },
            None => c.end,
        };
        conversations.insert(target_key.clone(), fork);
        let fork = conversations.touch(&target_key, now);
        Ok(fork.resource(target))
    }

    async fn redact_message(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        sequence: Sequence,
    ) -> Result<Redaction, StoreError> {
        let mut conversations = self.lock();
        let c = conversations
            .get_mut(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let index = (sequence.get() as usize)
            .checked_sub(1)
            .filter(|i| *i < c.messages.len())
            .ok_or(StoreError::MessageNotFound)?;
        c.redactions += 1;
        let stored = &mut c.messages[index];
        stored.message = conversation::tombstone(&stored.message);
        stored.tokens = TokenCounts::of(&stored.message);
        stored.reasoning_tokens = TokenCounts::default();
        let message = stored.clone();
        let before = c.summaries.len();
        c.summaries.retain(|s| s.through_sequence < sequence);
        let summaries_removed = (before - c.summaries.len()) as u64;
        // A new version even when nothing cited the message: an extraction that read the text
        // before the redaction cannot be stored after it.
        if let Some(memory) = &mut c.memory {
            conversation::forget_in_memory(memory, sequence);
            memory.version += 1;
            memory.updated_at = Some(SystemTime::now());
        }
        for record in c.idempotency.values_mut() {
            let outcome = &record.outcome;
            if outcome.first_sequence <= sequence && sequence <= outcome.last_sequence {
                record.payload_hash = PayloadHash::REDACTED;
            }
        }
        Ok(Redaction {
            message,
            summaries_removed,
            summary_through_sequence: c.summaries.last().map_or(Sequence::ZERO, |s| s.through_sequence),
            memory_version: c.memory.as_ref().map_or(0, |m| m.version),
        })
    }

    async fn sweep_expired(&self, rule: RetentionRule) -> Result<Swept, StoreError> {
        let mut conversations = self.lock();
        let expired: Vec<Key> = conversations
            .iter()
            .filter(|(_, c)| c.expired(&rule))
            .map(|(k, _)| k.clone())
            .take(rule.batch)
            .collect();
        let mut swept = Swept::default();
        for key in expired {
            if let Some(removed) = conversations.remove(&key) {
                swept.conversations += 1;
                swept.messages += removed.messages.len() as u64;
            }
        }
        Ok(swept)
    }

    async fn try_retention_lease(&self) -> Result<Option<Lease>, StoreError> {
        if self.sweeping.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Ok(None);
        }
        Ok(Some(Lease::new(SweeperLease(self.sweeping.clone()))))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Clones `messages` until their size reaches `max_bytes` (the message that reaches it is the
/// last; a first one always comes), as PostgreSQL's capped pages do; true when it was reached.
fn capped<'a>(
    messages: impl Iterator<Item = &'a StoredMessage>,
    max_bytes: usize,
) -> (Vec<StoredMessage>, bool) {
    let (mut out, mut bytes) = (Vec::new(), 0usize);
    for message in messages {
        if bytes >= max_bytes {
            break;
        }
        bytes += message.message.loaded_bytes();
        out.push(message.clone());
    }
    (out, bytes >= max_bytes)
}
