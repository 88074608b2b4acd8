//! The in-memory store: the embedded default, so `cargo run` works anywhere. Data lives in the
//! process and is lost on restart. One mutex guards all conversations; every operation under it
//! is a bounded in-memory step, never an await.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::SystemTime,
};

use async_trait::async_trait;

use super::{
    CappedPage, EmbeddingBacklog, EmbeddingBatch, Lease, LogVersion, MemoryBase, MemoryState, MessagePage,
    NewSummary, OpenedContext, Redaction, RetentionRule, Rewind, SearchPage, SearchSpec, Store, StoreError,
    SummaryState, Swept,
};
use crate::{
    domain::{
        AppendOutcome, ConversationId, CountedBatch, Sequence, TenantId,
        changes::{ChangeKind, ChangePage, ChangeQuery, Cursor, NewChange},
        context::{ContextSnapshot, PageRequest, SummarySection, cost::CountedLate},
        conversation::{self, ConversationPage, ConversationPatch, IfMissing, ListQuery},
        summary::Summary,
        working_memory::WorkingMemory,
    },
    runtime::deadline::Deadline,
};

mod append;
mod changes;
mod entry;
mod leases;
mod pages;
mod ready;
mod rewrite;
mod search;
mod search_index;
mod state;
mod writes;

use leases::{MemoryLease, SweeperLease};
use pages::{capped, fitting};
use rewrite::MemoryRewind;
use state::{Key, State, Written};

/// Conversations held in process memory.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    conversations: Mutex<State>,
    leases: Arc<Mutex<HashSet<Key>>>,
    /// True while the retention sweeper's lease is held.
    sweeping: Arc<std::sync::atomic::AtomicBool>,
    /// Told of every write that recorded a change.
    changed: super::ChangeSignal,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store's lock, for a write: watchers hear of it when the guard is dropped.
    fn write(&self) -> Written<'_> {
        Written {
            state: self.lock(),
            signal: &self.changed,
        }
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
        batch: &CountedBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, StoreError> {
        append::append(
            &mut self.write(),
            key(tenant, &batch.conversation_id),
            batch,
            deadline,
        )
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
        let CappedPage {
            messages,
            cut_by_size: reached,
        } = fitting(rest.iter().take(limit), max_bytes);
        Ok(MessagePage {
            messages,
            has_more: rest.len() > limit || reached,
        })
    }

    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<u64, StoreError> {
        super::claim_commit(deadline)?;
        let key = key(tenant, conversation);
        let mut state = self.write();
        let removed = state.remove(&key).ok_or(StoreError::NotFound)?;
        let change = NewChange::whole(ChangeKind::Deleted);
        state.changes.record(&key, change, SystemTime::now());
        Ok(removed.messages.len() as u64)
    }

    async fn open_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first_page: usize,
        max_bytes: usize,
    ) -> Result<OpenedContext, StoreError> {
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
        Ok(OpenedContext {
            snapshot,
            newest: capped(newest, max_bytes),
            version: c.log_version(),
        })
    }

    async fn tail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        _version: LogVersion,
        page: PageRequest,
    ) -> Result<CappedPage, StoreError> {
        // Every page is read under the store's lock from the one copy of the log.
        let conversations = self.lock();
        let Some(c) = conversations.get(&key(tenant, conversation)) else {
            return Ok(CappedPage::default());
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
        Ok(pages::open_calls(c, ids))
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
        let CappedPage {
            messages,
            cut_by_size: reached,
        } = capped(c.messages[watermark.min(c.messages.len())..].iter(), max_bytes);
        Ok(SummaryState {
            summary,
            messages,
            complete: !reached,
            last_sequence: c.last_sequence(),
            redactions: c.redactions,
            rewinds: c.rewinds,
        })
    }

    async fn store_summary(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: Sequence,
        summary: NewSummary,
        deadline: Option<&Deadline>,
    ) -> Result<Summary, StoreError> {
        super::claim_commit(deadline)?;
        self.write()
            .store_summary(&key(tenant, conversation), base, summary)
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
        Ok(pages::memory_state(c, messages_up_to))
    }

    async fn store_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: MemoryBase,
        memory: &WorkingMemory,
        deadline: Option<&Deadline>,
    ) -> Result<WorkingMemory, StoreError> {
        super::claim_commit(deadline)?;
        self.write()
            .store_memory(&key(tenant, conversation), base, memory)
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
        if_missing: IfMissing,
        deadline: Option<&Deadline>,
    ) -> Result<conversation::Conversation, StoreError> {
        super::claim_commit(deadline)?;
        self.write().update(&key(tenant, conversation), patch, if_missing)
    }

    async fn list_conversations(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<ConversationPage, StoreError> {
        Ok(self.lock().list(tenant, query))
    }

    async fn fork_conversation(
        &self,
        tenant: &TenantId,
        source: &ConversationId,
        through: Sequence,
        target: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<conversation::Conversation, StoreError> {
        super::claim_commit(deadline)?;
        self.write().fork(tenant, source, through, target)
    }

    async fn redact_message(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        sequence: Sequence,
        deadline: Option<&Deadline>,
    ) -> Result<Redaction, StoreError> {
        super::claim_commit(deadline)?;
        let mut conversations = self.write();
        let key = key(tenant, conversation);
        let redaction = conversations
            .get_mut(&key)
            .ok_or(StoreError::NotFound)?
            .redact(sequence)?;
        let change = NewChange::new(ChangeKind::Redacted, sequence, sequence);
        conversations.changes.record(&key, change, SystemTime::now());
        Ok(redaction)
    }

    async fn store_late_counts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        counts: &[CountedLate],
    ) -> Result<(), StoreError> {
        if let Some(entry) = self.write().get_mut(&key(tenant, conversation)) {
            entry.keep_late_counts(counts);
        }
        Ok(())
    }

    async fn rewind_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        expected_last: Option<Sequence>,
        deadline: Option<&Deadline>,
    ) -> Result<Rewind, StoreError> {
        super::claim_commit(deadline)?;
        let mut conversations = self.write();
        let key = key(tenant, conversation);
        let c = conversations.get_mut(&key).ok_or(StoreError::NotFound)?;
        let rewind = ready::run_now(conversation::rewind(MemoryRewind(c), after, expected_last))?;
        let now = SystemTime::now();
        conversations.touch(&key, now);
        let change = NewChange::new(
            ChangeKind::Rewound,
            after.plus(1),
            after.plus(rewind.messages_removed),
        );
        conversations.changes.record(&key, change, now);
        Ok(rewind)
    }

    async fn search_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        spec: &SearchSpec,
    ) -> Result<SearchPage, StoreError> {
        let query_vector = match &spec.semantic {
            Some(embedding) => embedding.get().await,
            None => None,
        };
        let conversations = self.lock();
        let c = conversations
            .get(&key(tenant, conversation))
            .ok_or(StoreError::NotFound)?;
        Ok(search::search(c, spec, query_vector.as_deref()))
    }

    async fn term_holders(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        query: &crate::domain::search::SearchQuery,
        through: Option<Sequence>,
    ) -> Result<Option<crate::domain::search::TermHolders>, StoreError> {
        let conversations = self.lock();
        Ok(conversations
            .get(&key(tenant, conversation))
            .map(|c| search::term_holders(c, query, through)))
    }

    async fn embedding_backlog(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Option<EmbeddingBacklog>, StoreError> {
        let conversations = self.lock();
        let Some(c) = conversations.get(&key(tenant, conversation)) else {
            return Ok(None);
        };
        Ok(Some(search::embedding_backlog(c, limit, max_bytes)))
    }

    async fn store_embeddings(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: &EmbeddingBatch,
    ) -> Result<bool, StoreError> {
        let mut conversations = self.lock();
        let Some(c) = conversations.get_mut(&key(tenant, conversation)) else {
            return Ok(false);
        };
        Ok(search::store_embeddings(c, batch))
    }

    async fn sweep_expired(&self, rule: RetentionRule) -> Result<Swept, StoreError> {
        Ok(self.write().sweep(&rule))
    }

    async fn read_changes(&self, tenant: &TenantId, query: &ChangeQuery) -> Result<ChangePage, StoreError> {
        Ok(self.lock().changes.read(tenant, query, SystemTime::now()))
    }

    async fn change_horizon(&self) -> Result<Cursor, StoreError> {
        Ok(self.lock().changes.horizon(SystemTime::now()))
    }

    async fn oldest_change(
        &self,
        tenant: &TenantId,
        since: SystemTime,
    ) -> Result<Option<Cursor>, StoreError> {
        Ok(self.lock().changes.oldest(tenant, since))
    }

    async fn sweep_changes(&self, before: SystemTime, batch: usize) -> Result<u64, StoreError> {
        Ok(self.lock().changes.sweep(before, batch))
    }

    fn change_signal(&self) -> &super::ChangeSignal {
        &self.changed
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
