//! Renders a pack as the JSON a provider accepts. Object keys are emitted in sorted order and
//! nothing depends on time or hashing, so the same pack renders to the same bytes.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value, json};

use super::{ContextMessage, Format, cost::context_text};
use crate::domain::message::{Attachment, AttachmentSource, Message, Role};

/// Renders `messages` (in pack order) in `format` as compact JSON text.
pub fn render(messages: &[ContextMessage], format: Format) -> String {
    let value = match format {
        Format::OpenAiChat => Value::Array(messages.iter().map(|m| openai_message(&m.message)).collect()),
        Format::AnthropicMessages => anthropic(messages),
    };
    value.to_string()
}

/// One message in OpenAI Chat Completions form.
fn openai_message(message: &Message) -> Value {
    let text = context_text(message).into_owned();
    let mut out = Map::new();
    out.insert("role".into(), json!(message.role.as_str()));
    match message.role {
        Role::Tool => {
            out.insert(
                "tool_call_id".into(),
                json!(message.tool_call_id.clone().unwrap_or_default()),
            );
            out.insert("content".into(), json!(text));
        }
        Role::Assistant => {
            let content = if text.is_empty() && !message.tool_calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            out.insert("content".into(), content);
            if !message.tool_calls.is_empty() {
                let calls = message
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
        }
        Role::User if !message.attachments.is_empty() => {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(json!({"type": "text", "text": text}));
            }
            parts.extend(message.attachments.iter().map(openai_attachment));
            out.insert("content".into(), Value::Array(parts));
        }
        Role::System | Role::User => {
            out.insert("content".into(), json!(text));
        }
    }
    if !message.name.is_empty() && message.role != Role::Tool {
        out.insert("name".into(), json!(message.name));
    }
    Value::Object(out)
}

fn openai_attachment(attachment: &Attachment) -> Value {
    let is_image = attachment.mime_type.starts_with("image/");
    match (&attachment.source, is_image) {
        (AttachmentSource::Uri(uri), true) => json!({"type": "image_url", "image_url": {"url": uri}}),
        (AttachmentSource::Data(data), true) => {
            json!({"type": "image_url", "image_url": {"url": data_uri(&attachment.mime_type, data)}})
        }
        (AttachmentSource::Data(data), false) => json!({"type": "file", "file": {
            "filename": attachment.filename,
            "file_data": data_uri(&attachment.mime_type, data),
        }}),
        (AttachmentSource::Uri(uri), false) => {
            json!({"type": "text", "text": attachment_reference(attachment, uri)})
        }
    }
}

fn data_uri(mime_type: &str, data: &[u8]) -> String {
    format!("data:{mime_type};base64,{}", STANDARD.encode(data))
}

fn attachment_reference(attachment: &Attachment, uri: &str) -> String {
    format!(
        "[attachment {} ({}): {uri}]",
        attachment.filename, attachment.mime_type
    )
}

/// The pack in Anthropic Messages form: system-role messages joined into `system`, tool calls
/// as `tool_use` blocks, results as `tool_result` blocks in user turns, consecutive turns of one
/// role merged so that roles alternate.
fn anthropic(messages: &[ContextMessage]) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages.iter().map(|m| &m.message) {
        let (role, blocks) = match m.role {
            Role::System => {
                system.push(context_text(m).into_owned());
                continue;
            }
            Role::User => ("user", user_blocks(m)),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": context_text(m),
                })],
            ),
            Role::Assistant => ("assistant", assistant_blocks(m)),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, mut content)| {
            // Results must open the user turn that follows the calls.
            content.sort_by_key(|block| block["type"] != "tool_result");
            json!({"role": role, "content": content})
        })
        .collect();
    let mut out = Map::new();
    out.insert("messages".into(), Value::Array(messages));
    if !system.is_empty() {
        out.insert("system".into(), json!(system.join("\n\n")));
    }
    Value::Object(out)
}

fn user_blocks(message: &Message) -> Vec<Value> {
    let text = context_text(message);
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for attachment in &message.attachments {
        let kind = match attachment.mime_type.as_str() {
            mime if mime.starts_with("image/") => "image",
            "application/pdf" => "document",
            _ => {
                let reference = match &attachment.source {
                    AttachmentSource::Uri(uri) => attachment_reference(attachment, uri),
                    AttachmentSource::Data(data) => format!(
                        "[attachment {} ({}), {} bytes, not shown]",
                        attachment.filename,
                        attachment.mime_type,
                        data.len()
                    ),
                };
                blocks.push(json!({"type": "text", "text": reference}));
                continue;
            }
        };
        let source = match &attachment.source {
            AttachmentSource::Data(data) => {
                json!({"type": "base64", "media_type": attachment.mime_type, "data": STANDARD.encode(data)})
            }
            AttachmentSource::Uri(uri) => json!({"type": "url", "url": uri}),
        };
        blocks.push(json!({"type": kind, "source": source}));
    }
    blocks
}

fn assistant_blocks(message: &Message) -> Vec<Value> {
    let text = context_text(message);
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &message.tool_calls {
        // Anthropic wants an object; arguments that are not a JSON object are passed under `_raw`
        // rather than dropped, so the model still sees what it said.
        let input = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ if call.arguments.trim().is_empty() => json!({}),
            _ => json!({"_raw": call.arguments}),
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}
