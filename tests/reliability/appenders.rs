//! Concurrent appenders across replicas: gapless sequences, and idempotent retries with one
//! effect.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Instant,
};

use ctxd::proto::{self, context_service_client::ContextServiceClient};
use tonic::transport::Channel;

use crate::{Report, replica::Replica};

pub(crate) const APPENDERS: usize = 32;

pub(crate) fn user(content: String) -> proto::Message {
    proto::Message {
        role: proto::Role::User as i32,
        content,
        ..Default::default()
    }
}

/// `message` as a call of `tenant` (the `x-tenant-id` header).
pub(crate) fn as_tenant<T>(tenant: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-tenant-id", tenant.parse().expect("tenant header"));
    request
}

/// Every message of a conversation, oldest first (empty if it does not exist).
pub(crate) async fn all_messages(
    client: &mut ContextServiceClient<Channel>,
    conversation: &str,
) -> anyhow::Result<Vec<proto::Message>> {
    let (mut after, mut all) = (0, Vec::new());
    loop {
        let page = match client
            .list_messages(proto::ListMessagesRequest {
                conversation_id: conversation.into(),
                after_sequence: after,
                page_size: 1_000,
                format: None,
            })
            .await
        {
            Ok(page) => page.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(all),
            Err(status) => return Err(status.into()),
        };
        all.extend(page.messages);
        if page.next_after_sequence == 0 {
            return Ok(all);
        }
        after = page.next_after_sequence;
    }
}

/// Sequences must be exactly 1..=N: returns (gaps, duplicates).
pub(crate) fn gaps_and_duplicates(messages: &[proto::Message]) -> (usize, usize) {
    let sequences: HashSet<u64> = messages.iter().map(|m| m.sequence).collect();
    let duplicates = messages.len() - sequences.len();
    let max = sequences.iter().copied().max().unwrap_or(0);
    let gaps = (1..=max).filter(|s| !sequences.contains(s)).count();
    (gaps, duplicates)
}

/// 32 appenders spread over 3 replicas append single messages to one conversation.
pub(crate) async fn concurrent_appenders(replicas: &[Replica], total: usize) -> anyhow::Result<Report> {
    let mut report = Report::new("32 concurrent appenders, one conversation, 3 replicas");
    let conversation = "reliability-appenders";
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for appender in 0..APPENDERS {
        let mut client = replicas[appender % replicas.len()].client().await?;
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let (mut acked, mut errors) = (Vec::new(), Vec::new());
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return (acked, errors);
                }
                let request = proto::AppendMessageRequest {
                    conversation_id: conversation.into(),
                    messages: vec![user(format!("append {n}"))],
                    ..Default::default()
                };
                match client.append_message(request).await {
                    Ok(r) => acked.push((r.into_inner().first_sequence, format!("append {n}"))),
                    Err(status) => errors.push(status.to_string()),
                }
            }
        }));
    }
    let (mut acked, mut errors) = (Vec::new(), Vec::new());
    for task in tasks {
        let (a, e) = task.await?;
        acked.extend(a);
        errors.extend(e);
    }
    let secs = started.elapsed().as_secs_f64();
    let stored = all_messages(&mut replicas[0].client().await?, conversation).await?;
    let (gaps, duplicates) = gaps_and_duplicates(&stored);
    let by_sequence: HashMap<u64, &str> = stored.iter().map(|m| (m.sequence, m.content.as_str())).collect();
    let missing = acked
        .iter()
        .filter(|(seq, content)| by_sequence.get(seq) != Some(&content.as_str()))
        .count();
    let contents: HashSet<&str> = stored.iter().map(|m| m.content.as_str()).collect();
    let last = stored.last().map_or(0, |m| m.sequence);

    report.figure("appends acknowledged", format!("{} of {total}", acked.len()));
    report.figure(
        "throughput",
        format!("{:.0} appends/s ({secs:.1} s)", acked.len() as f64 / secs),
    );
    report.figure("stored / last sequence", format!("{} / {last}", stored.len()));
    report.figure("gaps", gaps);
    report.figure("duplicate sequences", duplicates);
    report.figure("duplicate contents", stored.len() - contents.len());
    report.figure("acknowledged but missing or different", missing);
    report.figure("failed calls", errors.len());
    report.expect(errors.is_empty(), format!("failed calls: {:?}", errors.first()));
    report.expect(
        stored.len() == total && last == total as u64,
        "sequences are not exactly 1..N",
    );
    report.expect(gaps == 0 && duplicates == 0, "gaps or duplicate sequences");
    report.expect(contents.len() == stored.len(), "a message was stored twice");
    report.expect(missing == 0, "acknowledged messages missing");
    Ok(report)
}

/// 32 identical requests of `count` messages with one idempotency key, at once, across the 3
/// replicas. One message takes PostgreSQL's one-round-trip path, whose statement a stored key
/// fails; more take the path that reads the record first.
pub(crate) async fn idempotent_retries(replicas: &[Replica], count: usize) -> anyhow::Result<Report> {
    let mut report = Report::new(match count {
        1 => "32 identical requests of 1 message, one idempotency key, 3 replicas",
        _ => "32 identical requests of several messages, one idempotency key, 3 replicas",
    });
    let conversation = format!("reliability-idempotency-{count}");
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.clone(),
        messages: (0..count).map(|i| user(format!("retried message {i}"))).collect(),
        idempotency_key: "turn-0001".into(),
        ..Default::default()
    };
    let barrier = Arc::new(tokio::sync::Barrier::new(APPENDERS));
    let mut tasks = Vec::new();
    for i in 0..APPENDERS {
        let mut client = replicas[i % replicas.len()].client().await?;
        let (request, barrier) = (request.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            client
                .append_message(request)
                .await
                .map(tonic::Response::into_inner)
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await?);
    }
    let ok: Vec<_> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    let failed: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    let distinct: HashSet<(u64, u64, u64)> = ok
        .iter()
        .map(|r| (r.first_sequence, r.last_sequence, r.conversation_last_sequence))
        .collect();
    let originals = ok.iter().filter(|r| !r.replayed).count();
    let stored = all_messages(&mut replicas[1].client().await?, &conversation).await?;

    report.figure("answers OK", format!("{} of {APPENDERS}", ok.len()));
    report.figure("distinct answers (sequences)", distinct.len());
    report.figure("answers not marked replayed", originals);
    report.figure(&format!("messages stored (batch of {count})"), stored.len());
    report.expect(failed.is_empty(), format!("failed: {:?}", failed.first()));
    report.expect(distinct.len() == 1, "answers differ");
    report.expect(originals == 1, "exactly one answer should be the original");
    report.expect(
        stored.len() == count,
        "the batch took effect more than once (or not at all)",
    );
    Ok(report)
}
