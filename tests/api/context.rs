//! BuildContext through gRPC, on both stores.

use ctxd::proto::{self, ContextSource};
use serde_json::Value;
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{
        StoreKind, TestApp, as_tenant, assert_field_violation, assistant, assistant_calling, spawn_app,
        tool_result, user,
    },
};

contract_tests!(
    build_context_of_an_unknown_conversation_is_not_found,
    bad_budgets_and_enums_name_their_fields,
    a_20k_message_conversation_packs_its_newest_history_within_budget,
    a_tool_group_that_does_not_fit_is_dropped_whole,
    an_incomplete_tool_group_is_left_out_until_its_results_arrive,
    pinned_and_excluded_messages_are_honoured,
    oversize_tool_output_is_cut_with_a_marker_naming_its_sequence,
    pending_messages_come_last_and_may_answer_open_calls,
    anthropic_packs_alternate_roles,
    packs_of_the_reported_failure_classes_are_valid_for_both_providers,
    stored_messages_carry_their_token_counts,
    a_final_reply_is_left_out_where_the_provider_refuses_one,
    omit_messages_returns_the_same_pack_rendered_only,
);

fn request(conversation: &str, max_tokens: u32) -> proto::BuildContextRequest {
    proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens,
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn build(app: &TestApp, request: proto::BuildContextRequest) -> proto::BuildContextResponse {
    app.client
        .clone()
        .build_context(request)
        .await
        .expect("build succeeds")
        .into_inner()
}

fn sources(response: &proto::BuildContextResponse) -> Vec<ContextSource> {
    response.messages.iter().map(|m| m.source()).collect()
}

async fn build_context_of_an_unknown_conversation_is_not_found(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("mine", vec![user("secret")]).await;
    let mut client = app.client.clone();
    let status = client.build_context(request("nobody", 100)).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let status = client
        .build_context(as_tenant("other", request("mine", 100)))
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::NotFound,
        "another tenant's conversation is not found"
    );
}

async fn bad_budgets_and_enums_name_their_fields(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("c", vec![user("hi")]).await;
    let mut client = app.client.clone();
    let cases = [
        (
            proto::BuildContextRequest {
                budget: None,
                ..request("c", 0)
            },
            "budget.max_tokens",
        ),
        (
            proto::BuildContextRequest {
                budget: Some(proto::Budget {
                    max_tokens: 100,
                    reserve_output_tokens: 100,
                    ..Default::default()
                }),
                ..request("c", 0)
            },
            "budget.reserve_output_tokens",
        ),
        (
            proto::BuildContextRequest {
                tokenizer: 99,
                ..request("c", 100)
            },
            "tokenizer",
        ),
        (
            proto::BuildContextRequest {
                format: 7,
                ..request("c", 100)
            },
            "format",
        ),
        (
            proto::BuildContextRequest {
                final_assistant: 9,
                ..request("c", 100)
            },
            "final_assistant",
        ),
        (request("", 100), "conversation_id"),
        (
            proto::BuildContextRequest {
                pending_messages: vec![proto::Message::default()],
                ..request("c", 100)
            },
            "pending_messages[0].role",
        ),
    ];
    for (request, field) in cases {
        let status = client.build_context(request).await.unwrap_err();
        assert_field_violation(&status, field);
    }
}

async fn a_20k_message_conversation_packs_its_newest_history_within_budget(kind: StoreKind) {
    let app = spawn_app(kind).await;
    for batch in 0..200 {
        let messages = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                match n % 4 {
                    0 => user(&format!("question {n}: what about item {n}?")),
                    1 => assistant_calling(&[&format!("call-{n}")]),
                    2 => tool_result(&format!("call-{}", n - 1), &format!("result for {n}")),
                    _ => proto::Message {
                        role: proto::Role::Assistant as i32,
                        content: format!("answer {n}"),
                        response_id: format!("resp-{n}"),
                        ..Default::default()
                    },
                }
            })
            .collect();
        app.append_ok("long", messages).await;
    }
    let response = build(&app, request("long", 2_000)).await;
    let stats = response.stats.unwrap();
    assert_eq!(stats.log_last_sequence, 20_000);
    assert!(!stats.over_budget && stats.total_tokens <= 2_000, "{stats:?}");
    assert!(stats.messages_included > 20, "{stats:?}");
    assert!(
        stats.messages_considered < 400,
        "reads only the tail it needs: {stats:?}"
    );
    assert_eq!(response.messages.last().unwrap().sequence, 20_000);
    assert_eq!(stats.messages_dropped as u64, stats.oldest_included_sequence - 1);
    assert!(response.needs_summary);
    assert!(sources(&response).contains(&ContextSource::TruncationNotice));
    assert_eq!(response.previous_response_id, "resp-19999");
    // Every call in the pack has its result right after it.
    let rendered: Vec<Value> = serde_json::from_str(&response.rendered).unwrap();
    for (i, m) in rendered.iter().enumerate() {
        if let Some(calls) = m.get("tool_calls") {
            assert_eq!(rendered[i + 1]["tool_call_id"], calls[0]["id"]);
        }
        if m["role"] == "tool" {
            assert!(
                rendered[i - 1].get("tool_calls").is_some(),
                "orphan tool message at {i}"
            );
        }
    }
}

async fn a_tool_group_that_does_not_fit_is_dropped_whole(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok(
        "group",
        vec![
            user("first question"),
            assistant_calling(&["a", "b"]),
            tool_result("a", &"long output ".repeat(200)),
            tool_result("b", "short"),
            user("second question"),
        ],
    )
    .await;
    let response = build(&app, request("group", 200)).await;
    let stats = response.stats.unwrap();
    assert_eq!(stats.oldest_included_sequence, 5);
    assert_eq!(stats.tool_groups_dropped, 1);
    assert!(
        response
            .messages
            .iter()
            .all(|m| m.role() != proto::Role::Tool && m.tool_calls.is_empty())
    );
    let everything = build(&app, request("group", 5_000)).await;
    assert_eq!(everything.stats.unwrap().oldest_included_sequence, 1);
}

async fn an_incomplete_tool_group_is_left_out_until_its_results_arrive(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok(
        "dangling",
        vec![
            user("look up two things"),
            assistant_calling(&["x", "y"]),
            tool_result("x", "1"),
        ],
    )
    .await;
    let response = build(&app, request("dangling", 1_000)).await;
    assert_eq!(response.stats.as_ref().unwrap().incomplete_tool_groups, 1);
    let sequences: Vec<u64> = response
        .messages
        .iter()
        .map(|m| m.sequence)
        .filter(|s| *s > 0)
        .collect();
    assert_eq!(sequences, [1]);
    app.append_ok("dangling", vec![tool_result("y", "2")]).await;
    let response = build(&app, request("dangling", 1_000)).await;
    let sequences: Vec<u64> = response
        .messages
        .iter()
        .map(|m| m.sequence)
        .filter(|s| *s > 0)
        .collect();
    assert_eq!(sequences, [1, 2, 3, 4]);
}

async fn pinned_and_excluded_messages_are_honoured(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let opener = proto::Message {
        pinned: true,
        ..user(&format!("Project brief: {}", "details ".repeat(20)))
    };
    let mut messages = vec![opener];
    messages.extend((0..30).map(|i| user(&format!("filler message number {i} with some words"))));
    messages.push(proto::Message {
        exclude_from_context: true,
        ..user("UI: user clicked retry")
    });
    app.append_ok("pins", messages).await;
    let response = build(&app, request("pins", 150)).await;
    let contents: Vec<&str> = response.messages.iter().map(|m| m.content.as_str()).collect();
    assert!(
        contents[0].starts_with("Project brief"),
        "pinned opener first: {contents:?}"
    );
    assert!(
        !contents.iter().any(|c| c.contains("clicked retry")),
        "excluded message left out"
    );
    assert_eq!(
        response.messages.last().unwrap().sequence,
        31,
        "newest non-excluded message last"
    );
    assert!(sources(&response).contains(&ContextSource::TruncationNotice));
}

async fn oversize_tool_output_is_cut_with_a_marker_naming_its_sequence(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let output: String = (0..3000).map(|i| format!("row {i}\n")).collect();
    app.append_ok(
        "big",
        vec![
            user("dump the table"),
            assistant_calling(&["t"]),
            tool_result("t", &output),
        ],
    )
    .await;
    let response = build(
        &app,
        proto::BuildContextRequest {
            tool_output_max_tokens: 100,
            ..request("big", 100_000)
        },
    )
    .await;
    let tool = response
        .messages
        .iter()
        .find(|m| m.role() == proto::Role::Tool)
        .unwrap();
    assert!(tool.content.starts_with("row 0\n"), "head kept");
    assert!(tool.content.ends_with("row 2999\n"), "tail kept");
    assert!(
        tool.content.contains("sequence 3"),
        "marker names the sequence: {}",
        tool.content
    );
    assert!(tool.tokens < 160, "cut to about the limit: {}", tool.tokens);
    assert!(response.stats.unwrap().truncated);
    let full = app.all_messages("big").await.unwrap();
    assert_eq!(
        full[2].content, output,
        "ListMessages still returns the full output"
    );
}

async fn pending_messages_come_last_and_may_answer_open_calls(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("pending", vec![user("weather?"), assistant_calling(&["w"])])
        .await;
    let pending = vec![tool_result("w", "sunny")];
    let response = build(
        &app,
        proto::BuildContextRequest {
            pending_messages: pending,
            ..request("pending", 1_000)
        },
    )
    .await;
    let tail: Vec<ContextSource> = sources(&response).into_iter().rev().take(2).collect();
    assert_eq!(tail, [ContextSource::Pending, ContextSource::History]);
    assert_eq!(response.stats.unwrap().incomplete_tool_groups, 0);

    let stray = vec![tool_result("nope", "x")];
    let status = app
        .client
        .clone()
        .build_context(proto::BuildContextRequest {
            pending_messages: stray,
            ..request("pending", 1_000)
        })
        .await
        .unwrap_err();
    assert_field_violation(&status, "pending_messages[0].tool_call_id");

    // A pending result must complete its call's group: one of two parallel calls is refused.
    app.append_ok(
        "pending",
        vec![tool_result("w", "sunny"), assistant_calling(&["a", "b"])],
    )
    .await;
    let status = app
        .client
        .clone()
        .build_context(proto::BuildContextRequest {
            pending_messages: vec![tool_result("b", "x")],
            ..request("pending", 1_000)
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_field_violation(&status, "pending_messages[0].tool_call_id");
    assert!(status.message().contains("complete"), "{}", status.message());
    let both = build(
        &app,
        proto::BuildContextRequest {
            pending_messages: vec![tool_result("b", "x"), tool_result("a", "y")],
            ..request("pending", 1_000)
        },
    )
    .await;
    assert_eq!(both.stats.unwrap().incomplete_tool_groups, 0);
    app.append_ok("pending", vec![tool_result("a", "y"), tool_result("b", "x")])
        .await;

    let next_turn = vec![user("and tomorrow?")];
    let response = build(
        &app,
        proto::BuildContextRequest {
            pending_messages: next_turn,
            system_prompt: "Be brief.".into(),
            ..request("pending", 1_000)
        },
    )
    .await;
    let order = sources(&response);
    assert_eq!(order.first(), Some(&ContextSource::SystemPrompt));
    assert_eq!(order.last(), Some(&ContextSource::Pending));
}

async fn anthropic_packs_alternate_roles(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok(
        "claude",
        vec![
            user("a"),
            user("b"),
            assistant_calling(&["k"]),
            tool_result("k", "done"),
            user("thanks"),
        ],
    )
    .await;
    let response = build(
        &app,
        proto::BuildContextRequest {
            format: proto::Format::AnthropicMessages as i32,
            system_prompt: "You are Claude.".into(),
            ..request("claude", 1_000)
        },
    )
    .await;
    let pack: Value = serde_json::from_str(&response.rendered).unwrap();
    assert_eq!(
        pack["system"],
        serde_json::json!([{"type": "text", "text": "You are Claude.", "cache_control": {"type": "ephemeral"}}])
    );
    assert!(
        response.rendered.starts_with(r#"{"system":"#),
        "system comes first, as the provider caches it"
    );
    let marked = pack["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .get("cache_control")
                .is_some()
        })
        .collect::<Vec<_>>();
    assert_eq!(
        marked.iter().rev().take_while(|&&m| m).count(),
        2,
        "the last blocks of the last two messages are cache breakpoints: {marked:?}"
    );
    assert_eq!(marked.iter().filter(|&&m| m).count(), 2);
    let roles: Vec<&str> = pack["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(pack["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(pack["messages"][2]["content"][1]["text"], "thanks");
}

/// Failure classes found in generated packs, end to end: an assistant opener, a message typed while a
/// tool runs, non-object arguments, a prefill ending in whitespace, a log with no visible turn.
async fn packs_of_the_reported_failure_classes_are_valid_for_both_providers(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut calling = assistant_calling(&["w"]);
    calling.tool_calls[0].arguments = "[\"Paris\"]".into();
    app.append_ok(
        "classes",
        vec![
            proto::Message {
                pinned: true,
                ..assistant("Welcome! How can I help?")
            },
            user("weather in Paris?"),
            calling,
            user("hurry up"),
            tool_result("w", "18C"),
        ],
    )
    .await;
    let build_as = |format: proto::Format, pending: Vec<proto::Message>| proto::BuildContextRequest {
        format: format as i32,
        pending_messages: pending,
        ..request("classes", 1_000)
    };
    let openai = build(&app, build_as(proto::Format::OpenaiChat, vec![])).await;
    let openai: Value = serde_json::from_str(&openai.rendered).unwrap();
    let roles: Vec<&str> = openai
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["assistant", "user", "assistant", "tool", "user"]);
    assert_eq!(
        openai[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"_raw":"[\"Paris\"]"}"#
    );
    // `""`, not `null`: OpenAI takes either, llama.cpp's server only a string.
    assert_eq!(openai[2]["content"], "");

    let prefill = vec![assistant("It is ")];
    let response = build(&app, build_as(proto::Format::AnthropicMessages, prefill)).await;
    assert_eq!(response.messages[0].source(), ContextSource::Placeholder);
    let anthropic: Value = serde_json::from_str(&response.rendered).unwrap();
    let turns = anthropic["messages"].as_array().unwrap();
    let roles: Vec<&str> = turns.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant", "user", "assistant"]
    );
    assert_eq!(turns[1]["content"][0]["text"], "Welcome! How can I help?");
    assert_eq!(
        turns[3]["content"][0]["input"],
        serde_json::json!({"_raw": "[\"Paris\"]"})
    );
    let answer: Vec<&str> = turns[4]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        answer,
        ["tool_result", "text"],
        "the typed message follows the result"
    );
    assert_eq!(
        turns[5]["content"][0]["text"], "It is",
        "no trailing whitespace on the prefill"
    );

    app.append_ok(
        "quiet",
        vec![
            proto::Message {
                role: proto::Role::System as i32,
                content: "Note: free plan.".into(),
                ..Default::default()
            },
            proto::Message {
                exclude_from_context: true,
                ..user("draft")
            },
        ],
    )
    .await;
    let response = build(
        &app,
        proto::BuildContextRequest {
            format: proto::Format::AnthropicMessages as i32,
            ..request("quiet", 1_000)
        },
    )
    .await;
    let anthropic: Value = serde_json::from_str(&response.rendered).unwrap();
    assert_eq!(anthropic["messages"].as_array().unwrap().len(), 1, "{anthropic}");
    assert_eq!(anthropic["messages"][0]["role"], "user");
}

async fn stored_messages_carry_their_token_counts(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("tokens", vec![user("Hello, world!")]).await;
    let stored = app.all_messages("tokens").await.unwrap();
    let tokens = stored[0].tokens.unwrap();
    // 3 framing + 1 for the role + 4 for the text; cl100k_base is counted when a pack first
    // needs it (CTXD_TOKENIZERS: the default counts o200k_base and the approximation).
    assert_eq!((tokens.o200k_base, tokens.cl100k_base), (Some(8), None));
    assert_eq!(tokens.approx, 3 + 1 + 4);
    let response = build(&app, request("tokens", 100)).await;
    assert_eq!(response.messages[0].tokens, 8);
    assert_eq!(
        response.stats.unwrap().total_tokens,
        8 + 3,
        "plus the reply priming"
    );
}

/// Claude 4.6 and later and Gemini 3 refuse a request that ends on the model's turn: packs in
/// their formats leave out a final reply of the log (here a failed call's partial answer)
/// unless asked to keep it; the OpenAI formats keep it unless asked to leave it out.
async fn a_final_reply_is_left_out_where_the_provider_refuses_one(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let failed = proto::Message {
        error: Some(proto::LlmError {
            code: "timeout".into(),
            message: "the model timed out".into(),
            partial_output: "The capital of France is".into(),
        }),
        ..assistant("")
    };
    app.append_ok(
        "retry",
        vec![user("q1"), assistant("a1"), user("capital of France?"), failed],
    )
    .await;
    let build_as =
        |format: proto::Format, final_assistant: proto::FinalAssistant| proto::BuildContextRequest {
            format: format as i32,
            final_assistant: final_assistant as i32,
            ..request("retry", 1_000)
        };
    let last_role = |response: &proto::BuildContextResponse, key: &str| -> String {
        let pack: Value = serde_json::from_str(&response.rendered).unwrap();
        let turns = match key {
            "" => pack.as_array().unwrap().clone(),
            key => pack[key].as_array().unwrap().clone(),
        };
        turns.last().unwrap()["role"].as_str().unwrap().to_owned()
    };
    let omitted = |response: &proto::BuildContextResponse| response.stats.unwrap().final_assistant_omitted;
    use proto::{FinalAssistant as F, Format};

    let anthropic = build(&app, build_as(Format::AnthropicMessages, F::Unspecified)).await;
    assert_eq!(
        (last_role(&anthropic, "messages").as_str(), omitted(&anthropic)),
        ("user", 1)
    );
    let newest = anthropic.messages.last().unwrap();
    assert_eq!(
        (newest.sequence, newest.content.as_str()),
        (3, "capital of France?")
    );
    let gemini = build(&app, build_as(Format::Gemini, F::Unspecified)).await;
    assert_eq!(
        (last_role(&gemini, "contents").as_str(), omitted(&gemini)),
        ("user", 1)
    );
    let chat = build(&app, build_as(Format::OpenaiChat, F::Unspecified)).await;
    assert_eq!((last_role(&chat, "").as_str(), omitted(&chat)), ("assistant", 0));
    assert!(chat.rendered.contains("The capital of France is"));

    let kept = build(&app, build_as(Format::AnthropicMessages, F::Keep)).await;
    assert_eq!(
        (last_role(&kept, "messages").as_str(), omitted(&kept)),
        ("assistant", 0)
    );
    let left_out = build(&app, build_as(Format::OpenaiChat, F::Omit)).await;
    assert_eq!(
        (last_role(&left_out, "").as_str(), omitted(&left_out)),
        ("user", 1)
    );
    let stats = left_out.stats.unwrap();
    assert_eq!(
        stats.total_tokens + chat.messages.last().unwrap().tokens,
        chat.stats.unwrap().total_tokens,
        "the left-out reply's tokens are not counted"
    );
    assert_eq!(stats.messages_dropped, 0, "older history is all there");

    // The next user message brings it back, in its place.
    app.append_ok("retry", vec![user("please finish")]).await;
    let anthropic = build(&app, build_as(Format::AnthropicMessages, F::Unspecified)).await;
    let pack: Value = serde_json::from_str(&anthropic.rendered).unwrap();
    let roles: Vec<&str> = pack["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(omitted(&anthropic), 0);
}

async fn omit_messages_returns_the_same_pack_rendered_only(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("lean", vec![user("q"), assistant("a"), user("and?")])
        .await;
    let full = build(&app, request("lean", 1_000)).await;
    let lean = build(
        &app,
        proto::BuildContextRequest {
            omit_messages: true,
            ..request("lean", 1_000)
        },
    )
    .await;
    assert_eq!(full.messages.len(), 3);
    assert!(lean.messages.is_empty());
    assert_eq!(
        (
            &lean.rendered,
            lean.stats,
            lean.needs_summary,
            &lean.previous_response_id
        ),
        (
            &full.rendered,
            full.stats,
            full.needs_summary,
            &full.previous_response_id
        )
    );
}
