//! Large calls against one replica with the shipped Deployment's memory in mind (512 MiB): a
//! conversation of 5,000 messages of 16 KB (80 MB, written straight into PostgreSQL), then at
//! once: four BuildContexts at the largest budget (10M tokens), four at a budget whose pack
//! just fits the response limit, four ListMessages pages of 1,000 and two Summarize PREPAREs.
//! Every call must succeed or be refused with RESOURCE_EXHAUSTED, and the replica's peak RSS
//! must stay under 512 MiB.

use std::{path::Path, time::Instant};

use ctxd::proto;
use tokio::task::JoinSet;
use tonic::Code;

use crate::{
    Report,
    replica::{Cluster, Replica},
};

const CONVERSATION: &str = "memory-big";
const MESSAGES: i64 = 5_000;
const MESSAGE_BYTES: usize = 16_000;
const LIMIT_MIB: u64 = 512;

pub(crate) async fn large_calls(binary: &Path, cluster: &Cluster, work: &Path) -> anyhow::Result<Report> {
    let mut report = Report::new("large calls at once, 1 replica (512 MiB budget)");
    let (db, connection) = tokio_postgres::connect(&cluster.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let started = Instant::now();
    // Varied words, so that the text costs about four bytes a token like prose.
    db.execute(
        "INSERT INTO conversations (tenant_id, conversation_id, last_sequence) VALUES ('default', $1, $2)
         ON CONFLICT DO NOTHING",
        &[&CONVERSATION, &MESSAGES],
    )
    .await?;
    db.execute(
        &format!(
            "INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name, tool_calls,
                 attachments, metadata, exclude_from_context, pinned, response_id, created_at,
                 tokens_o200k, tokens_cl100k, tokens_approx)
             SELECT 'default', $1, s, CASE WHEN s % 2 = 1 THEN 'user' ELSE 'assistant' END,
                    left(repeat(md5(s::text) || ' word' || s || ' ', 400), {MESSAGE_BYTES}), '',
                    '[]', '[]', '{{}}', false, false, '', now(), 4000, 4000, 4000
             FROM generate_series(1, $2::bigint) s"
        ),
        &[&CONVERSATION, &MESSAGES],
    )
    .await?;
    drop(db);
    let _ = connection.await;
    report.figure(
        "history written",
        format!(
            "{MESSAGES} messages of {} KB in {:.1} s",
            MESSAGE_BYTES / 1000,
            started.elapsed().as_secs_f64()
        ),
    );

    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_REQUEST_TIMEOUT_SECS", "60"),
        ("RUST_LOG", "info"),
    ];
    let replica = Replica::start(binary, &env, work, "replica-memory").await?;
    let rss_at_start = peak_rss_mib(&replica).unwrap_or(0);
    let mut calls = JoinSet::new();
    for (kind, max_tokens) in [
        ("pack at 10M tokens", 10_000_000),
        ("pack at 1.5M tokens", 1_500_000),
    ] {
        for _ in 0..4 {
            let mut client = replica.client().await?;
            calls.spawn(async move {
                let request = proto::BuildContextRequest {
                    conversation_id: CONVERSATION.into(),
                    budget: Some(proto::Budget {
                        max_tokens,
                        ..Default::default()
                    }),
                    format: proto::Format::AnthropicMessages as i32,
                    ..Default::default()
                };
                let result = client.build_context(request).await;
                let bytes = result.as_ref().map_or(0, |r| r.get_ref().rendered.len());
                (kind, result.err().map_or(Code::Ok, |s| s.code()), bytes)
            });
        }
    }
    for _ in 0..4 {
        let mut client = replica.client().await?;
        calls.spawn(async move {
            let result = client
                .list_messages(proto::ListMessagesRequest {
                    conversation_id: CONVERSATION.into(),
                    after_sequence: 0,
                    page_size: 1_000,
                    format: None,
                })
                .await;
            let count = result.as_ref().map_or(0, |r| r.get_ref().messages.len());
            (
                "ListMessages of 1,000",
                result.err().map_or(Code::Ok, |s| s.code()),
                count,
            )
        });
    }
    for _ in 0..2 {
        let mut client = replica.client().await?;
        calls.spawn(async move {
            let result = client
                .summarize(proto::SummarizeRequest {
                    conversation_id: CONVERSATION.into(),
                    mode: proto::SummarizeMode::Prepare as i32,
                    ..Default::default()
                })
                .await;
            let bytes = result
                .as_ref()
                .ok()
                .and_then(|r| r.get_ref().prepared.as_ref())
                .map_or(0, |p| p.rendered.len());
            (
                "Summarize PREPARE",
                result.err().map_or(Code::Ok, |s| s.code()),
                bytes,
            )
        });
    }
    let outcomes = calls.join_all().await;
    let peak = peak_rss_mib(&replica).unwrap_or(u64::MAX);
    let mut lines = std::collections::BTreeMap::<&str, Vec<String>>::new();
    for (kind, code, size) in &outcomes {
        lines.entry(kind).or_default().push(match code {
            Code::Ok => format!("OK ({size})"),
            other => format!("{other:?}"),
        });
    }
    for (kind, results) in &lines {
        report.figure(kind, results.join(", "));
    }
    report.figure(
        "replica peak RSS (VmHWM)",
        format!("{peak} MiB (at start {rss_at_start} MiB)"),
    );
    report.expect(
        outcomes
            .iter()
            .all(|o| matches!(o.1, Code::Ok | Code::ResourceExhausted)),
        format!("a call failed otherwise: {outcomes:?}"),
    );
    let ok = |kind: &str| outcomes.iter().filter(|o| o.0 == kind && o.1 == Code::Ok).count();
    // A call that would pass the budget is refused at once, never made to wait: which of the
    // 14 get through depends on the order they grow in (4, 3 and 0 of the 1.5M packs in three
    // runs). Alone, with the budget free, such a pack is always served.
    let mut client = replica.client().await?;
    let alone = client
        .build_context(proto::BuildContextRequest {
            conversation_id: CONVERSATION.into(),
            budget: Some(proto::Budget {
                max_tokens: 1_500_000,
                ..Default::default()
            }),
            format: proto::Format::AnthropicMessages as i32,
            ..Default::default()
        })
        .await;
    let alone_bytes = alone.as_ref().map_or(0, |r| r.get_ref().rendered.len());
    report.figure(
        "pack at 1.5M tokens, alone after",
        match &alone {
            Ok(_) => format!("OK ({alone_bytes})"),
            Err(status) => format!("{:?}", status.code()),
        },
    );
    report.expect(
        alone.is_ok() && alone_bytes > 5_000_000,
        "a pack under the response limit was not served with the budget free",
    );
    report.expect(
        outcomes
            .iter()
            .filter(|o| o.0 == "pack at 1.5M tokens" && o.1 == Code::Ok)
            .all(|o| o.2 > 5_000_000),
        "a pack at 1.5M tokens came back short",
    );
    report.expect(
        ok("pack at 10M tokens") == 0,
        "a pack larger than the response limit was built",
    );
    report.expect(ok("ListMessages of 1,000") == 4, "a ListMessages page failed");
    report.expect(ok("Summarize PREPARE") == 2, "a Summarize PREPARE failed");
    report.expect(
        outcomes
            .iter()
            .filter(|o| o.0 == "ListMessages of 1,000")
            .all(|o| o.2 < 1_000),
        "a ListMessages page was not cut short",
    );
    report.expect(
        peak < LIMIT_MIB,
        format!("peak RSS {peak} MiB is over {LIMIT_MIB} MiB"),
    );
    Ok(report)
}

/// The process's peak resident set size in MiB, from /proc.
pub(crate) fn peak_rss_mib(replica: &Replica) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", replica.pid()?)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? / 1024)
}
