//! Forking a conversation on PostgreSQL: the store's side of [`conversation::fork`] (the
//! source's row locked and read, the log copied in SQL), in one transaction.

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::types::Json;

use super::{
    conversations::{read, read_memory},
    rows::{self, column},
};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId,
        changes::{ChangeKind, NewChange},
        conversation::{self, Conversation, ForkPlan, ForkSource, ForkTx},
        search,
        working_memory::WorkingMemory,
    },
    runtime::deadline::Deadline,
    store::StoreError,
};
/// Every column of `messages` after the conversation id, as the fork copies them.
const MESSAGE_COPY: &str = "sequence, role, content, name, tool_calls, tool_call_id, attachments, metadata,
     exclude_from_context, pinned, error, response_id, created_at, tokens_o200k, tokens_cl100k,
     tokens_approx, call_sequence, token_offset, previous_turn_offset, native, loaded_bytes";

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %source, through = through.get()))]
pub(super) async fn fork(
    pool: &Pool,
    tenant: &TenantId,
    source: &ConversationId,
    through: Sequence,
    target: &ConversationId,
    deadline: Option<&Deadline>,
) -> Result<Conversation, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;
    let fork = PostgresFork {
        tx: &tx,
        t: tenant.as_str(),
        s: source.as_str(),
        n: target.as_str(),
    };
    let conversation = conversation::fork(fork, through).await?;
    let change = NewChange::new(ChangeKind::Forked, Sequence::ZERO.plus(1).min(through), through);
    super::changes::record(&tx, tenant.as_str(), target.as_str(), change).await?;
    super::writes::commit(tx, deadline).await?;
    Ok(conversation)
}

/// A fork's reads and writes in one transaction; [`conversation::fork`] decides.
struct PostgresFork<'a, 'c> {
    tx: &'a Transaction<'c>,
    /// The tenant, the source and the new conversation.
    t: &'a str,
    s: &'a str,
    n: &'a str,
}

impl ForkTx for PostgresFork<'_, '_> {
    type Forked = Conversation;
    type Error = StoreError;

    async fn read_source(&mut self, through: Sequence) -> Result<ForkSource, StoreError> {
        fork_source(self.tx, self.t, self.s, through).await
    }

    async fn write(&mut self, plan: ForkPlan) -> Result<Conversation, StoreError> {
        let (tx, t, s, n) = (self.tx, self.t, self.s, self.n);
        create_fork(tx, t, s, plan.through, n).await?;
        copy_log(tx, t, s, plan.through, n).await?;
        if let Some(memory) = &plan.memory {
            insert_memory(tx, t, n, memory).await?;
        }
        read(tx, t, n).await
    }
}

/// Looks up the source, locking its row: appends to it wait until the copy is taken. The
/// summary is copied in SQL ([`copy_log`]) by the plan's rule.
async fn fork_source(
    tx: &Transaction<'_>,
    t: &str,
    s: &str,
    through: Sequence,
) -> Result<ForkSource, StoreError> {
    let row = tx
        .query_opt(
            "SELECT last_sequence FROM conversations WHERE tenant_id = $1 AND conversation_id = $2 FOR SHARE",
            &[&t, &s],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let last = Sequence::from_stored(column(&row, "last_sequence")?);
    let split = tx
        .query_opt(
            "SELECT call_sequence FROM messages WHERE tenant_id = $1 AND conversation_id = $2
                 AND sequence > $3 AND call_sequence <= $3 LIMIT 1",
            &[&t, &s, &through.as_i64()],
        )
        .await?;
    let split_call = match split {
        Some(row) => Some(Sequence::from_stored(column(&row, "call_sequence")?)),
        None => None,
    };
    let source = ForkSource {
        last,
        split_call,
        summary: None,
        memory: read_memory(tx, t, s, "").await?,
    };
    Ok(source)
}

/// The fork's conversation row; its newest user message and response id by
/// [`ForkPlan::opens_user_turn`] and [`ForkPlan::response_id`], here as SQL predicates.
async fn create_fork(
    tx: &Transaction<'_>,
    t: &str,
    s: &str,
    through: Sequence,
    n: &str,
) -> Result<(), StoreError> {
    // The rows it returns, not its count: on Citus an INSERT ... SELECT between shards counts
    // the rows it selected, even those its ON CONFLICT skipped.
    let created = tx
        .query(
            &format!(
                "-- two conversations: the fork
         INSERT INTO conversations (tenant_id, conversation_id, last_sequence, last_user_sequence,
                 last_response_id, token_offset, turn_offset, title, labels, listing,
                 forked_from_conversation_id, forked_from_sequence,
                 usage_input, usage_output, usage_cached, usage_reasoning, incarnation)
             SELECT $1, $4, $3,
                 (SELECT max(sequence) FROM messages WHERE tenant_id = $1 AND conversation_id = $2
                      AND sequence <= $3 AND role = 'user' AND NOT exclude_from_context),
                 (SELECT response_id FROM messages WHERE tenant_id = $1 AND conversation_id = $2
                      AND sequence <= $3 AND role = 'assistant' AND response_id <> ''
                      ORDER BY sequence DESC LIMIT 1),
                 coalesce((SELECT token_offset FROM messages
                      WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3 + 1),
                      c.token_offset),
                 (SELECT token_offset FROM messages WHERE tenant_id = $1 AND conversation_id = $2
                      AND sequence <= $3 AND role = 'user' AND NOT exclude_from_context
                      ORDER BY sequence DESC LIMIT 1),
                 c.title, c.labels, jsonb_set(jsonb_object(ARRAY['t', $1::text, 's', 'active']), '{{l}}', c.labels),
                 $2, $3, u.input, u.output, u.cached, u.reasoning, $5::bigint
             FROM conversations c, (SELECT {} FROM messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3) u
             WHERE c.tenant_id = $1 AND c.conversation_id = $2
             ON CONFLICT (tenant_id, conversation_id) DO NOTHING
             RETURNING conversation_id",
                rows::USAGE_SUMS
            ),
            &[&t, &s, &through.as_i64(), &n, &super::writes::new_incarnation()],
        )
        .await?;
    if created.is_empty() {
        return Err(StoreError::AlreadyExists);
    }
    Ok(())
}

/// Copies the messages, tool-call bookkeeping and the newest summary within the fork point
/// (as the fork's version 1, as [`ForkPlan`] says).
async fn copy_log(
    tx: &Transaction<'_>,
    t: &str,
    s: &str,
    through: Sequence,
    n: &str,
) -> Result<(), StoreError> {
    let through = through.as_i64();
    // Search documents move to the fork's scope: lexemes are quoted in a tsvector's text and
    // hold no quote of their own, so each `'<source scope>` is a lexeme's start.
    let copy = format!(
        "-- two conversations: the fork
         INSERT INTO messages (tenant_id, conversation_id, {MESSAGE_COPY}, search)
         SELECT tenant_id, $4, {MESSAGE_COPY}, replace(search::text, $5, $6)::tsvector FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3"
    );
    let quoted = |scope: String| format!("'{scope}");
    let (from, to) = (quoted(search::scope(t, s)), quoted(search::scope(t, n)));
    tx.execute(&copy, &[&t, &s, &through, &n, &from, &to]).await?;
    // The vectors of the messages copied, and the watermark within them.
    tx.execute(
        "-- two conversations: the fork
         INSERT INTO message_vectors (tenant_id, conversation_id, sequence, chunk, code, vector)
         SELECT tenant_id, $4, sequence, chunk, code, vector FROM message_vectors
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3",
        &[&t, &s, &through, &n],
    )
    .await?;
    // The source's watermark in a statement of its own: on Citus an UPDATE of the fork's row
    // may not read the source's (another shard).
    let source = tx
        .query_one(
            "SELECT embedded_through FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
            &[&t, &s],
        )
        .await?;
    let embedded = column::<i64>(&source, "embedded_through")?.min(through);
    tx.execute(
        "UPDATE conversations SET embedded_through = $3 WHERE tenant_id = $1 AND conversation_id = $2",
        &[&t, &n, &embedded],
    )
    .await?;
    tx.execute(
        "-- two conversations: the fork
         INSERT INTO tool_calls (tenant_id, conversation_id, call_id, call_sequence, result_sequence)
         SELECT tenant_id, $4, call_id, call_sequence, result_sequence FROM tool_calls
         WHERE tenant_id = $1 AND conversation_id = $2 AND call_sequence <= $3",
        &[&t, &s, &through, &n],
    )
    .await?;
    tx.execute(
        "-- two conversations: the fork
         WITH copied AS (
             INSERT INTO summaries (tenant_id, conversation_id, version, text, through_sequence,
                 summarizer, created_at)
             SELECT tenant_id, $4, 1, text, through_sequence, summarizer, created_at FROM summaries
             WHERE tenant_id = $1 AND conversation_id = $2 AND through_sequence <= $3
             ORDER BY version DESC LIMIT 1
             RETURNING through_sequence)
         UPDATE conversations SET summary_version = 1, summary_through_sequence = copied.through_sequence
         FROM copied WHERE tenant_id = $1 AND conversation_id = $4",
        &[&t, &s, &through, &n],
    )
    .await?;
    Ok(())
}

async fn insert_memory(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    memory: &WorkingMemory,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO working_memory (tenant_id, conversation_id, document, through_sequence, version)
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &tenant,
            &conversation,
            &Json(memory),
            &memory.through_sequence.as_i64(),
            &(memory.version as i64),
        ],
    )
    .await?;
    Ok(())
}
