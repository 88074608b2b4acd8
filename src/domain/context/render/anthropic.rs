//! Anthropic Messages `{system, messages}`, with thinking blocks echoed in place.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use super::{Mode, anthropic_tool_id, attachment_note, native_list};
use crate::domain::{
    attachments::{data_uri, media_type},
    context::{
        ContextMessage, Format, Source,
        cost::{context_text, pack_arguments},
    },
    message::{Attachment, AttachmentSource, Block, Message, ReasoningKind, Role},
};

/// The pack in Anthropic Messages form: system-role messages joined into `system`, tool calls
/// as `tool_use` blocks, results as `tool_result` blocks in user turns, consecutive turns of one
/// role merged so that roles alternate; prompt-cache breakpoints marked (see
/// [`mark_cache_breakpoints`]).
pub(super) fn anthropic(messages: &[ContextMessage], mode: Mode) -> String {
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
            // Reasoning without a reply (a call cut short while thinking) is no turn.
            _ if !anthropic_renders(Format::AnthropicMessages, m) => continue,
            Role::User | Role::Tool if m.native.is_some() => ("user", native_blocks(m)),
            Role::Assistant if m.native.is_some() => ("assistant", native_blocks(m)),
            Role::User => ("user", user_blocks(m)),
            Role::Tool => ("user", vec![tool_result_block(m)]),
            Role::Assistant => ("assistant", assistant_blocks(m)),
        };
        // Native blocks can all have gone with the reasoning.
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    for (role, content) in &mut turns {
        if *role == "assistant" {
            thinking_first(content);
        }
    }
    if let Some(("assistant", content)) = turns.last_mut().filter(|_| mode == Mode::Pack) {
        // A final assistant message is the prefill the model continues; the API refuses
        // thinking in it.
        content.retain(|block| !is_thinking(block));
        trim_final_text(content);
    }
    // Native blocks can leave a final reply with nothing but thinking, now gone.
    if turns.last().is_some_and(|(_, content)| content.is_empty()) {
        turns.pop();
    }
    for (_, content) in &mut turns {
        // Results must open the user turn that follows the calls.
        content.sort_by_key(|block| block["type"] != "tool_result");
    }
    let mut system: Vec<Value> = match system.is_empty() {
        true => Vec::new(),
        false => vec![json!({"type": "text", "text": system.join("\n\n")})],
    };
    if mode == Mode::Pack {
        // A recalled turn (the last block) changes with every question: the markers go on
        // what comes before it, which the next call repeats.
        let recalled = messages.last().is_some_and(|m| m.source == Source::Recall);
        let recall = turns.last_mut().filter(|_| recalled).and_then(|(_, c)| c.pop());
        let before = turns.len() - usize::from(turns.last().is_some_and(|(_, c)| c.is_empty()));
        mark_cache_breakpoints(&mut system, &mut turns[..before]);
        if let (Some(block), Some((_, content))) = (recall, turns.last_mut()) {
            content.push(block);
        }
    }
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
/// (docs/design.md, "Cache-stable packs"), reads everything up to here from the cache, even after a tool loop added
/// many blocks. Where markers sit is not part of the cached content: moving them from call to
/// call costs nothing. Thinking blocks cannot carry a marker: a message's marker goes on its
/// last other block.
fn mark_cache_breakpoints(system: &mut [Value], turns: &mut [(&'static str, Vec<Value>)]) {
    let marked = system.last_mut().into_iter().chain(
        turns
            .iter_mut()
            .rev()
            .take(2)
            .filter_map(|(_, content)| content.iter_mut().rev().find(|block| !is_thinking(block))),
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

/// Largest inline image Anthropic takes, as base64 text: "image exceeds 5 MB maximum: ... bytes
/// > 5242880 bytes". A larger one (ctxd stores up to 8 MiB by default) becomes a text reference.
const ANTHROPIC_IMAGE_MAX_BASE64: usize = 5 * 1024 * 1024;

/// Anthropic refuses a final assistant message that ends in whitespace (it is the prefill the
/// model continues from): the last text block loses its trailing whitespace.
fn trim_final_text(content: &mut [Value]) {
    if let Some(Value::String(text)) = content.last_mut().and_then(|block| block.get_mut("text")) {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
    }
}

/// Whether `message` renders as a turn of a pack of `format`, Anthropic or Gemini: system
/// messages go to `system`, and a user or assistant message with neither visible text nor
/// attachments nor calls is left out (both refuse empty and whitespace-only text; reasoning
/// alone is not a reply). Native JSON counts only in its own format: another provider's (a
/// `/responses/compact` window, a paused Anthropic compaction) shows nothing there.
pub fn anthropic_renders(format: Format, message: &Message) -> bool {
    let visible = || {
        !context_text(message).trim().is_empty()
            || message
                .native
                .as_ref()
                .is_some_and(|n| n.format == format && n.has_reply())
    };
    match message.role {
        Role::System => false,
        Role::Tool => true,
        Role::User => !message.attachments.is_empty() || visible(),
        Role::Assistant => !message.tool_calls.is_empty() || visible(),
    }
}

/// A message's stored Anthropic blocks (the packer leaves native JSON only for its format),
/// as the API takes them back: blank text blocks left out (Claude returns some, e.g. `"\n\n"`
/// before a tool call, and refuses them in a request), tool ids as [`anthropic_tool_id`] maps
/// them (a call's and its result's alike, whichever of them is native).
fn native_blocks(message: &Message) -> Vec<Value> {
    let mut blocks = native_list(message, Format::AnthropicMessages).unwrap_or_default();
    blocks.retain(|b| b["type"] != "text" || b["text"].as_str().is_some_and(|t| !t.trim().is_empty()));
    for block in &mut blocks {
        let key = match block["type"].as_str() {
            Some("tool_use") => "id",
            Some("tool_result") => "tool_use_id",
            _ => continue,
        };
        if let Some(id) = block[key].as_str() {
            let mapped = anthropic_tool_id(id).into_owned();
            block[key] = Value::String(mapped);
        }
    }
    blocks
}

/// A tool result; blank output leaves `content` out (it is optional, and a whitespace-only
/// text is refused).
fn tool_result_block(message: &Message) -> Value {
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": anthropic_tool_id(message.tool_call_id.as_deref().unwrap_or_default()),
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
        blocks.push(attachment_block(attachment));
    }
    blocks
}

/// An attachment as Anthropic takes it: an image (jpeg, png, gif, webp, at most 5 MB of
/// base64) or a PDF, inline as a base64 source (inline data and `data:` URIs alike) or by an
/// https URL; anything else (another type, a larger image, an http or other URL) a text line
/// naming it.
fn attachment_block(attachment: &Attachment) -> Value {
    let mime = media_type(attachment);
    let source = match &attachment.source {
        AttachmentSource::Data(data) => Some((
            data.len().div_ceil(3) * 4,
            json!({"type": "base64", "media_type": mime, "data": STANDARD.encode(data)}),
        )),
        AttachmentSource::Uri(uri) => match data_uri(uri) {
            Some(Ok(data)) => Some((
                data.base64.len(),
                json!({"type": "base64", "media_type": data.media_type, "data": data.base64}),
            )),
            Some(Err(_)) => None,
            None if uri.starts_with("https://") => Some((0, json!({"type": "url", "url": uri}))),
            None => None,
        },
    };
    let kind = match mime {
        mime if ANTHROPIC_IMAGE_TYPES.contains(&mime) => "image",
        "application/pdf" => "document",
        _ => return json!({"type": "text", "text": attachment_note(attachment)}),
    };
    match source {
        Some((base64, source)) if kind == "document" || base64 <= ANTHROPIC_IMAGE_MAX_BASE64 => {
            json!({"type": kind, "source": source})
        }
        _ => json!({"type": "text", "text": attachment_note(attachment)}),
    }
}

/// An assistant message's blocks in the order the model produced them: thinking and redacted
/// thinking verbatim, text, tool calls.
fn assistant_blocks(message: &Message) -> Vec<Value> {
    let text = context_text(message);
    let mut blocks = Vec::new();
    for block in message.blocks() {
        match block {
            Block::Text if !text.trim().is_empty() => blocks.push(json!({"type": "text", "text": text})),
            Block::Text => {}
            Block::Call(call) => blocks.push(json!({
                "type": "tool_use", "id": anthropic_tool_id(&call.id), "name": call.name, "input": arguments_object(&call.arguments),
            })),
            Block::Reasoning(r) => match r.known_kind() {
                Some(ReasoningKind::AnthropicThinking) => {
                    blocks.push(json!({"type": "thinking", "thinking": r.text, "signature": r.signature}))
                }
                Some(ReasoningKind::AnthropicRedacted) => {
                    blocks.push(json!({"type": "redacted_thinking", "data": r.data}))
                }
                // Another provider's: the packer strips those, and an unknown kind is refused
                // on append.
                _ => {}
            },
        }
    }
    blocks
}

/// Tool arguments as the JSON object Anthropic and Gemini require (see `pack_arguments`).
pub(super) fn arguments_object(arguments: &str) -> Value {
    serde_json::from_str::<Value>(&pack_arguments(arguments))
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"_raw": arguments}))
}

/// With thinking on, an assistant turn of a tool loop must open with thinking. A reply stored
/// with thinking always does; a turn merged from several messages (a failed call's partial
/// output, then the retry) may not: the first run of thinking moves to the front, each block
/// unchanged. The front is after the blocks that open a response before its thinking, a
/// `compaction` or a `fallback` block (Anthropic's beta), which keep their place.
fn thinking_first(content: &mut [Value]) {
    let front = content.iter().take_while(|b| opens_response(b)).count();
    let content = &mut content[front..];
    let Some(start) = content.iter().position(is_thinking) else {
        return;
    };
    let len = content[start..].iter().take_while(|b| is_thinking(b)).count();
    content[..start + len].rotate_right(len);
}

/// A block a response can open with before its thinking.
fn opens_response(block: &Value) -> bool {
    matches!(block["type"].as_str(), Some("compaction" | "fallback"))
}

fn is_thinking(block: &Value) -> bool {
    matches!(block["type"].as_str(), Some("thinking" | "redacted_thinking"))
}
