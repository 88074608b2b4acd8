//! Provider compaction (Conformance V, docs/native.md "Provider compaction"): a pack in the
//! provider's format starts from the newest compaction, placed as the API requires, and sends
//! nothing it replaced; packs of other formats keep the history. Both stores.

use ctxd::proto;
use serde_json::{Value, json};

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, spawn_app},
};

contract_tests!(
    rewind_redaction_and_fork_keep_compacted_packs_consistent,
    an_anthropic_pack_starts_from_the_newest_compaction_block,
    a_responses_pack_starts_from_the_newest_compaction_item,
    a_responses_compact_result_is_a_window_not_a_reply,
    a_compaction_that_shows_nothing_leaves_the_open_tool_loop_its_thinking,
);

async fn append_native(app: &TestApp, conversation: &str, format: proto::Format, json: Value) {
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        native: Some(proto::NativeItems {
            format: format as i32,
            json: json.to_string(),
        }),
        ..Default::default()
    };
    app.client.clone().append_message(request).await.unwrap();
}

async fn pack(app: &TestApp, conversation: &str, format: proto::Format) -> (Value, proto::ContextStats) {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: 20_000,
            ..Default::default()
        }),
        format: format as i32,
        ..Default::default()
    };
    let pack = app
        .client
        .clone()
        .build_context(request)
        .await
        .unwrap()
        .into_inner();
    (serde_json::from_str(&pack.rendered).unwrap(), pack.stats.unwrap())
}

fn compaction_block(summary: &str) -> Value {
    json!({"type": "compaction", "content": summary, "signature": "c2lnbmF0dXJl"})
}

async fn an_anthropic_pack_starts_from_the_newest_compaction_block(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let turns = json!([
        {"role": "user", "content": [{"type": "text", "text": "Plan the migration."}]},
        {"role": "assistant", "content": [
            compaction_block("An older summary."),
            {"type": "text", "text": "Here is the first plan."}
        ]},
        {"role": "user", "content": [{"type": "text", "text": "What is the budget?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Thinking about it before compacting."},
            compaction_block("The user plans a migration; the first plan was given."),
            {"type": "compaction", "content": null},
            {"type": "text", "text": "The budget is 10k."}
        ]},
        {"role": "user", "content": [{"type": "text", "text": "And the timeline?"}]}
    ]);
    append_native(&app, "c", proto::Format::AnthropicMessages, turns).await;
    let (rendered, stats) = pack(&app, "c", proto::Format::AnthropicMessages).await;
    let messages = rendered["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "assistant", "{rendered}");
    assert_eq!(messages[0]["content"][0]["type"], "compaction", "{rendered}");
    assert_eq!(
        messages[0]["content"][0]["content"],
        "The user plans a migration; the first plan was given."
    );
    let text = rendered.to_string();
    assert_eq!(
        text.matches("\"compaction\"").count(),
        1,
        "one compaction block: {text}"
    );
    for replaced in [
        "Plan the migration",
        "first plan.",
        "What is the budget",
        "before compacting",
    ] {
        assert!(!text.contains(replaced), "{replaced} was replaced: {text}");
    }
    assert!(text.contains("The budget is 10k.") && text.contains("And the timeline?"));
    assert_eq!(stats.compaction_sequence, 4);
    assert_eq!(
        stats.messages_dropped, 0,
        "what the compaction replaced is not dropped history"
    );
    // Other formats cannot read it: they keep the history.
    let (chat, stats) = pack(&app, "c", proto::Format::OpenaiChat).await;
    let chat = chat.to_string();
    assert!(
        chat.contains("Plan the migration") && !chat.contains("compaction"),
        "{chat}"
    );
    assert_eq!(stats.compaction_sequence, 0);
}

/// A log whose message 2 holds an Anthropic compaction with content.
async fn compacted(app: &TestApp, conversation: &str) {
    let turns = json!([
        {"role": "user", "content": [{"type": "text", "text": "Plan the migration."}]},
        {"role": "assistant", "content": [
            compaction_block("The user asked for a migration plan."),
            {"type": "text", "text": "Here is the plan."}
        ]},
        {"role": "user", "content": [{"type": "text", "text": "And the budget?"}]}
    ]);
    append_native(app, conversation, proto::Format::AnthropicMessages, turns).await;
}

async fn rewind_redaction_and_fork_keep_compacted_packs_consistent(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let starts_compacted = |rendered: &Value| rendered["messages"][0]["content"][0]["type"] == "compaction";
    // A fork through the compaction keeps it: its packs start from it too.
    compacted(&app, "source").await;
    let fork = proto::ForkConversationRequest {
        conversation_id: "source".into(),
        through_sequence: 3,
        new_conversation_id: "fork".into(),
    };
    app.client.clone().fork_conversation(fork).await.unwrap();
    let (rendered, stats) = pack(&app, "fork", proto::Format::AnthropicMessages).await;
    assert!(
        starts_compacted(&rendered) && stats.compaction_sequence == 2,
        "{rendered}"
    );
    // A rewind past it removes it: the pack sends the history again.
    compacted(&app, "rewound").await;
    let rewind = proto::RewindConversationRequest {
        conversation_id: "rewound".into(),
        after_sequence: 1,
        expected_last_sequence: None,
    };
    app.client.clone().rewind_conversation(rewind).await.unwrap();
    let (rendered, stats) = pack(&app, "rewound", proto::Format::AnthropicMessages).await;
    assert!(!rendered.to_string().contains("compaction") && stats.compaction_sequence == 0);
    assert!(rendered.to_string().contains("Plan the migration."));
    // A redaction of it leaves a tombstone: no compaction any more, the history is sent.
    compacted(&app, "redacted").await;
    let redact = proto::RedactMessageRequest {
        conversation_id: "redacted".into(),
        sequence: 2,
    };
    app.client.clone().redact_message(redact).await.unwrap();
    let (rendered, stats) = pack(&app, "redacted", proto::Format::AnthropicMessages).await;
    let text = rendered.to_string();
    assert!(
        !text.contains("compaction") && !text.contains("migration plan"),
        "{text}"
    );
    assert!(text.contains("Plan the migration.") && stats.compaction_sequence == 0);
}

async fn a_responses_pack_starts_from_the_newest_compaction_item(kind: StoreKind) {
    let app = spawn_app(kind).await;
    append_native(
        &app,
        "r",
        proto::Format::OpenaiResponses,
        json!([{"type": "message", "role": "user", "content": "Plan the migration."}]),
    )
    .await;
    let response = json!({
        "id": "resp_1",
        "output": [
            {"type": "message", "id": "msg_0", "role": "assistant", "content": [{"type": "output_text", "text": "Before the compaction."}]},
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB"},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "The plan has three steps."}]}
        ]
    });
    append_native(&app, "r", proto::Format::OpenaiResponses, response).await;
    append_native(
        &app,
        "r",
        proto::Format::OpenaiResponses,
        json!([{"type": "message", "role": "user", "content": "And the budget?"}]),
    )
    .await;
    let (rendered, stats) = pack(&app, "r", proto::Format::OpenaiResponses).await;
    let items = input_items(&rendered);
    assert_eq!(items[0]["type"], "compaction", "{rendered}");
    let text = rendered.to_string();
    assert!(
        !text.contains("Plan the migration") && !text.contains("Before the compaction"),
        "{text}"
    );
    assert!(text.contains("three steps") && text.contains("And the budget?"));
    assert_eq!(stats.compaction_sequence, 2);
}

/// The input items of a rendered Responses pack.
fn input_items(rendered: &Value) -> Vec<Value> {
    match rendered {
        Value::Array(items) => items.clone(),
        other => other["input"].as_array().cloned().unwrap_or_default(),
    }
}

async fn a_responses_compact_result_is_a_window_not_a_reply(kind: StoreKind) {
    let app = spawn_app(kind).await;
    append_native(
        &app,
        "w",
        proto::Format::OpenaiResponses,
        json!([
            {"type": "message", "role": "user", "content": "Plan the migration."},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Three steps."}]},
            {"type": "message", "role": "user", "content": "Budget?"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "10k."}]}
        ]),
    )
    .await;
    let output = json!([
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Plan the migration."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Budget?"}]},
        {"type": "compaction", "id": "cmp_9", "encrypted_content": "gAAAAC"}
    ]);
    let compacted = json!({
        "id": "resp_c", "object": "response.compaction", "created_at": 0, "output": output,
        "usage": {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    });
    append_native(&app, "w", proto::Format::OpenaiResponses, compacted).await;
    // Read back as it came, as one message with no text of its own.
    let list = proto::ListMessagesRequest {
        conversation_id: "w".into(),
        after_sequence: 4,
        page_size: 10,
        format: None,
    };
    let read = app.client.clone().list_messages(list).await.unwrap().into_inner();
    let stored = &read.messages[0];
    assert_eq!(stored.content, "", "not a reply of the user's texts");
    let native: Value = serde_json::from_str(&stored.native.as_ref().unwrap().json).unwrap();
    assert_eq!(native, output);
    // The Responses pack starts with the window; other formats keep the history and gain no
    // assistant turn made of the user's texts.
    let (rendered, stats) = pack(&app, "w", proto::Format::OpenaiResponses).await;
    let items = input_items(&rendered);
    assert_eq!(items, output.as_array().unwrap().clone(), "{rendered}");
    assert_eq!(stats.compaction_sequence, 5);
    let (chat, _) = pack(&app, "w", proto::Format::OpenaiChat).await;
    let chat = chat.to_string();
    assert!(!chat.contains("Plan the migration.Budget?"), "{chat}");
    assert!(
        chat.contains("Three steps.") && !chat.contains("compaction"),
        "{chat}"
    );
}

fn thinking(signature: &str) -> Value {
    json!({"type": "thinking", "thinking": "Plan.", "signature": signature})
}

/// The block types of each message of an Anthropic pack.
fn block_types(rendered: &Value) -> Vec<Vec<String>> {
    rendered["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| b["type"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .collect()
}

async fn a_compaction_that_shows_nothing_leaves_the_open_tool_loop_its_thinking(kind: StoreKind) {
    // A `/responses/compact` window (nothing in an Anthropic pack), and an Anthropic paused
    // compaction inside a tool round (the pack cannot hold it there): neither is a turn of the
    // Anthropic pack, so the user message after them joins the tool results, the tool loop
    // goes on from the first call, and that call keeps the thinking Anthropic requires first.
    let app = spawn_app(kind).await;
    let anthropic = proto::Format::AnthropicMessages;
    append_native(&app, "loop", anthropic, json!([
        {"role": "user", "content": [{"type": "text", "text": "Check the weather."}]},
        {"role": "assistant", "content": [thinking("c2lnMQ=="),
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}
    ]))
    .await;
    let paused = json!({"id": "msg_p", "type": "message", "role": "assistant", "model": "claude",
        "content": [compaction_block("The user checks the weather.")], "stop_reason": "compaction",
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}});
    append_native(&app, "loop", anthropic, paused).await;
    append_native(&app, "loop", anthropic, json!([
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "rain"}]}
    ]))
    .await;
    let window = json!({"id": "resp_c", "object": "response.compaction", "created_at": 0, "output": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Check the weather."}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAC"}
    ], "usage": {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}});
    append_native(&app, "loop", proto::Format::OpenaiResponses, window).await;
    append_native(
        &app,
        "loop",
        anthropic,
        json!([
            {"role": "user", "content": [{"type": "text", "text": "And Paris?"}]},
            {"role": "assistant", "content": [thinking("c2lnMg=="),
                {"type": "tool_use", "id": "toolu_3", "name": "weather", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "fog"}]}
        ]),
    )
    .await;
    let (rendered, stats) = pack(&app, "loop", anthropic).await;
    let types = block_types(&rendered);
    assert_eq!(
        types,
        [
            vec!["text"],
            vec!["thinking", "tool_use", "tool_use"],
            vec!["tool_result", "tool_result", "text"],
            vec!["thinking", "tool_use"],
            vec!["tool_result"],
        ],
        "{rendered}"
    );
    assert_eq!(stats.compaction_sequence, 0);
}
