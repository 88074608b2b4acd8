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
        let limits = self.service.limits().append;
        let json_bytes = request.native.as_ref().map_or(0, |n| n.json.len());
        let parse = move |memory: &mut _| convert::append_batch(request, &limits, memory);
        let outcome = self
            .service
            .append_request(&tenant, json_bytes, parse, deadline.as_ref())
            .await?;
        Ok(convert::append_response(outcome))
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
        let (response, reservation) = convert::list_response(outcome);
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
        deadline: Option<Deadline>,
    ) -> Result<proto::SearchMessagesResponse, ServiceError> {
        let request = convert::search_request(request)?;
        let outcome = self
            .service
            .search_messages(&tenant, request, deadline.as_ref())
            .await?;
        Ok(convert::search_response(outcome))
    }
}
