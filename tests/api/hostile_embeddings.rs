//! The embeddings endpoint as an adversary (Hardening V, docs/reliability.md): a real local
//! HTTP server that hangs, refuses one message, answers NaN, zero or vectors of another size,
//! or redirects elsewhere. Searches answer lexically within a short bound and a short client
//! deadline, a tenant's concurrent searches all answer, one bad message never stops its
//! neighbours, no bad vector is stored or counted as embedded, and nothing reaches a redirect's
//! target. Both stores.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ctxd::proto;

use crate::{
    contract_tests,
    embeddings::fake_vector,
    helpers::{StoreKind, TestApp, assistant, fresh_database, spawn_on, user},
    hostile_endpoint::{self, Mode},
    observability::{figure, free_listen, scrape},
};

contract_tests!(
    a_hanging_endpoint_never_holds_a_search_past_its_bound,
    one_refused_message_leaves_its_neighbours_embedded,
    nan_zero_and_other_sized_vectors_are_refused_not_stored,
    nothing_reaches_a_redirect_target,
);

/// The hostile endpoint in `mode` with the fake model's vectors.
async fn endpoint(mode: Mode, target: &str) -> (SocketAddr, Arc<AtomicUsize>) {
    hostile_endpoint::start(mode, target, fake_vector).await.unwrap()
}

/// ctxd on `kind` with semantic search on `addr`, its metrics endpoint, and its database.
async fn app_on(kind: StoreKind, addr: SocketAddr) -> (TestApp, String, Option<String>) {
    let listen = free_listen();
    let url = format!("http://{addr}/v1");
    let flags = ["--embeddings-url", &url, "--metrics-listen", &listen];
    let database = match kind {
        StoreKind::InMemory => None,
        StoreKind::Postgres => Some(fresh_database().await),
    };
    (spawn_on(database.clone(), &flags).await, listen, database)
}

fn chat(extra: &str) -> Vec<proto::Message> {
    let mut messages = Vec::new();
    for i in 0..6 {
        messages.push(user(&format!("Question {i} about the garden and the tomatoes.")));
        messages.push(assistant(&format!("Answer {i}: water the basil on Saturday.")));
    }
    if !extra.is_empty() {
        messages[5] = user(extra);
    }
    messages
}

async fn append(app: &TestApp, conversation: &str, messages: Vec<proto::Message>) {
    app.append_ok(conversation, messages).await;
}

fn search(
    conversation: &str,
    query: &str,
    deadline: Option<Duration>,
) -> tonic::Request<proto::SearchMessagesRequest> {
    let mut request = tonic::Request::new(proto::SearchMessagesRequest {
        conversation_id: conversation.into(),
        query: query.into(),
        ..Default::default()
    });
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

fn recall_build(
    conversation: &str,
    deadline: Option<Duration>,
) -> tonic::Request<proto::BuildContextRequest> {
    let mut request = tonic::Request::new(proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: 120,
            ..Default::default()
        }),
        recall: Some(proto::Recall {
            query: "tomatoes in the garden".into(),
            max_tokens: 60,
            ..Default::default()
        }),
        ..Default::default()
    });
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

/// The sum of a counter's series by `reason`.
fn by_reason(body: &str, counter: &str, reasons: &[&str]) -> f64 {
    reasons
        .iter()
        .map(|reason| figure(body, &format!("{counter}{{reason=\"{reason}\"}}")))
        .sum()
}

async fn a_hanging_endpoint_never_holds_a_search_past_its_bound(kind: StoreKind) {
    for mode in [Mode::HangQueries, Mode::HangAll] {
        let (addr, _) = endpoint(mode, "").await;
        let (app, listen, _) = app_on(kind, addr).await;
        append(&app, "c", chat("")).await;
        // Once the backlog is embedded (HangQueries answers batches), the model's mean is known:
        // queries then reach the endpoint, which hangs.
        if mode == Mode::HangQueries {
            until_embedded(&listen, 12.0).await;
        }
        for deadline in [None, Some(Duration::from_secs(2))] {
            let started = Instant::now();
            let hits = app
                .client
                .clone()
                .search_messages(search("c", "tomatoes", deadline))
                .await;
            let hits = hits
                .unwrap_or_else(|e| panic!("{deadline:?}: {e:?}"))
                .into_inner()
                .hits;
            assert!(!hits.is_empty(), "answered lexically");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
            let started = Instant::now();
            let pack = app
                .client
                .clone()
                .build_context(recall_build("c", deadline))
                .await;
            pack.unwrap_or_else(|e| panic!("{deadline:?}: {e:?}"));
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        }
        // Four of one tenant's searches at once: every one answers.
        let searches = (0..4).map(|i| {
            let mut client = app.client.clone();
            async move {
                client
                    .search_messages(search("c", &format!("basil {i}"), None))
                    .await
            }
        });
        for answer in futures_util::future::join_all(searches).await {
            answer.expect("a concurrent search answers");
        }
        let body = scrape(&listen).await;
        let reasons = ["timeout", "model_mean_unknown"];
        let fallbacks = by_reason(&body, "ctxd_search_lexical_fallback_total", &reasons);
        assert!(fallbacks >= 4.0, "{body}");
    }
}

/// Waits until the replica counted `messages` embedded (at most 30 s).
async fn until_embedded(listen: &str, messages: f64) -> String {
    let started = Instant::now();
    loop {
        let body = scrape(listen).await;
        if figure(&body, "ctxd_embedded_messages_total") >= messages {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not embedded in 30 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn one_refused_message_leaves_its_neighbours_embedded(kind: StoreKind) {
    let (addr, _) = endpoint(Mode::Poison, "").await;
    let (app, listen, _) = app_on(kind, addr).await;
    append(&app, "c", chat("POISON pill in the middle of the garden talk.")).await;
    let body = until_embedded(&listen, 11.0).await;
    assert_eq!(figure(&body, "ctxd_embedded_messages_total"), 11.0, "{body}");
    assert_eq!(
        by_reason(&body, "ctxd_embedding_refused_total", &["input"]),
        1.0,
        "{body}"
    );
    // Later messages of the conversation are embedded too.
    append(
        &app,
        "c",
        vec![
            user("Harvest the tomatoes in August."),
            assistant("Picking them next week."),
        ],
    )
    .await;
    until_embedded(&listen, 13.0).await;
}

async fn nan_zero_and_other_sized_vectors_are_refused_not_stored(kind: StoreKind) {
    let (addr, _) = endpoint(Mode::BadVectors, "").await;
    let (app, listen, database) = app_on(kind, addr).await;
    let mut messages = chat("NANTEXT about the garden.");
    messages[7] = assistant("ZEROTEXT answer.");
    messages[9] = assistant("SHORTDIM answer about basil.");
    append(&app, "c", messages).await;
    let body = until_embedded(&listen, 9.0).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let body = match figure(&body, "ctxd_embedded_messages_total") {
        9.0 => scrape(&listen).await,
        _ => body,
    };
    assert_eq!(figure(&body, "ctxd_embedded_messages_total"), 9.0, "{body}");
    assert_eq!(
        by_reason(&body, "ctxd_embedding_refused_total", &["input"]),
        2.0,
        "{body}"
    );
    assert_eq!(
        by_reason(&body, "ctxd_embedding_refused_total", &["dimensions"]),
        1.0,
        "{body}"
    );
    if let Some(url) = database {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let rows = client
            .query(
                "SELECT DISTINCT octet_length(vector) AS size FROM message_vectors",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "one vector size stored");
        let refused = client
            .query(
                "SELECT sequence FROM message_vectors WHERE sequence IN (6, 8, 10)",
                &[],
            )
            .await
            .unwrap();
        assert!(refused.is_empty(), "no vector for a refused message");
    }
}

async fn nothing_reaches_a_redirect_target(kind: StoreKind) {
    let (target, reached) = endpoint(Mode::BadVectors, "").await;
    let (addr, requests) = endpoint(Mode::Redirect, &format!("http://{target}")).await;
    let (app, listen, _) = app_on(kind, addr).await;
    append(&app, "c", chat("")).await;
    let hits = app
        .client
        .clone()
        .search_messages(search("c", "tomatoes", None))
        .await;
    assert!(!hits.unwrap().into_inner().hits.is_empty());
    let started = Instant::now();
    while requests.load(Ordering::SeqCst) < 2 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(requests.load(Ordering::SeqCst) >= 2, "the endpoint was asked");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "nothing reached the redirect's target"
    );
    let body = scrape(&listen).await;
    assert_eq!(figure(&body, "ctxd_embedded_messages_total"), 0.0, "{body}");
}
