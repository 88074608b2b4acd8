//! CPU-heavy work (embedded extraction and summarization, large tokenizations) runs here, off the
//! async workers: on tokio's blocking pool, at most one job per core at once, so that health and
//! light RPCs keep their workers; at most half the cores for one owner (a tenant), so that one
//! tenant's large requests cannot take every core from the others; and cancelled when its
//! caller stops waiting (the RPC deadline passed or the client went away), so abandoned work
//! does not keep a core.

use std::{
    collections::HashMap,
    sync::{
        Arc, LazyLock, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::sync::Semaphore;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

/// One slot per core: queued jobs wait (asynchronously) for a free one.
static SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(cores())));

/// Each owner's slots (half the cores, at least one), while it has jobs queued or running.
static OWNERS: LazyLock<Mutex<HashMap<String, Arc<Semaphore>>>> = LazyLock::new(Mutex::default);

/// The slots of `owner`'s jobs.
fn owner_slots(owner: &str) -> Arc<Semaphore> {
    let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    owners
        .entry(owner.to_owned())
        .or_insert_with(|| Arc::new(Semaphore::new((cores() / 2).max(1))))
        .clone()
}

/// Forgets `owner`'s slots once no job of its holds or waits for them.
fn release_owner(owner: &str, slots: Arc<Semaphore>) {
    let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    // The map's and this one: nobody else waits.
    if Arc::strong_count(&slots) == 2 {
        owners.remove(owner);
    }
}

/// Tells a running job its caller stopped waiting; jobs check it between units of work.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// True once the caller stopped waiting: the job may return anything, nobody reads it.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Forgets the owner's slots when its last job ends (or stops waiting).
struct OwnerGuard {
    owner: String,
    slots: Option<Arc<Semaphore>>,
}

impl Drop for OwnerGuard {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            release_owner(&self.owner, slots);
        }
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

/// Runs `work` on the blocking pool when one of `owner`'s slots and a core's are free. The
/// slots are held until the job actually ends, so cancelled jobs still count against the limit
/// until they notice.
pub async fn run<T: Send + 'static>(owner: &str, work: impl FnOnce(&Cancel) -> T + Send + 'static) -> T {
    let owned = OwnerGuard {
        owner: owner.to_owned(),
        slots: Some(owner_slots(owner)),
    };
    let mine = owned
        .slots
        .clone()
        .expect("set above")
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let slot = SLOTS
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let cancel = Cancel::default();
    let mut guard = CancelOnDrop(Some(cancel.clone()));
    let job = tokio::task::spawn_blocking(move || {
        let _slots = (slot, mine, owned);
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
        let waiting = run("test", move |cancel| {
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_owner_takes_at_most_half_the_cores() {
        let per_owner = (cores() / 2).max(1);
        if cores() < 2 {
            return;
        }
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let mut busy = Vec::new();
        for _ in 0..per_owner {
            let (release_rx, started_tx) = (release_rx.clone(), started_tx.clone());
            busy.push(tokio::spawn(run("greedy", move |_| {
                started_tx.send(()).unwrap();
                let _ = release_rx.lock().unwrap().recv();
            })));
        }
        // The greedy owner's jobs hold its slots before its next one is queued.
        for _ in 0..per_owner {
            let started_rx = &started_rx;
            tokio::task::block_in_place(|| started_rx.recv_timeout(Duration::from_secs(5)).unwrap());
        }
        // The greedy owner's next job waits; another owner's runs at once.
        let queued = tokio::spawn(run("greedy", |_| ()));
        let other = tokio::time::timeout(Duration::from_secs(5), run("other", |_| 42)).await;
        assert_eq!(other.ok(), Some(42), "another owner's job did not run");
        assert!(!queued.is_finished(), "the owner's job ran past its share");
        for _ in 0..per_owner {
            release_tx.send(()).unwrap();
        }
        queued.await.unwrap();
        for job in busy {
            job.await.unwrap();
        }
        assert!(
            OWNERS.lock().unwrap().get("greedy").is_none(),
            "an idle owner is forgotten"
        );
    }
}
