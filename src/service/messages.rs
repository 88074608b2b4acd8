//! The conversation log: append, list, delete.

use super::{Service, ServiceError, offload};
use crate::{
    domain::{
        AppendOutcome, ConversationId, ParsedBatch, Sequence, TenantId,
        context::{Format, render::render_history},
        tool_protocol::ProtocolViolation,
    },
    runtime::deadline::Deadline,
    runtime::response_budget::Reservation,
    store::{MessagePage, StoreError},
};

/// Page size of ListMessages when the request leaves it at 0.
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// Largest page size ListMessages serves; larger requests are capped.
pub const MAX_PAGE_SIZE: usize = 1000;
/// The most bytes a ListMessages response holds (messages and `rendered`), where messages allow
/// (one larger message still comes alone): within the 4 MiB gRPC clients accept by default.
pub(super) const PAGE_BYTES: usize = 3 << 20;

/// What ListMessages answers.
#[derive(Debug)]
pub struct MessagesOutcome {
    /// The page.
    pub page: MessagePage,
    /// The page rendered in the format asked for, if one was.
    pub rendered: Option<String>,
    /// The memory the response holds until the client has read it.
    pub reservation: Reservation,
}

/// The memory a request's provider JSON may take while it is parsed: reserved before the parse
/// (refused, RESOURCE_EXHAUSTED, when the replica or the tenant has not that much free) and
/// held until the call is done.
#[derive(Debug)]
pub struct JsonMemory(Reservation);

impl JsonMemory {
    /// Parse memory held in `reservation`.
    pub fn new(reservation: Reservation) -> Self {
        Self(reservation)
    }

    /// Reserves what parsing `json` takes ([`crate::domain::native::parse_memory`]).
    pub fn reserve_for(&mut self, json: &str) -> Result<(), ServiceError> {
        self.0.grow(crate::domain::native::parse_memory(json))?;
        Ok(())
    }
}

impl Service {
    /// Parses an AppendMessage request with `parse` (off the async workers when it carries more
    /// than [`super::OFFLOAD_BYTES`] of provider JSON, in memory `parse` reserves), then
    /// appends the batch as [`Service::append_message`] does, holding that memory until done.
    pub async fn append_request(
        &self,
        tenant: &TenantId,
        json_bytes: usize,
        parse: impl FnOnce(&mut JsonMemory) -> Result<ParsedBatch, ServiceError> + Send + 'static,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, ServiceError> {
        let mut memory = JsonMemory(self.response_budget.reserve().of_tenant(tenant.as_str()));
        let (batch, memory) = offload(tenant.as_str(), json_bytes, move |_| {
            parse(&mut memory).map(|batch| (batch, memory))
        })
        .await?;
        let outcome = self.append_message(tenant, batch, deadline).await;
        drop(memory);
        outcome
    }

    /// Appends a parsed batch: binds results that name their call by function name, counts
    /// its tokens (on the blocking pool when large), stores it atomically, and starts a
    /// background summary check when the log crossed a check point.
    #[tracing::instrument(name = "append", skip_all, fields(%tenant, conversation_id = %batch.conversation_id, messages = batch.messages.len()))]
    pub async fn append_message(
        &self,
        tenant: &TenantId,
        mut batch: ParsedBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, ServiceError> {
        let mut sent_hash = None;
        if batch.messages.iter().any(|m| m.unbound_call.is_some()) {
            // A keyed retry is recognised by what was sent, whatever the binding finds now.
            sent_hash = batch.idempotency_key.as_ref().map(|_| batch.payload_hash());
            self.bind_results(tenant, &mut batch).await?;
        }
        let (language, counted_by) = (self.limits.search_language, self.limits.counted_tokenizers);
        let counted = offload(tenant.as_str(), batch.text_bytes(), move |cancel| {
            batch.count(language, counted_by, sent_hash, &|| cancel.is_cancelled())
        })
        .await;
        // Counting stops only once nobody waits for the answer.
        let batch = counted.ok_or_else(|| StoreError::internal("append counting cancelled"))?;
        let outcome = match self.store.append_messages(tenant, &batch, deadline).await {
            Err(StoreError::ToolProtocol { violations }) => {
                let violations = ProtocolViolation::into_violations(&violations, |i| batch.field_of(i));
                return Err(violations.into());
            }
            stored => stored?,
        };
        if !outcome.replayed {
            self.after_append(tenant, &batch.conversation_id, outcome);
            self.embed_after_append(tenant, &batch.conversation_id);
        }
        // The call's one log line ("rpc finished") carries the sequences.
        Ok(outcome)
    }

    /// A page of the log after `after`; `page_size` 0 means [`DEFAULT_PAGE_SIZE`], larger than
    /// [`MAX_PAGE_SIZE`] is capped.
    #[tracing::instrument(name = "list_messages", skip_all, fields(%tenant, conversation_id = %conversation))]
    pub async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        page_size: usize,
        format: Option<Format>,
    ) -> Result<MessagesOutcome, ServiceError> {
        let limit = match page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        // A page holds what fits in the read's limit and in a response a default client
        // accepts (with `has_more`): large messages make short pages, never a large response.
        // A rendering comes with its page, so the page leaves it room.
        let fits = match format {
            Some(_) => PAGE_BYTES / 2,
            None => PAGE_BYTES,
        };
        let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
        let read = reservation.begin_read()?;
        let mut page = self
            .store
            .list_messages(tenant, conversation, after, limit, read.limit.min(fits))
            .await?;
        let loaded = super::packing::loaded_bytes(&page.messages);
        reservation.end_read(read, loaded)?;
        // The page, then its encoding; a rendering copies the page, then is encoded too.
        let rendered = match format {
            Some(format) => {
                reservation.settle_at(3 * loaded)?;
                let mut rendered = render_history(&page.messages, format);
                // Escaping can make a rendering several times its text: halve the page until
                // the two fit (a single message comes whatever its size).
                let mut loaded = loaded;
                while page.messages.len() > 1 && loaded + rendered.len() > PAGE_BYTES {
                    page.messages.truncate(page.messages.len() / 2);
                    page.has_more = true;
                    loaded = super::packing::loaded_bytes(&page.messages);
                    // The rendering before goes before the next is made.
                    rendered.clear();
                    rendered.shrink_to_fit();
                    rendered = render_history(&page.messages, format);
                }
                reservation.settle_at(2 * loaded + 2 * rendered.len())?;
                Some(rendered)
            }
            None => {
                reservation.settle_at(2 * loaded)?;
                None
            }
        };
        Ok(MessagesOutcome {
            page,
            rendered,
            reservation,
        })
    }

    /// Erases a conversation; returns how many messages it held.
    #[tracing::instrument(name = "delete_conversation", skip_all, fields(%tenant, conversation_id = %conversation))]
    pub async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<u64, ServiceError> {
        let messages_deleted = self
            .store
            .delete_conversation(tenant, conversation, deadline)
            .await?;
        tracing::info!(messages_deleted, "conversation deleted");
        Ok(messages_deleted)
    }
}
