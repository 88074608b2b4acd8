//! Reasoning blocks as their providers produced them, kept verbatim (docs/design.md,
//! "Reasoning and provider-native data").

use serde::{Deserialize, Serialize};

/// A model provider whose native data (reasoning, signatures, item ids) a message carries
/// (docs/design.md, "Reasoning and provider-native data"). Native data goes back only to the provider that produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    OpenAi,
    /// Google Gemini.
    Gemini,
}

/// One reasoning block as its provider produced it, kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// Who produced it.
    pub provider: Provider,
    /// The block type as the provider spells it (see [`ReasoningKind`]).
    pub kind: String,
    /// Readable reasoning text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The provider's signature.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// Opaque or encrypted reasoning.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// The provider's item id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Summary parts, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<String>,
    /// How many of the message's other blocks (text, then tool calls) come before it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub position: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The reasoning block types ctxd knows, by provider (docs/design.md, "Reasoning and provider-native data").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningKind {
    /// Anthropic `thinking`: text and a required signature.
    AnthropicThinking,
    /// Anthropic `redacted_thinking`: opaque data.
    AnthropicRedacted,
    /// OpenAI `reasoning` item: id, summary parts, encrypted content, reasoning text.
    OpenAiReasoning,
    /// Gemini thought part: text and an optional signature.
    GeminiThought,
}

impl ReasoningKind {
    /// The kind `provider` calls `name`, if ctxd knows it.
    pub fn of(provider: Provider, name: &str) -> Option<Self> {
        match (provider, name) {
            (Provider::Anthropic, "thinking") => Some(Self::AnthropicThinking),
            (Provider::Anthropic, "redacted_thinking") => Some(Self::AnthropicRedacted),
            (Provider::OpenAi, "reasoning") => Some(Self::OpenAiReasoning),
            (Provider::Gemini, "thought") => Some(Self::GeminiThought),
            _ => None,
        }
    }

    /// The names `provider` uses, for error messages.
    pub fn names(provider: Provider) -> &'static str {
        match provider {
            Provider::Anthropic => "`thinking` or `redacted_thinking`",
            Provider::OpenAi => "`reasoning`",
            Provider::Gemini => "`thought`",
        }
    }
}

impl Reasoning {
    /// A block of `kind` with every field empty.
    pub fn new(provider: Provider, kind: impl Into<String>) -> Self {
        Self {
            provider,
            kind: kind.into(),
            text: String::new(),
            signature: String::new(),
            data: String::new(),
            id: String::new(),
            summary: Vec::new(),
            position: 0,
        }
    }

    /// Its kind; blocks are checked on append, so a stored block always has one.
    pub fn known_kind(&self) -> Option<ReasoningKind> {
        ReasoningKind::of(self.provider, &self.kind)
    }
}
