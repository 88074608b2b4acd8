//! Background work the service starts (auto summarization): tracked, so shutdown waits for it
//! within the grace period instead of leaving it running past the process's last log line.

use std::{
    future::Future,
    sync::{Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use tokio::task::JoinSet;

/// A set of running background tasks.
#[derive(Debug)]
pub struct BackgroundTasks {
    /// `None` once shutdown began: no new work starts.
    running: Mutex<Option<JoinSet<()>>>,
}

impl Default for BackgroundTasks {
    fn default() -> Self {
        Self {
            running: Mutex::new(Some(JoinSet::new())),
        }
    }
}

impl BackgroundTasks {
    fn lock(&self) -> MutexGuard<'_, Option<JoinSet<()>>> {
        // Every step under the lock leaves the set consistent.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `work` unless shutdown began. Finished tasks are reaped on the way, so the set
    /// holds only what still runs.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        match &mut *self.lock() {
            Some(set) => {
                while set.try_join_next().is_some() {}
                set.spawn(work);
            }
            None => tracing::debug!("shutting down: background work not started"),
        }
    }

    /// How many tasks run now.
    pub fn len(&self) -> usize {
        self.lock().as_mut().map_or(0, |set| {
            while set.try_join_next().is_some() {}
            set.len()
        })
    }

    /// True when no task runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting work and waits up to `grace` for the running tasks; aborts the rest.
    pub async fn drain(&self, grace: Duration) {
        let Some(mut set) = self.lock().take() else {
            return;
        };
        let waited = tokio::time::timeout(grace, async { while set.join_next().await.is_some() {} }).await;
        if waited.is_err() {
            tracing::warn!(
                tasks = set.len(),
                "background work still running after the grace period; aborting it"
            );
            set.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_waits_for_running_work_and_refuses_new_work() {
        let tasks = BackgroundTasks::default();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = done_tx.send(());
        });
        assert_eq!(tasks.len(), 1);
        tasks.drain(Duration::from_secs(5)).await;
        assert!(
            done_rx.await.is_ok(),
            "the task ran to completion before drain returned"
        );
        tasks.spawn(async {});
        assert!(tasks.is_empty(), "no work starts after shutdown began");
    }

    #[tokio::test]
    async fn drain_aborts_work_that_outlives_the_grace_period() {
        let tasks = BackgroundTasks::default();
        tasks.spawn(std::future::pending());
        tasks.drain(Duration::from_millis(20)).await;
        assert!(tasks.is_empty());
    }
}
