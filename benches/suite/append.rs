//! AppendMessage throughput at 1, 8 and 32 concurrent clients, against raw single-row INSERT
//! transactions at the same concurrency on the same database.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;

use crate::{Scale, replica::Replica};

const CLIENTS: [usize; 3] = [1, 8, 32];

pub(crate) async fn run(server: &Replica, url: &str, scale: Scale) -> anyhow::Result<()> {
    let secs = scale.append_secs;
    println!(
        "# AppendMessage (one user message per call, each client its own conversation and connection), {secs} s each"
    );
    prepare_raw_table(url).await?;
    for clients in CLIENTS {
        let cpu_before = server.cpu_seconds().unwrap_or(0.0);
        let ours = ctxd_rate(server, clients, secs, content).await?;
        // The server's own CPU per append: on a 2-core box it competes with Postgres and the
        // load generator, which the raw baseline does not have to share with.
        let cpu_us = (server.cpu_seconds().unwrap_or(0.0) - cpu_before) * 1e6 / (ours * secs as f64);
        let raw = raw_rate(url, clients, secs).await?;
        println!(
            "clients={clients:>2}  AppendMessage {ours:>8.0}/s ({cpu_us:.0} us ctxd CPU each)  raw INSERT {raw:>8.0}/s  ratio {:.2}  (target at 32 clients >= 0.5)",
            ours / raw
        );
    }
    // Counting grows with the text, and tool outputs are an agent's largest messages: what an
    // 8 kB message costs the server under the tokenizers it counts at append (CTXD_TOKENIZERS).
    let cpu_before = server.cpu_seconds().unwrap_or(0.0);
    let large = ctxd_rate(server, 1, secs, large_content).await?;
    let cpu_us = (server.cpu_seconds().unwrap_or(0.0) - cpu_before) * 1e6 / (large * secs as f64);
    let counted = std::env::var("CTXD_TOKENIZERS").unwrap_or_else(|_| "default".into());
    println!(
        "8 kB messages, 1 client: AppendMessage {large:>6.0}/s ({cpu_us:.0} us ctxd CPU each; CTXD_TOKENIZERS={counted})"
    );
    Ok(())
}

/// About 8 kB of a tool's output: log lines, numbers and paths, different for every call.
fn large_content(client: usize, n: u64) -> String {
    (0..64)
        .map(|line| {
            format!("{client}.{n}.{line} INFO checkout/tests/test_cart.py::test_total[{line}] PASSED in 0.{line:03}s; cache hit ratio 0.{n:04}\n")
        })
        .collect()
}

fn content(client: usize, n: u64) -> String {
    format!(
        "Client {client} message {n}: please look at the failing checkout tests and tell me why they fail."
    )
}

/// Runs `clients` tasks until `secs` pass; each calls `step` in a loop and counts successes.
pub(crate) async fn rate<F, Fut>(clients: usize, secs: u64, step: F) -> anyhow::Result<f64>
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (done, stop, step) = (done.clone(), stop.clone(), step.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                step(client, n).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

async fn ctxd_rate(
    server: &Replica,
    clients: usize,
    secs: u64,
    content: fn(usize, u64) -> String,
) -> anyhow::Result<f64> {
    let mut connections = Vec::new();
    for _ in 0..clients {
        connections.push(server.client().await?);
    }
    let connections = Arc::new(connections);
    rate(clients, secs, move |client, n| {
        let mut c = connections[client].clone();
        async move {
            c.append_message(proto::AppendMessageRequest {
                conversation_id: format!("append-{clients}-{client}-{}", content(0, 0).len()),
                messages: vec![proto::Message {
                    role: proto::Role::User as i32,
                    content: content(client, n),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .await?;
            Ok(())
        }
    })
    .await
}

/// A copy of the messages table (same columns, defaults and indexes) for the raw baseline.
async fn prepare_raw_table(url: &str) -> anyhow::Result<()> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(
            "DROP TABLE IF EXISTS bench_raw_messages;
             CREATE TABLE bench_raw_messages (LIKE messages INCLUDING ALL);",
        )
        .await?;
    Ok(())
}

async fn raw_rate(url: &str, clients: usize, secs: u64) -> anyhow::Result<f64> {
    let mut connections = Vec::new();
    for _ in 0..clients {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let insert = client
            .prepare(
                "INSERT INTO bench_raw_messages (tenant_id, conversation_id, sequence, role, content, name,
                     tool_calls, attachments, metadata, exclude_from_context, pinned, response_id, created_at)
                 VALUES ('default', $1, $2, 'user', $3, '', '[]', '[]', '{}', false, false, '', now())",
            )
            .await?;
        connections.push((client, insert));
    }
    let connections = Arc::new(connections);
    rate(clients, secs, move |client, n| {
        let connections = connections.clone();
        async move {
            let (c, insert) = &connections[client];
            let conversation = format!("raw-{clients}-{client}");
            c.execute(insert, &[&conversation, &(n as i64), &content(client, n)])
                .await?;
            Ok(())
        }
    })
    .await
}
