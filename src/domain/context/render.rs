//! Renders a pack as the JSON a provider accepts. Object keys are emitted in sorted order
//! (except that an Anthropic pack's `system` comes before its `messages`, the order the
//! provider reads and caches them in) and nothing depends on time or hashing, so the same pack
//! renders to the same bytes, and a pack that repeats another's beginning repeats its bytes.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value, json};

use super::{
    ContextMessage, Format,
    cost::{context_text, pack_arguments},
};
use crate::domain::message::{Attachment, AttachmentSource, Message, Role};

/// Renders `messages` (in pack order) in `format` as compact JSON text.
pub fn render(messages: &[ContextMessage], format: Format) -> String {
    match format {
        Format::OpenAiChat => openai_chat(messages),
        Format::AnthropicMessages => anthropic(messages),
    }
}

/// The pack in OpenAI Chat Completions form, written straight into one buffer (this runs on
/// every BuildContext; building a `Value` tree first cost a sixth of the server's CPU). Keys
/// are written in sorted order, byte for byte what [`openai_message`]'s `Value` prints.
fn openai_chat(messages: &[ContextMessage]) -> String {
    let mut out = Vec::with_capacity(messages.iter().map(|m| m.message.content.len() + 64).sum());
    out.push(b'[');
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_openai_message(&mut out, &m.message);
    }
    out.push(b']');
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

fn write_openai_message(out: &mut Vec<u8>, message: &Message) {
    let plain = match message.role {
        Role::User => message.attachments.is_empty(),
        Role::System | Role::Tool | Role::Assistant => true,
    };
    if !plain {
        // Multi-part user content (attachments): rare, rendered through `Value`.
        out.extend_from_slice(openai_message(message).to_string().as_bytes());
        return;
    }
    let text = context_text(message);
    out.extend_from_slice(b"{\"content\":");
    if message.role == Role::Assistant && text.is_empty() && !message.tool_calls.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        push_str(out, &text);
    }
    if !message.name.is_empty() && message.role != Role::Tool {
        out.extend_from_slice(b",\"name\":");
        push_str(out, &message.name);
    }
    out.extend_from_slice(b",\"role\":");
    push_str(out, message.role.as_str());
    if message.role == Role::Tool {
        out.extend_from_slice(b",\"tool_call_id\":");
        push_str(out, message.tool_call_id.as_deref().unwrap_or_default());
    }
    if message.role == Role::Assistant && !message.tool_calls.is_empty() {
        out.extend_from_slice(b",\"tool_calls\":[");
        for (i, call) in message.tool_calls.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"function\":{\"arguments\":");
            push_str(out, &pack_arguments(&call.arguments));
            out.extend_from_slice(b",\"name\":");
            push_str(out, &call.name);
            out.extend_from_slice(b"},\"id\":");
            push_str(out, &call.id);
            out.extend_from_slice(b",\"type\":\"function\"}");
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// Appends `text` as a JSON string literal.
fn push_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("writing to a Vec cannot fail");
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
                        json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": pack_arguments(&c.arguments)}})
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
/// role merged so that roles alternate; prompt-cache breakpoints marked (see
/// [`mark_cache_breakpoints`]).
fn anthropic(messages: &[ContextMessage]) -> String {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages.iter().map(|m| &m.message) {
        let (role, blocks) = match m.role {
            Role::System => {
                let text = context_text(m);
                if !text.trim().is_empty() {
                    system.push(text.into_owned());
                }
                continue;
            }
            Role::User => ("user", user_blocks(m)),
            Role::Tool => ("user", vec![tool_result_block(m)]),
            Role::Assistant => ("assistant", assistant_blocks(m)),
        };
        debug_assert_eq!(blocks.is_empty(), !anthropic_renders(m));
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if let Some(("assistant", content)) = turns.last_mut() {
        trim_final_text(content);
    }
    for (_, content) in &mut turns {
        // Results must open the user turn that follows the calls.
        content.sort_by_key(|block| block["type"] != "tool_result");
    }
    let mut system: Vec<Value> = match system.is_empty() {
        true => Vec::new(),
        false => vec![json!({"type": "text", "text": system.join("\n\n")})],
    };
    mark_cache_breakpoints(&mut system, &mut turns);
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let messages = Value::Array(messages);
    match system.is_empty() {
        true => format!(r#"{{"messages":{messages}}}"#),
        false => format!(r#"{{"system":{},"messages":{messages}}}"#, Value::Array(system)),
    }
}

/// Anthropic caches a prompt prefix up to a block marked with `cache_control`, and reads a
/// cached prefix that ends at most 20 blocks before a marker. Three of the four markers a
/// request may carry are set (one is left for the caller's tool definitions): the end of
/// `system` (system prompt, summary, memory, notice: what changes least), and the last block
/// of each of the last two messages, so that the next call, whose pack repeats this one
/// (DESIGN.md 2.2.3), reads everything up to here from the cache, even after a tool loop added
/// many blocks. Where markers sit is not part of the cached content: moving them from call to
/// call costs nothing.
fn mark_cache_breakpoints(system: &mut [Value], turns: &mut [(&'static str, Vec<Value>)]) {
    let marked = system.last_mut().into_iter().chain(
        turns
            .iter_mut()
            .rev()
            .take(2)
            .filter_map(|(_, content)| content.last_mut()),
    );
    for block in marked {
        if let Value::Object(block) = block {
            block.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }
}

/// The only image types Anthropic accepts as image blocks; other images become a text
/// reference, like any other attachment it cannot take.
const ANTHROPIC_IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// Anthropic refuses a final assistant message that ends in whitespace (it is the prefill the
/// model continues from): the last text block loses its trailing whitespace.
fn trim_final_text(content: &mut [Value]) {
    if let Some(Value::String(text)) = content.last_mut().and_then(|block| block.get_mut("text")) {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
    }
}

/// Whether `message` renders as a turn of an Anthropic pack: system messages go to `system`,
/// and a user or assistant message with neither visible text nor attachments nor calls is left
/// out (Anthropic refuses empty and whitespace-only text blocks).
pub fn anthropic_renders(message: &Message) -> bool {
    let visible = || !context_text(message).trim().is_empty();
    match message.role {
        Role::System => false,
        Role::Tool => true,
        Role::User => !message.attachments.is_empty() || visible(),
        Role::Assistant => !message.tool_calls.is_empty() || visible(),
    }
}

/// A tool result; blank output leaves `content` out (it is optional, and a whitespace-only
/// text is refused).
fn tool_result_block(message: &Message) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
    });
    let text = context_text(message);
    if !text.trim().is_empty() {
        block["content"] = json!(text);
    }
    block
}

fn user_blocks(message: &Message) -> Vec<Value> {
    let text = context_text(message);
    let mut blocks = Vec::new();
    // Anthropic refuses empty and whitespace-only text blocks.
    if !text.trim().is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for attachment in &message.attachments {
        let kind = match attachment.mime_type.as_str() {
            mime if ANTHROPIC_IMAGE_TYPES.contains(&mime) => "image",
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
    if !text.trim().is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &message.tool_calls {
        // Always an object (see `pack_arguments`).
        let input = serde_json::from_str::<Value>(&pack_arguments(&call.arguments))
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"_raw": call.arguments}));
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Sequence,
        context::Source,
        message::{LlmError, ToolCall},
    };

    fn packed(message: Message) -> ContextMessage {
        ContextMessage {
            source: Source::History,
            sequence: Some(Sequence::ZERO.plus(1)),
            tokens: 1,
            message,
        }
    }

    #[test]
    fn anthropic_packs_carry_no_blank_text_no_trailing_prefill_whitespace_and_only_accepted_images() {
        let text = |role, content: &str| packed(Message::text(role, content.into()));
        let svg = Message {
            attachments: vec![Attachment {
                mime_type: "image/svg+xml".into(),
                filename: "logo.svg".into(),
                source: AttachmentSource::Data(b"<svg/>".to_vec()),
            }],
            ..Message::text(Role::User, " ".into())
        };
        let pack = vec![
            packed(svg),
            text(Role::Assistant, " "),
            text(Role::User, "go on"),
            text(Role::Assistant, "Sure: "),
        ];
        let rendered: Value = serde_json::from_str(&render(&pack, Format::AnthropicMessages)).unwrap();
        let messages = rendered["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "the blank assistant turn is gone: {rendered}");
        let first = messages[0]["content"].as_array().unwrap();
        assert_eq!(first.len(), 2, "no blank text block: {first:?}");
        assert!(
            first.iter().all(|b| b["type"] == "text"),
            "an SVG is a reference, not an image block"
        );
        assert_eq!(first[1]["text"], "go on");
        assert_eq!(messages[1]["content"][0]["text"], "Sure:");
    }

    #[test]
    fn the_direct_openai_writer_prints_what_the_value_tree_prints() {
        let text = |role, content: &str| Message::text(role, content.into());
        let messages = vec![
            text(Role::System, "Be \"careful\"\n\t\u{1}é😀"),
            Message {
                name: "ann".into(),
                ..text(Role::User, "hi </script> \\ ")
            },
            Message {
                tool_calls: vec![ToolCall {
                    id: "c\"1".into(),
                    name: "get".into(),
                    arguments: r#"{"a": [1, "x"]}"#.into(),
                }],
                name: "bot".into(),
                ..text(Role::Assistant, "")
            },
            Message {
                tool_call_id: Some("c\"1".into()),
                name: "ignored".into(),
                ..text(Role::Tool, "result")
            },
            Message {
                error: Some(LlmError {
                    code: "timeout".into(),
                    message: "slow".into(),
                    partial_output: "half an answ".into(),
                }),
                ..text(Role::Assistant, "")
            },
            text(Role::Assistant, ""),
        ];
        let packed: Vec<ContextMessage> = messages.into_iter().map(packed).collect();
        let tree = Value::Array(packed.iter().map(|m| openai_message(&m.message)).collect()).to_string();
        assert_eq!(render(&packed, Format::OpenAiChat), tree);
    }
}
