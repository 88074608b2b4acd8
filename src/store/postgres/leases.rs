//! Cross-replica leases on PostgreSQL: transaction-scoped advisory locks held on a dedicated
//! pooled connection.
//!
//! An advisory lock exists only on the node that takes it. A conversation's lease is taken by
//! a statement that reads the conversation's row, so on Citus it is taken on the worker that
//! holds the conversation's shard, whichever node the replica is connected to. A
//! database-wide lease reads its own row of `ctxd_leases` (migration 8), a table distributed
//! the same way, so it too is taken on one worker, wherever the replicas connect.

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use crate::{
    domain::{ConversationId, TenantId},
    store::{HeldLease, Lease, StoreError},
};

pub(super) async fn try_summarizer_lease(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<Option<Lease>, StoreError> {
    let key = format!("ctxd-summarizer/{tenant}/{conversation}");
    let (t, c) = (tenant.as_str(), conversation.as_str());
    try_lease(
        pool,
        "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS taken FROM conversations
         WHERE tenant_id = $2 AND conversation_id = $3",
        &[&key, &t, &c],
    )
    .await
}

/// The retention sweeper's lease: one per database, on the row of `ctxd_leases` named after
/// it.
pub(super) async fn try_retention_lease(pool: &Pool) -> Result<Option<Lease>, StoreError> {
    let name = "ctxd-retention";
    // Migration 8 inserts the row; a database restored without it must not stop the sweeps.
    pool.get()
        .await?
        .execute(
            "INSERT INTO ctxd_leases (conversation_id) VALUES ($1) ON CONFLICT DO NOTHING",
            &[&name],
        )
        .await?;
    try_lease(
        pool,
        "SELECT pg_try_advisory_xact_lock(hashtextextended(conversation_id, 0)) AS taken FROM ctxd_leases
         WHERE conversation_id = $1",
        &[&name],
    )
    .await
}

/// Runs `lock`, a query answering whether it took its advisory lock (no row: there was
/// nothing to lock), in a transaction that holds the lock until the lease is released.
async fn try_lease(
    pool: &Pool,
    lock: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Lease>, StoreError> {
    let client = pool.get().await?;
    // A transaction-scoped advisory lock on a dedicated connection: whatever happens to
    // this process, the lock ends with the transaction or the connection.
    client.batch_execute("BEGIN").await?;
    let row = client.query_opt(lock, params).await;
    let lease = PostgresLease { client: Some(client) };
    let taken = match row? {
        Some(row) => super::rows::column(&row, "taken")?,
        None => false,
    };
    if taken {
        Ok(Some(Lease::new(lease)))
    } else {
        Box::new(lease).release().await;
        Ok(None)
    }
}

/// A background-summarizer lease: an advisory lock held by an open transaction on a dedicated
/// pooled connection.
#[derive(Debug)]
struct PostgresLease {
    client: Option<deadpool_postgres::Object>,
}

#[async_trait]
impl HeldLease for PostgresLease {
    /// Ends the transaction (releasing the lock) and returns the connection to the pool.
    async fn release(mut self: Box<Self>) {
        if let Some(client) = self.client.take()
            && client.batch_execute("COMMIT").await.is_err()
        {
            // Unknown state: keep the connection out of the pool; closing it frees the lock.
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

impl Drop for PostgresLease {
    fn drop(&mut self) {
        // Dropped without release (a panic or a cancelled task): the connection is still in a
        // transaction, so it must not go back to the pool. Closing it frees the lock.
        if let Some(client) = self.client.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}
