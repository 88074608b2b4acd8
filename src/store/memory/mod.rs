//! The in-memory store: the embedded default, so `cargo run` works anywhere. Data lives in the
//! process and is lost on restart. One mutex guards all conversations; every operation under it
//! is a bounded in-memory step, never an await.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::SystemTime,
};

use async_trait::async_trait;

use super::{HeldLease, Lease, MemoryState, MessagePage, NewSummary, Store, StoreError, SummaryState};
use crate::domain::{
    AppendBatch, AppendOutcome, AppendPlan, AppendState, CallState, ConversationId, IdempotencyRecord,
    KnownCall, Sequence, StoredMessage, TenantId, WritePlan,
    append::plan,
    context::{ContextSnapshot, PageRequest, SummarySection, anchor::LogEnd},
    memory::WorkingMemory,
    summary::Summary,
    tool_protocol::mentioned_call_ids,
};

type Key = (TenantId, ConversationId);

#[derive(Debug, Default)]
struct Conversation {
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
}

impl Conversation {
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
            self.messages.push(StoredMessage {
                sequence,
                created_at: now,
                tokens,
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

/// Conversations held in process memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    conversations: Mutex<HashMap<Key, Conversation>>,
    leases: Arc<Mutex<HashSet<Key>>>,
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

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Conversation>> {
        // No operation leaves a conversation half-changed before a panic could occur, so the
        // data behind a poisoned lock is still consistent.
        self.conversations.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn key(tenant: &TenantId, conversation: &ConversationId) -> Key {
    (tenant.clone(), conversation.clone())
}

#[async_trait]
impl Store for MemoryStore {
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
        conversations.entry(key).or_default().apply(batch, write);
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
        if current != base || summary.through_sequence <= base || summary.through_sequence > c.last_sequence()
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
        with_messages: bool,
        max_bytes: usize,
    ) -> Result<MemoryState, StoreError> {
        let conversations = self.lock();
        let c = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        let memory = c.memory.clone().unwrap_or_default();
        let from = (memory.through_sequence.get() as usize).min(c.messages.len());
        let (messages, reached) = if with_messages {
            capped(c.messages[from..].iter(), max_bytes)
        } else {
            (Vec::new(), false)
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
        let mut held = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        if !held.insert(key.clone()) {
            return Ok(None);
        }
        Ok(Some(Lease::new(MemoryLease {
            held: self.leases.clone(),
            key,
        })))
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
