//! What a redaction does to a message and to what was derived from it (docs/design.md,
//! "Conversations as resources"). The stores read the message, write what [`redacted`] returns
//! and drop what these rules say the redaction reaches.

use super::REDACTED_CONTENT;
use crate::domain::{
    Message, Sequence, StoredMessage, ToolCall,
    token_counts::{TokenCounts, Tokenizers},
    working_memory::WorkingMemory,
};

/// The stored message as a redaction leaves it: a [`tombstone`] at the same log position, its
/// tokens recounted and no native data left to count. The tombstone is counted under every
/// tokenizer: a count made after an append is stored only where none is (see
/// [`crate::domain::context::cost::CountedLate`]), so none made from the old text can land on it.
pub fn redacted(stored: &StoredMessage) -> StoredMessage {
    let message = tombstone(&stored.message);
    StoredMessage {
        tokens: TokenCounts::of(&message, Tokenizers::ALL),
        reasoning_tokens: TokenCounts::default(),
        native_tokens: TokenCounts::default(),
        message,
        ..stored.clone()
    }
}

/// What [`Message`] becomes when redacted: role, name, tool-call ids and names, the answered
/// call, flags and response id stay (the protocol and the ordering hold); content becomes
/// [`REDACTED_CONTENT`], tool arguments `{}`, and attachments, error details, reasoning,
/// signatures and item ids go. Metadata stays: it is the caller's bookkeeping (mode, run id),
/// not what was said.
pub fn tombstone(message: &Message) -> Message {
    Message {
        role: message.role,
        content: REDACTED_CONTENT.to_owned(),
        name: message.name.clone(),
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| ToolCall::new(call.id.clone(), call.name.clone(), "{}"))
            .collect(),
        tool_call_id: message.tool_call_id.clone(),
        attachments: Vec::new(),
        metadata: message.metadata.clone(),
        exclude_from_context: message.exclude_from_context,
        pinned: message.pinned,
        error: None,
        response_id: message.response_id.clone(),
        reasoning: Vec::new(),
        content_item_id: String::new(),
        content_signature: String::new(),
        content_phase: String::new(),
        native: None,
        usage: message.usage,
        occurred_at: message.occurred_at,
    }
}

/// Whether a summary through `watermark` read the redacted message at `sequence` (and so is
/// removed with it).
pub fn summary_covers(watermark: Sequence, sequence: Sequence) -> bool {
    watermark >= sequence
}

/// Whether the append that stored `first..=last` stored the redacted message at `sequence`
/// (its idempotency record then no longer holds the payload's hash).
pub fn append_covers(first: Sequence, last: Sequence, sequence: Sequence) -> bool {
    first <= sequence && sequence <= last
}

/// The working memory without anything taken from `sequence`: items and glossary entries
/// citing it are removed (an item they superseded is current again), and the prose summary is
/// cleared when the memory had read the message. True when anything changed. The memory gets
/// a new version even when nothing changed: an extraction that read the text before the
/// redaction cannot be stored after it.
pub fn forget_in_memory(memory: &mut WorkingMemory, sequence: Sequence) -> bool {
    let before = memory.clone();
    memory.retain_sources(|s| s != sequence);
    if memory.through_sequence >= sequence && !memory.summary.is_empty() {
        memory.summary.clear();
    }
    *memory != before
}

/// Whether a derivation made from `read` (messages in sequence order) still holds on `fresh`,
/// a later read from the same point: every message of `read` is in `fresh` unchanged, so the
/// redactions counted since `read` were of other messages. A shorter `fresh` does not vouch
/// for what it lacks.
pub fn unchanged_since(read: &[StoredMessage], fresh: &[StoredMessage]) -> bool {
    let mut fresh = fresh.iter();
    read.iter().all(|message| {
        fresh
            .find(|f| f.sequence >= message.sequence)
            .is_some_and(|f| f.sequence == message.sequence && f.message == message.message)
    })
}

/// Whether two versions of working memory hold the same items, glossary, summary and
/// watermark (the version and the time aside): a redaction that bumped the version changed
/// nothing in it.
pub fn same_memory(a: &WorkingMemory, b: &WorkingMemory) -> bool {
    let plain = |m: &WorkingMemory| WorkingMemory {
        version: 0,
        updated_at: None,
        ..m.clone()
    };
    plain(a) == plain(b)
}
