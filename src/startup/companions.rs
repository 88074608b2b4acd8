//! The tasks a running server is made of, and how their ends are told apart: the shutdown
//! signal stops them cleanly; the gRPC server or a companion (health probe, retention sweeper,
//! metrics endpoint) ending on its own is a failure the process must exit non-zero for, so an
//! orchestrator restarts it instead of trusting a half-working replica.

use std::{collections::HashMap, future::Future, sync::Arc, time::Duration};

use tokio::task::{Id, JoinError, JoinHandle, JoinSet};
use tonic_health::{ServingStatus, server::HealthReporter};

use super::{SERVICE_NAME, error::StartupError};
use crate::{service::Service, store::Store};

/// The gRPC server, running.
pub(super) type ServerTask = JoinHandle<Result<(), tonic::transport::Error>>;

/// What the server task ended with.
pub(super) type Served = Result<Result<(), tonic::transport::Error>, JoinError>;

/// Tasks that run as long as the server does and never end on their own; dropping the set
/// aborts them.
#[derive(Debug, Default)]
pub(super) struct Companions {
    tasks: JoinSet<()>,
    names: HashMap<Id, &'static str>,
}

impl Companions {
    /// Starts `task`, named `name` in the error if it ever ends.
    pub(super) fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let id = self.tasks.spawn(task).id();
        self.names.insert(id, name);
    }

    /// Waits until one of them ends (never, without any), and says how.
    async fn failure(&mut self) -> StartupError {
        let Some(ended) = self.tasks.join_next_with_id().await else {
            return std::future::pending().await;
        };
        let (id, source) = match ended {
            Ok((id, ())) => (id, None),
            Err(error) => (error.id(), Some(error)),
        };
        let task = self.names.get(&id).copied().unwrap_or("a server task");
        StartupError::TaskEnded { task, source }
    }
}

/// Why serving ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// The caller's shutdown future completed: drain and stop.
    Shutdown,
    /// The gRPC server stopped by itself.
    Server(Served),
    /// A companion panicked or returned.
    Companion(StartupError),
}

/// Waits for whichever comes first: the shutdown signal, the server's end, a companion's end.
pub(super) async fn first_end(
    server: &mut ServerTask,
    companions: &mut Companions,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    tokio::select! {
        served = server => Ended::Server(served),
        failure = companions.failure() => Ended::Companion(failure),
        () = shutdown => Ended::Shutdown,
    }
}

/// The server's outcome: a panic or a transport failure is an error.
pub(super) fn served(served: Served) -> Result<(), StartupError> {
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(StartupError::Serve { source }),
        Err(source) => Err(StartupError::TaskEnded {
            task: "the gRPC server",
            source: Some(source),
        }),
    }
}

/// Waits for in-flight calls, then background work, within one grace period; past it the
/// server is aborted, with whatever calls were still running.
pub(super) async fn drain(mut server: ServerTask, service: &Service, grace: Duration) -> Served {
    let deadline = tokio::time::Instant::now() + grace;
    // Watch streams never end by themselves: they are told to, so the server can drain.
    service.close_watchers();
    let served = match tokio::time::timeout_at(deadline, &mut server).await {
        Ok(served) => served,
        Err(_) => {
            tracing::warn!("grace period elapsed with calls in flight; stopping anyway");
            server.abort();
            Ok(Ok(()))
        }
    };
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    service.background().drain(left).await;
    served
}

/// Keeps readiness (`ctxd.v1.ContextService`) in step with the store: NOT_SERVING while it is
/// unreachable. Liveness (the overall service, `""`) does not follow the store: a database
/// outage must not restart every replica; it reports the process, NOT_SERVING only at shutdown.
/// A ping that hangs (a connection stuck behind a lock) counts as unreachable after `interval`.
pub(super) async fn probe_store(store: Arc<dyn Store>, health: HealthReporter, interval: Duration) {
    let mut serving = true;
    let patience = interval.max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(interval).await;
        let ok = matches!(tokio::time::timeout(patience, store.ping()).await, Ok(Ok(())));
        if ok != serving {
            serving = ok;
            let status = if ok {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            tracing::warn!(serving = ok, "store health changed");
            health.set_service_status(SERVICE_NAME, status).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::pending;

    use super::*;

    fn idle_server() -> ServerTask {
        tokio::spawn(pending())
    }

    #[tokio::test]
    async fn a_panicked_companion_ends_serving_with_its_name() {
        let mut companions = Companions::default();
        companions.spawn("the health probe", pending());
        companions.spawn("the retention sweeper", async { panic!("sweep bug") });
        let ended = first_end(&mut idle_server(), &mut companions, pending()).await;
        let Ended::Companion(StartupError::TaskEnded { task, source }) = ended else {
            panic!("expected a companion failure, got {ended:?}");
        };
        assert_eq!(task, "the retention sweeper");
        assert!(source.is_some_and(|e| e.is_panic()));
    }

    #[tokio::test]
    async fn a_companion_that_returns_is_a_failure_too() {
        let mut companions = Companions::default();
        companions.spawn("the metrics endpoint", async {});
        let ended = first_end(&mut idle_server(), &mut companions, pending()).await;
        assert!(matches!(
            ended,
            Ended::Companion(StartupError::TaskEnded {
                task: "the metrics endpoint",
                source: None
            })
        ));
    }

    #[tokio::test]
    async fn a_panicked_server_is_an_error() {
        let mut server: ServerTask = tokio::spawn(async { panic!("serve bug") });
        let ended = first_end(&mut server, &mut Companions::default(), pending()).await;
        let Ended::Server(outcome) = ended else {
            panic!("expected the server's end, got {ended:?}");
        };
        assert!(matches!(
            served(outcome),
            Err(StartupError::TaskEnded {
                task: "the gRPC server",
                source: Some(_)
            })
        ));
    }

    #[tokio::test]
    async fn the_shutdown_signal_ends_serving_without_companions() {
        let ended = first_end(&mut idle_server(), &mut Companions::default(), async {}).await;
        assert!(matches!(ended, Ended::Shutdown));
    }
}
