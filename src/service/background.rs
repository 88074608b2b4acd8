//! Background work the service starts (auto summarization): bounded, one task per key, and
//! tracked, so shutdown waits for it within the grace period instead of leaving it running past
//! the process's last log line.

use std::{
    collections::HashSet,
    future::Future,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use tokio::task::JoinSet;

/// A set of running background tasks.
#[derive(Debug)]
pub struct BackgroundTasks {
    /// `None` once shutdown began: no new work starts.
    running: Mutex<Option<JoinSet<()>>>,
    /// The keys of the tasks that run now; a task's key leaves when it ends or is aborted.
    keys: Arc<Mutex<HashSet<String>>>,
}

impl Default for BackgroundTasks {
    fn default() -> Self {
        Self {
            running: Mutex::new(Some(JoinSet::new())),
            keys: Arc::default(),
        }
    }
}

/// Why [`BackgroundTasks::try_spawn`] did not start the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStarted {
    /// Shutdown began.
    ShuttingDown,
    /// As many tasks as allowed run already.
    Full,
    /// A task with the same key runs already.
    Running,
}

impl NotStarted {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            NotStarted::ShuttingDown => "shutting_down",
            NotStarted::Full => "full",
            NotStarted::Running => "running",
        }
    }
}

/// Removes its key from the running keys when the task ends, however it ends.
struct KeyHeld {
    keys: Arc<Mutex<HashSet<String>>>,
    key: String,
}

impl Drop for KeyHeld {
    fn drop(&mut self) {
        lock(&self.keys).remove(&self.key);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every step under these locks leaves the data consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BackgroundTasks {
    /// Starts `work` under `key` unless shutdown began, `limit` tasks run already, or a task
    /// with the same key runs. Finished tasks are reaped on the way, so the set holds only what
    /// still runs.
    pub fn try_spawn(
        &self,
        key: String,
        limit: usize,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), NotStarted> {
        let mut running = lock(&self.running);
        let Some(set) = running.as_mut() else {
            return Err(NotStarted::ShuttingDown);
        };
        while set.try_join_next().is_some() {}
        if set.len() >= limit {
            return Err(NotStarted::Full);
        }
        if !lock(&self.keys).insert(key.clone()) {
            return Err(NotStarted::Running);
        }
        let held = KeyHeld {
            keys: self.keys.clone(),
            key,
        };
        set.spawn(async move {
            let _held = held;
            work.await;
        });
        Ok(())
    }

    /// How many tasks run now.
    pub fn len(&self) -> usize {
        lock(&self.running).as_mut().map_or(0, |set| {
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
        let Some(mut set) = lock(&self.running).take() else {
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
        let started = tasks.try_spawn("a".into(), 4, async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = done_tx.send(());
        });
        assert_eq!(started, Ok(()));
        assert_eq!(tasks.len(), 1);
        tasks.drain(Duration::from_secs(5)).await;
        assert!(
            done_rx.await.is_ok(),
            "the task ran to completion before drain returned"
        );
        assert_eq!(
            tasks.try_spawn("b".into(), 4, async {}),
            Err(NotStarted::ShuttingDown)
        );
        assert!(tasks.is_empty(), "no work starts after shutdown began");
    }

    #[tokio::test]
    async fn drain_aborts_work_that_outlives_the_grace_period() {
        let tasks = BackgroundTasks::default();
        assert_eq!(tasks.try_spawn("a".into(), 4, std::future::pending()), Ok(()));
        tasks.drain(Duration::from_millis(20)).await;
        assert!(tasks.is_empty());
        assert!(lock(&tasks.keys).is_empty(), "the aborted task gave its key back");
    }

    #[tokio::test]
    async fn at_most_limit_tasks_and_one_per_key_run() {
        let tasks = BackgroundTasks::default();
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        let held = |mut release: tokio::sync::watch::Receiver<bool>| async move {
            let _ = release.wait_for(|go| *go).await;
        };
        assert_eq!(tasks.try_spawn("a".into(), 2, held(release_rx.clone())), Ok(()));
        assert_eq!(
            tasks.try_spawn("a".into(), 2, held(release_rx.clone())),
            Err(NotStarted::Running)
        );
        assert_eq!(tasks.try_spawn("b".into(), 2, held(release_rx.clone())), Ok(()));
        assert_eq!(
            tasks.try_spawn("c".into(), 2, held(release_rx.clone())),
            Err(NotStarted::Full)
        );
        assert_eq!(tasks.len(), 2);
        release_tx.send_replace(true);
        for _ in 0..100 {
            if tasks.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(tasks.is_empty(), "both tasks finished");
        assert_eq!(
            tasks.try_spawn("a".into(), 2, async {}),
            Ok(()),
            "a finished task's key is free again"
        );
    }
}
