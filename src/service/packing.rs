//! BuildContext and CountTokens: the page loop around the sans-IO packer, and the rule that
//! pending tool results answer open calls.

use std::collections::HashMap;

use super::{
    Service, ServiceError,
    late_counts::LateCounts,
    offload,
    search::{RecallPlan, recall_into},
};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        StoredMessage, TenantId, Violations,
        context::{
            ContextPack, ContextPacker, ContextRequest, ContextSnapshot, initial_page_limit,
            pending::{attachment_bytes, check_pending, measure_attachments, stored_calls_answered},
            render::render,
        },
        search::Language,
    },
    runtime::{deadline::Deadline, response_budget::Reservation},
    store::{CappedPage, OpenedContext, Store},
};

/// A built pack and its rendering in the requested provider format.
#[derive(Debug)]
pub struct ContextOutcome {
    /// The pack: messages, stats, flags.
    pub pack: ContextPack,
    /// The pack as provider JSON, ready to send.
    pub rendered: String,
    /// Tail pages read from the store.
    pub pages: usize,
    /// The memory the response holds until the client has read it.
    pub reservation: Reservation,
}

impl Service {
    /// Builds the pack `request` asks for: reads the conversation's state and the log's tail
    /// page by page until the packer has what fits, then renders it.
    #[tracing::instrument(name = "build_context", skip_all, fields(%tenant, conversation_id = %request.conversation_id))]
    pub async fn build_context(
        &self,
        tenant: &TenantId,
        mut request: ContextRequest,
        deadline: Option<&Deadline>,
    ) -> Result<ContextOutcome, ServiceError> {
        let max_response = self.limits.max_response_bytes;
        // Pending images are measured as appended ones are (base64 of data URIs decoded: on
        // the CPU pool when large).
        let pending = std::mem::take(&mut request.pending);
        request.pending = offload(tenant.as_str(), attachment_bytes(&pending), move |_| {
            let mut pending = pending;
            measure_attachments(&mut pending);
            pending
        })
        .await;
        let outcome = build_context_pack(
            self,
            tenant,
            deadline,
            request,
            self.response_budget.reserve().of_tenant(tenant.as_str()),
            max_response,
            self.limits.search_language,
        )
        .await?;
        let s = &outcome.pack.stats;
        self.metrics.context_tokens.observe(f64::from(s.total_tokens));
        self.metrics
            .messages_dropped
            .inc_by(u64::from(s.messages_dropped));
        tracing::info!(
            pages = outcome.pages,
            total_tokens = s.total_tokens,
            budget_tokens = s.budget_tokens,
            messages_included = s.messages_included,
            messages_dropped = s.messages_dropped,
            tool_groups_dropped = s.tool_groups_dropped,
            incomplete_tool_groups = s.incomplete_tool_groups,
            truncated = s.truncated,
            over_budget = s.over_budget,
            needs_summary = outcome.pack.needs_summary,
            "context built"
        );
        Ok(outcome)
    }

    /// Counts `text`'s tokens, on the blocking pool when it is large.
    pub async fn count_tokens(&self, text: String, tokenizer: Tokenizer) -> Result<usize, ServiceError> {
        let limit = self.limits.append.max_content_bytes;
        if text.len() > limit {
            let problem = format!("{} bytes; the limit is {limit}", text.len());
            return Err(Violations::single("text", problem).into());
        }
        // CountTokens has no tenant: its callers share one owner's part of the CPU pool.
        Ok(offload("", text.len(), move |_| tokenizer.count(&text)).await)
    }
}

/// The pack for `request` from `store`. Every page is reserved in `reservation` before it is
/// read and cut at the read's byte limit (the packer then asks for the rest); the pack and its
/// rendering must fit `max_response` bytes.
async fn build_context_pack(
    service: &Service,
    tenant: &TenantId,
    deadline: Option<&Deadline>,
    request: ContextRequest,
    mut reservation: Reservation,
    max_response: usize,
    language: Language,
) -> Result<ContextOutcome, ServiceError> {
    let store = &*service.store;
    let conversation = request.conversation_id.clone();
    let recall = RecallPlan::of(&request, language);
    let first_page = initial_page_limit(&request);
    // The pinned messages come with the first page, outside its byte limit, counted once in.
    let read = reservation.begin_read()?;
    let OpenedContext {
        mut snapshot,
        newest,
        version,
    } = store
        .open_context(tenant, &conversation, first_page, read.limit)
        .await?;
    let (mut newest, cut) = (newest.messages, newest.cut_by_size);
    reservation.end_read(read, loaded_bytes(&newest) + loaded_bytes(&snapshot.pinned))?;
    let mut late = LateCounts::under(request.tokenizer);
    late.count(tenant.as_str(), &mut newest).await;
    late.count(tenant.as_str(), &mut snapshot.pinned).await;
    resolve_pending_results(store, tenant, &request, &mut snapshot).await?;

    let format = request.format;
    let mut packer = ContextPacker::new(request, snapshot);
    // A page cut at its byte limit is not the end of the log: the packer is told it asked for
    // exactly what came, and asks for the rest.
    let fed = if cut { newest.len() } else { first_page };
    packer.feed_first(newest, fed);
    let mut pages = 1;
    while let Some(mut page) = packer.next_page() {
        let read = reservation.begin_read()?;
        page.max_bytes = read.limit;
        let CappedPage {
            mut messages,
            cut_by_size,
        } = store.tail(tenant, &conversation, version, page).await?;
        reservation.end_read(read, loaded_bytes(&messages))?;
        late.count(tenant.as_str(), &mut messages).await;
        if cut_by_size {
            page.limit = messages.len();
        }
        packer.feed(messages, page);
        pages += 1;
    }
    let mut pack = packer.finish();
    late.store(store, tenant, &conversation).await;
    if let Some(plan) = &recall {
        recall_into(
            plan.call(service, tenant, &conversation, deadline),
            &mut pack,
            &mut reservation,
        )
        .await?;
    }
    let rendered = render(&pack.messages, format);
    let packed: usize = pack.messages.iter().map(|m| m.message.loaded_bytes()).sum();
    let response = packed + rendered.len();
    if response > max_response {
        return Err(ServiceError::PackTooLarge {
            bytes: response,
            limit: max_response,
        });
    }
    // From here on the response is all the call holds: its messages and rendering, then their
    // encoding.
    reservation.settle_at(2 * response)?;
    Ok(ContextOutcome {
        pack,
        rendered,
        pages,
        reservation,
    })
}

/// What `messages` weigh in a [`Reservation`].
pub(super) fn loaded_bytes(messages: &[StoredMessage]) -> usize {
    messages.iter().map(|m| m.message.loaded_bytes()).sum()
}

/// Pending tool results must answer open calls of the log (or calls made by earlier pending
/// messages) and complete their call's group; the packer needs those calls' sequences to keep
/// each group whole.
async fn resolve_pending_results(
    store: &dyn Store,
    tenant: &TenantId,
    request: &ContextRequest,
    snapshot: &mut ContextSnapshot,
) -> Result<(), ServiceError> {
    if request.pending.is_empty() {
        return Ok(());
    }
    let ids = stored_calls_answered(&request.pending);
    let open = match ids.is_empty() {
        true => HashMap::new(),
        false => store.open_calls(tenant, &request.conversation_id, &ids).await?,
    };
    check_pending(&request.pending, &open).into_result(())?;
    snapshot.pending_calls = open;
    Ok(())
}
