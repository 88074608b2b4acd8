//! Redacting a message on PostgreSQL: the message overwritten by its tombstone, and the
//! summaries, working memory and idempotency records that held its text changed in the same
//! transaction.

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::types::Json;

use super::{
    conversations::read_memory,
    rows::{self, column},
};
use crate::{
    domain::{
        ConversationId, PayloadHash, Sequence, StoredMessage, TenantId,
        changes::{ChangeKind, NewChange},
        conversation,
        token_counts::TokenCounts,
    },
    runtime::deadline::Deadline,
    store::{Redaction, StoreError},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, sequence = sequence.get()))]
pub(super) async fn redact(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    sequence: Sequence,
    deadline: Option<&Deadline>,
) -> Result<Redaction, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let at = sequence.as_i64();
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;
    // The conversation row first, as appends and summaries lock it; counting the redaction
    // keeps a summary or memory computed from the text before it from being stored after it.
    let watermark = tx
        .query_opt(
            "UPDATE conversations SET redactions = redactions + 1
             WHERE tenant_id = $1 AND conversation_id = $2
             RETURNING summary_through_sequence",
            &[&t, &c],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let summary_through = Sequence::from_stored(column(&watermark, "summary_through_sequence")?);
    let stored = tombstone_row(&tx, t, c, sequence).await?;
    tx.execute(
        "DELETE FROM message_vectors WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3",
        &[&t, &c, &at],
    )
    .await?;
    let (summaries_removed, summary_through) = drop_summaries(&tx, t, c, sequence, summary_through).await?;
    let memory_version = forget_in_memory_row(&tx, t, c, sequence).await?;
    let redacted_hash = &PayloadHash::REDACTED.0[..];
    tx.execute(
        "UPDATE idempotency_keys SET payload_hash = $4
         WHERE tenant_id = $1 AND conversation_id = $2 AND first_sequence <= $3 AND last_sequence >= $3",
        &[&t, &c, &at, &redacted_hash],
    )
    .await?;
    let change = NewChange::new(ChangeKind::Redacted, sequence, sequence);
    super::changes::record(&tx, t, c, change).await?;
    super::writes::commit(tx, deadline).await?;
    Ok(Redaction {
        message: stored,
        summaries_removed,
        summary_through_sequence: summary_through,
        memory_version,
    })
}

/// Overwrites the message with what [`conversation::redacted`] leaves of it.
async fn tombstone_row(
    tx: &Transaction<'_>,
    t: &str,
    c: &str,
    sequence: Sequence,
) -> Result<StoredMessage, StoreError> {
    let at = sequence.as_i64();
    let query = format!(
        "SELECT {} FROM messages WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3",
        rows::MESSAGE_COLUMNS
    );
    let row = tx
        .query_opt(&query, &[&t, &c, &at])
        .await?
        .ok_or(StoreError::MessageNotFound)?;
    let stored = conversation::redacted(&rows::stored_message(&row)?);
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    tx.execute(
        "UPDATE messages SET content = $4, tool_calls = $5, attachments = '[]', error = NULL,
             native = $9, tokens_o200k = $6, tokens_cl100k = $7, tokens_approx = $8, loaded_bytes = $10,
             search = NULL
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3",
        &[
            &t,
            &c,
            &at,
            &stored.message.content,
            &Json(&stored.message.tool_calls),
            &count(stored.tokens.o200k_base),
            &count(stored.tokens.cl100k_base),
            &count(stored.tokens.approx),
            // What a tombstone keeps there: its usage, if any.
            &rows::native_column(&stored.message, TokenCounts::default(), TokenCounts::default()),
            &rows::stored_size(stored.message.loaded_bytes()),
        ],
    )
    .await?;
    Ok(stored)
}

/// Removes the summaries that read the message ([`conversation::summary_covers`], here as a
/// predicate); returns how many and the watermark now current.
pub(super) async fn drop_summaries(
    tx: &Transaction<'_>,
    t: &str,
    c: &str,
    sequence: Sequence,
    watermark: Sequence,
) -> Result<(u64, Sequence), StoreError> {
    let removed = tx
        .execute(
            "DELETE FROM summaries WHERE tenant_id = $1 AND conversation_id = $2 AND through_sequence >= $3",
            &[&t, &c, &sequence.as_i64()],
        )
        .await?;
    if removed == 0 {
        return Ok((0, watermark));
    }
    let row = tx
        .query_one(
            "UPDATE conversations SET
                 summary_version = coalesce((SELECT max(version) FROM summaries
                     WHERE tenant_id = $1 AND conversation_id = $2), 0),
                 summary_through_sequence = coalesce((SELECT max(through_sequence) FROM summaries
                     WHERE tenant_id = $1 AND conversation_id = $2), 0)
             WHERE tenant_id = $1 AND conversation_id = $2
             RETURNING summary_through_sequence",
            &[&t, &c],
        )
        .await?;
    let through = Sequence::from_stored(column(&row, "summary_through_sequence")?);
    Ok((removed, through))
}

/// Applies [`conversation::forget_in_memory`] to the stored working memory, if any, under a
/// new version; returns that version (0 without memory).
async fn forget_in_memory_row(
    tx: &Transaction<'_>,
    t: &str,
    c: &str,
    sequence: Sequence,
) -> Result<u64, StoreError> {
    let Some(mut memory) = read_memory(tx, t, c, "FOR UPDATE").await? else {
        return Ok(0);
    };
    conversation::forget_in_memory(&mut memory, sequence);
    let row = tx
        .query_one(
            "UPDATE working_memory SET document = $3, version = version + 1, updated_at = now()
             WHERE tenant_id = $1 AND conversation_id = $2 RETURNING version",
            &[&t, &c, &Json(&memory)],
        )
        .await?;
    Ok(column::<i64>(&row, "version")?.max(0) as u64)
}
