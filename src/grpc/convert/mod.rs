//! Conversions between the wire contract (`proto`) and the domain, one file per RPC group.
//! Requests are parsed with every field destructured, so a field added to the proto is a
//! compile error here until someone decides what it means.

use crate::{
    domain::{ConversationId, Role, Sequence, Violations},
    proto,
    tokenize::Tokenizer,
};

mod context;
mod conversations;
mod messages;
mod native;
mod search;
mod summary;
mod working_memory;

pub(crate) use context::{context_request, context_response};
pub(crate) use conversations::{
    conversation, fork_request, get_request, list_request as list_conversations_request, redact_request,
    rewind_request, update_request,
};
pub(crate) use messages::{append_batch, list_request, stored_message};
pub(crate) use search::{search_request, search_response};
pub(crate) use summary::{prepared_request, summarize_request, summary};
pub(crate) use working_memory::{memory_from_proto, memory_to_proto};

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
