//! Traces (docs/operations.md, "Traces"): the real binary exports over OTLP to a real receiver
//! started here, speaking the protocol through the `opentelemetry-proto` types (gRPC, and
//! protobuf over HTTP). A caller's `traceparent` is continued over gRPC, Connect and gRPC-Web;
//! the store's statements and the embeddings call are children of the call's span, with their
//! conventions' attributes; background work links to the call that queued it; and no exported
//! byte carries message content, metadata, queries, memory or keys.

use std::{
    net::SocketAddr,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use ctxd::{config::ApiKey, proto};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::{AnyValue, any_value},
    trace::v1::{Span, span::SpanKind},
};
use prost::Message as _;
use serde_json::{Value, json};
use tonic::{Request, metadata::MetadataValue};

use crate::{
    embeddings::fake_vector,
    helpers::{append, fresh_database, user},
    observability::free_listen,
};

/// Text that must never leave the process in a span.
const MARKERS: [&str; 5] = [
    "MARKER-content-4b1d",
    "MARKER-meta-77e0",
    "MARKER-query-c3f2",
    "MARKER-memory-9a51",
    "MARKER-key-0d6c",
];

/// What the receiver was sent: every span, and every request's bytes.
#[derive(Debug, Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<Span>>>,
    bytes: Arc<Mutex<Vec<u8>>>,
    service_names: Arc<Mutex<Vec<String>>>,
}

impl Received {
    fn take(&self, request: ExportTraceServiceRequest) {
        self.bytes.lock().unwrap().extend(request.encode_to_vec());
        for resource_spans in request.resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            if let Some(name) = text_of(&resource.attributes, "service.name") {
                self.service_names.lock().unwrap().push(name);
            }
            for scope in resource_spans.scope_spans {
                self.spans.lock().unwrap().extend(scope.spans);
            }
        }
    }

    /// The spans received so far.
    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits (at most 20 s) until a span matches `wanted`.
    async fn until(&self, what: &str, wanted: impl Fn(&Span) -> bool) -> Span {
        for _ in 0..200 {
            if let Some(span) = self.spans().into_iter().find(&wanted) {
                return span;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let names: Vec<String> = self
            .spans()
            .iter()
            .map(|s| format!("{} {} <- {}", s.name, hex(&s.trace_id), hex(&s.parent_span_id)))
            .collect();
        panic!("no span {what}; received: {names:?}");
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// An OTLP/gRPC receiver on a free port.
async fn grpc_receiver() -> (SocketAddr, Received) {
    let received = Received::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(received.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (addr, received)
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf) on a free port.
async fn http_receiver() -> (SocketAddr, Received) {
    async fn traces(State(received): State<Received>, body: Bytes) -> Vec<u8> {
        received.take(ExportTraceServiceRequest::decode(body).unwrap());
        ExportTraceServiceResponse::default().encode_to_vec()
    }
    let received = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, received)
}

/// An OpenAI-compatible embeddings endpoint that keeps the `traceparent` of every request.
async fn embeddings_endpoint() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    type Seen = Arc<Mutex<Vec<String>>>;
    async fn embed(State(seen): State<Seen>, headers: HeaderMap, Json(body): Json<Value>) -> Json<Value> {
        if let Some(parent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
            seen.lock().unwrap().push(parent.to_owned());
        }
        let inputs: Vec<String> = match &body["input"] {
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().unwrap_or("").to_owned())
                .collect(),
            other => vec![other.as_str().unwrap_or("").to_owned()],
        };
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| json!({"index": index, "embedding": fake_vector(text)}))
            .collect();
        Json(json!({"data": data, "model": "fake", "usage": {"prompt_tokens": 7, "total_tokens": 7}}))
    }
    let seen = Seen::default();
    let app = Router::new()
        .route("/v1/embeddings", post(embed))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// The ctxd binary on PostgreSQL, exporting to `endpoint` over `protocol`.
async fn traced_server(
    endpoint: &str,
    protocol: &str,
    embeddings: SocketAddr,
) -> (tokio::process::Child, String) {
    let listen = free_listen();
    let key = format!("{}=acme", ApiKey::hash_hex(MARKERS[4]));
    let server = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .env("DATABASE_URL", fresh_database().await)
        .env("CTXD_LISTEN", &listen)
        .env("CTXD_API_KEYS", key)
        .env("CTXD_EMBEDDINGS_URL", format!("http://{embeddings}/v1"))
        .env("CTXD_EMBEDDINGS_MODEL", "fake-embedder")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env("OTEL_SERVICE_NAME", "ctxd-under-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_TRACES_SAMPLER")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (server, listen)
}

/// A gRPC client of the server at `listen`, once it answers.
async fn client(
    listen: &str,
) -> proto::context_service_client::ContextServiceClient<tonic::transport::Channel> {
    for _ in 0..200 {
        let url = format!("http://{listen}");
        if let Ok(client) = proto::context_service_client::ContextServiceClient::connect(url).await {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not start");
}

/// A request with the key and a W3C parent in trace `trace` (32 hex digits), span `parent`.
fn traced<T>(message: T, trace: &str, parent: &str) -> Request<T> {
    let mut request = Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("x-api-key", MetadataValue::from_static(MARKERS[4]));
    metadata.insert("traceparent", format!("00-{trace}-{parent}-01").parse().unwrap());
    request
}

fn build_request() -> proto::BuildContextRequest {
    proto::BuildContextRequest {
        conversation_id: "traced".into(),
        budget: Some(proto::Budget {
            max_tokens: 2_000,
            ..Default::default()
        }),
        recall: Some(proto::Recall {
            query: format!("{} what did we decide", MARKERS[2]),
            max_tokens: 200,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    let kv = span.attributes.iter().find(|kv| kv.key == key)?;
    kv.value.as_ref()?.value.as_ref()
}

fn text_of(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value {
        AnyValue {
            value: Some(any_value::Value::StringValue(s)),
        } => Some(s.clone()),
        _ => None,
    }
}

fn text(span: &Span, key: &str) -> Option<String> {
    text_of(&span.attributes, key)
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attribute(span, key)? {
        any_value::Value::IntValue(n) => Some(*n),
        _ => None,
    }
}

/// Whether `span` descends from `ancestor` among `spans`.
fn descends(spans: &[Span], span: &Span, ancestor: &Span) -> bool {
    let mut parent = span.parent_span_id.clone();
    for _ in 0..16 {
        if parent == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|s| s.span_id == parent) {
            Some(next) => parent = next.parent_span_id.clone(),
            None => return false,
        }
    }
    false
}

/// Prints `span` and its descendants, with their attributes (docs/operations.md shows one).
fn print_tree(spans: &[Span], span: &Span, depth: usize) {
    let took = span.end_time_unix_nano.saturating_sub(span.start_time_unix_nano) as f64 / 1e6;
    println!("{:indent$}{} ({took:.2} ms)", "", span.name, indent = depth * 2);
    for kv in &span.attributes {
        let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => s.clone(),
            Some(any_value::Value::IntValue(n)) => n.to_string(),
            Some(any_value::Value::BoolValue(b)) => b.to_string(),
            other => format!("{other:?}"),
        };
        println!("{:indent$}  {} = {value}", "", kv.key, indent = depth * 2);
    }
    let mut children: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == span.span_id)
        .collect();
    children.sort_by_key(|s| s.start_time_unix_nano);
    for child in children {
        print_tree(spans, child, depth + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_continues_its_callers_trace_with_the_store_and_the_model_as_children() {
    let (otlp, received) = grpc_receiver().await;
    let (embeddings, traceparents) = embeddings_endpoint().await;
    let (_server, listen) = traced_server(&format!("http://{otlp}"), "grpc", embeddings).await;
    let mut c = client(&listen).await;
    let (append_trace, call_trace) = (
        "0af7651916cd43dd8448eb211c80319c",
        "4bf92f3577b34da6a3ce929d0e0e4736",
    );
    let parent = "00f067aa0ba902b7";
    let said = proto::Message {
        metadata: [("note".to_owned(), MARKERS[1].to_owned())].into(),
        ..user(&format!("We decided {} on the call", MARKERS[0]))
    };
    let appended = append("traced", vec![said]);
    c.append_message(traced(appended, append_trace, parent))
        .await
        .unwrap();
    let memory = proto::UpdateWorkingMemoryRequest {
        conversation_id: "traced".into(),
        memory: Some(proto::WorkingMemory {
            summary: MARKERS[3].into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    c.update_working_memory(traced(memory, append_trace, parent))
        .await
        .unwrap();
    // The backlog is embedded in a trace of its own, linked to the append that queued it.
    let backlog = received
        .until("embed_backlog", |s| {
            s.name == "embed_backlog" && s.links.iter().any(|l| hex(&l.trace_id) == append_trace)
        })
        .await;
    assert!(backlog.parent_span_id.is_empty(), "a root span");
    assert_ne!(hex(&backlog.trace_id), append_trace);
    let pack = c
        .build_context(traced(build_request(), call_trace, parent))
        .await
        .unwrap()
        .into_inner();
    assert!(pack.stats.as_ref().unwrap().total_tokens > 0);

    let server = received
        .until("BuildContext", |s| {
            hex(&s.trace_id) == call_trace && s.kind == SpanKind::Server as i32
        })
        .await;
    assert_eq!(server.name, "ctxd.v1.ContextService/BuildContext");
    assert_eq!(
        hex(&server.parent_span_id),
        parent,
        "the caller's span is the parent"
    );
    assert_eq!(text(&server, "rpc.system").as_deref(), Some("grpc"));
    assert_eq!(
        text(&server, "rpc.service").as_deref(),
        Some("ctxd.v1.ContextService")
    );
    assert_eq!(text(&server, "rpc.method").as_deref(), Some("BuildContext"));
    assert_eq!(int(&server, "rpc.grpc.status_code"), Some(0));
    assert_eq!(text(&server, "ctxd.tenant").as_deref(), Some("acme"));
    assert_eq!(text(&server, "ctxd.protocol").as_deref(), Some("grpc"));
    assert_eq!(text(&server, "gen_ai.conversation.id").as_deref(), Some("traced"));
    assert_eq!(text(&server, "ctxd.pack.format").as_deref(), Some("openai_chat"));
    let stats = pack.stats.unwrap();
    assert_eq!(int(&server, "ctxd.pack.budget_tokens"), Some(2_000));
    assert_eq!(
        int(&server, "ctxd.pack.total_tokens"),
        Some(i64::from(stats.total_tokens))
    );
    assert_eq!(
        int(&server, "ctxd.pack.messages.kept"),
        Some(i64::from(stats.messages_included))
    );
    assert_eq!(
        int(&server, "ctxd.pack.tokens.recall"),
        Some(i64::from(stats.recall_tokens))
    );

    let spans = received.spans();
    if std::env::var_os("CTXD_PRINT_TRACE").is_some() {
        print_tree(&spans, &server, 0);
    }
    let store = spans
        .iter()
        .find(|s| hex(&s.trace_id) == call_trace && text(s, "db.system.name").is_some())
        .expect("a store span in the call's trace");
    assert_eq!(store.kind, SpanKind::Client as i32);
    assert_eq!(text(store, "db.system.name").as_deref(), Some("postgresql"));
    assert_eq!(text(store, "db.collection.name").as_deref(), Some("messages"));
    assert_eq!(store.name, "SELECT messages");
    assert!(
        descends(&spans, store, &server),
        "the statements are the call's children"
    );
    let model = received
        .until("embeddings", |s| {
            hex(&s.trace_id) == call_trace && s.name.starts_with("embeddings")
        })
        .await;
    assert_eq!(model.kind, SpanKind::Client as i32);
    assert_eq!(
        text(&model, "gen_ai.operation.name").as_deref(),
        Some("embeddings")
    );
    assert_eq!(
        text(&model, "gen_ai.request.model").as_deref(),
        Some("fake-embedder")
    );
    assert_eq!(
        int(&model, "gen_ai.usage.input_tokens"),
        Some(7),
        "{:?}",
        model.attributes
    );
    assert_eq!(text(&model, "server.address").as_deref(), Some("127.0.0.1"));
    assert!(descends(&spans, &model, &server));
    let propagated = traceparents.lock().unwrap().clone();
    assert!(
        propagated.iter().any(|p| p.contains(call_trace)),
        "the embeddings endpoint continues the trace: {propagated:?}"
    );
    assert!(
        received
            .service_names
            .lock()
            .unwrap()
            .iter()
            .all(|n| n == "ctxd-under-test")
    );
    let spans_kept = received.bytes.lock().unwrap().clone();
    for marker in MARKERS {
        let found = spans_kept.windows(marker.len()).any(|w| w == marker.as_bytes());
        assert!(!found, "{marker} was exported");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_grpc_web_calls_are_traced_over_http_export() {
    let (otlp, received) = http_receiver().await;
    let (embeddings, _) = embeddings_endpoint().await;
    let (_server, listen) = traced_server(&format!("http://{otlp}"), "http/protobuf", embeddings).await;
    let mut c = client(&listen).await;
    let parent = "00f067aa0ba902b7";
    let appended = append("traced", vec![user("hello there")]);
    c.append_message(traced(appended, "1af7651916cd43dd8448eb211c80319c", parent))
        .await
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let url = format!("http://{listen}/ctxd.v1.ContextService/BuildContext");
    let (connect_trace, web_trace) = (
        "5bf92f3577b34da6a3ce929d0e0e4736",
        "6bf92f3577b34da6a3ce929d0e0e4736",
    );
    let connect = http
        .post(&url)
        .header("content-type", "application/json")
        .header("x-api-key", MARKERS[4])
        .header("traceparent", format!("00-{connect_trace}-{parent}-01"))
        .body(json!({"conversationId": "traced", "budget": {"maxTokens": 500}}).to_string())
        .send()
        .await
        .unwrap();
    assert!(connect.status().is_success(), "{}", connect.text().await.unwrap());
    let body = build_request().encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(&body);
    let web = http
        .post(&url)
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .header("x-api-key", MARKERS[4])
        .header("traceparent", format!("00-{web_trace}-{parent}-01"))
        .body(framed)
        .send()
        .await
        .unwrap();
    assert!(web.status().is_success());
    let _ = web.bytes().await.unwrap();
    for (trace, protocol) in [(connect_trace, "connect"), (web_trace, "grpc_web")] {
        let span = received
            .until(protocol, |s| {
                hex(&s.trace_id) == trace && s.kind == SpanKind::Server as i32
            })
            .await;
        assert_eq!(hex(&span.parent_span_id), parent);
        assert_eq!(text(&span, "ctxd.protocol").as_deref(), Some(protocol));
        assert_eq!(text(&span, "rpc.method").as_deref(), Some("BuildContext"));
        assert_eq!(int(&span, "rpc.grpc.status_code"), Some(0));
        assert_eq!(text(&span, "ctxd.tenant").as_deref(), Some("acme"));
    }
}
