//! 64 forks at once of one 10,000-message conversation by one tenant, while another tenant
//! builds contexts on the same replica: the forking tenant runs at most two at once (the rest
//! are refused at once with RESOURCE_EXHAUSTED, nothing half-made), a fork copies at most
//! CTXD_MAX_FORK_MESSAGES, and the other tenant's calls keep their latency.

use std::time::{Duration, Instant};

use ctxd::proto;
use tokio::task::JoinSet;
use tonic::Code;

use crate::{
    Report,
    appenders::{as_tenant, user},
    replica::{Cluster, Replica},
};

const FORKS: usize = 64;
const MESSAGES: i64 = 10_000;

pub(crate) async fn concurrent_forks(replica: &Replica, cluster: &Cluster) -> anyhow::Result<Report> {
    let mut report = Report::new("64 concurrent forks of a 10,000-message conversation, 1 tenant");
    let (db, connection) = tokio_postgres::connect(&cluster.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    db.batch_execute(&format!(
        "INSERT INTO conversations (tenant_id, conversation_id, last_sequence)
             VALUES ('forker', 'fork-source', {MESSAGES}) ON CONFLICT DO NOTHING;
         INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name, tool_calls,
             attachments, metadata, exclude_from_context, pinned, response_id, created_at,
             tokens_o200k, tokens_cl100k, tokens_approx)
         SELECT 'forker', 'fork-source', s, 'user', repeat('word ', 80), '', '[]', '[]', '{{}}',
             false, false, '', now(), 80, 80, 100
         FROM generate_series(1, {MESSAGES}) s ON CONFLICT DO NOTHING"
    ))
    .await?;
    let mut client = replica.client().await?;
    client
        .append_message(as_tenant(
            "bystander",
            proto::AppendMessageRequest {
                conversation_id: "fork-bystander".into(),
                messages: (0..20).map(|i| user(format!("hello {i}"))).collect(),
                ..Default::default()
            },
        ))
        .await?;

    let mut forks = JoinSet::new();
    for n in 0..FORKS {
        let mut client = replica.client().await?;
        forks.spawn(async move {
            let request = as_tenant(
                "forker",
                proto::ForkConversationRequest {
                    conversation_id: "fork-source".into(),
                    through_sequence: MESSAGES as u64,
                    new_conversation_id: format!("fork-{n}"),
                },
            );
            client
                .fork_conversation(request)
                .await
                .err()
                .map_or(Code::Ok, |s| s.code())
        });
    }
    let mut counted = std::collections::HashMap::<Code, usize>::new();
    let mut latencies = Vec::new();
    let started = Instant::now();
    while !forks.is_empty() || started.elapsed() < Duration::from_secs(2) {
        let asked = Instant::now();
        client
            .build_context(as_tenant(
                "bystander",
                proto::BuildContextRequest {
                    conversation_id: "fork-bystander".into(),
                    budget: Some(proto::Budget {
                        max_tokens: 8_000,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ))
            .await?;
        latencies.push(asked.elapsed());
        while let Some(joined) = forks.try_join_next() {
            *counted.entry(joined?).or_default() += 1;
        }
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let rows: i64 = db
        .query_one(
            "SELECT count(*) FROM messages WHERE tenant_id = 'forker' AND conversation_id LIKE 'fork-%' AND conversation_id <> 'fork-source'",
            &[],
        )
        .await?
        .get(0);
    drop(db);
    let _ = connection.await;
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    report.figure("forks", format!("{counted:?}"));
    report.figure("rows the forks wrote", rows);
    report.figure(
        "the other tenant's BuildContext meanwhile",
        format!(
            "{} calls, p50 {:.1} ms, p99 {:.1} ms",
            latencies.len(),
            p(0.5).as_secs_f64() * 1e3,
            p(0.99).as_secs_f64() * 1e3
        ),
    );
    let ok = counted.get(&Code::Ok).copied().unwrap_or(0);
    let refused = counted.get(&Code::ResourceExhausted).copied().unwrap_or(0);
    report.expect(
        ok >= 2 && ok + refused == FORKS,
        format!("forks ended otherwise: {counted:?}"),
    );
    report.expect(
        rows == ok as i64 * MESSAGES,
        format!("{rows} rows for {ok} forks"),
    );
    report.expect(
        p(0.99) < Duration::from_secs(1),
        "the other tenant waited over 1 s",
    );
    Ok(report)
}
