//! The production store on PostgreSQL (tokio-postgres + deadpool-postgres), one file per
//! concept: [`append`], [`log`] reads and deletion, [`context`] reads, [`summary`], [`memory`],
//! [`leases`], [`rows`] (decoding and column lists) and [`migrations`].
//!
//! An append is one transaction: the conversation's counter row is incremented by the batch size
//! first (creating it on first use), which both allocates the sequences and locks the
//! conversation, so concurrent appenders to one conversation queue on that row and sequences stay
//! gapless. Everything after that decides against a stable state.

use std::{collections::HashMap, time::Duration};

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tracing::Instrument as _;

use super::{
    CacheStats, CappedPage, EmbeddingBacklog, EmbeddingBatch, Lease, LogVersion, MemoryBase, MemoryState,
    MessagePage, NewSummary, OpenedContext, PoolStats, Redaction, RetentionRule, Rewind, SearchPage,
    SearchSpec, Store, StoreError, SummaryState, Swept,
};
use crate::{
    domain::{
        AppendOutcome, ConversationId, CountedBatch, Sequence, TenantId,
        context::{PageRequest, cost::CountedLate},
        conversation::{Conversation, ConversationPage, ConversationPatch, IfMissing, ListQuery},
        summary::Summary,
        working_memory::WorkingMemory,
    },
    runtime::deadline::Deadline,
    runtime::traces,
};

mod append;
mod cache;
mod changes;
mod citus;
mod connect;
pub use connect::PostgresOptions;
mod conversations;
mod errors;
mod fork;
mod gate;
mod late_counts;
mod leases;
mod messages;
mod migrations;
mod redaction;
mod rewind;
mod rows;
mod search;
#[cfg(test)]
mod sql_rules;
mod summary;
mod tail;
mod vector_codes;
mod vectors;
mod working_memory;
mod writes;

/// Bytes of codes and vectors a replica keeps for semantic search (see [`vector_codes::VectorCodes`]):
/// 64 MiB hold about 140,000 chunks of 384 dimensions with their vectors, 800,000 without.
const VECTOR_CODE_BYTES: usize = 64 << 20;

/// Conversations in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// Bounds the connections one conversation's writes hold (see [`gate`]).
    gate: std::sync::Arc<gate::ConversationGate>,
    /// How long a write outside any call waits for its conversation's slot.
    gate_patience: Duration,
    /// Decoded messages of the log's tails, per conversation (see [`cache`]).
    cache: std::sync::Arc<cache::MessageCache>,
    /// The sign-bit codes of the conversations this replica searched semantically.
    codes: std::sync::Arc<vector_codes::VectorCodes>,
    /// Batches concurrent appends (see `append::group`).
    group: std::sync::Arc<append::GroupCommit>,
    /// Told after each write (see [`Store::change_signal`]).
    changed: std::sync::Arc<super::ChangeSignal>,
    /// Whether the database is a Citus coordinator (see [`citus`]).
    citus: std::sync::Arc<citus::Citus>,
}

impl PostgresStore {
    /// A write slot of the conversation, waited for until the call's deadline (outside a call,
    /// for the statement timeout).
    async fn write_slot(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<gate::Pass, StoreError> {
        let patience = deadline.map_or(self.gate_patience, Deadline::work_left);
        self.gate
            .enter(tenant.as_str(), conversation.as_str(), Some(patience))
            .await
    }

    /// `result`, after telling this replica's watchers of the write when it succeeded.
    fn told<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_ok() {
            self.changed.notify();
        }
        result
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn append_messages(
        &self,
        tenant: &TenantId,
        batch: &CountedBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, StoreError> {
        let _slot = self.write_slot(tenant, &batch.conversation_id, deadline).await?;
        let appended = self
            .group
            .append(tenant, batch, deadline)
            .instrument(traces::db("INSERT", "messages"))
            .await;
        self.told(appended)
    }

    async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        limit: usize,
        max_bytes: usize,
    ) -> Result<MessagePage, StoreError> {
        messages::list_messages(&self.pool, tenant, conversation, after, limit, max_bytes)
            .instrument(traces::db("SELECT", "messages"))
            .await
    }

    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<u64, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        let written = messages::delete_conversation(&self.pool, tenant, conversation, deadline)
            .instrument(traces::db("DELETE", "conversations"))
            .await;
        self.told(written)
    }

    async fn open_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first_page: usize,
        max_bytes: usize,
    ) -> Result<OpenedContext, StoreError> {
        tail::open_context(
            &self.pool,
            &self.cache,
            tenant,
            conversation,
            first_page,
            max_bytes,
        )
        .instrument(traces::db("SELECT", "messages"))
        .await
    }

    async fn tail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        version: LogVersion,
        page: PageRequest,
    ) -> Result<CappedPage, StoreError> {
        tail::tail(&self.pool, &self.cache, tenant, conversation, version, page).await
    }

    async fn open_calls(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[String],
    ) -> Result<HashMap<String, Sequence>, StoreError> {
        tail::open_calls(&self.pool, tenant, conversation, ids)
            .instrument(traces::db("SELECT", "tool_calls"))
            .await
    }

    async fn summary_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        max_bytes: usize,
    ) -> Result<SummaryState, StoreError> {
        summary::summary_state(&self.pool, tenant, conversation, max_bytes)
            .instrument(traces::db("SELECT", "summaries"))
            .await
    }

    async fn store_summary(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: Sequence,
        summary: NewSummary,
        deadline: Option<&Deadline>,
    ) -> Result<Summary, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        let written = summary::store_summary(&self.pool, tenant, conversation, base, summary, deadline)
            .instrument(traces::db("INSERT", "summaries"))
            .await;
        self.told(written)
    }

    async fn memory_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        messages_up_to: Option<usize>,
    ) -> Result<MemoryState, StoreError> {
        working_memory::memory_state(&self.pool, tenant, conversation, messages_up_to)
            .instrument(traces::db("SELECT", "working_memory"))
            .await
    }

    async fn store_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: MemoryBase,
        memory: &WorkingMemory,
        deadline: Option<&Deadline>,
    ) -> Result<WorkingMemory, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        let written = working_memory::store_memory(&self.pool, tenant, conversation, base, memory, deadline)
            .instrument(traces::db("UPDATE", "working_memory"))
            .await;
        self.told(written)
    }

    async fn try_summarizer_lease(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<Lease>, StoreError> {
        leases::try_summarizer_lease(&self.pool, tenant, conversation)
            .instrument(traces::db("UPDATE", "ctxd_leases"))
            .await
    }

    async fn get_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Conversation, StoreError> {
        conversations::get(&self.pool, tenant, conversation)
            .instrument(traces::db("SELECT", "conversations"))
            .await
    }

    async fn update_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        patch: &ConversationPatch,
        if_missing: IfMissing,
        deadline: Option<&Deadline>,
    ) -> Result<Conversation, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        let written = conversations::update(&self.pool, tenant, conversation, patch, if_missing, deadline)
            .instrument(traces::db("UPDATE", "conversations"))
            .await;
        self.told(written)
    }

    async fn list_conversations(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<ConversationPage, StoreError> {
        conversations::list(&self.pool, tenant, query)
            .instrument(traces::db("SELECT", "conversations"))
            .await
    }

    async fn fork_conversation(
        &self,
        tenant: &TenantId,
        source: &ConversationId,
        through: Sequence,
        target: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<Conversation, StoreError> {
        // The source's slot too: forks read it, and many at once must not take the pool. The
        // slots are taken in id order, so two forks between the same two conversations in
        // opposite directions cannot each hold one and wait for the other.
        let (first, second) = match source.as_str() <= target.as_str() {
            true => (source, target),
            false => (target, source),
        };
        let _first = self.write_slot(tenant, first, deadline).await?;
        let _second = match first == second {
            true => None,
            false => Some(self.write_slot(tenant, second, deadline).await?),
        };
        let written = fork::fork(&self.pool, tenant, source, through, target, deadline)
            .instrument(traces::db("INSERT", "messages"))
            .await;
        self.told(written)
    }

    async fn redact_message(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        sequence: Sequence,
        deadline: Option<&Deadline>,
    ) -> Result<Redaction, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        let written = redaction::redact(&self.pool, tenant, conversation, sequence, deadline)
            .instrument(traces::db("UPDATE", "messages"))
            .await;
        self.told(written)
    }

    async fn store_late_counts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        counts: &[CountedLate],
    ) -> Result<(), StoreError> {
        late_counts::store(&self.pool, tenant, conversation, counts)
            .instrument(traces::db("UPDATE", "messages"))
            .await?;
        self.cache.keep_late_counts(tenant, conversation, counts);
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
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        let written = rewind::rewind(&self.pool, tenant, conversation, after, expected_last, deadline)
            .instrument(traces::db("DELETE", "messages"))
            .await;
        self.told(written)
    }

    async fn search_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        spec: &SearchSpec,
    ) -> Result<SearchPage, StoreError> {
        search::search_messages(&self.pool, &self.codes, tenant, conversation, spec)
            .instrument(traces::db("SELECT", "messages"))
            .await
    }

    async fn term_holders(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        query: &crate::domain::search::SearchQuery,
        through: Option<Sequence>,
    ) -> Result<Option<crate::domain::search::TermHolders>, StoreError> {
        search::term_holders(&self.pool, tenant, conversation, query, through)
            .instrument(traces::db("SELECT", "messages"))
            .await
    }

    async fn embedding_backlog(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Option<EmbeddingBacklog>, StoreError> {
        vectors::embedding_backlog(&self.pool, tenant, conversation, limit, max_bytes)
            .instrument(traces::db("SELECT", "messages"))
            .await
    }

    async fn store_embeddings(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: &EmbeddingBatch,
    ) -> Result<bool, StoreError> {
        vectors::store_embeddings(&self.pool, tenant, conversation, batch)
            .instrument(traces::db("INSERT", "message_vectors"))
            .await
    }

    async fn sweep_expired(&self, rule: RetentionRule) -> Result<Swept, StoreError> {
        let written = conversations::sweep(&self.pool, rule)
            .instrument(traces::db("DELETE", "conversations"))
            .await;
        self.told(written)
    }

    async fn read_changes(
        &self,
        tenant: &TenantId,
        query: &crate::domain::changes::ChangeQuery,
    ) -> Result<crate::domain::changes::ChangePage, StoreError> {
        changes::read(&self.pool, &self.citus, tenant, query)
            .instrument(traces::db("SELECT", "changes"))
            .await
    }

    async fn change_horizon(&self) -> Result<crate::domain::changes::Cursor, StoreError> {
        changes::horizon(&self.pool, &self.citus).await
    }

    async fn oldest_change(
        &self,
        tenant: &TenantId,
        since: std::time::SystemTime,
    ) -> Result<Option<crate::domain::changes::Cursor>, StoreError> {
        changes::oldest(&self.pool, tenant, since).await
    }

    async fn sweep_changes(&self, before: std::time::SystemTime, batch: usize) -> Result<u64, StoreError> {
        changes::sweep(&self.pool, &self.citus, before, batch)
            .instrument(traces::db("DELETE", "changes"))
            .await
    }

    fn change_signal(&self) -> &super::ChangeSignal {
        &self.changed
    }

    async fn try_retention_lease(&self) -> Result<Option<Lease>, StoreError> {
        leases::try_retention_lease(&self.pool)
            .instrument(traces::db("UPDATE", "ctxd_leases"))
            .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }

    /// Applies pending migrations under the advisory lock; returns how many were applied.
    async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.pool.get().await?;
        migrations::run(&mut client).await
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        Some(self.cache.stats())
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        let status = self.pool.status();
        let (append_batches, batched_appends) = self.group.counts();
        Some(PoolStats {
            size: status.size,
            available: status.available,
            waiting: status.waiting,
            append_batches,
            batched_appends,
        })
    }

    /// Closes the pool: idle connections are dropped and new checkouts fail.
    fn close(&self) {
        self.pool.close();
    }
}
