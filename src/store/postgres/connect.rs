//! Opening the Postgres store: its settings and its connection pool.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, QueueMode, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use super::{PostgresStore, VECTOR_CODE_BYTES, append, cache, vector_codes};
use crate::store::StoreError;

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
    /// Whether concurrent appends to different conversations share a transaction
    /// (`CTXD_GROUP_COMMIT`; off by itself on Citus); see `append::group`.
    pub group_commit: bool,
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
        // The pool hands out the connection used last, so the others can sit idle for long:
        // probe them every minute (unless the URL says otherwise), so that a connection a NAT or
        // a load balancer dropped silently is found before a query waits on it.
        if pg_config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            pg_config.keepalives_idle(Duration::from_secs(60));
        }
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
            // The connection used last is used next: a backend's caches stay warm, and a
            // quiet replica works on a few connections instead of turning through all of them.
            .queue_mode(QueueMode::Lifo)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Internal { source: Box::new(e) })?;
        let citus = std::sync::Arc::<super::citus::Citus>::default();
        Ok(Self {
            group: std::sync::Arc::new(append::GroupCommit::new(
                pool.clone(),
                options.group_commit,
                citus.clone(),
            )),
            pool,
            gate: Default::default(),
            citus,
            gate_patience: options.statement_timeout,
            cache: std::sync::Arc::new(cache::MessageCache::new(options.message_cache_bytes)),
            codes: std::sync::Arc::new(vector_codes::VectorCodes::new(VECTOR_CODE_BYTES)),
            changed: Default::default(),
        })
    }
}
