//! CPU-heavy work (embedded extraction and summarization, large tokenizations) runs here, off the
//! async workers: on tokio's blocking pool, at most one job per core at once, so that health and
//! light RPCs keep their workers; and cancelled when its caller stops waiting (the RPC deadline
//! passed or the client went away), so abandoned work does not keep a core.

use std::sync::{
    Arc, LazyLock,
    atomic::{AtomicBool, Ordering},
};

use tokio::sync::Semaphore;

/// One slot per core: queued jobs wait (asynchronously) for a free one.
static SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    Arc::new(Semaphore::new(cores))
});

/// Tells a running job its caller stopped waiting; jobs check it between units of work.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// True once the caller stopped waiting: the job may return anything, nobody reads it.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sets the flag when the waiting future is dropped before the job finished.
struct CancelOnDrop(Option<Cancel>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Runs `work` on the blocking pool when a slot is free. The slot is held until the job
/// actually ends, so cancelled jobs still count against the limit until they notice.
pub async fn run<T: Send + 'static>(work: impl FnOnce(&Cancel) -> T + Send + 'static) -> T {
    let slot = SLOTS
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let cancel = Cancel::default();
    let mut guard = CancelOnDrop(Some(cancel.clone()));
    let job = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        work(&cancel)
    });
    let result = match job.await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    guard.0 = None;
    result
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_whose_caller_gave_up_is_told_to_stop() {
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let waiting = run(move |cancel| {
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            seen_tx.send(()).unwrap();
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(50), waiting)
                .await
                .is_err()
        );
        tokio::task::spawn_blocking(move || seen_rx.recv_timeout(Duration::from_secs(5)))
            .await
            .unwrap()
            .expect("the job saw the cancellation");
    }
}
