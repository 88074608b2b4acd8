//! OpenAI Chat Completions: a `ChatCompletion` (its one choice's message), or an array of
//! `messages`. Each message is one ctxd message; its JSON is kept (without null fields) only
//! when ctxd's own rendering of it would differ: a refusal, content parts, a developer role,
//! custom tool calls, audio, annotations.

use serde_json::{Map, Value};

use super::{
    NativeContent, Parsed, ROOT, array, count, decode_base64, leftover, mime_of_uri, required_str, str_at,
};
use crate::domain::{
    format::Format,
    message::{Attachment, AttachmentSource, Message, Role, ToolCall, Usage},
    violation::Violations,
};

/// The fields a request message takes; packs send only these (a response message's
/// `annotations` stay stored, and `audio` goes back as its id).
const REQUEST_FIELDS: [&str; 7] = [
    "role",
    "content",
    "name",
    "refusal",
    "tool_calls",
    "tool_call_id",
    "audio",
];

pub(super) fn parse(value: &Value, parsed: &mut Parsed, v: &mut Violations) {
    match value {
        Value::Array(messages) => {
            for (i, entry) in messages.iter().enumerate() {
                let path = format!("{ROOT}[{i}]");
                if let Some(message) = message(entry, &path, v) {
                    parsed.push(message, path);
                }
            }
        }
        Value::Object(_) if value.get("choices").is_some() => {
            let path = format!("{ROOT}.choices");
            let choices = array(&value["choices"], &path, "choices", v);
            if choices.len() != 1 {
                v.add(path, format!("{} choices: append one (n = 1)", choices.len()));
                return;
            }
            let path = format!("{ROOT}.choices[0].message");
            let entry = choices[0].get("message").unwrap_or(&Value::Null);
            if let Some(mut message) = message(entry, &path, v) {
                message.usage = value.get("usage").map(usage).unwrap_or_default();
                parsed.push(message, path);
            }
        }
        _ => v.add(
            ROOT,
            "expected a `ChatCompletion` object or an array of `messages`",
        ),
    }
}

fn message(entry: &Value, path: &str, v: &mut Violations) -> Option<Message> {
    let Some(object) = entry.as_object() else {
        v.add(path, "must be a JSON object");
        return None;
    };
    let stored: Map<String, Value> = object
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(k, value)| (k.clone(), value.clone()))
        .collect();
    let role = match required_str(entry, "role", path, v)? {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => {
            v.add(format!("{path}.role"), format!("`{other}` is not a Chat Completions role this API takes (`function` is replaced by `tool`)"));
            return None;
        }
    };
    let mut message = Message::text(role, String::new());
    message.name = str_at(entry, "name").unwrap_or_default().into();
    content(entry, path, &mut message, v);
    if message.content.is_empty() {
        message.content = str_at(entry, "refusal").unwrap_or_default().into();
    }
    if role == Role::Tool {
        message.tool_call_id = required_str(entry, "tool_call_id", path, v).map(str::to_owned);
    }
    if let Some(calls) = entry.get("tool_calls").filter(|c| !c.is_null()) {
        let calls_path = format!("{path}.tool_calls");
        for (k, call) in array(calls, &calls_path, "tool_calls", v).iter().enumerate() {
            message
                .tool_calls
                .extend(tool_call(call, &format!("{calls_path}[{k}]"), v));
        }
    }
    // Append drops it again where ctxd's own rendering gives it back
    // (`append::parse_native`).
    message.native = Some(NativeContent::new(Format::OpenAiChat, Value::Object(stored)));
    Some(message)
}

/// `content`: a string, or parts (text, images, audio, files, refusals).
fn content(entry: &Value, path: &str, message: &mut Message, v: &mut Violations) {
    let parts = match entry.get("content") {
        None | Some(Value::Null) => return,
        Some(Value::String(text)) => {
            message.content = text.clone();
            return;
        }
        Some(Value::Array(parts)) => parts,
        Some(_) => {
            v.add(
                format!("{path}.content"),
                "must be a string, null or an array of parts",
            );
            return;
        }
    };
    let mut texts = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        let part_path = format!("{path}.content[{k}]");
        match str_at(part, "type") {
            Some("text") => texts.extend(str_at(part, "text")),
            Some("refusal") => texts.extend(str_at(part, "refusal")),
            Some("image_url") => {
                if let Some(url) = part.pointer("/image_url/url").and_then(Value::as_str) {
                    let source = AttachmentSource::Uri(url.into());
                    message.attachments.push(Attachment {
                        mime_type: mime_of_uri(url),
                        filename: String::new(),
                        source,
                        width: 0,
                        height: 0,
                    });
                }
            }
            Some("input_audio") => {
                let data = part
                    .pointer("/input_audio/data")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let format = part
                    .pointer("/input_audio/format")
                    .and_then(Value::as_str)
                    .unwrap_or("wav");
                if let Some(bytes) = decode_base64(data, &format!("{part_path}.input_audio.data"), v) {
                    let source = AttachmentSource::Data(bytes);
                    message.attachments.push(Attachment {
                        mime_type: format!("audio/{format}"),
                        filename: String::new(),
                        source,
                        width: 0,
                        height: 0,
                    });
                }
            }
            Some("file") => {}
            _ => v.add(
                format!("{part_path}.type"),
                "not a Chat Completions content part type",
            ),
        }
    }
    message.content = texts.join("\n");
}

fn tool_call(call: &Value, path: &str, v: &mut Violations) -> Option<ToolCall> {
    let id = required_str(call, "id", path, v)?;
    match str_at(call, "type") {
        Some("custom") => {
            let custom = call.get("custom").unwrap_or(&Value::Null);
            let name = required_str(custom, "name", &format!("{path}.custom"), v)?;
            Some(ToolCall::new(
                id,
                name,
                str_at(custom, "input").unwrap_or_default(),
            ))
        }
        _ => {
            let function = call.get("function").unwrap_or(&Value::Null);
            let function_path = format!("{path}.function");
            let name = required_str(function, "name", &function_path, v)?;
            Some(ToolCall::new(
                id,
                name,
                required_str(function, "arguments", &function_path, v)?,
            ))
        }
    }
}

/// A stored message as a request takes it: the request fields, `audio` as its id.
pub fn request_form(stored: &Value) -> Value {
    let mut out = Map::new();
    for (key, value) in stored.as_object().into_iter().flatten() {
        if !REQUEST_FIELDS.contains(&key.as_str()) || value.is_null() {
            continue;
        }
        let value = match key.as_str() {
            "audio" => match value.get("id") {
                Some(id) => serde_json::json!({ "id": id }),
                None => continue,
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count(usage, "/prompt_tokens"),
        output_tokens: count(usage, "/completion_tokens"),
        cached_input_tokens: count(usage, "/prompt_tokens_details/cached_tokens"),
        reasoning_tokens: count(usage, "/completion_tokens_details/reasoning_tokens"),
    }
}

pub(super) fn extra(json: &Value) -> Vec<Value> {
    leftover(
        &request_form(json),
        &["role", "content", "name", "tool_calls", "tool_call_id", "refusal"],
    )
    .into_iter()
    .collect()
}
