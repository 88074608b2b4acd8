//! A conversation message as ctxd understands it: the chat protocol's roles, tool calls and
//! results, attachments and failed LLM calls.

use std::{collections::BTreeMap, fmt, time::SystemTime};

use serde::{Deserialize, Serialize};

use super::{format::Format, ids::Sequence, native_content::NativeContent, token_counts::TokenCounts};
pub use super::{
    reasoning::{Provider, Reasoning, ReasoningKind},
    usage::Usage,
};

/// Author role of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// A human or upstream-agent turn.
    User,
    /// A model reply.
    Assistant,
    /// The result of one tool call.
    Tool,
}

impl Role {
    /// The role's name as the chat protocols and the database spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses a role name written by [`Role::as_str`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call made by an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id, unique within the conversation.
    pub id: String,
    /// Name of the called tool.
    pub name: String,
    /// The model's JSON arguments text, verbatim (even when it is not valid JSON).
    pub arguments: String,
    /// Gemini: the `thoughtSignature` of the `functionCall` part, verbatim; possibly empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// OpenAI Responses: the `function_call` output item id; possibly empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
}

impl ToolCall {
    /// A call without provider-native data.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            signature: String::new(),
            item_id: String::new(),
        }
    }
}

/// One block of an assistant message in the order the model produced them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block<'a> {
    /// A reasoning block.
    Reasoning(&'a Reasoning),
    /// The message's text (`content`, and a failed call's partial output).
    Text,
    /// A tool call.
    Call(&'a ToolCall),
}

/// Where an attachment's content lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentSource {
    /// Inline bytes.
    Data(#[serde(with = "base64_bytes")] Vec<u8>),
    /// A URI the provider can fetch.
    Uri(String),
}

/// A file attached to a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// File name, possibly empty.
    pub filename: String,
    /// The content.
    pub source: AttachmentSource,
    /// An image's width in pixels: read from the header of inline data and data URIs at
    /// append, given by the caller for other URIs; 0 when unknown.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub width: u32,
    /// An image's height in pixels, as `width`.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub height: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl Attachment {
    /// An attachment of unknown dimensions.
    pub fn new(mime_type: impl Into<String>, filename: impl Into<String>, source: AttachmentSource) -> Self {
        Self {
            mime_type: mime_type.into(),
            filename: filename.into(),
            source,
            width: 0,
            height: 0,
        }
    }
}

/// A failed or timed-out LLM call, kept so that "continue" has an anchor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmError {
    /// Machine-readable code.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// What the model produced before failing.
    pub partial_output: String,
}

/// A message as appended: everything the caller says, nothing the server sets.
///
/// Built only by parsing a request, which enforces the role rules (see `grpc::convert`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Author role.
    pub role: Role,
    /// Text content, possibly empty where the role allows it.
    pub content: String,
    /// Author name, possibly empty.
    pub name: String,
    /// Tool calls (assistant only).
    pub tool_calls: Vec<ToolCall>,
    /// The answered call (tool only).
    pub tool_call_id: Option<String>,
    /// Attached files.
    pub attachments: Vec<Attachment>,
    /// Caller-defined string pairs; ordered so that hashes and renders are deterministic.
    pub metadata: BTreeMap<String, String>,
    /// UI-only: never put into context.
    pub exclude_from_context: bool,
    /// Always kept in context.
    pub pinned: bool,
    /// A failed LLM call (assistant only).
    pub error: Option<LlmError>,
    /// Provider response id, possibly empty.
    pub response_id: String,
    /// Reasoning the model produced with this reply, in the order received (assistant only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
    /// OpenAI Responses: the id of the `message` output item that carried `content`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content_item_id: String,
    /// Gemini: the `thoughtSignature` of the text part.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content_signature: String,
    /// OpenAI Responses: the `phase` of the text's `message` item (`commentary` or
    /// `final_answer`). Not native data in the sense of [`Message::strip_native`]: OpenAI wants
    /// it back on every assistant message, so only renderers of other formats leave it out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content_phase: String,
    /// The message's own part of its provider's JSON, for a message appended natively
    /// (docs/native.md): rendered back in that format instead of the fields above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeContent>,
    /// The provider's usage for the call that produced the message.
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
    /// When the message happened, when the caller says so (history imported with its times);
    /// `None` means when it was appended. Shown by recall; never moves the sequence, ordering,
    /// `created_at` or retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<SystemTime>,
}

impl Message {
    /// A plain text message (system prompts, summaries, notices).
    pub fn text(role: Role, content: String) -> Self {
        Self {
            role,
            content,
            name: String::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            attachments: Vec::new(),
            metadata: BTreeMap::new(),
            exclude_from_context: false,
            pinned: false,
            error: None,
            response_id: String::new(),
            reasoning: Vec::new(),
            content_item_id: String::new(),
            content_signature: String::new(),
            content_phase: String::new(),
            native: None,
            usage: Usage::default(),
            occurred_at: None,
        }
    }

    /// The provider whose native data the message carries, if any: that of its reasoning, or
    /// Gemini for signatures, or OpenAI for item ids (append checks that it is only one).
    pub fn native_provider(&self) -> Option<Provider> {
        if let Some(first) = self.reasoning.first() {
            return Some(first.provider);
        }
        let signed =
            !self.content_signature.is_empty() || self.tool_calls.iter().any(|c| !c.signature.is_empty());
        let itemized =
            !self.content_item_id.is_empty() || self.tool_calls.iter().any(|c| !c.item_id.is_empty());
        match (signed, itemized) {
            (true, _) => Some(Provider::Gemini),
            (false, true) => Some(Provider::OpenAi),
            (false, false) => None,
        }
    }

    /// Whether the text counts as a block for [`Reasoning::position`].
    pub fn has_text_block(&self) -> bool {
        !self.content.is_empty() || !self.content_signature.is_empty()
    }

    /// The blocks the message is made of, in the order the model produced them: reasoning
    /// placed by its position among the text and the tool calls. `Text` is always listed (a
    /// failed call's note may render even without content); renderers skip it when empty.
    pub fn blocks(&self) -> Vec<Block<'_>> {
        let mut others: Vec<Block<'_>> = Vec::with_capacity(1 + self.tool_calls.len() + self.reasoning.len());
        others.push(Block::Text);
        others.extend(self.tool_calls.iter().map(Block::Call));
        if self.reasoning.is_empty() {
            return others;
        }
        // Position p counts the text only when it is a block; otherwise p > 0 means "before
        // call p", which is `others[p + 1]`, and 0 still means first.
        let shift = usize::from(!self.has_text_block());
        let mut out = Vec::with_capacity(others.len() + self.reasoning.len());
        let mut next = 0;
        for reasoning in &self.reasoning {
            let position = reasoning.position as usize;
            let at = match position {
                0 => 0,
                p => (p + shift).min(others.len()),
            };
            while next < at {
                out.push(others[next]);
                next += 1;
            }
            out.push(Block::Reasoning(reasoning));
        }
        out.extend_from_slice(&others[next..]);
        out
    }

    /// The message's size as a store loads it: its text, tool calls, attachments (inline data
    /// as base64), metadata and error, plus a fixed 256 for the rest. Page and response limits
    /// are counted in it.
    pub fn loaded_bytes(&self) -> usize {
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len())
            .sum();
        let attachments: usize = self
            .attachments
            .iter()
            .map(|a| {
                a.mime_type.len()
                    + a.filename.len()
                    + match &a.source {
                        AttachmentSource::Data(bytes) => bytes.len().div_ceil(3) * 4,
                        AttachmentSource::Uri(uri) => uri.len(),
                    }
            })
            .sum();
        let metadata: usize = self.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
        let error = self
            .error
            .as_ref()
            .map_or(0, |e| e.code.len() + e.message.len() + e.partial_output.len());
        let native = self.native_bytes() + self.native.as_ref().map_or(0, NativeContent::bytes);
        self.content.len()
            + self.name.len()
            + self.tool_call_id.as_ref().map_or(0, String::len)
            + self.response_id.len()
            + calls
            + attachments
            + metadata
            + error
            + native
            + 256
    }

    /// Bytes of the reasoning, signatures and item ids.
    pub fn native_bytes(&self) -> usize {
        let reasoning: usize = self
            .reasoning
            .iter()
            .map(|r| {
                r.kind.len()
                    + r.text.len()
                    + r.signature.len()
                    + r.data.len()
                    + r.id.len()
                    + r.summary.iter().map(String::len).sum::<usize>()
            })
            .sum();
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| c.signature.len() + c.item_id.len())
            .sum();
        reasoning + calls + self.content_item_id.len() + self.content_signature.len()
    }

    /// Keeps the native JSON only for `format`, the one it renders back to.
    pub fn keep_native_json_for(&mut self, format: Format) {
        if self.native.as_ref().is_some_and(|n| n.format != format) {
            self.native = None;
        }
    }

    /// True for the messages of a tool-call group: a call or a result.
    pub fn in_tool_group(&self) -> bool {
        !self.tool_calls.is_empty() || self.role == Role::Tool
    }
}

/// A message of the log, with what the server assigned when storing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Position in the conversation.
    pub sequence: Sequence,
    /// When it was stored.
    pub created_at: SystemTime,
    /// Its cost in a pack under each tokenizer, computed at append, without native data.
    pub tokens: TokenCounts,
    /// What its reasoning, signatures and item ids add in a pack of their provider.
    pub reasoning_tokens: TokenCounts,
    /// What its native JSON adds in a pack of that format beyond the fields above
    /// ([`NativeContent::extra_text`]).
    pub native_tokens: TokenCounts,
    /// For a tool result: the sequence of the call it answers.
    pub call_sequence: Option<Sequence>,
    /// For a turn start: its anchor level (see [`crate::domain::context::anchor`]).
    pub turn_anchor: Option<u8>,
    /// The message itself.
    pub message: Message,
}

/// Serde helper storing bytes as base64 text, compact in JSON columns.
mod base64_bytes {
    use base64::{Engine, engine::general_purpose::STANDARD};
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(position: u32) -> Reasoning {
        Reasoning {
            data: position.to_string(),
            position,
            ..Reasoning::new(Provider::Anthropic, "redacted_thinking")
        }
    }

    fn order(message: &Message) -> String {
        message
            .blocks()
            .iter()
            .map(|b| match b {
                Block::Reasoning(r) => format!("r{}", r.data),
                Block::Text => "text".into(),
                Block::Call(c) => c.id.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn blocks_sit_where_their_positions_say() {
        let calls = vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "f", "{}")];
        let with_text = Message {
            tool_calls: calls.clone(),
            reasoning: vec![at(0), at(0), at(2), at(3)],
            ..Message::text(Role::Assistant, "hi".into())
        };
        assert_eq!(order(&with_text), "r0 r0 text a r2 b r3");
        // Without text, positions count calls only; the (empty) text slot stays first.
        let without_text = Message {
            tool_calls: calls,
            reasoning: vec![at(0), at(1), at(2)],
            ..Message::text(Role::Assistant, String::new())
        };
        assert_eq!(order(&without_text), "r0 text a r1 b r2");
    }
}
