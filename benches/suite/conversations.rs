//! ListConversations cost against the size of the tenant: the first page and a page deep in
//! the listing, and a filter (a label, a status) that matches nothing, in a tenant of `small`
//! conversations and in one of `large` (target: p50 ratio large/small <= 1.2, the listing costs
//! O(page) and a filter O(matches)). Tenants are seeded with SQL (the listing
//! reads the conversation rows only); a few conversations are then appended to and updated
//! through the API so the listing also meets rows ctxd wrote.

use std::time::{Duration, Instant};

use ctxd::proto::{self, context_service_client::ContextServiceClient};
use tonic::{Request, transport::Channel};

use crate::replica::{Replica, percentile};

const PAGE: u32 = 50;
/// Pages skipped before the deep page is measured.
const DEPTH: usize = 10;

pub(crate) async fn run(server: &Replica, url: &str, quick: bool) -> anyhow::Result<()> {
    let (small, large, samples) = if quick {
        (1_000, 10_000, 100)
    } else {
        (1_000, 200_000, 500)
    };
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let mut api = server.client().await?;
    println!("# ListConversations on PostgreSQL, page {PAGE}, {samples} samples each");
    let mut p50s = Vec::new();
    for count in [small, large] {
        let tenant = format!("bench-list-{run}-{count}");
        let started = Instant::now();
        client
            .execute(
                "INSERT INTO conversations (tenant_id, conversation_id, last_sequence, updated_at, labels, listing)
                 SELECT $1, 'conv-' || g, 0, now() - g * interval '1 second',
                        jsonb_build_object('shard', (g % 10)::text),
                        jsonb_build_object('t', $1::text, 's', 'active',
                            'l', jsonb_build_object('shard', (g % 10)::text))
                 FROM generate_series(1, $2::int) g",
                &[&tenant, &count],
            )
            .await?;
        client.execute("ANALYZE conversations", &[]).await?;
        for i in 0..20 {
            let mut request = Request::new(proto::AppendMessageRequest {
                conversation_id: format!("conv-{}", i * 7 + 1),
                messages: vec![proto::Message {
                    role: proto::Role::User as i32,
                    content: "hello".into(),
                    ..Default::default()
                }],
                ..Default::default()
            });
            request.metadata_mut().insert("x-tenant-id", tenant.parse()?);
            api.append_message(request).await?;
        }
        let seeded = started.elapsed().as_secs_f64();
        let all = Filter::default();
        let first = measure(&mut api, &tenant, samples, 0, &all).await?;
        let deep = measure(&mut api, &tenant, samples, DEPTH, &all).await?;
        let label = Filter {
            labels: [("shard".to_owned(), "none".to_owned())].into(),
            status: None,
        };
        let unlabelled = measure(&mut api, &tenant, samples, 0, &label).await?;
        let archived = Filter {
            labels: Default::default(),
            status: Some(proto::ConversationStatus::Idle),
        };
        let unarchived = measure(&mut api, &tenant, samples, 0, &archived).await?;
        println!(
            "conversations={count:>7}  first page p50={:>6.3} ms p99={:>6.3} ms  page {} p50={:>6.3} ms  \
             label matching nothing p50={:>6.3} ms  status matching nothing p50={:>6.3} ms  (seeded in {seeded:.1} s)",
            ms(first.0),
            ms(first.1),
            DEPTH + 1,
            ms(deep.0),
            ms(unlabelled.0),
            ms(unarchived.0),
        );
        p50s.push((count, first.0, deep.0, unlabelled.0, unarchived.0));
    }
    let (s, l) = (p50s[0], p50s[1]);
    let large_tenant = format!("bench-list-{run}-{large}");
    under_filtered_lists(server, &large_tenant, quick).await?;
    println!(
        "ratio p50({})/p50({}): first page {:.2}, page {} {:.2}, label filter {:.2}, status filter {:.2}  (target <= 1.2)",
        l.0,
        s.0,
        ms(l.1) / ms(s.1),
        DEPTH + 1,
        ms(l.2) / ms(s.2),
        ms(l.3) / ms(s.3),
        ms(l.4) / ms(s.4),
    );
    Ok(())
}

/// Another tenant's appends while 48 clients list the large tenant with a filter that matches
/// nothing, against the same appends alone: filtered reads must not take the pool from writes.
async fn under_filtered_lists(server: &Replica, tenant: &str, quick: bool) -> anyhow::Result<()> {
    let seconds = if quick { 1 } else { 5 };
    let appends = |label: &'static str| async move {
        let mut api = server.client().await?;
        let mut latencies = Vec::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(seconds) {
            let mut request = Request::new(proto::AppendMessageRequest {
                conversation_id: format!("bench-unrelated-{label}"),
                messages: vec![proto::Message {
                    role: proto::Role::User as i32,
                    content: "hello".into(),
                    ..Default::default()
                }],
                ..Default::default()
            });
            request
                .metadata_mut()
                .insert("x-tenant-id", "bench-unrelated".parse()?);
            let asked = Instant::now();
            api.append_message(request).await?;
            latencies.push(asked.elapsed());
        }
        anyhow::Ok((percentile(&mut latencies, 0.5), percentile(&mut latencies, 0.99)))
    };
    let alone = appends("alone").await?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut listers = tokio::task::JoinSet::new();
    for _ in 0..48 {
        let (mut api, stop, tenant) = (server.client().await?, stop.clone(), tenant.to_owned());
        listers.spawn(async move {
            let filter = Filter {
                labels: [("shard".to_owned(), "none".to_owned())].into(),
                status: None,
            };
            let mut calls = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                measure(&mut api, &tenant, 1, 0, &filter).await?;
                calls += 1;
            }
            anyhow::Ok(calls)
        });
    }
    let loaded = appends("loaded").await?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut lists = 0;
    while let Some(joined) = listers.join_next().await {
        lists += joined??;
    }
    println!(
        "another tenant's AppendMessage alone p50={:.3} ms p99={:.3} ms; under 48 filtered lists \
         ({lists} lists) p50={:.3} ms p99={:.3} ms",
        ms(alone.0),
        ms(alone.1),
        ms(loaded.0),
        ms(loaded.1)
    );
    Ok(())
}

/// A ListConversations filter.
#[derive(Debug, Default)]
struct Filter {
    labels: std::collections::BTreeMap<String, String>,
    status: Option<proto::ConversationStatus>,
}

/// p50 and p99 of listing the page after `depth` pages.
async fn measure(
    api: &mut ContextServiceClient<Channel>,
    tenant: &str,
    samples: usize,
    depth: usize,
    filter: &Filter,
) -> anyhow::Result<(Duration, Duration)> {
    let request = |token: String| -> anyhow::Result<Request<proto::ListConversationsRequest>> {
        let mut request = Request::new(proto::ListConversationsRequest {
            page_size: PAGE,
            page_token: token,
            labels: filter.labels.clone(),
            status: filter.status.map_or(0, |s| s as i32),
        });
        request.metadata_mut().insert("x-tenant-id", tenant.parse()?);
        Ok(request)
    };
    let mut token = String::new();
    for _ in 0..depth {
        token = api
            .list_conversations(request(token)?)
            .await?
            .into_inner()
            .next_page_token;
    }
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let call = request(token.clone())?;
        let started = Instant::now();
        let page = api.list_conversations(call).await?.into_inner();
        latencies.push(started.elapsed());
        let expected = match filter.status.is_some() || !filter.labels.is_empty() {
            true => 0,
            false => PAGE as usize,
        };
        anyhow::ensure!(
            page.conversations.len() == expected,
            "a full page, or none filtered"
        );
    }
    Ok((percentile(&mut latencies, 0.5), percentile(&mut latencies, 0.99)))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
