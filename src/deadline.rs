//! A call's deadline as a value, so that work deep below the transport (a database statement,
//! a lock wait, a model call) ends when the caller stops waiting instead of finishing unseen.
//!
//! The gRPC layer ([`crate::grpc::deadline`]) makes one for every call and puts it in the
//! request's extensions; handlers pass it down to the use cases, which pass it to the store and
//! the model clients. Work outside a call (background summarization, start-up, the retention
//! sweep) passes `None` and relies on the configured backstops.

use std::time::Duration;

use tokio::time::Instant;

/// When the caller stops waiting, and the earlier instant by which the work must be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    call: Instant,
    work: Instant,
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
        }
    }

    /// When the caller stops waiting.
    pub fn call(self) -> Instant {
        self.call
    }

    /// When the work must be done.
    pub fn work(self) -> Instant {
        self.work
    }

    /// How long the work may still take: zero once [`Self::work`] has passed.
    pub fn work_left(self) -> Duration {
        self.work.saturating_duration_since(Instant::now())
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
}
