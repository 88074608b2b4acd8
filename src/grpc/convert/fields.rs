//! The scalar fields every RPC group shares: conversation ids, sequences, roles, tokenizers and
//! formats, each parsed with its violation under the field's path, and written back.

use crate::{
    domain::tokenize::Tokenizer,
    domain::{ConversationId, Role, Sequence, Violations, format::Format},
    proto,
};

/// Parses a conversation id field, recording a violation under `field`.
pub(crate) fn conversation_id(raw: String, field: &str, v: &mut Violations) -> Option<ConversationId> {
    ConversationId::parse(raw).map_err(|e| v.add(field, e)).ok()
}

/// Parses a sequence field, recording a violation under `field`.
pub(crate) fn sequence(raw: u64, field: &str, v: &mut Violations) -> Option<Sequence> {
    Sequence::parse(raw).map_err(|e| v.add(field, e)).ok()
}

/// The wire enum of a role.
pub(crate) fn role_to_proto(role: Role) -> proto::Role {
    match role {
        Role::System => proto::Role::System,
        Role::User => proto::Role::User,
        Role::Assistant => proto::Role::Assistant,
        Role::Tool => proto::Role::Tool,
    }
}

/// Parses a tokenizer enum field; unspecified means `default`.
pub(crate) fn tokenizer(raw: i32, field: &str, default: Tokenizer, v: &mut Violations) -> Tokenizer {
    match proto::Tokenizer::try_from(raw) {
        Ok(proto::Tokenizer::Unspecified) => default,
        Ok(proto::Tokenizer::O200kBase) => Tokenizer::O200kBase,
        Ok(proto::Tokenizer::Cl100kBase) => Tokenizer::Cl100kBase,
        Ok(proto::Tokenizer::Approx) => Tokenizer::Approx,
        Err(_) => {
            v.add(field, format!("unknown tokenizer value {raw}"));
            default
        }
    }
}

/// The wire enum of a tokenizer.
pub(crate) fn tokenizer_to_proto(tokenizer: Tokenizer) -> proto::Tokenizer {
    match tokenizer {
        Tokenizer::O200kBase => proto::Tokenizer::O200kBase,
        Tokenizer::Cl100kBase => proto::Tokenizer::Cl100kBase,
        Tokenizer::Approx => proto::Tokenizer::Approx,
    }
}

/// A role at `field`, which is required.
pub(crate) fn role_at(role: i32, field: &str, v: &mut Violations) -> Option<Role> {
    match proto::Role::try_from(role) {
        Ok(proto::Role::System) => Some(Role::System),
        Ok(proto::Role::User) => Some(Role::User),
        Ok(proto::Role::Assistant) => Some(Role::Assistant),
        Ok(proto::Role::Tool) => Some(Role::Tool),
        Ok(proto::Role::Unspecified) => {
            v.add(field, "role is required");
            None
        }
        Err(_) => {
            v.add(field, format!("unknown role value {role}"));
            None
        }
    }
}

/// The pack's format (OpenAI chat when unspecified).
pub(crate) fn format_of(format: i32, field: &str, v: &mut Violations) -> Format {
    match proto::Format::try_from(format) {
        Ok(proto::Format::Unspecified | proto::Format::OpenaiChat) => Format::OpenAiChat,
        Ok(proto::Format::AnthropicMessages) => Format::AnthropicMessages,
        Ok(proto::Format::OpenaiResponses) => Format::OpenAiResponses,
        Ok(proto::Format::Gemini) => Format::Gemini,
        Err(_) => {
            v.add(field, format!("unknown format value {format}"));
            Format::OpenAiChat
        }
    }
}

/// The wire form of a format.
pub(crate) fn format_to_proto(format: Format) -> proto::Format {
    match format {
        Format::OpenAiChat => proto::Format::OpenaiChat,
        Format::AnthropicMessages => proto::Format::AnthropicMessages,
        Format::OpenAiResponses => proto::Format::OpenaiResponses,
        Format::Gemini => proto::Format::Gemini,
    }
}
