//! Replies as the providers return them, appended natively (docs/native.md): the generated
//! reply's text and calls, with the blocks and items ctxd keeps opaque around them (server
//! tool blocks, citations and annotations, web search, tool search and compaction items, a
//! paused compaction alone, executed code, refusals), parsed by `ctxd::domain::native`.
//! Opaque strings carry the provider's marker, so the checker finds any that reach another
//! format.

use ctxd::domain::{Message, Provider, ToolCall, Violations, append::parse_native, context::Format};
use serde_json::{Value, json};

use super::{Rng, gemini_signature};

/// `reply` (text and calls as generated, reasoning as [`super::add_reasoning`] gave it) as the
/// JSON its provider returns, parsed back into a message carrying that JSON.
pub(crate) fn native_reply(rng: &mut Rng, reply: &Message, tag: &str) -> Message {
    let (format, json) = match reply.native_provider() {
        Some(Provider::Anthropic) => (Format::AnthropicMessages, anthropic(rng, reply, tag)),
        Some(Provider::OpenAi) => (Format::OpenAiResponses, responses(rng, reply, tag)),
        Some(Provider::Gemini) => (Format::Gemini, gemini(rng, reply, tag)),
        // A model without reasoning on the Responses API: its items carry ids all the same.
        None if rng.chance(30) => (
            Format::OpenAiResponses,
            without_reasoning(responses(rng, reply, tag)),
        ),
        None => (Format::OpenAiChat, chat(rng, reply, tag)),
    };
    let mut v = Violations::default();
    let parsed = parse_native(format, &json.to_string(), tag, &mut v);
    assert!(v.is_empty(), "generated native JSON refused: {v}\n{json}");
    let [message] = <[Message; 1]>::try_from(parsed.messages).expect("one reply");
    message
}

/// A Response as a model without reasoning returns it: no reasoning item, no server tools.
fn without_reasoning(mut response: Value) -> Value {
    if let Some(Value::Array(items)) = response.get_mut("output") {
        items.retain(|item| {
            !matches!(
                item["type"].as_str(),
                Some("reasoning" | "web_search_call" | "tool_search_call" | "tool_search_output")
            )
        });
    }
    response
}

/// Arguments as a JSON object (what a provider returns), whatever the generated text was.
fn input(arguments: &str) -> Value {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"raw": arguments}))
}

/// Visible text, split in two (cited text comes in fragments) when it is long enough.
fn fragments(text: &str) -> Vec<&str> {
    if text.trim().is_empty() {
        return vec![];
    }
    let halves = match text.char_indices().nth(text.chars().count() / 2) {
        Some((at, _)) if at > 0 => vec![&text[..at], &text[at..]],
        _ => vec![text],
    };
    // Claude returns blank blocks too (ctxd leaves them out of packs): keep some.
    halves.into_iter().collect()
}

fn anthropic(rng: &mut Rng, reply: &Message, tag: &str) -> Value {
    // A paused compaction (`pause_after_compaction`): the response holds the block alone and
    // stops for the caller to append it before asking again.
    if reply.tool_calls.is_empty() && rng.chance(5) {
        let block = json!({"type": "compaction", "content": format!("ANTHROPIC-NATIVE-summary-{tag}"),
                           "signature": format!("ANTHROPIC-NATIVE-cmpsig-{tag}")});
        return json!({"id": format!("msg_{tag}"), "type": "message", "role": "assistant", "model": "claude",
                      "content": [block], "stop_reason": "compaction", "stop_sequence": null,
                      "usage": {"input_tokens": 10, "output_tokens": 5}});
    }
    let mut blocks = Vec::new();
    // Threshold compaction (anthropic 2.14's beta `compact_20260112`): the response opens with
    // the compaction block, before its thinking; sometimes after a failed one (no content).
    if rng.chance(10) {
        if rng.chance(30) {
            blocks.push(json!({"type": "compaction", "content": null}));
        }
        blocks.push(
            json!({"type": "compaction", "content": format!("ANTHROPIC-NATIVE-summary-{tag}"),
                           "signature": format!("ANTHROPIC-NATIVE-cmpsig-{tag}")}),
        );
    }
    blocks.push(
        json!({"type": "thinking", "thinking": "Plan.", "signature": format!("ANTHROPIC-NATIVE-sig-{tag}")}),
    );
    if rng.chance(30) {
        blocks.push(json!({"type": "redacted_thinking", "data": format!("ANTHROPIC-NATIVE-red-{tag}")}));
    }
    if rng.chance(60) {
        let id = format!("srvtoolu_{tag}");
        blocks.push(
            json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": "weather"}}),
        );
        blocks.push(
            json!({"type": "web_search_tool_result", "tool_use_id": id, "content": [{
                "type": "web_search_result", "url": "https://example.com/w", "title": "Weather",
                "encrypted_content": format!("ANTHROPIC-NATIVE-page-{tag}"), "page_age": null
            }]}),
        );
    }
    for (k, fragment) in fragments(&reply.content).into_iter().enumerate() {
        let mut block = json!({"type": "text", "text": fragment});
        if k == 0 && rng.chance(50) {
            block["citations"] = json!([{
                "type": "web_search_result_location", "url": "https://example.com/w", "title": "Weather",
                "encrypted_index": format!("ANTHROPIC-NATIVE-cite-{tag}"), "cited_text": "sunny"
            }]);
        }
        blocks.push(block);
    }
    for call in &reply.tool_calls {
        blocks.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input(&call.arguments)}),
        );
    }
    json!({"id": format!("msg_{tag}"), "type": "message", "role": "assistant", "model": "claude",
           "content": blocks, "stop_reason": "end_turn", "stop_sequence": null,
           "usage": {"input_tokens": 10, "output_tokens": 5}})
}

fn responses(rng: &mut Rng, reply: &Message, tag: &str) -> Value {
    let mut items = Vec::new();
    if rng.chance(15) {
        items.push(json!({"type": "compaction", "id": format!("cmp_{tag}"), "encrypted_content": format!("OPENAI-NATIVE-cmp-{tag}")}));
    }
    items.push(
        json!({"type": "reasoning", "id": format!("rs_OPENAI-NATIVE-{tag}"), "summary": [],
                      "encrypted_content": format!("OPENAI-NATIVE-enc-{tag}")}),
    );
    // Server-side tool search (openai 3.57's `tool_search_call` and `tool_search_output`).
    if rng.chance(15) {
        items.push(
            json!({"type": "tool_search_call", "id": format!("tsc_OPENAI-NATIVE-{tag}"),
                          "arguments": {"query": "calendar"}, "execution": "server", "status": "completed"}),
        );
        items.push(
            json!({"type": "tool_search_output", "id": format!("tso_OPENAI-NATIVE-{tag}"),
                          "tools": [], "execution": "server", "status": "completed"}),
        );
    }
    if rng.chance(50) {
        items.push(
            json!({"type": "web_search_call", "id": format!("ws_OPENAI-NATIVE-{tag}"), "status": "completed",
                          "action": {"type": "search", "query": "weather"}}),
        );
    }
    if !reply.content.is_empty() {
        let mut text = json!({"type": "output_text", "text": reply.content, "annotations": []});
        if rng.chance(50) {
            text["annotations"] = json!([{"type": "url_citation", "url": "https://example.com/OPENAI-NATIVE",
                                          "title": "W", "start_index": 0, "end_index": 1}]);
        }
        items.push(
            json!({"type": "message", "id": format!("msg_OPENAI-NATIVE-{tag}"), "role": "assistant",
                          "status": "completed", "content": [text]}),
        );
    }
    // A second reasoning block just before calls that carry no item id (issue 60, case 6a).
    let second_reasoning = !reply.tool_calls.is_empty() && rng.chance(20);
    if second_reasoning {
        items.push(
            json!({"type": "reasoning", "id": format!("rs_OPENAI-NATIVE-{tag}-2"), "summary": [],
                          "encrypted_content": format!("OPENAI-NATIVE-enc2-{tag}")}),
        );
    }
    // Programmatic tool calling (openai 3.57's `program` and `program_output`): the model's
    // program ran on the server before the calls it left to the client.
    if !reply.tool_calls.is_empty() && rng.chance(15) {
        items.push(json!({"type": "program", "id": format!("prg_OPENAI-NATIVE-{tag}"), "call_id": format!("prgc_{tag}"),
                          "code": "await tools.lookup({})", "fingerprint": format!("OPENAI-NATIVE-fp-{tag}")}));
        items.push(json!({"type": "program_output", "id": format!("prgo_OPENAI-NATIVE-{tag}"), "call_id": format!("prgc_{tag}"),
                          "result": "done", "status": "completed"}));
    }
    for (k, call) in reply.tool_calls.iter().enumerate() {
        // Client-executed built-in tools (openai 3.57's `shell_call` and `apply_patch_call`),
        // answered by their own output items (see [`native_output`]).
        let mut item = match rng.below(8) {
            0 => {
                json!({"type": "shell_call", "id": format!("sh_OPENAI-NATIVE-{tag}-{k}"), "call_id": call.id,
                        "action": {"commands": ["ls -la", "cat notes.txt"], "timeout_ms": 1000, "max_output_length": 4096},
                        "status": "completed"})
            }
            1 => {
                json!({"type": "apply_patch_call", "id": format!("ap_OPENAI-NATIVE-{tag}-{k}"), "call_id": call.id,
                        "operation": {"type": "update_file", "path": "src/notes.txt", "diff": "@@ -1 +1 @@\n-old\n+new\n"},
                        "status": "completed"})
            }
            _ => {
                json!({"type": "function_call", "id": format!("fc_OPENAI-NATIVE-{tag}-{k}"), "call_id": call.id,
                        "name": "lookup", "arguments": input(&call.arguments).to_string(), "status": "completed"})
            }
        };
        if second_reasoning {
            item.as_object_mut().expect("an object").remove("id");
        }
        items.push(item);
    }
    json!({"id": format!("resp_{tag}"), "object": "response", "status": "completed", "output": items,
           "usage": {"input_tokens": 10, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 2},
                     "output_tokens_details": {"reasoning_tokens": 3}}})
}

/// The result of `call` when it is one of the Responses built-in tools the client runs
/// (`shell_call`, `apply_patch_call`): most often its own output item appended natively, as
/// the agent sends it back; otherwise (`None`) a plain tool result, which packs must turn into
/// that output item.
pub(crate) fn native_output(rng: &mut Rng, call: &ToolCall, tag: &str) -> Option<Message> {
    let item = match call.name.as_str() {
        "shell_call" => {
            json!({"type": "shell_call_output", "call_id": call.id, "max_output_length": 4096, "output": [
            {"stdout": format!("notes.txt\n{tag}\n"), "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": "", "stderr": "cat: no such file", "outcome": {"type": "exit", "exit_code": 1}}]})
        }
        "apply_patch_call" => {
            json!({"type": "apply_patch_call_output", "call_id": call.id, "status": "completed", "output": "patched"})
        }
        _ => return None,
    };
    if rng.chance(30) {
        return None;
    }
    let mut v = Violations::default();
    let parsed = parse_native(Format::OpenAiResponses, &json!([item]).to_string(), tag, &mut v);
    assert!(v.is_empty(), "generated native output refused: {v}\n{item}");
    let [message] = <[Message; 1]>::try_from(parsed.messages).expect("one result");
    Some(message)
}

/// A `/responses/compact` result (openai 3.57's `CompactedResponse`): the conversation's user
/// messages `users`, then the compaction item, appended natively as the window it is.
pub(crate) fn compact_result(users: &[&str], tag: &str) -> Message {
    let mut output: Vec<Value> = users
        .iter()
        .map(|text| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}))
        .collect();
    output.push(
        json!({"type": "compaction", "id": format!("cmp_OPENAI-NATIVE-window-{tag}"),
                       "encrypted_content": format!("OPENAI-NATIVE-window-{tag}")}),
    );
    let json = json!({"id": format!("resp_cmp_{tag}"), "object": "response.compaction", "created_at": 1_764_000_000,
                      "output": output, "usage": {"input_tokens": 900, "output_tokens": 60,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 960}});
    let mut v = Violations::default();
    let parsed = parse_native(Format::OpenAiResponses, &json.to_string(), tag, &mut v);
    assert!(v.is_empty(), "generated compact result refused: {v}\n{json}");
    let [message] = <[Message; 1]>::try_from(parsed.messages).expect("one window");
    message
}

fn gemini(rng: &mut Rng, reply: &Message, tag: &str) -> Value {
    let mut parts =
        vec![json!({"text": "Plan.", "thought": true, "thoughtSignature": gemini_signature("thought", tag)})];
    if rng.chance(50) {
        parts.push(json!({"executableCode": {"language": "PYTHON", "code": format!("print('GEMINI-NATIVE-{tag}')")}}));
        parts.push(json!({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": format!("GEMINI-NATIVE-{tag}\n")}}));
    }
    if !reply.content.trim().is_empty() {
        parts.push(json!({"text": reply.content, "thoughtSignature": gemini_signature("text", tag)}));
    }
    for (k, call) in reply.tool_calls.iter().enumerate() {
        let mut part =
            json!({"functionCall": {"id": call.id, "name": "lookup", "args": input(&call.arguments)}});
        if k == 0 {
            part["thoughtSignature"] = json!(gemini_signature("call", tag));
        }
        parts.push(part);
    }
    json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 3}})
}

fn chat(rng: &mut Rng, reply: &Message, tag: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": null, "refusal": null, "annotations": []});
    match reply.tool_calls.is_empty() {
        true if rng.chance(30) => message["refusal"] = json!(format!("I can't help with that ({tag}).")),
        // Calls often come without text: `content` null, as the API returns it.
        false if rng.chance(50) => {}
        _ => message["content"] = json!(reply.content),
    }
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": "lookup", "arguments": c.arguments}}))
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({"id": format!("chatcmpl-{tag}"), "object": "chat.completion", "choices": [
        {"index": 0, "message": message, "finish_reason": "stop", "logprobs": null}
    ], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}
