//! A replica SIGKILLed mid-batch, many times: every batch is stored whole or not at all. Half
//! the writers send 50 messages a call (several INSERT statements, the single path), half send
//! 12 (one statement each, so they share transactions with group commit, issue 62).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use ctxd::proto;

use crate::{
    Report,
    appenders::{all_messages, gaps_and_duplicates},
    replica::Replica,
};

/// Enough that appends join batches (a replica batches past half its pool in flight: 8).
const WRITERS: usize = 24;

/// The messages writer `writer` sends per call.
fn batch_size(writer: usize) -> usize {
    if writer.is_multiple_of(2) { 50 } else { 12 }
}

/// The size of the batch `id` (`round-writer-n`).
fn size_of(id: &str) -> usize {
    batch_size(id.split('-').nth(1).and_then(|w| w.parse().ok()).unwrap_or(0))
}

pub(crate) async fn sigkill_mid_batch(replicas: &mut [Replica], kills: usize) -> anyhow::Result<Report> {
    let mut report = Report::new("replica SIGKILLed mid-batch");
    let mut random = Lcg::seeded();
    let (mut acked, mut in_flight) = (HashSet::new(), HashSet::new());
    for round in 0..kills {
        let victim = &mut replicas[0];
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let client = victim.client().await?;
            writers.push(tokio::spawn(write_batches(client, round, w)));
        }
        // Anywhere from before the first batch lands to several batches in (debug or release).
        tokio::time::sleep(Duration::from_millis(20 + random.below(800))).await;
        victim.kill().await?;
        for writer in writers {
            let (ok, interrupted) = writer.await?;
            acked.extend(ok);
            in_flight.extend(interrupted);
        }
        victim.restart().await?;
    }

    // Read back through another replica: count each batch's stored messages.
    let mut client = replicas[1].client().await?;
    let (mut sizes, mut gaps, mut duplicates) = (HashMap::<String, usize>::new(), 0, 0);
    for w in 0..WRITERS {
        let messages = all_messages(&mut client, &format!("kill-{w}")).await?;
        let (g, d) = gaps_and_duplicates(&messages);
        (gaps, duplicates) = (gaps + g, duplicates + d);
        for m in messages {
            *sizes
                .entry(m.metadata.get("batch").cloned().unwrap_or_default())
                .or_default() += 1;
        }
    }
    let partial: BTreeMap<_, _> = sizes.iter().filter(|(id, n)| **n != size_of(id)).collect();
    let acked_missing = acked
        .iter()
        .filter(|b| sizes.get(*b) != Some(&size_of(b)))
        .count();
    let interrupted_stored = in_flight.iter().filter(|b| sizes.contains_key(*b)).count();

    report.figure("SIGKILLs (each followed by a restart)", kills);
    report.figure("batches acknowledged (50 or 12 messages each)", acked.len());
    report.figure("batches in flight when killed", in_flight.len());
    report.figure("  of which committed whole before the kill", interrupted_stored);
    report.figure("  of which absent", in_flight.len() - interrupted_stored);
    report.figure("partial batches", partial.len());
    report.figure("acknowledged batches missing", acked_missing);
    report.figure("sequence gaps / duplicates", format!("{gaps} / {duplicates}"));
    report.expect(partial.is_empty(), format!("partial batches: {partial:?}"));
    report.expect(acked_missing == 0, "acknowledged batches missing");
    report.expect(gaps == 0 && duplicates == 0, "sequence gaps or duplicates");
    report.expect(
        !in_flight.is_empty(),
        "no kill landed while a batch was in flight",
    );
    report.expect(
        !acked.is_empty(),
        "no batch was ever acknowledged: kills came too early to test anything",
    );
    Ok(report)
}

/// Sends batches until the replica dies; returns the acknowledged batch ids and the one that
/// was in flight when the connection broke.
async fn write_batches(
    mut client: proto::context_service_client::ContextServiceClient<tonic::transport::Channel>,
    round: usize,
    writer: usize,
) -> (Vec<String>, Option<String>) {
    let mut acked = Vec::new();
    for b in 0usize.. {
        let id = format!("{round}-{writer}-{b}");
        let messages = (0..batch_size(writer))
            .map(|i| proto::Message {
                role: proto::Role::User as i32,
                content: format!("batch {id} message {i}: ").repeat(8),
                metadata: [("batch".to_string(), id.clone())].into(),
                ..Default::default()
            })
            .collect();
        let request = proto::AppendMessageRequest {
            conversation_id: format!("kill-{writer}"),
            messages,
            ..Default::default()
        };
        match client.append_message(request).await {
            Ok(_) => acked.push(id),
            Err(_) => return (acked, Some(id)),
        }
    }
    (acked, None)
}

/// A tiny deterministic-per-run random source for kill timing (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn seeded() -> Self {
        Lcg(SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}
