//! Gemini `generateContent` bodies: `{systemInstruction, contents}` in the REST API's JSON
//! (camelCase). Roles alternate `user` / `model` (consecutive turns of one role are merged),
//! with one exception: tool results are `functionResponse` parts, one per call, matched by id
//! and name, that make up the user content after the calls on their own. Gemini 3 reads that
//! content as the end of a step and refuses one that also carries text or files, so user text
//! that follows the results goes in a user content of its own, the next turn's start. Thought
//! parts and `thoughtSignature`s go back where the model put them.

use std::collections::HashMap;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Value, json};

use super::{Mode, anthropic::arguments_object, anthropic_renders, attachment_note, native_list};
use crate::domain::{
    attachments::{data_uri, media_type},
    context::{ContextMessage, Format, cost::context_text},
    message::{Attachment, AttachmentSource, Block, Message, ReasoningKind, Role},
    native::drop_blank_gemini_text,
};

/// Types Gemini takes inline or by URI; other attachments become a text reference.
const GEMINI_FILE_TYPES: [&str; 7] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
    "application/pdf",
    "text/plain",
];

/// The pack as a Gemini request body.
pub(super) fn gemini(messages: &[ContextMessage], mode: Mode) -> String {
    let names: HashMap<&str, &str> = messages
        .iter()
        .flat_map(|m| &m.message.tool_calls)
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    let mut system = Vec::new();
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages.iter().map(|m| &m.message) {
        if m.role == Role::System {
            let text = context_text(m);
            if !text.trim().is_empty() {
                system.push(text.into_owned());
            }
            continue;
        }
        if !anthropic_renders(Format::Gemini, m) {
            continue;
        }
        let native = native_list(m, Format::Gemini).map(|mut parts| {
            drop_blank_gemini_text(&mut parts);
            parts
        });
        let (role, parts) = match (m.role, native) {
            (Role::Assistant, Some(parts)) => ("model", parts),
            (_, Some(parts)) => ("user", parts),
            _ => match m.role {
                Role::Assistant => ("model", model_parts(m)),
                Role::Tool => ("user", vec![function_response(m, &names)]),
                _ => ("user", user_parts(m)),
            },
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    let mut contents: Vec<(&'static str, Vec<Value>)> =
        contents.into_iter().flat_map(split_responses).collect();
    if mode == Mode::Pack {
        sign_current_turn(&mut contents);
    }
    let contents: Vec<Value> = contents
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    let contents = Value::Array(contents);
    match system.is_empty() {
        true => format!(r#"{{"contents":{contents}}}"#),
        false => {
            let instruction = json!({"parts": [{"text": system.join("\n\n")}]});
            format!(r#"{{"systemInstruction":{instruction},"contents":{contents}}}"#)
        }
    }
}

/// A user content holding function responses and other parts becomes two: the responses
/// (answering the calls before them), then the rest.
fn split_responses((role, parts): (&'static str, Vec<Value>)) -> Vec<(&'static str, Vec<Value>)> {
    let (responses, others): (Vec<Value>, Vec<Value>) = parts
        .into_iter()
        .partition(|part| part.get("functionResponse").is_some());
    [(role, responses), (role, others)]
        .into_iter()
        .filter(|(_, parts)| !parts.is_empty())
        .collect()
}

fn user_parts(message: &Message) -> Vec<Value> {
    let text = context_text(message);
    let mut parts = Vec::new();
    if !text.trim().is_empty() {
        parts.push(json!({"text": text}));
    }
    parts.extend(message.attachments.iter().map(attachment_part));
    parts
}

/// An attachment as Gemini takes it: a type of [`GEMINI_FILE_TYPES`] inline (`inlineData`, for
/// inline data and `data:` URIs alike) or by a URI Gemini fetches (`fileData`: https, gs://);
/// anything else a text line naming it.
fn attachment_part(attachment: &Attachment) -> Value {
    let mime = media_type(attachment);
    if !GEMINI_FILE_TYPES.contains(&mime) {
        return json!({"text": attachment_note(attachment)});
    }
    match &attachment.source {
        AttachmentSource::Data(data) => {
            json!({"inlineData": {"mimeType": mime, "data": STANDARD.encode(data)}})
        }
        AttachmentSource::Uri(uri) => match data_uri(uri) {
            Some(Ok(data)) => json!({"inlineData": {"mimeType": data.media_type, "data": data.base64}}),
            None if uri.starts_with("https://") || uri.starts_with("gs://") => {
                json!({"fileData": {"mimeType": mime, "fileUri": uri}})
            }
            _ => json!({"text": attachment_note(attachment)}),
        },
    }
}

/// A model message's parts in the order the model produced them, signatures in place. Blank
/// text is left out unless it carries a signature.
fn model_parts(message: &Message) -> Vec<Value> {
    let text = context_text(message);
    let mut parts = Vec::new();
    for block in message.blocks() {
        match block {
            Block::Text if text.trim().is_empty() && message.content_signature.is_empty() => {}
            Block::Text => parts.push(signed(json!({"text": text}), &message.content_signature)),
            Block::Call(call) => {
                let call_part = json!({"functionCall": {
                    "name": call.name,
                    "id": call.id,
                    "args": arguments_object(&call.arguments),
                }});
                parts.push(signed(call_part, &call.signature));
            }
            Block::Reasoning(r) if r.known_kind() == Some(ReasoningKind::GeminiThought) => {
                parts.push(signed(json!({"text": r.text, "thought": true}), &r.signature));
            }
            // Another provider's: the packer strips those.
            Block::Reasoning(_) => {}
        }
    }
    parts
}

/// The value Google documents for a function call that has no signature of its own (history
/// from another model, or a call whose signature was not stored): it tells the API to skip
/// the check.
pub(super) const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Gemini refuses a current turn (everything after the last user content that is not only
/// function responses) in which the first function call of a step has no `thoughtSignature`:
/// such calls get [`SKIP_SIGNATURE`]. Earlier turns are not checked and stay as they are.
fn sign_current_turn(contents: &mut [(&'static str, Vec<Value>)]) {
    let is_response = |part: &Value| part.get("functionResponse").is_some();
    let start = contents
        .iter()
        .rposition(|(role, parts)| *role == "user" && !parts.iter().all(is_response))
        .map_or(0, |i| i + 1);
    for (role, parts) in &mut contents[start..] {
        if *role != "model" {
            continue;
        }
        if let Some(call) = parts.iter_mut().find(|part| part.get("functionCall").is_some())
            && call.get("thoughtSignature").is_none()
        {
            call["thoughtSignature"] = json!(SKIP_SIGNATURE);
        }
    }
}

fn signed(mut part: Value, signature: &str) -> Value {
    if !signature.is_empty() {
        part["thoughtSignature"] = json!(signature);
    }
    part
}

/// A tool result, answering its call by id and by the called function's name.
fn function_response(message: &Message, names: &HashMap<&str, &str>) -> Value {
    let id = message.tool_call_id.as_deref().unwrap_or_default();
    // The pack always holds the call of a result it carries (groups are whole).
    let name = names.get(id).copied().unwrap_or(message.name.as_str());
    json!({"functionResponse": {
        "id": id,
        "name": name,
        "response": {"output": context_text(message)},
    }})
}
