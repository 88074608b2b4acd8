//! Appends under the scale-out load of docs/scaling.md: 16 appenders over 64 conversations
//! (each append picks one at random, so appenders meet on conversations), then every
//! conversation is checked gapless. On Citus it also prints the two-phase commits the load
//! caused on any node (`pg_dist_transaction`; leave 2PC recovery off,
//! `citus.recover_2pc_interval = -1`, so none are cleaned up meanwhile) and how the
//! conversations spread over the workers. Run it against plain PostgreSQL and against a Citus
//! cluster (the coordinator, or the workers as one multi-host URL) one after the other and
//! compare the rates.
//!
//! `BENCH_SCALE_NODE=host:port` (Citus) takes the 64 conversations among those whose shard is on
//! that node. Connected to that node, every append then runs where its shard is, with no hop:
//! the most any routing of appends to their shard's node could give.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;

use crate::replica::{Replica, percentile};

const APPENDERS: usize = 16;
const CONVERSATIONS: usize = 64;

pub(crate) async fn run(server: &Replica, url: &str, secs: u64) -> anyhow::Result<()> {
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let citus: bool = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')",
            &[],
        )
        .await?
        .get(0);
    let engine = if citus { "Citus" } else { "PostgreSQL" };
    println!(
        "# Scale-out appends on {engine}: {APPENDERS} appenders over {CONVERSATIONS} conversations, {secs} s"
    );
    let two_phase = || async {
        let row = db
            .query_one(
                "SELECT sum(result::bigint)::bigint FROM run_command_on_all_nodes(
                     'SELECT count(*) FROM pg_dist_transaction')",
                &[],
            )
            .await?;
        anyhow::Ok(row.get::<_, i64>(0))
    };
    let two_phase_before = if citus { two_phase().await? } else { 0 };

    let run = std::process::id();
    let conversations = match std::env::var("BENCH_SCALE_NODE") {
        Ok(node) => on_node(&db, run, &node).await?,
        Err(_) => (0..CONVERSATIONS).map(|c| format!("scale-{run}-{c}")).collect(),
    };
    let conversations = Arc::new(conversations);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for appender in 0..APPENDERS {
        let mut api = server.client().await?;
        let stop = stop.clone();
        let conversations = conversations.clone();
        tasks.push(tokio::spawn(async move {
            // A small xorshift per appender: which conversation each append goes to.
            let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (appender as u64 + 1);
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let conversation = &conversations[state as usize % CONVERSATIONS];
                let sent = Instant::now();
                api.append_message(proto::AppendMessageRequest {
                    conversation_id: conversation.clone(),
                    messages: vec![proto::Message {
                        role: proto::Role::User as i32,
                        content: format!(
                            "Appender {appender}: the nightly export failed again, can you look?"
                        ),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .await?;
                latencies.push(sent.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let appends = latencies.len();
    println!(
        "appends {appends}  {:.0}/s  p50 {:.2} ms  p99 {:.2} ms",
        appends as f64 / elapsed,
        percentile(&mut latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&mut latencies, 0.99).as_secs_f64() * 1e3,
    );

    // Gapless: every conversation holds sequences 1..=last_sequence, each once.
    let prefix = format!("scale-{run}-%");
    let row = db
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE n = c.last_sequence AND lo = 1 AND hi = c.last_sequence),
                    coalesce(sum(n), 0)::bigint
             FROM conversations c
             JOIN (SELECT tenant_id, conversation_id, count(*) AS n, min(sequence) AS lo, max(sequence) AS hi
                   FROM messages WHERE conversation_id LIKE $1 GROUP BY tenant_id, conversation_id) m
               USING (tenant_id, conversation_id)
             WHERE c.conversation_id LIKE $1",
            &[&prefix],
        )
        .await?;
    let (conversations, gapless, stored): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    println!(
        "conversations {conversations}, gapless {gapless}, messages stored {stored} (appends answered {appends})"
    );
    anyhow::ensure!(
        conversations == gapless && stored == appends as i64,
        "a conversation has a gap or a lost append"
    );

    if citus {
        let during = two_phase().await? - two_phase_before;
        println!("two-phase commits during the load: {during}");
        let nodes = db
            .query(
                "SELECT n.nodename || ':' || n.nodeport, count(*), count(DISTINCT p.shardid)
                 FROM conversations c
                 JOIN pg_dist_placement p
                   ON p.shardid = get_shard_id_for_distribution_column('conversations', c.conversation_id)
                 JOIN pg_dist_node n ON n.groupid = p.groupid
                 WHERE c.conversation_id LIKE $1
                 GROUP BY 1 ORDER BY 1",
                &[&prefix],
            )
            .await?;
        for node in nodes {
            let (name, conversations, shards): (String, i64, i64) = (node.get(0), node.get(1), node.get(2));
            println!("  node {name}: {conversations} conversations in {shards} shards");
        }
    }
    Ok(())
}

/// [`CONVERSATIONS`] conversation ids of this run whose shard is on `node` (`host:port`).
async fn on_node(db: &tokio_postgres::Client, run: u32, node: &str) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT id FROM (SELECT 'scale-' || $1::text || '-' || i AS id FROM generate_series(0, 4095) i) ids
             WHERE (SELECT n.nodename || ':' || n.nodeport
                    FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
                    WHERE p.shardid = get_shard_id_for_distribution_column('conversations', id)
                    LIMIT 1) = $2
             LIMIT $3",
            &[&run.to_string(), &node, &(CONVERSATIONS as i64)],
        )
        .await?;
    anyhow::ensure!(
        rows.len() == CONVERSATIONS,
        "BENCH_SCALE_NODE={node}: not a node holding conversation shards"
    );
    println!("all {CONVERSATIONS} conversations have their shard on {node}");
    Ok(rows.iter().map(|row| row.get(0)).collect())
}
