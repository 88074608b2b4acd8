//! Prometheus metrics, served on their own HTTP port (`CTXD_METRICS_LISTEN`) at `/metrics`.
//!
//! Every figure belongs to one server; nothing is process-wide, so two servers in one process
//! (the tests start many) never share a counter. The use cases count their work (context
//! packs, summaries, retention) in the [`UseCaseMetrics`] their `Service` owns; the store
//! reports what it knows (its pool, its message cache) when asked, as figures read at scrape
//! time; the composition root hands all of it to the server's [`ServerMetrics`], whose
//! registry shows everything in one scrape.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use http_body_util::Full;
use hyper::{Request, Response, body::Bytes, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder, core::Collector,
};

use crate::{
    runtime::net::Acceptor,
    store::{CacheStats, PoolStats},
};

/// What the use cases count, one set per `Service`.
#[derive(Debug)]
pub struct UseCaseMetrics {
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
    /// Messages whose vectors were stored (semantic search).
    pub embedded_messages: IntCounter,
    /// Embedding requests that failed for good (after retries), by what they embedded
    /// (`passage`: messages after append; `query`: a search, answered lexically).
    pub embedding_failures: IntCounterVec,
    /// Seconds from a message's append to its vectors being stored.
    pub embedding_lag: Histogram,
    /// Conversations waiting for their messages to be embedded on this replica.
    pub embedding_queue: IntGauge,
    /// Embedding workers busy on this replica.
    pub embedding_workers: IntGauge,
    /// Message texts the embeddings endpoint refused (skipped, tried again rarely), by why:
    /// `input` (a 400, 413 or 422, or a vector not finite or zero), `dimensions` (a vector of
    /// other dimensions than the model's).
    pub embedding_refused: IntCounterVec,
    /// Searches answered lexically though semantic search is on, by why: `timeout` (the query's
    /// vector not in time), `failed` (the endpoint failed), `model_mean_unknown` (the replica
    /// has not learned the model's mean yet).
    pub search_lexical_fallback: IntCounterVec,
    /// The change feed's.
    pub changes: super::change_metrics::ChangeMetrics,
}

impl Default for UseCaseMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl UseCaseMetrics {
    /// A fresh set, every counter at 0.
    pub fn new() -> Self {
        let context_tokens = Histogram::with_opts(
            HistogramOpts::new("ctxd_context_tokens", "Tokens of each BuildContext pack")
                .buckets(prometheus::exponential_buckets(256.0, 2.0, 11).expect("valid buckets")),
        )
        .expect("valid metric");
        let embedding_lag = Histogram::with_opts(
            HistogramOpts::new(
                "ctxd_embedding_lag_seconds",
                "Seconds from a message's append to its vectors being stored",
            )
            .buckets(prometheus::exponential_buckets(0.05, 2.0, 14).expect("valid buckets")),
        )
        .expect("valid metric");
        Self {
            context_tokens,
            changes: super::change_metrics::ChangeMetrics::new(),
            embedded_messages: counter(
                "ctxd_embedded_messages_total",
                "Messages whose vectors were stored for semantic search",
            ),
            embedding_failures: counter_vec(
                "ctxd_embedding_failures_total",
                "Embedding requests that failed after their retries, by what they embedded",
                &["kind"],
            ),
            embedding_lag,
            embedding_queue: IntGauge::new(
                "ctxd_embedding_queue_conversations",
                "Conversations waiting for their messages to be embedded on this replica",
            )
            .expect("valid metric"),
            embedding_refused: counter_vec(
                "ctxd_embedding_refused_total",
                "Message texts the embeddings endpoint refused: skipped, tried again rarely",
                &["reason"],
            ),
            search_lexical_fallback: counter_vec(
                "ctxd_search_lexical_fallback_total",
                "Searches answered lexically though semantic search is on, by why",
                &["reason"],
            ),
            embedding_workers: IntGauge::new(
                "ctxd_embedding_workers_busy",
                "Embedding workers busy on this replica",
            )
            .expect("valid metric"),
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
        }
    }

    /// Counts one summarizer or extractor run of `engine`.
    pub fn count_model_call(&self, engine: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.summarizer_calls.with_label_values(&[engine, outcome]).inc();
    }

    /// Handles to every counter, for a server's registry (a collector may sit in several).
    fn collectors(&self) -> Vec<Box<dyn Collector>> {
        let mut collectors: Vec<Box<dyn Collector>> = vec![
            Box::new(self.context_tokens.clone()),
            Box::new(self.messages_dropped.clone()),
            Box::new(self.summarizer_calls.clone()),
            Box::new(self.retention_conversations.clone()),
            Box::new(self.retention_messages.clone()),
            Box::new(self.background_skipped.clone()),
            Box::new(self.embedded_messages.clone()),
            Box::new(self.embedding_failures.clone()),
            Box::new(self.embedding_lag.clone()),
            Box::new(self.embedding_queue.clone()),
            Box::new(self.embedding_workers.clone()),
            Box::new(self.embedding_refused.clone()),
            Box::new(self.search_lexical_fallback.clone()),
        ];
        collectors.extend(self.changes.collectors());
        collectors
    }
}

/// Reads a server's database pool when metrics are scraped (`None`: no pool to report).
pub type PoolStatus = Arc<dyn Fn() -> Option<PoolStats> + Send + Sync>;

/// Reads a server's message cache when metrics are scraped (`None`: no cache to report).
pub type CacheStatus = Arc<dyn Fn() -> Option<CacheStats> + Send + Sync>;

/// What a server's metrics read from the store when scraped.
#[derive(Clone, Default)]
pub struct StoreStatus {
    /// The database pool.
    pub pool: Option<PoolStatus>,
    /// The replica's message cache.
    pub cache: Option<CacheStatus>,
}

impl std::fmt::Debug for StoreStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreStatus")
            .field("pool", &self.pool.is_some())
            .field("cache", &self.cache.is_some())
            .finish()
    }
}

/// One server's metrics: its calls, its use cases' counters, its pool and cache. Cheap to
/// clone: the metrics are shared.
#[derive(Clone)]
pub struct ServerMetrics {
    registry: Registry,
    /// RPC latency by method and gRPC code.
    rpc_duration: HistogramVec,
    /// Database pool connections by state (size, available, waiting), read at scrape time.
    pool_connections: IntGaugeVec,
    /// Group commit's batches and the appends they wrote, read at scrape time.
    group_commit: IntCounterVec,
    /// Bytes of messages in the replica's message cache (PostgreSQL store), read at scrape time.
    message_cache_bytes: IntGauge,
    /// BuildContext pages of the log's tail by where they came from (cache, database), read at
    /// scrape time from the store's own counts.
    tail_pages: IntCounterVec,
    store: StoreStatus,
}

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetrics")
            .field("reports_pool", &self.store.pool.is_some())
            .field("reports_cache", &self.store.cache.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerMetrics {
    /// A server's metrics: its calls, the counters of its use cases, and what `store`
    /// reads from its store at scrape time.
    pub fn new(use_cases: &UseCaseMetrics, store: StoreStatus) -> Self {
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
        let group_commit = counter_vec(
            "ctxd_append_group_commit_total",
            "Group commit (CTXD_GROUP_COMMIT): batches sent, and appends they wrote",
            &["count"],
        );
        let message_cache_bytes = IntGauge::new(
            "ctxd_message_cache_bytes",
            "Bytes of decoded messages in this replica's cache (CTXD_MESSAGE_CACHE_MIB)",
        )
        .expect("valid metric");
        let tail_pages = counter_vec(
            "ctxd_context_pages_total",
            "Pages of the log's tail BuildContext read, by source: cache (this replica's \
             decoded messages) or database",
            &["source"],
        );
        let registry = Registry::new();
        let own: [Box<dyn Collector>; 5] = [
            Box::new(rpc_duration.clone()),
            Box::new(pool_connections.clone()),
            Box::new(group_commit.clone()),
            Box::new(message_cache_bytes.clone()),
            Box::new(tail_pages.clone()),
        ];
        for collector in use_cases.collectors().into_iter().chain(own) {
            registry.register(collector).expect("unique metric");
        }
        Self {
            registry,
            rpc_duration,
            pool_connections,
            group_commit,
            message_cache_bytes,
            tail_pages,
            store,
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
        self.read_store();
        let mut out = Vec::new();
        // Encoding gathered families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Takes the store's figures into the gauges and counters.
    fn read_store(&self) {
        if let Some(stats) = self.store.pool.as_ref().and_then(|status| status()) {
            for (state, value) in [
                ("size", stats.size),
                ("available", stats.available),
                ("waiting", stats.waiting),
            ] {
                let value = i64::try_from(value).unwrap_or(i64::MAX);
                self.pool_connections.with_label_values(&[state]).set(value);
            }
            // The store counts from its start; the counters catch up to it.
            for (count, total) in [
                ("batches", stats.append_batches),
                ("appends", stats.batched_appends),
            ] {
                let counter = self.group_commit.with_label_values(&[count]);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
        }
        if let Some(stats) = self.store.cache.as_ref().and_then(|status| status()) {
            let bytes = i64::try_from(stats.bytes).unwrap_or(i64::MAX);
            self.message_cache_bytes.set(bytes);
            // The store counts from its start; the counter catches up to it (only this
            // function moves it, and the store's counts only grow).
            for (source, total) in [
                ("cache", stats.pages_from_cache),
                ("database", stats.pages_from_database),
            ] {
                let counter = self.tail_pages.with_label_values(&[source]);
                counter.inc_by(total.saturating_sub(counter.get()));
            }
        }
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

    fn pool(size: usize) -> StoreStatus {
        StoreStatus {
            pool: Some(Arc::new(move || {
                Some(PoolStats {
                    size,
                    available: 1,
                    waiting: 0,
                    append_batches: 0,
                    batched_appends: 0,
                })
            })),
            cache: None,
        }
    }

    #[test]
    fn each_server_reports_its_own_pool() {
        let first = ServerMetrics::new(&UseCaseMetrics::new(), pool(3));
        let second = ServerMetrics::new(&UseCaseMetrics::new(), pool(7));
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
    fn a_server_shows_its_use_cases_counters_beside_its_own() {
        let use_cases = UseCaseMetrics::new();
        let metrics = ServerMetrics::new(&use_cases, StoreStatus::default());
        metrics.observe_rpc("AppendMessage", "OK", "grpc", Duration::from_millis(1));
        use_cases.messages_dropped.inc_by(3);
        let text = metrics.render();
        assert!(text.contains(
            "ctxd_rpc_duration_seconds_count{code=\"OK\",method=\"AppendMessage\",protocol=\"grpc\"} 1"
        ));
        assert!(text.contains("ctxd_context_messages_dropped_total 3"), "{text}");
        assert!(!text.contains("ctxd_db_pool_connections{"), "{text}");
    }

    #[test]
    fn the_store_counts_become_the_servers_counters_at_each_scrape() {
        let pages = Arc::new(std::sync::atomic::AtomicU64::new(2));
        let read = pages.clone();
        let status = StoreStatus {
            pool: None,
            cache: Some(Arc::new(move || {
                Some(CacheStats {
                    bytes: 10,
                    pages_from_cache: read.load(std::sync::atomic::Ordering::Relaxed),
                    pages_from_database: 1,
                })
            })),
        };
        let metrics = ServerMetrics::new(&UseCaseMetrics::new(), status);
        assert!(
            metrics
                .render()
                .contains("ctxd_context_pages_total{source=\"cache\"} 2")
        );
        pages.store(5, std::sync::atomic::Ordering::Relaxed);
        let text = metrics.render();
        assert!(
            text.contains("ctxd_context_pages_total{source=\"cache\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("ctxd_context_pages_total{source=\"database\"} 1"),
            "{text}"
        );
        assert!(text.contains("ctxd_message_cache_bytes 10"), "{text}");
    }
}
