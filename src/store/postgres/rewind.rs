//! Rewinding a conversation on PostgreSQL: the store's side of [`conversation::rewind`] (the
//! conversation's row locked and counted, the later messages deleted with what was derived from
//! them, and the row's counters set back), in one transaction.

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::types::Json;

use super::{
    conversations::read_memory,
    redaction::drop_summaries,
    rows::{self, column},
};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId,
        changes::{ChangeKind, NewChange},
        conversation::{self, RewindTx},
    },
    runtime::deadline::Deadline,
    store::{Rewind, StoreError},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, after = after.get()))]
pub(super) async fn rewind(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    after: Sequence,
    expected_last: Option<Sequence>,
    deadline: Option<&Deadline>,
) -> Result<Rewind, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;
    let rewind = PostgresRewind {
        tx: &tx,
        t: tenant.as_str(),
        c: conversation.as_str(),
        watermark: Sequence::ZERO,
    };
    let rewound = conversation::rewind(rewind, after, expected_last).await?;
    let last = after.plus(rewound.messages_removed);
    let change = NewChange::new(ChangeKind::Rewound, after.plus(1), last);
    super::changes::record(&tx, tenant.as_str(), conversation.as_str(), change).await?;
    super::writes::commit(tx, deadline).await?;
    Ok(rewound)
}

/// A rewind's reads and writes in one transaction; [`conversation::rewind`] decides.
struct PostgresRewind<'a, 'c> {
    tx: &'a Transaction<'c>,
    t: &'a str,
    c: &'a str,
    /// The summary watermark read with the lock.
    watermark: Sequence,
}

impl RewindTx for PostgresRewind<'_, '_> {
    type Rewound = Rewind;
    type Error = StoreError;

    /// The row first, as appends, summaries and redactions lock it.
    async fn lock(&mut self) -> Result<Sequence, StoreError> {
        let row = self
            .tx
            .query_opt(
                "UPDATE conversations SET rewinds = rewinds + 1,
                     updated_at = greatest(updated_at, statement_timestamp())
                 WHERE tenant_id = $1 AND conversation_id = $2
                 RETURNING last_sequence, summary_through_sequence",
                &[&self.t, &self.c],
            )
            .await?
            .ok_or(StoreError::NotFound)?;
        self.watermark = Sequence::from_stored(column(&row, "summary_through_sequence")?);
        Ok(Sequence::from_stored(column(&row, "last_sequence")?))
    }

    async fn write(&mut self, after: Sequence) -> Result<Rewind, StoreError> {
        let (tx, t, c) = (self.tx, self.t, self.c);
        let removed = remove_after(tx, t, c, after).await?;
        let (summaries_removed, watermark) = drop_summaries(tx, t, c, after.plus(1), self.watermark).await?;
        let memory_version = rewind_memory(tx, t, c, after).await?;
        Ok(Rewind {
            messages_removed: removed,
            last_sequence: after,
            summaries_removed,
            summary_through_sequence: watermark,
            memory_version,
        })
    }
}

/// Deletes the messages after `after`, the calls they made and the idempotency records of the
/// appends that stored them, reopens the calls they answered, and sets the conversation's
/// counters back: the log's end where message `after + 1` was placed, the newest user message
/// and response id among those kept (as [`conversation::ForkPlan`] counts them).
async fn remove_after(tx: &Transaction<'_>, t: &str, c: &str, after: Sequence) -> Result<u64, StoreError> {
    let after = after.as_i64();
    tx.execute(
        "UPDATE conversations SET
             last_sequence = $3,
             token_offset = coalesce((SELECT token_offset FROM messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3::bigint + 1), token_offset),
             last_user_sequence = (SELECT max(sequence) FROM messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3
                   AND role = 'user' AND NOT exclude_from_context),
             last_response_id = (SELECT response_id FROM messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3
                   AND role = 'assistant' AND response_id <> '' ORDER BY sequence DESC LIMIT 1),
             turn_offset = (SELECT token_offset FROM messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3
                   AND role = 'user' AND NOT exclude_from_context ORDER BY sequence DESC LIMIT 1)
         WHERE tenant_id = $1 AND conversation_id = $2",
        &[&t, &c, &after],
    )
    .await?;
    tx.execute(
        &format!(
            "UPDATE conversations SET {}
             FROM (SELECT {} FROM messages
                   WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3) removed
             WHERE tenant_id = $1 AND conversation_id = $2",
            rewound_usage(),
            rows::USAGE_SUMS,
        ),
        &[&t, &c, &after],
    )
    .await?;
    let removed = tx
        .execute(
            "DELETE FROM messages WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3",
            &[&t, &c, &after],
        )
        .await?;
    // Their vectors, and the embedding watermark back within the log.
    tx.execute(
        "DELETE FROM message_vectors WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3",
        &[&t, &c, &after],
    )
    .await?;
    tx.execute(
        "UPDATE conversations SET embedded_through = least(embedded_through, $3)
         WHERE tenant_id = $1 AND conversation_id = $2",
        &[&t, &c, &after],
    )
    .await?;
    tx.execute(
        "DELETE FROM tool_calls WHERE tenant_id = $1 AND conversation_id = $2 AND call_sequence > $3",
        &[&t, &c, &after],
    )
    .await?;
    tx.execute(
        "UPDATE tool_calls SET result_sequence = NULL
         WHERE tenant_id = $1 AND conversation_id = $2 AND result_sequence > $3",
        &[&t, &c, &after],
    )
    .await?;
    tx.execute(
        "DELETE FROM idempotency_keys
         WHERE tenant_id = $1 AND conversation_id = $2 AND last_sequence > $3",
        &[&t, &c, &after],
    )
    .await?;
    Ok(removed)
}

/// Applies [`conversation::rewound_memory`] to the stored working memory, if any, under a new
/// version; returns that version (0 without memory).
async fn rewind_memory(tx: &Transaction<'_>, t: &str, c: &str, after: Sequence) -> Result<u64, StoreError> {
    let Some(mut memory) = read_memory(tx, t, c, "FOR UPDATE").await? else {
        return Ok(0);
    };
    conversation::rewound_memory(&mut memory, after);
    let row = tx
        .query_one(
            "UPDATE working_memory SET document = $3, through_sequence = $4, version = version + 1,
                 updated_at = now()
             WHERE tenant_id = $1 AND conversation_id = $2 RETURNING version",
            &[&t, &c, &Json(&memory), &memory.through_sequence.as_i64()],
        )
        .await?;
    Ok(column::<i64>(&row, "version")?.max(0) as u64)
}

/// The conversation's usage without the removed messages': their sum taken off the total, or,
/// where the total had saturated (at PostgreSQL's `bigint`), the kept messages' sum counted
/// again, saturating as the in-memory store's recount does.
fn rewound_usage() -> String {
    [
        ("usage_input", "input", "input_tokens"),
        ("usage_output", "output", "output_tokens"),
        ("usage_cached", "cached", "cached_input_tokens"),
        ("usage_reasoning", "reasoning", "reasoning_tokens"),
    ]
    .map(|(column, removed, field)| {
        format!(
            "{column} = CASE WHEN {column} < 9223372036854775807 THEN {column} - removed.{removed}
             ELSE (SELECT least(coalesce(sum((m.native->'usage'->>'{field}')::numeric), 0), 9223372036854775807)
                   FROM messages m WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.sequence <= $3) END"
        )
    })
    .join(", ")
}
