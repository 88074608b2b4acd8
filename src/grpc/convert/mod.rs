//! Conversions between the wire contract (`proto`) and the domain, one file per RPC group.
//! Requests are parsed with every field destructured, so a field added to the proto is a
//! compile error here until someone decides what it means. The scalar fields every group
//! shares (ids, sequences, roles, tokenizers, formats) are parsed in `fields`.

mod changes;
mod conversations;
mod fields;
mod message_out;
mod messages;
mod pack;
mod provider_json;
mod search;
mod summary;
mod working_memory;

pub(crate) use changes::{watch_request, watch_response};
pub(crate) use conversations::{
    conversation, fork_request, get_request, list_request as list_conversations_request, redact_request,
    rewind_request, update_request,
};
pub(crate) use fields::{conversation_id, tokenizer, tokenizer_to_proto};
pub(crate) use message_out::stored_message;
pub(crate) use messages::{append_batch, append_response, list_request, list_response};
pub(crate) use pack::{context_request, context_response};
pub(crate) use search::{search_request, search_response};
pub(crate) use summary::{prepared_request, summarize_request, summary};
pub(crate) use working_memory::{memory_from_proto, memory_to_proto};
