//! OpenAI Responses: a `Response` object (its `output` items), or an array of `input` items.
//!
//! Consecutive model-side items (messages of role `assistant`, reasoning, calls, server-side
//! tool items, compaction, types to come) make one assistant message: output text makes
//! `content`, `reasoning` items its reasoning, client-executed calls (`function_call`,
//! `custom_tool_call`, `computer_call`, `local_shell_call`, `shell_call`, `apply_patch_call`)
//! its tool calls; the rest stays native. Each `*_output` item is a tool message; a user,
//! system or developer message item is a message of its own.

use serde_json::{Map, Value, json};

use super::{
    NativeContent, Parsed, ROOT, array, count, decode_base64, leftover, mime_of_uri, native_message,
    required_str, str_at,
};
use crate::domain::{
    format::Format,
    message::{Attachment, AttachmentSource, Message, Provider, Reasoning, Role, ToolCall, Usage},
    violation::Violations,
};

/// Input items that answer a client-executed call.
const OUTPUTS: [&str; 6] = [
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
];

/// Client-executed calls other than functions: the tool name is the item type and the
/// arguments are the item's other fields.
const TYPED_CALLS: [&str; 4] = [
    "computer_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
];

pub(super) fn parse(value: &Value, parsed: &mut Parsed, v: &mut Violations) {
    match value {
        Value::Array(items) => input_items(items, parsed, v),
        // A `/responses/compact` result (`CompactedResponse`): a new window, the conversation's
        // user messages then one compaction item, that replaces what it covers. Not a reply: it
        // is kept whole as native items, with no text of its own (packs of other formats, which
        // cannot read the compaction, keep the history it covers).
        Value::Object(_) if str_at(value, "object") == Some("response.compaction") => {
            let path = format!("{ROOT}.output");
            let items = array(&value["output"], &path, "output", v).to_vec();
            let mut message = native_message(
                Role::Assistant,
                NativeContent::new(Format::OpenAiResponses, Value::Array(items)),
            );
            message.usage = value.get("usage").map(usage).unwrap_or_default();
            parsed.push(message, ROOT.into());
        }
        Value::Object(_) if value.get("output").is_some() => {
            let path = format!("{ROOT}.output");
            let items: Vec<(usize, &Value)> = array(&value["output"], &path, "output", v)
                .iter()
                .enumerate()
                .collect();
            let mut message = assistant(&items, &path, v);
            message.response_id = str_at(value, "id").unwrap_or_default().into();
            message.usage = value.get("usage").map(usage).unwrap_or_default();
            parsed.push(message, ROOT.into());
        }
        _ => v.add(
            ROOT,
            "expected a Responses `Response` object or an array of `input` items",
        ),
    }
}

fn input_items(items: &[Value], parsed: &mut Parsed, v: &mut Violations) {
    let mut group: Vec<(usize, &Value)> = Vec::new();
    let flush = |group: &mut Vec<(usize, &Value)>, parsed: &mut Parsed, v: &mut Violations| {
        if let Some(&(first, _)) = group.first() {
            parsed.push(assistant(group, ROOT, v), format!("{ROOT}[{first}]"));
            group.clear();
        }
    };
    for (j, item) in items.iter().enumerate() {
        let path = format!("{ROOT}[{j}]");
        if !item.is_object() {
            v.add(path, "must be a JSON object");
            continue;
        }
        match (str_at(item, "type"), str_at(item, "role")) {
            (None | Some("message"), Some("assistant")) => group.push((j, item)),
            (None | Some("message"), role) => {
                flush(&mut group, parsed, v);
                if let Some(message) = other_message(item, role, &path, v) {
                    parsed.push(message, path);
                }
            }
            (Some(kind), _) if OUTPUTS.contains(&kind) => {
                flush(&mut group, parsed, v);
                parsed.push(tool_output(item, kind, &path, v), path);
            }
            (Some(_), _) => group.push((j, item)),
        }
    }
    flush(&mut group, parsed, v);
}

/// Model-side items as one assistant message; `base` is the path of the array they are in.
fn assistant(items: &[(usize, &Value)], base: &str, v: &mut Violations) -> Message {
    let kept: Vec<Value> = items.iter().map(|(_, item)| (*item).clone()).collect();
    let mut message = native_message(
        Role::Assistant,
        NativeContent::new(Format::OpenAiResponses, Value::Array(kept)),
    );
    let mut texts: Vec<&str> = Vec::new();
    let mut message_ids = Vec::new();
    for &(j, item) in items {
        let path = format!("{base}[{j}]");
        let position = u32::from(!texts.is_empty()) + message.tool_calls.len() as u32;
        match str_at(item, "type") {
            None | Some("message") => {
                texts.extend(output_texts(item, &path, v));
                message_ids.extend(str_at(item, "id"));
                if let Some(phase) = str_at(item, "phase") {
                    message.content_phase = phase.into();
                }
            }
            Some("reasoning") => {
                let mut r = reasoning(item, &path, v);
                r.position = position;
                message.reasoning.push(r);
            }
            Some(kind) => {
                if let Some(call) = call(item, kind, &path, v) {
                    message.tool_calls.push(call);
                } else if OUTPUTS.contains(&kind) {
                    v.add(
                        format!("{path}.type"),
                        format!("a `{kind}` item is input, not output"),
                    );
                }
            }
        }
    }
    message.content = texts.concat();
    if let [id] = message_ids[..] {
        message.content_item_id = id.into();
    }
    message
}

/// The text of an assistant message item: a string, or its `output_text` and `refusal` parts.
fn output_texts<'a>(item: &'a Value, path: &str, v: &mut Violations) -> Vec<&'a str> {
    match item.get("content") {
        Some(Value::String(text)) => vec![text],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match str_at(p, "type") {
                Some("refusal") => str_at(p, "refusal"),
                _ => str_at(p, "text"),
            })
            .collect(),
        _ => {
            v.add(
                format!("{path}.content"),
                "must be a string or an array of content parts",
            );
            Vec::new()
        }
    }
}

fn reasoning(item: &Value, path: &str, v: &mut Violations) -> Reasoning {
    let mut r = Reasoning::new(Provider::OpenAi, "reasoning");
    r.id = required_str(item, "id", path, v).unwrap_or_default().into();
    r.data = str_at(item, "encrypted_content").unwrap_or_default().into();
    let texts = |key: &str| -> Vec<String> {
        item.get(key)
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| str_at(p, "text"))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    r.summary = texts("summary");
    r.text = texts("content").join("\n");
    r
}

/// A client-executed call item as a tool call; None for other items.
fn call(item: &Value, kind: &str, path: &str, v: &mut Violations) -> Option<ToolCall> {
    let id = |v: &mut Violations| {
        required_str(item, "call_id", path, v)
            .unwrap_or_default()
            .to_owned()
    };
    let mut call = match kind {
        "function_call" => {
            let id = id(v);
            let name = required_str(item, "name", path, v).unwrap_or_default();
            ToolCall::new(
                id,
                name,
                required_str(item, "arguments", path, v).unwrap_or_default(),
            )
        }
        "custom_tool_call" => {
            let id = id(v);
            let name = required_str(item, "name", path, v).unwrap_or_default();
            ToolCall::new(id, name, required_str(item, "input", path, v).unwrap_or_default())
        }
        kind if TYPED_CALLS.contains(&kind) => {
            let rest: Map<String, Value> = item
                .as_object()?
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "type" | "id" | "call_id" | "status"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            ToolCall::new(id(v), kind, Value::Object(rest).to_string())
        }
        _ => return None,
    };
    if kind == "function_call" {
        call.item_id = str_at(item, "id").unwrap_or_default().into();
    }
    Some(call)
}

/// A user, system or developer message item.
fn other_message(item: &Value, role: Option<&str>, path: &str, v: &mut Violations) -> Option<Message> {
    let role = match role {
        Some("user") => Role::User,
        Some("system" | "developer") => Role::System,
        Some(other) => {
            v.add(
                format!("{path}.role"),
                format!("`{other}` is not a Responses message role"),
            );
            return None;
        }
        None => {
            v.add(format!("{path}.role"), "a message item needs a role");
            return None;
        }
    };
    let mut message = native_message(role, NativeContent::new(Format::OpenAiResponses, json!([item])));
    match item.get("content") {
        Some(Value::String(text)) => message.content = text.clone(),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (k, part) in parts.iter().enumerate() {
                match str_at(part, "type") {
                    Some("input_text" | "output_text") => texts.extend(str_at(part, "text")),
                    Some("input_image") => message.attachments.extend(image(part)),
                    Some("input_file") => {
                        message
                            .attachments
                            .extend(file(part, &format!("{path}.content[{k}]"), v))
                    }
                    _ => {}
                }
            }
            message.content = texts.join("\n");
        }
        _ => v.add(
            format!("{path}.content"),
            "must be a string or an array of content parts",
        ),
    }
    Some(message)
}

fn image(part: &Value) -> Option<Attachment> {
    let url = str_at(part, "image_url")?;
    Some(Attachment::new(
        mime_of_uri(url),
        String::new(),
        AttachmentSource::Uri(url.into()),
    ))
}

fn file(part: &Value, path: &str, v: &mut Violations) -> Option<Attachment> {
    let filename = str_at(part, "filename").unwrap_or_default().to_owned();
    if let Some(url) = str_at(part, "file_url") {
        let source = AttachmentSource::Uri(url.into());
        return Some(Attachment {
            mime_type: mime_of_uri(url),
            filename,
            source,
            width: 0,
            height: 0,
        });
    }
    let data = str_at(part, "file_data")?;
    let (mime_type, base64) = match data
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((mime, base64)) => (mime.to_owned(), base64),
        None => ("application/pdf".to_owned(), data),
    };
    let bytes = decode_base64(base64, &format!("{path}.file_data"), v)?;
    Some(Attachment {
        mime_type,
        filename,
        source: AttachmentSource::Data(bytes),
        width: 0,
        height: 0,
    })
}

/// A `*_output` item as a tool message: a string output is its content, text parts are
/// joined, anything else is its JSON text.
fn tool_output(item: &Value, kind: &str, path: &str, v: &mut Violations) -> Message {
    let mut message = native_message(
        Role::Tool,
        NativeContent::new(Format::OpenAiResponses, json!([item])),
    );
    let call_id = match kind {
        // Its `id` is the call's.
        "local_shell_call_output" => str_at(item, "call_id").or_else(|| str_at(item, "id")),
        _ => required_str(item, "call_id", path, v),
    };
    message.tool_call_id = call_id.map(str::to_owned);
    message.content = match item.get("output") {
        Some(Value::String(text)) => text.clone(),
        // Text parts are joined; a list without text (`shell_call_output`'s stdout, stderr and
        // outcome objects) goes as its JSON, as other outputs do, never as nothing.
        Some(Value::Array(parts)) if parts.iter().any(|p| str_at(p, "text").is_some()) => parts
            .iter()
            .filter_map(|p| str_at(p, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
        None => {
            v.add(format!("{path}.output"), "an output item needs `output`");
            String::new()
        }
    };
    message
}

fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "/input_tokens"),
        output_tokens: count(usage, "/output_tokens"),
        cached_input_tokens: count(usage, "/input_tokens_details/cached_tokens"),
        reasoning_tokens: count(usage, "/output_tokens_details/reasoning_tokens"),
    }
}

/// Output items the server ran within a response, whose input form requires their id: like
/// the response's other items, they pair with its reasoning.
const SERVER_ITEMS: [&str; 7] = [
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
];

/// Items whose input form requires their id, which pairs them with the response's reasoning:
/// without the reasoning they cannot be sent, and go with it (programmatic tool calling's
/// `program` and its `program_output`, openai 3.57's `Program` and `ProgramOutput`).
pub(crate) const ID_BOUND_ITEMS: [&str; 2] = ["program", "program_output"];

/// Items whose input form takes an id but does not need it: without the reasoning they stay,
/// without their id (the API refuses an item id whose reasoning is missing).
pub(crate) const ID_OPTIONAL_ITEMS: [&str; 8] = [
    "function_call",
    "custom_tool_call",
    "compaction",
    "shell_call",
    "apply_patch_call",
    "tool_search_call",
    "tool_search_output",
    "additional_tools",
];

/// Reasoning items go, and the server-side items of the response ([`SERVER_ITEMS`]) and the
/// items whose id is required ([`ID_BOUND_ITEMS`]); message and call items lose the ids that
/// pair them with it ([`ID_OPTIONAL_ITEMS`]): a message becomes a plain assistant message of
/// its text, keeping its phase. A compaction item stays, without its id.
pub(super) fn strip_reasoning(json: &mut Value) {
    let Value::Array(items) = json else {
        return;
    };
    items.retain(|item| {
        !matches!(str_at(item, "type"), Some(kind)
            if kind == "reasoning" || SERVER_ITEMS.contains(&kind) || ID_BOUND_ITEMS.contains(&kind))
    });
    for item in items.iter_mut() {
        let is_message = matches!(str_at(item, "type"), None | Some("message"))
            && str_at(item, "role") == Some("assistant");
        if is_message && item.get("id").is_some() {
            let mut v = Violations::default();
            let text = output_texts(item, "", &mut v).concat();
            let mut plain = json!({"type": "message", "role": "assistant", "content": text});
            if let Some(phase) = item.get("phase") {
                plain["phase"] = phase.clone();
            }
            *item = plain;
        } else if str_at(item, "type").is_some_and(|kind| ID_OPTIONAL_ITEMS.contains(&kind))
            && let Value::Object(map) = item
        {
            map.remove("id");
        }
    }
}

pub(super) fn extra(json: &Value) -> Vec<Value> {
    let Value::Array(items) = json else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match str_at(item, "type") {
            None | Some("message") => {
                if let Some(Value::Array(parts)) = item.get("content") {
                    out.extend(parts.iter().filter_map(|p| {
                        leftover(
                            p,
                            &[
                                "type",
                                "text",
                                "refusal",
                                "image_url",
                                "file_data",
                                "file_url",
                                "filename",
                                "detail",
                            ],
                        )
                    }));
                }
            }
            Some(kind) if kind == "reasoning" || OUTPUTS.contains(&kind) || TYPED_CALLS.contains(&kind) => {}
            Some("function_call" | "custom_tool_call") => {}
            Some(_) => out.push(item.clone()),
        }
    }
    out
}
