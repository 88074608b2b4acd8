//! One conversation's row locked elsewhere (`SELECT ... FOR UPDATE` in another session) while
//! 24 appends to it (2 s deadlines) and steady appends to unrelated conversations run on one
//! replica with a pool of 8: the locked conversation may take two connections, not the pool;
//! its callers hear DEADLINE_EXCEEDED; nothing they saw fail is stored once the lock goes; and
//! `/metrics` counted every failed call. The unrelated appends share group-commit batches, so the
//! locked conversation's appends meet batches too (issue 62).

use std::{
    net::TcpListener,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;
use tokio::task::JoinSet;
use tonic::Code;

use crate::{
    Report,
    appenders::{all_messages, user},
    replica::{Cluster, Replica},
};

const HOT: &str = "locked-hot";
const HOT_APPENDS: usize = 24;
const COLD_WORKERS: usize = 8;
const LOCK_HELD: Duration = Duration::from_secs(6);
const DEADLINE: Duration = Duration::from_secs(2);

pub(crate) async fn locked_conversation(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
) -> anyhow::Result<Report> {
    let mut report = Report::new("one conversation locked elsewhere, 1 replica with a pool of 8");
    let metrics_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_DB_POOL_SIZE", "8"),
        ("CTXD_DB_CONNECT_TIMEOUT_SECS", "1"),
        ("CTXD_REQUEST_TIMEOUT_SECS", "10"),
        ("CTXD_METRICS_LISTEN", metrics_addr.as_str()),
        ("RUST_LOG", "info"),
    ];
    let replica = Replica::start(binary, &env, work, "replica-locked").await?;
    let mut client = replica.client().await?;
    client
        .append_message(proto::AppendMessageRequest {
            conversation_id: HOT.into(),
            messages: vec![user("first".into())],
            ..Default::default()
        })
        .await?;
    let failed_before = deadline_exceeded_appends(&metrics_addr).await?;

    // The lock, held by a session ctxd knows nothing about.
    let (db, connection) = tokio_postgres::connect(&cluster.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    db.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM conversations WHERE tenant_id = 'default' AND conversation_id = '{HOT}' FOR UPDATE"
    ))
    .await?;
    let locked_at = Instant::now();

    let mut hot = JoinSet::new();
    for n in 0..HOT_APPENDS {
        let mut client = replica.client().await?;
        hot.spawn(async move {
            let mut request = tonic::Request::new(proto::AppendMessageRequest {
                conversation_id: HOT.into(),
                messages: vec![user(format!("secret-hot {n}"))],
                ..Default::default()
            });
            request.set_timeout(DEADLINE);
            let started = Instant::now();
            let code = client
                .append_message(request)
                .await
                .err()
                .map_or(Code::Ok, |s| s.code());
            (code, started.elapsed())
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (cold_ok, cold_total) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut cold = JoinSet::new();
    for w in 0..COLD_WORKERS {
        let mut client = replica.client().await?;
        let (stop, ok, total) = (stop.clone(), cold_ok.clone(), cold_total.clone());
        cold.spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let mut request = tonic::Request::new(proto::AppendMessageRequest {
                    conversation_id: format!("locked-cold-{w}"),
                    messages: vec![user(format!("cold {n}"))],
                    ..Default::default()
                });
                request.set_timeout(DEADLINE);
                n += 1;
                total.fetch_add(1, Ordering::Relaxed);
                if client.append_message(request).await.is_ok() {
                    ok.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    tokio::time::sleep(LOCK_HELD.saturating_sub(locked_at.elapsed())).await;
    stop.store(true, Ordering::Relaxed);
    while cold.join_next().await.is_some() {}
    let hot_outcomes: Vec<(Code, Duration)> = hot.join_all().await;
    db.batch_execute("COMMIT").await?;
    drop(db);
    let _ = connection.await;
    // Anything still queued in the database for the locked conversation would land now.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let acknowledged = hot_outcomes.iter().filter(|o| o.0 == Code::Ok).count();
    let deadline_exceeded = hot_outcomes
        .iter()
        .filter(|o| o.0 == Code::DeadlineExceeded)
        .count();
    let slowest = hot_outcomes.iter().map(|o| o.1).max().unwrap_or_default();
    let stored = all_messages(&mut client, HOT).await?.len() - 1;
    let (ok, total) = (
        cold_ok.load(Ordering::Relaxed),
        cold_total.load(Ordering::Relaxed),
    );
    let rate = ok as f64 / total.max(1) as f64;
    let counted = deadline_exceeded_appends(&metrics_addr).await? - failed_before;
    report.figure(
        "unrelated appends while the row is locked",
        format!("{ok} of {total} succeeded ({:.1}%)", rate * 100.0),
    );
    report.figure(
        "appends to the locked conversation",
        format!(
            "{deadline_exceeded} DEADLINE_EXCEEDED, {acknowledged} acknowledged, {stored} stored; slowest answer {:.2} s",
            slowest.as_secs_f64()
        ),
    );
    report.figure("DEADLINE_EXCEEDED appends in /metrics", counted);
    // Group commit (issue 62): the locked conversation's appends meet batches, which skip its
    // row and send them to wait alone.
    let batched = metric(
        &metrics_addr,
        "ctxd_append_group_commit_total{count=\"appends\"} ",
    )
    .await?;
    let batches = metric(
        &metrics_addr,
        "ctxd_append_group_commit_total{count=\"batches\"} ",
    )
    .await?;
    report.figure(
        "appends written in group-commit batches",
        format!("{batched} in {batches} batches"),
    );
    report.expect(batched > 0, "no append was written in a batch");
    report.expect(rate >= 0.9, "fewer than 90% of unrelated appends succeeded");
    report.expect(total >= 100, format!("only {total} unrelated appends were tried"));
    report.expect(
        acknowledged == stored,
        format!("{acknowledged} acknowledged but {stored} stored"),
    );
    report.expect(
        deadline_exceeded == HOT_APPENDS,
        format!("locked appends ended otherwise: {hot_outcomes:?}"),
    );
    report.expect(
        slowest < DEADLINE + Duration::from_millis(500),
        "a locked append was answered long after its deadline",
    );
    report.expect(
        counted >= HOT_APPENDS as u64,
        format!("/metrics counted {counted} of {HOT_APPENDS} failed appends"),
    );
    report.expect(
        !replica.log_text().contains("secret-hot"),
        "message content reached the log",
    );
    Ok(report)
}

/// `ctxd_rpc_duration_seconds_count{code="DEADLINE_EXCEEDED",method="AppendMessage",protocol="grpc"}`.
async fn deadline_exceeded_appends(addr: &str) -> anyhow::Result<u64> {
    metric(
        addr,
        "ctxd_rpc_duration_seconds_count{code=\"DEADLINE_EXCEEDED\",method=\"AppendMessage\",protocol=\"grpc\"} ",
    )
    .await
}

/// The value of `series` (its name and labels, then a space) on the replica's `/metrics`.
async fn metric(addr: &str, series: &str) -> anyhow::Result<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: ctxd\r\n\r\n")
        .await?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await?;
    Ok(body
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}
