//! What the store must know of a Citus coordinator beyond its SQL: whether the database is one,
//! and the two-phase commits it still holds in doubt.
//!
//! A transaction that writes through the coordinator to more than one shard, or copies rows
//! between shards (a fork), commits in two phases: its shards prepare, the coordinator commits,
//! then the shards commit. Between the last two steps the coordinator's transaction has ended
//! while its shard rows are not yet visible. The coordinator keeps a record of each such commit
//! (`pg_dist_transaction`, written in the transaction itself) until its recovery
//! (`recover_prepared_transactions()`, run every `citus.recover_2pc_interval`) has seen the
//! shards commit, so the record is how a reader knows a committed transaction's rows may still
//! be on their way (docs/design.md, "Change feed").

use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::GenericClient;
use tokio::sync::OnceCell;

use super::rows::column;
use crate::store::StoreError;

/// Whether the database is a Citus coordinator, learnt once.
#[derive(Debug, Default)]
pub(super) struct Citus {
    known: OnceCell<bool>,
    /// The database refused this role the recovery function: leave it to Citus's own schedule.
    recovery_refused: AtomicBool,
}

impl Citus {
    /// Whether the database is a Citus coordinator.
    pub(super) async fn is<C: GenericClient + Sync>(&self, client: &C) -> Result<bool, StoreError> {
        let found = self
            .known
            .get_or_try_init(|| async {
                let row = client
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus",
                        &[],
                    )
                    .await?;
                column::<bool>(&row, "citus")
            })
            .await?;
        Ok(*found)
    }

    /// Whether the database is a Citus coordinator, asked with a connection of `pool` the first
    /// time only.
    pub(super) async fn is_in(&self, pool: &deadpool_postgres::Pool) -> Result<bool, StoreError> {
        match self.known.get() {
            Some(known) => Ok(*known),
            None => self.is(&pool.get().await?).await,
        }
    }

    /// Runs the coordinator's recovery of two-phase commits now: the records of transactions
    /// whose shards have committed are deleted (and shards left prepared by a lost connection
    /// are committed). False when this role may not run it (it takes `GRANT EXECUTE ON FUNCTION
    /// recover_prepared_transactions() TO <role>`), which is remembered.
    pub(super) async fn recover<C: GenericClient + Sync>(&self, client: &C) -> Result<bool, StoreError> {
        if self.recovery_refused.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match client
            .query_one("SELECT recover_prepared_transactions()", &[])
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if error.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) => {
                tracing::warn!(
                    "the database role may not run recover_prepared_transactions(): after a fork \
                     the change feed waits for Citus's own recovery (citus.recover_2pc_interval)"
                );
                self.recovery_refused.store(true, Ordering::Relaxed);
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }
}
