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

const CONVERSATIONS: usize = 4;
const WORKERS: usize = 8;

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
) -> anyhow::Result<Report> {
    let mut report = Report::new("appends with 1-50 ms deadlines under row-lock contention");
    let stop = Arc::new(AtomicBool::new(false));
    let locker = tokio::spawn(lock_rows(cluster.url.clone(), stop.clone()));
    let mut workers = JoinSet::new();
    for w in 0..WORKERS {
        let addr = replica.addr;
        workers.spawn(async move {
            let send = raw::connect(addr).await?;
            let mut answers = Vec::new();
            for n in 0..appends / WORKERS {
                let marker = format!("short-{w}-{n}");
                let conversation = format!("short-deadline-{}", (w + n) % CONVERSATIONS);
                let deadline_ms = 1 + (w * 7 + n * 13) % 50;
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
    for k in 0..CONVERSATIONS {
        let messages = all_messages(&mut client, &format!("short-deadline-{k}")).await?;
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

/// Locks one conversation's row at a time, for 5-40 ms, until told to stop.
async fn lock_rows(url: String, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let conversation = format!("short-deadline-{}", n % CONVERSATIONS);
        db.batch_execute(&format!(
            "BEGIN; SELECT 1 FROM conversations WHERE conversation_id = '{conversation}' FOR UPDATE"
        ))
        .await?;
        tokio::time::sleep(Duration::from_millis(5 + (n * 11 % 36) as u64)).await;
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
