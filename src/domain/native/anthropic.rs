//! Anthropic Messages: a `Message` response, or an array of `messages` entries.
//!
//! An assistant turn is one message; its text blocks' texts make `content` (joined as they
//! are: cited text comes in fragments), `thinking` / `redacted_thinking` its reasoning,
//! `tool_use` its calls; every other block (server tools, MCP, containers...) stays native.
//! A user turn's `tool_result` blocks become tool messages, and its other blocks one user
//! message after them (text joined with newlines, images and documents as attachments).
//! `cache_control` markers are dropped: packs place their own.

use serde_json::Value;

use super::{
    NativeContent, Parsed, ROOT, arguments_text, array, count, decode_base64, leftover, mime_of_uri,
    native_message, required_str, str_at, type_of,
};
use crate::domain::{
    format::Format,
    message::{Attachment, AttachmentSource, Message, Provider, Reasoning, Role, ToolCall, Usage},
    violation::Violations,
};

/// Block types only a user turn carries.
const USER_ONLY: [&str; 4] = ["tool_result", "image", "document", "search_result"];

/// Block types only an assistant turn carries (of those ctxd models).
const ASSISTANT_ONLY: [&str; 3] = ["tool_use", "thinking", "redacted_thinking"];

pub(super) fn parse(value: &Value, parsed: &mut Parsed, v: &mut Violations) {
    match value {
        Value::Array(entries) => {
            for (i, entry) in entries.iter().enumerate() {
                turn(entry, &format!("{ROOT}[{i}]"), parsed, v);
            }
        }
        Value::Object(_) if value.get("content").is_some() => {
            if let Some(role) = str_at(value, "role").filter(|r| *r != "assistant") {
                v.add(
                    format!("{ROOT}.role"),
                    format!("a response is the assistant's, not `{role}`"),
                );
            }
            let path = format!("{ROOT}.content");
            let blocks = array(&value["content"], &path, "content", v);
            let mut message = assistant(blocks, &path, v);
            message.usage = value.get("usage").map(usage).unwrap_or_default();
            parsed.push(message, ROOT.into());
        }
        _ => v.add(
            ROOT,
            "expected an Anthropic `Message` object or an array of `messages` entries",
        ),
    }
}

/// One `messages` entry.
fn turn(entry: &Value, path: &str, parsed: &mut Parsed, v: &mut Violations) {
    let Some(role) = required_str(entry, "role", path, v) else {
        return;
    };
    let content_path = format!("{path}.content");
    match (role, entry.get("content")) {
        ("user" | "assistant" | "system", Some(Value::String(text))) => {
            let role = match role {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                _ => Role::System,
            };
            parsed.push(Message::text(role, text.clone()), path.into());
        }
        ("system", Some(Value::Array(blocks))) => {
            let texts: Vec<&str> = blocks.iter().filter_map(|b| str_at(b, "text")).collect();
            parsed.push(Message::text(Role::System, texts.join("\n")), path.into());
        }
        ("assistant", Some(Value::Array(blocks))) => {
            parsed.push(assistant(blocks, &content_path, v), path.into())
        }
        ("user", Some(Value::Array(blocks))) => user(blocks, &content_path, parsed, v),
        ("user" | "assistant" | "system", _) => v.add(content_path, "must be a string or an array of blocks"),
        (other, _) => v.add(
            format!("{path}.role"),
            format!("`{other}` is not an Anthropic role (`user`, `assistant` or `system`)"),
        ),
    }
}

/// An assistant turn's blocks as one message.
fn assistant(blocks: &[Value], path: &str, v: &mut Violations) -> Message {
    let mut message = native_message(Role::Assistant, native(blocks));
    let mut text_seen = false;
    for (j, block) in blocks.iter().enumerate() {
        let path = format!("{path}[{j}]");
        let Some(kind) = type_of(block, &path, v) else {
            continue;
        };
        let position = u32::from(text_seen) + message.tool_calls.len() as u32;
        match kind {
            "text" => {
                if let Some(text) = required_str(block, "text", &path, v) {
                    message.content.push_str(text);
                    text_seen = true;
                }
            }
            "thinking" => {
                let mut r = Reasoning::new(Provider::Anthropic, kind);
                r.text = required_str(block, "thinking", &path, v)
                    .unwrap_or_default()
                    .into();
                r.signature = required_str(block, "signature", &path, v)
                    .unwrap_or_default()
                    .into();
                r.position = position;
                message.reasoning.push(r);
            }
            "redacted_thinking" => {
                let mut r = Reasoning::new(Provider::Anthropic, kind);
                r.data = required_str(block, "data", &path, v).unwrap_or_default().into();
                r.position = position;
                message.reasoning.push(r);
            }
            "tool_use" => {
                let id = required_str(block, "id", &path, v).unwrap_or_default();
                let name = required_str(block, "name", &path, v).unwrap_or_default();
                if !block.get("input").is_some_and(Value::is_object) {
                    v.add(format!("{path}.input"), "must be a JSON object");
                }
                message
                    .tool_calls
                    .push(ToolCall::new(id, name, arguments_text(block.get("input"))));
            }
            kind if USER_ONLY.contains(&kind) => v.add(
                format!("{path}.type"),
                format!("a `{kind}` block belongs in a user turn"),
            ),
            // Server tools, MCP, containers and types to come: kept as they are.
            _ => {}
        }
    }
    message
}

/// A user turn: its tool results, then the rest as one user message.
fn user(blocks: &[Value], path: &str, parsed: &mut Parsed, v: &mut Violations) {
    let mut rest = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let block_path = format!("{path}[{j}]");
        match type_of(block, &block_path, v) {
            None => {}
            Some("tool_result") => parsed.push(tool_result(block, &block_path, v), block_path),
            Some(kind) if ASSISTANT_ONLY.contains(&kind) => v.add(
                format!("{block_path}.type"),
                format!("a `{kind}` block belongs in an assistant turn"),
            ),
            Some(_) => rest.push((j, block)),
        }
    }
    let Some(&(first, _)) = rest.first() else {
        return;
    };
    let kept: Vec<Value> = rest.iter().map(|(_, b)| (*b).clone()).collect();
    let mut message = native_message(Role::User, native(&kept));
    let mut texts = Vec::new();
    for (j, block) in rest {
        let block_path = format!("{path}[{j}]");
        match str_at(block, "type") {
            Some("text") => texts.push(required_str(block, "text", &block_path, v).unwrap_or_default()),
            Some("image" | "document") => {
                if let Some(a) = attachment_from(block.get("source"), &format!("{block_path}.source"), v) {
                    message.attachments.push(a);
                }
            }
            _ => {}
        }
    }
    message.content = texts.join("\n");
    parsed.push(message, format!("{path}[{first}]"));
}

/// An image or document block's `source` as an attachment: base64 and plain-text data inline,
/// URLs by reference; a Files API id has no attachment form (the block stays native).
fn attachment_from(source: Option<&Value>, path: &str, v: &mut Violations) -> Option<Attachment> {
    let source = source?;
    let media_type = || {
        str_at(source, "media_type")
            .unwrap_or("application/octet-stream")
            .to_owned()
    };
    match str_at(source, "type")? {
        "base64" => {
            let data = required_str(source, "data", path, v)?;
            let bytes = decode_base64(data, &format!("{path}.data"), v)?;
            Some(Attachment::new(
                media_type(),
                String::new(),
                AttachmentSource::Data(bytes),
            ))
        }
        "text" => Some(Attachment::new(
            media_type(),
            String::new(),
            AttachmentSource::Data(required_str(source, "data", path, v)?.as_bytes().to_vec()),
        )),
        "url" => {
            let url = required_str(source, "url", path, v)?;
            Some(Attachment::new(
                mime_of_uri(url),
                String::new(),
                AttachmentSource::Uri(url.into()),
            ))
        }
        _ => None,
    }
}

/// A `tool_result` block as a tool message; its text parts make `content`.
fn tool_result(block: &Value, path: &str, v: &mut Violations) -> Message {
    let mut message = native_message(Role::Tool, native_block(block));
    message.tool_call_id = required_str(block, "tool_use_id", path, v).map(str::to_owned);
    message.content = match block.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| str_at(p, "type") == Some("text"))
            .filter_map(|p| str_at(p, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(_) => {
            v.add(
                format!("{path}.content"),
                "must be a string or an array of blocks",
            );
            String::new()
        }
    };
    message
}

/// Blocks as stored: without `cache_control` (packs place their own markers).
fn native(blocks: &[Value]) -> NativeContent {
    NativeContent::new(
        Format::AnthropicMessages,
        Value::Array(blocks.iter().map(without_cache_control).collect()),
    )
}

fn native_block(block: &Value) -> NativeContent {
    let mut block = without_cache_control(block);
    if let Some(Value::Array(parts)) = block.get_mut("content") {
        for part in parts.iter_mut() {
            *part = without_cache_control(part);
        }
    }
    NativeContent::new(Format::AnthropicMessages, block)
}

fn without_cache_control(block: &Value) -> Value {
    let mut block = block.clone();
    if let Value::Object(map) = &mut block {
        map.remove("cache_control");
    }
    block
}

/// A response's usage: input counts cache reads and writes too.
fn usage(usage: &Value) -> Usage {
    let cached = count(usage, "/cache_read_input_tokens");
    Usage {
        input_tokens: count(usage, "/input_tokens") + cached + count(usage, "/cache_creation_input_tokens"),
        output_tokens: count(usage, "/output_tokens"),
        cached_input_tokens: cached,
        reasoning_tokens: 0,
    }
}

pub(super) fn strip_reasoning(json: &mut Value) {
    if let Value::Array(blocks) = json {
        blocks.retain(|b| !matches!(str_at(b, "type"), Some("thinking" | "redacted_thinking")));
    }
}

pub(super) fn extra(json: &Value) -> Vec<Value> {
    let blocks: Vec<&Value> = match json {
        Value::Array(blocks) => blocks.iter().collect(),
        block => vec![block],
    };
    let mut out = Vec::new();
    for block in blocks {
        match str_at(block, "type") {
            Some("text") => out.extend(leftover(block, &["type", "text"])),
            Some("tool_use") => out.extend(leftover(block, &["type", "id", "name", "input"])),
            Some("thinking" | "redacted_thinking" | "image" | "document") => {}
            Some("tool_result") => {
                out.extend(leftover(block, &["type", "tool_use_id", "content", "is_error"]));
                if let Some(Value::Array(parts)) = block.get("content") {
                    let counted =
                        |p: &&Value| !matches!(str_at(p, "type"), Some("text" | "image" | "document"));
                    out.extend(parts.iter().filter(counted).cloned());
                }
            }
            _ => out.push(block.clone()),
        }
    }
    out
}
