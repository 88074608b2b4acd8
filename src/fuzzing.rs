//! Entry points of the cargo-fuzz targets in `fuzz/` (docs/reliability.md): request decoding
//! and validation, and context assembly, driven by arbitrary input. They run the code the RPC
//! handlers run (the same parsing, the same service use cases on the in-memory store), minus
//! the network. Not a supported API.

use std::{collections::HashSet, sync::Arc};

use prost::Message as _;

use crate::{
    domain::tokenize::Tokenizer,
    domain::{Sequence, TenantId, Violations},
    grpc::convert,
    proto,
    runtime::response_budget::ResponseBudget,
    service::{AiSettings, JsonMemory, Limits, Service},
    store::InMemoryStore,
};

/// As much parse memory as a replica with the default limits gives one call.
fn parse_memory(limits: &Limits) -> JsonMemory {
    let budget = ResponseBudget::new(limits.response_budget_bytes, limits.max_response_bytes);
    JsonMemory::new(budget.reserve())
}

/// Decodes `bytes` as each request type and parses what decodes, as the handlers do.
pub fn decode_and_validate(bytes: &[u8]) {
    let limits = Limits::default();
    if let Ok(request) = proto::AppendMessageRequest::decode(bytes)
        && let Ok(batch) = convert::append_batch(request, &limits.append, &mut parse_memory(&limits))
    {
        let _ = batch.payload_hash();
        if let Some(batch) = batch.count(
            Default::default(),
            crate::domain::token_counts::Tokenizers::ALL,
            None,
            &|| false,
        ) {
            let _ = crate::domain::append::plan(&batch, &Default::default());
        }
    }
    if let Ok(request) = proto::BuildContextRequest::decode(bytes) {
        let _ = convert::context_request(request, &limits);
    }
    if let Ok(memory) = proto::WorkingMemory::decode(bytes) {
        let _ = convert::memory_from_proto(memory, &limits.append, &mut Violations::default());
    }
    if let Ok(request) = proto::SummarizeRequest::decode(bytes) {
        let _ = convert::summarize_request(request, &limits, 1_000);
    }
    if let Ok(request) = proto::CountTokensRequest::decode(bytes) {
        for tokenizer in Tokenizer::ALL {
            let _ = tokenizer.count(&request.text);
        }
    }
}

/// Appends `log` to a new conversation of a fresh in-memory store (if it is a valid append) and
/// builds the pack `request` asks for through the service. Panics when the pack breaks an
/// invariant: over budget without saying so, or a tool result without its call.
pub fn build_context(log: proto::AppendMessageRequest, mut request: proto::BuildContextRequest) {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime");
    }
    let limits = Limits::default();
    let Ok(batch) = convert::append_batch(log, &limits.append, &mut parse_memory(&limits)) else {
        return;
    };
    request.conversation_id = batch.conversation_id.as_str().to_owned();
    let Ok(request) = convert::context_request(request, &limits) else {
        return;
    };
    let service = Service::new(Arc::new(InMemoryStore::new()), limits, AiSettings::default());
    let tenant = TenantId::parse("fuzz").expect("a valid tenant");
    RUNTIME.with(|runtime| runtime.block_on(append_then_build(&service, &tenant, batch, request)));
}

async fn append_then_build(
    service: &Service,
    tenant: &TenantId,
    batch: crate::domain::ParsedBatch,
    request: crate::domain::context::ContextRequest,
) {
    let conversation = batch.conversation_id.clone();
    if service.append_message(tenant, batch, None).await.is_err() {
        return;
    }
    let Ok(outcome) = service.build_context(tenant, request, None).await else {
        return;
    };
    let stats = &outcome.pack.stats;
    assert!(
        stats.total_tokens <= stats.budget_tokens || stats.over_budget,
        "pack of {} tokens exceeds its budget of {} without saying so",
        stats.total_tokens,
        stats.budget_tokens
    );
    let log = service
        .list_messages(tenant, &conversation, Sequence::ZERO, 1_000, None)
        .await
        .expect("the appended log reads back")
        .page
        .messages;
    let pack = &outcome.pack.messages;
    let included: HashSet<Sequence> = pack.iter().filter_map(|m| m.sequence).collect();
    for m in pack {
        let call = m.sequence.and_then(|s| log[s.get() as usize - 1].call_sequence);
        if let Some(call) = call {
            assert!(
                included.contains(&call),
                "tool result {:?} is in the pack without its call",
                m.sequence
            );
        }
    }
}
