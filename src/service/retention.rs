//! The retention sweeper: deletes expired conversations (their `expire_time` passed, or, when
//! configured, no activity for the inactivity period) in bounded batches, on one replica at a
//! time (the store's retention lease); and the change feed's changes older than
//! `CTXD_CHANGES_RETENTION`, with an hour's margin: a change made in a transaction that began
//! before a cursor can commit after it, and a cursor within retention must find it.

use std::{sync::Arc, time::SystemTime};

use tracing::Instrument as _;

use crate::{
    config::RetentionOptions,
    service::metrics::UseCaseMetrics,
    store::{RetentionRule, Store, StoreError, Swept},
};

/// Sweeps every `retention.interval` until the task is aborted, counting what it deletes in
/// `metrics`.
pub async fn run(
    store: Arc<dyn Store>,
    retention: RetentionOptions,
    changes: std::time::Duration,
    metrics: Arc<UseCaseMetrics>,
) {
    let mut ticks = tokio::time::interval(retention.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        // Each sweep is a trace of its own.
        let span = tracing::info_span!(
            target: crate::runtime::traces::SPAN_TARGET,
            parent: None,
            "retention_sweep",
            ctxd.retention.conversations = tracing::field::Empty,
            ctxd.retention.messages = tracing::field::Empty,
        );
        let swept = sweep(&*store, &retention, changes, &metrics)
            .instrument(span.clone())
            .await;
        if let Ok(swept) = &swept {
            span.record("ctxd.retention.conversations", swept.conversations as i64);
            span.record("ctxd.retention.messages", swept.messages as i64);
        }
        drop(span);
        match swept {
            Ok(swept) if swept.conversations > 0 => tracing::info!(
                conversations = swept.conversations,
                messages = swept.messages,
                "retention deleted expired conversations"
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(error = %crate::runtime::telemetry::ErrorChain(&error), "retention sweep failed")
            }
        }
    }
}

/// One sweep: takes the lease (or leaves the work to the replica holding it) and deletes
/// batches until one comes back short.
pub async fn sweep(
    store: &dyn Store,
    retention: &RetentionOptions,
    changes: std::time::Duration,
    metrics: &UseCaseMetrics,
) -> Result<Swept, StoreError> {
    let Some(lease) = store.try_retention_lease().await? else {
        return Ok(Swept::default());
    };
    let mut total = Swept::default();
    let result = loop {
        let rule = RetentionRule {
            now: SystemTime::now(),
            inactive: retention.inactive,
            batch: retention.batch,
        };
        match store.sweep_expired(rule).await {
            Ok(swept) => {
                metrics.retention_conversations.inc_by(swept.conversations);
                metrics.retention_messages.inc_by(swept.messages);
                total.conversations += swept.conversations;
                total.messages += swept.messages;
                if (swept.conversations as usize) < retention.batch {
                    break Ok(total);
                }
            }
            Err(error) => break Err(error),
        }
    };
    let result = match result {
        Ok(swept) => sweep_changes(store, retention.batch, changes, metrics)
            .await
            .map(|changes| Swept { changes, ..swept }),
        failed => failed,
    };
    lease.release().await;
    result
}

/// Deletes the changes older than `retention` and its margin, in batches.
async fn sweep_changes(
    store: &dyn Store,
    batch: usize,
    retention: std::time::Duration,
    metrics: &UseCaseMetrics,
) -> Result<u64, StoreError> {
    const MARGIN: std::time::Duration = std::time::Duration::from_secs(3600);
    let Some(before) = SystemTime::now().checked_sub(retention + MARGIN) else {
        return Ok(0);
    };
    let mut total = 0;
    loop {
        let swept = store.sweep_changes(before, batch).await?;
        metrics.changes.deleted.inc_by(swept);
        total += swept;
        if (swept as usize) < batch {
            return Ok(total);
        }
    }
}
