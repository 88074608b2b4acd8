//! CPU-heavy and oversized working-memory requests against one replica: three refreshes of
//! pathological messages (20,000 questions each) run at once while health and a light RPC are
//! timed, and eight updates of 1,000 goals each try to grow one document past its cap.

use std::time::{Duration, Instant};

use ctxd::proto;
use tokio::task::JoinSet;
use tonic::Code;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::{Report, appenders::user, replica::Replica};

const QUESTIONS: usize = 20_000;

pub(crate) async fn pathological_memory_work(replica: &Replica) -> anyhow::Result<Report> {
    let mut report = Report::new("pathological working-memory work, 1 replica");
    let mut client = replica.client().await?;
    let text: String = (0..QUESTIONS).map(|i| format!("Is option {i} ok? ")).collect();
    for n in 0..3 {
        client
            .append_message(proto::AppendMessageRequest {
                conversation_id: format!("cpu-questions-{n}"),
                messages: vec![user(text.clone())],
                ..Default::default()
            })
            .await?;
    }

    let mut refreshes = JoinSet::new();
    for n in 0..3 {
        let mut client = replica.client().await?;
        refreshes.spawn(async move {
            let mut request = tonic::Request::new(proto::GetWorkingMemoryRequest {
                conversation_id: format!("cpu-questions-{n}"),
                refresh: true,
                prepare: false,
            });
            request.set_timeout(Duration::from_secs(5));
            let started = Instant::now();
            let result = client.get_working_memory(request).await;
            let open = result
                .as_ref()
                .ok()
                .and_then(|r| r.get_ref().memory.as_ref())
                .map_or(0, |m| m.open_questions.len());
            (
                started.elapsed(),
                result.err().map_or(Code::Ok, |s| s.code()),
                open,
            )
        });
    }
    // Health and a light RPC, timed while the refreshes run.
    let mut health = HealthClient::new(replica.channel().await?);
    let mut light = replica.client().await?;
    let (mut worst_health, mut worst_light, mut samples) = (Duration::ZERO, Duration::ZERO, 0);
    let mut outcomes = Vec::new();
    while !refreshes.is_empty() {
        let started = Instant::now();
        let mut request = tonic::Request::new(HealthCheckRequest {
            service: String::new(),
        });
        request.set_timeout(Duration::from_secs(5));
        let ok = health.check(request).await.is_ok();
        worst_health = worst_health.max(if ok { started.elapsed() } else { Duration::MAX });
        let started = Instant::now();
        let ok = light
            .count_tokens(proto::CountTokensRequest {
                text: "hello".into(),
                tokenizer: 0,
            })
            .await
            .is_ok();
        worst_light = worst_light.max(if ok { started.elapsed() } else { Duration::MAX });
        samples += 1;
        while let Some(outcome) = refreshes.try_join_next() {
            outcomes.push(outcome?);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let slowest = outcomes.iter().map(|o| o.0).max().unwrap_or_default();
    // The document keeps the newest 1,000 (its cap) of the 20,000 open questions.
    let all_ok = outcomes.iter().all(|o| o.1 == Code::Ok && o.2 == 1_000);
    report.figure(
        "3 refreshes of 20,000 questions each, slowest",
        format!(
            "{:.2} s ({:?})",
            slowest.as_secs_f64(),
            outcomes.iter().map(|o| o.1).collect::<Vec<_>>()
        ),
    );
    report.figure(
        "health latency while they run, worst",
        format!(
            "{:.1} ms over {samples} samples",
            worst_health.as_secs_f64() * 1e3
        ),
    );
    report.figure(
        "CountTokens latency while they run, worst",
        format!("{:.1} ms", worst_light.as_secs_f64() * 1e3),
    );
    report.expect(
        all_ok,
        format!("a refresh failed or lost questions: {outcomes:?}"),
    );
    report.expect(worst_health < Duration::from_secs(1), "health took 1 s or more");
    report.expect(
        worst_light < Duration::from_secs(1),
        "a light RPC took 1 s or more",
    );

    // One document, eight updates of 1,000 new goals: the cap holds, each call stays fast.
    client
        .append_message(proto::AppendMessageRequest {
            conversation_id: "cpu-goals".into(),
            messages: vec![user("start".into())],
            ..Default::default()
        })
        .await?;
    let (mut accepted, mut refused, mut slowest_update) = (0, 0, Duration::ZERO);
    for round in 0..8 {
        let goals = (0..1_000)
            .map(|i| proto::MemoryItem {
                text: format!("goal {round}-{i}"),
                ..Default::default()
            })
            .collect();
        let started = Instant::now();
        let result = client
            .update_working_memory(proto::UpdateWorkingMemoryRequest {
                conversation_id: "cpu-goals".into(),
                memory: Some(proto::WorkingMemory {
                    goals,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await;
        slowest_update = slowest_update.max(started.elapsed());
        match result {
            Ok(_) => accepted += 1,
            Err(s) if s.code() == Code::InvalidArgument => refused += 1,
            Err(s) => report.expect(false, format!("update {round}: {s:?}")),
        }
    }
    let stored = client
        .get_working_memory(proto::GetWorkingMemoryRequest {
            conversation_id: "cpu-goals".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .memory
        .map_or(0, |m| m.goals.len());
    report.figure(
        "8 updates of 1,000 goals: accepted / refused (cap)",
        format!("{accepted} / {refused}, {stored} goals stored"),
    );
    report.figure(
        "slowest update",
        format!("{:.1} ms", slowest_update.as_secs_f64() * 1e3),
    );
    report.expect(stored <= 1_000, "the document grew past its cap");
    report.expect(accepted == 1 && refused == 7, "the cap did not refuse the growth");
    Ok(report)
}

/// Four clients of one tenant send 15 MiB appends (15 messages of 1 MiB of varied text) with
/// 300 ms deadlines for a few seconds, while another tenant counts tokens of a short text:
/// the other tenant's calls keep their latency (one tenant gets at most half the CPU pool),
/// and once the appends stop, so does the replica's CPU (counting stops at the deadline).
pub(crate) async fn large_appends_with_short_deadlines(replica: &Replica) -> anyhow::Result<Report> {
    let mut report = Report::new("15 MiB appends with 300 ms deadlines from one tenant, 1 replica");
    let text: String = (0..200_000)
        .map(|i| format!("w{} ", i * 7919 % 100_003))
        .collect();
    let message = user(text[..(1 << 20) - 64].to_owned());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut senders = JoinSet::new();
    for n in 0..4 {
        let mut client = replica.client().await?;
        let (message, stop) = (message.clone(), stop.clone());
        senders.spawn(async move {
            let mut codes = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut request = tonic::Request::new(proto::AppendMessageRequest {
                    conversation_id: format!("cpu-large-{n}"),
                    messages: vec![message.clone(); 15],
                    ..Default::default()
                });
                request.set_timeout(Duration::from_millis(300));
                request
                    .metadata_mut()
                    .insert("x-tenant-id", "heavy".parse().expect("header"));
                codes.push(
                    client
                        .append_message(request)
                        .await
                        .err()
                        .map_or(Code::Ok, |s| s.code()),
                );
            }
            codes
        });
    }
    let mut light = replica.client().await?;
    let mut latencies = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let mut request = tonic::Request::new(proto::CountTokensRequest {
            text: "How many tokens is this?".into(),
            ..Default::default()
        });
        request
            .metadata_mut()
            .insert("x-tenant-id", "light".parse().expect("header"));
        let asked = Instant::now();
        light.count_tokens(request).await?;
        latencies.push(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let codes: Vec<Code> = senders.join_all().await.into_iter().flatten().collect();
    // The last appends' counting stops at their deadline (between messages of 1 MiB, slow in a
    // debug build): CPU over the second after the next.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cpu_seconds(replica).unwrap_or(0.0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_stop = cpu_seconds(replica).unwrap_or(f64::MAX) - before;
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    report.figure(
        "heavy tenant's appends",
        format!(
            "{} sent, {} OK, {} past their deadline (the client's CANCELLED or the server's DEADLINE_EXCEEDED)",
            codes.len(),
            codes.iter().filter(|c| **c == Code::Ok).count(),
            codes
                .iter()
                .filter(|c| matches!(c, Code::Cancelled | Code::DeadlineExceeded))
                .count()
        ),
    );
    report.figure(
        "other tenant's CountTokens meanwhile",
        format!(
            "{} calls, p50 {:.1} ms, p99 {:.1} ms",
            latencies.len(),
            p(0.5).as_secs_f64() * 1e3,
            p(0.99).as_secs_f64() * 1e3
        ),
    );
    report.figure(
        "replica CPU 1-2 s after the last deadline",
        format!("{after_stop:.2} cores"),
    );
    report.expect(
        p(0.99) < Duration::from_millis(500),
        "the other tenant's p99 is over 500 ms",
    );
    report.expect(after_stop < 0.2, "the replica kept working after the deadlines");
    report.expect(
        codes.iter().all(|c| {
            matches!(
                c,
                Code::Ok | Code::Cancelled | Code::DeadlineExceeded | Code::ResourceExhausted
            )
        }),
        format!("appends ended otherwise: {codes:?}"),
    );
    Ok(report)
}

/// The process's CPU time (user + system) in seconds, from /proc.
fn cpu_seconds(replica: &Replica) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", replica.pid()?)).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
