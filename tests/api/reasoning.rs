//! Reasoning models through gRPC (docs/design.md, "Reasoning and provider-native data"): each provider's tool loop, stored as the
//! provider returned it, comes back in that provider's format block for block; no other format
//! carries any of it; completed turns' reasoning is left out unless asked for.

use ctxd::proto;
use serde_json::{Value, json};
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, append, assert_field_violation, assistant, spawn_app, tool_result, user},
};

contract_tests!(
    an_anthropic_thinking_tool_loop_comes_back_block_for_block,
    an_openai_responses_tool_loop_comes_back_item_for_item,
    openai_phases_come_back_on_every_assistant_message_of_a_responses_pack,
    a_gemini_function_calling_turn_keeps_its_thought_signatures,
    gemini_function_responses_travel_alone_and_user_text_after_them_opens_a_new_content,
    completed_turns_leave_their_reasoning_out_unless_asked,
    malformed_reasoning_is_refused_and_nothing_is_stored,
);

fn reasoning(provider: proto::Provider, kind: &str) -> proto::Reasoning {
    proto::Reasoning {
        provider: provider as i32,
        r#type: kind.into(),
        ..Default::default()
    }
}

fn call(id: &str, name: &str, arguments: &str) -> proto::ToolCall {
    proto::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
        ..Default::default()
    }
}

async fn build(app: &TestApp, conversation: &str, format: proto::Format) -> proto::BuildContextResponse {
    build_with(app, conversation, format, proto::ReasoningPolicy::Unspecified).await
}

async fn build_with(
    app: &TestApp,
    conversation: &str,
    format: proto::Format,
    policy: proto::ReasoningPolicy,
) -> proto::BuildContextResponse {
    app.client
        .clone()
        .build_context(proto::BuildContextRequest {
            conversation_id: conversation.into(),
            budget: Some(proto::Budget {
                max_tokens: 100_000,
                ..Default::default()
            }),
            system_prompt: "You are the travel assistant.".into(),
            format: format as i32,
            reasoning: policy as i32,
            ..Default::default()
        })
        .await
        .expect("BuildContext succeeds")
        .into_inner()
}

fn parsed(response: &proto::BuildContextResponse) -> Value {
    serde_json::from_str(&response.rendered).expect("rendered JSON")
}

/// Asserts that no other format's pack of `conversation` carries any of `secrets`.
async fn assert_no_other_format_carries(
    app: &TestApp,
    conversation: &str,
    own: proto::Format,
    secrets: &[&str],
) {
    let formats = [
        proto::Format::OpenaiChat,
        proto::Format::AnthropicMessages,
        proto::Format::OpenaiResponses,
        proto::Format::Gemini,
    ];
    for format in formats.into_iter().filter(|f| *f != own) {
        let rendered = build_with(app, conversation, format, proto::ReasoningPolicy::All)
            .await
            .rendered;
        for secret in secrets {
            assert!(
                !rendered.contains(secret),
                "{format:?} carries {secret:?} from another provider: {rendered}"
            );
        }
    }
}

/// Removes the cache breakpoints, which ctxd places itself.
fn without_cache_control(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            map.remove("cache_control");
            for v in map.values_mut() {
                *v = without_cache_control(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = without_cache_control(v.take());
            }
        }
        _ => {}
    }
    value
}

const THINKING_SIGNATURE: &str = "EqQBCkgIARABGAIiQL2ZbnBUw5v2tg9y9/5oMV2uQ0Y2f4T0GmwRktBA+ignore+me==";
const SECOND_SIGNATURE: &str = "ErUBCkYIBRgCIkDn0bzBy6hKs2Dd4w6rHFl4ZxGgf8QpJ0yM2V+interleaved==";
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pabm+redacted";

/// What the Messages API returned for the first call of the loop: thinking, redacted thinking,
/// text, a tool call, more (interleaved) thinking, a second call.
fn claude_reply() -> proto::Message {
    proto::Message {
        role: proto::Role::Assistant as i32,
        content: "Let me check both cities.".into(),
        tool_calls: vec![
            call("toolu_01A", "get_weather", r#"{"city": "Paris"}"#),
            call("toolu_01B", "get_weather", r#"{"city": "Oslo"}"#),
        ],
        reasoning: vec![
            proto::Reasoning {
                text: "The user wants the weather in two cities.\nI'll call the tool twice.".into(),
                signature: THINKING_SIGNATURE.into(),
                ..reasoning(proto::Provider::Anthropic, "thinking")
            },
            proto::Reasoning {
                data: REDACTED.into(),
                ..reasoning(proto::Provider::Anthropic, "redacted_thinking")
            },
            proto::Reasoning {
                text: "Now Oslo.".into(),
                signature: SECOND_SIGNATURE.into(),
                // After the text and the first call.
                position: 2,
                ..reasoning(proto::Provider::Anthropic, "thinking")
            },
        ],
        ..Default::default()
    }
}

async fn an_anthropic_thinking_tool_loop_comes_back_block_for_block(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let reply = claude_reply();
    app.append_ok(
        "claude",
        vec![
            user("Weather in Paris and Oslo?"),
            reply.clone(),
            tool_result("toolu_01A", "18°C, sunny"),
            tool_result("toolu_01B", "4°C, snow"),
        ],
    )
    .await;
    let stored = &app.all_messages("claude").await.unwrap()[1];
    assert_eq!(stored.reasoning, reply.reasoning, "stored as received");
    assert_eq!(stored.tool_calls, reply.tool_calls);
    let tokens = stored.reasoning_tokens.expect("reasoning tokens");
    assert!(
        tokens.o200k_base.is_some_and(|n| n > 0) && tokens.approx > 0,
        "{tokens:?}"
    );

    let response = build(&app, "claude", proto::Format::AnthropicMessages).await;
    let pack = without_cache_control(parsed(&response));
    let messages = pack["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{pack}");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The user wants the weather in two cities.\nI'll call the tool twice.", "signature": THINKING_SIGNATURE},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "text", "text": "Let me check both cities."},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "thinking", "thinking": "Now Oslo.", "signature": SECOND_SIGNATURE},
            {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"city": "Oslo"}},
        ]}),
    );
    // The breakpoint of that message sits on its last block that is not thinking.
    let raw = parsed(&response);
    assert!(
        raw["messages"][1]["content"][5].get("cache_control").is_some(),
        "{raw}"
    );
    assert!(
        raw["messages"][1]["content"][4].get("cache_control").is_none(),
        "{raw}"
    );
    let stats = response.stats.unwrap();
    assert!(
        stats.reasoning_tokens > 0 && stats.reasoning_tokens_omitted == 0,
        "{stats:?}"
    );
    assert_eq!(
        response.messages[2].reasoning, reply.reasoning,
        "the structured pack carries it too"
    );

    assert_no_other_format_carries(
        &app,
        "claude",
        proto::Format::AnthropicMessages,
        &[
            THINKING_SIGNATURE,
            SECOND_SIGNATURE,
            REDACTED,
            "two cities",
            "Now Oslo",
        ],
    )
    .await;
}

const ENCRYPTED: &str = "gAAAAABoISQ24CZfTjW2Z1Qx0nYQ-encrypted-reasoning-";

async fn an_openai_responses_tool_loop_comes_back_item_for_item(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // Response 1: a reasoning item and a function call; response 2: reasoning and the answer.
    let first = proto::Message {
        role: proto::Role::Assistant as i32,
        tool_calls: vec![proto::ToolCall {
            item_id: "fc_68a1".into(),
            ..call("call_Xy1", "get_weather", r#"{"city":"Paris"}"#)
        }],
        reasoning: vec![proto::Reasoning {
            id: "rs_68a0".into(),
            summary: vec!["**Checking the weather**".into(), "Calling the tool.".into()],
            data: format!("{ENCRYPTED}1"),
            ..reasoning(proto::Provider::Openai, "reasoning")
        }],
        response_id: "resp_1".into(),
        ..Default::default()
    };
    let second = proto::Message {
        content: "It is 18°C and sunny in Paris.".into(),
        content_item_id: "msg_68b1".into(),
        reasoning: vec![proto::Reasoning {
            id: "rs_68b0".into(),
            data: format!("{ENCRYPTED}2"),
            ..reasoning(proto::Provider::Openai, "reasoning")
        }],
        response_id: "resp_2".into(),
        ..assistant("")
    };
    app.append_ok(
        "gpt",
        vec![
            user("Weather in Paris?"),
            first,
            tool_result("call_Xy1", "18°C, sunny"),
            second,
        ],
    )
    .await;
    let response = build(&app, "gpt", proto::Format::OpenaiResponses).await;
    let input = parsed(&response);
    assert_eq!(
        input,
        json!([
            {"type": "message", "role": "system", "content": "You are the travel assistant."},
            {"type": "message", "role": "user", "content": "Weather in Paris?"},
            {"type": "reasoning", "id": "rs_68a0", "encrypted_content": format!("{ENCRYPTED}1"), "summary": [
                {"type": "summary_text", "text": "**Checking the weather**"},
                {"type": "summary_text", "text": "Calling the tool."},
            ]},
            {"type": "function_call", "id": "fc_68a1", "call_id": "call_Xy1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_Xy1", "output": "18°C, sunny"},
            {"type": "reasoning", "id": "rs_68b0", "encrypted_content": format!("{ENCRYPTED}2"), "summary": []},
            {"type": "message", "role": "assistant", "id": "msg_68b1", "status": "completed", "content": [
                {"type": "output_text", "text": "It is 18°C and sunny in Paris.", "annotations": []},
            ]},
        ]),
    );
    assert_no_other_format_carries(
        &app,
        "gpt",
        proto::Format::OpenaiResponses,
        &[ENCRYPTED, "rs_68", "fc_68a1", "msg_68b1", "Checking the weather"],
    )
    .await;
}

async fn openai_phases_come_back_on_every_assistant_message_of_a_responses_pack(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // gpt-5.3-codex style: commentary before a call, then the final answer; the next turn is
    // pending, so the completed turn's reasoning is left out by default but its phases stay.
    let commentary = proto::Message {
        content: "Let me check the forecast.".into(),
        content_item_id: "msg_c1".into(),
        content_phase: "commentary".into(),
        tool_calls: vec![proto::ToolCall {
            item_id: "fc_c1".into(),
            ..call("call_1", "get_weather", r#"{"city":"Oslo"}"#)
        }],
        reasoning: vec![proto::Reasoning {
            id: "rs_c0".into(),
            data: format!("{ENCRYPTED}c"),
            ..reasoning(proto::Provider::Openai, "reasoning")
        }],
        ..assistant("")
    };
    let answer = proto::Message {
        content_phase: "final_answer".into(),
        ..assistant("It is 4°C in Oslo.")
    };
    app.append_ok(
        "phases",
        vec![
            user("Weather in Oslo?"),
            commentary,
            tool_result("call_1", "4°C"),
            answer,
            user("And tomorrow?"),
        ],
    )
    .await;
    let stored = app.all_messages("phases").await.expect("the log reads back");
    let phases: Vec<&str> = stored.iter().map(|m| m.content_phase.as_str()).collect();
    assert_eq!(phases, ["", "commentary", "", "final_answer", ""]);

    let response = build(&app, "phases", proto::Format::OpenaiResponses).await;
    assert_eq!(
        parsed(&response),
        json!([
            {"type": "message", "role": "system", "content": "You are the travel assistant."},
            {"type": "message", "role": "user", "content": "Weather in Oslo?"},
            {"type": "message", "role": "assistant", "content": "Let me check the forecast.", "phase": "commentary"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "4°C"},
            {"type": "message", "role": "assistant", "content": "It is 4°C in Oslo.", "phase": "final_answer"},
            {"type": "message", "role": "user", "content": "And tomorrow?"},
        ]),
        "the completed turn's reasoning and item ids are out, its phases are in"
    );
    let with_reasoning = build_with(
        &app,
        "phases",
        proto::Format::OpenaiResponses,
        proto::ReasoningPolicy::All,
    )
    .await;
    assert_eq!(
        parsed(&with_reasoning)[3],
        json!({"type": "message", "role": "assistant", "id": "msg_c1", "status": "completed",
               "phase": "commentary",
               "content": [{"type": "output_text", "text": "Let me check the forecast.", "annotations": []}]}),
    );
    let phased: Vec<&str> = response
        .messages
        .iter()
        .map(|m| m.content_phase.as_str())
        .filter(|p| !p.is_empty())
        .collect();
    assert_eq!(phased, ["commentary", "final_answer"]);
    for format in [
        proto::Format::OpenaiChat,
        proto::Format::AnthropicMessages,
        proto::Format::Gemini,
    ] {
        let other = build(&app, "phases", format).await;
        assert!(
            !other.rendered.contains("phase"),
            "{format:?}: {}",
            other.rendered
        );
        assert!(
            other.messages.iter().all(|m| m.content_phase.is_empty()),
            "{format:?}"
        );
    }
}

const CALL_SIGNATURE: &str = "CiQB0e2Kb7ZtPq3+Z2VtaW5pLWNhbGwtc2lnbmF0dXJl/w==";
const TEXT_SIGNATURE: &str = "CiwB0e2Kb9Z2VtaW5pLXRleHQtc2lnbmF0dXJl";

async fn a_gemini_function_calling_turn_keeps_its_thought_signatures(kind: StoreKind) {
    let app = spawn_app(kind).await;
    // Gemini signs the first function call of a step; the parallel second call has none.
    let calling = proto::Message {
        role: proto::Role::Assistant as i32,
        tool_calls: vec![
            proto::ToolCall {
                signature: CALL_SIGNATURE.into(),
                ..call("fc-1", "get_weather", r#"{"city":"Paris"}"#)
            },
            call("fc-2", "get_weather", r#"{"city":"Oslo"}"#),
        ],
        reasoning: vec![proto::Reasoning {
            text: "**Planning** two lookups.".into(),
            ..reasoning(proto::Provider::Gemini, "thought")
        }],
        ..Default::default()
    };
    let answer = proto::Message {
        content_signature: TEXT_SIGNATURE.into(),
        ..assistant("Paris is sunny; Oslo has snow.")
    };
    app.append_ok(
        "gemini",
        vec![
            user("Weather in Paris and Oslo?"),
            calling,
            tool_result("fc-1", "18°C, sunny"),
            tool_result("fc-2", "4°C, snow"),
            answer,
        ],
    )
    .await;
    // Gemini 3 refuses a request that ends on a model turn, so by default the pack leaves the
    // final answer out; kept, it carries its signature (what older models and the next turn get).
    let response = build(&app, "gemini", proto::Format::Gemini).await;
    let contents = parsed(&response)["contents"].as_array().unwrap().clone();
    assert_eq!(contents.len(), 3);
    assert_eq!(response.stats.unwrap().final_assistant_omitted, 1);
    let mut client = app.client.clone();
    let response = client
        .build_context(proto::BuildContextRequest {
            conversation_id: "gemini".into(),
            budget: Some(proto::Budget {
                max_tokens: 100_000,
                ..Default::default()
            }),
            system_prompt: "You are the travel assistant.".into(),
            format: proto::Format::Gemini as i32,
            final_assistant: proto::FinalAssistant::Keep as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        parsed(&response)["contents"].as_array().unwrap()[..3],
        contents[..]
    );
    assert_eq!(
        parsed(&response),
        json!({
            "systemInstruction": {"parts": [{"text": "You are the travel assistant."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris and Oslo?"}]},
                {"role": "model", "parts": [
                    {"text": "**Planning** two lookups.", "thought": true},
                    {"functionCall": {"name": "get_weather", "id": "fc-1", "args": {"city": "Paris"}}, "thoughtSignature": CALL_SIGNATURE},
                    {"functionCall": {"name": "get_weather", "id": "fc-2", "args": {"city": "Oslo"}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather", "id": "fc-1", "response": {"output": "18°C, sunny"}}},
                    {"functionResponse": {"name": "get_weather", "id": "fc-2", "response": {"output": "4°C, snow"}}},
                ]},
                {"role": "model", "parts": [{"text": "Paris is sunny; Oslo has snow.", "thoughtSignature": TEXT_SIGNATURE}]},
            ],
        }),
    );
    assert!(
        response.rendered.starts_with(r#"{"systemInstruction":"#),
        "the system instruction comes first"
    );
    assert_no_other_format_carries(
        &app,
        "gemini",
        proto::Format::Gemini,
        &[CALL_SIGNATURE, TEXT_SIGNATURE, "Planning"],
    )
    .await;
}

async fn gemini_function_responses_travel_alone_and_user_text_after_them_opens_a_new_content(
    kind: StoreKind,
) {
    let app = spawn_app(kind).await;
    let calls = proto::Message {
        tool_calls: vec![
            proto::ToolCall {
                signature: CALL_SIGNATURE.into(),
                ..call("fc-1", "get_weather", r#"{"city":"Paris"}"#)
            },
            call("fc-2", "get_weather", r#"{"city":"Oslo"}"#),
        ],
        ..assistant("")
    };
    // The user types while the tools run; then the second result comes, then another message.
    app.append_ok(
        "mixed",
        vec![
            user("Weather in Paris and Oslo?"),
            calls,
            tool_result("fc-1", "18°C"),
            user("Hurry, please."),
            tool_result("fc-2", "4°C"),
            user("And tomorrow?"),
        ],
    )
    .await;
    let response = build(&app, "mixed", proto::Format::Gemini).await;
    let contents = parsed(&response)["contents"].clone();
    assert_eq!(
        contents,
        json!([
            {"role": "user", "parts": [{"text": "Weather in Paris and Oslo?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "id": "fc-1", "args": {"city": "Paris"}}, "thoughtSignature": CALL_SIGNATURE},
                {"functionCall": {"name": "get_weather", "id": "fc-2", "args": {"city": "Oslo"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "id": "fc-1", "response": {"output": "18°C"}}},
                {"functionResponse": {"name": "get_weather", "id": "fc-2", "response": {"output": "4°C"}}},
            ]},
            {"role": "user", "parts": [{"text": "Hurry, please."}, {"text": "And tomorrow?"}]},
        ]),
        "Gemini 3 refuses text in the content of function responses"
    );
}

async fn completed_turns_leave_their_reasoning_out_unless_asked(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok(
        "done",
        vec![
            user("Weather in Paris and Oslo?"),
            claude_reply(),
            tool_result("toolu_01A", "18°C, sunny"),
            tool_result("toolu_01B", "4°C, snow"),
            assistant("Sunny in Paris, snow in Oslo."),
            user("Thanks! And tomorrow?"),
        ],
    )
    .await;
    let current = build(&app, "done", proto::Format::AnthropicMessages).await;
    assert!(
        !current.rendered.contains(THINKING_SIGNATURE),
        "{}",
        current.rendered
    );
    let stats = current.stats.unwrap();
    assert_eq!(stats.reasoning_tokens, 0);
    assert!(stats.reasoning_tokens_omitted > 0, "{stats:?}");
    let all = build_with(
        &app,
        "done",
        proto::Format::AnthropicMessages,
        proto::ReasoningPolicy::All,
    )
    .await;
    assert!(all.rendered.contains(THINKING_SIGNATURE) && all.rendered.contains(REDACTED));
    let all_stats = all.stats.unwrap();
    assert_eq!(all_stats.reasoning_tokens, stats.reasoning_tokens_omitted);
    assert_eq!(
        all_stats.total_tokens,
        stats.total_tokens + stats.reasoning_tokens_omitted,
        "the omitted tokens are exactly what keeping them costs"
    );

    // A user message typed while the tools ran does not end the loop: the calls keep their
    // thinking, which Anthropic requires for the tool_use the last results answer.
    app.append_ok(
        "interleaved",
        vec![
            user("Weather in Paris and Oslo?"),
            claude_reply(),
            user("hurry up"),
            tool_result("toolu_01A", "18°C, sunny"),
            tool_result("toolu_01B", "4°C, snow"),
        ],
    )
    .await;
    let interleaved = build(&app, "interleaved", proto::Format::AnthropicMessages).await;
    assert!(
        interleaved.rendered.contains(THINKING_SIGNATURE),
        "{}",
        interleaved.rendered
    );
}

async fn malformed_reasoning_is_refused_and_nothing_is_stored(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let with = |blocks: Vec<proto::Reasoning>| proto::Message {
        reasoning: blocks,
        ..assistant("ok")
    };
    let unsigned = proto::Reasoning {
        text: "hmm".into(),
        ..reasoning(proto::Provider::Anthropic, "thinking")
    };
    let misplaced = proto::Reasoning {
        data: "x".into(),
        position: 2,
        ..reasoning(proto::Provider::Anthropic, "redacted_thinking")
    };
    let foreign_field = proto::Reasoning {
        id: "rs_1".into(),
        signature: "sig".into(),
        ..reasoning(proto::Provider::Openai, "reasoning")
    };
    let mixed = vec![
        proto::Reasoning {
            data: "x".into(),
            ..reasoning(proto::Provider::Anthropic, "redacted_thinking")
        },
        proto::Reasoning {
            text: "t".into(),
            ..reasoning(proto::Provider::Gemini, "thought")
        },
    ];
    let cases = [
        (with(vec![unsigned]), "messages[0].reasoning[0].signature"),
        (with(vec![misplaced]), "messages[0].reasoning[0].position"),
        (with(vec![foreign_field]), "messages[0].reasoning[0].signature"),
        (
            with(vec![reasoning(proto::Provider::Unspecified, "thinking")]),
            "messages[0].reasoning[0].provider",
        ),
        (
            with(vec![reasoning(proto::Provider::Gemini, "thinking")]),
            "messages[0].reasoning[0].type",
        ),
        (with(mixed), "messages[0].reasoning[1].provider"),
        (
            proto::Message {
                content_signature: "sig".into(),
                ..user("hi")
            },
            "messages[0].reasoning",
        ),
        (
            proto::Message {
                content_item_id: "msg_1".into(),
                reasoning: vec![proto::Reasoning {
                    text: "t".into(),
                    ..reasoning(proto::Provider::Gemini, "thought")
                }],
                ..assistant("ok")
            },
            "messages[0].content_item_id",
        ),
        (
            proto::Message {
                content_phase: "final".into(),
                ..assistant("ok")
            },
            "messages[0].content_phase",
        ),
        (
            // The google-genai SDKs give a signature as bytes; their repr is not its JSON form.
            proto::Message {
                tool_calls: vec![proto::ToolCall {
                    signature: "b'\\n$\\x01\\xd1\\xed'".into(),
                    ..call("c1", "get_weather", "{}")
                }],
                ..assistant("ok")
            },
            "messages[0].tool_calls[0].signature",
        ),
        (
            with(vec![proto::Reasoning {
                text: "x".repeat(2 * 1024 * 1024),
                signature: "sig".into(),
                ..reasoning(proto::Provider::Anthropic, "thinking")
            }]),
            "messages[0].reasoning",
        ),
    ];
    for (message, field) in cases {
        let status = app
            .client
            .clone()
            .append_message(append("refused", vec![message]))
            .await
            .expect_err("malformed reasoning is refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
        assert_field_violation(&status, field);
    }
    let status = app.all_messages("refused").await.expect_err("nothing was stored");
    assert_eq!(status.code(), Code::NotFound);
}
