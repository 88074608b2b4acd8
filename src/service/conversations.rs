//! Conversations as resources: get, update, list, fork, redact, and the retention sweep.

use super::{Service, ServiceError};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId, Violations,
        conversation::{Conversation, ConversationPage, ConversationPatch, IfMissing, ListQuery},
    },
    runtime::deadline::Deadline,
    store::{Redaction, Rewind},
};

impl Service {
    /// A page of the tenant's conversations, newest activity first.
    #[tracing::instrument(name = "list_conversations", skip_all, fields(%tenant, limit = query.limit))]
    pub async fn list_conversations(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<ConversationPage, ServiceError> {
        Ok(self.store.list_conversations(tenant, query).await?)
    }

    /// One conversation's resource.
    #[tracing::instrument(name = "get_conversation", skip_all, fields(%tenant, conversation_id = %conversation))]
    pub async fn get_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Conversation, ServiceError> {
        Ok(self.store.get_conversation(tenant, conversation).await?)
    }

    /// Sets a conversation's title, status, labels or expiry.
    #[tracing::instrument(name = "update_conversation", skip_all, fields(%tenant, conversation_id = %conversation, ?if_missing))]
    pub async fn update_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        patch: &ConversationPatch,
        if_missing: IfMissing,
        deadline: Option<&Deadline>,
    ) -> Result<Conversation, ServiceError> {
        Ok(self
            .store
            .update_conversation(tenant, conversation, patch, if_missing, deadline)
            .await?)
    }

    /// Forks `source` through `through` into `target`.
    #[tracing::instrument(name = "fork_conversation", skip_all, fields(%tenant, conversation_id = %source, through = through.get(), new_conversation_id = %target))]
    pub async fn fork_conversation(
        &self,
        tenant: &TenantId,
        source: &ConversationId,
        through: Sequence,
        target: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<Conversation, ServiceError> {
        let limit = self.limits.max_fork_messages;
        if through.get() > limit as u64 {
            let problem = format!(
                "a fork copies at most {limit} messages (CTXD_MAX_FORK_MESSAGES): fork at or before \
                 sequence {limit}"
            );
            return Err(Violations::single("through_sequence", problem).into());
        }
        let Some(_slot) = self.forks.try_take(tenant) else {
            return Err(ServiceError::TenantBusy {
                what: "forks",
                limit: self.forks.per_tenant(),
            });
        };
        let fork = self
            .store
            .fork_conversation(tenant, source, through, target, deadline)
            .await?;
        tracing::info!(messages = fork.last_sequence.get(), "conversation forked");
        Ok(fork)
    }

    /// Redacts one message and what was derived from it.
    #[tracing::instrument(name = "redact_message", skip_all, fields(%tenant, conversation_id = %conversation, sequence = sequence.get()))]
    pub async fn redact_message(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        sequence: Sequence,
        deadline: Option<&Deadline>,
    ) -> Result<Redaction, ServiceError> {
        let redaction = self
            .store
            .redact_message(tenant, conversation, sequence, deadline)
            .await?;
        tracing::info!(
            summaries_removed = redaction.summaries_removed,
            memory_version = redaction.memory_version,
            "message redacted"
        );
        Ok(redaction)
    }

    /// Removes the messages after `after` and what was derived from them.
    #[tracing::instrument(name = "rewind_conversation", skip_all, fields(%tenant, conversation_id = %conversation, after = after.get()))]
    pub async fn rewind_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        expected_last: Option<Sequence>,
        deadline: Option<&Deadline>,
    ) -> Result<Rewind, ServiceError> {
        let rewind = self
            .store
            .rewind_conversation(tenant, conversation, after, expected_last, deadline)
            .await?;
        tracing::info!(
            messages_removed = rewind.messages_removed,
            summaries_removed = rewind.summaries_removed,
            memory_version = rewind.memory_version,
            "conversation rewound"
        );
        Ok(rewind)
    }
}
