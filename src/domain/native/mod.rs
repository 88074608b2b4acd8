//! Provider-native in and out (docs/native.md): what a provider returned, or what a backend
//! would send, split into messages. Each message keeps the fields ctxd models (text, tool
//! calls, results, reasoning, attachments), which every format renders, and its own part of
//! the provider's JSON ([`NativeContent`]), which packs and history of that format render
//! back JSON-equal. The JSON is checked here: anything the format does not allow is a
//! violation naming its path; nothing is stored.

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;

pub use gemini::drop_blank_text as drop_blank_gemini_text;
pub use openai_chat::request_form;
pub(crate) use openai_responses::{ID_BOUND_ITEMS, ID_OPTIONAL_ITEMS};

use serde_json::Value;

pub use super::native_content::NativeContent;
use super::{
    format::Format,
    message::{Message, Role},
    violation::Violations,
};

/// The root of violation paths: the request field holding the JSON.
const ROOT: &str = "native.json";

/// What needs each format's rules: reasoning removed, the opaque rest, whether a turn shows.
impl NativeContent {
    /// Removes what goes with the reasoning policy (thinking blocks, reasoning items, thought
    /// parts, signatures and the item ids that pair with reasoning), keeping the rest.
    pub fn strip_reasoning(&mut self) {
        match self.format {
            Format::AnthropicMessages => anthropic::strip_reasoning(&mut self.json),
            Format::OpenAiResponses => openai_responses::strip_reasoning(&mut self.json),
            Format::Gemini => gemini::strip_reasoning(&mut self.json),
            Format::OpenAiChat => {}
        }
    }

    /// The JSON text of what the modeled fields do not already count: blocks and items ctxd
    /// keeps opaque, citations and annotations. Its tokens are added to packs of the format.
    pub fn extra_text(&self) -> String {
        let extra: Vec<Value> = match self.format {
            Format::AnthropicMessages => anthropic::extra(&self.json),
            Format::OpenAiResponses => openai_responses::extra(&self.json),
            Format::Gemini => gemini::extra(&self.json),
            Format::OpenAiChat => openai_chat::extra(&self.json),
        };
        match extra.is_empty() {
            true => String::new(),
            false => Value::Array(extra).to_string(),
        }
    }

    /// Where the provider's newest compaction stands in the JSON, when it holds one that a pack
    /// of its format starts from (docs/native.md, "Provider compaction"): Anthropic's newest
    /// `compaction` block with content (one without is a no-op); Responses' newest
    /// `compaction` item, or the start of a `/responses/compact` window (user messages, then
    /// the compaction item). `None` for other formats.
    pub fn compaction_start(&self) -> Option<usize> {
        let Value::Array(items) = &self.json else {
            return None;
        };
        match self.format {
            Format::AnthropicMessages => items.iter().rposition(|b| {
                str_at(b, "type") == Some("compaction")
                    && b.get("content")
                        .and_then(Value::as_str)
                        .is_some_and(|c| !c.is_empty())
            }),
            Format::OpenAiResponses => {
                let at = items
                    .iter()
                    .rposition(|i| str_at(i, "type") == Some("compaction"))?;
                let window = items[..at].iter().all(|i| {
                    matches!(str_at(i, "type"), None | Some("message")) && str_at(i, "role") == Some("user")
                });
                Some(if window { 0 } else { at })
            }
            Format::Gemini | Format::OpenAiChat => None,
        }
    }

    /// The JSON from its compaction on ([`Self::compaction_start`]): what the compaction
    /// replaced goes, and so do compaction blocks without content after it (no-ops).
    pub fn start_at_compaction(&mut self) {
        let Some(start) = self.compaction_start() else {
            return;
        };
        let format = self.format;
        if let Value::Array(items) = &mut self.json {
            items.drain(..start);
            if format == Format::AnthropicMessages {
                let first = items.first().cloned();
                items.retain(|b| str_at(b, "type") != Some("compaction") || Some(b) == first.as_ref());
                // Thinking that nothing follows (a compaction and its thinking, the reply cut
                // short): the API refuses a message that ends with it.
                while items
                    .last()
                    .is_some_and(|b| matches!(str_at(b, "type"), Some("thinking" | "redacted_thinking")))
                {
                    items.pop();
                }
            }
        }
    }

    /// The JSON without its compaction blocks or items: for a message whose compaction a pack
    /// cannot start from (the tool round it is in began before it), which a pack then holds as
    /// an ordinary message.
    pub fn strip_compaction(&mut self) {
        if let Value::Array(items) = &mut self.json {
            items.retain(|i| str_at(i, "type") != Some("compaction"));
        }
    }

    /// Whether the JSON holds more than reasoning and blank text: something a turn shows.
    pub fn has_reply(&self) -> bool {
        match &self.json {
            Value::Array(items) => items.iter().any(|v| self.shows(v)),
            _ => true,
        }
    }

    /// Whether all the JSON shows ([`Self::has_reply`]) is the provider's compaction: a
    /// paused Anthropic compaction, a `/responses/compact` window.
    pub fn reply_is_compaction(&self) -> bool {
        let Value::Array(items) = &self.json else {
            return false;
        };
        let mut shown = items.iter().filter(|v| self.shows(v)).peekable();
        shown.peek().is_some()
            && shown.all(|v| {
                let kind = str_at(v, "type");
                // A compact window's user messages are the compaction's own.
                kind == Some("compaction")
                    || matches!(kind, None | Some("message")) && str_at(v, "role") == Some("user")
            })
    }

    /// Whether a block or item of the JSON shows in a turn: more than reasoning and blank text.
    fn shows(&self, v: &Value) -> bool {
        let blank_text = |v: &Value, key: &str| {
            v.get(key)
                .and_then(Value::as_str)
                .is_some_and(|t| t.trim().is_empty())
        };
        match self.format {
            Format::AnthropicMessages => match str_at(v, "type") {
                Some("thinking" | "redacted_thinking") => false,
                Some("text") => !blank_text(v, "text"),
                _ => true,
            },
            Format::OpenAiResponses => str_at(v, "type") != Some("reasoning"),
            Format::Gemini => {
                v.get("thought").and_then(Value::as_bool) != Some(true)
                    && !(blank_text(v, "text") && v.as_object().is_some_and(|o| o.len() <= 2))
            }
            Format::OpenAiChat => true,
        }
    }
}

/// Native data leaves a message with its format's rules for it.
impl Message {
    /// Removes the reasoning, signatures and item ids (from the native JSON too, which keeps
    /// the rest).
    pub fn strip_native(&mut self) {
        if let Some(native) = &mut self.native {
            native.strip_reasoning();
        }
        self.reasoning.clear();
        self.content_item_id.clear();
        self.content_signature.clear();
        for call in &mut self.tool_calls {
            call.signature.clear();
            call.item_id.clear();
        }
    }
}

/// Messages parsed from native JSON, each with the JSON path it came from (violations of the
/// message name it).
#[derive(Debug, Default)]
pub struct Parsed {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// Each message's JSON path, e.g. `native.json[2].content[1]`.
    pub origins: Vec<String>,
    /// Tool results that name their call by function name only (Gemini `functionResponse`
    /// without an `id` and no call of that name earlier in the JSON): (message index, name).
    /// The service binds them to the conversation's open calls.
    pub unbound: Vec<(usize, String)>,
}

impl Parsed {
    fn push(&mut self, message: Message, origin: String) {
        self.messages.push(message);
        self.origins.push(origin);
    }
}

/// The deepest native JSON may nest: what every store reads back whole (the stored form nests
/// it a few levels deeper, and JSON readers stop at 128).
pub const MAX_DEPTH: usize = 64;

/// JSON values in `bytes` (objects, arrays and their items), counted outside strings, up to
/// `stop_after` (the count stops there): what a JSON text decodes into, known before it is
/// parsed. Malformed JSON is counted as far as it goes.
pub fn json_values(bytes: &[u8], stop_after: usize) -> usize {
    let mut values = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        // Every value but the first starts after a `,` or opens an object or array.
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' | b',' => values += 1,
            _ => {}
        }
        if values > stop_after {
            break;
        }
    }
    values
}

/// The memory parsing `text` takes, at most about: each value a node of a few dozen bytes in
/// containers that may double, and the text's strings copied twice (the value, and the form
/// the store writes). Reserved before the parse (docs/design.md, "Every call is bounded").
pub fn parse_memory(text: &str) -> usize {
    const PER_VALUE: usize = 96;
    let values = json_values(text.as_bytes(), usize::MAX);
    text.len()
        .saturating_mul(2)
        .saturating_add(values.saturating_mul(PER_VALUE))
}

/// Parses `text` as `format`'s JSON: a response object or an array of request-side entries.
/// `salt` tells apart identical JSON appended twice where ids are generated (Gemini calls
/// without one): the append's idempotency key, or a unique value. JSON nested deeper than
/// [`MAX_DEPTH`] or holding U+0000 (which PostgreSQL cannot store) is refused, on every store.
pub fn parse(format: Format, text: &str, salt: &str, v: &mut Violations) -> Parsed {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            v.add(ROOT, format!("not JSON: {e}"));
            return Parsed::default();
        }
    };
    if let Err(problem) = storable(&value) {
        v.add(ROOT, problem);
        return Parsed::default();
    }
    let mut parsed = Parsed::default();
    match format {
        Format::AnthropicMessages => anthropic::parse(&value, &mut parsed, v),
        Format::OpenAiResponses => openai_responses::parse(&value, &mut parsed, v),
        Format::Gemini => gemini::parse(&value, salt, &mut parsed, v),
        Format::OpenAiChat => openai_chat::parse(&value, &mut parsed, v),
    }
    if parsed.messages.is_empty() && v.is_empty() {
        v.add(ROOT, "holds no message");
    }
    parsed
}

/// Whether every store can keep `value` and give it back whole: nested at most [`MAX_DEPTH`]
/// levels, and no U+0000 in a string or key.
fn storable(value: &Value) -> Result<(), String> {
    let nul = |text: &str| text.contains('\0');
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} levels deep"));
        }
        match value {
            Value::String(text) if nul(text) => {
                return Err("holds U+0000, which PostgreSQL cannot store".into());
            }
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, depth + 1))),
            Value::Object(map) => {
                if map.keys().any(|key| nul(key)) {
                    return Err("holds U+0000, which PostgreSQL cannot store".into());
                }
                stack.extend(map.values().map(|item| (item, depth + 1)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// An empty message of `role` carrying `native`.
fn native_message(role: Role, native: NativeContent) -> Message {
    Message {
        native: Some(native),
        ..Message::text(role, String::new())
    }
}

/// The string at `key`, or a violation at `path.key`.
fn required_str<'a>(object: &'a Value, key: &str, path: &str, v: &mut Violations) -> Option<&'a str> {
    let found = object.get(key).and_then(Value::as_str);
    if found.is_none() {
        v.add(format!("{path}.{key}"), "a string is required here");
    }
    found
}

/// The string at `key`, if there is one.
fn str_at<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

/// The array `value`, or a violation at `path`.
fn array<'a>(value: &'a Value, path: &str, what: &str, v: &mut Violations) -> &'a [Value] {
    match value.as_array() {
        Some(items) => items,
        None => {
            v.add(path, format!("{what} must be an array"));
            &[]
        }
    }
}

/// The `type` of an object (block, item, part), or a violation at `path.type`.
fn type_of<'a>(object: &'a Value, path: &str, v: &mut Violations) -> Option<&'a str> {
    if !object.is_object() {
        v.add(path, "must be a JSON object");
        return None;
    }
    required_str(object, "type", path, v)
}

/// The fields of a modeled block that the modeled fields do not carry (citations,
/// annotations, logprobs...), if there are any.
fn leftover(value: &Value, modeled: &[&str]) -> Option<Value> {
    let object = value.as_object()?;
    let rest: serde_json::Map<String, Value> = object
        .iter()
        .filter(|(k, v)| !modeled.contains(&k.as_str()) && !is_empty_json(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!rest.is_empty()).then_some(Value::Object(rest))
}

/// Base64 (standard or URL-safe, padding optional) decoded, or a violation at `path`.
fn decode_base64(text: &str, path: &str, v: &mut Violations) -> Option<Vec<u8>> {
    use base64::{
        Engine,
        engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD},
    };
    let trimmed = text.trim_end_matches('=');
    match STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| URL_SAFE_NO_PAD.decode(trimmed))
    {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            v.add(path, format!("not base64: {e}"));
            None
        }
    }
}

/// The media type of a URI: a `data:` URI's own, else by the name's extension, else
/// `application/octet-stream` (which packs of other formats show as a reference).
fn mime_of_uri(uri: &str) -> String {
    if let Some(rest) = uri.strip_prefix("data:") {
        let media = rest.split([';', ',']).next().unwrap_or_default();
        if !media.is_empty() {
            return media.to_ascii_lowercase();
        }
    }
    let path = uri
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let by_extension = [
        (".png", "image/png"),
        (".jpg", "image/jpeg"),
        (".jpeg", "image/jpeg"),
        (".gif", "image/gif"),
        (".webp", "image/webp"),
        (".pdf", "application/pdf"),
    ];
    by_extension
        .iter()
        .find(|(ext, _)| path.ends_with(ext))
        .map_or("application/octet-stream", |(_, mime)| mime)
        .into()
}

/// Null, an empty string, array or object.
fn is_empty_json(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A number of tokens from a usage block (absent or not a count: 0).
fn count(object: &Value, pointer: &str) -> u64 {
    object.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// Tool arguments as ctxd stores them: the JSON text of `input` (a string stays as it is).
fn arguments_text(input: Option<&Value>) -> String {
    match input {
        Some(Value::String(text)) => text.clone(),
        Some(value) => value.to_string(),
        None => "{}".into(),
    }
}

#[cfg(test)]
mod tests;
