//! The log on PostgreSQL: ListMessages pages, the unsummarized tail, deletion.

use deadpool_postgres::Pool;

use super::rows::{byte_limit, capped_messages, capped_page, fitting_page};
use crate::{
    domain::{ConversationId, Sequence, StoredMessage, TenantId, changes::ChangeKind},
    runtime::deadline::Deadline,
    store::{CappedPage, MessagePage, StoreError},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn list_messages(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    after: Sequence,
    limit: usize,
    max_bytes: usize,
) -> Result<MessagePage, StoreError> {
    let client = pool.get().await?;
    let query = fitting_page(
        "tenant_id = $1 AND conversation_id = $2 AND sequence > $3",
        "$4::bigint",
        "$5::bigint",
    );
    let statement = client.prepare_cached(&query).await?;
    let fetch = limit as i64 + 1;
    let max_bytes = byte_limit(max_bytes);
    let rows = client
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &conversation.as_str(),
                &after.as_i64(),
                &fetch,
                &max_bytes,
            ],
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
    let CappedPage {
        mut messages,
        cut_by_size: reached,
    } = capped_messages(&rows)?;
    messages.truncate(limit);
    Ok(MessagePage {
        messages,
        has_more: has_more || reached,
    })
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn delete_conversation(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    deadline: Option<&Deadline>,
) -> Result<u64, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;
    let sql = format!(
        "DELETE FROM conversations WHERE tenant_id = $1 AND conversation_id = $2 RETURNING {}",
        super::changes::DELETED_COLUMNS
    );
    let Some(removed) = tx.query_opt(&sql, &[&t, &c]).await? else {
        return Err(StoreError::NotFound);
    };
    super::changes::record_removal(&tx, t, c, ChangeKind::Deleted, &removed).await?;
    let messages = delete_rows(&tx, t, c).await?;
    super::writes::commit(tx, deadline).await?;
    Ok(messages)
}

/// Deletes everything a conversation holds but its row (which the caller deleted in `tx`);
/// returns the number of messages.
pub(super) async fn delete_rows(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    conversation: &str,
) -> Result<u64, StoreError> {
    let messages = tx
        .execute(
            "DELETE FROM messages WHERE tenant_id = $1 AND conversation_id = $2",
            &[&tenant, &conversation],
        )
        .await?;
    for table in [
        "tool_calls",
        "idempotency_keys",
        "summaries",
        "working_memory",
        "message_vectors",
    ] {
        let statement = format!("DELETE FROM {table} WHERE tenant_id = $1 AND conversation_id = $2");
        tx.execute(&statement, &[&tenant, &conversation]).await?;
    }
    Ok(messages)
}

/// The messages after `after`, oldest first, until their size reaches `max_bytes`; the flag is
/// true when they reach the log's end.
pub(super) async fn messages_after(
    client: &deadpool_postgres::Client,
    tenant: &str,
    conversation: &str,
    after: Sequence,
    max_bytes: usize,
) -> Result<(Vec<StoredMessage>, bool), StoreError> {
    let query = capped_page(
        "tenant_id = $1 AND conversation_id = $2 AND sequence > $3",
        "ASC",
        "ALL",
        "$4::bigint",
    );
    let statement = client.prepare_cached(&query).await?;
    let max_bytes = byte_limit(max_bytes);
    let rows = client
        .query(&statement, &[&tenant, &conversation, &after.as_i64(), &max_bytes])
        .await?;
    let CappedPage {
        messages,
        cut_by_size: reached,
    } = capped_messages(&rows)?;
    Ok((messages, !reached))
}
