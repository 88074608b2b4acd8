//! The `openai` summarizer and extractor against a real local HTTP server speaking the
//! chat-completions wire format: request shape, structured output schema, timeout, 500.

use std::{
    collections::VecDeque,
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

/// How the fake endpoint answers by default.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Answer,
    Slow,
    Fail,
    /// Refuses `response_format: json_schema` like llama-cpp-python's server; answers
    /// `json_object` requests.
    NoJsonSchema,
}

/// One scripted answer: HTTP status and body (a JSON string or raw text), after a delay.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: String,
    delay: Duration,
}

impl Reply {
    /// A chat completion with `content`, ended by `finish_reason`.
    fn chat(content: &str, finish_reason: &str) -> Self {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}]
        });
        Self::raw(200, &body.to_string())
    }

    fn raw(status: u16, body: &str) -> Self {
        Self {
            status,
            body: body.to_owned(),
            delay: Duration::ZERO,
        }
    }
}

/// Every request the endpoint received: (authorization header, JSON body).
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

#[derive(Clone)]
struct Endpoint {
    behaviour: Behaviour,
    /// Answers given before the default behaviour, in order.
    script: Arc<Mutex<VecDeque<Reply>>>,
    requests: Seen,
    calls: Arc<AtomicUsize>,
    /// Requests whose connection the client closed before the answer was sent.
    abandoned: Arc<AtomicUsize>,
    /// Requests being answered now, and the most at any time.
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

impl Endpoint {
    fn then(&self, reply: Reply) {
        self.script.lock().unwrap().push_back(reply);
    }
}

/// Counts the request as abandoned if its handler is dropped before it answers.
struct Abandonment(Option<Arc<AtomicUsize>>);

impl Drop for Abandonment {
    fn drop(&mut self) {
        if let Some(count) = self.0.take() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Counts a request in flight while it is being answered.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(endpoint: &Endpoint) -> Self {
        let now = endpoint.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        endpoint.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(endpoint.in_flight.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn default_extraction() -> String {
    json!({
        "summary": "Billing launch planning.",
        "goals": [{"text": "Launch billing by March", "source_sequences": [1], "supersedes": ""}],
        "requirements": [], "constraints": [], "assumptions": [], "open_questions": [], "stakeholders": [],
        "decisions": [{"text": "Use PostgreSQL 15", "source_sequences": [2], "supersedes": ""}],
        "glossary": [{"term": "SLA", "definition": "service level agreement", "source_sequences": [2]}]
    })
    .to_string()
}

async fn completions(
    State(endpoint): State<Endpoint>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, String) {
    endpoint.calls.fetch_add(1, Ordering::SeqCst);
    let _in_flight = InFlight::enter(&endpoint);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    endpoint.requests.lock().unwrap().push((auth, body.clone()));
    let mut guard = Abandonment(Some(endpoint.abandoned.clone()));
    let scripted = endpoint.script.lock().unwrap().pop_front();
    let reply = match (scripted, endpoint.behaviour) {
        (Some(reply), _) => reply,
        (None, Behaviour::Fail) => {
            Reply::raw(500, r#"{"error": {"message": "model crashed: out of memory"}}"#)
        }
        (None, Behaviour::Slow) => Reply {
            delay: Duration::from_secs(5),
            ..Reply::chat("late", "stop")
        },
        (None, Behaviour::NoJsonSchema) if body["response_format"]["type"] == "json_schema" => Reply::raw(
            400,
            r#"{"error": {"message": "response_format: Input should be 'text' or 'json_object'"}}"#,
        ),
        (None, _) if body.get("response_format").is_some() => Reply::chat(&default_extraction(), "stop"),
        (None, _) => Reply::chat(
            "Goals: launch billing by March. Decisions: PostgreSQL 15 [#2].",
            "stop",
        ),
    };
    tokio::time::sleep(reply.delay).await;
    guard.0 = None;
    (StatusCode::from_u16(reply.status).unwrap(), reply.body)
}

async fn endpoint(behaviour: Behaviour) -> (SocketAddr, Endpoint) {
    let state = Endpoint {
        behaviour,
        script: Arc::default(),
        requests: Arc::default(),
        calls: Arc::default(),
        abandoned: Arc::default(),
        in_flight: Arc::default(),
        max_in_flight: Arc::default(),
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
    ctxd_with(addr, &[]).await
}

/// ctxd on the fake endpoint (1 s per attempt, 2 retries unless `extra` says otherwise), with
/// three messages appended to conversation `o`.
async fn ctxd_with(addr: SocketAddr, extra: &[&str]) -> TestApp {
    let base = format!("http://{addr}/v1");
    let defaults = [
        ("--summarizer", "openai"),
        ("--extractor", "openai"),
        ("--openai-base-url", base.as_str()),
        ("--openai-model", "test-model"),
        ("--openai-api-key", "sk-test"),
        ("--openai-timeout-secs", "1"),
        ("--openai-max-retries", "2"),
    ];
    let mut flags: Vec<&str> = defaults
        .iter()
        .filter(|(flag, _)| !extra.contains(flag))
        .flat_map(|(flag, value)| [*flag, *value])
        .collect();
    flags.extend_from_slice(extra);
    let app = spawn_app_with(StoreKind::InMemory, &flags).await;
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
    let memory = app.refreshed_memory("o").await;
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
        json!(["text", "source_sequences", "supersedes"])
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
    // The endpoint's own error text, and the engine that failed, are in the message.
    assert!(
        status.message().contains("model crashed: out of memory"),
        "{}",
        status.message()
    );
    assert!(status.message().contains("extractor"), "{}", status.message());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_summaries_are_bounded_per_replica_and_a_skipped_check_comes_back() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let slow = Reply {
        delay: Duration::from_millis(800),
        ..Reply::chat("Goals: keep going with the plan.", "stop")
    };
    for _ in 0..3 {
        endpoint.then(slow.clone());
    }
    let base = format!("http://{addr}/v1");
    let flags = [
        "--summarizer",
        "openai",
        "--openai-base-url",
        base.as_str(),
        "--auto-summarize-tokens",
        "100",
        "--auto-summarize-concurrency",
        "2",
    ];
    let app = spawn_app_with(StoreKind::InMemory, &flags).await;
    let messages = |from: usize, count: usize| -> Vec<proto::Message> {
        (from..from + count)
            .map(|i| {
                user(&format!(
                    "Message {i}: we decided to keep going with step {i} of the plan."
                ))
            })
            .collect()
    };
    // Eight conversations cross their first check point at once; two checks may run.
    for c in 0..8 {
        app.append_ok(&format!("c{c}"), messages(0, 17)).await;
    }
    // Appends to a conversation whose check runs start no second check for it.
    app.append_ok("c0", messages(17, 16)).await;
    settled(&endpoint, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(endpoint.max_in_flight.load(Ordering::SeqCst), 2);
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        2,
        "checks reached while two ran were skipped, not queued"
    );
    // c0 and c1 ran; c7 was skipped, and its next check point runs its summary.
    app.append_ok("c7", messages(17, 16)).await;
    settled(&endpoint, 3).await;
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), 3);
}

/// Waits (up to 10 s) until the endpoint received `calls` requests and answered them all.
async fn settled(endpoint: &Endpoint, calls: usize) {
    let answered = async {
        while endpoint.calls.load(Ordering::SeqCst) < calls || endpoint.in_flight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .unwrap();
}

fn refresh(conversation: &str) -> proto::GetWorkingMemoryRequest {
    proto::GetWorkingMemoryRequest {
        conversation_id: conversation.into(),
        refresh: true,
        prepare: false,
    }
}

fn extraction_of(decision: &str, sequence: u64) -> String {
    json!({"decisions": [{"text": decision, "source_sequences": [sequence], "supersedes": ""}]}).to_string()
}

/// A model numbers its facts afresh in every answer; a second refresh must
/// keep the facts of the first, not take its items for edits of theirs.
#[tokio::test]
async fn a_second_refresh_keeps_the_facts_of_the_first() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_using(addr).await;
    endpoint.then(Reply::chat(&extraction_of("Use AWS DMS", 2), "stop"));
    app.client.clone().get_working_memory(refresh("o")).await.unwrap();
    app.append_ok("o", vec![user("Cutover is on March 22.")]).await;
    endpoint.then(Reply::chat(&extraction_of("Cutover on March 22", 4), "stop"));
    let memory = app.refreshed_memory("o").await;
    let decisions: Vec<(&str, &str)> = memory
        .decisions
        .iter()
        .map(|d| (d.text.as_str(), d.superseded_by.as_str()))
        .collect();
    assert_eq!(decisions, [("Use AWS DMS", ""), ("Cutover on March 22", "")]);
    // The request showed the known facts with their ids, for an explicit supersede.
    let requests = endpoint.requests.lock().unwrap();
    let known = requests[1].1["messages"][1]["content"].as_str().unwrap();
    assert!(known.contains("d1: Use AWS DMS"), "{known}");
}

/// An answer that ignores the schema, or whose facts UpdateWorkingMemory
/// would refuse, is refused: FAILED_PRECONDITION, nothing stored, the watermark unmoved.
#[tokio::test]
async fn extraction_answers_off_the_schema_change_nothing() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_with(addr, &["--max-content-bytes", "65536"]).await;
    let huge = "x".repeat(70_000);
    let answers = [
        "{}".to_owned(),
        "[]".to_owned(),
        "\"I cannot help\"".to_owned(),
        "42".to_owned(),
        "null".to_owned(),
        json!({"facts": [{"text": "Use AWS DMS"}]}).to_string(),
        extraction_of("", 1),
        extraction_of(&huge, 1),
        extraction_of("Cites a message never shown", 99),
    ];
    for answer in answers {
        let calls = endpoint.calls.load(Ordering::SeqCst);
        endpoint.then(Reply::chat(&answer, "stop"));
        let result = app.client.clone().get_working_memory(refresh("o")).await;
        let status = result
            .err()
            .unwrap_or_else(|| panic!("accepted: {}", &answer[..answer.len().min(60)]));
        assert_eq!(
            status.code(),
            Code::FailedPrecondition,
            "{}: {}",
            &answer[..answer.len().min(60)],
            status.message()
        );
        assert!(status.message().contains("extractor"), "{}", status.message());
        assert_eq!(
            endpoint.calls.load(Ordering::SeqCst),
            calls + 1,
            "a bad answer is not retried"
        );
        let current = proto::GetWorkingMemoryRequest {
            refresh: false,
            ..refresh("o")
        };
        let memory = app
            .client
            .clone()
            .get_working_memory(current)
            .await
            .unwrap()
            .into_inner()
            .memory
            .unwrap();
        assert_eq!(
            (memory.version, memory.through_sequence),
            (0, 0),
            "nothing was stored"
        );
    }
}

/// A truncated or oversized summary is refused and the old one stands.
#[tokio::test]
async fn truncated_empty_or_oversized_summaries_are_refused() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_using(addr).await;
    let looping = "Goals: Goals: Goals: ".repeat(50);
    let replies = [
        Reply::chat(&looping, "length"),
        Reply::chat("   ", "stop"),
        Reply::chat(&"a summary that never ends ".repeat(80_000), "stop"),
        Reply::chat(&"word ".repeat(3_000), "stop"),
    ];
    for reply in replies {
        endpoint.then(reply);
        let request = proto::SummarizeRequest {
            max_summary_tokens: 500,
            ..summarize_all()
        };
        let status = app.client.clone().summarize(request).await.unwrap_err();
        assert_eq!(status.code(), Code::FailedPrecondition, "{}", status.message());
        assert!(status.message().contains("summarizer"), "{}", status.message());
        let prepare = proto::SummarizeRequest {
            mode: proto::SummarizeMode::Prepare as i32,
            ..summarize_all()
        };
        let current = app.client.clone().summarize(prepare).await.unwrap().into_inner();
        assert!(current.summary.is_none(), "nothing was stored");
    }
}

/// Permanent failures are FAILED_PRECONDITION and not retried;
/// retryable ones UNAVAILABLE; both carry the endpoint's error text.
#[tokio::test]
async fn statuses_say_whether_retrying_can_help() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_using(addr).await;
    let cases = [
        (
            401,
            r#"{"error": {"message": "Incorrect API key provided: sk-test"}}"#,
            Code::FailedPrecondition,
            1,
            "Incorrect API key",
        ),
        (
            400,
            r#"{"error": {"message": "requested 9239 tokens, the context is 8192"}}"#,
            Code::FailedPrecondition,
            1,
            "requested 9239 tokens",
        ),
        (
            422,
            "Unprocessable Entity",
            Code::FailedPrecondition,
            1,
            "Unprocessable Entity",
        ),
        (
            429,
            r#"{"error": {"message": "Rate limit reached"}}"#,
            Code::Unavailable,
            3,
            "Rate limit reached",
        ),
        (
            503,
            "upstream overloaded",
            Code::Unavailable,
            3,
            "upstream overloaded",
        ),
    ];
    for (http, body, code, attempts, text) in cases {
        for _ in 0..3 {
            endpoint.then(Reply::raw(http, body));
        }
        let calls = endpoint.calls.load(Ordering::SeqCst);
        let status = app.client.clone().summarize(summarize_all()).await.unwrap_err();
        assert_eq!(status.code(), code, "HTTP {http}: {}", status.message());
        assert!(
            status.message().contains(text),
            "HTTP {http}: {}",
            status.message()
        );
        assert!(status.message().contains("summarizer"), "{}", status.message());
        assert_eq!(
            endpoint.calls.load(Ordering::SeqCst) - calls,
            attempts,
            "HTTP {http}"
        );
        endpoint.script.lock().unwrap().clear();
    }
}

/// The call's deadline bounds every attempt (the answer is the server's own UNAVAILABLE, given
/// before the caller's deadline would have made it DEADLINE_EXCEEDED), the abandoned request's
/// connection is closed, and a timeout does not read "unreachable".
#[tokio::test]
async fn the_call_deadline_bounds_all_attempts_and_abandons_the_upstream_request() {
    let (addr, endpoint) = endpoint(Behaviour::Slow).await;
    let app = ctxd_with(
        addr,
        &["--openai-timeout-secs", "60", "--openai-max-retries", "3"],
    )
    .await;
    let mut request = tonic::Request::new(summarize_all());
    request.set_timeout(Duration::from_millis(1_500));
    let status = app.client.clone().summarize(request).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{}", status.message());
    assert!(
        status.message().contains("no answer within"),
        "{}",
        status.message()
    );
    assert!(!status.message().contains("unreachable"), "{}", status.message());
    for _ in 0..50 {
        if endpoint.abandoned.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        endpoint.abandoned.load(Ordering::SeqCst),
        1,
        "the upstream request was abandoned"
    );
    assert_eq!(endpoint.calls.load(Ordering::SeqCst), 1);
}

/// A server that refuses `json_schema` gets `json_object` with the schema,
/// from then on.
#[tokio::test]
async fn json_object_is_the_fallback_when_json_schema_is_refused_and_it_is_remembered() {
    let (addr, endpoint) = endpoint(Behaviour::NoJsonSchema).await;
    let app = ctxd_using(addr).await;
    let memory = app.refreshed_memory("o").await;
    assert_eq!(memory.decisions[0].text, "Use PostgreSQL 15");
    app.append_ok("o", vec![user("One more thing.")]).await;
    app.client.clone().get_working_memory(refresh("o")).await.unwrap();
    let requests = endpoint.requests.lock().unwrap();
    let kinds: Vec<&str> = requests
        .iter()
        .map(|(_, body)| body["response_format"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["json_schema", "json_object", "json_object"]);
    assert_eq!(
        requests[1].1["response_format"]["schema"]["properties"]["decisions"]["type"],
        "array"
    );
}

/// A conversation longer than the model's context is summarized and
/// extracted in turn-aligned chunks, each request fitting the context, the summary folded
/// forward; PREPARE returns a request that fits and says how far it goes.
#[tokio::test]
async fn long_conversations_are_summarized_and_extracted_in_chunks_that_fit_the_context() {
    let (addr, endpoint) = endpoint(Behaviour::Answer).await;
    let app = ctxd_with(addr, &["--openai-context-tokens", "2048"]).await;
    for turn in 0..30 {
        let text = format!(
            "Turn {turn}: {}",
            "we weigh the migration options in detail. ".repeat(6)
        );
        app.append_ok(
            "o",
            vec![user(&text), crate::helpers::assistant("Noted, continuing.")],
        )
        .await;
    }
    // PREPARE: one request that fits, up to the end of its chunk.
    let prepare = proto::SummarizeRequest {
        mode: proto::SummarizeMode::Prepare as i32,
        max_summary_tokens: 300,
        ..summarize_all()
    };
    let prepared = app
        .client
        .clone()
        .summarize(prepare)
        .await
        .unwrap()
        .into_inner()
        .prepared
        .unwrap();
    let bytes: usize = prepared.messages.iter().map(|m| m.content.len()).sum();
    assert!(bytes / 3 + 300 < 2_048, "{bytes} bytes");
    assert_eq!(prepared.base_through_sequence, 0);
    assert!(
        prepared.through_sequence > 3 && prepared.through_sequence < 61,
        "{}",
        prepared.through_sequence
    );

    let request = proto::SummarizeRequest {
        max_summary_tokens: 300,
        ..summarize_all()
    };
    let summary = app
        .client
        .clone()
        .summarize(request)
        .await
        .unwrap()
        .into_inner()
        .summary
        .unwrap();
    assert_eq!(
        summary.through_sequence, 61,
        "everything but the kept turn is folded"
    );
    let requests = endpoint.requests.lock().unwrap().clone();
    assert!(requests.len() >= 3, "{} requests", requests.len());
    let mut covered = 0;
    for (i, (_, body)) in requests.iter().enumerate() {
        let bytes: usize = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().len())
            .sum();
        assert!(bytes / 3 + 300 < 2_048, "request {i}: {bytes} bytes");
        let text = body["messages"][1]["content"].as_str().unwrap();
        if i > 0 {
            let previous = format!("Previous summary (messages 1 to {covered}):\nGoals: launch billing");
            assert!(text.contains(&previous), "{text}");
        }
        assert_eq!(text_first(text), covered + 1, "chunks follow each other");
        let last = text.rsplit("[#").next().unwrap();
        covered = last.split(' ').next().unwrap().parse().unwrap();
    }
    assert_eq!(covered, 61);

    // Extraction: chunk by chunk, every answer folded in, the watermark at the end.
    endpoint.requests.lock().unwrap().clear();
    let memory = app.refreshed_memory("o").await;
    assert_eq!(memory.through_sequence, 63);
    assert!(endpoint.requests.lock().unwrap().len() >= 3);
}

/// The sequence of the first message in a request's transcript.
fn text_first(text: &str) -> u64 {
    let start = text
        .find("):\n[#")
        .map(|i| i + 5)
        .or_else(|| text.find("[#").map(|i| i + 2))
        .unwrap();
    text[start..].split(' ').next().unwrap().parse().unwrap()
}
