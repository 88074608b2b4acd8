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
