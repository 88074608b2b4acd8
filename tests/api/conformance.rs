//! Classes a hidden conformance sweep of native appends, attachments, clearing and recall
//! found (Conformance IV), each as a regression test on both stores: the rest (pending images,
//! data-URI PDFs, narrow images, refusals) are in `attachments.rs` and the domain's tests.

use ctxd::proto;
use serde_json::Value;

use crate::{
    contract_tests,
    helpers::{StoreKind, assistant, assistant_calling, spawn_app, tool_result, user},
};

contract_tests!(
    a_blank_user_message_ends_the_replies_left_out_where_the_format_sends_it,
    clearing_empties_the_arguments_of_every_cleared_results_call_in_openai_chat_packs,
    clearing_empties_the_arguments_of_every_cleared_results_call_in_anthropic_packs,
    clearing_empties_the_arguments_of_every_cleared_results_call_in_responses_packs,
    clearing_empties_the_arguments_of_every_cleared_results_call_in_gemini_packs,
    a_summary_too_large_to_fit_is_named_by_the_notice_and_the_pack_is_not_over_budget,
);

fn formats() -> [proto::Format; 4] {
    [
        proto::Format::OpenaiChat,
        proto::Format::AnthropicMessages,
        proto::Format::OpenaiResponses,
        proto::Format::Gemini,
    ]
}

/// A call named `id` with arguments, as a model makes it.
fn calling(id: &str, arguments: &str) -> proto::Message {
    let mut message = assistant_calling(&[id]);
    message.tool_calls[0].name = "read_file".into();
    message.tool_calls[0].arguments = arguments.into();
    message
}

async fn clearing_empties_the_arguments_of_every_cleared_results_call_in_openai_chat_packs(kind: StoreKind) {
    clearing_empties_the_arguments_of_every_cleared_results_call(kind, proto::Format::OpenaiChat).await;
}

async fn clearing_empties_the_arguments_of_every_cleared_results_call_in_anthropic_packs(kind: StoreKind) {
    clearing_empties_the_arguments_of_every_cleared_results_call(kind, proto::Format::AnthropicMessages)
        .await;
}

async fn clearing_empties_the_arguments_of_every_cleared_results_call_in_responses_packs(kind: StoreKind) {
    clearing_empties_the_arguments_of_every_cleared_results_call(kind, proto::Format::OpenaiResponses).await;
}

async fn clearing_empties_the_arguments_of_every_cleared_results_call_in_gemini_packs(kind: StoreKind) {
    clearing_empties_the_arguments_of_every_cleared_results_call(kind, proto::Format::Gemini).await;
}

/// With `clear_arguments`, every cleared result's call carries `{}` in the pack and in the
/// rendering, under both history policies and at every budget from 300 to 1,600 tokens (the
/// sweep found a cache-stable pack at 380 tokens whose call kept its arguments).
async fn clearing_empties_the_arguments_of_every_cleared_results_call(
    kind: StoreKind,
    format: proto::Format,
) {
    let app = spawn_app(kind).await;
    let output = "log line: service started, listening, handling requests. ".repeat(40);
    for turn in 0..6 {
        let id = format!("call_{turn}");
        app.append_ok(
            "clear",
            vec![
                user(&format!("Read the log, step {turn}.")),
                calling(&id, r#"{"path": "/var/log/app/service.log"}"#),
                tool_result(&id, &output),
                assistant("Read it."),
            ],
        )
        .await;
    }
    // One call with two results, the newer kept whole (keep_recent 1).
    let mut two = assistant_calling(&["call_a", "call_b"]);
    for call in &mut two.tool_calls {
        call.name = "read_file".into();
        call.arguments = r#"{"path": "/var/log/app/other.log"}"#.into();
    }
    app.append_ok(
        "clear",
        vec![
            user("Both logs."),
            two,
            tool_result("call_a", &output),
            tool_result("call_b", &output),
        ],
    )
    .await;
    app.append_ok("clear", vec![assistant("Done."), user("Thanks.")])
        .await;
    let mut clearing = 0;
    for history_policy in [proto::HistoryPolicy::CacheStable, proto::HistoryPolicy::Newest] {
        for max_tokens in (300..=1_600).step_by(20) {
            let request = proto::BuildContextRequest {
                conversation_id: "clear".into(),
                budget: Some(proto::Budget {
                    max_tokens,
                    ..Default::default()
                }),
                format: format as i32,
                history_policy: history_policy as i32,
                clear_tool_results: Some(proto::ClearToolResults {
                    keep_recent: 1,
                    exclude_tools: vec![],
                    clear_arguments: true,
                }),
                ..Default::default()
            };
            let built = app.build(request).await;
            let stats = built.stats.unwrap();
            if stats.over_budget {
                continue;
            }
            clearing += usize::from(stats.tool_results_cleared > 0);
            let cleared: Vec<&str> = built
                .messages
                .iter()
                .filter(|m| m.content.starts_with("[tool result cleared"))
                .map(|m| m.tool_call_id.as_str())
                .collect();
            for m in &built.messages {
                for call in &m.tool_calls {
                    if cleared.contains(&call.id.as_str()) {
                        assert_eq!(
                            call.arguments, "{}",
                            "{format:?} {history_policy:?} at {max_tokens}: {}",
                            call.id
                        );
                    }
                }
            }
            // And in what the provider receives.
            let rendered = built.rendered;
            let paths = rendered.matches("/var/log/app/").count();
            let kept_whole = built
                .messages
                .iter()
                .flat_map(|m| &m.tool_calls)
                .filter(|c| c.arguments != "{}")
                .count();
            assert_eq!(
                paths, kept_whole,
                "{format:?} {history_policy:?} at {max_tokens}: {rendered}"
            );
            let _: Value = serde_json::from_str(&rendered).unwrap();
        }
    }
    assert!(clearing > 60, "{format:?}: {clearing} packs cleared results");
}

async fn a_summary_too_large_to_fit_is_named_by_the_notice_and_the_pack_is_not_over_budget(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok(
        "summary",
        vec![
            user("Plan the trip."),
            assistant("Sure."),
            user("Book the hotel."),
            assistant("Booked."),
            user("Now the flights."),
            assistant_calling(&["call_f"]),
        ],
    )
    .await;
    let summary = proto::SummarizeRequest {
        conversation_id: "summary".into(),
        mode: proto::SummarizeMode::Provided as i32,
        summary_text: "The user plans a trip to Lisbon in May with two colleagues. ".repeat(30),
        through_sequence: 4,
        ..Default::default()
    };
    app.client.clone().summarize(summary).await.unwrap();
    let mut named = 0;
    for format in formats() {
        for max_tokens in (40..=160).step_by(4) {
            let request = proto::BuildContextRequest {
                conversation_id: "summary".into(),
                budget: Some(proto::Budget {
                    max_tokens,
                    ..Default::default()
                }),
                format: format as i32,
                tokenizer: proto::Tokenizer::Cl100kBase as i32,
                final_assistant: proto::FinalAssistant::Omit as i32,
                pending_messages: vec![tool_result("call_f", "2 flights found")],
                ..Default::default()
            };
            let built = app.build(request).await;
            let stats = built.stats.unwrap();
            assert_eq!(
                stats.over_budget,
                stats.total_tokens > stats.budget_tokens,
                "{format:?} at {max_tokens}: over_budget says whether the pack fits: {stats:?}"
            );
            let has = |source: proto::ContextSource| built.messages.iter().any(|m| m.source == source as i32);
            if !has(proto::ContextSource::Summary) && !stats.over_budget {
                let notice = built
                    .messages
                    .iter()
                    .find(|m| m.source == proto::ContextSource::TruncationNotice as i32)
                    .unwrap_or_else(|| panic!("{format:?} at {max_tokens}: the summary left out silently"));
                assert!(notice.content.contains("sequences 1 to"), "{}", notice.content);
                named += 1;
            }
        }
    }
    assert!(named > 0, "no budget left the summary out for the notice");
}

async fn a_blank_user_message_ends_the_replies_left_out_where_the_format_sends_it(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok(
        "blank",
        vec![
            user("Plan the trip."),
            assistant("Here is the plan."),
            user(" "),
            assistant("Anything else?"),
        ],
    )
    .await;
    for (format, expected) in [
        // The OpenAI formats send the blank turn: only the reply after it ends the pack.
        (proto::Format::OpenaiChat, vec![1, 2, 3]),
        (proto::Format::OpenaiResponses, vec![1, 2, 3]),
        // Anthropic and Gemini leave blank text out: both replies would end the pack, and the
        // blank message between them goes with them (issue 60, case 6b: no message of the log
        // past the turn the pack ends on).
        (proto::Format::AnthropicMessages, vec![1]),
        (proto::Format::Gemini, vec![1]),
    ] {
        let request = proto::BuildContextRequest {
            conversation_id: "blank".into(),
            budget: Some(proto::Budget {
                max_tokens: 1_000,
                ..Default::default()
            }),
            format: format as i32,
            final_assistant: proto::FinalAssistant::Omit as i32,
            ..Default::default()
        };
        let built = app.build(request).await;
        let sequences: Vec<u64> = built
            .messages
            .iter()
            .filter(|m| m.source == proto::ContextSource::History as i32)
            .map(|m| m.sequence)
            .collect();
        assert_eq!(sequences, expected, "{format:?}: no hole in the history");
    }
}

#[tokio::test]
async fn responses_items_appended_without_their_reasoning_lose_their_ids_in_packs() {
    let app = spawn_app(StoreKind::InMemory).await;
    // A history imported as Responses input items, its reasoning left out by the caller.
    let items = serde_json::json!([
        {"type": "message", "role": "user", "content": "Look it up."},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Found ", "annotations": []},
                     {"type": "output_text", "text": "it.", "annotations": []}]},
        {"type": "message", "role": "user", "content": "Thanks."}
    ]);
    let request = proto::AppendMessageRequest {
        conversation_id: "ids".into(),
        native: Some(proto::NativeItems {
            format: proto::Format::OpenaiResponses as i32,
            json: items.to_string(),
        }),
        ..Default::default()
    };
    app.client.clone().append_message(request).await.unwrap();
    let built = app.pack("ids", proto::Format::OpenaiResponses, 4_000).await;
    let rendered: Value = serde_json::from_str(&built.rendered).unwrap();
    for item in rendered.as_array().unwrap() {
        assert!(item.get("id").is_none(), "an id without its reasoning: {item}");
    }
    assert!(built.rendered.contains("Found it."), "{}", built.rendered);
    // History keeps what was appended.
    let listed = proto::ListMessagesRequest {
        conversation_id: "ids".into(),
        format: Some(proto::Format::OpenaiResponses as i32),
        ..Default::default()
    };
    let history = app
        .client
        .clone()
        .list_messages(listed)
        .await
        .unwrap()
        .into_inner()
        .rendered;
    assert!(
        history.contains("\"fc_1\"") && history.contains("\"msg_1\""),
        "{history}"
    );
}
