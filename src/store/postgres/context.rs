//! What BuildContext reads on PostgreSQL: the conversation's state with the first page of its
//! tail in one round trip, further pages, and the open calls pending results answer.

use std::collections::HashMap;

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::rows::{
    MESSAGE_COLUMNS, byte_limit, capped_messages, capped_page, column, memory_from_row, stored_messages,
};
use crate::{
    domain::{
        ConversationId, Sequence, StoredMessage, TenantId,
        context::{ContextSnapshot, PageRequest, SummarySection},
    },
    store::{CappedPage, OpenedContext, StoreError},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn open_context(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    first_page: usize,
    max_bytes: usize,
) -> Result<OpenedContext, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    let state = client
        .prepare_cached(
            "SELECT c.last_sequence, c.last_user_sequence, c.last_response_id,
                    s.text AS summary_text, s.through_sequence AS summary_through_sequence,
                    m.document AS memory_document, m.through_sequence AS memory_through_sequence,
                    m.version AS memory_version
             FROM conversations c
             LEFT JOIN summaries s ON s.tenant_id = c.tenant_id
                  AND s.conversation_id = c.conversation_id AND s.version = c.summary_version
             LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
             WHERE c.tenant_id = $1 AND c.conversation_id = $2",
        )
        .await?;
    let pinned_query = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND pinned AND NOT exclude_from_context
         ORDER BY sequence"
    );
    let pinned = client.prepare_cached(&pinned_query).await?;
    let newest_query = capped_page(
        "tenant_id = $1 AND conversation_id = $2 AND NOT exclude_from_context",
        "DESC",
        "$3::bigint",
        "$4::bigint",
    );
    let newest = client.prepare_cached(&newest_query).await?;
    let (limit, max_bytes) = (first_page as i64, byte_limit(max_bytes));
    let newest_params: &[&(dyn ToSql + Sync)] = &[&t, &c, &limit, &max_bytes];
    let params: &[&(dyn ToSql + Sync)] = &[&t, &c];
    // The three queries go out together on one connection: one network round trip. The
    // server runs them in order, so the pages never miss a message the state counts;
    // anything newer than the state is dropped here or by the packer.
    let (state, pinned, newest) = tokio::try_join!(
        client.query_opt(&state, params),
        client.query(&pinned, params),
        client.query(&newest, newest_params),
    )?;
    let state = state.ok_or(StoreError::NotFound)?;
    let last_sequence = Sequence::from_stored(column(&state, "last_sequence")?);
    let last_user: Option<i64> = column(&state, "last_user_sequence")?;
    let pinned: Vec<StoredMessage> = stored_messages(&pinned)?;
    let summary_text: Option<String> = column(&state, "summary_text")?;
    let summary = match summary_text {
        Some(text) => Some(SummarySection {
            text,
            through_sequence: Sequence::from_stored(column(&state, "summary_through_sequence")?),
        }),
        None => None,
    };
    let memory = memory_from_row(&state)?;
    let snapshot = ContextSnapshot {
        last_sequence,
        last_user_sequence: last_user.map(Sequence::from_stored),
        last_response_id: column(&state, "last_response_id")?,
        pinned: pinned
            .into_iter()
            .filter(|m| m.sequence <= last_sequence)
            .collect(),
        summary,
        memory,
        pending_calls: HashMap::new(),
    };
    Ok(OpenedContext {
        snapshot,
        newest: capped_messages(&newest)?,
    })
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, before = page.before.get(), limit = page.limit))]
pub(super) async fn tail(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    page: PageRequest,
) -> Result<CappedPage, StoreError> {
    let client = pool.get().await?;
    let query = capped_page(
        "tenant_id = $1 AND conversation_id = $2 AND sequence < $3 AND sequence > $4
           AND NOT exclude_from_context",
        "DESC",
        "$5::bigint",
        "$6::bigint",
    );
    let statement = client.prepare_cached(&query).await?;
    let (limit, max_bytes) = (page.limit as i64, byte_limit(page.max_bytes));
    let rows = client
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &conversation.as_str(),
                &page.before.as_i64(),
                &page.floor.as_i64(),
                &limit,
                &max_bytes,
            ],
        )
        .await?;
    capped_messages(&rows)
}

pub(super) async fn open_calls(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    ids: &[String],
) -> Result<HashMap<String, Sequence>, StoreError> {
    let client = pool.get().await?;
    let rows = client
        .query(
            // Primary-key lookups only: the named calls, their messages, those messages' calls.
            "SELECT t.call_id, t.call_sequence FROM tool_calls t
             WHERE t.tenant_id = $1 AND t.conversation_id = $2 AND t.result_sequence IS NULL
               AND t.call_id IN (
                 SELECT c->>'id' FROM messages m, jsonb_array_elements(m.tool_calls) c
                 WHERE m.tenant_id = $1 AND m.conversation_id = $2
                   AND m.sequence IN (
                     SELECT call_sequence FROM tool_calls
                     WHERE tenant_id = $1 AND conversation_id = $2 AND call_id = ANY($3)
                       AND result_sequence IS NULL))",
            &[&tenant.as_str(), &conversation.as_str(), &ids],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok((
                column(r, "call_id")?,
                Sequence::from_stored(column(r, "call_sequence")?),
            ))
        })
        .collect()
}
