//! The conversation log RPCs: AppendMessage, ListMessages, DeleteConversation.

use super::{ApiError, ContextApi, convert};
use crate::{
    domain::{AppendBatch, AppendLimits, Sequence, TenantId, Violations},
    proto,
};

/// Page size of ListMessages when the request leaves it at 0.
pub(crate) const DEFAULT_PAGE_SIZE: usize = 100;
/// Largest page size ListMessages serves; larger requests are capped.
pub(crate) const MAX_PAGE_SIZE: usize = 1000;

impl ContextApi {
    #[tracing::instrument(name = "AppendMessage", skip_all, fields(%tenant, conversation_id, messages))]
    pub(super) async fn append(
        &self,
        tenant: TenantId,
        request: proto::AppendMessageRequest,
    ) -> Result<proto::AppendMessageResponse, ApiError> {
        let limits = self.settings.append;
        // Token counting is CPU work proportional to the text: large requests run it on the
        // blocking pool so they cannot stall other calls.
        let batch = if prost::Message::encoded_len(&request) > super::context::OFFLOAD_BYTES {
            tokio::task::spawn_blocking(move || parse_and_count(request, &limits))
                .await
                .map_err(|e| ApiError::Internal {
                    message: format!("append parsing task failed: {e}"),
                })??
        } else {
            parse_and_count(request, &limits)?
        };
        let span = tracing::Span::current();
        span.record("conversation_id", tracing::field::display(&batch.conversation_id));
        span.record("messages", batch.messages.len());
        let outcome = self.store.append_messages(&tenant, &batch).await?;
        if !outcome.replayed {
            self.after_append(
                &tenant,
                &batch.conversation_id,
                outcome.first_sequence,
                outcome.last_sequence,
            );
        }
        tracing::info!(
            first_sequence = outcome.first_sequence.get(),
            last_sequence = outcome.last_sequence.get(),
            replayed = outcome.replayed,
            "appended"
        );
        Ok(proto::AppendMessageResponse {
            first_sequence: outcome.first_sequence.get(),
            last_sequence: outcome.last_sequence.get(),
            conversation_last_sequence: outcome.conversation_last_sequence.get(),
            replayed: outcome.replayed,
        })
    }

    #[tracing::instrument(name = "ListMessages", skip_all, fields(%tenant, conversation_id))]
    pub(super) async fn list(
        &self,
        tenant: TenantId,
        request: proto::ListMessagesRequest,
    ) -> Result<proto::ListMessagesResponse, ApiError> {
        let proto::ListMessagesRequest {
            conversation_id,
            after_sequence,
            page_size,
        } = request;
        let mut v = Violations::default();
        let conversation = convert::conversation_id(conversation_id, "conversation_id", &mut v);
        let after = Sequence::parse(after_sequence)
            .map_err(|e| v.add("after_sequence", e))
            .ok();
        let (Some(conversation), Some(after)) = (conversation, after) else {
            return Err(v.into());
        };
        tracing::Span::current().record("conversation_id", tracing::field::display(&conversation));
        let limit = match page_size as usize {
            0 => DEFAULT_PAGE_SIZE,
            n => n.min(MAX_PAGE_SIZE),
        };
        let page = self
            .store
            .list_messages(&tenant, &conversation, after, limit)
            .await?;
        let next_after_sequence = match (page.has_more, page.messages.last()) {
            (true, Some(last)) => last.sequence.get(),
            _ => 0,
        };
        Ok(proto::ListMessagesResponse {
            messages: page.messages.into_iter().map(convert::stored_message).collect(),
            next_after_sequence,
        })
    }

    #[tracing::instrument(name = "DeleteConversation", skip_all, fields(%tenant, conversation_id))]
    pub(super) async fn delete(
        &self,
        tenant: TenantId,
        request: proto::DeleteConversationRequest,
    ) -> Result<proto::DeleteConversationResponse, ApiError> {
        let proto::DeleteConversationRequest { conversation_id } = request;
        let mut v = Violations::default();
        let Some(conversation) = convert::conversation_id(conversation_id, "conversation_id", &mut v) else {
            return Err(v.into());
        };
        tracing::Span::current().record("conversation_id", tracing::field::display(&conversation));
        let messages_deleted = self.store.delete_conversation(&tenant, &conversation).await?;
        tracing::info!(messages_deleted, "conversation deleted");
        Ok(proto::DeleteConversationResponse { messages_deleted })
    }
}

fn parse_and_count(
    request: proto::AppendMessageRequest,
    limits: &AppendLimits,
) -> Result<AppendBatch, ApiError> {
    let mut batch = convert::append_batch(request, limits)?;
    batch.count_tokens();
    Ok(batch)
}
