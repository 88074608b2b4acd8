//! Prometheus metrics, served on their own HTTP port (`CTXD_METRICS_LISTEN`) at `/metrics`.
//!
//! Two owners. The use cases count their work (context packs, summaries, retention) in the
//! process-wide [`METRICS`]: they record deep inside the service layer, which holds no handle
//! to pass one through. What a server owns, its calls and its database pool, lives in its own
//! [`ServerMetrics`], so two servers in one process (the tests start many) each report their
//! own pool and calls. A server's registry holds both, so one scrape shows everything.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, sync::LazyLock, time::Duration};

use http_body_util::Full;
use hyper::{Request, Response, body::Bytes, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder, core::Collector,
};

use crate::{net::Acceptor, store::PoolStats};

/// What the use cases count, wherever in the process they run.
#[derive(Debug)]
pub struct Metrics {
    /// Total tokens of each context pack.
    pub context_tokens: Histogram,
    /// History messages left out of packs.
    pub messages_dropped: IntCounter,
    /// Summarizer and extractor calls by engine and outcome.
    pub summarizer_calls: IntCounterVec,
    /// Conversations the retention sweeper deleted.
    pub retention_conversations: IntCounter,
    /// Messages of the conversations the retention sweeper deleted.
    pub retention_messages: IntCounter,
    /// Background summary checks not started, by reason.
    pub background_skipped: IntCounterVec,
    /// Bytes of messages in the replica's message cache (PostgreSQL store).
    pub message_cache_bytes: IntGauge,
    /// BuildContext pages of the log's tail by where they came from (cache, database).
    pub tail_pages: IntCounterVec,
}

/// The process-wide counters of the use cases.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let context_tokens = Histogram::with_opts(
            HistogramOpts::new("ctxd_context_tokens", "Tokens of each BuildContext pack")
                .buckets(prometheus::exponential_buckets(256.0, 2.0, 11).expect("valid buckets")),
        )
        .expect("valid metric");
        Self {
            context_tokens,
            messages_dropped: counter(
                "ctxd_context_messages_dropped_total",
                "History messages after the summary watermark left out of context packs",
            ),
            summarizer_calls: counter_vec(
                "ctxd_summarizer_calls_total",
                "Summarizer and extractor runs by engine and outcome",
                &["engine", "outcome"],
            ),
            retention_conversations: counter(
                "ctxd_retention_conversations_deleted_total",
                "Conversations the retention sweeper deleted (expired or inactive)",
            ),
            retention_messages: counter(
                "ctxd_retention_messages_deleted_total",
                "Messages of the conversations the retention sweeper deleted",
            ),
            background_skipped: counter_vec(
                "ctxd_background_summaries_skipped_total",
                "Background summary checks not started: full (CTXD_AUTO_SUMMARIZE_CONCURRENCY \
                 run already), running (one runs for the conversation), shutting_down",
                &["reason"],
            ),
            message_cache_bytes: IntGauge::new(
                "ctxd_message_cache_bytes",
                "Bytes of decoded messages in this replica's cache (CTXD_MESSAGE_CACHE_MIB)",
            )
            .expect("valid metric"),
            tail_pages: counter_vec(
                "ctxd_context_pages_total",
                "Pages of the log's tail BuildContext read, by source: cache (this replica's \
                 decoded messages) or database",
                &["source"],
            ),
        }
    }

    /// Handles to every counter, for a server's registry (a collector may sit in several).
    fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.context_tokens.clone()),
            Box::new(self.messages_dropped.clone()),
            Box::new(self.summarizer_calls.clone()),
            Box::new(self.retention_conversations.clone()),
            Box::new(self.retention_messages.clone()),
            Box::new(self.background_skipped.clone()),
            Box::new(self.message_cache_bytes.clone()),
            Box::new(self.tail_pages.clone()),
        ]
    }
}

/// Reads a server's database pool when metrics are scraped (`None`: no pool to report).
pub type PoolStatus = Arc<dyn Fn() -> Option<PoolStats> + Send + Sync>;

/// One server's metrics: its calls and its pool, beside the process-wide [`METRICS`]. Cheap to
/// clone: the metrics are shared.
#[derive(Clone)]
pub struct ServerMetrics {
    registry: Registry,
    /// RPC latency by method and gRPC code.
    rpc_duration: HistogramVec,
    /// Database pool connections by state (size, available, waiting), read at scrape time.
    pool_connections: IntGaugeVec,
    pool: Option<PoolStatus>,
}

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetrics")
            .field("reports_pool", &self.pool.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerMetrics {
    /// A server's metrics, reporting the pool `pool` reads.
    pub fn new(pool: Option<PoolStatus>) -> Self {
        let rpc_duration = HistogramVec::new(
            HistogramOpts::new(
                "ctxd_rpc_duration_seconds",
                "ContextService RPC latency by method, gRPC code and protocol (grpc, grpc_web, connect)",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ]),
            &["method", "code", "protocol"],
        )
        .expect("valid metric");
        let pool_connections = IntGaugeVec::new(
            Opts::new("ctxd_db_pool_connections", "Database pool connections by state"),
            &["state"],
        )
        .expect("valid metric");
        let registry = Registry::new();
        let own: [Box<dyn Collector>; 2] =
            [Box::new(rpc_duration.clone()), Box::new(pool_connections.clone())];
        for collector in METRICS.collectors().into_iter().chain(own) {
            registry.register(collector).expect("unique metric");
        }
        Self {
            registry,
            rpc_duration,
            pool_connections,
            pool,
        }
    }

    /// Records one finished call.
    pub fn observe_rpc(
        &self,
        method: &'static str,
        code: &'static str,
        protocol: &'static str,
        elapsed: Duration,
    ) {
        self.rpc_duration
            .with_label_values(&[method, code, protocol])
            .observe(elapsed.as_secs_f64());
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        if let Some(stats) = self.pool.as_ref().and_then(|status| status()) {
            for (state, value) in [
                ("size", stats.size),
                ("available", stats.available),
                ("waiting", stats.waiting),
            ] {
                let value = i64::try_from(value).unwrap_or(i64::MAX);
                self.pool_connections.with_label_values(&[state]).set(value);
            }
        }
        let mut out = Vec::new();
        // Encoding gathered families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Connections the metrics port keeps open at once: scrapers are few.
pub const MAX_CONNECTIONS: usize = 64;

/// Serves `/metrics` until the task is dropped. A connection must send its request headers
/// within `header_timeout`.
pub async fn serve(acceptor: Acceptor, header_timeout: Duration, metrics: ServerMetrics) {
    loop {
        let accepted = acceptor.accept().await;
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = accepted.slot;
            let service = service_fn(|request: Request<hyper::body::Incoming>| {
                let response = answer(request.uri().path(), &metrics);
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(accepted.stream), service)
                .await;
        });
    }
}

/// The metrics at `/metrics`; nothing anywhere else.
fn answer(path: &str, metrics: &ServerMetrics) -> Response<Full<Bytes>> {
    let response = match path {
        "/metrics" => Response::builder()
            .header("content-type", "text/plain; version=0.0.4")
            .body(Full::new(Bytes::from(metrics.render()))),
        _ => Response::builder()
            .status(404)
            .body(Full::new(Bytes::from_static(b"not found\n"))),
    };
    response.unwrap_or_default()
}

/// Binds the metrics listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(size: usize) -> PoolStatus {
        Arc::new(move || {
            Some(PoolStats {
                size,
                available: 1,
                waiting: 0,
            })
        })
    }

    #[test]
    fn each_server_reports_its_own_pool() {
        let first = ServerMetrics::new(Some(pool(3)));
        let second = ServerMetrics::new(Some(pool(7)));
        assert!(
            first
                .render()
                .contains("ctxd_db_pool_connections{state=\"size\"} 3")
        );
        assert!(
            second
                .render()
                .contains("ctxd_db_pool_connections{state=\"size\"} 7")
        );
    }

    #[test]
    fn a_server_shows_the_process_wide_counters_beside_its_own() {
        let metrics = ServerMetrics::new(None);
        metrics.observe_rpc("AppendMessage", "OK", "grpc", Duration::from_millis(1));
        METRICS.messages_dropped.inc_by(0);
        let text = metrics.render();
        assert!(text.contains(
            "ctxd_rpc_duration_seconds_count{code=\"OK\",method=\"AppendMessage\",protocol=\"grpc\"} 1"
        ));
        assert!(text.contains("ctxd_context_messages_dropped_total"), "{text}");
        assert!(!text.contains("ctxd_db_pool_connections{"), "{text}");
    }
}
