//! Every AppendMessage validation rule of docs/design.md, "Appending": INVALID_ARGUMENT with a BadRequest
//! field violation naming the field, and nothing stored.

use ctxd::proto::{self, Role};

use crate::{
    contract_tests,
    helpers::{
        StoreKind, append, assert_field_violation, assistant_calling, spawn_app_with, tool_result, user,
    },
};

contract_tests!(
    every_validation_rule_names_its_field_and_stores_nothing,
    nul_in_a_summary_or_working_memory_is_refused_and_nothing_is_stored,
    a_batch_with_a_hundred_bad_messages_gets_invalid_argument_not_a_protocol_error
);

fn with_role(role: i32, content: &str) -> proto::Message {
    proto::Message {
        role,
        content: content.into(),
        ..Default::default()
    }
}

fn cases() -> Vec<(&'static str, proto::AppendMessageRequest, &'static str)> {
    let one = |m: proto::Message| append("v", vec![m]);
    let attachment = |mime: &str, source| proto::Attachment {
        mime_type: mime.into(),
        filename: String::new(),
        source,
        ..Default::default()
    };
    vec![
        (
            "empty conversation id",
            append("", vec![user("x")]),
            "conversation_id",
        ),
        (
            "conversation id over 256 bytes",
            append(&"c".repeat(257), vec![user("x")]),
            "conversation_id",
        ),
        (
            "non-printable conversation id",
            append("a\nb", vec![user("x")]),
            "conversation_id",
        ),
        ("no messages", append("v", vec![]), "messages"),
        (
            "too many messages",
            append("v", (0..11).map(|_| user("x")).collect()),
            "messages",
        ),
        ("role missing", one(with_role(0, "x")), "messages[0].role"),
        ("unknown role value", one(with_role(42, "x")), "messages[0].role"),
        (
            "system without content",
            one(with_role(Role::System as i32, "")),
            "messages[0].content",
        ),
        ("user without content", one(user("")), "messages[0].content"),
        (
            "assistant with nothing",
            one(with_role(Role::Assistant as i32, "")),
            "messages[0].content",
        ),
        (
            "tool without tool_call_id",
            one(with_role(Role::Tool as i32, "out")),
            "messages[0].tool_call_id",
        ),
        (
            "tool_call_id on a user message",
            one(proto::Message {
                tool_call_id: "open-1".into(),
                ..user("x")
            }),
            "messages[0].tool_call_id",
        ),
        (
            "tool calls on a user message",
            one(proto::Message {
                tool_calls: assistant_calling(&["z"]).tool_calls,
                ..user("x")
            }),
            "messages[0].tool_calls",
        ),
        (
            "error on a user message",
            one(proto::Message {
                error: Some(proto::LlmError::default()),
                ..user("x")
            }),
            "messages[0].error",
        ),
        (
            "tool call without id",
            one(assistant_calling(&[""])),
            "messages[0].tool_calls[0].id",
        ),
        (
            "tool call without name",
            one(proto::Message {
                tool_calls: vec![proto::ToolCall {
                    id: "n1".into(),
                    name: String::new(),
                    arguments: "{}".into(),
                    ..Default::default()
                }],
                ..assistant_calling(&[])
            }),
            "messages[0].tool_calls[0].name",
        ),
        (
            "duplicate call id in one message",
            one(assistant_calling(&["d", "d"])),
            "messages[0].tool_calls[1].id",
        ),
        (
            "call id already used",
            one(assistant_calling(&["done-1"])),
            "messages[0].tool_calls[0].id",
        ),
        (
            "result without a call",
            one(tool_result("ghost", "out")),
            "messages[0].tool_call_id",
        ),
        (
            "second result for a call",
            one(tool_result("done-1", "out")),
            "messages[0].tool_call_id",
        ),
        (
            "two results for one open call",
            append("v", vec![tool_result("open-1", "a"), tool_result("open-1", "b")]),
            "messages[1].tool_call_id",
        ),
        (
            "attachment without data or uri",
            one(proto::Message {
                attachments: vec![attachment("image/png", None)],
                ..user("x")
            }),
            "messages[0].attachments[0]",
        ),
        (
            "attachment without mime type",
            one(proto::Message {
                attachments: vec![attachment(
                    "",
                    Some(proto::attachment::Source::Uri("https://x".into())),
                )],
                ..user("x")
            }),
            "messages[0].attachments[0].mime_type",
        ),
        (
            "attachment over the size limit",
            one(proto::Message {
                attachments: vec![attachment(
                    "image/png",
                    Some(proto::attachment::Source::Data(vec![7; 2049])),
                )],
                ..user("x")
            }),
            "messages[0].attachments[0].data",
        ),
        (
            "content over the size limit",
            one(user(&"x".repeat(1025))),
            "messages[0].content",
        ),
        (
            "too many metadata entries",
            one(proto::Message {
                metadata: (0..65).map(|i| (format!("k{i}"), "v".to_string())).collect(),
                ..user("x")
            }),
            "messages[0].metadata",
        ),
        (
            "pinned tool call",
            one(proto::Message {
                pinned: true,
                ..assistant_calling(&["p1"])
            }),
            "messages[0].pinned",
        ),
        (
            "tool result excluded from context",
            one(proto::Message {
                exclude_from_context: true,
                ..tool_result("open-1", "x")
            }),
            "messages[0].exclude_from_context",
        ),
        (
            "idempotency key over 256 bytes",
            proto::AppendMessageRequest {
                idempotency_key: "k".repeat(257),
                ..one(user("x"))
            },
            "idempotency_key",
        ),
        ("NUL in content", one(user("a\0b")), "messages[0].content"),
        (
            "NUL in the author name",
            one(proto::Message {
                name: "a\0".into(),
                ..user("x")
            }),
            "messages[0].name",
        ),
        (
            "NUL in tool call arguments",
            one(proto::Message {
                tool_calls: vec![proto::ToolCall {
                    id: "n1".into(),
                    name: "f".into(),
                    arguments: "{\"q\":\"\0\"}".into(),
                    ..Default::default()
                }],
                ..with_role(Role::Assistant as i32, "")
            }),
            "messages[0].tool_calls[0].arguments",
        ),
        (
            "NUL in a metadata value",
            one(proto::Message {
                metadata: [("k".to_string(), "v\0".to_string())].into(),
                ..user("x")
            }),
            "messages[0].metadata",
        ),
        (
            "NUL in an attachment's file name",
            one(proto::Message {
                attachments: vec![proto::Attachment {
                    filename: "a\0.png".into(),
                    ..attachment(
                        "image/png",
                        Some(proto::attachment::Source::Uri("https://x/y.png".into())),
                    )
                }],
                ..user("x")
            }),
            "messages[0].attachments[0].filename",
        ),
        (
            "NUL in an LLM error's partial output",
            one(proto::Message {
                error: Some(proto::LlmError {
                    code: "timeout".into(),
                    partial_output: "half\0".into(),
                    ..Default::default()
                }),
                ..with_role(Role::Assistant as i32, "")
            }),
            "messages[0].error.partial_output",
        ),
        (
            "NUL in the idempotency key",
            proto::AppendMessageRequest {
                idempotency_key: "k\0".into(),
                ..one(user("x"))
            },
            "idempotency_key",
        ),
        (
            "expected_last_sequence out of range",
            proto::AppendMessageRequest {
                expected_last_sequence: Some(u64::MAX),
                ..one(user("x"))
            },
            "expected_last_sequence",
        ),
    ]
}

async fn every_validation_rule_names_its_field_and_stores_nothing(kind: StoreKind) {
    let limits = [
        "--max-messages-per-request",
        "10",
        "--max-content-bytes",
        "1024",
        "--max-attachment-bytes",
        "2048",
    ];
    let app = spawn_app_with(kind, &limits).await;
    app.append_ok(
        "v",
        vec![
            user("start"),
            assistant_calling(&["open-1", "done-1"]),
            tool_result("done-1", "ok"),
        ],
    )
    .await;
    let mut client = app.client.clone();
    for (case, request, field) in cases() {
        let status = client.append_message(request).await.expect_err(case);
        println!("{case}: {}", status.message());
        assert_field_violation(&status, field);
        assert_eq!(
            app.all_messages("v").await.unwrap().len(),
            3,
            "{case}: nothing stored"
        );
    }
}

/// Statuses travel in HTTP/2 headers: reporting every violation of a large batch would exceed
/// the peer's header limit and surface as a connection-level protocol error instead.
async fn a_batch_with_a_hundred_bad_messages_gets_invalid_argument_not_a_protocol_error(kind: StoreKind) {
    let app = spawn_app_with(kind, &[]).await;
    let ghosts = (0..100)
        .map(|i| tool_result(&format!("a-call-id-nobody-made-{i:0>200}"), "out"))
        .collect();
    let status = app
        .client
        .clone()
        .append_message(append("v", ghosts))
        .await
        .expect_err("orphan results are rejected");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert_field_violation(&status, "messages[0].tool_call_id");
    assert!(status.message().contains("(and 90 more)"), "{}", status.message());
}

/// PostgreSQL's text cannot hold U+0000: both stores refuse it alike, naming the field.
async fn nul_in_a_summary_or_working_memory_is_refused_and_nothing_is_stored(kind: StoreKind) {
    let app = spawn_app_with(kind, &[]).await;
    app.append_ok("n", vec![user("start"), with_role(Role::Assistant as i32, "ok")])
        .await;
    let mut client = app.client.clone();
    let status = client
        .summarize(proto::SummarizeRequest {
            conversation_id: "n".into(),
            mode: proto::SummarizeMode::Provided as i32,
            summary_text: "a\0b".into(),
            through_sequence: 2,
            ..Default::default()
        })
        .await
        .expect_err("NUL in a summary");
    assert_field_violation(&status, "summary_text");
    let item = |text: &str| proto::MemoryItem {
        text: text.into(),
        ..Default::default()
    };
    for (memory, field) in [
        (
            proto::WorkingMemory {
                goals: vec![item("ship\0")],
                ..Default::default()
            },
            "memory.goals[0].text",
        ),
        (
            proto::WorkingMemory {
                glossary: vec![proto::GlossaryEntry {
                    term: "t".into(),
                    definition: "d\0".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            "memory.glossary[0].definition",
        ),
        (
            proto::WorkingMemory {
                summary: "s\0".into(),
                ..Default::default()
            },
            "memory.summary",
        ),
    ] {
        let status = client
            .update_working_memory(proto::UpdateWorkingMemoryRequest {
                conversation_id: "n".into(),
                memory: Some(memory),
                ..Default::default()
            })
            .await
            .expect_err(field);
        assert_field_violation(&status, field);
    }
    let memory = client
        .get_working_memory(proto::GetWorkingMemoryRequest {
            conversation_id: "n".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap_or_default();
    assert_eq!(memory.version, 0, "no working memory stored");
    let pack = client
        .build_context(proto::BuildContextRequest {
            conversation_id: "n".into(),
            budget: Some(proto::Budget {
                max_tokens: 1_000,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        pack.stats.unwrap().summary_through_sequence,
        0,
        "no summary stored"
    );
}
