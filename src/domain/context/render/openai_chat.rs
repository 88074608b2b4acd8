//! OpenAI Chat Completions `messages`. Chat Completions has no place for reasoning, signatures
//! or item ids: the packer strips them before rendering (see `Format::provider`).

use serde_json::{Map, Value, json};

use super::{OPENAI_IMAGE_TYPES, attachment_note, chat_tool_id, data_uri, fetchable, inline, push_str};
use crate::domain::{
    attachments::media_type,
    context::{
        ContextMessage, Format,
        cost::{context_text, openai_name, pack_arguments},
    },
    message::{Attachment, AttachmentSource, Message, Role},
    native::request_form,
};

/// The pack in OpenAI Chat Completions form, written straight into one buffer (this runs on
/// every BuildContext; building a `Value` tree first cost a sixth of the server's CPU). Keys
/// are written in sorted order, byte for byte what [`openai_message`]'s `Value` prints.
pub(super) fn openai_chat(messages: &[ContextMessage]) -> String {
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

/// A stored Chat Completions message as a request takes it: tool ids as [`chat_tool_id`] maps
/// them (a call's and its result's alike, whichever of them is native), function names and
/// arguments as every pack sends them ([`super::sendable_call`]).
fn native_message(json: &Value) -> Value {
    let mut message = request_form(json);
    let map = |id: &mut Value| {
        if let Some(text) = id.as_str() {
            *id = Value::String(chat_tool_id(text).into_owned());
        }
    };
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for call in calls.iter_mut() {
            map(&mut call["id"]);
            if let Some(function) = call.get_mut("function") {
                super::sendable_call(function, "arguments");
            }
        }
    }
    if let Some(id) = message.get_mut("tool_call_id") {
        map(id);
    }
    // `content` is required but for calls, and a refusal or a call without text came back as
    // `null`: a string goes, as in every message ctxd renders (LangChain and llama.cpp refuse
    // `null`).
    if let Some(object) = message.as_object_mut()
        && object.get("content").is_none_or(Value::is_null)
    {
        object.insert("content".into(), Value::String(String::new()));
    }
    message
}

fn write_openai_message(out: &mut Vec<u8>, message: &Message) {
    if let Some(native) = message.native.as_ref().filter(|n| n.format == Format::OpenAiChat) {
        out.extend_from_slice(native_message(&native.json).to_string().as_bytes());
        return;
    }
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
    // An assistant message of only tool calls carries `""`, never `null`: OpenAI accepts
    // both, llama.cpp's server only a string.
    out.extend_from_slice(b"{\"content\":");
    push_str(out, &text);
    if let Some(name) = openai_name(&message.name).filter(|_| message.role != Role::Tool) {
        out.extend_from_slice(b",\"name\":");
        push_str(out, &name);
    }
    out.extend_from_slice(b",\"role\":");
    push_str(out, message.role.as_str());
    if message.role == Role::Tool {
        out.extend_from_slice(b",\"tool_call_id\":");
        push_str(
            out,
            &chat_tool_id(message.tool_call_id.as_deref().unwrap_or_default()),
        );
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
            push_str(out, &openai_name(&call.name).unwrap_or_default());
            out.extend_from_slice(b"},\"id\":");
            push_str(out, &chat_tool_id(&call.id));
            out.extend_from_slice(b",\"type\":\"function\"}");
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// One message in OpenAI Chat Completions form.
pub(super) fn openai_message(message: &Message) -> Value {
    let text = context_text(message).into_owned();
    let mut out = Map::new();
    out.insert("role".into(), json!(message.role.as_str()));
    match message.role {
        Role::Tool => {
            out.insert(
                "tool_call_id".into(),
                json!(chat_tool_id(message.tool_call_id.as_deref().unwrap_or_default())),
            );
            out.insert("content".into(), json!(text));
        }
        Role::Assistant => {
            out.insert("content".into(), json!(text));
            if !message.tool_calls.is_empty() {
                let calls = message
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": chat_tool_id(&c.id), "type": "function", "function": {"name": openai_name(&c.name).unwrap_or_default(), "arguments": pack_arguments(&c.arguments)}})
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
    if let Some(name) = openai_name(&message.name).filter(|_| message.role != Role::Tool) {
        out.insert("name".into(), json!(name));
    }
    Value::Object(out)
}

/// An attachment as a content part. Chat Completions takes images of [`OPENAI_IMAGE_TYPES`]
/// and PDF files; anything else is a text line naming it.
fn openai_attachment(attachment: &Attachment) -> Value {
    let mime = attachment.mime_type.as_str();
    match &attachment.source {
        AttachmentSource::Uri(uri) if OPENAI_IMAGE_TYPES.contains(&mime) => match fetchable(uri) {
            Some(url) => json!({"type": "image_url", "image_url": {"url": url}}),
            None => json!({"type": "text", "text": attachment_note(attachment)}),
        },
        AttachmentSource::Data(data) if OPENAI_IMAGE_TYPES.contains(&mime) => {
            json!({"type": "image_url", "image_url": {"url": data_uri(mime, data)}})
        }
        AttachmentSource::Data(data) if mime == "application/pdf" => json!({"type": "file", "file": {
            "filename": attachment.filename,
            "file_data": data_uri(mime, data),
        }}),
        // A PDF given as a `data:` URI is inline data too.
        AttachmentSource::Uri(uri) if media_type(attachment) == "application/pdf" => match inline(uri) {
            Some(file_data) => json!({"type": "file", "file": {
                "filename": attachment.filename,
                "file_data": file_data,
            }}),
            None => json!({"type": "text", "text": attachment_note(attachment)}),
        },
        _ => json!({"type": "text", "text": attachment_note(attachment)}),
    }
}
