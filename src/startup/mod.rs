//! Building and running the server, the composition root: configuration's options become the
//! store, the service, the router and the metrics; [`App::build`] does every step that can
//! fail, and [`App::run_until_stopped`] only starts tasks and supervises them.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::net::TcpListener;
use tonic::transport::server::Router;
use tonic_health::server::HealthReporter;

use crate::{
    config::{ServerOptions, Settings},
    service::Service,
    service::metrics::{self, ServerMetrics, StoreStatus},
    store::{self, Store, StoreError},
};

mod companions;
mod compose;
mod error;
mod router;
mod run;

pub use compose::{init_telemetry, postgres_options};
pub use error::StartupError;

use router::Layers;

/// Service name reported by the health service.
const SERVICE_NAME: &str = "ctxd.v1.ContextService";

/// A server with every fallible step done: store open and migrated, router built, listeners
/// bound. Nothing runs until [`App::run_until_stopped`]; dropping it starts nothing.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    router: Router<Layers>,
    health: HealthReporter,
    service: Service,
    store: Arc<dyn Store>,
    metrics: ServerMetrics,
    server: ServerOptions,
    retention: crate::config::RetentionOptions,
}

impl App {
    /// Opens the configured store (migrating it if configured), builds the service and the
    /// router, and binds the listeners.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let database = &settings.database;
        let store = store::open(postgres_options(database, settings.server.request_timeout).as_ref())?;
        // The in-memory store has no schema to migrate (nor to say is up to date).
        if database.migrate_on_start && database.url.is_some() {
            migrate_with_retry(&*store, database.startup_wait).await?;
        }
        let mut ai = compose::ai_settings(&settings.summarizer)
            .map_err(|source| StartupError::Summarizer { source })?;
        ai.embedder = compose::embedder(settings.embeddings.as_ref())
            .map_err(|source| StartupError::Embeddings { source })?;
        let service =
            Service::new(store.clone(), compose::limits(&settings.limits), ai).with_changes(settings.changes);
        // Semantic search's mean vector is learned now, off every request's path.
        service.learn_model_mean();
        let metrics = ServerMetrics::new(service.metrics(), store_status(&store));
        let (health, health_service) = tonic_health::server::health_reporter();
        let interceptor = compose::interceptor(&settings.auth);
        let router = router::router(
            &settings,
            service.clone(),
            interceptor,
            health_service,
            metrics.clone(),
        )?;
        let listener = bind(settings.server.listen).await?;
        let metrics_listener = match settings.telemetry.metrics_listen {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        Ok(Self {
            listener,
            metrics_listener,
            router,
            health,
            service,
            store,
            metrics,
            retention: settings.retention,
            server: settings.server,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.server.listen)
    }

    /// The bound metrics address, when metrics are served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener.as_ref().and_then(|l| l.local_addr().ok())
    }
}

/// What the metrics read from the store at scrape time: its pool and its message cache, for
/// a store that has them.
fn store_status(store: &Arc<dyn Store>) -> StoreStatus {
    let pool: Option<metrics::PoolStatus> = store.pool_stats().map(|_| {
        let store = store.clone();
        Arc::new(move || store.pool_stats()) as metrics::PoolStatus
    });
    let cache: Option<metrics::CacheStatus> = store.cache_stats().map(|_| {
        let store = store.clone();
        Arc::new(move || store.cache_stats()) as metrics::CacheStatus
    });
    StoreStatus { pool, cache }
}

/// Binds a listener, naming the address when it cannot.
async fn bind(addr: SocketAddr) -> Result<TcpListener, StartupError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartupError::Bind { addr, source })
}

/// Applies migrations, retrying while the database is not reachable yet (e.g. starting beside
/// ctxd in compose) for at most `wait`.
pub async fn migrate_with_retry(store: &dyn Store, wait: Duration) -> Result<usize, StoreError> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut delay = Duration::from_millis(200);
    loop {
        match store.migrate().await {
            Ok(applied) => {
                tracing::info!(applied, "database schema is up to date");
                return Ok(applied);
            }
            Err(StoreError::Unavailable { source }) if tokio::time::Instant::now() + delay < deadline => {
                tracing::warn!(error = %source, retry_in_ms = delay.as_millis() as u64, "database not reachable yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}
