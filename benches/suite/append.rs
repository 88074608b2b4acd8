//! AppendMessage throughput at 1, 8 and 32 concurrent clients, against raw single-row INSERT
//! transactions at the same concurrency on the same database, with the CPU each call costs the
//! server, PostgreSQL and the load generator: on a machine where the three share the cores,
//! those bound the rate the machine can reach at all.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;

use crate::{
    Scale,
    machine::{Cluster, Snapshot, Spent},
    replica::Replica,
};

const CLIENTS: [usize; 3] = [1, 8, 32];

pub(crate) async fn run(server: &Replica, url: &str, scale: Scale) -> anyhow::Result<()> {
    let secs = scale.append_secs;
    println!(
        "# AppendMessage (one user message per call, each client its own conversation and connection), {secs} s each"
    );
    prepare_raw_table(url).await?;
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let cluster = Cluster::find(&db).await?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for clients in CLIENTS {
        let (ours, spent) = ctxd_rate(server, &cluster, clients, secs, content, CallShape::default()).await?;
        let (raw, raw_spent) = raw_rate(server, &cluster, url, clients, secs).await?;
        println!(
            "clients={clients:>2}  AppendMessage {ours:>8.0}/s ({})  raw INSERT {raw:>8.0}/s (PostgreSQL {:.0} us, load generator {:.0} us)  ratio {:.2}  (target at 32 clients >= 0.5)",
            shares(&spent),
            raw_spent.database,
            raw_spent.generator,
            ours / raw
        );
        if clients == CLIENTS[CLIENTS.len() - 1] {
            // The server, PostgreSQL and the load generator share this machine's cores.
            let most = cores * 1e6 / spent.total();
            println!(
                "  all three together: {:.0} us of CPU per append; {cores:.0} cores at that cost reach at most {most:.0} appends/s, a ratio of at most {:.2}",
                spent.total(),
                most / raw
            );
        }
    }
    // Counting grows with the text, and tool outputs are an agent's largest messages: what an
    // 8 kB message costs the server under the tokenizers it counts at append (CTXD_TOKENIZERS).
    let (large, spent) = ctxd_rate(server, &cluster, 1, secs, large_content, CallShape::default()).await?;
    let counted = std::env::var("CTXD_TOKENIZERS").unwrap_or_else(|_| "default".into());
    println!(
        "8 kB messages, 1 client: AppendMessage {large:>6.0}/s ({:.0} us ctxd CPU each; CTXD_TOKENIZERS={counted})",
        spent.server
    );
    // The clients send an idempotency key with every append, so that a retry is never stored
    // twice: such an append has its record to write (and may not join a batch).
    // The Agents SDK session also sends the last sequence it saw (a guard), and a turn is
    // often stored as the question and its reply together.
    for (clients, guarded, pair) in [
        (1, false, false),
        (32, false, false),
        (1, true, false),
        (1, true, true),
    ] {
        let shape = CallShape {
            keyed: true,
            guarded,
            pair,
        };
        let (keyed, spent) = ctxd_rate(server, &cluster, clients, secs, content, shape).await?;
        let guard = if guarded { " and a guard" } else { "" };
        let what = if pair { "2 messages" } else { "1 message" };
        println!(
            "{what} with an idempotency key{guard}, clients={clients:>2}: AppendMessage {keyed:>8.0}/s ({})",
            shares(&spent)
        );
    }
    Ok(())
}

/// What an append asks the store to check besides the messages.
#[derive(Debug, Clone, Copy, Default)]
struct CallShape {
    /// An idempotency key on every call, as the clients send.
    keyed: bool,
    /// The expected last sequence.
    guarded: bool,
    /// A user message and an assistant reply in each call.
    pair: bool,
}

/// A call's CPU, as the phase line prints it.
fn shares(spent: &Spent) -> String {
    format!(
        "ctxd {:.0} us, PostgreSQL {:.0} us, load generator {:.0} us CPU each",
        spent.server, spent.database, spent.generator
    )
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
    Ok(counted(clients, secs, step).await?.0)
}

/// [`rate`], and what the server, the cluster and this process spent per call meanwhile.
async fn metered<F, Fut>(
    server: &Replica,
    cluster: &Cluster,
    clients: usize,
    secs: u64,
    step: F,
) -> anyhow::Result<(f64, Spent)>
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let before = Snapshot::take(server, cluster);
    let (per_second, calls) = counted(clients, secs, step).await?;
    Ok((per_second, before.per_call(server, cluster, calls as f64)))
}

/// [`rate`] with the number of successful calls.
async fn counted<F, Fut>(clients: usize, secs: u64, step: F) -> anyhow::Result<(f64, u64)>
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
    let done = done.load(Ordering::Relaxed);
    Ok((done as f64 / started.elapsed().as_secs_f64(), done))
}

async fn ctxd_rate(
    server: &Replica,
    cluster: &Cluster,
    clients: usize,
    secs: u64,
    content: fn(usize, u64) -> String,
    shape: CallShape,
) -> anyhow::Result<(f64, Spent)> {
    let mut connections = Vec::new();
    for _ in 0..clients {
        connections.push(server.client().await?);
    }
    let connections = Arc::new(connections);
    metered(server, cluster, clients, secs, move |client, n| {
        let mut c = connections[client].clone();
        async move {
            c.append_message(proto::AppendMessageRequest {
                conversation_id: format!("append-{clients}-{client}-{}-{shape:?}", content(0, 0).len()),
                messages: [proto::Role::User, proto::Role::Assistant]
                    .into_iter()
                    .take(if shape.pair { 2 } else { 1 })
                    .map(|role| proto::Message {
                        role: role as i32,
                        content: content(client, n),
                        ..Default::default()
                    })
                    .collect(),
                idempotency_key: match shape.keyed {
                    true => format!("bench-{client}-{n}"),
                    false => String::new(),
                },
                // Each client's conversation is its own: the n-th call follows n - 1 messages.
                expected_last_sequence: shape.guarded.then_some((n - 1) * if shape.pair { 2 } else { 1 }),
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

async fn raw_rate(
    server: &Replica,
    cluster: &Cluster,
    url: &str,
    clients: usize,
    secs: u64,
) -> anyhow::Result<(f64, Spent)> {
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
    let steps = connections.clone();
    let measured = metered(server, cluster, clients, secs, move |client, n| {
        let connections = steps.clone();
        async move {
            let (c, insert) = &connections[client];
            let conversation = format!("raw-{clients}-{client}");
            c.execute(insert, &[&conversation, &(n as i64), &content(client, n)])
                .await?;
            Ok(())
        }
    })
    .await;
    // Measured while the connections were still open: a backend that ended is not counted.
    drop(connections);
    measured
}
