//! Cross-replica leases on PostgreSQL: transaction-scoped advisory locks held on a dedicated
//! pooled connection.

use async_trait::async_trait;
use deadpool_postgres::Pool;

use crate::{
    domain::{ConversationId, TenantId},
    store::{HeldLease, Lease, StoreError},
};

pub(super) async fn try_summarizer_lease(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<Option<Lease>, StoreError> {
    try_lease(pool, &format!("ctxd-summarizer/{tenant}/{conversation}")).await
}

/// The retention sweeper's lease: one per database.
pub(super) async fn try_retention_lease(pool: &Pool) -> Result<Option<Lease>, StoreError> {
    try_lease(pool, "ctxd-retention").await
}

async fn try_lease(pool: &Pool, key: &str) -> Result<Option<Lease>, StoreError> {
    let client = pool.get().await?;
    // A transaction-scoped advisory lock on a dedicated connection: whatever happens to
    // this process, the lock ends with the transaction or the connection.
    client.batch_execute("BEGIN").await?;
    let row = client
        .query_one(
            "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
            &[&key],
        )
        .await?;
    let lease = PostgresLease { client: Some(client) };
    if row.get::<_, bool>(0) {
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
