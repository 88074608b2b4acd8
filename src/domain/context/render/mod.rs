//! Renders a pack as the JSON a provider accepts. Object keys are emitted in sorted order
//! (except that an Anthropic pack's `system` comes before its `messages`, and a Gemini pack's
//! `systemInstruction` before its `contents`, the order the providers read and cache them in)
//! and nothing depends on time or hashing, so the same pack renders to the same bytes, and a
//! pack that repeats another's beginning repeats its bytes.
//!
//! Reasoning, signatures and item ids (docs/design.md, "Reasoning and provider-native data") reach a renderer only for its own
//! provider (the packer strips the rest), and each renderer puts them back where the model
//! produced them ([`Message::blocks`]), byte for byte.

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;
mod responses_pairing;
mod stored_json;
mod turns;

pub use anthropic::anthropic_renders;
use stored_json::{native_list, sendable_call};
pub use turns::renders_as_turn;

use std::borrow::Cow;

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::Value;

use super::{ContextMessage, Format, Source, cost::api_name_char};
use crate::domain::{
    StoredMessage,
    message::{Attachment, AttachmentSource, Message},
};

/// Renders `messages` (in pack order) in `format` as compact JSON text.
pub fn render(messages: &[ContextMessage], format: Format) -> String {
    render_as(messages, format, Mode::Pack)
}

/// What a rendering is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The next call's request: the provider's rules for a request's end apply (Anthropic's
    /// prefill, Gemini's current-turn signatures) and prompt-cache markers are set.
    Pack,
    /// Stored history as it happened (ListMessages): nothing added or trimmed.
    History,
}

fn render_as(messages: &[ContextMessage], format: Format, mode: Mode) -> String {
    match format {
        Format::OpenAiChat => openai_chat::openai_chat(messages),
        Format::AnthropicMessages => anthropic::anthropic(messages, mode),
        Format::OpenAiResponses => openai_responses::openai_responses(messages, mode),
        Format::Gemini => gemini::gemini(messages, mode),
    }
}

/// A Chat Completions message as ctxd renders it (native JSON aside).
pub fn openai_chat_message(message: &Message) -> Value {
    openai_chat::openai_message(message)
}

/// Log messages rendered whole in `format`, as history (ListMessages with `format`): every
/// message in context in order (UI-only ones, `exclude_from_context`, are left out), nothing
/// cut or trimmed, every turn's reasoning kept. As in packs, native data reaches only its own
/// provider's format (other formats get the message without it) and an OpenAI phase only
/// Responses.
pub fn render_history(messages: &[StoredMessage], format: Format) -> String {
    let history: Vec<ContextMessage> = messages
        .iter()
        .filter(|m| !m.message.exclude_from_context)
        .map(|stored| {
            let mut message = stored.message.clone();
            message.keep_native_json_for(format);
            let provider = message.native_provider();
            if provider.is_some() && provider != format.provider() {
                message.strip_native();
            }
            if format != Format::OpenAiResponses {
                message.content_phase.clear();
            }
            ContextMessage {
                source: Source::History,
                sequence: Some(stored.sequence),
                tokens: 0,
                message,
            }
        })
        .collect();
    render_as(&history, format, Mode::History)
}

/// Appends `text` as a JSON string literal.
fn push_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("writing to a Vec cannot fail");
}

/// The image types OpenAI takes (Chat Completions `image_url`, Responses `input_image`): PNG,
/// JPEG, WEBP and non-animated GIF. Other images become a text reference.
const OPENAI_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// A tool call id as Anthropic takes it in `tool_use.id` and `tool_result.tool_use_id`: the API
/// refuses one that does not match `^[a-zA-Z0-9_-]+$` ("String should match pattern"), as
/// other providers' ids can (Kimi's and DeepSeek's `functions.Bash:0`, MCP-qualified names).
/// A valid id goes as it is; another becomes its valid characters, `_` for the others, then
/// `_` and a digest of the whole id, so distinct ids stay distinct and a call and its result,
/// mapped alike, still pair. The same id always maps to the same text.
fn anthropic_tool_id(id: &str) -> Cow<'_, str> {
    let valid = api_name_char;
    if !id.is_empty() && id.chars().all(valid) {
        return Cow::Borrowed(id);
    }
    let kept: String = id.chars().map(|c| if valid(c) { c } else { '_' }).collect();
    Cow::Owned(format!("{kept}_{}", id_digest(id)))
}

/// Longest tool call id Chat Completions takes ("string too long. Expected a string with
/// maximum length 40").
const CHAT_TOOL_ID_MAX: usize = 40;

/// A tool call id as Chat Completions takes it in `tool_calls[].id` and `tool_call_id`: one
/// longer than [`CHAT_TOOL_ID_MAX`] characters (Responses' `fc_...` item ids, other providers'
/// ids) becomes its beginning, `_` and a digest of the whole id, 40 characters in all.
fn chat_tool_id(id: &str) -> Cow<'_, str> {
    if id.chars().count() <= CHAT_TOOL_ID_MAX {
        return Cow::Borrowed(id);
    }
    let digest = id_digest(id);
    let head: String = id.chars().take(CHAT_TOOL_ID_MAX - digest.len() - 1).collect();
    Cow::Owned(format!("{head}_{digest}"))
}

/// 12 hex digits of the SHA-256 of `id`: stable across builds and replicas.
fn id_digest(id: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(id.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `data:` URI of inline bytes.
fn data_uri(mime_type: &str, data: &[u8]) -> String {
    format!("data:{mime_type};base64,{}", STANDARD.encode(data))
}

/// `uri` as the `data:` URI of inline data the OpenAI formats take (`data:<type>;base64,...`,
/// the scheme in lower case, parameters left out), if it is a valid `data:` URI.
fn inline(uri: &str) -> Option<String> {
    let parsed = crate::domain::attachments::data_uri(uri)?.ok()?;
    Some(format!("data:{};base64,{}", parsed.media_type, parsed.base64))
}

/// An image URI as the OpenAI formats take it: a `data:` URI (written as they read it) or an
/// `https://` URL; `None` for anything else (`http://`, `gs://`, `javascript:`...), which
/// then goes as a text reference.
fn fetchable(uri: &str) -> Option<String> {
    if let Some(data) = inline(uri) {
        return Some(data);
    }
    let https = uri.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    https.then(|| uri.to_owned())
}

/// A text line standing for an attachment a format cannot carry: its URI, or for inline data
/// its size.
fn attachment_note(attachment: &Attachment) -> String {
    match &attachment.source {
        AttachmentSource::Uri(uri) => attachment_reference(attachment, uri),
        AttachmentSource::Data(data) => format!(
            "[attachment {} ({}), {} bytes, not shown]",
            attachment.filename,
            attachment.mime_type,
            data.len()
        ),
    }
}

/// A text line naming an attachment a format cannot carry.
fn attachment_reference(attachment: &Attachment, uri: &str) -> String {
    format!(
        "[attachment {} ({}): {uri}]",
        attachment.filename, attachment.mime_type
    )
}

#[cfg(test)]
mod tests;
