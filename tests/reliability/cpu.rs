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
