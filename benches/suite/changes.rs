//! The change feed under load (issue 63): AppendMessage throughput at 32 clients without
//! watchers and with 8 tenant-wide watchers reading every change, the delay from a change's
//! statement to its delivery (p50, p99), and the server's memory while a watcher that reads
//! nothing is left behind a stream of appends.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime},
};

use ctxd::proto;

use crate::replica::{Replica, percentile};

const CLIENTS: usize = 32;
const WATCHERS: usize = 8;

pub(crate) async fn run(server: &Replica, quick: bool) -> anyhow::Result<()> {
    let secs = if quick { 1 } else { 10 };
    println!("# Change feed: {CLIENTS} appending clients, {secs} s each; {WATCHERS} tenant-wide watchers");
    // Alternated, twice each: the machine is shared with PostgreSQL and the load.
    let mut without = Vec::new();
    let mut with = Vec::new();
    let mut delays = Vec::new();
    let (mut cpu_without, mut cpu_with) = (0.0, 0.0);
    let (mut load_without, mut load_with) = (0.0, 0.0);
    for round in 0..2 {
        let (cpu, load) = (server.cpu_seconds().unwrap_or(0.0), own_cpu_seconds());
        let rate = append_rate(server, secs, &format!("plain-{round}")).await?;
        cpu_without += (server.cpu_seconds().unwrap_or(0.0) - cpu) * 1e6 / (rate * secs as f64);
        load_without += (own_cpu_seconds() - load) * 1e6 / (rate * secs as f64);
        without.push(rate);
        let (cpu, load) = (server.cpu_seconds().unwrap_or(0.0), own_cpu_seconds());
        let (rate, mut seen) = with_watchers(server, secs, &format!("watched-{round}")).await?;
        cpu_with += (server.cpu_seconds().unwrap_or(0.0) - cpu) * 1e6 / (rate * secs as f64);
        load_with += (own_cpu_seconds() - load) * 1e6 / (rate * secs as f64);
        with.push(rate);
        delays.append(&mut seen);
    }
    println!(
        "load generator CPU per append (this process: appenders, and the watchers reading each change's time): {:.0} us without watchers, {:.0} us with",
        load_without / 2.0,
        load_with / 2.0
    );
    let (plain, watched) = (mean(&without), mean(&with));
    println!(
        "appends without watchers {plain:>8.0}/s ({:.0} us ctxd CPU each)  with {WATCHERS} watchers {watched:>8.0}/s ({:.0} us, delivery included)  ratio {:.2}  (target <= 1.1)",
        cpu_without / 2.0,
        cpu_with / 2.0,
        plain / watched
    );
    if delays.is_empty() {
        anyhow::bail!("no change was delivered to the watchers");
    }
    let p50 = percentile(&mut delays, 0.50);
    let p99 = percentile(&mut delays, 0.99);
    println!(
        "change delivered after its statement: p50 {:.1} ms  p99 {:.1} ms over {} deliveries  (target p99 <= 1 s)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        delays.len()
    );
    stalled_watcher(server, if quick { 2 } else { 60 }).await
}

/// This process's CPU seconds so far, every thread's (/proc/self/stat: utime and stime, in
/// clock ticks of 10 ms).
fn own_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn mean(rates: &[f64]) -> f64 {
    rates.iter().sum::<f64>() / rates.len().max(1) as f64
}

fn user(text: String) -> proto::Message {
    proto::Message {
        role: proto::Role::User as i32,
        content: text,
        ..Default::default()
    }
}

/// Appends from [`CLIENTS`] clients for `secs`; the rate.
async fn append_rate(server: &Replica, secs: u64, label: &str) -> anyhow::Result<f64> {
    let mut connections = Vec::new();
    for _ in 0..CLIENTS {
        connections.push(server.client().await?);
    }
    let connections = Arc::new(connections);
    let label = Arc::new(label.to_owned());
    crate::append::rate(CLIENTS, secs, move |client, n| {
        let mut c = connections[client].clone();
        let request = proto::AppendMessageRequest {
            conversation_id: format!("changes-{label}-{client}"),
            messages: vec![user(format!(
                "message {n}: the deploy of build {client} is done."
            ))],
            ..Default::default()
        };
        async move {
            c.append_message(request).await?;
            Ok(())
        }
    })
    .await
}

/// [`append_rate`] with [`WATCHERS`] watchers reading every change; the rate and each
/// delivery's delay after the change's statement.
async fn with_watchers(server: &Replica, secs: u64, label: &str) -> anyhow::Result<(f64, Vec<Duration>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let mut stream = lean_watch(server.channel().await?).await?;
        let stop = stop.clone();
        watchers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let next = tokio::time::timeout(Duration::from_millis(100), stream.message()).await;
                let Ok(Ok(Some(response))) = next else {
                    continue;
                };
                let now = SystemTime::now();
                for change in response.changes {
                    let time = change.time.and_then(|t| SystemTime::try_from(t).ok());
                    if let Some(delay) = time.and_then(|t| now.duration_since(t).ok()) {
                        seen.push(delay);
                    }
                }
            }
            seen
        }));
    }
    let rate = append_rate(server, secs, label).await?;
    // The last changes are delivered, then the watchers go.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut delays = Vec::new();
    for watcher in watchers {
        delays.append(&mut watcher.await?);
    }
    Ok((rate, delays))
}

/// What the bench's watchers decode of a WatchChangesResponse: each change's time, the rest
/// skipped unread. A consumer on its own machine pays for its own decoding; on this one's two
/// cores the load generator's would be taken from the server measured.
#[derive(Clone, PartialEq, prost::Message)]
struct LeanResponse {
    #[prost(message, repeated, tag = "1")]
    changes: Vec<LeanChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LeanChange {
    #[prost(message, optional, tag = "7")]
    time: Option<prost_types::Timestamp>,
}

/// A tenant-wide WatchChanges stream read as [`LeanResponse`]s.
async fn lean_watch(channel: tonic::transport::Channel) -> anyhow::Result<tonic::Streaming<LeanResponse>> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await?;
    let codec = tonic_prost::ProstCodec::<proto::WatchChangesRequest, LeanResponse>::default();
    let path = http::uri::PathAndQuery::from_static("/ctxd.v1.ContextService/WatchChanges");
    let request = tonic::Request::new(proto::WatchChangesRequest::default());
    Ok(grpc.server_streaming(request, path, codec).await?.into_inner())
}

/// A watcher with messages that reads nothing while 8 clients append for `secs`: the server's
/// RSS before and after, and whether the watcher still gets its changes once it reads.
async fn stalled_watcher(server: &Replica, secs: u64) -> anyhow::Result<()> {
    let mut c = server.client().await?;
    let request = proto::WatchChangesRequest {
        include_messages: true,
        ..Default::default()
    };
    let mut stream = c.watch_changes(request).await?.into_inner();
    let before = server.rss_kib().unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for client in 0..8 {
        let mut c = server.client().await?;
        let stop = stop.clone();
        let text = "a long tool result line that a stalled consumer never reads. ".repeat(60);
        writers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let request = proto::AppendMessageRequest {
                    conversation_id: format!("stalled-{client}"),
                    messages: vec![user(format!("{n}: {text}"))],
                    ..Default::default()
                };
                c.append_message(request).await?;
            }
            anyhow::Ok(n)
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut appended = 0;
    for writer in writers {
        appended += writer.await??;
    }
    let after = server.rss_kib().unwrap_or(0);
    let first = tokio::time::timeout(Duration::from_secs(10), stream.message()).await;
    let reads = matches!(first, Ok(Ok(Some(_))));
    println!(
        "a watcher reading nothing for {secs} s while {appended} appends of 3.6 kB went by: server RSS {:.1} -> {:.1} MiB; it reads on afterwards: {reads}",
        before as f64 / 1024.0,
        after as f64 / 1024.0
    );
    Ok(())
}
