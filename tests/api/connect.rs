//! The Connect protocol and gRPC-Web on the gRPC port, as curl, fetch and the Connect clients
//! use them (docs/operations.md, "Protocols"): every RPC answers as over gRPC, errors carry
//! Connect's codes, HTTP statuses and the same details, auth and tenancy hold, limits and
//! deadlines apply, and hostile requests store nothing.

use ctxd::{grpc::ApiKey, proto};
use prost::Message;
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, spawn_app, spawn_app_with, spawn_on, user},
};

contract_tests!(
    every_rpc_over_connect_answers_as_over_grpc,
    errors_carry_connect_codes_statuses_and_the_same_details,
    hostile_requests_get_clear_errors_and_store_nothing,
    grpc_web_and_the_health_path_are_served_on_the_same_port,
    auth_and_tenancy_hold_over_connect,
);

/// An HTTP client (reqwest's rustls needs the process-wide provider; a second install is a
/// no-op).
fn http() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new()
}

fn url(app: &TestApp, method: &str) -> String {
    format!("http://{}/ctxd.v1.ContextService/{method}", app.addr)
}

/// A Connect JSON call over HTTP/1.1: status and body.
async fn call(app: &TestApp, method: &str, body: Value) -> (StatusCode, Value) {
    call_with(&http(), app, method, body, &[]).await
}

async fn call_with(
    client: &Client,
    app: &TestApp,
    method: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut request = client
        .post(url(app, method))
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A Connect call in binary protobuf: the response decoded as `R`.
async fn call_proto<R: Message + Default>(app: &TestApp, method: &str, request: impl Message) -> R {
    let response = http()
        .post(url(app, method))
        .header("content-type", "application/proto")
        .body(request.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/proto");
    R::decode(response.bytes().await.unwrap()).unwrap()
}

async fn every_rpc_over_connect_answers_as_over_grpc(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // Writes over Connect JSON, in camelCase and in original field names.
    let (status, appended) = call(&app, "AppendMessage", json!({
        "conversationId": "c", "messages": [
            {"role": "ROLE_USER", "content": "What's the weather in Paris?"},
            {"role": "ROLE_ASSISTANT", "toolCalls": [{"id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"}]},
            {"role": "ROLE_TOOL", "tool_call_id": "call_1", "content": "18C"}
        ]})).await;
    assert_eq!(status, StatusCode::OK, "{appended}");
    assert_eq!(
        appended,
        json!({"firstSequence": "1", "lastSequence": "3", "conversationLastSequence": "3"})
    );
    let build =
        json!({"conversationId": "c", "budget": {"maxTokens": 1000}, "format": "FORMAT_ANTHROPIC_MESSAGES"});
    let (_, packed) = call(&app, "BuildContext", build).await;
    let grpc = app
        .client
        .clone()
        .build_context(proto::BuildContextRequest {
            conversation_id: "c".into(),
            budget: Some(proto::Budget {
                max_tokens: 1000,
                ..Default::default()
            }),
            format: proto::Format::AnthropicMessages as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        packed["rendered"],
        json!(grpc.rendered),
        "the same bytes of `rendered`"
    );
    // Binary Connect answers exactly as gRPC, message for message.
    let list = proto::ListMessagesRequest {
        conversation_id: "c".into(),
        format: Some(2),
        ..Default::default()
    };
    let over_connect: proto::ListMessagesResponse = call_proto(&app, "ListMessages", list.clone()).await;
    let over_grpc = app.client.clone().list_messages(list).await.unwrap().into_inner();
    assert_eq!(over_connect, over_grpc);
    let get = proto::GetConversationRequest {
        conversation_id: "c".into(),
    };
    let over_connect: proto::GetConversationResponse = call_proto(&app, "GetConversation", get.clone()).await;
    assert_eq!(
        over_connect,
        app.client
            .clone()
            .get_conversation(get)
            .await
            .unwrap()
            .into_inner()
    );
    // The rest of the RPCs, each over Connect JSON.
    let calls = [
        ("CountTokens", json!({"text": "hello world"}), "tokens"),
        (
            "Summarize",
            json!({"conversationId": "c", "summaryText": "Paris weather.", "throughSequence": "3"}),
            "summary",
        ),
        ("GetWorkingMemory", json!({"conversationId": "c"}), ""),
        (
            "UpdateWorkingMemory",
            json!({"conversationId": "c", "memory": {"goals": [{"text": "Plan the trip"}]}}),
            "memory",
        ),
        ("ListConversations", json!({}), "conversations"),
        (
            "UpdateConversation",
            json!({"conversation": {"conversationId": "c", "title": "Paris"}, "updateMask": "title"}),
            "conversation",
        ),
        (
            "ForkConversation",
            json!({"conversationId": "c", "throughSequence": "3", "newConversationId": "f"}),
            "conversation",
        ),
        (
            "RedactMessage",
            json!({"conversationId": "f", "sequence": "1"}),
            "message",
        ),
        (
            "RewindConversation",
            json!({"conversationId": "f", "afterSequence": "1"}),
            "lastSequence",
        ),
        (
            "SearchMessages",
            json!({"conversationId": "c", "query": "weather paris", "roles": ["ROLE_USER"]}),
            "hits",
        ),
        (
            "DeleteConversation",
            json!({"conversationId": "f"}),
            "messagesDeleted",
        ),
    ];
    for (method, body, field) in calls {
        let (status, answer) = call(&app, method, body).await;
        assert_eq!(status, StatusCode::OK, "{method}: {answer}");
        assert!(
            field.is_empty() || answer.get(field).is_some(),
            "{method}: {answer}"
        );
    }
    let title = app
        .client
        .clone()
        .get_conversation(proto::GetConversationRequest {
            conversation_id: "c".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .conversation
        .unwrap()
        .title;
    assert_eq!(title, "Paris", "a Connect write is seen over gRPC");
    // HTTP/2 (prior knowledge) serves the same.
    let _ = http();
    let h2 = Client::builder().http2_prior_knowledge().build().unwrap();
    let (status, tokens) = call_with(&h2, &app, "CountTokens", json!({"text": "hello world"}), &[]).await;
    assert_eq!((status, tokens["tokens"].as_u64()), (StatusCode::OK, Some(2)));
}

async fn errors_carry_connect_codes_statuses_and_the_same_details(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("c", vec![user("hi")]).await;
    let (status, error) = call(
        &app,
        "AppendMessage",
        json!({"conversationId": "c", "messages": [
        {"role": "ROLE_TOOL", "toolCallId": "nope", "content": "x"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error["code"], "invalid_argument");
    let detail = &error["details"][0];
    assert_eq!(detail["type"], "google.rpc.BadRequest");
    assert_eq!(
        detail["debug"]["fieldViolations"][0]["field"],
        "messages[0].tool_call_id"
    );
    assert!(
        detail["value"].as_str().is_some_and(|v| !v.is_empty()),
        "{detail}"
    );
    let missing = http()
        .post(url(&app, "GetConversation"))
        .header("content-type", "application/json")
        .header("x-request-id", "req-connect-1")
        .body(r#"{"conversationId": "missing"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        missing.headers()["x-request-id"],
        "req-connect-1",
        "the request id comes back on errors too"
    );
    let (status, error) = call(&app, "GetConversation", json!({"conversationId": "missing"})).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let (status, error) = call(
        &app,
        "AppendMessage",
        json!({"conversationId": "c", "expectedLastSequence": "7",
        "messages": [{"role": "ROLE_USER", "content": "again"}]}),
    )
    .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::CONFLICT, Some("aborted")),
        "{error}"
    );
    assert!(
        error["details"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["type"] == "google.rpc.ErrorInfo")),
        "{error}"
    );
}

async fn hostile_requests_get_clear_errors_and_store_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let client = http();
    let post = |body: &'static [u8], content_type: &'static str| {
        client
            .post(url(&app, "AppendMessage"))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let malformed = post(b"{\"conversationId\": \"x\", \"messages\": [", "application/json")
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let unknown = post(b"{\"conversationId\": \"x\", \"bogus\": 1}", "application/json")
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    assert!(unknown.text().await.unwrap().contains("bogus"));
    let wrong_type = post(b"conversationId=x", "application/x-www-form-urlencoded")
        .await
        .unwrap();
    assert_eq!(wrong_type.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let garbage = post(b"\xff\xff\xff", "application/proto").await.unwrap();
    assert_eq!(garbage.status(), StatusCode::BAD_REQUEST);
    let huge = vec![b' '; 17 * 1024 * 1024];
    // Its own connection: the server answers before reading the whole body, and closes it. The
    // client may still be writing the body then (a broken pipe before it reads the answer):
    // it tries again, as a client would.
    let mut too_large = None;
    for _ in 0..5 {
        let sent = http()
            .post(url(&app, "AppendMessage"))
            .header("content-type", "application/json")
            .body(huge.clone())
            .send()
            .await;
        match sent {
            Ok(response) => {
                too_large = Some(response);
                break;
            }
            Err(e) if e.is_request() => continue,
            Err(e) => panic!("{e}"),
        }
    }
    let too_large = too_large.expect("an answer to the oversized body");
    assert_eq!(too_large.status(), StatusCode::TOO_MANY_REQUESTS);
    let (status, error) = call_with(
        &client,
        &app,
        "AppendMessage",
        json!({"conversationId": "x"}),
        &[("connect-timeout-ms", "soon")],
    )
    .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_argument"))
    );
    // A body that never ends is cut at the call's deadline (on its own connection too).
    let (sender, body) = futures::channel::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let slow = http()
        .post(url(&app, "AppendMessage"))
        .header("content-type", "application/json")
        .header("connect-timeout-ms", "300")
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .unwrap();
    drop(sender);
    assert!(
        matches!(
            slow.status(),
            StatusCode::GATEWAY_TIMEOUT | StatusCode::BAD_REQUEST
        ),
        "{}",
        slow.status()
    );
    let get = client.get(url(&app, "AppendMessage")).send().await.unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    let missing = client
        .post(format!("http://{}/ctxd.v1.ContextService/Nope", app.addr))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let stored = app.all_messages("x").await.unwrap_err();
    assert_eq!(stored.code(), tonic::Code::NotFound, "nothing was stored");
}

async fn grpc_web_and_the_health_path_are_served_on_the_same_port(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let client = http();
    let request = proto::CountTokensRequest {
        text: "hello world".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(request.len() as u32).to_be_bytes());
    framed.extend_from_slice(&request);
    let response = client
        .post(url(&app, "CountTokens"))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(framed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.bytes().await.unwrap();
    let length = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    let answer = proto::CountTokensResponse::decode(&body[5..5 + length]).unwrap();
    assert_eq!(answer.tokens, 2);
    let trailers = String::from_utf8_lossy(&body[5 + length + 5..]);
    assert!(trailers.contains("grpc-status:0"), "{trailers}");
    let health = client
        .get(format!("http://{}/healthz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(health.text().await.unwrap(), r#"{"status":"SERVING"}"#);
    let head = client
        .head(format!("http://{}/healthz", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
}

/// Auth and tenancy as over gRPC: no key, a wrong key, a tenant header that does not match
/// the key's tenant, another tenant's conversation.
async fn auth_and_tenancy_hold_over_connect(kind: StoreKind) {
    let keys = format!(
        "{}=acme,{}=globex",
        ApiKey::hash_hex("key-acme"),
        ApiKey::hash_hex("key-globex")
    );
    let app = spawn_app_with(kind, &["--api-keys", &keys]).await;
    let client = http();
    let body = json!({"conversationId": "c", "messages": [{"role": "ROLE_USER", "content": "hi"}]});
    let (status, error) = call_with(&client, &app, "AppendMessage", body.clone(), &[]).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthenticated"))
    );
    let (status, _) = call_with(
        &client,
        &app,
        "AppendMessage",
        body.clone(),
        &[("authorization", "Bearer nope")],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let acme = [("authorization", "Bearer key-acme")];
    let mismatched = [("authorization", "Bearer key-acme"), ("x-tenant-id", "globex")];
    let (status, error) = call_with(&client, &app, "AppendMessage", body.clone(), &mismatched).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("permission_denied"))
    );
    let (status, _) = call_with(&client, &app, "AppendMessage", body.clone(), &acme).await;
    assert_eq!(status, StatusCode::OK);
    let globex = [("x-api-key", "key-globex")];
    let (status, _) = call_with(
        &client,
        &app,
        "GetConversation",
        json!({"conversationId": "c"}),
        &globex,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's conversation does not exist for you"
    );
}

/// Cross-origin calls only where configured.
#[tokio::test]
async fn cross_origin_requests_only_from_configured_origins() {
    let preflight = |app: &TestApp| {
        http()
            .request(reqwest::Method::OPTIONS, url(app, "CountTokens"))
            .header("origin", "https://app.example.com")
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,connect-protocol-version",
            )
            .send()
    };
    let closed = spawn_on(None, &[]).await;
    let response = preflight(&closed).await.unwrap();
    assert!(response.headers().get("access-control-allow-origin").is_none());
    let open = spawn_on(None, &["--cors-origins", "https://app.example.com"]).await;
    let response = preflight(&open).await.unwrap();
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
}
