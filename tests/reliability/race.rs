//! Summarize racing appenders across replicas: the watermark only moves forward, and summary +
//! verbatim history always cover every message.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use ctxd::proto;

use crate::{Report, appenders::user, replica::Replica};

const APPENDERS: usize = 4;
const SUMMARIZERS: usize = 2;

pub(crate) async fn summarize_racing_appenders(replicas: &[Replica], total: usize) -> anyhow::Result<Report> {
    let mut report = Report::new("Summarize racing appenders, 3 replicas");
    let conversation = "reliability-race";
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let mut appenders = Vec::new();
    for a in 0..APPENDERS {
        let mut client = replicas[a % replicas.len()].client().await?;
        let next = next.clone();
        appenders.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return anyhow::Ok(());
                }
                let content =
                    format!("Requirement {n}: the export must finish within {n} seconds for the team.");
                client
                    .append_message(proto::AppendMessageRequest {
                        conversation_id: conversation.into(),
                        messages: vec![user(content)],
                        ..Default::default()
                    })
                    .await?;
            }
        }));
    }
    let mut summarizers = Vec::new();
    for s in 0..SUMMARIZERS {
        let mut client = replicas[(s + 1) % replicas.len()].client().await?;
        let done = done.clone();
        summarizers.push(tokio::spawn(async move {
            // (version, through_sequence) of every answer, and answers by code.
            let (mut seen, mut aborted, mut errors) = (Vec::new(), 0, Vec::new());
            while !done.load(Ordering::Relaxed) {
                let answer = client
                    .summarize(proto::SummarizeRequest {
                        conversation_id: conversation.into(),
                        keep_recent_tokens: 200,
                        ..Default::default()
                    })
                    .await;
                match answer {
                    Ok(r) => {
                        if let Some(s) = r.into_inner().summary {
                            seen.push((s.version, s.through_sequence));
                        }
                    }
                    Err(e) if e.code() == tonic::Code::Aborted => aborted += 1,
                    Err(e) if e.code() == tonic::Code::NotFound => {} // nothing appended yet
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (seen, aborted, errors)
        }));
    }
    let observer = {
        let mut client = replicas[0].client().await?;
        let done = done.clone();
        tokio::spawn(async move {
            // (summary watermark, coverage holes) of every pack.
            let mut packs = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let Ok(pack) = client
                    .build_context(proto::BuildContextRequest {
                        conversation_id: conversation.into(),
                        budget: Some(proto::Budget {
                            max_tokens: 1_000_000,
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .await
                else {
                    continue;
                };
                packs.push(coverage(&pack.into_inner()));
            }
            packs
        })
    };

    for task in appenders {
        task.await??;
    }
    done.store(true, Ordering::Relaxed);
    let (mut versions, mut aborted, mut errors, mut backwards) = (Vec::new(), 0, Vec::new(), 0);
    for task in summarizers {
        let (seen, a, e) = task.await?;
        backwards += seen.windows(2).filter(|w| w[1].1 < w[0].1).count();
        versions.extend(seen);
        aborted += a;
        errors.extend(e);
    }
    // Across summarizers: a later version never covers less.
    versions.sort_unstable();
    versions.dedup();
    let version_regressions = versions.windows(2).filter(|w| w[1].1 < w[0].1).count();
    let packs = observer.await?;
    let observed_backwards = packs.windows(2).filter(|w| w[1].0 < w[0].0).count();
    let uncovered: usize = packs.iter().map(|p| p.1).sum();
    let final_watermark = versions.last().map_or(0, |v| v.1);

    report.figure("appends", total);
    report.figure("summary versions seen", versions.len());
    report.figure("final watermark", final_watermark);
    report.figure("Summarize answers ABORTED (lost a race)", aborted);
    report.figure("Summarize errors", errors.len());
    report.figure(
        "watermark moved backwards (per caller)",
        backwards + observed_backwards,
    );
    report.figure("version with lower watermark than older", version_regressions);
    report.figure("packs checked for coverage", packs.len());
    report.figure("messages neither summarized nor in pack", uncovered);
    report.expect(
        errors.is_empty(),
        format!("Summarize errors: {:?}", errors.first()),
    );
    report.expect(backwards + observed_backwards == 0, "watermark moved backwards");
    report.expect(version_regressions == 0, "a newer summary version covers less");
    report.expect(uncovered == 0, "a pack left messages uncovered");
    report.expect(
        final_watermark > 0 && !packs.is_empty(),
        "the race did not exercise summaries",
    );
    Ok(report)
}

/// The pack's summary watermark, and how many log messages it covers neither by the summary
/// nor verbatim (the budget is large enough for all of them).
fn coverage(pack: &proto::BuildContextResponse) -> (u64, usize) {
    let stats = pack.stats.unwrap_or_default();
    let watermark = stats.summary_through_sequence;
    let verbatim: std::collections::HashSet<u64> = pack
        .messages
        .iter()
        .map(|m| m.sequence)
        .filter(|&s| s > 0)
        .collect();
    let holes = (watermark + 1..=stats.log_last_sequence)
        .filter(|s| !verbatim.contains(s))
        .count();
    (watermark, holes)
}
