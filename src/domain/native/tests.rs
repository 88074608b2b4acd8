//! Native JSON in, the same JSON out: each format's types round-trip through history
//! rendering JSON-equal, other formats get none of it, and what a format does not allow is
//! refused at its JSON path.

use std::time::SystemTime;

use serde_json::{Value, json};

use crate::domain::append::parse_native as parse;
use crate::domain::{
    Sequence, StoredMessage, Violations,
    context::{Format, TokenCounts, render::render_history},
    message::Role,
};

fn stored(json: &Value, format: Format) -> Vec<StoredMessage> {
    let mut v = Violations::default();
    let parsed = parse(format, &json.to_string(), "test", &mut v);
    assert!(v.is_empty(), "{v}");
    parsed
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| StoredMessage {
            sequence: Sequence::ZERO.plus(i as u64 + 1),
            created_at: SystemTime::UNIX_EPOCH,
            tokens: TokenCounts::of(&message, crate::domain::token_counts::Tokenizers::ALL),
            reasoning_tokens: TokenCounts::of_native(&message),
            native_tokens: TokenCounts::of_native_json(&message),
            call_sequence: None,
            turn_anchor: None,
            message,
        })
        .collect()
}

fn history(log: &[StoredMessage], format: Format) -> Value {
    serde_json::from_str(&render_history(log, format)).unwrap()
}

fn violations(format: Format, json: Value) -> Vec<String> {
    let mut v = Violations::default();
    parse(format, &json.to_string(), "test", &mut v);
    v.iter().map(|f| f.field.clone()).collect()
}

/// Markers of each format's native data, which no other format may carry.
const FOREIGN: [&str; 9] = [
    "signature",
    "server_tool_use",
    "encrypted_content",
    "web_search_call",
    "compaction",
    "thoughtSignature",
    "executableCode",
    "citations",
    "redacted_thinking",
];

fn assert_nothing_foreign(log: &[StoredMessage], own: Format) {
    for format in [
        Format::OpenAiChat,
        Format::AnthropicMessages,
        Format::OpenAiResponses,
        Format::Gemini,
    ] {
        if format == own {
            continue;
        }
        let text = render_history(log, format);
        for marker in FOREIGN {
            assert!(!text.contains(marker), "{format:?} carries {marker}: {text}");
        }
    }
}

fn anthropic_turns() -> Value {
    json!([
        {"role": "user", "content": [{"type": "text", "text": "Who won, and what is 2+2?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Search first.", "signature": "EqQBCkYIBxgCKkD"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "final score"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
                {"type": "web_search_result", "url": "https://example.com/a", "title": "A", "encrypted_content": "EqgfCio", "page_age": null}
            ]},
            {"type": "text", "text": "The home team won", "citations": [
                {"type": "web_search_result_location", "url": "https://example.com/a", "title": "A", "encrypted_index": "Eo8BCio", "cited_text": "Home team wins"}
            ]},
            {"type": "text", "text": ", and I will compute the sum."},
            {"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 2, "b": 2}}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "4"}], "is_error": false}]}
    ])
}

#[test]
fn anthropic_turns_come_back_json_equal_and_nowhere_else() {
    let turns = anthropic_turns();
    let log = stored(&turns, Format::AnthropicMessages);
    assert_eq!(log.len(), 3);
    let assistant = &log[1].message;
    assert_eq!(
        assistant.content,
        "The home team won, and I will compute the sum."
    );
    assert_eq!(assistant.reasoning.len(), 2);
    assert_eq!(assistant.tool_calls[0].arguments, r#"{"a":2,"b":2}"#);
    assert_eq!(log[2].message.role, Role::Tool);
    assert!(
        log[1].native_tokens.o200k_base > 0,
        "server tool blocks and citations count"
    );
    assert_eq!(
        history(&log, Format::AnthropicMessages),
        json!({"messages": turns})
    );
    assert_nothing_foreign(&log, Format::AnthropicMessages);
}

#[test]
fn thinking_after_a_compaction_or_fallback_block_keeps_its_place() {
    for opener in [
        json!({"type": "compaction", "content": "Summary of the earlier turns.", "signature": "c2ln"}),
        json!({"type": "fallback", "from": "claude-a", "to": "claude-b"}),
    ] {
        let turns = json!([
            {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
            {"role": "assistant", "content": [
                opener,
                {"type": "thinking", "thinking": "Next step.", "signature": "EqQBCkYIBxgC"},
                {"type": "text", "text": "Calling the tool."},
                {"type": "tool_use", "id": "toolu_02", "name": "add", "input": {"a": 1, "b": 2}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": [{"type": "text", "text": "3"}], "is_error": false}]}
        ]);
        let log = stored(&turns, Format::AnthropicMessages);
        assert_eq!(
            history(&log, Format::AnthropicMessages),
            json!({"messages": turns}),
            "the block order came back as stored"
        );
    }
}

#[test]
fn an_anthropic_response_object_is_one_assistant_message_with_its_usage() {
    let response = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": anthropic_turns()[1]["content"].clone(),
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 5}
    });
    let log = stored(&response, Format::AnthropicMessages);
    assert_eq!(log.len(), 1);
    let usage = log[0].message.usage;
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens),
        (135, 50, 30)
    );
    let rendered = history(&log, Format::AnthropicMessages);
    assert_eq!(rendered["messages"][0]["content"], response["content"]);
}

#[test]
fn responses_items_come_back_json_equal_and_nowhere_else() {
    let items = json!([
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}], "encrypted_content": "gAAAAB"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "paris weather"}},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "phase": "final_answer", "content": [
            {"type": "output_text", "text": "It is 18C.", "annotations": [{"type": "url_citation", "url": "https://example.com", "title": "W", "start_index": 0, "end_index": 9}]}
        ]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAC"}
    ]);
    let log = stored(&items, Format::OpenAiResponses);
    let roles: Vec<Role> = log.iter().map(|m| m.message.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert_eq!(log[1].message.tool_calls[0].item_id, "fc_1");
    assert_eq!(log[3].message.content, "It is 18C.");
    assert_eq!(history(&log, Format::OpenAiResponses), items);
    assert_nothing_foreign(&log, Format::OpenAiResponses);
}

#[test]
fn a_shell_call_output_keeps_its_output_outside_responses() {
    let output = json!([{"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]);
    let items = json!([
        {"type": "message", "role": "user", "content": "List the files."},
        {"type": "shell_call", "call_id": "call_sh", "action": {"commands": ["ls"]}, "status": "completed"},
        {"type": "shell_call_output", "call_id": "call_sh", "output": output}
    ]);
    let log = stored(&items, Format::OpenAiResponses);
    let result = &log[2].message;
    assert_eq!(result.role, Role::Tool);
    assert_eq!(
        result.content,
        output.to_string(),
        "the output as its JSON, not empty"
    );
    for format in [Format::OpenAiChat, Format::AnthropicMessages, Format::Gemini] {
        let rendered = history(&log, format).to_string();
        assert!(rendered.contains("a.txt"), "{format:?}: {rendered}");
    }
    assert_eq!(history(&log, Format::OpenAiResponses), items);
}

#[test]
fn gemini_contents_come_back_json_equal_and_nowhere_else() {
    let contents = json!([
        {"role": "user", "parts": [{"text": "Run it"}]},
        {"role": "model", "parts": [
            {"text": "Plan the code.", "thought": true, "thoughtSignature": "c2lnMQ=="},
            {"executableCode": {"language": "PYTHON", "code": "print(2+2)"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}},
            {"functionCall": {"name": "save", "args": {"value": 4}}, "thoughtSignature": "c2lnMg=="}
        ]},
        {"role": "user", "parts": [{"functionResponse": {"name": "save", "response": {"output": "saved"}}}]},
        {"role": "model", "parts": [{"text": "Saved 4."}]}
    ]);
    let log = stored(&contents, Format::Gemini);
    let call = &log[1].message.tool_calls[0];
    assert!(call.id.starts_with("gemini_"), "{}", call.id);
    assert_eq!(log[2].message.tool_call_id.as_deref(), Some(call.id.as_str()));
    assert_eq!(log[2].message.content, "saved");
    assert_eq!(history(&log, Format::Gemini), json!({"contents": contents}));
    assert_nothing_foreign(&log, Format::Gemini);
}

#[test]
fn a_chat_completion_keeps_its_refusal_sends_null_content_as_a_string_and_plain_messages_stay_plain() {
    let completion = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null, "message": {
            "role": "assistant", "content": null, "refusal": null, "annotations": [],
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2}}
    });
    let log = stored(&completion, Format::OpenAiChat);
    assert_eq!(log[0].message.usage.reasoning_tokens, 2);
    let rendered = history(&log, Format::OpenAiChat);
    assert_eq!(
        rendered[0],
        json!({"role": "assistant", "content": "", "annotations": [], "tool_calls": completion["choices"][0]["message"]["tool_calls"]})
            .as_object()
            .map(|o| {
                let mut o = o.clone();
                o.remove("annotations");
                Value::Object(o)
            })
            .unwrap()
    );
    let refusal = json!([{"role": "assistant", "content": null, "refusal": "I can't help with that."}]);
    let log = stored(&refusal, Format::OpenAiChat);
    assert_eq!(log[0].message.content, "I can't help with that.");
    assert_eq!(
        history(&log, Format::OpenAiChat),
        json!([{"role": "assistant", "content": "", "refusal": "I can't help with that."}])
    );
    let plain = json!([{"role": "user", "content": "hi"}]);
    let log = stored(&plain, Format::OpenAiChat);
    assert!(
        log[0].message.native.is_none(),
        "what ctxd renders the same needs no native JSON"
    );
    assert_eq!(history(&log, Format::OpenAiChat), plain);
}

#[test]
fn what_a_format_does_not_allow_is_refused_at_its_json_path() {
    assert_eq!(
        violations(Format::AnthropicMessages, json!({"nope": 1})),
        ["native.json"]
    );
    assert_eq!(
        violations(
            Format::AnthropicMessages,
            json!([{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x"}]}])
        ),
        ["native.json[0].content[0].type"]
    );
    assert_eq!(
        violations(
            Format::AnthropicMessages,
            json!([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": 3}]}])
        ),
        ["native.json[0].content[0].input"]
    );
    assert_eq!(
        violations(
            Format::OpenAiResponses,
            json!([{"type": "function_call", "name": "f", "arguments": "{}"}])
        ),
        ["native.json[0].call_id"]
    );
    let mut v = Violations::default();
    let unbound = json!([{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]);
    let parsed = parse(Format::Gemini, &unbound.to_string(), "test", &mut v);
    assert!(v.is_empty() && parsed.messages[0].tool_call_id.is_none(), "{v}");
    assert_eq!(
        parsed.unbound,
        [(0, "f".to_owned())],
        "bound to the conversation's open call on append"
    );
    assert_eq!(
        violations(Format::OpenAiChat, json!([{"role": "function", "content": "x"}])),
        ["native.json[0].role"]
    );
    assert_eq!(violations(Format::OpenAiChat, json!("[")), ["native.json"]);
    assert_eq!(violations(Format::Gemini, json!([])), ["native.json"]);
}

#[test]
fn the_new_responses_items_round_trip_json_equal() {
    // openai 3.57's item types, with their reasoning: a turn of tool search, a program and its
    // calls, shell and patch calls with their outputs, extra tools, then a compaction.
    let items = json!([
        {"type": "message", "role": "user", "content": "Find a tool, run it, fix the file."},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"},
        {"type": "tool_search_call", "id": "tsc_1", "arguments": {"query": "calendar"}, "execution": "server", "status": "completed"},
        {"type": "tool_search_output", "id": "tso_1", "tools": [], "execution": "server", "status": "completed"},
        {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": []},
        {"type": "program", "id": "prg_1", "call_id": "call_p", "code": "await x()", "fingerprint": "fp"},
        {"type": "program_output", "id": "prgo_1", "call_id": "call_p", "result": "ok", "status": "completed"},
        {"type": "shell_call", "id": "sh_1", "call_id": "call_sh", "action": {"commands": ["ls"]}, "status": "completed"},
        {"type": "shell_call_output", "call_id": "call_sh", "output": [{"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
        {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_ap", "status": "completed",
         "operation": {"type": "update_file", "path": "a.txt", "diff": "@@\n-a\n+b\n"}},
        {"type": "apply_patch_call_output", "call_id": "call_ap", "status": "completed", "output": "applied"},
        {"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAAD"}
    ]);
    let log = stored(&items, Format::OpenAiResponses);
    assert_eq!(history(&log, Format::OpenAiResponses), items);
    assert_nothing_foreign(&log, Format::OpenAiResponses);
}

#[test]
fn completed_responses_turns_send_no_item_id_their_missing_reasoning_would_orphan() {
    let items = json!([
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"},
        {"type": "tool_search_call", "id": "tsc_1", "arguments": {"query": "calendar"}, "execution": "server", "status": "completed"},
        {"type": "tool_search_output", "id": "tso_1", "tools": [], "execution": "server", "status": "completed"},
        {"type": "program", "id": "prg_1", "call_id": "call_p", "code": "await x()", "fingerprint": "fp"},
        {"type": "program_output", "id": "prgo_1", "call_id": "call_p", "result": "ok", "status": "completed"},
        {"type": "shell_call", "id": "sh_1", "call_id": "call_sh", "action": {"commands": ["ls"]}, "status": "completed"},
        {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_ap", "status": "completed",
         "operation": {"type": "delete_file", "path": "a.txt"}}
    ]);
    let mut log = stored(&items, Format::OpenAiResponses);
    let native = log[0].message.native.as_mut().unwrap();
    native.strip_reasoning();
    let kept = native.json.as_array().unwrap();
    let kinds: Vec<&str> = kept.iter().filter_map(|i| i["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "tool_search_call",
            "tool_search_output",
            "shell_call",
            "apply_patch_call"
        ],
        "reasoning goes, and the program items whose id is required"
    );
    assert!(kept.iter().all(|i| i.get("id").is_none()), "{kept:?}");
}

#[test]
fn completed_turns_lose_reasoning_but_keep_server_tool_blocks() {
    let mut log = stored(&anthropic_turns(), Format::AnthropicMessages);
    let native = log[1].message.native.as_mut().unwrap();
    native.strip_reasoning();
    let kinds: Vec<&str> = native
        .json
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "server_tool_use",
            "web_search_tool_result",
            "text",
            "text",
            "tool_use"
        ]
    );
}
