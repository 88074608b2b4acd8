//! SearchMessages at two history sizes (cost follows the matches, not the conversation), and
//! BuildContext with recall against without (docs/benchmarks.md, "Recall").

use std::time::{Duration, Instant};

use ctxd::proto::{self, context_service_client::ContextServiceClient};
use tonic::transport::Channel;

use crate::{
    build::{history, seed},
    replica::{Replica, percentile},
};

/// Facts planted before the filler, which never shares their terms.
const FACTS: [&str; 5] = [
    "The invoice number for the March order is INV-4471.",
    "The flight to Lisbon is TP1352, departing gate B12.",
    "Priya owns the billing microservice and its on-call rota.",
    "Use port 5433 for the analytics replica, not 5432.",
    "The backup bucket is s3://acme-nightly-backups in eu-central-1.",
];
/// A question sharing a fact's key terms: a handful of matches at any size.
const RARE: &str = "which invoice number did the march order have?";
/// Words of the filler: every message matches, so every term is common.
const COMMON: &str = "deployment status of the service";

pub(crate) async fn run(server: &Replica, quick: bool) -> anyhow::Result<()> {
    let client = server.client().await?;
    let (sizes, samples) = if quick {
        ([100, 2_000], 50)
    } else {
        ([1_000, 100_000], 300)
    };
    println!("# SearchMessages on PostgreSQL, page_size 10, {samples} samples each");
    let mut rare = Vec::new();
    for size in sizes {
        let conversation = format!("{}-search", history(size));
        let facts = FACTS
            .iter()
            .map(|f| proto::Message {
                role: proto::Role::User as i32,
                content: (*f).into(),
                ..Default::default()
            })
            .collect();
        client
            .clone()
            .append_message(proto::AppendMessageRequest {
                conversation_id: conversation.clone(),
                messages: facts,
                ..Default::default()
            })
            .await?;
        seed(&client, &conversation, size).await?;
        let (r, hits) = measure_search(&client, &conversation, RARE, samples).await?;
        let (c, common_hits) = measure_search(&client, &conversation, COMMON, samples / 5).await?;
        println!(
            "messages={size:>6}  rare query ({hits} hits on the page): p50={:.3} ms  p99={:.3} ms;  \
             common query (every term in most of the log, {common_hits} on the page): p50={:.3} ms",
            ms(r.0),
            ms(r.1),
            ms(c.0)
        );
        rare.push((size, r.0, conversation));
    }
    let (small, large) = (&rare[0], &rare[1]);
    println!(
        "ratio p50({})/p50({}) for the rare query = {:.2}  (O(matches): target near 1)",
        large.0,
        small.0,
        large.1.as_secs_f64() / small.1.as_secs_f64()
    );
    let (without, _) = measure_recall(&client, &large.2, false, samples).await?;
    let (with, recalled) = measure_recall(&client, &large.2, true, samples).await?;
    println!(
        "BuildContext on {} messages, budget 8000: p50 without recall {:.3} ms, with recall {:.3} ms \
         ({recalled} messages recalled); with/without = {:.2}",
        large.0,
        ms(without),
        ms(with),
        with.as_secs_f64() / without.as_secs_f64()
    );
    Ok(())
}

async fn measure_search(
    client: &ContextServiceClient<Channel>,
    conversation: &str,
    query: &str,
    samples: usize,
) -> anyhow::Result<((Duration, Duration), usize)> {
    let mut client = client.clone();
    let request = proto::SearchMessagesRequest {
        conversation_id: conversation.into(),
        query: query.into(),
        ..Default::default()
    };
    let mut hits = 0;
    for _ in 0..10 {
        client.search_messages(request.clone()).await?;
    }
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        hits = client
            .search_messages(request.clone())
            .await?
            .into_inner()
            .hits
            .len();
        latencies.push(start.elapsed());
    }
    Ok((
        (percentile(&mut latencies, 0.5), percentile(&mut latencies, 0.99)),
        hits,
    ))
}

async fn measure_recall(
    client: &ContextServiceClient<Channel>,
    conversation: &str,
    recall: bool,
    samples: usize,
) -> anyhow::Result<(Duration, u32)> {
    let mut client = client.clone();
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: 8_000,
            reserve_output_tokens: 1_000,
            ..Default::default()
        }),
        pending_messages: vec![proto::Message {
            role: proto::Role::User as i32,
            content: RARE.into(),
            ..Default::default()
        }],
        recall: recall.then(proto::Recall::default),
        ..Default::default()
    };
    let mut recalled = 0;
    for _ in 0..20 {
        client.build_context(request.clone()).await?;
    }
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        let response = client.build_context(request.clone()).await?.into_inner();
        latencies.push(start.elapsed());
        recalled = response.stats.map_or(0, |s| s.messages_recalled);
    }
    Ok((percentile(&mut latencies, 0.5), recalled))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
