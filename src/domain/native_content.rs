//! The native data a message carries: its own part of its provider's JSON. Vocabulary (a
//! message holds one), so it stands below the parsers (`native`) and the renderers (`context`)
//! that give it meaning.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::Format;

/// A message's own part of its provider's JSON: Anthropic its `content` blocks (a tool result
/// its `tool_result` block), Responses its items, Gemini its `parts` (a result its
/// `functionResponse` part), Chat Completions the message object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeContent {
    /// The format it renders back to.
    pub format: Format,
    /// The JSON.
    pub json: Value,
}

impl NativeContent {
    /// Native content of `format`.
    pub fn new(format: Format, json: Value) -> Self {
        Self { format, json }
    }

    /// Bytes of the JSON text, for size limits.
    pub fn bytes(&self) -> usize {
        self.json.to_string().len()
    }
}
