//! What a message costs in a context pack: its rendered text and its tokens under each
//! tokenizer, with the chat framing of [`crate::domain::tokenize`].

use std::{borrow::Cow, time::SystemTime};

use crate::{
    domain::tokenize::{ATTACHMENT_TOKENS, MESSAGE_OVERHEAD, NAME_OVERHEAD, TOOL_CALL_OVERHEAD, Tokenizer},
    domain::{
        format::Format,
        ids::Sequence,
        message::{AttachmentSource, Message, StoredMessage},
        token_counts::{TokenCounts, Tokenizers},
    },
};

/// Counting, beside the framing it counts.
impl TokenCounts {
    /// Counts `message` under the tokenizers of `counted` (and the approximation).
    pub fn of(message: &Message, counted: Tokenizers) -> Self {
        let text = context_text(message);
        TokenCounts::by(counted, |t| saturate(message_cost_with_text(message, &text, t)))
    }

    /// Counts what `message`'s reasoning, signatures and item ids add to a pack of their
    /// provider, under every tokenizer (see [`native_cost`]). These counts are stored in the
    /// `native` data, which PostgreSQL keeps byte for byte and a late count could not rewrite:
    /// they are all made at append.
    pub fn of_native(message: &Message) -> Self {
        if message.native_provider().is_none() {
            return Self::default();
        }
        TokenCounts::by(Tokenizers::ALL, |t| saturate(native_cost(message, t)))
    }

    /// Counts what `message`'s native JSON adds to a pack of its format beyond the modeled
    /// fields: the text of [`crate::domain::native::NativeContent::extra_text`], under every
    /// tokenizer (as [`Self::of_native`]).
    pub fn of_native_json(message: &Message) -> Self {
        let Some(native) = &message.native else {
            return Self::default();
        };
        let extra = native.extra_text();
        if extra.is_empty() {
            return Self::default();
        }
        TokenCounts::by(Tokenizers::ALL, |t| saturate(t.count(&extra)))
    }
}

/// Counting a tokenizer that was left out at append, when a read first needs it.
impl StoredMessage {
    /// Counts the message under `tokenizer` if its append did not, and says what it counted.
    pub fn count_under(&mut self, tokenizer: Tokenizer) -> Option<CountedLate> {
        if !self.tokens.uncounted.contains(tokenizer) {
            return None;
        }
        let text = context_text(&self.message);
        let tokens = saturate(message_cost_with_text(&self.message, &text, tokenizer));
        self.tokens.set(tokenizer, tokens);
        Some(CountedLate {
            sequence: self.sequence,
            created_at: self.created_at,
            tokenizer,
            tokens,
        })
    }

    /// Takes `late`'s count where this is the message it was made from (same sequence and
    /// creation time) and has none under its tokenizer; says whether it took it.
    pub fn keep_late(&mut self, late: &CountedLate) -> bool {
        let made_from = self.sequence == late.sequence && self.created_at == late.created_at;
        if !made_from || !self.tokens.uncounted.contains(late.tokenizer) {
            return false;
        }
        self.tokens.set(late.tokenizer, late.tokens);
        true
    }
}

/// The count of one message under one tokenizer, made after its append (see
/// [`StoredMessage::count_under`]), for the store to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountedLate {
    /// The message.
    pub sequence: Sequence,
    /// Its creation time: a message rewound and appended again at the same sequence is
    /// another message, and takes none of these counts.
    pub created_at: SystemTime,
    /// The tokenizer counted.
    pub tokenizer: Tokenizer,
    /// Its tokens under `tokenizer`, as [`TokenCounts::of`] counts them.
    pub tokens: u32,
}

/// Clamps a token count into the stored width.
pub fn saturate(tokens: usize) -> u32 {
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// The text a message contributes to a pack: its content, and for a failed LLM call the partial
/// output and a note saying the call failed, so that "continue" has an anchor.
pub fn context_text(message: &Message) -> Cow<'_, str> {
    let Some(error) = &message.error else {
        return Cow::Borrowed(&message.content);
    };
    let mut text = message.content.clone();
    for part in [
        error.partial_output.as_str(),
        &error_note(&error.code, &error.message),
    ] {
        if part.is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(part);
    }
    Cow::Owned(text)
}

fn error_note(code: &str, message: &str) -> String {
    match (code.is_empty(), message.is_empty()) {
        (true, true) => "[this reply was cut short: the LLM call failed]".to_owned(),
        (false, true) => format!("[this reply was cut short: the LLM call failed ({code})]"),
        (true, false) => format!("[this reply was cut short: the LLM call failed: {message}]"),
        (false, false) => format!("[this reply was cut short: the LLM call failed ({code}): {message}]"),
    }
}

/// Tool call arguments as every format carries them (docs/design.md, "Provider rules"). The log keeps what the
/// model produced, valid or not; a pack must not carry what providers and client libraries
/// refuse (Anthropic wants an object; OpenAI-compatible servers and SDKs parse the string as
/// JSON). So a JSON object goes through verbatim, blank arguments become `{}`, and anything
/// else (invalid JSON, an array, a string, a number) is wrapped as `{"_raw": "<the text>"}`,
/// so the model still sees what it said.
pub fn pack_arguments(arguments: &str) -> Cow<'_, str> {
    let trimmed = arguments.trim_start();
    if trimmed.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok() {
        return Cow::Borrowed(arguments);
    }
    if trimmed.is_empty() {
        return Cow::Borrowed("{}");
    }
    Cow::Owned(serde_json::json!({ "_raw": arguments }).to_string())
}

/// Whether `c` may stand in an id or name the providers check against `^[a-zA-Z0-9_-]+$`
/// (OpenAI names, Anthropic tool call ids).
pub fn api_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A message author's or a function's name as the OpenAI APIs take it: they refuse one that does
/// not match `^[a-zA-Z0-9_-]+$` ("string does not match pattern"), at most 64 characters. Other
/// characters become `_` (so `mcp.search` goes as `mcp_search`, the name OpenAI tool
/// definitions must use anyway), and a longer name is cut; `None` for an empty one. Token counts
/// count names this way, so OpenAI packs are counted as sent.
pub fn openai_name(name: &str) -> Option<Cow<'_, str>> {
    const MAX: usize = 64;
    let valid = api_name_char;
    if name.is_empty() {
        return None;
    }
    if name.len() <= MAX && name.chars().all(valid) {
        return Some(Cow::Borrowed(name));
    }
    Some(Cow::Owned(
        name.chars()
            .take(MAX)
            .map(|c| if valid(c) { c } else { '_' })
            .collect(),
    ))
}

/// Tokens of `message` in a pack when its rendered text is `text` (possibly cut).
pub fn message_cost_with_text(message: &Message, text: &str, tokenizer: Tokenizer) -> usize {
    let mut tokens = MESSAGE_OVERHEAD + tokenizer.count(message.role.as_str()) + tokenizer.count(text);
    if let Some(name) = openai_name(&message.name) {
        tokens += tokenizer.count(&name) + NAME_OVERHEAD;
    }
    for call in &message.tool_calls {
        tokens += TOOL_CALL_OVERHEAD
            + tokenizer.count(&openai_name(&call.name).unwrap_or_default())
            + tokenizer.count(&pack_arguments(&call.arguments));
    }
    for attachment in &message.attachments {
        tokens += ATTACHMENT_TOKENS + tokenizer.count(&attachment.filename);
    }
    tokens
}

/// What `message`'s attachments cost in a pack of `format` beyond what its stored counts hold
/// (a flat [`ATTACHMENT_TOKENS`] each): the provider's own cost of each image (by its
/// dimensions, or the most the provider charges when they are unknown), each PDF and each other
/// file, less the flat count. Negative when the provider charges less (a small image for
/// Anthropic). docs/design.md, "Attachments".
pub fn attachments_delta(message: &Message, format: Format) -> i64 {
    use crate::domain::attachments::{Counting, image_tokens, media_type, pdf_tokens};
    if message.attachments.is_empty() {
        return 0;
    }
    let counting = match format {
        Format::OpenAiChat | Format::OpenAiResponses => Counting::OpenAi,
        Format::AnthropicMessages => Counting::Anthropic,
        Format::Gemini => Counting::Gemini,
    };
    let cost: usize = message
        .attachments
        .iter()
        .map(|a| match media_type(a) {
            mime if mime.starts_with("image/") => image_tokens(counting, a.width, a.height),
            "application/pdf" => pdf_tokens(counting),
            // Other files go as text (or a text reference): at most their bytes / 4 in tokens,
            // and never less than the flat count.
            _ => match &a.source {
                AttachmentSource::Data(data) => data.len().div_ceil(4).max(ATTACHMENT_TOKENS),
                AttachmentSource::Uri(_) => ATTACHMENT_TOKENS,
            },
        })
        .sum();
    cost as i64 - (ATTACHMENT_TOKENS * message.attachments.len()) as i64
}

/// `tokens` moved by `delta`, never below 0.
pub fn adjusted(tokens: usize, delta: i64) -> usize {
    (tokens as i64 + delta).max(0) as usize
}

/// Framing tokens of one reasoning block.
const REASONING_BLOCK_OVERHEAD: usize = 4;

/// Tokens of `message`'s native data in a pack of its provider (docs/design.md, "Reasoning and provider-native data"): reasoning
/// text and summaries counted with `tokenizer`, plus a few framing tokens per block; opaque
/// strings (signatures, redacted or encrypted reasoning, item ids) at one token per 4 bytes.
/// Providers do not say what opaque reasoning costs (it stands for reasoning they decrypt), so
/// this is an estimate, and on the high side: a pack that fits by it fits.
pub fn native_cost(message: &Message, tokenizer: Tokenizer) -> usize {
    let opaque = |bytes: usize| bytes.div_ceil(4);
    let blocks: usize = message
        .reasoning
        .iter()
        .map(|r| {
            REASONING_BLOCK_OVERHEAD
                + tokenizer.count(&r.text)
                + r.summary.iter().map(|s| tokenizer.count(s)).sum::<usize>()
                + opaque(r.signature.len() + r.data.len() + r.id.len())
        })
        .sum();
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|c| opaque(c.signature.len() + c.item_id.len()))
        .sum();
    blocks + calls + opaque(message.content_item_id.len() + message.content_signature.len())
}

/// Tokens of a plain text message of `role` (system prompt, summary, notices).
pub fn text_message_cost(role: &str, text: &str, tokenizer: Tokenizer) -> usize {
    MESSAGE_OVERHEAD + tokenizer.count(role) + tokenizer.count(text)
}
