//! Which messages are turns of a pack in each format: what the checks of turn order (the reply
//! that would end a pack, the opening user turn) look at.

use super::anthropic::anthropic_renders;
use crate::domain::{
    context::{Format, cost::context_text},
    message::{Message, Role},
};

/// Whether `message` shows in a pack of `format` as something other than a system part: the
/// turns whose order the provider checks. Anthropic and Gemini leave out blank text (they
/// refuse it, `anthropic_renders`); Chat Completions sends every message as it is; Responses
/// leaves out only empty text.
pub fn renders_as_turn(format: Format, message: &Message) -> bool {
    match format {
        Format::AnthropicMessages | Format::Gemini => anthropic_renders(format, message),
        Format::OpenAiChat => message.role != Role::System,
        Format::OpenAiResponses => {
            let visible = || {
                !context_text(message).is_empty()
                    || message
                        .native
                        .as_ref()
                        .is_some_and(|n| n.format == format && n.has_reply())
            };
            match message.role {
                Role::System => false,
                Role::Tool => true,
                Role::User => !message.attachments.is_empty() || visible(),
                Role::Assistant => !message.tool_calls.is_empty() || visible(),
            }
        }
    }
}
