//! The log on PostgreSQL: ListMessages pages, the unsummarized tail, deletion.

use deadpool_postgres::Pool;

use super::rows::{MESSAGE_COLUMNS, stored_message};
use crate::{
    domain::{ConversationId, Sequence, StoredMessage, TenantId},
    store::{MessagePage, StoreError},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn list_messages(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    after: Sequence,
    limit: usize,
) -> Result<MessagePage, StoreError> {
    let client = pool.get().await?;
    let query = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3
         ORDER BY sequence LIMIT $4"
    );
    let statement = client.prepare_cached(&query).await?;
    let fetch = limit as i64 + 1;
    let rows = client
        .query(
            &statement,
            &[&tenant.as_str(), &conversation.as_str(), &after.as_i64(), &fetch],
        )
        .await?;
    if rows.is_empty() {
        let exists = client
            .query_opt(
                "SELECT 1 FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
                &[&tenant.as_str(), &conversation.as_str()],
            )
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
    }
    let has_more = rows.len() > limit;
    let messages = rows
        .iter()
        .take(limit)
        .map(stored_message)
        .collect::<Result<_, _>>()?;
    Ok(MessagePage { messages, has_more })
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn delete_conversation(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<u64, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::limit(&tx).await?;
    let removed = tx
        .execute(
            "DELETE FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
            &[&t, &c],
        )
        .await?;
    if removed == 0 {
        return Err(StoreError::NotFound);
    }
    let messages = tx
        .execute(
            "DELETE FROM messages WHERE tenant_id = $1 AND conversation_id = $2",
            &[&t, &c],
        )
        .await?;
    for table in ["tool_calls", "idempotency_keys", "summaries", "working_memory"] {
        let statement = format!("DELETE FROM {table} WHERE tenant_id = $1 AND conversation_id = $2");
        tx.execute(&statement, &[&t, &c]).await?;
    }
    tx.commit().await?;
    Ok(messages)
}

/// Every message after `after`, oldest first.
pub(super) async fn messages_after(
    client: &deadpool_postgres::Client,
    tenant: &str,
    conversation: &str,
    after: Sequence,
) -> Result<Vec<StoredMessage>, StoreError> {
    let query = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3 ORDER BY sequence"
    );
    let statement = client.prepare_cached(&query).await?;
    let rows = client
        .query(&statement, &[&tenant, &conversation, &after.as_i64()])
        .await?;
    rows.iter().map(stored_message).collect()
}
