//! A call's deadline as a value, so that work deep below the transport (a database statement,
//! a lock wait, a model call) ends when the caller stops waiting instead of finishing unseen.
//!
//! The gRPC layer ([`crate::grpc::deadline_layer`]) makes one for every call and puts it in the
//! request's extensions; handlers pass it down to the use cases, which pass it to the store and
//! the model clients. Work outside a call (background summarization, start-up, the retention
//! sweep) passes `None` and relies on the configured backstops.
//!
//! A deadline also settles the race between a commit and the answer DEADLINE_EXCEEDED: a write
//! [`Deadline::claim_commit`]s before it sends `COMMIT`, and the layer
//! [`Deadline::abandon`]s the call before it answers that the time ran out. Whichever comes
//! first wins: an abandoned call commits nothing, and a call whose commit was claimed is
//! answered with its real outcome, however late. So a caller told DEADLINE_EXCEEDED by ctxd
//! never finds the write stored later.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

/// The call is still working: it may claim its commit, or be abandoned.
const WORKING: u8 = 0;
/// A commit was claimed: the call is answered with its outcome.
const COMMITTING: u8 = 1;
/// The call was given up at its deadline: nothing may commit.
const ABANDONED: u8 = 2;

/// When the caller stops waiting, the earlier instant by which the work must be done, and
/// whether the call may still commit (shared by the copies the layers below hold).
#[derive(Debug, Clone)]
pub struct Deadline {
    call: Instant,
    work: Instant,
    state: Arc<AtomicU8>,
}

impl Deadline {
    /// A call that the caller gave `allowed` from now. Its work (database statements, lock
    /// waits, model calls) must end a margin earlier, a tenth of `allowed` and at most 100 ms,
    /// in which the answer travels back: a statement that commits is one whose success the
    /// caller still hears about. The margin is fixed here: it does not shrink as time passes.
    pub fn after(allowed: Duration) -> Self {
        let now = Instant::now();
        let margin = (allowed / 10).min(Duration::from_millis(100));
        Self {
            call: now + allowed,
            work: now + (allowed - margin),
            state: Arc::new(AtomicU8::new(WORKING)),
        }
    }

    /// When the caller stops waiting.
    pub fn call(&self) -> Instant {
        self.call
    }

    /// When the work must be done.
    pub fn work(&self) -> Instant {
        self.work
    }

    /// How long the work may still take: zero once [`Self::work`] has passed.
    pub fn work_left(&self) -> Duration {
        self.work.saturating_duration_since(Instant::now())
    }

    /// Claims the right to commit, before a write sends `COMMIT`: false when the call was
    /// abandoned, or its work deadline has passed (then it is abandoned here: nothing may
    /// commit; the margin left is the commit's, so that its answer still reaches the caller).
    /// Once claimed, the call is answered with the write's outcome.
    pub fn claim_commit(&self) -> bool {
        if Instant::now() >= self.work {
            self.abandon();
        }
        match self.transition(WORKING, COMMITTING) {
            Ok(()) => true,
            Err(state) => state == COMMITTING,
        }
    }

    /// Gives the call up, before answering DEADLINE_EXCEEDED: true when nothing can commit
    /// any more; false when a commit was claimed first (then the call must be answered with
    /// its outcome).
    pub fn abandon(&self) -> bool {
        match self.transition(WORKING, ABANDONED) {
            Ok(()) => true,
            Err(state) => state == ABANDONED,
        }
    }

    fn transition(&self, from: u8, to: u8) -> Result<(), u8> {
        self.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_ends_a_margin_before_the_call() {
        let d = Deadline::after(Duration::from_secs(2));
        assert_eq!(d.call() - d.work(), Duration::from_millis(100));
        let left = d.work_left();
        assert!(left <= Duration::from_millis(1900), "{left:?}");
        assert!(left > Duration::from_millis(1800), "{left:?}");
        // The margin is fixed when the call starts: it does not shrink as time passes.
        let late = Deadline::after(Duration::from_millis(200));
        assert_eq!(late.call() - late.work(), Duration::from_millis(20));
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(late.work_left() <= Duration::from_millis(30));
        assert_eq!(Deadline::after(Duration::ZERO).work_left(), Duration::ZERO);
    }

    #[test]
    fn a_commit_and_the_deadline_answer_exclude_each_other() {
        let committed = Deadline::after(Duration::from_secs(5));
        let copy = committed.clone();
        assert!(copy.claim_commit() && copy.claim_commit());
        assert!(
            !committed.abandon(),
            "a claimed commit is answered with its outcome"
        );

        let abandoned = Deadline::after(Duration::from_secs(5));
        assert!(abandoned.abandon() && abandoned.abandon());
        assert!(
            !abandoned.clone().claim_commit(),
            "an abandoned call commits nothing"
        );

        let late = Deadline::after(Duration::ZERO);
        assert!(!late.claim_commit(), "past the deadline nothing commits");
        assert!(late.abandon());
    }
}
