//! Building and running the server: store selection, migrations, the gRPC router (service,
//! health, reflection) and graceful shutdown.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use tokio::net::TcpListener;
use tonic::codegen::http::{self, HeaderValue};
use tonic::{
    service::interceptor::InterceptedService,
    transport::{Certificate, Identity, Server, ServerTlsConfig},
};
use tonic_health::{ServingStatus, server::HealthReporter};

use crate::{
    config::{AiConfig, Engine, Settings},
    grpc::{
        ContextApi, TenantInterceptor,
        deadline::DeadlineLayer,
        metered::MeteredLayer,
        request_id::{REQUEST_ID_HEADER, RequestIdLayer},
    },
    net::{Acceptor, HTTP2_PREFACE_BYTES},
    proto::{self, context_service_server::ContextServiceServer},
    service::{AiSettings, Service},
    store::{self, Store, StoreError},
    summarize::{Extractor, OpenAiClient, OpenAiError, Summarizer},
};

/// Service name reported by the health service.
const SERVICE_NAME: &str = "ctxd.v1.ContextService";

/// How often an HTTP/2 connection is pinged, and how long the answer may take.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Failures that stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be prepared.
    #[error("database set-up failed")]
    Store(#[from] StoreError),
    /// The gRPC server failed.
    #[error("gRPC server failed")]
    Serve(#[from] tonic::transport::Error),
    /// The summarizer endpoint client could not be built.
    #[error("summarizer set-up failed: {message}")]
    Summarizer {
        /// Why.
        message: String,
    },
    /// Reflection could not be built from the descriptor sets.
    #[error("reflection set-up failed")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// A bound, ready-to-run server.
#[derive(Debug)]
pub struct App {
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    store: Arc<dyn Store>,
    settings: Settings,
}

impl App {
    /// Opens the configured store (migrating it if configured) and binds the listeners.
    pub async fn build(settings: Settings) -> Result<Self, StartupError> {
        let store = store::open(settings.postgres.as_ref())?;
        if settings.migrate_on_start {
            migrate_with_retry(&*store, settings.db_startup_wait).await?;
        }
        let listener = TcpListener::bind(settings.listen)
            .await
            .map_err(|source| StartupError::Bind {
                addr: settings.listen,
                source,
            })?;
        let metrics_listener = match settings.metrics_listen {
            Some(addr) => Some(
                crate::metrics::bind(addr)
                    .await
                    .map_err(|source| StartupError::Bind { addr, source })?,
            ),
            None => None,
        };
        if store.pool_stats().is_some() {
            let pooled = store.clone();
            crate::metrics::set_pool_status(Arc::new(move || {
                let stats = pooled.pool_stats().unwrap_or(store::PoolStats {
                    size: 0,
                    available: 0,
                    waiting: 0,
                });
                (stats.size as i64, stats.available as i64, stats.waiting as i64)
            }));
        }
        Ok(Self {
            listener,
            metrics_listener,
            store,
            settings,
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.settings.listen)
    }

    /// The bound metrics address, when metrics are served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` completes, then reports NOT_SERVING, drains in-flight calls and
    /// background work for at most the configured grace period, and closes the store.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartupError> {
        let App {
            listener,
            metrics_listener,
            store,
            settings,
        } = self;
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
        let probe = tokio::spawn(probe_store(
            store.clone(),
            health.clone(),
            settings.health_probe_interval,
        ));
        let retention = tokio::spawn(crate::service::retention::run(store.clone(), settings.retention));
        let ai = ai_settings(&settings.ai).map_err(|e| StartupError::Summarizer {
            message: e.to_string(),
        })?;
        let service = Service::new(store.clone(), settings.limits, ai);
        let metrics = metrics_listener.map(|l| {
            tokio::spawn(crate::metrics::serve(
                Acceptor::new(l, crate::metrics::MAX_CONNECTIONS, "metrics"),
                settings.handshake_timeout,
            ))
        });

        let addr = listener.local_addr().ok();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let mut server = spawn_server(&settings, service.clone(), health_service, listener, stop_rx)?;
        tracing::info!(?addr, "ctxd listening");

        let served = tokio::select! {
            result = &mut server => Some(result),
            () = shutdown => None,
        };
        let served = match served {
            Some(result) => result,
            None => {
                tracing::info!(
                    grace_secs = settings.shutdown_grace.as_secs(),
                    "shutting down: draining in-flight calls"
                );
                health.set_service_status("", ServingStatus::NotServing).await;
                health
                    .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
                    .await;
                let _ = stop_tx.send(());
                drain(server, &service, settings.shutdown_grace).await
            }
        };
        probe.abort();
        retention.abort();
        if let Some(metrics) = &metrics {
            metrics.abort();
        }
        store.close();
        match served {
            Ok(result) => Ok(result?),
            Err(join) => {
                tracing::error!(error = %join, "server task failed");
                Ok(())
            }
        }
    }
}

type ServeResult = Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>;

/// Waits for in-flight calls, then background work, within one grace period.
async fn drain(mut server: ServerTask, service: &Service, grace: Duration) -> ServeResult {
    let deadline = tokio::time::Instant::now() + grace;
    let served = match tokio::time::timeout_at(deadline, &mut server).await {
        Ok(result) => result,
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

type ServerTask = tokio::task::JoinHandle<Result<(), tonic::transport::Error>>;

/// Starts the gRPC server: the service behind the tenant interceptor, health, reflection, TLS
/// and connection limits; it stops accepting when `stop` fires and ends once calls drained.
fn spawn_server(
    settings: &Settings,
    service: Service,
    health_service: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
    listener: TcpListener,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<ServerTask, StartupError> {
    let api = ContextServiceServer::new(ContextApi::new(service))
        .max_decoding_message_size(settings.max_request_bytes)
        // A backstop: responses are checked against max_response_bytes as they are built.
        .max_encoding_message_size(settings.limits.max_response_bytes.saturating_mul(2));
    let api = InterceptedService::new(api, interceptor(settings));
    // Outermost first: metrics see every call's final code, including the oversize rewrite and
    // the deadline's answer.
    let layers = tower::ServiceBuilder::new()
        .layer(MeteredLayer)
        .layer(RequestIdLayer)
        .layer(tower::util::MapResponseLayer::new(
            oversize_is_resource_exhausted as fn(_) -> _,
        ))
        .layer(DeadlineLayer::new(settings.request_timeout));
    let mut builder = Server::builder();
    if let Some(tls) = &settings.tls {
        // tonic's rustls uses the process-wide provider; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&tls.cert, &tls.key))
            .timeout(settings.handshake_timeout);
        if let Some(ca) = &tls.client_ca {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        builder = builder.tls_config(config)?;
        tracing::info!(mutual = tls.client_ca.is_some(), "serving gRPC over TLS");
    }
    let incoming = Acceptor::new(listener, settings.max_connections, "grpc")
        .incoming(HTTP2_PREFACE_BYTES, settings.handshake_timeout);
    let server = builder
        .max_connection_age(settings.max_connection_age)
        // Past its age, a connection gets this long to finish its calls, then is closed, with
        // whatever responses its client never read.
        .max_connection_age_grace(settings.request_timeout)
        // A peer that stops answering pings (gone, or not reading at all) is closed.
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .concurrency_limit_per_connection(settings.concurrency_per_connection)
        .trace_fn(|request| {
            let request_id = request
                .headers()
                .get(REQUEST_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            tracing::info_span!("rpc", method = %request.uri().path(), request_id)
        })
        .layer(layers)
        .add_service(health_service)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(api)
        .serve_with_incoming_shutdown(incoming, async {
            let _ = stop.await;
        });
    Ok(tokio::spawn(server))
}

/// Who may call: API keys when configured, else the trusted `x-tenant-id` header.
fn interceptor(settings: &Settings) -> TenantInterceptor {
    match settings.api_keys.clone() {
        Some(keys) => {
            tracing::info!(keys = keys.len(), "API key authentication enabled");
            TenantInterceptor::with_api_keys(keys)
        }
        None => {
            tracing::warn!(
                "AUTH DISABLED: no API keys configured; the x-tenant-id header is trusted. \
                 Only run this way in development or behind a trusted mesh."
            );
            TenantInterceptor::trusting_header(settings.default_tenant.clone())
        }
    }
}

/// Builds the configured summarizer and extractor (one shared endpoint client).
fn ai_settings(config: &AiConfig) -> Result<AiSettings, OpenAiError> {
    let uses_openai = config.summarizer == Engine::OpenAi || config.extractor == Engine::OpenAi;
    let client = match uses_openai {
        true => Some(Arc::new(OpenAiClient::new(config.openai.clone())?)),
        false => None,
    };
    let summarizer = match (&client, config.summarizer) {
        (Some(c), Engine::OpenAi) => Summarizer::OpenAi(c.clone()),
        _ => Summarizer::Extractive,
    };
    let extractor = match (&client, config.extractor) {
        (Some(c), Engine::OpenAi) => Extractor::OpenAi(c.clone()),
        _ => Extractor::Rules,
    };
    tracing::info!(summarizer = summarizer.name(), extractor = ?config.extractor, "summarization configured");
    Ok(AiSettings {
        summarizer,
        extractor,
        max_summary_tokens: config.max_summary_tokens,
        auto_summarize: config.auto_summarize,
        context_tokens: config.openai.context_tokens,
    })
}

/// tonic answers a request over the decoding limit with OUT_OF_RANGE; the contract (DESIGN.md
/// section 3) says RESOURCE_EXHAUSTED. ctxd's handlers never produce OUT_OF_RANGE themselves,
/// so the rewrite touches only that case.
fn oversize_is_resource_exhausted(
    mut response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let out_of_range = HeaderValue::from_static("11");
    if response.headers().get("grpc-status") == Some(&out_of_range) {
        response
            .headers_mut()
            .insert("grpc-status", HeaderValue::from_static("8"));
    }
    response
}

/// Reflection over ctxd.v1, health, and google.rpc (so grpcurl can decode error details).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
}

/// Keeps readiness (`ctxd.v1.ContextService`) in step with the store: NOT_SERVING while it is
/// unreachable. Liveness (the overall service, `""`) does not follow the store: a database
/// outage must not restart every replica; it reports the process, NOT_SERVING only at shutdown.
/// A ping that hangs (a connection stuck behind a lock) counts as unreachable after `interval`.
async fn probe_store(store: Arc<dyn Store>, health: HealthReporter, interval: Duration) {
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
