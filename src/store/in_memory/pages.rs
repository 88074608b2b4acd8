//! Page helpers of the in-memory store: capped pages, the open calls pending results answer.

use std::collections::HashMap;

use super::entry::Conversation;
use crate::{
    domain::{CallState, Sequence, StoredMessage},
    store::{CappedPage, MemoryState},
};

/// The calls among `ids` that are open in `c`, with the sequence of the message that made
/// them (and its other open calls).
pub(super) fn open_calls(c: &Conversation, ids: &[String]) -> HashMap<String, Sequence> {
    let is_open = |id: &str| matches!(c.calls.get(id), Some(k) if k.state == CallState::Open);
    let mut open = HashMap::new();
    for id in ids.iter().filter(|id| is_open(id)) {
        let sequence = c.calls[id].sequence;
        let Some(call_message) = c.at(sequence) else {
            continue;
        };
        for call in call_message
            .message
            .tool_calls
            .iter()
            .filter(|call| is_open(&call.id))
        {
            open.insert(call.id.clone(), sequence);
        }
    }
    open
}

/// Clones `messages` until their size reaches `max_bytes` (the message that reaches it is the
/// last; a first one always comes), as PostgreSQL's capped pages do.
pub(super) fn capped<'a>(messages: impl Iterator<Item = &'a StoredMessage>, max_bytes: usize) -> CappedPage {
    let (mut out, mut bytes) = (Vec::new(), 0usize);
    for message in messages {
        if bytes >= max_bytes {
            break;
        }
        bytes += message.message.loaded_bytes();
        out.push(message.clone());
    }
    CappedPage {
        messages: out,
        cut_by_size: bytes >= max_bytes,
    }
}

/// Clones `messages` while they fit in `max_bytes`: the message that would take the page past it
/// is left for the next page (a first one always comes), as PostgreSQL's fitting pages do.
pub(super) fn fitting<'a>(messages: impl Iterator<Item = &'a StoredMessage>, max_bytes: usize) -> CappedPage {
    let (mut out, mut bytes) = (Vec::new(), 0usize);
    for message in messages {
        let size = message.message.loaded_bytes();
        if !out.is_empty() && bytes.saturating_add(size) > max_bytes {
            return CappedPage {
                messages: out,
                cut_by_size: true,
            };
        }
        bytes = bytes.saturating_add(size);
        out.push(message.clone());
    }
    CappedPage {
        messages: out,
        cut_by_size: false,
    }
}

/// The working memory of `c` and, with `messages_up_to` bytes, the messages after it.
pub(super) fn memory_state(c: &Conversation, messages_up_to: Option<usize>) -> MemoryState {
    let memory = c.memory.clone().unwrap_or_default();
    let from = (memory.through_sequence.get() as usize).min(c.messages.len());
    let CappedPage {
        messages,
        cut_by_size: reached,
    } = match messages_up_to {
        Some(max_bytes) => capped(c.messages[from..].iter(), max_bytes),
        None => CappedPage::default(),
    };
    MemoryState {
        memory,
        messages,
        complete: !reached,
        last_sequence: c.last_sequence(),
        redactions: c.redactions,
        rewinds: c.rewinds,
    }
}
