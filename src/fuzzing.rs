//! Entry points of the cargo-fuzz targets in `fuzz/` (docs/reliability.md): request decoding
//! and validation, and context assembly, driven by arbitrary input. They run the same code the
//! RPC handlers run, minus the network and the store. Not a supported API.

use std::{
    collections::{HashMap, HashSet},
    time::SystemTime,
};

use prost::Message as _;

use crate::{
    domain::{
        Role, Sequence, StoredMessage, Violations,
        context::{ContextPacker, ContextSnapshot, initial_page_limit, render::render},
        tool_protocol::check_tool_protocol,
    },
    grpc::{ApiSettings, convert},
    proto,
    tokenize::Tokenizer,
};

/// Decodes `bytes` as each request type and parses what decodes, as the handlers do.
pub fn decode_and_validate(bytes: &[u8]) {
    let settings = ApiSettings::default();
    if let Ok(request) = proto::AppendMessageRequest::decode(bytes)
        && let Ok(mut batch) = convert::append_batch(request, &settings.append)
    {
        batch.count_tokens();
        let _ = batch.payload_hash();
        let _ = check_tool_protocol(&batch.messages, Sequence::ZERO, &HashMap::new());
    }
    if let Ok(request) = proto::BuildContextRequest::decode(bytes) {
        let _ = convert::context_request(request, &settings);
    }
    if let Ok(memory) = proto::WorkingMemory::decode(bytes) {
        let _ = convert::memory_from_proto(memory, &settings.append, &mut Violations::default());
    }
    if let Ok(request) = proto::CountTokensRequest::decode(bytes) {
        for tokenizer in Tokenizer::ALL {
            let _ = tokenizer.count(&request.text);
        }
    }
}

/// Stores `log` as a new conversation (if it is a valid append) and builds the pack `request`
/// asks for, paging the log the way the store does. Panics when the pack breaks an invariant:
/// over budget without saying so, or a tool result without its call.
pub fn build_context(log: proto::AppendMessageRequest, mut request: proto::BuildContextRequest) {
    let settings = ApiSettings::default();
    let Ok(mut batch) = convert::append_batch(log, &settings.append) else {
        return;
    };
    let Ok(effects) = check_tool_protocol(&batch.messages, Sequence::ZERO, &HashMap::new()) else {
        return;
    };
    batch.count_tokens();
    request.conversation_id = batch.conversation_id.as_str().to_owned();
    let Ok(request) = convert::context_request(request, &settings) else {
        return;
    };
    let calls = effects.call_sequences(batch.messages.len());
    let log: Vec<StoredMessage> = batch
        .messages
        .into_iter()
        .zip(batch.tokens)
        .zip(calls)
        .enumerate()
        .map(|(i, ((message, tokens), call_sequence))| StoredMessage {
            sequence: Sequence::ZERO.plus(i as u64 + 1),
            created_at: SystemTime::UNIX_EPOCH,
            tokens,
            call_sequence,
            message,
        })
        .collect();
    let answered: HashSet<&str> = effects.answered.iter().map(|(_, id, _)| id.as_str()).collect();
    let open_calls: HashMap<String, Sequence> = effects
        .new_calls
        .iter()
        .filter(|(_, id)| !answered.contains(id.as_str()))
        .map(|(i, id)| (id.clone(), Sequence::ZERO.plus(*i as u64 + 1)))
        .collect();
    // The handler rejects pending results that answer no open call before packing.
    let mut called = HashSet::new();
    for m in &request.pending {
        called.extend(m.tool_calls.iter().map(|c| c.id.clone()));
        if let Some(id) = m.tool_call_id.as_deref()
            && m.role == Role::Tool
            && !called.contains(id)
            && !open_calls.contains_key(id)
        {
            return;
        }
    }
    let snapshot = ContextSnapshot {
        pending_calls: open_calls,
        ..ContextSnapshot::of_log(&log)
    };
    let format = request.format;
    let first = initial_page_limit(&request);
    let mut packer = ContextPacker::new(request, snapshot);
    let visible = || log.iter().rev().filter(|m| !m.message.exclude_from_context);
    packer.feed_first(visible().take(first).cloned().collect(), first);
    while let Some(page) = packer.next_page() {
        let rows = visible()
            .filter(|m| m.sequence < page.before && m.sequence > page.floor)
            .take(page.limit)
            .cloned()
            .collect();
        packer.feed(rows, page);
    }
    let pack = packer.finish();
    let _ = render(&pack.messages, format);
    let stats = pack.stats;
    assert!(
        stats.total_tokens <= stats.budget_tokens || stats.over_budget,
        "pack of {} tokens exceeds its budget of {} without saying so",
        stats.total_tokens,
        stats.budget_tokens
    );
    let included: HashSet<Sequence> = pack.messages.iter().filter_map(|m| m.sequence).collect();
    for m in &pack.messages {
        if let Some(call) = m.sequence.and_then(|s| log[s.get() as usize - 1].call_sequence) {
            assert!(
                included.contains(&call),
                "tool result {:?} is in the pack without its call",
                m.sequence
            );
        }
    }
}
