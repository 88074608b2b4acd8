//! The provider formats a pack renders to and native JSON comes in: part of the vocabulary
//! (a message's native data names its format), so it stands below parsing and rendering.

use super::reasoning::Provider;

/// Provider format of the rendered pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Format {
    /// OpenAI Chat Completions `messages`.
    #[serde(rename = "openai_chat")]
    OpenAiChat,
    /// Anthropic Messages `{system, messages}`.
    #[serde(rename = "anthropic_messages")]
    AnthropicMessages,
    /// OpenAI Responses `input` items.
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// Gemini `{systemInstruction, contents}`.
    #[serde(rename = "gemini")]
    Gemini,
}

impl Format {
    /// The provider whose native data (reasoning, signatures, item ids) this format carries;
    /// Chat Completions carries none.
    pub fn provider(self) -> Option<Provider> {
        match self {
            Format::OpenAiChat => None,
            Format::AnthropicMessages => Some(Provider::Anthropic),
            Format::OpenAiResponses => Some(Provider::OpenAi),
            Format::Gemini => Some(Provider::Gemini),
        }
    }

    /// Whether the format's first turn must be a user turn (a placeholder opens the pack
    /// otherwise).
    pub fn opens_with_user_turn(self) -> bool {
        matches!(self, Format::AnthropicMessages | Format::Gemini)
    }

    /// Whether the provider's current models refuse a request that ends on an assistant
    /// message (see [`crate::domain::context::FinalAssistant`]).
    pub fn refuses_final_assistant(self) -> bool {
        matches!(self, Format::AnthropicMessages | Format::Gemini)
    }
}
