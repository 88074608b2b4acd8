//! Prometheus metrics, served on their own HTTP port (`CTXD_METRICS_LISTEN`) at `/metrics`.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, LazyLock, OnceLock},
};

use http_body_util::Full;
use hyper::{Request, Response, body::Bytes, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Every metric ctxd exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// RPC latency by method and gRPC code.
    pub rpc_duration: HistogramVec,
    /// Total tokens of each context pack.
    pub context_tokens: Histogram,
    /// History messages left out of packs.
    pub messages_dropped: IntCounter,
    /// Summarizer and extractor calls by engine and outcome.
    pub summarizer_calls: IntCounterVec,
    /// Database pool connections by state (size, available, waiting), read at scrape time.
    pub pool_connections: IntGaugeVec,
    /// Conversations the retention sweeper deleted.
    pub retention_conversations: IntCounter,
    /// Messages of the conversations the retention sweeper deleted.
    pub retention_messages: IntCounter,
    /// Background summary checks not started, by reason.
    pub background_skipped: IntCounterVec,
}

/// Reads the pool's (size, available, waiting) when metrics are scraped.
pub type PoolStatus = Arc<dyn Fn() -> (i64, i64, i64) + Send + Sync>;

static POOL_STATUS: OnceLock<PoolStatus> = OnceLock::new();

/// The process-wide metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let rpc_duration = HistogramVec::new(
            HistogramOpts::new(
                "ctxd_rpc_duration_seconds",
                "ContextService RPC latency by method and gRPC code",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ]),
            &["method", "code"],
        )
        .expect("valid metric");
        let context_tokens = Histogram::with_opts(
            HistogramOpts::new("ctxd_context_tokens", "Tokens of each BuildContext pack")
                .buckets(prometheus::exponential_buckets(256.0, 2.0, 11).expect("valid buckets")),
        )
        .expect("valid metric");
        let messages_dropped = IntCounter::new(
            "ctxd_context_messages_dropped_total",
            "History messages after the summary watermark left out of context packs",
        )
        .expect("valid metric");
        let summarizer_calls = IntCounterVec::new(
            Opts::new(
                "ctxd_summarizer_calls_total",
                "Summarizer and extractor runs by engine and outcome",
            ),
            &["engine", "outcome"],
        )
        .expect("valid metric");
        let pool_connections = IntGaugeVec::new(
            Opts::new("ctxd_db_pool_connections", "Database pool connections by state"),
            &["state"],
        )
        .expect("valid metric");
        let retention_conversations = IntCounter::new(
            "ctxd_retention_conversations_deleted_total",
            "Conversations the retention sweeper deleted (expired or inactive)",
        )
        .expect("valid metric");
        let retention_messages = IntCounter::new(
            "ctxd_retention_messages_deleted_total",
            "Messages of the conversations the retention sweeper deleted",
        )
        .expect("valid metric");
        let background_skipped = IntCounterVec::new(
            Opts::new(
                "ctxd_background_summaries_skipped_total",
                "Background summary checks not started: full (CTXD_AUTO_SUMMARIZE_CONCURRENCY \
                 run already), running (one runs for the conversation), shutting_down",
            ),
            &["reason"],
        )
        .expect("valid metric");
        for collector in [
            Box::new(rpc_duration.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(context_tokens.clone()),
            Box::new(messages_dropped.clone()),
            Box::new(summarizer_calls.clone()),
            Box::new(pool_connections.clone()),
            Box::new(retention_conversations.clone()),
            Box::new(retention_messages.clone()),
            Box::new(background_skipped.clone()),
        ] {
            registry.register(collector).expect("unique metric");
        }
        Self {
            registry,
            rpc_duration,
            context_tokens,
            messages_dropped,
            summarizer_calls,
            pool_connections,
            retention_conversations,
            retention_messages,
            background_skipped,
        }
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        if let Some(status) = POOL_STATUS.get() {
            let (size, available, waiting) = status();
            self.pool_connections.with_label_values(&["size"]).set(size);
            self.pool_connections
                .with_label_values(&["available"])
                .set(available);
            self.pool_connections.with_label_values(&["waiting"]).set(waiting);
        }
        let mut out = Vec::new();
        // Encoding gathered families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Registers the database pool whose status the pool gauges report.
pub fn set_pool_status(status: PoolStatus) {
    let _ = POOL_STATUS.set(status);
}

/// Connections the metrics port keeps open at once: scrapers are few.
pub const MAX_CONNECTIONS: usize = 64;

/// Serves `/metrics` until the task is dropped. A connection must send its request headers
/// within `header_timeout`.
pub async fn serve(acceptor: crate::net::Acceptor, header_timeout: std::time::Duration) {
    loop {
        let accepted = acceptor.accept().await;
        tokio::spawn(async move {
            let _slot = accepted.slot;
            let service = service_fn(|request: Request<hyper::body::Incoming>| async move {
                let response = match request.uri().path() {
                    "/metrics" => Response::builder()
                        .header("content-type", "text/plain; version=0.0.4")
                        .body(Full::new(Bytes::from(METRICS.render()))),
                    _ => Response::builder()
                        .status(404)
                        .body(Full::new(Bytes::from_static(b"not found\n"))),
                };
                Ok::<_, Infallible>(response.unwrap_or_default())
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(accepted.stream), service)
                .await;
        });
    }
}

/// Binds the metrics listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}
