//! What traces cost (docs/operations.md, "Traces"): BuildContext on one 1,000-message history,
//! against two replicas of the same binary on the same database, one with traces off and one
//! with every span sampled and exported over OTLP/gRPC to a receiver here; the calls alternate
//! between them in rounds, so both see the same machine. Then a collector that accepts
//! connections and never answers (black hole) and one that is down: p50 and p99 stay, and the
//! replica's RSS stays flat while spans are dropped.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use ctxd::proto;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};

use crate::{
    build::seed,
    replica::{Replica, percentile},
};

/// Counts what it receives, and answers.
#[derive(Debug, Clone, Default)]
struct Receiver {
    spans: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.spans
            .fetch_add(spans as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A replica exporting to `endpoint` (none: traces off).
async fn replica(url: &str, endpoint: Option<&str>, out: &Path, name: &str) -> anyhow::Result<Replica> {
    let mut env = vec![("DATABASE_URL", url), ("CTXD_LOG", "warn")];
    if let Some(endpoint) = endpoint {
        env.extend([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
        ]);
    }
    Replica::start(Path::new(env!("CARGO_BIN_EXE_ctxd")), &env, out, name).await
}

/// `calls` BuildContext calls on the seeded history, one at a time: their latencies.
async fn build(server: &Replica, calls: usize) -> anyhow::Result<Vec<Duration>> {
    let mut client = server.client().await?;
    let mut took = Vec::with_capacity(calls);
    for _ in 0..calls {
        let request = proto::BuildContextRequest {
            conversation_id: "bench/traces".into(),
            budget: Some(proto::Budget {
                max_tokens: 8_000,
                ..Default::default()
            }),
            ..Default::default()
        };
        let started = Instant::now();
        client.build_context(request).await?;
        took.push(started.elapsed());
    }
    Ok(took)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) async fn run(url: &str, out: &Path, quick: bool) -> anyhow::Result<()> {
    let (rounds, per_round) = if quick { (4, 25) } else { (20, 200) };
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let otlp = format!("http://{}", listener.local_addr()?);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let off = replica(url, None, out, "traces-off").await?;
    let on = replica(url, Some(&otlp), out, "traces-on").await?;
    seed(&off.client().await?, "bench/traces", 1_000).await?;
    build(&off, 50).await?;
    build(&on, 50).await?;
    let (mut off_took, mut on_took) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        off_took.extend(build(&off, per_round).await?);
        on_took.extend(build(&on, per_round).await?);
    }
    // The batch goes every 5 s (OTEL_BSP_SCHEDULE_DELAY's default): wait for the last one.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let exported = receiver.spans.load(std::sync::atomic::Ordering::Relaxed);
    let (p50_off, p50_on) = (percentile(&mut off_took, 0.5), percentile(&mut on_took, 0.5));
    println!(
        "# traces: BuildContext, 1,000-message history, {} calls each, alternating",
        rounds * per_round
    );
    println!(
        "traces off       p50 {:>7.3} ms  p99 {:>7.3} ms",
        ms(p50_off),
        ms(percentile(&mut off_took, 0.99))
    );
    println!(
        "traces exported  p50 {:>7.3} ms  p99 {:>7.3} ms  ratio {:.3} (target <= 1.05)  spans received {exported}",
        ms(p50_on),
        ms(percentile(&mut on_took, 0.99)),
        ms(p50_on) / ms(p50_off)
    );
    drop(on);
    // A collector that takes connections and never answers, and one that is not there.
    let hole = std::net::TcpListener::bind("127.0.0.1:0")?;
    let black_hole = format!("http://{}", hole.local_addr()?);
    let dead = {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        format!("http://127.0.0.1:{port}")
    };
    for (label, endpoint) in [("black hole", black_hole), ("collector down", dead)] {
        let server = replica(url, Some(&endpoint), out, "traces-broken").await?;
        build(&server, 50).await?;
        let rss_before = server.rss_kib().unwrap_or(0);
        let mut took = Vec::new();
        for _ in 0..rounds {
            took.extend(build(&server, per_round).await?);
        }
        let rss_after = server.rss_kib().unwrap_or(0);
        println!(
            "{label:<16} p50 {:>7.3} ms  p99 {:>7.3} ms  RSS {:.1} -> {:.1} MiB over {} calls",
            ms(percentile(&mut took, 0.5)),
            ms(percentile(&mut took, 0.99)),
            rss_before as f64 / 1024.0,
            rss_after as f64 / 1024.0,
            rounds * per_round
        );
    }
    drop(hole);
    Ok(())
}
