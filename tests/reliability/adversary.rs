//! The outside services as adversaries (Hardening V): each break the attack on round 4 found,
//! measured again on a fresh replica against a hostile embeddings endpoint served here, and
//! printed beside the attack's own figure. Run it against another binary with
//! `CTXD_RELIABILITY_BINARY=path/to/ctxd` (the "before" figures of docs/reliability.md).

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;
use tokio::task::JoinSet;
use tonic::Code;

use crate::{
    Report,
    appenders::{as_tenant, user},
    hostile_endpoint::Mode,
    memory,
    replica::{Cluster, Replica, percentile},
};

/// A deterministic 64-dimension vector of `text`: each word adds to a hashed dimension.
fn vector_of(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; 64];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
        let h = word
            .to_lowercase()
            .bytes()
            .fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
        v[h % 63] += 1.0;
    }
    v[63] += 0.01;
    v
}

/// The hostile endpoint in `mode` with [`vector_of`] as its model.
async fn endpoint(mode: Mode, target: &str) -> anyhow::Result<(SocketAddr, Arc<AtomicUsize>)> {
    Ok(crate::hostile_endpoint::start(mode, target, vector_of).await?)
}

/// A fresh replica on `cluster` with semantic search on `addr`.
async fn replica(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
    addr: SocketAddr,
    name: &str,
) -> anyhow::Result<Replica> {
    let url = format!("http://{addr}/v1");
    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_EMBEDDINGS_URL", url.as_str()),
        ("CTXD_REQUEST_TIMEOUT_SECS", "30"),
        ("RUST_LOG", "info"),
    ];
    Replica::start(binary, &env, work, name).await
}

async fn database(cluster: &Cluster) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(&cluster.url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn garden(conversation_tag: &str, n: usize) -> Vec<proto::Message> {
    (0..n)
        .map(|i| {
            user(format!(
                "{conversation_tag} note {i}: water the tomatoes and the basil on Saturday."
            ))
        })
        .collect()
}

async fn append(
    client: &mut proto::context_service_client::ContextServiceClient<tonic::transport::Channel>,
    tenant: &str,
    conversation: &str,
    messages: Vec<proto::Message>,
) -> anyhow::Result<()> {
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        messages,
        ..Default::default()
    };
    client.append_message(as_tenant(tenant, request)).await?;
    Ok(())
}

/// Messages of `conversation` with at least one vector stored.
async fn embedded(db: &tokio_postgres::Client, conversation: &str) -> anyhow::Result<i64> {
    let row = db
        .query_one(
            "SELECT count(DISTINCT sequence) AS n FROM message_vectors WHERE conversation_id = $1",
            &[&conversation],
        )
        .await?;
    Ok(row.get("n"))
}

pub(crate) async fn outside_services(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
) -> anyhow::Result<Report> {
    let mut report = Report::new("the embeddings endpoint as an adversary (Hardening V)");
    let db = database(cluster).await?;
    hanging_endpoint(binary, cluster, work, &mut report).await?;
    poison_message(binary, cluster, work, &db, &mut report).await?;
    bad_vectors(binary, cluster, work, &db, &mut report).await?;
    huge_answers(binary, cluster, work, &mut report).await?;
    redirects(binary, cluster, work, &mut report).await?;
    recall_storm(binary, cluster, work, &mut report).await?;
    Ok(report)
}

fn search(query: &str, deadline: Option<Duration>) -> tonic::Request<proto::SearchMessagesRequest> {
    let mut request = as_tenant(
        "searcher",
        proto::SearchMessagesRequest {
            conversation_id: "hang".into(),
            query: query.into(),
            ..Default::default()
        },
    );
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

fn recall_build(
    tenant: &str,
    conversation: &str,
    deadline: Option<Duration>,
) -> tonic::Request<proto::BuildContextRequest> {
    let mut request = as_tenant(
        tenant,
        proto::BuildContextRequest {
            conversation_id: conversation.into(),
            budget: Some(proto::Budget {
                max_tokens: 2_000,
                ..Default::default()
            }),
            recall: Some(proto::Recall {
                query: "tomatoes basil Saturday".into(),
                max_tokens: 800,
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

/// An endpoint that answers the model's mean and the backlog, then hangs on every query.
async fn hanging_endpoint(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (addr, _) = endpoint(Mode::HangQueries, "").await?;
    let replica = replica(binary, cluster, work, addr, "replica-hang").await?;
    let mut client = replica.client().await?;
    append(&mut client, "searcher", "hang", garden("hang", 40)).await?;
    // The backlog (and the mean) first, so that queries are sent and hang.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    let mut calls = 0;
    for deadline in [
        None,
        Some(Duration::from_secs(1)),
        Some(Duration::from_secs(2)),
        Some(Duration::from_secs(3)),
        Some(Duration::from_secs(5)),
    ] {
        for query in ["tomatoes", "basil saturday"] {
            calls += 2;
            let started = Instant::now();
            let searched = client.search_messages(search(query, deadline)).await;
            let built = client
                .build_context(recall_build("searcher", "hang", deadline))
                .await;
            slowest = slowest.max(started.elapsed());
            answered += usize::from(searched.is_ok()) + usize::from(built.is_ok());
        }
    }
    report.figure(
        "hanging endpoint: searches and recall builds answered",
        format!("then DEADLINE_EXCEEDED at 30 s, none within 1-5 s deadlines; now {answered} of {calls}, slowest pair {:.2} s", slowest.as_secs_f64()),
    );
    report.expect(answered == calls, format!("{answered} of {calls} answered"));
    report.expect(
        slowest < Duration::from_secs(3),
        format!("slowest search and build {slowest:?}"),
    );
    let mut four = JoinSet::new();
    for i in 0..4 {
        let mut client = replica.client().await?;
        four.spawn(async move {
            client
                .search_messages(search(&format!("basil {i}"), None))
                .await
                .is_ok()
        });
    }
    let ok = four.join_all().await.into_iter().filter(|ok| *ok).count();
    report.figure(
        "hanging endpoint: 4 concurrent searches of one tenant",
        format!("then 1 of 4 answered; now {ok} of 4"),
    );
    report.expect(ok == 4, format!("{ok} of 4 concurrent searches answered"));
    Ok(())
}

async fn poison_message(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
    db: &tokio_postgres::Client,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (addr, _) = endpoint(Mode::Poison, "").await?;
    let replica = replica(binary, cluster, work, addr, "replica-poison").await?;
    let mut client = replica.client().await?;
    let mut messages = garden("poison", 12);
    messages[5] = user("POISON: the endpoint refuses this one.".into());
    append(&mut client, "poisoner", "poison", messages).await?;
    let started = Instant::now();
    let mut neighbours = 0;
    while started.elapsed() < Duration::from_secs(30) {
        neighbours = embedded(db, "poison").await?;
        if neighbours >= 11 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    report.figure(
        "one refused message: its 11 neighbours embedded",
        format!(
            "then 0 of 11 after 25 s; now {neighbours} of 11 after {:.1} s",
            started.elapsed().as_secs_f64()
        ),
    );
    report.expect(
        neighbours == 11,
        format!("{neighbours} of 11 neighbours embedded in 30 s"),
    );
    Ok(())
}

async fn bad_vectors(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
    db: &tokio_postgres::Client,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (addr, _) = endpoint(Mode::BadVectors, "").await?;
    let replica = replica(binary, cluster, work, addr, "replica-vectors").await?;
    let mut client = replica.client().await?;
    let mut messages = garden("vectors", 12);
    messages[3] = user("NANTEXT about the garden.".into());
    messages[7] = user("SHORTDIM about the basil.".into());
    append(&mut client, "vectors", "vectors", messages).await?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) && embedded(db, "vectors").await? < 10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sizes: Vec<i32> = db
        .query("SELECT DISTINCT octet_length(vector) AS size FROM message_vectors WHERE conversation_id = 'vectors'", &[])
        .await?
        .iter()
        .map(|r| r.get("size"))
        .collect();
    let watermark: i64 = db
        .query_one(
            "SELECT embedded_through FROM conversations WHERE conversation_id = 'vectors'",
            &[],
        )
        .await?
        .get("embedded_through");
    let with_vectors = embedded(db, "vectors").await?;
    let refused_logged = replica
        .log_text()
        .matches("the embeddings endpoint refused a message")
        .count();
    report.figure(
        "NaN and other-sized vectors",
        format!(
            "then NaN messages marked embedded without a vector and never retried, sizes 81, 32 and 384 stored; \
             now {with_vectors} of 12 with vectors (watermark {watermark}), {refused_logged} refused and logged, sizes stored {sizes:?}"
        ),
    );
    report.expect(sizes.len() == 1, format!("vector sizes stored: {sizes:?}"));
    report.expect(
        with_vectors == 10,
        format!("{with_vectors} of 10 good messages embedded"),
    );
    report.expect(refused_logged >= 2, format!("{refused_logged} refusals logged"));
    Ok(())
}

/// A 16 MiB answer to every embeddings request, with the embedding workers and 8 recall
/// builds running, against another tenant's appends.
async fn huge_answers(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (addr, requests) = endpoint(Mode::Huge, "").await?;
    let replica = replica(binary, cluster, work, addr, "replica-huge").await?;
    let mut client = replica.client().await?;
    for i in 0..8 {
        append(&mut client, "builder", &format!("huge-{i}"), garden("huge", 30)).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut load = JoinSet::new();
    for i in 0..8 {
        let mut client = replica.client().await?;
        load.spawn(async move {
            while Instant::now() < deadline {
                let _ = client
                    .build_context(recall_build("builder", &format!("huge-{i}"), None))
                    .await;
                let _ = append(&mut client, "builder", &format!("huge-{i}"), garden("more", 1)).await;
            }
        });
    }
    let mut samples = Vec::new();
    let mut n = 0;
    while Instant::now() < deadline {
        let started = Instant::now();
        append(
            &mut client,
            "victim",
            "victim",
            vec![user(format!("victim message {n}"))],
        )
        .await?;
        samples.push(started.elapsed());
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    load.join_all().await;
    let peak = memory::peak_rss_mib(&replica).unwrap_or(u64::MAX);
    let p99 = percentile(&mut samples, 0.99);
    report.figure(
        "16 MiB answers: peak RSS, another tenant's append p99",
        format!(
            "then 1,198-1,344 MiB and p99 3.3-5.6 s; now {peak} MiB and p99 {:.1} ms ({} appends, {} answers served)",
            p99.as_secs_f64() * 1e3,
            samples.len(),
            requests.load(Ordering::SeqCst)
        ),
    );
    report.expect(peak < 400, format!("peak RSS {peak} MiB"));
    report.expect(p99 < Duration::from_millis(500), format!("append p99 {p99:?}"));
    Ok(())
}

async fn redirects(binary: &Path, cluster: &Cluster, work: &Path, report: &mut Report) -> anyhow::Result<()> {
    let (target, reached) = endpoint(Mode::BadVectors, "").await?;
    let (addr, asked) = endpoint(Mode::Redirect, &format!("http://{target}")).await?;
    let replica = replica(binary, cluster, work, addr, "replica-redirect").await?;
    let mut client = replica.client().await?;
    append(&mut client, "redirected", "redirect", garden("redirect", 20)).await?;
    for _ in 0..5 {
        let request = as_tenant(
            "redirected",
            proto::SearchMessagesRequest {
                conversation_id: "redirect".into(),
                query: "tomatoes".into(),
                ..Default::default()
            },
        );
        client.search_messages(request).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reached = reached.load(Ordering::SeqCst);
    report.figure(
        "redirects to another host",
        format!("then 1,129 message texts reached the target; now {} requests to the endpoint, {reached} reached the target", asked.load(Ordering::SeqCst)),
    );
    report.expect(
        reached == 0,
        format!("{reached} requests reached the redirect target"),
    );
    Ok(())
}

/// One tenant's 16 clients building with recall on a long conversation, against another
/// tenant's searches (lexical: no endpoint).
async fn recall_storm(
    binary: &Path,
    cluster: &Cluster,
    work: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let env = [("DATABASE_URL", cluster.url.as_str()), ("RUST_LOG", "info")];
    let replica = Replica::start(binary, &env, work, "replica-recall-storm").await?;
    let mut client = replica.client().await?;
    let words = [
        "release",
        "invoice",
        "migration",
        "deadline",
        "budget",
        "review",
        "deploy",
        "schema",
    ];
    for batch in 0..40 {
        let messages = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                user(format!(
                    "{} {} note {n} about the plan",
                    words[n % 8],
                    words[(n / 8) % 8]
                ))
            })
            .collect();
        append(&mut client, "storm", "storm", messages).await?;
    }
    for _ in 0..20 {
        append(&mut client, "quiet", "quiet", garden("quiet", 100)).await?;
    }
    let quiet_search = || {
        as_tenant(
            "quiet",
            proto::SearchMessagesRequest {
                conversation_id: "quiet".into(),
                query: "tomatoes basil".into(),
                ..Default::default()
            },
        )
    };
    // 400 quiet samples: the p99 of 100 is their second slowest, one scheduling hiccup of a
    // two-core machine away from another figure.
    let mut idle = Vec::new();
    for _ in 0..400 {
        let started = Instant::now();
        client.search_messages(quiet_search()).await?;
        idle.push(started.elapsed());
    }
    let query: String = (0..32).map(|i| format!("{} w{i} ", words[i % 8])).collect();
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut storm = JoinSet::new();
    for _ in 0..16 {
        let mut client = replica.client().await?;
        let query = query.clone();
        storm.spawn(async move {
            let (mut ok, mut busy) = (0, 0);
            while Instant::now() < deadline {
                let mut request = recall_build("storm", "storm", None);
                if let Some(recall) = request.get_mut().recall.as_mut() {
                    recall.query = query.clone();
                }
                match client.build_context(request).await {
                    Ok(_) => ok += 1,
                    Err(s) if s.code() == Code::ResourceExhausted => {
                        busy += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(_) => {}
                }
            }
            (ok, busy)
        });
    }
    let mut samples = Vec::new();
    while Instant::now() < deadline {
        let started = Instant::now();
        client.search_messages(quiet_search()).await?;
        samples.push(started.elapsed());
    }
    let (ok, busy) = storm
        .join_all()
        .await
        .iter()
        .fold((0, 0), |(a, b), (o, r)| (a + o, b + r));
    let (idle_p99, p99) = (percentile(&mut idle, 0.99), percentile(&mut samples, 0.99));
    let ratio = p99.as_secs_f64() / idle_p99.as_secs_f64().max(1e-6);
    report.figure(
        "another tenant's search p99 under a 16-client recall storm",
        format!(
            "then 30 -> 418 ms; now {:.1} -> {:.1} ms ({ratio:.1}x; the storm: {ok} builds, {busy} RESOURCE_EXHAUSTED)",
            idle_p99.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        ),
    );
    report.expect(ratio <= 3.0, format!("search p99 {ratio:.1}x its quiet figure"));
    Ok(())
}
