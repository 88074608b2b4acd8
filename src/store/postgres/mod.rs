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
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use super::{
    CacheStats, CappedPage, Lease, LogVersion, MemoryBase, MemoryState, MessagePage, NewSummary,
    OpenedContext, PoolStats, Redaction, RetentionRule, Rewind, SearchPage, SearchSpec, Store, StoreError,
    SummaryState, Swept,
};
use crate::{
    deadline::Deadline,
    domain::{
        AppendBatch, AppendOutcome, ConversationId, Sequence, TenantId,
        context::PageRequest,
        conversation::{Conversation, ConversationPage, ConversationPatch, IfMissing, ListQuery},
        summary::Summary,
        working_memory::WorkingMemory,
    },
};

mod append;
mod cache;
mod context;
mod conversations;
mod fork;
mod gate;
mod leases;
mod messages;
mod migrations;
mod redaction;
mod rewind;
mod rows;
mod search;
mod summary;
mod working_memory;

/// Pool and connection settings of the Postgres store.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// libpq-style URL, e.g. `postgres://ctxd:secret@db:5432/ctxd`.
    pub url: String,
    /// Maximum pooled connections.
    pub pool_size: usize,
    /// How long a request waits for a pooled connection or a new one before UNAVAILABLE.
    pub connect_timeout: Duration,
    /// Server-side cap on any one statement (`statement_timeout`), so no request holds the
    /// database past its own deadline.
    pub statement_timeout: Duration,
    /// Bytes of decoded messages this replica keeps for BuildContext (0: none); see [`cache`].
    pub message_cache_bytes: usize,
}

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
}

impl PostgresStore {
    /// Builds the pool. Connections are opened lazily; see [`Store::migrate`].
    pub fn connect(options: &PostgresOptions) -> Result<Self, StoreError> {
        let mut pg_config: tokio_postgres::Config = options
            .url
            .parse()
            .map_err(|e| StoreError::Internal { source: Box::new(e) })?;
        pg_config.connect_timeout(options.connect_timeout);
        pg_config.application_name("ctxd");
        // After the URL's own `options`, so those stay in force (and a `statement_timeout`
        // among them gives way to the one `--request-timeout-secs` sets).
        let server_options = format!(
            "{} -c statement_timeout={}",
            pg_config.get_options().unwrap_or_default(),
            options.statement_timeout.as_millis()
        );
        pg_config.options(server_options.trim_start());
        let manager = Manager::from_config(
            pg_config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Internal { source: Box::new(e) })?;
        Ok(Self {
            pool,
            gate: Default::default(),
            gate_patience: options.statement_timeout,
            cache: std::sync::Arc::new(cache::MessageCache::new(options.message_cache_bytes)),
        })
    }

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
}

/// A new conversation row's `incarnation` (migration 13): random, from the standard library's
/// per-thread random hash keys, mixed with the time and a counter.
pub(super) fn new_incarnation() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    static DRAWN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(DRAWN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
    hasher.finish() as i64
}

/// The `SET LOCAL` line that bounds a write transaction made for a call: no statement runs (lock
/// waits included) past the call's deadline (less the margin its answer needs), so a write the
/// caller saw fail never commits later. One setting: a `lock_timeout` at the same time would never
/// fire first (a lock wait is part of its statement) and cost the database a statement on every
/// append. `None` outside a call: the connection's `statement_timeout` applies.
fn write_limits(deadline: Option<&Deadline>) -> Result<Option<String>, StoreError> {
    let Some(budget) = deadline.map(Deadline::work_left) else {
        return Ok(None);
    };
    // Zero would mean "no limit" to PostgreSQL.
    let ms = budget.as_millis();
    if ms == 0 {
        return Err(StoreError::DeadlineExceeded);
    }
    Ok(Some(format!("SET LOCAL statement_timeout = {ms}")))
}

/// Bounds the open transaction `tx` by the call's deadline (see [`write_limits`]).
async fn limit(
    tx: &deadpool_postgres::Transaction<'_>,
    deadline: Option<&Deadline>,
) -> Result<(), StoreError> {
    if let Some(limits) = write_limits(deadline)? {
        tx.batch_execute(&limits).await?;
    }
    Ok(())
}

/// Commits `tx` once the call has claimed its commit (else `tx` is dropped: rolled back).
async fn commit(
    tx: deadpool_postgres::Transaction<'_>,
    deadline: Option<&Deadline>,
) -> Result<(), StoreError> {
    super::claim_commit(deadline)?;
    tx.commit().await?;
    Ok(())
}

/// Runs one write statement in its own transaction bounded by the call's deadline. `write` must
/// be a single request (a query on a prepared statement: a query given as text would be parsed
/// first and executed after the `COMMIT`). `BEGIN` with
/// the limits, the statement and `COMMIT` are pipelined: one round trip, as the bare statement
/// was. If the statement fails, PostgreSQL answers the `COMMIT` with a rollback. Outside a call
/// the statement runs alone, under the connection's `statement_timeout`.
async fn write_once<T>(
    client: &tokio_postgres::Client,
    deadline: Option<&Deadline>,
    write: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, StoreError> {
    let Some(limits) = write_limits(deadline)? else {
        return Ok(write.await?);
    };
    // COMMIT goes out with the statement.
    super::claim_commit(deadline)?;
    let begin = format!("BEGIN; {limits}");
    // try_join polls all three at once, so all three are sent, in order, before any answer.
    let ((), value, ()) = tokio::try_join!(
        client.batch_execute(&begin),
        write,
        client.batch_execute("COMMIT")
    )?;
    Ok(value)
}

/// Sorts a Postgres failure into retryable (connection trouble) and internal.
impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        let retryable = match error.code() {
            // No server verdict: retryable only if the connection itself failed.
            None => {
                error.is_closed()
                    || std::error::Error::source(&error)
                        .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
            }
            // statement_timeout (as set for the call, or the backstop), and a lock_timeout
            // should a deployment set one.
            Some(state) if matches!(state.code(), "57014" | "55P03") => {
                return StoreError::DeadlineExceeded;
            }
            Some(state) => {
                let code = state.code();
                code.starts_with("08")
                    || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
            }
        };
        if retryable {
            StoreError::Unavailable {
                source: Box::new(error),
            }
        } else {
            StoreError::Internal {
                source: Box::new(error),
            }
        }
    }
}

/// A connection that cannot be had is retryable, unless the server gave a verdict.
impl From<PoolError> for StoreError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Backend(e) => e.into(),
            other => StoreError::Unavailable {
                source: Box::new(other),
            },
        }
    }
}

/// Stored data that cannot be decoded: a bug or a hand-edited row.
fn corrupt(what: &str) -> StoreError {
    StoreError::internal(format!("corrupt stored data: {what}"))
}

#[async_trait]
impl Store for PostgresStore {
    async fn append_messages(
        &self,
        tenant: &TenantId,
        batch: &AppendBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, StoreError> {
        let _slot = self.write_slot(tenant, &batch.conversation_id, deadline).await?;
        append::append_messages(&self.pool, tenant, batch, deadline).await
    }

    async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        limit: usize,
        max_bytes: usize,
    ) -> Result<MessagePage, StoreError> {
        messages::list_messages(&self.pool, tenant, conversation, after, limit, max_bytes).await
    }

    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<u64, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        messages::delete_conversation(&self.pool, tenant, conversation, deadline).await
    }

    async fn open_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first_page: usize,
        max_bytes: usize,
    ) -> Result<OpenedContext, StoreError> {
        context::open_context(
            &self.pool,
            &self.cache,
            tenant,
            conversation,
            first_page,
            max_bytes,
        )
        .await
    }

    async fn tail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        version: LogVersion,
        page: PageRequest,
    ) -> Result<CappedPage, StoreError> {
        context::tail(&self.pool, &self.cache, tenant, conversation, version, page).await
    }

    async fn open_calls(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[String],
    ) -> Result<HashMap<String, Sequence>, StoreError> {
        context::open_calls(&self.pool, tenant, conversation, ids).await
    }

    async fn summary_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        max_bytes: usize,
    ) -> Result<SummaryState, StoreError> {
        summary::summary_state(&self.pool, tenant, conversation, max_bytes).await
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
        summary::store_summary(&self.pool, tenant, conversation, base, summary, deadline).await
    }

    async fn memory_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        messages_up_to: Option<usize>,
    ) -> Result<MemoryState, StoreError> {
        working_memory::memory_state(&self.pool, tenant, conversation, messages_up_to).await
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
        working_memory::store_memory(&self.pool, tenant, conversation, base, memory, deadline).await
    }

    async fn try_summarizer_lease(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<Lease>, StoreError> {
        leases::try_summarizer_lease(&self.pool, tenant, conversation).await
    }

    async fn get_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Conversation, StoreError> {
        conversations::get(&self.pool, tenant, conversation).await
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
        conversations::update(&self.pool, tenant, conversation, patch, if_missing, deadline).await
    }

    async fn list_conversations(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<ConversationPage, StoreError> {
        conversations::list(&self.pool, tenant, query).await
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
        fork::fork(&self.pool, tenant, source, through, target, deadline).await
    }

    async fn redact_message(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        sequence: Sequence,
        deadline: Option<&Deadline>,
    ) -> Result<Redaction, StoreError> {
        let _slot = self.write_slot(tenant, conversation, deadline).await?;
        redaction::redact(&self.pool, tenant, conversation, sequence, deadline).await
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
        rewind::rewind(&self.pool, tenant, conversation, after, expected_last, deadline).await
    }

    async fn search_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        spec: &SearchSpec,
    ) -> Result<SearchPage, StoreError> {
        search::search_messages(&self.pool, tenant, conversation, spec).await
    }

    async fn sweep_expired(&self, rule: RetentionRule) -> Result<Swept, StoreError> {
        conversations::sweep(&self.pool, rule).await
    }

    async fn try_retention_lease(&self) -> Result<Option<Lease>, StoreError> {
        leases::try_retention_lease(&self.pool).await
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
        Some(PoolStats {
            size: status.size,
            available: status.available,
            waiting: status.waiting,
        })
    }

    /// Closes the pool: idle connections are dropped and new checkouts fail.
    fn close(&self) {
        self.pool.close();
    }
}
