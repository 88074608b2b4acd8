//! BuildContext benchmark on real PostgreSQL through the real gRPC server and client.
//!
//! Run with `scripts/bench.sh` (starts a throwaway PostgreSQL), or point `DATABASE_URL` at an
//! empty database and run `cargo bench --bench build_context`. Prints:
//! - BuildContext p50/p99 at 1k, 10k and 100k-message conversations and the 100k/1k p50 ratio
//!   (target <= 1.2: cost does not grow with the log);
//! - BuildContext p50 vs a raw SQL round trip reading the same tail (target <= 2x);
//! - token counting throughput of ctxd's tokenizers (scripts/bench.sh compares it with tiktoken).

use std::time::{Duration, Instant};

use clap::Parser;
use ctxd::{
    config::Cli,
    proto::{self, context_service_client::ContextServiceClient},
    startup::App,
    tokenize::Tokenizer,
};
use tonic::transport::Channel;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const BUDGET: u32 = 8_000;
const SAMPLES: usize = 400;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("build_context bench: set DATABASE_URL (or run scripts/bench.sh)");
        return Ok(());
    };
    let settings = Cli::try_parse_from(["ctxd", "--listen", "127.0.0.1:0", "--database-url", &url])?
        .config
        .validate()
        .map_err(|p| anyhow::anyhow!("{p:?}"))?;
    let app = App::build(settings).await?;
    let addr = app.local_addr();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    let client = ContextServiceClient::connect(format!("http://{addr}")).await?;

    println!("# BuildContext on PostgreSQL, budget {BUDGET} tokens, {SAMPLES} samples each");
    let mut p50s = Vec::new();
    for size in SIZES {
        let conversation = format!("bench-{size}");
        let seeded = Instant::now();
        seed(&client, &conversation, size).await?;
        let seed_secs = seeded.elapsed().as_secs_f64();
        let (latencies, included) = measure_build(&client, &conversation).await?;
        let (p50, p99) = (percentile(&latencies, 0.50), percentile(&latencies, 0.99));
        println!(
            "messages={size:>6}  p50={:>7.3} ms  p99={:>7.3} ms  included={included}  (seeded in {seed_secs:.1} s, {:.0} msg/s)",
            ms(p50),
            ms(p99),
            size as f64 / seed_secs
        );
        p50s.push((size, p50, included));
    }
    let ratio = p50s[2].1.as_secs_f64() / p50s[0].1.as_secs_f64();
    println!("ratio p50(100k)/p50(1k) = {ratio:.2}  (target <= 1.2)");

    let (_, build_p50, included) = p50s[2];
    let raw = measure_raw_tail(&url, "bench-100000", included).await?;
    println!(
        "raw SQL tail of {included} rows: p50={:.3} ms; BuildContext/raw = {:.2}  (target <= 2.0)",
        ms(raw),
        build_p50.as_secs_f64() / raw.as_secs_f64()
    );

    token_throughput();
    Ok(())
}

fn message(n: usize) -> proto::Message {
    let role = |r: proto::Role| r as i32;
    match n % 4 {
        0 => proto::Message {
            role: role(proto::Role::User),
            content: format!(
                "Question {n}: can you check the deployment status of service {} and summarise it?",
                n % 97
            ),
            ..Default::default()
        },
        1 => proto::Message {
            role: role(proto::Role::Assistant),
            tool_calls: vec![proto::ToolCall {
                id: format!("call-{n}"),
                name: "get_status".into(),
                arguments: format!(r#"{{"service":"svc-{}","verbose":true}}"#, n % 97),
            }],
            ..Default::default()
        },
        2 => proto::Message {
            role: role(proto::Role::Tool),
            tool_call_id: format!("call-{}", n - 1),
            content: format!(
                "status: healthy\nreplicas: 3/3\nlatency_p99_ms: {}\nlast_deploy: 2026-11-{:02}",
                n % 250,
                n % 28 + 1
            ),
            ..Default::default()
        },
        _ => proto::Message {
            role: role(proto::Role::Assistant),
            content: format!(
                "Service svc-{} is healthy: all 3 replicas are up and p99 latency is {} ms.",
                n % 97,
                n % 250
            ),
            response_id: format!("resp-{n}"),
            ..Default::default()
        },
    }
}

async fn seed(client: &ContextServiceClient<Channel>, conversation: &str, size: usize) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    // Batches of 100 keep tool groups (4 messages) inside one batch; 4 writers in parallel
    // append to the one conversation, each batch atomically.
    let batches: Vec<usize> = (0..size / 100).collect();
    for chunk in batches.chunks(batches.len().div_ceil(4).max(1)) {
        let mut client = client.clone();
        let conversation = conversation.to_string();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            for batch in chunk {
                let messages = (batch * 100..batch * 100 + 100).map(message).collect();
                client
                    .append_message(proto::AppendMessageRequest {
                        conversation_id: conversation.clone(),
                        messages,
                        ..Default::default()
                    })
                    .await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

async fn measure_build(
    client: &ContextServiceClient<Channel>,
    conversation: &str,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut client = client.clone();
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: BUDGET,
            reserve_output_tokens: 1_000,
            ..Default::default()
        }),
        system_prompt: "You are an operations assistant.".into(),
        ..Default::default()
    };
    let mut included = 0;
    for _ in 0..50 {
        client.build_context(request.clone()).await?;
    }
    let mut latencies = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let response = client.build_context(request.clone()).await?.into_inner();
        latencies.push(start.elapsed());
        included = response.stats.map_or(0, |s| s.messages_included as usize);
    }
    Ok((latencies, included))
}

/// The floor BuildContext is compared with: one query reading the same tail rows.
async fn measure_raw_tail(url: &str, conversation: &str, rows: usize) -> anyhow::Result<Duration> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let statement = client
        .prepare(
            "SELECT sequence, role, content, name, tool_calls, tool_call_id, attachments, metadata,
                    exclude_from_context, pinned, error, response_id, created_at,
                    tokens_o200k, tokens_cl100k, tokens_approx, call_sequence
             FROM messages WHERE tenant_id = 'default' AND conversation_id = $1
             ORDER BY sequence DESC LIMIT $2",
        )
        .await?;
    let limit = rows as i64;
    for _ in 0..50 {
        client.query(&statement, &[&conversation, &limit]).await?;
    }
    let mut latencies = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let fetched = client.query(&statement, &[&conversation, &limit]).await?;
        latencies.push(start.elapsed());
        anyhow::ensure!(fetched.len() == rows, "raw tail returned {} rows", fetched.len());
    }
    Ok(percentile(&latencies, 0.5))
}

fn token_throughput() {
    let corpus: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("../tests/data/tokenizer_corpus.json")).expect("corpus");
    let text: String = corpus
        .iter()
        .filter_map(|e| e.get("text").and_then(|t| t.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
        .repeat(40);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-token-text.txt");
    let _ = std::fs::write(&path, &text);
    println!(
        "# token counting, {} KB of mixed text (written to {})",
        text.len() / 1024,
        path.display()
    );
    for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
        let start = Instant::now();
        let (mut rounds, mut tokens) = (0, 0);
        while start.elapsed() < Duration::from_secs(2) {
            tokens = tokenizer.count(&text);
            rounds += 1;
        }
        let rate = (text.len() * rounds) as f64 / start.elapsed().as_secs_f64();
        println!(
            "{{\"encoding\": \"{}\", \"tokens\": {tokens}, \"bytes_per_sec\": {rate:.0}}}",
            tokenizer.name()
        );
    }
}

fn percentile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
