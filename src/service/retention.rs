//! The retention sweeper: deletes expired conversations (their `expire_time` passed, or, when
//! configured, no activity for the inactivity period) in bounded batches, on one replica at a
//! time (the store's retention lease).

use std::{sync::Arc, time::SystemTime};

use tracing::Instrument as _;

use crate::{
    config::RetentionOptions,
    service::metrics::UseCaseMetrics,
    store::{RetentionRule, Store, StoreError, Swept},
};

/// Sweeps every `retention.interval` until the task is aborted, counting what it deletes in
/// `metrics`.
pub async fn run(store: Arc<dyn Store>, retention: RetentionOptions, metrics: Arc<UseCaseMetrics>) {
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
        let swept = sweep(&*store, &retention, &metrics)
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
    lease.release().await;
    result
}
