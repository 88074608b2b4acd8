//! Server RSS: sampled after each phase and through a sustained mixed load, to show it stays
//! flat as history and request counts grow.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;

use crate::{
    Scale,
    build::{history, message},
    replica::Replica,
};

/// RSS samples in the order they were taken.
#[derive(Debug, Default)]
pub(crate) struct RssLog {
    samples: Vec<(String, u64)>,
}

impl RssLog {
    pub(crate) fn sample(&mut self, label: &str, server: &Replica) {
        let kib = server.rss_kib().unwrap_or(0);
        self.samples.push((label.to_string(), kib));
    }

    pub(crate) fn report(&self) {
        println!("# server RSS");
        for (label, kib) in &self.samples {
            println!("{:>8.1} MiB  {label}", *kib as f64 / 1024.0);
        }
    }
}

/// Mixed load for `scale.sustain_secs`: BuildContext on every seeded history, and appends that
/// keep creating conversations. RSS is sampled ten times; after the first sample (warm-up)
/// it should not trend up.
pub(crate) async fn sustained(server: &Replica, scale: Scale, rss: &mut RssLog) -> anyhow::Result<()> {
    let secs = scale.sustain_secs;
    println!("# sustained load for {secs} s: 4 BuildContext loops + 4 append loops");
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for worker in 0..8usize {
        let mut client = server.client().await?;
        let (stop, requests) = (stop.clone(), requests.clone());
        let sizes = scale.history_sizes;
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                if worker < 4 {
                    client
                        .build_context(proto::BuildContextRequest {
                            conversation_id: history(sizes[n % 3]),
                            budget: Some(proto::Budget {
                                max_tokens: 8_000,
                                ..Default::default()
                            }),
                            ..Default::default()
                        })
                        .await?;
                } else {
                    // A new conversation every 100 messages; each batch is one whole tool group.
                    client
                        .append_message(proto::AppendMessageRequest {
                            conversation_id: format!("sustain-{worker}-{}", n / 25),
                            messages: (0..4).map(|i| message(n * 4 + i)).collect(),
                            ..Default::default()
                        })
                        .await?;
                }
                n += 1;
                requests.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let started = Instant::now();
    for i in 1..=10 {
        tokio::time::sleep(Duration::from_millis(secs * 100)).await;
        rss.sample(
            &format!(
                "sustained {i}/10 at {:.0} s, {} requests",
                started.elapsed().as_secs_f64(),
                requests.load(Ordering::Relaxed)
            ),
            server,
        );
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await??;
    }
    Ok(())
}
