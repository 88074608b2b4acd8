//! Connections that never speak, and a replica out of file descriptors. 500 TCP connections to
//! the gRPC port and 50 to the metrics port send nothing: each must be closed within the
//! handshake timeout (2 s here) while health answers. Then the replica's descriptor limit is
//! lowered below what 300 more silent connections need: accepting must back off (little CPU)
//! and say so in the log, and health must come back once the silent ones are closed.

use std::{
    net::{SocketAddr, TcpListener},
    path::Path,
    time::{Duration, Instant},
};

use tokio::{io::AsyncReadExt, net::TcpStream, task::JoinSet};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::{
    Report,
    replica::{Cluster, Replica},
};

const HANDSHAKE: Duration = Duration::from_secs(2);
const SILENT_GRPC: usize = 500;
const SILENT_METRICS: usize = 50;
const SILENT_AT_LIMIT: usize = 300;
const FD_LIMIT: u32 = 200;

pub(crate) async fn silent_connections(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
) -> anyhow::Result<Report> {
    let mut report = Report::new("silent connections and the descriptor limit, 1 replica");
    let metrics_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let metrics_addr = SocketAddr::from(([127, 0, 0, 1], metrics_port));
    let metrics_listen = metrics_addr.to_string();
    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_HANDSHAKE_TIMEOUT_SECS", "2"),
        ("CTXD_METRICS_LISTEN", metrics_listen.as_str()),
        ("RUST_LOG", "info"),
    ];
    let replica = Replica::start(binary, &env, work, "replica-connections").await?;

    let started = Instant::now();
    let mut silent = JoinSet::new();
    for _ in 0..SILENT_GRPC {
        silent.spawn(closed_after(TcpStream::connect(replica.addr).await?));
    }
    for _ in 0..SILENT_METRICS {
        silent.spawn(closed_after(TcpStream::connect(metrics_addr).await?));
    }
    let opened_in = started.elapsed();
    let (worst_health, closed) = health_while(&replica, silent).await?;
    let still_open = closed.iter().filter(|c| c.is_none()).count();
    let slowest = closed.iter().flatten().max().copied().unwrap_or_default();
    report.figure(
        "550 silent connections (500 gRPC, 50 metrics)",
        format!(
            "opened in {:.2} s; {} closed by the server, slowest after {:.2} s, {still_open} still open after 10 s",
            opened_in.as_secs_f64(),
            closed.len() - still_open,
            slowest.as_secs_f64()
        ),
    );
    report.figure(
        "health latency meanwhile, worst",
        format!("{:.1} ms", worst_health.as_secs_f64() * 1e3),
    );
    report.expect(
        still_open == 0,
        format!("{still_open} silent connections were never closed"),
    );
    report.expect(
        slowest < HANDSHAKE + Duration::from_millis(1500),
        "a silent connection outlived the handshake timeout by 1.5 s or more",
    );
    report.expect(worst_health < Duration::from_secs(1), "health took 1 s or more");

    // Out of descriptors: prlimit lowers the running replica's limit.
    let pid = replica
        .pid()
        .ok_or_else(|| anyhow::anyhow!("replica not running"))?;
    let status = std::process::Command::new("prlimit")
        .arg(format!("--nofile={FD_LIMIT}:{FD_LIMIT}"))
        .arg(format!("--pid={pid}"))
        .status()?;
    anyhow::ensure!(status.success(), "prlimit failed");
    let cpu_before = replica.cpu_seconds().unwrap_or_default();
    let phase = Instant::now();
    let mut silent = JoinSet::new();
    for _ in 0..SILENT_AT_LIMIT {
        silent.spawn(closed_after(TcpStream::connect(replica.addr).await?));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cores = (replica.cpu_seconds().unwrap_or_default() - cpu_before) / phase.elapsed().as_secs_f64();
    // Health on a new connection: it waits in the backlog until silent ones are closed.
    let recovered = health_on_new_connection(&replica, Duration::from_secs(15)).await;
    let closed: Vec<Option<Duration>> = silent.join_all().await;
    let still_open = closed.iter().filter(|c| c.is_none()).count();
    let warned = replica.log_text().contains("cannot accept connections");
    report.figure(
        "CPU while out of descriptors (limit 200, 300 silent)",
        format!("{cores:.2} cores"),
    );
    report.figure(
        "health on a new connection after that",
        match recovered {
            Some(after) => format!("SERVING after {:.2} s", after.as_secs_f64()),
            None => "no answer within 15 s".to_string(),
        },
    );
    report.figure("accept errors logged", warned);
    report.expect(cores < 0.3, format!("accepting spun at {cores:.2} cores"));
    report.expect(warned, "accept errors were not logged");
    report.expect(recovered.is_some(), "health did not come back");
    report.expect(
        still_open == 0,
        format!("{still_open} silent connections at the limit were never closed"),
    );
    Ok(report)
}

/// How long the server took to close `stream` (None: still open after 10 s).
async fn closed_after(mut stream: TcpStream) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Err(_) => return None,
            // The server's own bytes (its HTTP/2 settings) are not a close.
            Ok(Ok(n)) if n > 0 => continue,
            Ok(_) => return Some(started.elapsed()),
        }
    }
}

/// Worst health latency on one established connection until every task in `set` finished,
/// and what they returned.
async fn health_while(
    replica: &Replica,
    mut set: JoinSet<Option<Duration>>,
) -> anyhow::Result<(Duration, Vec<Option<Duration>>)> {
    let mut health = HealthClient::new(replica.channel().await?);
    let (mut worst, mut results) = (Duration::ZERO, Vec::new());
    while !set.is_empty() {
        while let Some(result) = set.try_join_next() {
            results.push(result?);
        }
        let started = Instant::now();
        let ok = health
            .check(HealthCheckRequest::default())
            .await
            .is_ok_and(|r| r.get_ref().status == 1);
        worst = worst.max(if ok { started.elapsed() } else { Duration::MAX });
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok((worst, results))
}

/// How long until a health check on a fresh connection answers SERVING.
async fn health_on_new_connection(replica: &Replica, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        if let Ok(channel) = replica.channel().await {
            let mut health = HealthClient::new(channel);
            let mut request = tonic::Request::new(HealthCheckRequest::default());
            request.set_timeout(Duration::from_secs(5));
            if health.check(request).await.is_ok_and(|r| r.get_ref().status == 1) {
                return Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}
