//! When conversations are deleted without being asked to.

use std::time::Duration;

use super::problem::{ConfigProblem, Problems};

/// Retention sweeper settings.
#[derive(Debug, Clone, clap::Args)]
pub struct RetentionArgs {
    /// Delete conversations without an `expire_time` once they have had no append or update for
    /// this many seconds (0 = never; conversations with an `expire_time` go at that time).
    #[arg(
        long,
        env = "CTXD_RETENTION_INACTIVE_SECS",
        default_value_t = 0,
        display_order = 7
    )]
    pub retention_inactive_secs: u64,

    /// Milliseconds between retention sweeps. One replica at a time sweeps (a database lease);
    /// expired conversations are gone within about this long.
    #[arg(
        long,
        env = "CTXD_RETENTION_SWEEP_INTERVAL_MS",
        default_value_t = 60_000,
        display_order = 8
    )]
    pub retention_sweep_interval_ms: u64,

    /// Conversations one retention batch deletes (each in its own transaction); a sweep runs
    /// batches until one comes back short.
    #[arg(long, env = "CTXD_RETENTION_BATCH", default_value_t = 200, display_order = 9)]
    pub retention_batch: usize,
}

/// The retention sweeper's validated settings.
#[derive(Debug, Clone, Copy)]
pub struct RetentionOptions {
    /// Inactivity after which a conversation without `expire_time` goes; `None`: never.
    pub inactive: Option<Duration>,
    /// Time between sweeps.
    pub interval: Duration,
    /// Conversations per batch.
    pub batch: usize,
}

impl RetentionArgs {
    /// Checks the sweep's interval and batch.
    pub fn validate(&self) -> Result<RetentionOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        problems.positive(
            "CTXD_RETENTION_SWEEP_INTERVAL_MS",
            self.retention_sweep_interval_ms,
        );
        problems.positive("CTXD_RETENTION_BATCH", self.retention_batch as u64);
        problems.finish(RetentionOptions {
            inactive: (self.retention_inactive_secs > 0)
                .then(|| Duration::from_secs(self.retention_inactive_secs)),
            interval: Duration::from_millis(self.retention_sweep_interval_ms),
            batch: self.retention_batch,
        })
    }
}
