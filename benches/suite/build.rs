//! BuildContext latency at three history sizes, against a raw SQL read of the same tail.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use ctxd::proto::{self, context_service_client::ContextServiceClient};
use tonic::transport::Channel;

use crate::{
    Scale,
    memory::RssLog,
    replica::{Replica, percentile},
};

const BUDGET: u32 = 8_000;

/// The `size`-message history's conversation id: unique per run, so a database can be reused.
pub(crate) fn history(size: usize) -> String {
    static RUN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    format!("bench-{run}-{size}")
}
const RESERVE: u32 = 1_000;

pub(crate) async fn run(
    server: &Replica,
    url: &str,
    scale: Scale,
    out: &Path,
    rss: &mut RssLog,
) -> anyhow::Result<()> {
    let client = server.client().await?;
    println!(
        "# BuildContext on PostgreSQL, budget {BUDGET} tokens ({RESERVE} reserved for output), {} samples each",
        scale.samples
    );
    let mut p50s = Vec::new();
    for size in scale.history_sizes {
        let conversation = history(size);
        let seeded = Instant::now();
        seed(&client, &conversation, size).await?;
        let seed_secs = seeded.elapsed().as_secs_f64();
        let (mut latencies, included) = measure_build(&client, &conversation, scale.samples, false).await?;
        let (p50, p99) = (percentile(&mut latencies, 0.50), percentile(&mut latencies, 0.99));
        println!(
            "messages={size:>6}  p50={:>7.3} ms  p99={:>7.3} ms  included={included}  (seeded in {seed_secs:.1} s, {:.0} msg/s)",
            ms(p50),
            ms(p99),
            size as f64 / seed_secs
        );
        rss.sample(&format!("after {size}-message history"), server);
        p50s.push((size, p50, included));
    }
    let (small, large) = (p50s[0], p50s[2]);
    println!(
        "ratio p50({})/p50({}) = {:.2}  (target <= 1.2)",
        large.0,
        small.0,
        large.1.as_secs_f64() / small.1.as_secs_f64()
    );

    let raw = measure_raw_tail(url, &history(large.0), large.2, scale.samples).await?;
    println!(
        "raw SQL tail of {} rows: p50={:.3} ms; BuildContext/raw = {:.2}  (target <= 2.0)",
        large.2,
        ms(raw),
        large.1.as_secs_f64() / raw.as_secs_f64()
    );
    // The same pack with `omit_messages`: `rendered` alone, as a caller that sends it as is asks.
    let (mut rendered_only, _) = measure_build(&client, &history(large.0), scale.samples, true).await?;
    let rendered_p50 = percentile(&mut rendered_only, 0.50);
    println!(
        "BuildContext with omit_messages (rendered only), {} messages: p50={:.3} ms; /raw = {:.2}",
        large.0,
        ms(rendered_p50),
        rendered_p50.as_secs_f64() / raw.as_secs_f64()
    );

    // The middle size is the LangChain comparison's conversation (10k in the full run).
    let (size, p50, _) = p50s[1];
    export_conversation(&client, &history(size), &out.join("conversation.json")).await?;
    println!(
        "{{\"bench\": \"build_context\", \"messages\": {size}, \"p50_ms\": {:.4}, \"max_tokens\": {}}}",
        ms(p50),
        BUDGET - RESERVE
    );
    Ok(())
}

pub(crate) fn message(n: usize) -> proto::Message {
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
                ..Default::default()
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

pub(crate) async fn seed(
    client: &ContextServiceClient<Channel>,
    conversation: &str,
    size: usize,
) -> anyhow::Result<()> {
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
    samples: usize,
    omit_messages: bool,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut client = client.clone();
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: BUDGET,
            reserve_output_tokens: RESERVE,
            ..Default::default()
        }),
        system_prompt: "You are an operations assistant.".into(),
        omit_messages,
        ..Default::default()
    };
    let mut included = 0;
    for _ in 0..50 {
        client.build_context(request.clone()).await?;
    }
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        let response = client.build_context(request.clone()).await?.into_inner();
        latencies.push(start.elapsed());
        included = response.stats.map_or(0, |s| s.messages_included as usize);
    }
    Ok((latencies, included))
}

/// What a hand-written backend reads for a pack: a conversation's newest `$2` rows.
pub(crate) const RAW_TAIL: &str = "SELECT sequence, role, content, name, tool_calls, tool_call_id,
        attachments, metadata, exclude_from_context, pinned, error, response_id, created_at,
        tokens_o200k, tokens_cl100k, tokens_approx, call_sequence
     FROM messages WHERE tenant_id = 'default' AND conversation_id = $1
     ORDER BY sequence DESC LIMIT $2";

/// The floor BuildContext is compared with: one query reading the same tail rows.
async fn measure_raw_tail(
    url: &str,
    conversation: &str,
    rows: usize,
    samples: usize,
) -> anyhow::Result<Duration> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let statement = client.prepare(RAW_TAIL).await?;
    let limit = rows as i64;
    for _ in 0..50 {
        client.query(&statement, &[&conversation, &limit]).await?;
    }
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        let fetched = client.query(&statement, &[&conversation, &limit]).await?;
        latencies.push(start.elapsed());
        anyhow::ensure!(fetched.len() == rows, "raw tail returned {} rows", fetched.len());
    }
    Ok(percentile(&mut latencies, 0.5))
}

/// Writes the conversation as OpenAI chat messages, for the LangChain comparison.
async fn export_conversation(
    client: &ContextServiceClient<Channel>,
    conversation: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let mut client = client.clone();
    let (mut after, mut out) = (0, Vec::new());
    loop {
        let page = client
            .list_messages(proto::ListMessagesRequest {
                conversation_id: conversation.into(),
                after_sequence: after,
                page_size: 1_000,
                format: None,
            })
            .await?
            .into_inner();
        for m in &page.messages {
            let role = proto::Role::try_from(m.role)?
                .as_str_name()
                .trim_start_matches("ROLE_")
                .to_lowercase();
            let calls: Vec<_> = m
                .tool_calls
                .iter()
                .map(|c| serde_json::json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
                .collect();
            out.push(serde_json::json!({
                "role": role, "content": m.content, "tool_calls": calls, "tool_call_id": m.tool_call_id,
            }));
        }
        if page.next_after_sequence == 0 {
            break;
        }
        after = page.next_after_sequence;
    }
    std::fs::write(path, serde_json::to_vec(&out)?)?;
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
