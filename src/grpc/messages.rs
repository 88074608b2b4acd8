//! AppendMessage, ListMessages, DeleteConversation, SearchMessages.

use super::{ContextApi, Reply, convert};
use crate::{
    domain::{TenantId, Violations},
    proto,
    runtime::deadline::Deadline,
    service::ServiceError,
};

impl ContextApi {
    pub(super) async fn append_message(
        &self,
        tenant: TenantId,
        request: proto::AppendMessageRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::AppendMessageResponse, ServiceError> {
        // Provider JSON is parsed off the async workers when it is large, in memory reserved
        // before the parse (refused, RESOURCE_EXHAUSTED, when the replica or the tenant has not
        // that much free) and held until the append is done.
        let limits = self.service.limits().append;
        let json_bytes = request.native.as_ref().map_or(0, |n| n.json.len());
        let mut reservation = self
            .service
            .response_budget()
            .reserve()
            .of_tenant(tenant.as_str());
        let (batch, reservation) = crate::service::offload(tenant.as_str(), json_bytes, move |_| {
            if let Some(native) = &request.native {
                reservation.grow(crate::domain::native::parse_memory(&native.json))?;
            }
            Ok::<_, ServiceError>((convert::append_batch(request, &limits)?, reservation))
        })
        .await?;
        let outcome = self
            .service
            .append_message(&tenant, batch, deadline.as_ref())
            .await?;
        drop(reservation);
        Ok(proto::AppendMessageResponse {
            first_sequence: outcome.first_sequence.get(),
            last_sequence: outcome.last_sequence.get(),
            conversation_last_sequence: outcome.conversation_last_sequence.get(),
            replayed: outcome.replayed,
        })
    }

    pub(super) async fn list_messages(
        &self,
        tenant: TenantId,
        request: proto::ListMessagesRequest,
    ) -> Result<Reply<proto::ListMessagesResponse>, ServiceError> {
        let request = convert::list_request(request)?;
        let outcome = self
            .service
            .list_messages(
                &tenant,
                &request.conversation,
                request.after,
                request.page_size,
                request.format,
            )
            .await?;
        let (page, reservation) = (outcome.page, outcome.reservation);
        let next_after_sequence = match (page.has_more, page.messages.last()) {
            (true, Some(last)) => last.sequence.get(),
            _ => 0,
        };
        let response = proto::ListMessagesResponse {
            messages: page.messages.into_iter().map(convert::stored_message).collect(),
            next_after_sequence,
            rendered: outcome.rendered.unwrap_or_default(),
        };
        Ok(Reply::holding(response, reservation))
    }

    pub(super) async fn delete_conversation(
        &self,
        tenant: TenantId,
        request: proto::DeleteConversationRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::DeleteConversationResponse, ServiceError> {
        let proto::DeleteConversationRequest { conversation_id } = request;
        let mut v = Violations::default();
        let conversation = convert::conversation_id(conversation_id, "conversation_id", &mut v);
        let conversation = conversation.ok_or(v)?;
        let messages_deleted = self
            .service
            .delete_conversation(&tenant, &conversation, deadline.as_ref())
            .await?;
        Ok(proto::DeleteConversationResponse { messages_deleted })
    }

    pub(super) async fn search_messages(
        &self,
        tenant: TenantId,
        request: proto::SearchMessagesRequest,
    ) -> Result<proto::SearchMessagesResponse, ServiceError> {
        let request = convert::search_request(request)?;
        let outcome = self.service.search_messages(&tenant, request).await?;
        Ok(convert::search_response(outcome))
    }
}
