//! The conversation log: append, list, delete.

use super::{Service, ServiceError, offload};
use crate::{
    domain::{
        AppendBatch, AppendOutcome, ConversationId, Sequence, TenantId,
        context::{Format, render::render_history},
    },
    runtime::deadline::Deadline,
    runtime::response_budget::Reservation,
    store::{MessagePage, StoreError},
};

/// Page size of ListMessages when the request leaves it at 0.
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// Largest page size ListMessages serves; larger requests are capped.
pub const MAX_PAGE_SIZE: usize = 1000;

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

impl Service {
    /// Appends a parsed batch: counts its tokens (on the blocking pool when large), stores it
    /// atomically, and starts a background summary check when the log crossed a check point.
    #[tracing::instrument(name = "append", skip_all, fields(%tenant, conversation_id = %batch.conversation_id, messages = batch.messages.len()))]
    pub async fn append_message(
        &self,
        tenant: &TenantId,
        mut batch: AppendBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, ServiceError> {
        if !batch.unbound.is_empty() {
            // A keyed retry is recognised by what was sent, whatever the binding finds now.
            batch.fix_payload_hash();
            self.bind_results(tenant, &mut batch).await?;
        }
        batch.search_language = self.limits.search_language;
        let batch = offload(tenant.as_str(), batch.text_bytes(), move |cancel| {
            batch.count_tokens_until(&|| cancel.is_cancelled());
            batch
        })
        .await;
        let outcome = match self.store.append_messages(tenant, &batch, deadline).await {
            Err(StoreError::Invalid { violations }) => {
                let violations = violations.at_origins(&batch.origins);
                return Err(StoreError::Invalid { violations }.into());
            }
            stored => stored?,
        };
        if !outcome.replayed {
            self.after_append(tenant, &batch.conversation_id, outcome);
            self.embed_after_append(tenant, &batch.conversation_id);
        }
        tracing::info!(
            first_sequence = outcome.first_sequence.get(),
            last_sequence = outcome.last_sequence.get(),
            replayed = outcome.replayed,
            "appended"
        );
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
        // A page stops at the read's byte limit (with `has_more`): large messages make short
        // pages, never a large response.
        let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
        let read = reservation.begin_read()?;
        let page = self
            .store
            .list_messages(tenant, conversation, after, limit, read.limit)
            .await?;
        let loaded = super::packing::loaded_bytes(&page.messages);
        reservation.end_read(read, loaded)?;
        // The page, then its encoding; a rendering copies the page, then is encoded too.
        let rendered = match format {
            Some(format) => {
                reservation.settle_at(3 * loaded)?;
                let rendered = render_history(&page.messages, format);
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
