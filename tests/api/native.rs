//! Provider-native in and out over gRPC, on both stores: what a provider returned appended as
//! it is, read back JSON-equal in its format, an Agents SDK-style session (items in, items
//! out, pop the last), usage totals through rewind and fork, refusals at JSON paths.

use ctxd::proto;
use serde_json::{Value, json};
use tonic::{Code, Status};

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, assert_field_violation, spawn_app, user},
};

contract_tests!(
    an_agents_session_adds_gets_and_pops_responses_items,
    response_objects_carry_usage_into_the_conversation_totals,
    an_anthropic_turn_goes_into_its_own_packs_as_it_came,
    native_json_the_format_refuses_stores_nothing,
    a_gemini_loop_answers_calls_without_ids_in_a_later_append,
    a_response_without_an_id_skips_calls_its_batch_answers_by_id,
    a_keyed_retry_of_a_bound_response_replays,
);

async fn append_native(
    app: &TestApp,
    conversation: &str,
    format: proto::Format,
    json: &Value,
) -> Result<proto::AppendMessageResponse, Status> {
    let request = proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        native: Some(proto::NativeItems {
            format: format as i32,
            json: json.to_string(),
        }),
        ..Default::default()
    };
    app.client
        .clone()
        .append_message(request)
        .await
        .map(|r| r.into_inner())
}

async fn rendered(app: &TestApp, conversation: &str, format: proto::Format) -> Value {
    let request = proto::ListMessagesRequest {
        conversation_id: conversation.into(),
        format: Some(format as i32),
        page_size: 1000,
        ..Default::default()
    };
    let page = app
        .client
        .clone()
        .list_messages(request)
        .await
        .unwrap()
        .into_inner();
    serde_json::from_str(&page.rendered).unwrap()
}

async fn conversation(app: &TestApp, id: &str) -> proto::Conversation {
    let request = proto::GetConversationRequest {
        conversation_id: id.into(),
    };
    app.client
        .clone()
        .get_conversation(request)
        .await
        .unwrap()
        .into_inner()
        .conversation
        .unwrap()
}

/// What an OpenAI Agents SDK session does with ctxd as its store: `add_items` after each turn
/// (the run's new items, as the SDK hands them over), `get_items` as ListMessages in the
/// Responses format, `pop_item` as a rewind of the last message.
async fn an_agents_session_adds_gets_and_pops_responses_items(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let turn_one = json!([
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB1"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C and sunny"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "It is 18C and sunny.", "annotations": []}]}
    ]);
    let stored = append_native(&app, "s", proto::Format::OpenaiResponses, &turn_one)
        .await
        .unwrap();
    assert_eq!((stored.first_sequence, stored.last_sequence), (1, 4));
    assert_eq!(
        rendered(&app, "s", proto::Format::OpenaiResponses).await,
        turn_one
    );
    let turn_two = json!([
        {"role": "user", "content": "And tomorrow?"},
        {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Rain.", "annotations": []}]}
    ]);
    append_native(&app, "s", proto::Format::OpenaiResponses, &turn_two)
        .await
        .unwrap();
    let mut all: Vec<Value> = turn_one.as_array().unwrap().clone();
    all.extend(turn_two.as_array().unwrap().iter().cloned());
    assert_eq!(
        rendered(&app, "s", proto::Format::OpenaiResponses).await,
        Value::Array(all.clone())
    );
    // pop_item: the last item goes, and the next append takes its place.
    let popped = app
        .client
        .clone()
        .rewind_conversation(proto::RewindConversationRequest {
            conversation_id: "s".into(),
            after_sequence: 5,
            expected_last_sequence: Some(6),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(popped.messages_removed, 1);
    all.pop();
    assert_eq!(
        rendered(&app, "s", proto::Format::OpenaiResponses).await,
        Value::Array(all)
    );
    let again = append_native(&app, "s", proto::Format::OpenaiResponses, &json!([turn_two[1]]))
        .await
        .unwrap();
    assert_eq!(again.first_sequence, 6);
    // Another format gets the turns without OpenAI's native data.
    let chat = rendered(&app, "s", proto::Format::OpenaiChat).await.to_string();
    assert!(
        !chat.contains("encrypted_content")
            && !chat.contains("fc_1")
            && chat.contains("It is 18C and sunny."),
        "{chat}"
    );
}

async fn response_objects_carry_usage_into_the_conversation_totals(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("u", vec![user("Hi")]).await;
    let anthropic = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello."}], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 90}
    });
    append_native(&app, "u", proto::Format::AnthropicMessages, &anthropic)
        .await
        .unwrap();
    app.append_ok("u", vec![user("More")]).await;
    let response = json!({
        "id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "More.", "annotations": []}]}],
        "usage": {"input_tokens": 120, "output_tokens": 40, "total_tokens": 160,
                  "input_tokens_details": {"cached_tokens": 100}, "output_tokens_details": {"reasoning_tokens": 32}}
    });
    append_native(&app, "u", proto::Format::OpenaiResponses, &response)
        .await
        .unwrap();
    let usage = |c: proto::Conversation| c.usage.unwrap_or_default();
    let total = usage(conversation(&app, "u").await);
    assert_eq!(
        (
            total.input_tokens,
            total.output_tokens,
            total.cached_input_tokens,
            total.reasoning_tokens
        ),
        (220, 43, 190, 32)
    );
    let messages = app.all_messages("u").await.unwrap();
    assert_eq!(messages[3].usage.unwrap_or_default().reasoning_tokens, 32);
    assert_eq!(messages[3].response_id, "resp_1");
    // A fork through the first reply holds its usage only; a rewind takes the second's back.
    app.client
        .clone()
        .fork_conversation(proto::ForkConversationRequest {
            conversation_id: "u".into(),
            through_sequence: 2,
            new_conversation_id: "f".into(),
        })
        .await
        .unwrap();
    assert_eq!(usage(conversation(&app, "f").await).input_tokens, 100);
    app.client
        .clone()
        .rewind_conversation(proto::RewindConversationRequest {
            conversation_id: "u".into(),
            after_sequence: 3,
            expected_last_sequence: None,
        })
        .await
        .unwrap();
    assert_eq!(usage(conversation(&app, "u").await).output_tokens, 3);
}

/// BuildContext in the Anthropic format gives the current turn's blocks as the API returned
/// them (the pack adds its cache markers); another format gets text and calls only.
async fn an_anthropic_turn_goes_into_its_own_packs_as_it_came(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let blocks = json!([
        {"type": "thinking", "thinking": "Look it up.", "signature": "EqQBCkYIBxgC"},
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "ctxd"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [{"type": "web_search_result", "url": "https://example.com", "title": "E", "encrypted_content": "Eqgf"}]},
        {"type": "text", "text": "Found it", "citations": [{"type": "web_search_result_location", "url": "https://example.com", "title": "E", "encrypted_index": "Eo8B", "cited_text": "ctxd"}]},
        {"type": "tool_use", "id": "toolu_01", "name": "open", "input": {"url": "https://example.com"}}
    ]);
    let turns = json!([
        {"role": "user", "content": [{"type": "text", "text": "Find ctxd."}]},
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "page text"}]}
    ]);
    append_native(&app, "a", proto::Format::AnthropicMessages, &turns)
        .await
        .unwrap();
    let build = |format: proto::Format| {
        let mut client = app.client.clone();
        async move {
            let request = proto::BuildContextRequest {
                conversation_id: "a".into(),
                budget: Some(proto::Budget {
                    max_tokens: 10_000,
                    ..Default::default()
                }),
                format: format as i32,
                ..Default::default()
            };
            let pack = client.build_context(request).await.unwrap().into_inner();
            serde_json::from_str::<Value>(&pack.rendered).unwrap()
        }
    };
    let mut pack = build(proto::Format::AnthropicMessages).await;
    for message in pack["messages"].as_array_mut().unwrap() {
        for block in message["content"].as_array_mut().unwrap() {
            block.as_object_mut().unwrap().remove("cache_control");
        }
    }
    assert_eq!(pack["messages"], turns);
    let gemini = build(proto::Format::Gemini).await.to_string();
    for foreign in ["EqQBCkYIBxgC", "server_tool_use", "citations", "encrypted"] {
        assert!(!gemini.contains(foreign), "{foreign} in {gemini}");
    }
    assert!(gemini.contains("Found it"), "{gemini}");
}

async fn native_json_the_format_refuses_stores_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let bad_block = json!([{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": "not an object"}]}]);
    let status = append_native(&app, "x", proto::Format::AnthropicMessages, &bad_block)
        .await
        .unwrap_err();
    assert_field_violation(&status, "native.json[0].content[0].input");
    // The tool protocol names the item too: an output for a call never made.
    let orphan = json!([{"type": "function_call_output", "call_id": "nope", "output": "x"}]);
    let status = append_native(&app, "x", proto::Format::OpenaiResponses, &orphan)
        .await
        .unwrap_err();
    assert_field_violation(&status, "native.json[0].tool_call_id");
    let not_json = proto::AppendMessageRequest {
        conversation_id: "x".into(),
        native: Some(proto::NativeItems {
            format: proto::Format::Gemini as i32,
            json: "{".into(),
        }),
        ..Default::default()
    };
    let status = app.client.clone().append_message(not_json).await.unwrap_err();
    assert_field_violation(&status, "native.json");
    let both = proto::AppendMessageRequest {
        conversation_id: "x".into(),
        messages: vec![user("hi")],
        native: Some(proto::NativeItems {
            format: 0,
            json: "[]".into(),
        }),
        ..Default::default()
    };
    assert_field_violation(
        &app.client.clone().append_message(both).await.unwrap_err(),
        "native",
    );
    let forged = proto::Message {
        native: Some(proto::NativeItems {
            format: 0,
            json: "{}".into(),
        }),
        ..user("hi")
    };
    let status = app
        .client
        .clone()
        .append_message(crate::helpers::append("x", vec![forged]))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0].native");
    let missing = app.all_messages("x").await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "nothing was stored");
}

/// Gemini's loop as the API runs it: the model content with calls that carry no `id`, then (in
/// a later append, after the tools ran) the user content with the responses, also without ids:
/// each response answers the oldest open call of its name.
async fn a_gemini_loop_answers_calls_without_ids_in_a_later_append(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let asked = json!([
        {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
        {"role": "model", "parts": [
            {"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}
        ]}
    ]);
    append_native(&app, "g", proto::Format::Gemini, &asked)
        .await
        .unwrap();
    let answered = json!([{"role": "user", "parts": [
        {"functionResponse": {"name": "weather", "response": {"output": "18C"}}},
        {"functionResponse": {"name": "weather", "response": {"output": "24C"}}}
    ]}]);
    append_native(&app, "g", proto::Format::Gemini, &answered)
        .await
        .unwrap();
    let messages = app.all_messages("g").await.unwrap();
    let calls: Vec<&str> = messages[1].tool_calls.iter().map(|c| c.id.as_str()).collect();
    let answers: Vec<&str> = messages[2..].iter().map(|m| m.tool_call_id.as_str()).collect();
    assert_eq!(
        calls, answers,
        "each response answers the oldest open call of its name"
    );
    let mut all = asked.as_array().unwrap().clone();
    all.extend(answered.as_array().unwrap().iter().cloned());
    assert_eq!(
        rendered(&app, "g", proto::Format::Gemini).await,
        json!({"contents": all})
    );
    // The same model turn appended again (a repeated question) gets calls of its own.
    append_native(&app, "g", proto::Format::Gemini, &json!([asked[1].clone()]))
        .await
        .unwrap();
    let again = app.all_messages("g").await.unwrap();
    let repeated = &again.last().unwrap().tool_calls;
    assert!(
        repeated.iter().all(|c| !calls.contains(&c.id.as_str())),
        "ids do not collide"
    );
    let answer_both = json!([{"role": "user", "parts": [
        {"functionResponse": {"name": "weather", "response": {"output": "19C"}}},
        {"functionResponse": {"name": "weather", "response": {"output": "25C"}}}
    ]}]);
    append_native(&app, "g", proto::Format::Gemini, &answer_both)
        .await
        .unwrap();
    // No call left open: a third response has nothing to answer.
    let status = append_native(
        &app,
        "g",
        proto::Format::Gemini,
        &json!([answered[0]["parts"][0].clone()].map(|p| json!({"role": "user", "parts": [p]}))),
    )
    .await
    .unwrap_err();
    assert_field_violation(&status, "native.json[0].parts[0].functionResponse.id");
}

/// A server whose `conversation` holds a Gemini turn that calls `lookup` twice, with ids `c1`
/// and `c2`.
async fn with_two_lookups(kind: StoreKind, conversation: &str) -> TestApp {
    let app = spawn_app(kind).await;
    let asked = json!([
        {"role": "user", "parts": [{"text": "Two lookups"}]},
        {"role": "model", "parts": [
            {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": 1}}},
            {"functionCall": {"id": "c2", "name": "lookup", "args": {"q": 2}}}
        ]}
    ]);
    append_native(&app, conversation, proto::Format::Gemini, &asked)
        .await
        .unwrap();
    app
}

/// Results in one batch: one names its call by id, the other by name only; the second binds to
/// the call the first does not answer.
async fn a_response_without_an_id_skips_calls_its_batch_answers_by_id(kind: StoreKind) {
    let app = with_two_lookups(kind, "b").await;
    let answered = json!([{"role": "user", "parts": [
        {"functionResponse": {"id": "c1", "name": "lookup", "response": {"output": "one"}}},
        {"functionResponse": {"name": "lookup", "response": {"output": "two"}}}
    ]}]);
    append_native(&app, "b", proto::Format::Gemini, &answered)
        .await
        .unwrap();
    let messages = app.all_messages("b").await.unwrap();
    let answers: Vec<&str> = messages[2..].iter().map(|m| m.tool_call_id.as_str()).collect();
    assert_eq!(answers, ["c1", "c2"]);
}

/// A keyed append whose response names its call by name only, retried after it was stored:
/// the retry replays, although the call it bound to is answered now and another of the same
/// name is still open.
async fn a_keyed_retry_of_a_bound_response_replays(kind: StoreKind) {
    let app = with_two_lookups(kind, "k").await;
    let answer = json!([{"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {"output": "one"}}}]}]);
    let keyed = || {
        let request = proto::AppendMessageRequest {
            conversation_id: "k".into(),
            idempotency_key: "answer-1".into(),
            native: Some(proto::NativeItems {
                format: proto::Format::Gemini as i32,
                json: answer.to_string(),
            }),
            ..Default::default()
        };
        let mut client = app.client.clone();
        async move { client.append_message(request).await.unwrap().into_inner() }
    };
    let first = keyed().await;
    let retry = keyed().await;
    assert!(
        retry.replayed && retry.first_sequence == first.first_sequence,
        "{retry:?}"
    );
    let messages = app.all_messages("k").await.unwrap();
    assert_eq!(messages.len(), 3, "stored once");
    assert_eq!(messages[2].tool_call_id, "c1");
}
