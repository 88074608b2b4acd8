//! Thousands of appends with 1-50 ms deadlines to four conversations whose rows another session
//! keeps locking for a few milliseconds at a time: every append ctxd acknowledged is stored,
//! and none that ctxd itself answered DEADLINE_EXCEEDED is, however late the database would
//! have committed it. The calls go over a plain HTTP/2 client that sends `grpc-timeout` but
//! keeps waiting past it, so the answer heard is the server's (a tonic channel gives up at the
//! same deadline and hears nothing).

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use ctxd::proto;
use prost::Message as _;
use tokio::task::JoinSet;

use crate::{
    Report,
    appenders::{all_messages, user},
    raw,
    replica::{Cluster, Replica},
};

/// How a run sends its appends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    name: &'static str,
    conversations: usize,
    workers: usize,
    /// The shortest deadline, and how far above it the longest is, in ms.
    deadline_ms: (usize, usize),
    /// The shortest time a row is held, and how far above it the longest is, in ms.
    lock_ms: (usize, usize),
}

/// 1-50 ms deadlines from 8 workers to 4 conversations: most calls end inside a lock wait.
pub(crate) const CONTENDED: Shape = Shape {
    name: "appends with 1-50 ms deadlines under row-lock contention",
    conversations: 4,
    workers: 8,
    deadline_ms: (1, 50),
    lock_ms: (5, 36),
};

/// 56-86 ms deadlines from 32 workers to 32 conversations: more than 16 appends in flight,
/// so they join group-commit batches (issue 62), and deadlines pass while a batch forms and
/// runs.
pub(crate) const IN_BATCHES: Shape = Shape {
    name: "appends with 56-86 ms deadlines in group-commit batches, under row-lock contention",
    conversations: 32,
    workers: 32,
    deadline_ms: (56, 30),
    lock_ms: (30, 60),
};

/// What the server answered one append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    DeadlineExceeded,
    /// tonic's own timeout, outside ctxd's layers: the outcome is unknown to the caller.
    Cancelled,
    Other(u32),
}

pub(crate) async fn short_deadlines(
    replica: &Replica,
    cluster: &Cluster,
    appends: usize,
    shape: Shape,
) -> anyhow::Result<Report> {
    let mut report = Report::new(shape.name);
    let stop = Arc::new(AtomicBool::new(false));
    let locker = tokio::spawn(lock_rows(cluster.url.clone(), shape, stop.clone()));
    let mut workers = JoinSet::new();
    for w in 0..shape.workers {
        let addr = replica.addr;
        workers.spawn(async move {
            let send = raw::connect(addr).await?;
            let mut answers = Vec::new();
            for n in 0..appends / shape.workers {
                let marker = format!("short-{}-{w}-{n}", shape.conversations);
                let conversation = conversation_of(shape, (w + n) % shape.conversations);
                let (shortest, spread) = shape.deadline_ms;
                let deadline_ms = shortest + (w * 7 + n * 13) % spread;
                let answer = append(&send, &addr.to_string(), &conversation, &marker, deadline_ms).await?;
                answers.push((marker, answer));
            }
            anyhow::Ok(answers)
        });
    }
    let mut answers = Vec::new();
    while let Some(joined) = workers.join_next().await {
        answers.extend(joined??);
    }
    stop.store(true, Ordering::Relaxed);
    locker.await??;
    // Anything still queued in the database would land now.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut client = replica.client().await?;
    let mut stored = HashSet::new();
    for k in 0..shape.conversations {
        let messages = all_messages(&mut client, &conversation_of(shape, k)).await?;
        stored.extend(messages.into_iter().map(|m| m.content));
    }
    let count = |wanted: fn(&Answer) -> bool| answers.iter().filter(|(_, a)| wanted(a)).count();
    let acknowledged = count(|a| *a == Answer::Ok);
    let failed = count(|a| *a == Answer::DeadlineExceeded);
    let cancelled = count(|a| *a == Answer::Cancelled);
    let other: Vec<_> = answers
        .iter()
        .filter_map(|(_, a)| match a {
            Answer::Other(code) => Some(*code),
            _ => None,
        })
        .collect();
    let lost = answers
        .iter()
        .filter(|(m, a)| *a == Answer::Ok && !stored.contains(m))
        .count();
    let late = answers
        .iter()
        .filter(|(m, a)| *a == Answer::DeadlineExceeded && stored.contains(m))
        .count();
    report.figure(
        "appends",
        format!(
            "{} sent: {acknowledged} acknowledged, {failed} DEADLINE_EXCEEDED, {cancelled} \
             CANCELLED by tonic's own timeout (outcome unknown), {} other",
            answers.len(),
            other.len()
        ),
    );
    report.figure("acknowledged but not stored", lost);
    report.figure("answered DEADLINE_EXCEEDED but stored", late);
    report.expect(lost == 0, format!("{lost} acknowledged appends were not stored"));
    report.expect(
        late == 0,
        format!("{late} appends answered DEADLINE_EXCEEDED were stored"),
    );
    report.expect(
        acknowledged > 0 && failed > 0,
        "the deadlines should both pass and fail under this contention",
    );
    report.expect(other.is_empty(), format!("other status codes: {other:?}"));
    report.expect(
        cancelled * 100 <= answers.len(),
        format!("{cancelled} appends ended CANCELLED (tonic's timeout) instead of ctxd's answer"),
    );
    Ok(report)
}

/// Conversation `k` of a run of `shape`.
fn conversation_of(shape: Shape, k: usize) -> String {
    format!("short-deadline-{}-{k}", shape.conversations)
}

/// Locks one conversation's row at a time, for the shape's time, until told to stop.
async fn lock_rows(url: String, shape: Shape, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let conversation = conversation_of(shape, n % shape.conversations);
        db.batch_execute(&format!(
            "BEGIN; SELECT 1 FROM conversations WHERE conversation_id = '{conversation}' FOR UPDATE"
        ))
        .await?;
        let (shortest, spread) = shape.lock_ms;
        tokio::time::sleep(Duration::from_millis((shortest + n * 11 % spread) as u64)).await;
        db.batch_execute("COMMIT").await?;
        tokio::time::sleep(Duration::from_millis((n * 7 % 20) as u64)).await;
        n += 1;
    }
    drop(db);
    let _ = connection.await;
    Ok(())
}

/// One AppendMessage over `send` with `grpc-timeout` set to `deadline_ms`, waiting for the
/// server's answer however long it takes.
async fn append(
    send: &h2::client::SendRequest<Bytes>,
    authority: &str,
    conversation: &str,
    marker: &str,
    deadline_ms: usize,
) -> anyhow::Result<Answer> {
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        messages: vec![user(marker.into())],
        ..Default::default()
    }
    .encode_to_vec();
    let timeout = format!("{deadline_ms}m");
    let code = raw::unary(
        send,
        authority,
        "/ctxd.v1.ContextService/AppendMessage",
        &[("grpc-timeout", &timeout)],
        raw::framed(0, &request),
    )
    .await?;
    Ok(match code {
        0 => Answer::Ok,
        1 => Answer::Cancelled,
        4 => Answer::DeadlineExceeded,
        code => Answer::Other(code),
    })
}
