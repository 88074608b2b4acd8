//! The store factory: the one place that names every implementation.

use std::sync::Arc;

use super::{InMemoryStore, PostgresOptions, PostgresStore, Store, StoreError};

/// Opens the configured store: PostgreSQL when `postgres` is set, else the in-memory store.
/// Connections open lazily; call [`Store::migrate`] before serving.
pub fn open(postgres: Option<&PostgresOptions>) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match postgres {
        Some(options) => {
            tracing::info!(pool_size = options.pool_size, "serving from PostgreSQL");
            Arc::new(PostgresStore::connect(options)?)
        }
        None => {
            tracing::warn!(
                "NO DATABASE_URL: serving from the IN-MEMORY store. \
                 All data is lost when this process stops. Set DATABASE_URL for production."
            );
            Arc::new(InMemoryStore::new())
        }
    })
}
