//! WatchChanges over Connect server streaming (JSON and protobuf, HTTP/1.1 and HTTP/2) and
//! gRPC-Web, as curl and the Connect clients call it: enveloped messages as changes commit, and
//! errors in the end-of-stream message with the details a gRPC caller gets.

use std::time::Duration;

use ctxd::proto;
use prost::Message;
use reqwest::{Client, Response, StatusCode};
use serde_json::Value;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, spawn_app, user},
};

contract_tests!(
    changes_stream_over_connect_on_http1_and_http2,
    changes_stream_over_grpc_web,
    connect_stream_errors_end_the_stream_with_their_details,
);

fn http1() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new()
}

fn http2() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder().http2_prior_knowledge().build().unwrap()
}

fn url(app: &TestApp) -> String {
    format!("http://{}/ctxd.v1.ContextService/WatchChanges", app.addr)
}

fn envelope(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Reads enveloped messages from a streaming response: (flags, payload) until `done` says so.
struct Envelopes {
    response: Response,
    buffer: Vec<u8>,
}

impl Envelopes {
    /// The next message that is not a heartbeat (every stream opens with one).
    async fn next(&mut self) -> (u8, Vec<u8>) {
        loop {
            let (flags, payload) = self.next_any().await;
            let json_heartbeat = serde_json::from_slice::<Value>(&payload)
                .is_ok_and(|v| v.get("heartbeat").is_some() && v.get("changes").is_none());
            let proto_heartbeat = proto::WatchChangesResponse::decode(payload.as_slice())
                .is_ok_and(|m| m.heartbeat.is_some() && m.changes.is_empty());
            if flags == 0 && (json_heartbeat || proto_heartbeat) {
                continue;
            }
            return (flags, payload);
        }
    }

    async fn next_any(&mut self) -> (u8, Vec<u8>) {
        loop {
            if self.buffer.len() >= 5 {
                let length = u32::from_be_bytes(self.buffer[1..5].try_into().unwrap()) as usize;
                if self.buffer.len() >= 5 + length {
                    let message: Vec<u8> = self.buffer.drain(..5 + length).collect();
                    return (message[0], message[5..].to_vec());
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk())
                .await
                .expect("a message in time")
                .expect("the stream reads")
                .expect("the stream is still open");
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

async fn open(client: &Client, app: &TestApp, content_type: &str, body: Vec<u8>) -> Envelopes {
    let response = client
        .post(url(app))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], content_type);
    Envelopes {
        response,
        buffer: Vec::new(),
    }
}

async fn changes_stream_over_connect_on_http1_and_http2(kind: StoreKind) {
    let app = spawn_app(kind).await;
    for (version, client) in [("http1", http1()), ("http2", http2())] {
        let conversation = format!("connect-{version}");
        let request = format!(r#"{{"conversationId": "{conversation}", "includeMessages": true}}"#);
        let mut json = open(
            &client,
            &app,
            "application/connect+json",
            envelope(0, request.as_bytes()),
        )
        .await;
        let proto_request = proto::WatchChangesRequest {
            conversation_id: conversation.clone(),
            ..Default::default()
        };
        let mut binary = open(
            &client,
            &app,
            "application/connect+proto",
            envelope(0, &proto_request.encode_to_vec()),
        )
        .await;
        app.append_ok(&conversation, vec![user("over connect")]).await;

        let (flags, payload) = json.next().await;
        assert_eq!(flags, 0, "{version}: a message, not the end");
        let message: Value = serde_json::from_slice(&payload).unwrap();
        let change = &message["changes"][0];
        assert_eq!(change["kind"], "CHANGE_KIND_APPENDED", "{version}: {message}");
        assert_eq!(change["conversationId"], conversation.as_str());
        assert_eq!(change["firstSequence"], "1");
        assert_eq!(change["messages"][0]["content"], "over connect");
        assert!(change["cursor"].as_str().is_some_and(|c| c.starts_with("c1.")));

        let (flags, payload) = binary.next().await;
        assert_eq!(flags, 0);
        let message = proto::WatchChangesResponse::decode(payload.as_slice()).unwrap();
        assert_eq!(message.changes[0].kind(), proto::ChangeKind::Appended);
        assert!(message.changes[0].messages.is_empty());
    }
}

async fn changes_stream_over_grpc_web(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let request = proto::WatchChangesRequest {
        conversation_id: "web".into(),
        ..Default::default()
    };
    let response = http1()
        .post(url(&app))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(envelope(0, &request.encode_to_vec()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = Envelopes {
        response,
        buffer: Vec::new(),
    };
    app.append_ok("web", vec![user("over grpc-web")]).await;
    let (flags, payload) = stream.next().await;
    assert_eq!(flags, 0);
    let message = proto::WatchChangesResponse::decode(payload.as_slice()).unwrap();
    assert_eq!(message.changes[0].conversation_id, "web");
    assert_eq!(message.changes[0].kind(), proto::ChangeKind::Appended);
}

async fn connect_stream_errors_end_the_stream_with_their_details(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let client = http1();
    // A cursor that is not one: the stream's one message is its end, with the field.
    let mut stream = open(
        &client,
        &app,
        "application/connect+json",
        envelope(0, br#"{"afterCursor": "nonsense"}"#),
    )
    .await;
    let (flags, payload) = stream.next().await;
    assert_eq!(flags, 2, "the end-of-stream message");
    let end: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument", "{end}");
    let violation = &end["error"]["details"][0]["debug"]["fieldViolations"][0];
    assert_eq!(violation["field"], "after_cursor", "{end}");
    // Not an envelope, or a unary Content-Type for a streaming method.
    let mut stream = open(&client, &app, "application/connect+json", b"{}".to_vec()).await;
    let (flags, payload) = stream.next().await;
    assert_eq!(flags, 2);
    let end: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument", "{end}");
    let unary = client
        .post(url(&app))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(unary.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(unary.text().await.unwrap().contains("application/connect+json"));
}
