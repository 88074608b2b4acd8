//! Running a built [`App`]: start the server and its companions, wait for the first end, and
//! stop in order (NOT_SERVING, drain calls and background work, close the store).

use std::{future::Future, sync::Arc, time::Duration};

use tokio::sync::oneshot;
use tonic_health::{ServingStatus, server::HealthReporter};

use super::{
    App, SERVICE_NAME, StartupError,
    companions::{self, Companions, Ended, ServerTask},
};
use crate::{
    runtime::net::{Acceptor, HTTP2_PREFACE_BYTES},
    runtime::telemetry::ErrorChain,
    service::Service,
    service::metrics,
    store::Store,
};

/// A server and its companions, running.
#[derive(Debug)]
struct Running {
    server: ServerTask,
    stop_server: oneshot::Sender<()>,
    companions: Companions,
    health: HealthReporter,
    service: Service,
    store: Arc<dyn Store>,
    shutdown_grace: Duration,
}

impl App {
    /// Serves until `shutdown` completes, then reports NOT_SERVING, drains in-flight calls and
    /// background work for at most the configured grace period, and closes the store. Fails
    /// when the server or a companion task panics or stops by itself.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartupError> {
        let addr = self.local_addr();
        let mut running = self.start().await;
        tracing::info!(%addr, "ctxd listening");
        let ended = companions::first_end(&mut running.server, &mut running.companions, shutdown).await;
        running.stop(ended).await
    }

    /// Reports SERVING and starts the companions and the server; nothing here can fail.
    async fn start(self) -> Running {
        let App {
            listener,
            metrics_listener,
            router,
            health,
            service,
            store,
            metrics,
            server: options,
            retention,
        } = self;
        health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
        let mut companions = Companions::default();
        let probe = companions::probe_store(store.clone(), health.clone(), options.health_probe_interval);
        companions.spawn("the health probe", probe);
        let changes = service.change_options().retention;
        let sweeper =
            crate::service::retention::run(store.clone(), retention, changes, service.metrics().clone());
        companions.spawn("the retention sweeper", sweeper);
        if let Some(listener) = metrics_listener {
            let acceptor = Acceptor::new(listener, metrics::MAX_CONNECTIONS, "metrics");
            let endpoint = metrics::serve(acceptor, options.handshake_timeout, metrics);
            companions.spawn("the metrics endpoint", endpoint);
        }
        let incoming = Acceptor::new(listener, options.max_connections, "grpc")
            .incoming(HTTP2_PREFACE_BYTES, options.handshake_timeout);
        let (stop_server, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
            let _ = stopped.await;
        }));
        Running {
            server,
            stop_server,
            companions,
            health,
            service,
            store,
            shutdown_grace: options.shutdown_grace,
        }
    }
}

impl Running {
    /// Stops after `ended`: a shutdown drains and succeeds; a companion's failure drains and
    /// fails; the server's own end fails unless it ended cleanly.
    async fn stop(self, ended: Ended) -> Result<(), StartupError> {
        let Running {
            server,
            stop_server,
            companions,
            health,
            service,
            store,
            shutdown_grace,
        } = self;
        let outcome = match ended {
            Ended::Server(served) => companions::served(served),
            Ended::Shutdown => {
                tracing::info!(
                    grace_secs = shutdown_grace.as_secs(),
                    "shutting down: draining in-flight calls"
                );
                stop_serving(&health, stop_server).await;
                companions::served(companions::drain(server, &service, shutdown_grace).await)
            }
            Ended::Companion(failure) => {
                tracing::error!(error = %ErrorChain(&failure), "stopping: draining in-flight calls");
                stop_serving(&health, stop_server).await;
                let _ = companions::drain(server, &service, shutdown_grace).await;
                Err(failure)
            }
        };
        // Dropping the set aborts the companions.
        drop(companions);
        store.close();
        outcome
    }
}

/// Reports NOT_SERVING (liveness and readiness) and tells the server to stop accepting.
async fn stop_serving(health: &HealthReporter, stop_server: oneshot::Sender<()>) {
    health.set_service_status("", ServingStatus::NotServing).await;
    health
        .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
        .await;
    let _ = stop_server.send(());
}
