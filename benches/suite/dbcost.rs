//! PostgreSQL's CPU per call: what ctxd costs the database it shares, against a hand-written
//! backend doing the same job with plain SQL, on the same cluster in the same run. The cost is
//! the CPU time of the postmaster and all its processes (backends, WAL writer, checkpointer:
//! the whole cluster, from /proc) before and after N calls, divided by N. Measured for:
//! - BuildContext of a 244-message conversation against one read of its rows;
//! - AppendMessage of one message against a gapless append by hand (bump a counter row and
//!   insert the row, one transaction);
//! - ListConversations' first page against one read of the page from the activity index.
//!
//! Latencies are printed beside the costs (one client, one call at a time).

use std::time::{Duration, Instant};

use ctxd::proto;
use tonic::Request;

use crate::replica::{Replica, percentile};

const HISTORY: usize = 244;

/// The cluster's CPU seconds so far: the postmaster's and its children's, from /proc.
struct Cluster {
    postmaster: u32,
}

impl Cluster {
    async fn find(db: &tokio_postgres::Client) -> anyhow::Result<Self> {
        let backend: i32 = db.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        let status = std::fs::read_to_string(format!("/proc/{backend}/status"))?;
        let parent = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .ok_or_else(|| anyhow::anyhow!("no PPid for the backend"))?;
        Ok(Self {
            postmaster: parent.trim().parse()?,
        })
    }

    fn cpu_seconds(&self) -> f64 {
        let mut ticks = 0u64;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0.0;
        };
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // After the name: state, ppid, ... utime (field 14) and stime (15), 1-based.
            let parent = fields.get(1).and_then(|p| p.parse::<u32>().ok());
            if pid == self.postmaster || parent == Some(self.postmaster) {
                let at = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                ticks += at(11) + at(12);
            }
        }
        ticks as f64 / 100.0
    }

    /// The cluster's CPU per call of `calls` runs of `call`, in microseconds, and the calls'
    /// p50 latency.
    async fn per_call<F, Fut>(&self, calls: usize, mut call: F) -> anyhow::Result<(f64, Duration)>
    where
        F: FnMut(usize) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        for n in 0..calls / 10 {
            call(n).await?;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = self.cpu_seconds();
        let mut latencies = Vec::with_capacity(calls);
        for n in 0..calls {
            let started = Instant::now();
            call(calls + n).await?;
            latencies.push(started.elapsed());
        }
        let cpu = self.cpu_seconds() - before;
        Ok((cpu / calls as f64 * 1e6, percentile(&mut latencies, 0.5)))
    }
}

pub(crate) async fn run(server: &Replica, url: &str, quick: bool) -> anyhow::Result<()> {
    let calls = if quick { 200 } else { 3_000 };
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let cluster = Cluster::find(&db).await?;
    let mut api = server.client().await?;
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("# PostgreSQL CPU per call (the whole cluster, /proc), {calls} calls each, one at a time");

    // BuildContext of a 244-message conversation against one read of its rows.
    let conversation = format!("dbcost-{run}");
    let messages: Vec<proto::Message> = (0..HISTORY)
        .map(|i| proto::Message {
            role: if i % 2 == 0 {
                proto::Role::User
            } else {
                proto::Role::Assistant
            } as i32,
            content: format!("message {i}: {}", "a few words of ordinary prose ".repeat(4)),
            ..Default::default()
        })
        .collect();
    for chunk in messages.chunks(100) {
        api.append_message(proto::AppendMessageRequest {
            conversation_id: conversation.clone(),
            messages: chunk.to_vec(),
            ..Default::default()
        })
        .await?;
    }
    let build = proto::BuildContextRequest {
        conversation_id: conversation.clone(),
        budget: Some(proto::Budget {
            max_tokens: 100_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    let (ours, ours_p50) = cluster
        .per_call(calls, |_| {
            let (mut api, build) = (api.clone(), build.clone());
            async move {
                let pack = api.build_context(build).await?.into_inner();
                let included = pack.stats.map_or(0, |s| s.messages_included as usize);
                anyhow::ensure!(included == HISTORY, "the pack holds {included} messages");
                Ok(())
            }
        })
        .await?;
    let read = db.prepare(crate::build::RAW_TAIL).await?;
    let (theirs, theirs_p50) = cluster
        .per_call(calls, |_| {
            let (db, read, conversation) = (&db, &read, &conversation);
            async move {
                let rows = db.query(read, &[conversation, &(HISTORY as i64)]).await?;
                anyhow::ensure!(rows.len() == HISTORY, "read {} rows", rows.len());
                Ok(())
            }
        })
        .await?;
    report(
        "BuildContext, 244 messages",
        (ours, ours_p50),
        "one read of the rows",
        (theirs, theirs_p50),
    );

    // AppendMessage against a gapless append by hand.
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS bench_dbcost_counters (id text PRIMARY KEY, last bigint NOT NULL);
         CREATE TABLE IF NOT EXISTS bench_dbcost_messages (LIKE messages INCLUDING ALL);",
    )
    .await?;
    let appended = format!("dbcost-append-{run}");
    let (ours, ours_p50) = cluster
        .per_call(calls, |n| {
            let (mut api, appended) = (api.clone(), appended.clone());
            async move {
                api.append_message(proto::AppendMessageRequest {
                    conversation_id: appended,
                    messages: vec![proto::Message {
                        role: proto::Role::User as i32,
                        content: format!("message {n}: a few words of ordinary prose"),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .await?;
                Ok(())
            }
        })
        .await?;
    let (bump, insert) = (
        db.prepare(
            "INSERT INTO bench_dbcost_counters (id, last) VALUES ($1, 1)
             ON CONFLICT (id) DO UPDATE SET last = bench_dbcost_counters.last + 1 RETURNING last",
        )
        .await?,
        db.prepare(
            "INSERT INTO bench_dbcost_messages (tenant_id, conversation_id, sequence, role, content, name,
                 tool_calls, attachments, metadata, exclude_from_context, pinned, response_id, created_at)
             VALUES ('default', $1, $2, 'user', $3, '', '[]', '[]', '{}', false, false, '', now())",
        )
        .await?,
    );
    let by_hand = format!("dbcost-hand-{run}");
    let (theirs, theirs_p50) = cluster
        .per_call(calls, |n| {
            let (db, bump, insert, by_hand) = (&db, &bump, &insert, &by_hand);
            async move {
                db.batch_execute("BEGIN").await?;
                let last: i64 = db.query_one(bump, &[by_hand]).await?.get(0);
                let content = format!("message {n}: a few words of ordinary prose");
                db.execute(insert, &[by_hand, &last, &content]).await?;
                db.batch_execute("COMMIT").await?;
                Ok(())
            }
        })
        .await?;
    report(
        "AppendMessage, 1 message",
        (ours, ours_p50),
        "counter bump + INSERT",
        (theirs, theirs_p50),
    );

    // ListConversations' first page against one read of the page.
    let tenant = format!("bench-dbcost-{run}");
    db.execute(
        "INSERT INTO conversations (tenant_id, conversation_id, last_sequence, updated_at, listing)
         SELECT $1, 'conv-' || g, 0, now() - g * interval '1 second',
                jsonb_build_object('t', $1::text, 's', 'active', 'l', '{}'::jsonb)
         FROM generate_series(1, 1000) g",
        &[&tenant],
    )
    .await?;
    let (ours, ours_p50) = cluster
        .per_call(calls, |_| {
            let (mut api, tenant) = (api.clone(), tenant.clone());
            async move {
                let mut request = Request::new(proto::ListConversationsRequest {
                    page_size: 50,
                    ..Default::default()
                });
                request.metadata_mut().insert("x-tenant-id", tenant.parse()?);
                let page = api.list_conversations(request).await?.into_inner();
                anyhow::ensure!(page.conversations.len() == 50, "a full page");
                Ok(())
            }
        })
        .await?;
    let page = db
        .prepare(
            "SELECT conversation_id, title, status, labels, created_at, updated_at, last_sequence
             FROM conversations WHERE tenant_id = $1
             ORDER BY updated_at DESC, conversation_id COLLATE \"C\" DESC LIMIT 51",
        )
        .await?;
    let (theirs, theirs_p50) = cluster
        .per_call(calls, |_| {
            let (db, page, tenant) = (&db, &page, &tenant);
            async move {
                let rows = db.query(page, &[tenant]).await?;
                anyhow::ensure!(rows.len() == 51, "read {} rows", rows.len());
                Ok(())
            }
        })
        .await?;
    report(
        "ListConversations, first page of 50",
        (ours, ours_p50),
        "one read of the page",
        (theirs, theirs_p50),
    );
    Ok(())
}

fn report(ours: &str, (cost, p50): (f64, Duration), theirs: &str, (their_cost, their_p50): (f64, Duration)) {
    println!(
        "{ours:<36} {cost:>7.0} us PostgreSQL CPU/call (p50 {:.3} ms)  vs {theirs}: {their_cost:>6.0} us (p50 {:.3} ms)  ratio {:.2}",
        p50.as_secs_f64() * 1e3,
        their_p50.as_secs_f64() * 1e3,
        cost / their_cost.max(1.0)
    );
}
