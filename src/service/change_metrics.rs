//! What the change feed counts (a part of [`super::metrics::UseCaseMetrics`]).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, core::Collector};

/// What the change feed counts.
#[derive(Debug)]
pub struct ChangeMetrics {
    /// WatchChanges streams open on this replica.
    pub watchers: IntGauge,
    /// Changes sent to watchers.
    pub delivered: IntCounter,
    /// Seconds from a change's commit to its delivery.
    pub lag: Histogram,
    /// Changes the retention sweeper deleted (older than `CTXD_CHANGES_RETENTION`).
    pub deleted: IntCounter,
    /// Pages a watcher read from the store itself: it was behind the tenant's recent changes
    /// that the replica reads once for all its watchers.
    pub behind_reads: IntCounter,
}

impl ChangeMetrics {
    pub(super) fn new() -> Self {
        let lag = Histogram::with_opts(
            HistogramOpts::new(
                "ctxd_change_lag_seconds",
                "Seconds from a change's commit to its delivery to a watcher",
            )
            .buckets(prometheus::exponential_buckets(0.005, 2.0, 14).expect("valid buckets")),
        )
        .expect("valid metric");
        let watchers = IntGauge::new(
            "ctxd_change_watchers",
            "WatchChanges streams open on this replica",
        );
        Self {
            watchers: watchers.expect("valid metric"),
            delivered: counter("ctxd_changes_delivered_total", "Changes sent to watchers"),
            lag,
            deleted: counter(
                "ctxd_changes_deleted_total",
                "Changes the retention sweeper deleted (older than CTXD_CHANGES_RETENTION)",
            ),
            behind_reads: counter(
                "ctxd_change_behind_reads_total",
                "Pages watchers read from the store because they were behind the recent changes the replica holds for them",
            ),
        }
    }

    pub(super) fn collectors(&self) -> [Box<dyn Collector>; 5] {
        [
            Box::new(self.behind_reads.clone()),
            Box::new(self.watchers.clone()),
            Box::new(self.delivered.clone()),
            Box::new(self.lag.clone()),
            Box::new(self.deleted.clone()),
        ]
    }
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}
