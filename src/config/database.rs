//! Where conversations are kept: PostgreSQL when DATABASE_URL is set, else memory.

use std::time::Duration;

use super::problem::{ConfigProblem, Problems};

/// PostgreSQL connection, pool and migration settings.
#[derive(Debug, Clone, clap::Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL (postgres://user:password@host:5432/db). Server settings in its
    /// `options` (`?options=-c%20search_path%3Dctxd`) apply to every connection. Unset:
    /// in-memory store.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, display_order = 1)]
    pub database_url: Option<String>,

    /// Maximum pooled database connections.
    #[arg(long, env = "CTXD_DB_POOL_SIZE", default_value_t = 16, display_order = 2)]
    pub db_pool_size: usize,

    /// Seconds to wait for a database connection before answering UNAVAILABLE.
    #[arg(
        long,
        env = "CTXD_DB_CONNECT_TIMEOUT_SECS",
        default_value_t = 5,
        display_order = 3
    )]
    pub db_connect_timeout_secs: u64,

    /// Seconds to keep retrying the database at start-up before giving up.
    #[arg(
        long,
        env = "CTXD_DB_STARTUP_WAIT_SECS",
        default_value_t = 30,
        display_order = 4
    )]
    pub db_startup_wait_secs: u64,

    /// MiB of decoded messages each replica keeps so that BuildContext reads from PostgreSQL only
    /// what is new since its last call on a conversation (0 = none). Counted as ctxd counts
    /// loaded messages; least recently used conversations go first, and one conversation holds
    /// at most an eighth. Redactions, rewinds and deletes on any replica are seen by the next
    /// call's one read of the conversation row: a changed message is never served from it.
    #[arg(long, env = "CTXD_MESSAGE_CACHE_MIB", default_value_t = 64, display_order = 5)]
    pub message_cache_mib: usize,

    /// Let concurrent appends to different conversations share one transaction (group commit):
    /// a batch takes appends without a time or tool call (keys and expected sequences are
    /// checked in it), locks their conversations with SKIP LOCKED, and is off by itself on
    /// Citus.
    #[arg(
        long,
        env = "CTXD_GROUP_COMMIT",
        default_value_t = true,
        action = clap::ArgAction::Set,
        display_order = 6
    )]
    pub group_commit: bool,

    /// Apply pending migrations at start-up (under an advisory lock; safe with many replicas).
    #[arg(
        long,
        env = "CTXD_MIGRATE_ON_START",
        default_value_t = true,
        action = clap::ArgAction::Set,
        display_order = 10
    )]
    pub migrate_on_start: bool,
}

/// The database's validated settings.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// The PostgreSQL URL; `None` selects the in-memory store.
    pub url: Option<String>,
    /// Maximum pooled connections.
    pub pool_size: usize,
    /// How long a call waits for a connection before UNAVAILABLE.
    pub connect_timeout: Duration,
    /// How long start-up keeps retrying an unreachable database (it may start beside ctxd).
    pub startup_wait: Duration,
    /// Whether to migrate at start-up.
    pub migrate_on_start: bool,
    /// Bytes of the replica's message cache (0: none).
    pub message_cache_bytes: usize,
    /// Whether concurrent appends may share a transaction.
    pub group_commit: bool,
}

impl DatabaseArgs {
    /// Checks the pool settings, and the URL when there is one.
    pub fn validate(&self) -> Result<DatabaseOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        problems.positive("CTXD_DB_POOL_SIZE", self.db_pool_size as u64);
        problems.positive("CTXD_DB_CONNECT_TIMEOUT_SECS", self.db_connect_timeout_secs);
        if let Some(url) = &self.database_url
            && let Err(source) = url.parse::<tokio_postgres::Config>()
        {
            problems.push(ConfigProblem::DatabaseUrl { source });
        }
        problems.finish(DatabaseOptions {
            url: self.database_url.clone(),
            pool_size: self.db_pool_size,
            connect_timeout: Duration::from_secs(self.db_connect_timeout_secs),
            startup_wait: Duration::from_secs(self.db_startup_wait_secs),
            migrate_on_start: self.migrate_on_start,
            message_cache_bytes: self.message_cache_mib.saturating_mul(1024 * 1024),
            group_commit: self.group_commit,
        })
    }
}
