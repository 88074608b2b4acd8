//! The in-memory store: the embedded default, so `cargo run` works anywhere. Data lives in the
//! process and is lost on restart. One mutex guards all conversations; every operation under it
//! is a bounded in-memory step, never an await.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
    time::SystemTime,
};

use async_trait::async_trait;

use super::{MessagePage, Store, StoreError};
use crate::domain::{
    AppendBatch, AppendDecision, AppendOutcome, CallState, ConversationId, IdempotencyRecord, Sequence,
    StoredMessage, TenantId, decide_append,
    tool_protocol::{check_tool_protocol, mentioned_call_ids},
};

type Key = (TenantId, ConversationId);

#[derive(Debug, Default)]
struct Conversation {
    messages: Vec<StoredMessage>,
    calls: HashMap<String, CallState>,
    idempotency: HashMap<String, IdempotencyRecord>,
}

impl Conversation {
    fn last_sequence(&self) -> Sequence {
        self.messages.last().map_or(Sequence::ZERO, |m| m.sequence)
    }
}

/// Conversations held in process memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    conversations: Mutex<HashMap<Key, Conversation>>,
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
        let hash = batch.payload_hash();
        let mut conversations = self.lock();
        let empty = Conversation::default();
        let existing = conversations
            .get(&key(tenant, &batch.conversation_id))
            .unwrap_or(&empty);
        let record = batch
            .idempotency_key
            .as_ref()
            .and_then(|k| existing.idempotency.get(k.as_str()).copied());
        let last = existing.last_sequence();
        match decide_append(batch, hash, last, record) {
            AppendDecision::Proceed => {}
            AppendDecision::Replay(outcome) => return Ok(outcome),
            AppendDecision::KeyReused => return Err(StoreError::IdempotencyKeyReused),
            AppendDecision::SequenceMismatch { current } => {
                return Err(StoreError::SequenceMismatch { current });
            }
        }
        let known: HashMap<String, CallState> = mentioned_call_ids(&batch.messages)
            .into_iter()
            .filter_map(|id| existing.calls.get(&id).map(|s| (id, *s)))
            .collect();
        let effects = check_tool_protocol(&batch.messages, &known)
            .map_err(|violations| StoreError::Invalid { violations })?;

        let conversation = conversations
            .entry(key(tenant, &batch.conversation_id))
            .or_default();
        let now = SystemTime::now();
        for (i, message) in batch.messages.iter().enumerate() {
            conversation.messages.push(StoredMessage {
                sequence: last.plus(i as u64 + 1),
                created_at: now,
                message: message.clone(),
            });
        }
        for (_, id) in effects.new_calls {
            conversation.calls.insert(id, CallState::Open);
        }
        for (_, id) in effects.answered {
            conversation.calls.insert(id, CallState::Answered);
        }
        let outcome = AppendOutcome::stored(last, batch.messages.len());
        if let Some(k) = &batch.idempotency_key {
            conversation.idempotency.insert(
                k.as_str().to_owned(),
                IdempotencyRecord {
                    payload_hash: hash,
                    outcome,
                },
            );
        }
        Ok(outcome)
    }

    async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        limit: usize,
    ) -> Result<MessagePage, StoreError> {
        let conversations = self.lock();
        let conversation = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        // Sequences are 1..=n at indexes 0..n, so `after` is also the index of the next message.
        let start = (after.get() as usize).min(conversation.messages.len());
        let rest = &conversation.messages[start..];
        let messages = rest.iter().take(limit).cloned().collect();
        Ok(MessagePage {
            messages,
            has_more: rest.len() > limit,
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

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
