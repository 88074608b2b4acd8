//! A conversation message as ctxd understands it: the chat protocol's roles, tool calls and
//! results, attachments and failed LLM calls.

use std::{collections::BTreeMap, fmt, time::SystemTime};

use serde::{Deserialize, Serialize};

use super::{context::TokenCounts, ids::Sequence};

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
        }
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
        self.content.len()
            + self.name.len()
            + self.tool_call_id.as_ref().map_or(0, String::len)
            + self.response_id.len()
            + calls
            + attachments
            + metadata
            + error
            + 256
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
    /// Its cost in a pack under each tokenizer, computed at append.
    pub tokens: TokenCounts,
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
