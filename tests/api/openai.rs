//! The `openai` summarizer and extractor against a real local HTTP server speaking the
//! chat-completions wire format: request shape, structured output schema, timeout, 500.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use ctxd::proto;
use serde_json::{Value, json};
use tonic::Code;

use crate::helpers::{StoreKind, TestApp, spawn_app_with, user};

/// How the fake endpoint answers.
#[derive(Clone, Copy)]
enum Behaviour {
    Answer,
    Slow,
    Fail,
}

/// Every request the endpoint received: (authorization header, JSON body).
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

#[derive(Clone)]
struct Endpoint {
    behaviour: Behaviour,
    requests: Seen,
    calls: Arc<AtomicUsize>,
}

async fn completions(
    State(endpoint): State<Endpoint>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> Result<Json<Value>, StatusCode> {
    endpoint.calls.fetch_add(1, Ordering::SeqCst);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    endpoint.requests.lock().unwrap().push((auth, body.clone()));
    match endpoint.behaviour {
        Behaviour::Fail => return Err(StatusCode::INTERNAL_SERVER_ERROR),
        Behaviour::Slow => tokio::time::sleep(Duration::from_secs(5)).await,
        Behaviour::Answer => {}
    }
    let content = if body.get("response_format").is_some() {
        json!({
            "summary": "Billing launch planning.",
            "goals": [{"text": "Launch billing by March", "source_sequences": [1]}],
            "requirements": [], "constraints": [], "assumptions": [], "open_questions": [], "stakeholders": [],
            "decisions": [{"text": "Use PostgreSQL 15", "source_sequences": [2]}],
            "glossary": [{"term": "SLA", "definition": "service level agreement", "source_sequences": [2]}]
        })
        .to_string()
    } else {
        "Goals: launch billing by March. Decisions: PostgreSQL 15 [#2].".to_string()
    };
    Ok(Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]
    })))
}

async fn endpoint(behaviour: Behaviour) -> (SocketAddr, Endpoint) {
    let state = Endpoint {
        behaviour,
        requests: Arc::default(),
        calls: Arc::default(),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, state)
}

async fn ctxd_using(addr: SocketAddr) -> TestApp {
    let base = format!("http://{addr}/v1");
    let flags = [
        "--summarizer",
        "openai",
        "--extractor",
        "openai",
        "--openai-base-url",
        base.as_str(),
        "--openai-model",
        "test-model",
        "--openai-api-key",
        "sk-test",
        "--openai-timeout-secs",
        "1",
        "--openai-max-retries",
        "2",
    ];
    let app = spawn_app_with(StoreKind::Memory, &flags).await;
    app.append_ok(
        "o",
        vec![
            user("Our goal is to launch billing by March."),
            user("We decided to use PostgreSQL 15. SLA means service level agreement."),
            user("Next: write the migration."),
        ],
    )
    .await;
    app
}

fn summarize_all() -> proto::SummarizeRequest {
    proto::SummarizeRequest {
        conversation_id: "o".into(),
        keep_recent_tokens: 1,
        ..Default::default()
    }
}

#[tokio::test]
async fn the_openai_summarizer_sends_a_sectioned_chat_request_and_stores_the_answer() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_using(addr).await;
    let summary = app
        .client
        .clone()
        .summarize(summarize_all())
        .await
        .unwrap()
        .into_inner()
        .summary
        .unwrap();
    assert_eq!(summary.summarizer, "openai");
    assert!(summary.text.starts_with("Goals: launch billing"));
    assert_eq!(summary.through_sequence, 2);
    let requests = endpoint.requests.lock().unwrap();
    let (auth, body) = &requests[0];
    assert_eq!(auth.as_deref(), Some("Bearer sk-test"));
    assert_eq!(body["model"], "test-model");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        (messages[0]["role"].as_str(), messages[1]["role"].as_str()),
        (Some("system"), Some("user"))
    );
    for section in [
        "Goals",
        "Decisions",
        "Constraints",
        "Progress",
        "Open questions",
        "Next steps",
    ] {
        assert!(
            messages[0]["content"].as_str().unwrap().contains(section),
            "prompt lacks {section}"
        );
    }
    let transcript = messages[1]["content"].as_str().unwrap();
    assert!(transcript.contains("[#1 user] Our goal") && transcript.contains("[#2 user]"));
    assert!(
        !transcript.contains("[#3 user]"),
        "the kept window is not summarized"
    );
}

#[tokio::test]
async fn the_openai_extractor_asks_for_json_schema_output_and_merges_it() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_using(addr).await;
    let request = proto::GetWorkingMemoryRequest {
        conversation_id: "o".into(),
        refresh: true,
        prepare: false,
    };
    let memory = app
        .client
        .clone()
        .get_working_memory(request)
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(memory.goals[0].text, "Launch billing by March");
    assert_eq!(memory.decisions[0].source_sequences, [2]);
    assert_eq!(memory.glossary[0].term, "SLA");
    assert_eq!(memory.through_sequence, 3);
    let requests = endpoint.requests.lock().unwrap();
    let format = &requests[0].1["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    let schema = &format["json_schema"]["schema"];
    assert_eq!(schema["additionalProperties"], false);
    for field in [
        "goals",
        "requirements",
        "constraints",
        "decisions",
        "assumptions",
        "open_questions",
        "stakeholders",
        "glossary",
    ] {
        assert!(schema["properties"][field].is_object(), "schema lacks {field}");
    }
    assert_eq!(
        schema["properties"]["goals"]["items"]["required"],
        json!(["text", "source_sequences"])
    );
}

#[tokio::test]
async fn a_timeout_is_unavailable_and_the_old_summary_stands() {
    let (addr, endpoint) = endpoint(Behaviour::Slow).await;
    let app = ctxd_using(addr).await;
    let status = app.client.clone().summarize(summarize_all()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        3,
        "one attempt and two retries"
    );
    let prepare = proto::SummarizeRequest {
        mode: proto::SummarizeMode::Prepare as i32,
        ..summarize_all()
    };
    let current = app.client.clone().summarize(prepare).await.unwrap().into_inner();
    assert!(current.summary.is_none(), "nothing was stored");
    assert_eq!(current.prepared.unwrap().base_through_sequence, 0);
}

#[tokio::test]
async fn a_server_error_is_retried_then_unavailable() {
    let (addr, endpoint) = endpoint(Behaviour::Fail).await;
    let app = ctxd_using(addr).await;
    let status = app.client.clone().summarize(summarize_all()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), 3);
    let request = proto::GetWorkingMemoryRequest {
        conversation_id: "o".into(),
        refresh: true,
        prepare: false,
    };
    let status = app.client.clone().get_working_memory(request).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_summaries_run_single_flight_across_replicas() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let base = format!("http://{addr}/v1");
    let flags = [
        "--summarizer",
        "openai",
        "--openai-base-url",
        base.as_str(),
        "--auto-summarize-tokens",
        "100",
    ];
    let url = crate::helpers::fresh_database().await;
    let (a, b) = tokio::join!(
        crate::helpers::spawn_on(Some(url.clone()), &flags),
        crate::helpers::spawn_on(Some(url.clone()), &flags)
    );
    // Both replicas take appends to one conversation, each crossing check points.
    for i in 0..24 {
        let replica = if i % 2 == 0 { &a } else { &b };
        let text = format!("Message {i}: we decided to keep going with step {i} of the plan.");
        replica.append_ok("shared", vec![user(&text), user(&text)]).await;
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let versions: i64 = client
        .query_one(
            "SELECT count(*) FROM summaries WHERE conversation_id = 'shared'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let calls = endpoint.calls.load(Ordering::SeqCst);
    println!("background summaries: {calls} summarizer calls, {versions} versions stored");
    assert!(versions >= 1);
    assert_eq!(
        calls as i64, versions,
        "no summarizer call was wasted on a lost race"
    );
}
