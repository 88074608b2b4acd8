//! What an attack on the Connect, native, usage, search and bring-your-own surfaces broke
//! (Hardening IV), each as a regression test: bodies bounded before they are decoded, native
//! JSON every store can give back unchanged, usage that saturates, page tokens bound to their
//! tenant and log, caller summaries and memories that cannot bring removed text back.

use ctxd::proto;
use serde_json::{Value, json};
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, as_tenant, assert_field_violation, assistant, spawn_app, user},
};

contract_tests!(
    a_request_of_too_many_entries_is_refused_before_it_is_decoded,
    native_json_too_deep_or_holding_nul_is_refused_on_every_store,
    numbers_in_native_json_come_back_as_they_were_written,
    usage_past_bigint_is_refused_and_totals_saturate_on_every_store,
    a_caller_summary_or_first_memory_from_before_a_rewind_or_redaction_is_refused,
    search_page_tokens_are_bound_to_their_tenant_and_log,
    an_image_costs_at_most_what_its_provider_charges_whatever_its_header_claims,
    a_message_a_read_could_not_return_is_refused,
    attachment_uris_are_checked_and_sent_only_where_the_provider_fetches,
);

async fn a_request_of_too_many_entries_is_refused_before_it_is_decoded(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let request = proto::AppendMessageRequest {
        conversation_id: "entries".into(),
        messages: vec![proto::Message::default(); 60_000],
        ..Default::default()
    };
    let status = app.client.clone().append_message(request).await.unwrap_err();
    assert_field_violation(&status, "messages");
    assert!(status.message().contains("entries"), "{status:?}");
    // The same over Connect, in both encodings.
    let http = http();
    let url = format!("http://{}/ctxd.v1.ContextService/AppendMessage", app.addr);
    let json = format!(
        "{{\"conversationId\":\"entries\",\"messages\":[{}{{}}]}}",
        "{},".repeat(60_000)
    );
    let proto_body = [0x12u8, 0x00].repeat(60_000);
    for (content_type, body) in [
        ("application/json", json.into_bytes()),
        ("application/proto", proto_body),
    ] {
        let response = http
            .post(&url)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{content_type}");
        let text = response.text().await.unwrap();
        assert!(text.contains("entries"), "{content_type}: {text}");
    }
    assert_eq!(
        app.all_messages("entries").await.unwrap_err().code(),
        Code::NotFound
    );
}

fn anthropic_reply(content: Value) -> proto::AppendMessageRequest {
    proto::AppendMessageRequest {
        conversation_id: "native".into(),
        native: Some(proto::NativeItems {
            format: proto::Format::AnthropicMessages as i32,
            json: json!({"type": "message", "role": "assistant", "content": content}).to_string(),
        }),
        ..Default::default()
    }
}

async fn native_json_too_deep_or_holding_nul_is_refused_on_every_store(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("native", vec![user("Search, please.")]).await;
    let mut deep = json!(0);
    for _ in 0..120 {
        deep = json!([deep]);
    }
    let nul = json!({"q": "before\u{0}after"});
    for input in [deep, nul] {
        let request = anthropic_reply(json!([
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": input},
            {"type": "text", "text": "Found it."}
        ]));
        let status = app.client.clone().append_message(request).await.unwrap_err();
        assert_field_violation(&status, "native.json");
    }
    assert_eq!(
        app.all_messages("native").await.unwrap().len(),
        1,
        "nothing stored"
    );
    // A JSON nested within the limit is stored and every read gives it back.
    let mut nested = json!("leaf");
    for _ in 0..60 {
        nested = json!({"n": nested});
    }
    let request = anthropic_reply(json!([
        {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": nested},
        {"type": "text", "text": "Found it."}
    ]));
    app.client.clone().append_message(request).await.unwrap();
    let listed = list_rendered(&app, "native", proto::Format::AnthropicMessages).await;
    assert!(listed.contains("\"leaf\""), "{listed}");
    for format in [proto::Format::AnthropicMessages, proto::Format::OpenaiChat] {
        build(&app, "native", format, 100_000).await;
    }
}

async fn list_rendered(app: &TestApp, conversation: &str, format: proto::Format) -> String {
    let request = proto::ListMessagesRequest {
        conversation_id: conversation.into(),
        format: Some(format as i32),
        ..Default::default()
    };
    app.client
        .clone()
        .list_messages(request)
        .await
        .unwrap()
        .into_inner()
        .rendered
}

async fn build(
    app: &TestApp,
    conversation: &str,
    format: proto::Format,
    max_tokens: u32,
) -> proto::BuildContextResponse {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens,
            ..Default::default()
        }),
        format: format as i32,
        ..Default::default()
    };
    app.client
        .clone()
        .build_context(request)
        .await
        .unwrap()
        .into_inner()
}

async fn numbers_in_native_json_come_back_as_they_were_written(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("native", vec![user("Look it up.")]).await;
    let numbers =
        r#"{"big":12345678901234567890123,"exact":0.1000000000000000055511151231257827,"tiny":1e-400}"#;
    let json = format!(
        r#"{{"type":"message","role":"assistant","content":[
            {{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{numbers}}},
            {{"type":"tool_use","id":"toolu_1","name":"lookup","input":{numbers}}}]}}"#
    );
    let request = proto::AppendMessageRequest {
        conversation_id: "native".into(),
        native: Some(proto::NativeItems {
            format: proto::Format::AnthropicMessages as i32,
            json,
        }),
        ..Default::default()
    };
    app.client.clone().append_message(request).await.unwrap();
    let listed = list_rendered(&app, "native", proto::Format::AnthropicMessages).await;
    for written in [
        "12345678901234567890123",
        "0.1000000000000000055511151231257827",
        "1e-400",
    ] {
        assert!(listed.contains(written), "{written} in {listed}");
    }
    let messages = app.all_messages("native").await.unwrap();
    let arguments = &messages[1].tool_calls[0].arguments;
    assert!(
        arguments.contains("12345678901234567890123") && arguments.contains("1e-400"),
        "{arguments}"
    );
}

fn with_usage(content: &str, value: u64) -> proto::Message {
    proto::Message {
        usage: Some(proto::Usage {
            input_tokens: value,
            output_tokens: value,
            cached_input_tokens: 0,
            reasoning_tokens: 0,
        }),
        ..assistant(content)
    }
}

async fn usage_of(app: &TestApp, conversation: &str) -> u64 {
    let request = proto::GetConversationRequest {
        conversation_id: conversation.into(),
    };
    let response = app
        .client
        .clone()
        .get_conversation(request)
        .await
        .unwrap()
        .into_inner();
    response
        .conversation
        .unwrap()
        .usage
        .unwrap_or_default()
        .input_tokens
}

async fn usage_past_bigint_is_refused_and_totals_saturate_on_every_store(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let max = i64::MAX as u64;
    app.append_ok("usage", vec![user("hi")]).await;
    let refused = app
        .client
        .clone()
        .append_message(crate::helpers::append("usage", vec![with_usage("a", u64::MAX)]))
        .await
        .unwrap_err();
    assert_field_violation(&refused, "messages[0].usage.input_tokens");
    for i in 0..3 {
        app.append_ok(
            "usage",
            vec![user("more"), with_usage(&format!("answer {i}"), max)],
        )
        .await;
    }
    assert_eq!(
        usage_of(&app, "usage").await,
        max,
        "saturates at bigint's largest value"
    );
    // Appends, forks and rewinds past saturated totals still answer.
    app.append_ok("usage", vec![user("again"), with_usage("b", 5)])
        .await;
    let fork = proto::ForkConversationRequest {
        conversation_id: "usage".into(),
        through_sequence: 5,
        new_conversation_id: "usage-fork".into(),
    };
    app.client.clone().fork_conversation(fork).await.unwrap();
    assert_eq!(usage_of(&app, "usage-fork").await, max);
    let rewind = proto::RewindConversationRequest {
        conversation_id: "usage".into(),
        after_sequence: 3,
        expected_last_sequence: None,
    };
    app.client.clone().rewind_conversation(rewind).await.unwrap();
    assert_eq!(usage_of(&app, "usage").await, max, "one saturated answer is left");
    let rewind = proto::RewindConversationRequest {
        conversation_id: "usage".into(),
        after_sequence: 1,
        expected_last_sequence: None,
    };
    app.client.clone().rewind_conversation(rewind).await.unwrap();
    assert_eq!(usage_of(&app, "usage").await, 0);
    let messages = app.all_messages("usage-fork").await.unwrap();
    assert_eq!(
        messages[2].usage.unwrap().input_tokens,
        max,
        "read back unchanged"
    );
}

async fn prepare(app: &TestApp, conversation: &str) -> proto::PreparedRequest {
    let request = proto::SummarizeRequest {
        conversation_id: conversation.into(),
        mode: proto::SummarizeMode::Prepare as i32,
        ..Default::default()
    };
    let response = app.client.clone().summarize(request).await.unwrap().into_inner();
    response.prepared.expect("a prepared request")
}

fn provided(conversation: &str, through: u64, expected_log_changes: Option<u64>) -> proto::SummarizeRequest {
    proto::SummarizeRequest {
        conversation_id: conversation.into(),
        mode: proto::SummarizeMode::Provided as i32,
        summary_text: "The user's card number is 4111.".into(),
        through_sequence: through,
        expected_through_sequence: Some(0),
        expected_log_changes,
        ..Default::default()
    }
}

async fn a_caller_summary_or_first_memory_from_before_a_rewind_or_redaction_is_refused(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let turns = vec![
        user("My card number is 4111."),
        assistant("Noted."),
        user("Book it."),
        assistant("Done."),
    ];
    app.append_ok("byo", turns).await;
    let prepared = prepare(&app, "byo").await;
    assert_eq!(prepared.log_changes, 0);
    let through = prepared.through_sequence;
    // The secret is taken back and the turn appended again.
    let rewind = proto::RewindConversationRequest {
        conversation_id: "byo".into(),
        after_sequence: 0,
        expected_last_sequence: None,
    };
    app.client.clone().rewind_conversation(rewind).await.unwrap();
    app.append_ok(
        "byo",
        vec![
            user("Hello."),
            assistant("Hi."),
            user("Book it."),
            assistant("Done."),
        ],
    )
    .await;
    for expected in [None, Some(prepared.log_changes)] {
        let status = app
            .client
            .clone()
            .summarize(provided("byo", through, expected))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Aborted, "{expected:?}: {status:?}");
    }
    // Prepared again, after the rewind: stored.
    let again = prepare(&app, "byo").await;
    assert_eq!(again.log_changes, 1);
    let request = provided("byo", again.through_sequence, Some(again.log_changes));
    app.client.clone().summarize(request).await.unwrap();

    // A first memory made before a redaction.
    app.append_ok(
        "memory",
        vec![user("My card number is 4111."), assistant("Noted.")],
    )
    .await;
    let redact = proto::RedactMessageRequest {
        conversation_id: "memory".into(),
        sequence: 1,
    };
    app.client.clone().redact_message(redact).await.unwrap();
    let update = |expected_log_changes| proto::UpdateWorkingMemoryRequest {
        conversation_id: "memory".into(),
        memory: Some(proto::WorkingMemory {
            decisions: vec![proto::MemoryItem {
                text: "Card 4111 on file.".into(),
                source_sequences: vec![1],
                ..Default::default()
            }],
            ..Default::default()
        }),
        expected_version: Some(0),
        expected_log_changes,
    };
    for expected in [None, Some(0)] {
        let status = app
            .client
            .clone()
            .update_working_memory(update(expected))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Aborted, "{expected:?}: {status:?}");
    }
    app.client
        .clone()
        .update_working_memory(update(Some(1)))
        .await
        .unwrap();
}

async fn search(
    app: &TestApp,
    tenant: &str,
    page_token: &str,
) -> Result<proto::SearchMessagesResponse, tonic::Status> {
    let request = proto::SearchMessagesRequest {
        conversation_id: "c".into(),
        query: "invoice".into(),
        page_size: 1,
        page_token: page_token.into(),
        ..Default::default()
    };
    let response = app
        .client
        .clone()
        .search_messages(as_tenant(tenant, request))
        .await?;
    Ok(response.into_inner())
}

async fn search_page_tokens_are_bound_to_their_tenant_and_log(kind: StoreKind) {
    let app = spawn_app(kind).await;
    for tenant in ["acme", "globex"] {
        let messages = (0..3).map(|i| user(&format!("invoice {i} is due"))).collect();
        app.client
            .clone()
            .append_message(as_tenant(tenant, crate::helpers::append("c", messages)))
            .await
            .unwrap();
    }
    let first = search(&app, "acme", "").await.unwrap();
    let token = first.next_page_token;
    assert!(!token.is_empty());
    let other = search(&app, "globex", &token).await.unwrap_err();
    assert_field_violation(&other, "page_token");
    search(&app, "acme", &token).await.unwrap();
    let rewind = proto::RewindConversationRequest {
        conversation_id: "c".into(),
        after_sequence: 1,
        expected_last_sequence: None,
    };
    app.client
        .clone()
        .rewind_conversation(as_tenant("acme", rewind))
        .await
        .unwrap();
    let appended = crate::helpers::append("c", vec![user("invoice 9 is new")]);
    app.client
        .clone()
        .append_message(as_tenant("acme", appended))
        .await
        .unwrap();
    let rewound = search(&app, "acme", &token).await.unwrap_err();
    assert_field_violation(&rewound, "page_token");
}

async fn an_image_costs_at_most_what_its_provider_charges_whatever_its_header_claims(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // 150 pinned images claiming a billion pixels each.
    let huge = |i: usize| proto::Message {
        pinned: true,
        attachments: vec![proto::Attachment {
            mime_type: "image/png".into(),
            source: Some(proto::attachment::Source::Uri(format!(
                "https://example.com/{i}.png"
            ))),
            width: u32::MAX,
            height: u32::MAX,
            ..Default::default()
        }],
        ..user("look")
    };
    for chunk in (0..150).collect::<Vec<_>>().chunks(50) {
        app.append_ok("images", chunk.iter().map(|&i| huge(i)).collect())
            .await;
    }
    for (format, cap) in [
        (proto::Format::Gemini, 2_240),
        (proto::Format::AnthropicMessages, 1_568),
        (proto::Format::OpenaiChat, 1_445),
    ] {
        let pack = build(&app, "images", format, 10_000).await;
        let stats = pack.stats.unwrap();
        assert!(stats.over_budget, "{format:?}: {stats:?}");
        assert!(
            stats.total_tokens > 150 * 100,
            "{format:?}: the sum did not wrap: {stats:?}"
        );
        for m in &pack.messages {
            assert!(m.tokens <= cap + 20, "{format:?}: an image cost {}", m.tokens);
        }
    }
}

async fn a_message_a_read_could_not_return_is_refused(kind: StoreKind) {
    let app = crate::helpers::spawn_app_with(kind, &["--max-response-bytes", "1048576"]).await;
    let big = proto::Message {
        attachments: vec![proto::Attachment {
            mime_type: "image/png".into(),
            source: Some(proto::attachment::Source::Data(vec![7; 700_000])),
            ..Default::default()
        }],
        ..user("look")
    };
    let status = app
        .client
        .clone()
        .append_message(crate::helpers::append("big", vec![big]))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0]");
    // Half of it is returned by every read, in every format.
    let half = proto::Message {
        attachments: vec![proto::Attachment {
            mime_type: "image/png".into(),
            source: Some(proto::attachment::Source::Data(vec![7; 300_000])),
            ..Default::default()
        }],
        ..user("look")
    };
    app.append_ok("big", vec![half]).await;
    for format in [proto::Format::OpenaiChat, proto::Format::Gemini] {
        assert!(!list_rendered(&app, "big", format).await.is_empty());
    }
}

async fn attachment_uris_are_checked_and_sent_only_where_the_provider_fetches(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let with_uri = |uri: &str| proto::Message {
        attachments: vec![proto::Attachment {
            mime_type: "image/png".into(),
            source: Some(proto::attachment::Source::Uri(uri.into())),
            ..Default::default()
        }],
        ..user("see")
    };
    let status = app
        .client
        .clone()
        .append_message(crate::helpers::append(
            "uris",
            vec![with_uri("https://example.com/a.png\r\nX-Injected: 1")],
        ))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0].attachments[0].uri");
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAYAAAD0eNT6AAAAEUlEQVR4nGP4z8DwHwyBDAQAXwIH+TAjW+oAAAAASUVORK5CYII=";
    let uris = [
        "gs://bucket/a.png".to_owned(),
        "http://example.com/a.png".to_owned(),
        "javascript:alert(1)".to_owned(),
        format!("DATA:image/png;base64,{png}"),
    ];
    app.append_ok("uris", uris.iter().map(|u| with_uri(u)).collect())
        .await;
    for format in [proto::Format::OpenaiChat, proto::Format::OpenaiResponses] {
        let rendered: Value =
            serde_json::from_str(&build(&app, "uris", format, 100_000).await.rendered).unwrap();
        let images: Vec<String> = rendered
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|part| match part["type"].as_str() {
                Some("image_url") => part["image_url"]["url"].as_str().map(str::to_owned),
                Some("input_image") => part["image_url"].as_str().map(str::to_owned),
                _ => None,
            })
            .collect();
        assert_eq!(images, [format!("data:image/png;base64,{png}")], "{format:?}");
    }
}

/// An HTTP client (reqwest's rustls needs the process-wide provider; a second install is a
/// no-op).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Sends `request` (HTTP/1.1, written by hand) to `app`, half-closes, and reads the answer.
async fn http1(app: &TestApp, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    );
    let _ = read.await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn protocol_edge_cases_get_the_callers_statuses() {
    let app = spawn_app(StoreKind::InMemory).await;
    // A deadline of 0 ms has passed: not answered 200.
    let response = http()
        .post(format!("http://{}/ctxd.v1.ContextService/CountTokens", app.addr))
        .header("content-type", "application/json")
        .header("connect-timeout-ms", "0")
        .body(r#"{"text":"hi"}"#)
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("deadline_exceeded"));
    // A transfer coding the server does not decode is refused, not read as the body.
    let gzip = b"POST /ctxd.v1.ContextService/CountTokens HTTP/1.1\r\nHost: x\r\n\
        Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
        d\r\n{\"text\":\"hi\"}\r\n0\r\n\r\n";
    let answer = http1(&app, gzip).await;
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A gRPC-Web body that ends before its Content-Length is the caller's fault.
    let mut cut = b"POST /ctxd.v1.ContextService/CountTokens HTTP/1.1\r\nHost: x\r\n\
        Content-Type: application/grpc-web+proto\r\nContent-Length: 100\r\n\r\n"
        .to_vec();
    cut.extend_from_slice(&[0, 0, 0, 0, 95, 0x0a, 0x02, b'h', b'i']);
    let answer = http1(&app, &cut).await.to_ascii_lowercase();
    assert!(!answer.contains("grpc-status: 13"), "{answer}");
    assert!(!answer.contains("incompletebody"), "{answer}");
}
