//! ListConversations, GetConversation, UpdateConversation, ForkConversation, RedactMessage,
//! RewindConversation.

use super::{ContextApi, convert};
use crate::{domain::TenantId, proto, runtime::deadline::Deadline, service::ServiceError};

impl ContextApi {
    pub(super) async fn list_conversations(
        &self,
        tenant: TenantId,
        request: proto::ListConversationsRequest,
    ) -> Result<proto::ListConversationsResponse, ServiceError> {
        let query = convert::list_conversations_request(request)?;
        let page = self.service.list_conversations(&tenant, &query).await?;
        let next_page_token = match (page.has_more, page.conversations.last()) {
            (true, Some(last)) => query.page_token(&last.activity_key()),
            _ => String::new(),
        };
        Ok(proto::ListConversationsResponse {
            conversations: page
                .conversations
                .into_iter()
                .map(convert::conversation)
                .collect(),
            next_page_token,
        })
    }

    pub(super) async fn get_conversation(
        &self,
        tenant: TenantId,
        request: proto::GetConversationRequest,
    ) -> Result<proto::GetConversationResponse, ServiceError> {
        let id = convert::get_request(request)?;
        let conversation = self.service.get_conversation(&tenant, &id).await?;
        Ok(proto::GetConversationResponse {
            conversation: Some(convert::conversation(conversation)),
        })
    }

    pub(super) async fn update_conversation(
        &self,
        tenant: TenantId,
        request: proto::UpdateConversationRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::UpdateConversationResponse, ServiceError> {
        let (id, patch, if_missing) = convert::update_request(request)?;
        let conversation = self
            .service
            .update_conversation(&tenant, &id, &patch, if_missing, deadline.as_ref())
            .await?;
        Ok(proto::UpdateConversationResponse {
            conversation: Some(convert::conversation(conversation)),
        })
    }

    pub(super) async fn fork_conversation(
        &self,
        tenant: TenantId,
        request: proto::ForkConversationRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::ForkConversationResponse, ServiceError> {
        let (source, through, target) = convert::fork_request(request)?;
        let conversation = self
            .service
            .fork_conversation(&tenant, &source, through, &target, deadline.as_ref())
            .await?;
        Ok(proto::ForkConversationResponse {
            conversation: Some(convert::conversation(conversation)),
        })
    }

    pub(super) async fn redact_message(
        &self,
        tenant: TenantId,
        request: proto::RedactMessageRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::RedactMessageResponse, ServiceError> {
        let (id, sequence) = convert::redact_request(request)?;
        let redaction = self
            .service
            .redact_message(&tenant, &id, sequence, deadline.as_ref())
            .await?;
        Ok(proto::RedactMessageResponse {
            message: Some(convert::stored_message(redaction.message)),
            summaries_removed: redaction.summaries_removed,
            summary_through_sequence: redaction.summary_through_sequence.get(),
            memory_version: redaction.memory_version,
        })
    }

    pub(super) async fn rewind_conversation(
        &self,
        tenant: TenantId,
        request: proto::RewindConversationRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::RewindConversationResponse, ServiceError> {
        let (id, after, expected_last) = convert::rewind_request(request)?;
        let rewind = self
            .service
            .rewind_conversation(&tenant, &id, after, expected_last, deadline.as_ref())
            .await?;
        Ok(proto::RewindConversationResponse {
            messages_removed: rewind.messages_removed,
            last_sequence: rewind.last_sequence.get(),
            summaries_removed: rewind.summaries_removed,
            summary_through_sequence: rewind.summary_through_sequence.get(),
            memory_version: rewind.memory_version,
        })
    }
}
