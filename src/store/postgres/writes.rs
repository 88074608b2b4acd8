//! How the store's writes are bounded: a write made for a call runs under the call's deadline
//! (`SET LOCAL statement_timeout`) and commits only once the call has claimed its commit, so
//! nothing the caller saw fail commits later (docs/design.md, "Every call is bounded").

use crate::{
    runtime::deadline::Deadline,
    store::{StoreError, claim_commit},
};

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
pub(super) fn write_limits(deadline: Option<&Deadline>) -> Result<Option<String>, StoreError> {
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

/// `BEGIN`, with [`write_limits`] after it when the call has a deadline: the opening of every
/// write transaction that is pipelined with its first statements.
pub(super) fn begin_text(deadline: Option<&Deadline>) -> Result<String, StoreError> {
    Ok(match write_limits(deadline)? {
        Some(limits) => format!("BEGIN; {limits}"),
        None => "BEGIN".to_owned(),
    })
}

/// Bounds the open transaction `tx` by the call's deadline (see [`write_limits`]).
pub(super) async fn limit(
    tx: &deadpool_postgres::Transaction<'_>,
    deadline: Option<&Deadline>,
) -> Result<(), StoreError> {
    if let Some(limits) = write_limits(deadline)? {
        tx.batch_execute(&limits).await?;
    }
    Ok(())
}

/// Commits `tx` once the call has claimed its commit (else `tx` is dropped: rolled back).
pub(super) async fn commit(
    tx: deadpool_postgres::Transaction<'_>,
    deadline: Option<&Deadline>,
) -> Result<(), StoreError> {
    claim_commit(deadline)?;
    tx.commit().await?;
    Ok(())
}

/// A write transaction opened by hand on a pooled connection, so that `BEGIN`, the call's limits
/// and its first statement go out in one round trip (a write that must lock the conversation's
/// row first takes it at once, as an append does). Dropped before it ended (an error between
/// round trips), it closes the connection, which ends the transaction, instead of pooling it open.
pub(super) struct Pipelined {
    client: Option<deadpool_postgres::Object>,
    ended: bool,
}

impl Pipelined {
    /// `BEGIN` under the call's limits and `first` (prepared before, so nothing overtakes it),
    /// pipelined; the transaction and `first`'s row, if any.
    pub(super) async fn begin(
        pool: &deadpool_postgres::Pool,
        deadline: Option<&Deadline>,
        first: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<(Self, Option<tokio_postgres::Row>), StoreError> {
        let begin = begin_text(deadline)?;
        let client = pool.get().await?;
        let statement = client.prepare_cached(first).await?;
        let tx = Self {
            client: Some(client),
            ended: false,
        };
        let client = tx.client()?;
        let ((), row) = tokio::try_join!(client.batch_execute(&begin), client.query_opt(&statement, params))?;
        Ok((tx, row))
    }

    /// The transaction's connection.
    pub(super) fn client(&self) -> Result<&deadpool_postgres::Object, StoreError> {
        self.client
            .as_ref()
            .ok_or_else(|| StoreError::internal("write connection missing"))
    }

    /// Runs `last` and commits, pipelined (one round trip), once the call has claimed its commit.
    pub(super) async fn commit_after(
        mut self,
        deadline: Option<&Deadline>,
        last: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<(), StoreError> {
        let client = self.client()?;
        // Prepared before COMMIT is sent, so that COMMIT cannot overtake it.
        let statement = client.prepare_cached(last).await?;
        claim_commit(deadline)?;
        let (_, ()) = tokio::try_join!(client.execute(&statement, params), client.batch_execute("COMMIT"))?;
        self.ended = true;
        Ok(())
    }

    /// Ends it without writing; if even that fails, the drop closes the connection.
    pub(super) async fn roll_back(mut self) {
        if let Some(client) = &self.client
            && client.batch_execute("ROLLBACK").await.is_ok()
        {
            self.ended = true;
        }
    }
}

impl Drop for Pipelined {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !self.ended
        {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}
