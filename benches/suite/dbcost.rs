//! PostgreSQL's CPU per call: what ctxd costs the database it shares, against a hand-written
//! backend doing the same job with plain SQL, on the same cluster in the same run. The cost is
//! the CPU time of the postmaster and all its processes (backends, WAL writer, checkpointer:
//! the whole cluster, from /proc/PID/schedstat) during each of N calls, summed and divided by
//! N. Measured for:
//! - BuildContext of a 244-message conversation against one read of its rows: unchanged
//!   between calls, then growing by one message before each call (the appends not measured),
//!   with the read growing alike;
//! - AppendMessage of one message against a gapless append by hand (bump a counter row and
//!   insert the row, one transaction), and against the same made searchable (the row's
//!   `to_tsvector` into the GIN-indexed `search` column, as ctxd's messages are); then the
//!   same appends through a replica with embeddings on (a fast local fake model), during the
//!   calls and counting every message's vector write after them;
//! - ListConversations' first page against one read of the page from the activity index.
//!
//! Latencies are printed beside the costs (one client, one call at a time).

use std::{
    cell::Cell,
    time::{Duration, Instant},
};

use ctxd::proto;
use tonic::Request;

use crate::{
    machine::Cluster,
    replica::{Replica, percentile},
};

const HISTORY: usize = 244;

impl Cluster {
    /// The cluster's CPU per call of `calls` runs of `call`, in microseconds, and the calls'
    /// p50 latency. Before each call `between` runs, unmeasured (a chat's appends between its
    /// BuildContext calls): only the CPU spent during the calls themselves is counted.
    async fn per_call<B, BF, F, Fut>(
        &self,
        calls: usize,
        mut between: B,
        mut call: F,
    ) -> anyhow::Result<(f64, Duration)>
    where
        B: FnMut(usize) -> BF,
        BF: std::future::Future<Output = anyhow::Result<()>>,
        F: FnMut(usize) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        for n in 0..calls / 10 {
            between(n).await?;
            call(n).await?;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (mut nanos, mut pids) = (0u64, self.processes());
        let mut latencies = Vec::with_capacity(calls);
        for n in 0..calls {
            between(calls + n).await?;
            if n % 50 == 0 {
                pids = self.processes();
            }
            let before = Cluster::cpu_nanos(&pids);
            let started = Instant::now();
            call(calls + n).await?;
            latencies.push(started.elapsed());
            nanos += Cluster::cpu_nanos(&pids).saturating_sub(before);
        }
        Ok((nanos as f64 / calls as f64 / 1e3, percentile(&mut latencies, 0.5)))
    }
}

/// Nothing between calls.
async fn nothing(_: usize) -> anyhow::Result<()> {
    Ok(())
}

pub(crate) async fn run(
    server: &Replica,
    url: &str,
    out: &std::path::Path,
    quick: bool,
) -> anyhow::Result<()> {
    let calls = if quick { 200 } else { 3_000 };
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let cluster = Cluster::find(&db).await?;
    let mut api = server.client().await?;
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!(
        "# PostgreSQL CPU per call (the whole cluster, /proc/PID/schedstat), {calls} calls each, one at a time"
    );

    // BuildContext of a 244-message conversation against one read of its rows: unchanged
    // between calls, then growing by one message before each call, as a chat does.
    let (ours, theirs) = (format!("dbcost-{run}"), format!("dbcost-read-{run}"));
    for conversation in [&ours, &theirs] {
        let messages: Vec<proto::Message> = (0..HISTORY).map(chat_message).collect();
        for chunk in messages.chunks(100) {
            api.append_message(append(conversation, chunk.to_vec())).await?;
        }
    }
    let read = db.prepare(crate::build::RAW_TAIL).await?;
    let (held, read_rows) = (Cell::new(HISTORY), Cell::new(HISTORY));
    let build = |api: &Client, conversation: &str, expected: usize| {
        let (mut api, conversation) = (api.clone(), conversation.to_owned());
        async move {
            let pack = api.build_context(pack_request(&conversation)).await?.into_inner();
            let included = pack.stats.map_or(0, |s| s.messages_included as usize);
            anyhow::ensure!(
                included == expected,
                "the pack holds {included} messages, not {expected}"
            );
            Ok(())
        }
    };
    let plain_read = |rows: usize| {
        let (db, read, conversation) = (&db, &read, &theirs);
        async move {
            let got = db.query(read, &[conversation, &(rows as i64)]).await?;
            anyhow::ensure!(got.len() == rows, "read {} rows", got.len());
            Ok(())
        }
    };
    let (cost, p50) = cluster
        .per_call(calls, nothing, |_| build(&api, &ours, held.get()))
        .await?;
    let (their_cost, their_p50) = cluster
        .per_call(calls, nothing, |_| plain_read(read_rows.get()))
        .await?;
    report(
        "BuildContext, 244 messages",
        (cost, p50),
        "one read of the rows",
        (their_cost, their_p50),
    );
    // The chat: one more message before each call (not measured), on both conversations.
    let chat = calls.min(1_000);
    let grow = |conversation: &str, n: usize| {
        let (mut api, request) = (api.clone(), append(conversation, vec![chat_message(HISTORY + n)]));
        async move {
            api.append_message(request).await?;
            Ok(())
        }
    };
    let (cost, p50) = cluster
        .per_call(
            chat,
            |n| {
                held.set(held.get() + 1);
                grow(&ours, n)
            },
            |_| build(&api, &ours, held.get()),
        )
        .await?;
    let (their_cost, their_p50) = cluster
        .per_call(
            chat,
            |n| {
                read_rows.set(read_rows.get() + 1);
                grow(&theirs, n)
            },
            |_| plain_read(read_rows.get()),
        )
        .await?;
    report(
        "BuildContext, chat from 244 messages",
        (cost, p50),
        "one read of the rows",
        (their_cost, their_p50),
    );

    // AppendMessage against a gapless append by hand.
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS bench_dbcost_counters (id text PRIMARY KEY, last bigint NOT NULL);
         CREATE TABLE IF NOT EXISTS bench_dbcost_messages (LIKE messages INCLUDING ALL);",
    )
    .await?;
    let appended = format!("dbcost-append-{run}");
    let (ours, ours_p50) = cluster
        .per_call(calls, nothing, |n| append_one(&api, &appended, n))
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
    // The same by hand, searchable as ctxd's messages are: PostgreSQL's own `to_tsvector`
    // into the same GIN-indexed column.
    let indexed = db
        .prepare(
            "INSERT INTO bench_dbcost_messages (tenant_id, conversation_id, sequence, role, content, name,
                 tool_calls, attachments, metadata, exclude_from_context, pinned, response_id, created_at,
                 search)
             VALUES ('default', $1, $2, 'user', $3, '', '[]', '[]', '{}', false, false, '', now(),
                 to_tsvector('english', $3))",
        )
        .await?;
    let mut baselines = Vec::new();
    for (insert, name, baseline) in [
        (&insert, "hand", "counter bump + INSERT"),
        (&indexed, "hand-indexed", "the same, searchable"),
    ] {
        let by_hand = format!("dbcost-{name}-{run}");
        let (theirs, theirs_p50) = cluster
            .per_call(calls, nothing, |n| {
                let (db, bump, by_hand) = (&db, &bump, &by_hand);
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
            baseline,
            (theirs, theirs_p50),
        );
        baselines.push((baseline, (theirs, theirs_p50)));
    }
    embedded_appends(url, out, &cluster, &db, calls, run, &baselines).await?;

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
    // With the rows just inserted the planner would still count a handful for the tenant, and
    // walk all 1,000 instead of the activity index (as a table's statistics do not lag in use).
    db.batch_execute("ANALYZE conversations").await?;
    let (ours, ours_p50) = cluster
        .per_call(calls, nothing, |_| {
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
        .per_call(calls, nothing, |_| {
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

type Client = proto::context_service_client::ContextServiceClient<tonic::transport::Channel>;

/// AppendMessage of message `n` to `conversation`.
async fn append_one(api: &Client, conversation: &str, n: usize) -> anyhow::Result<()> {
    api.clone()
        .append_message(proto::AppendMessageRequest {
            conversation_id: conversation.to_owned(),
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

/// The same appends with embeddings on: a replica with a fast local fake model (the figures
/// are ctxd's database work, not a model's), against the same baselines. Each message is
/// embedded after its append, outside its transaction: first the CPU during the calls, then the
/// whole cluster's from the first call until every message's vector is stored, per append.
async fn embedded_appends(
    url: &str,
    out: &std::path::Path,
    cluster: &crate::machine::Cluster,
    db: &tokio_postgres::Client,
    calls: usize,
    run: u64,
    baselines: &[(&str, (f64, Duration))],
) -> anyhow::Result<()> {
    let endpoint = crate::embeddings::fake_endpoint().await?;
    let semantic = Replica::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_ctxd")),
        &[
            ("DATABASE_URL", url),
            ("CTXD_EMBEDDINGS_URL", &endpoint),
            ("RUST_LOG", "info"),
        ],
        out,
        "bench-dbcost-embeddings",
    )
    .await?;
    let api = semantic.client().await?;
    let conversation = format!("dbcost-embedded-{run}");
    let before = crate::machine::Cluster::cpu_nanos(&cluster.processes());
    let (cost, p50) = cluster
        .per_call(calls, nothing, |n| append_one(&api, &conversation, n))
        .await?;
    let embedded = crate::embeddings::wait_embedded(db, &conversation).await?;
    let spent = crate::machine::Cluster::cpu_nanos(&cluster.processes()).saturating_sub(before);
    // per_call's warm-up makes a tenth more calls than it measures.
    let appended = calls + calls / 10;
    let whole = spent as f64 / appended as f64 / 1e3;
    for (baseline, theirs) in baselines {
        report("AppendMessage, embeddings on", (cost, p50), baseline, *theirs);
    }
    let ratios: Vec<String> = baselines
        .iter()
        .map(|(_, (theirs, _))| format!("{:.2}", whole / theirs.max(1.0)))
        .collect();
    println!(
        "  embeddings on, with the vectors' writes ({embedded} of {appended} messages embedded): {whole:.0} us PostgreSQL CPU per append, ratios {}",
        ratios.join(" / ")
    );
    Ok(())
}

/// Message `i` of the measured chats: user and assistant in turn.
fn chat_message(i: usize) -> proto::Message {
    let role = match i % 2 {
        0 => proto::Role::User,
        _ => proto::Role::Assistant,
    };
    proto::Message {
        role: role as i32,
        content: format!("message {i}: {}", "a few words of ordinary prose ".repeat(4)),
        ..Default::default()
    }
}

fn append(conversation: &str, messages: Vec<proto::Message>) -> proto::AppendMessageRequest {
    proto::AppendMessageRequest {
        conversation_id: conversation.to_owned(),
        messages,
        ..Default::default()
    }
}

/// A pack that holds the whole conversation.
fn pack_request(conversation: &str) -> proto::BuildContextRequest {
    proto::BuildContextRequest {
        conversation_id: conversation.to_owned(),
        budget: Some(proto::Budget {
            max_tokens: 200_000,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn report(ours: &str, (cost, p50): (f64, Duration), theirs: &str, (their_cost, their_p50): (f64, Duration)) {
    println!(
        "{ours:<36} {cost:>7.0} us PostgreSQL CPU/call (p50 {:.3} ms)  vs {theirs}: {their_cost:>6.0} us (p50 {:.3} ms)  ratio {:.2}",
        p50.as_secs_f64() * 1e3,
        their_p50.as_secs_f64() * 1e3,
        cost / their_cost.max(1.0)
    );
}
