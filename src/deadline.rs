//! The deadline of the call being served, so that work deep below the transport (a database
//! statement, a lock wait) ends when the caller stops waiting instead of finishing unseen.
//!
//! The gRPC layer ([`crate::grpc::deadline`]) sets it for the whole handler future; code outside
//! a call (background summarization, start-up) sees none and relies on the configured backstops.

use std::{future::Future, time::Duration};

use tokio::time::Instant;

/// The current call's deadline, and the earlier instant by which the work must be done.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    call: Instant,
    work: Instant,
}

tokio::task_local! {
    static DEADLINE: Deadlines;
}

/// Runs `future` as a call that the caller gave `allowed` from now. Its work (database
/// statements, lock waits) must end a margin earlier, a tenth of `allowed` and at most 100 ms,
/// in which the answer travels back: a statement that commits is one whose success the caller
/// still hears about.
pub async fn scope<F: Future>(allowed: Duration, future: F) -> F::Output {
    let now = Instant::now();
    let margin = (allowed / 10).min(Duration::from_millis(100));
    let deadlines = Deadlines {
        call: now + allowed,
        work: now + (allowed - margin),
    };
    DEADLINE.scope(deadlines, future).await
}

/// The current call's deadline, if this task is serving one.
pub fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| d.call).ok()
}

/// How long the database may still work for the current call (see [`scope`]). `None` outside
/// a call; zero once the work deadline has passed.
pub fn budget() -> Option<Duration> {
    let work = DEADLINE.try_with(|d| d.work).ok()?;
    Some(work.saturating_duration_since(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn budget_leaves_a_margin_and_exists_only_inside_a_call() {
        assert_eq!(budget(), None);
        let inside = scope(Duration::from_secs(2), async { budget() }).await.unwrap();
        assert!(inside <= Duration::from_millis(1900), "{inside:?}");
        assert!(inside > Duration::from_millis(1800), "{inside:?}");
        // The margin is fixed when the call starts: it does not shrink as time passes.
        let late = scope(Duration::from_millis(200), async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            budget()
        })
        .await
        .unwrap();
        assert!(late <= Duration::from_millis(30), "{late:?}");
        let past = scope(Duration::ZERO, async { budget() }).await.unwrap();
        assert_eq!(past, Duration::ZERO);
    }
}
