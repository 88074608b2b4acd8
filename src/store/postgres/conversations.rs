//! Conversations as resources on PostgreSQL: get, update, the keyset listing, fork, redaction
//! and the retention sweep.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use deadpool_postgres::{GenericClient, Pool, Transaction};
use tokio_postgres::{Row, types::Json};

use super::{
    corrupt,
    rows::{self, column},
};
use crate::{
    domain::{
        ConversationId, PayloadHash, Sequence, TenantId,
        context::TokenCounts,
        conversation::{
            self, Conversation, ConversationPage, ConversationPatch, ConversationStatus, ForkRefusal,
            ListQuery,
        },
        working_memory::WorkingMemory,
    },
    store::{Redaction, RetentionRule, StoreError, Swept},
};

/// The columns [`conversation_from_row`] reads, from `conversations c` left-joined with
/// `working_memory w` ([`FROM`]).
const COLUMNS: &str = "c.conversation_id, c.title, c.status, c.labels, c.created_at, c.updated_at,
     c.last_sequence, c.summary_through_sequence, coalesce(w.version, 0) AS memory_version, c.expire_time,
     c.forked_from_conversation_id, c.forked_from_sequence";

const FROM: &str = "conversations c LEFT JOIN working_memory w
     ON w.tenant_id = c.tenant_id AND w.conversation_id = c.conversation_id";

fn conversation_from_row(row: &Row) -> Result<Conversation, StoreError> {
    let id: String = column(row, "conversation_id")?;
    let status: &str = column(row, "status")?;
    let Json(labels): Json<BTreeMap<String, String>> = column(row, "labels")?;
    let forked_id: Option<String> = column(row, "forked_from_conversation_id")?;
    let forked_sequence: Option<i64> = column(row, "forked_from_sequence")?;
    let forked_from = match (forked_id, forked_sequence) {
        (Some(id), Some(sequence)) => Some((
            ConversationId::parse(id).map_err(|_| corrupt("forked_from_conversation_id"))?,
            Sequence::from_stored(sequence),
        )),
        _ => None,
    };
    Ok(Conversation {
        id: ConversationId::parse(id).map_err(|_| corrupt("conversation_id"))?,
        title: column(row, "title")?,
        status: ConversationStatus::from_name(status).ok_or_else(|| corrupt("status"))?,
        labels,
        created_at: column(row, "created_at")?,
        updated_at: column(row, "updated_at")?,
        last_sequence: Sequence::from_stored(column(row, "last_sequence")?),
        summary_through_sequence: Sequence::from_stored(column(row, "summary_through_sequence")?),
        memory_version: column::<i64>(row, "memory_version")?.max(0) as u64,
        expire_time: column(row, "expire_time")?,
        forked_from,
    })
}

async fn read(
    client: &impl GenericClient,
    tenant: &str,
    conversation: &str,
) -> Result<Conversation, StoreError> {
    let query = format!("SELECT {COLUMNS} FROM {FROM} WHERE c.tenant_id = $1 AND c.conversation_id = $2");
    let statement = client.prepare_cached(&query).await?;
    let row = client
        .query_opt(&statement, &[&tenant, &conversation])
        .await?
        .ok_or(StoreError::NotFound)?;
    conversation_from_row(&row)
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn get(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<Conversation, StoreError> {
    let client = pool.get().await?;
    read(&client, tenant.as_str(), conversation.as_str()).await
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn update(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    patch: &ConversationPatch,
    allow_missing: bool,
) -> Result<Conversation, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::limit(&tx).await?;
    if allow_missing {
        tx.execute(
            "INSERT INTO conversations (tenant_id, conversation_id, last_sequence) VALUES ($1, $2, 0)
             ON CONFLICT (tenant_id, conversation_id) DO NOTHING",
            &[&t, &c],
        )
        .await?;
    }
    let status = patch.status.map(ConversationStatus::as_str);
    let labels = patch.labels.as_ref().map(Json);
    let sets_expiry = patch.expire_time.is_some();
    let expire_time = patch.expire_time.flatten();
    let statement = tx
        .prepare_cached(
            "UPDATE conversations SET
                 title = coalesce($3, title),
                 status = coalesce($4, status),
                 labels = coalesce($5, labels),
                 expire_time = CASE WHEN $6 THEN $7 ELSE expire_time END,
                 -- Not clock_timestamp(): Citus refuses volatile functions in an UPDATE.
                 updated_at = greatest(updated_at, statement_timestamp())
             WHERE tenant_id = $1 AND conversation_id = $2",
        )
        .await?;
    let updated = tx
        .execute(
            &statement,
            &[&t, &c, &patch.title, &status, &labels, &sets_expiry, &expire_time],
        )
        .await?;
    if updated == 0 {
        return Err(StoreError::NotFound);
    }
    let conversation = read(&tx, t, c).await?;
    tx.commit().await?;
    Ok(conversation)
}

#[tracing::instrument(skip_all, fields(tenant = %tenant))]
pub(super) async fn list(
    pool: &Pool,
    tenant: &TenantId,
    query: &ListQuery,
) -> Result<ConversationPage, StoreError> {
    let client = pool.get().await?;
    // Two texts rather than `$n IS NULL OR ...`, so both plans walk the activity index.
    let after = match query.after {
        Some(_) => "AND (c.updated_at, c.conversation_id COLLATE \"C\") < ($5, $6::text COLLATE \"C\")",
        None => "AND $5::timestamptz IS NULL AND $6::text IS NULL",
    };
    let text = format!(
        "SELECT {COLUMNS} FROM {FROM}
         WHERE c.tenant_id = $1 {after}
           AND ($2::text IS NULL OR c.status = $2) AND c.labels @> $3
         ORDER BY c.updated_at DESC, c.conversation_id COLLATE \"C\" DESC
         LIMIT $4"
    );
    let statement = client.prepare_cached(&text).await?;
    let status = query.status.map(ConversationStatus::as_str);
    let labels = Json(&query.labels);
    let fetch = query.limit as i64 + 1;
    let (after_time, after_id) = match &query.after {
        Some(key) => (
            Some(conversation::to_micros(
                SystemTime::UNIX_EPOCH + Duration::from_micros(key.micros.max(0) as u64),
            )),
            Some(key.id.as_str()),
        ),
        None => (None, None),
    };
    let rows = client
        .query(
            &statement,
            &[&tenant.as_str(), &status, &labels, &fetch, &after_time, &after_id],
        )
        .await?;
    let has_more = rows.len() > query.limit;
    let conversations = rows
        .iter()
        .take(query.limit)
        .map(conversation_from_row)
        .collect::<Result<_, _>>()?;
    Ok(ConversationPage {
        conversations,
        has_more,
    })
}

/// Every column of `messages` after the conversation id, as the fork copies them.
const MESSAGE_COPY: &str = "sequence, role, content, name, tool_calls, tool_call_id, attachments, metadata,
     exclude_from_context, pinned, error, response_id, created_at, tokens_o200k, tokens_cl100k,
     tokens_approx, call_sequence, token_offset, previous_turn_offset, native";

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %source, through = through.get()))]
pub(super) async fn fork(
    pool: &Pool,
    tenant: &TenantId,
    source: &ConversationId,
    through: Sequence,
    target: &ConversationId,
) -> Result<Conversation, StoreError> {
    let (t, s, n) = (tenant.as_str(), source.as_str(), target.as_str());
    let through_value = through.as_i64();
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::limit(&tx).await?;
    // Appends to the source wait until the copy is taken.
    let row = tx
        .query_opt(
            "SELECT last_sequence FROM conversations WHERE tenant_id = $1 AND conversation_id = $2 FOR SHARE",
            &[&t, &s],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let last = Sequence::from_stored(column(&row, "last_sequence")?);
    if through > last {
        return Err(StoreError::Invalid {
            violations: ForkRefusal::PastEnd { last }.violations(),
        });
    }
    let splits = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE tenant_id = $1 AND conversation_id = $2
                 AND sequence > $3 AND call_sequence <= $3) AS splits",
            &[&t, &s, &through_value],
        )
        .await?;
    if column(&splits, "splits")? {
        return Err(StoreError::Invalid {
            violations: ForkRefusal::InsideToolGroup.violations(),
        });
    }
    let created = tx
        .execute(
            "INSERT INTO conversations (tenant_id, conversation_id, last_sequence, last_user_sequence,
                 last_response_id, token_offset, turn_offset, title, labels,
                 forked_from_conversation_id, forked_from_sequence)
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
                 c.title, c.labels, $2, $3
             FROM conversations c WHERE c.tenant_id = $1 AND c.conversation_id = $2
             ON CONFLICT (tenant_id, conversation_id) DO NOTHING",
            &[&t, &s, &through_value, &n],
        )
        .await?;
    if created == 0 {
        return Err(StoreError::AlreadyExists);
    }
    let copy = format!(
        "INSERT INTO messages (tenant_id, conversation_id, {MESSAGE_COPY})
         SELECT tenant_id, $4, {MESSAGE_COPY} FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence <= $3"
    );
    tx.execute(&copy, &[&t, &s, &through_value, &n]).await?;
    tx.execute(
        "INSERT INTO tool_calls (tenant_id, conversation_id, call_id, call_sequence, result_sequence)
         SELECT tenant_id, $4, call_id, call_sequence, result_sequence FROM tool_calls
         WHERE tenant_id = $1 AND conversation_id = $2 AND call_sequence <= $3",
        &[&t, &s, &through_value, &n],
    )
    .await?;
    tx.execute(
        "WITH copied AS (
             INSERT INTO summaries (tenant_id, conversation_id, version, text, through_sequence,
                 summarizer, created_at)
             SELECT tenant_id, $4, 1, text, through_sequence, summarizer, created_at FROM summaries
             WHERE tenant_id = $1 AND conversation_id = $2 AND through_sequence <= $3
             ORDER BY version DESC LIMIT 1
             RETURNING through_sequence)
         UPDATE conversations SET summary_version = 1, summary_through_sequence = copied.through_sequence
         FROM copied WHERE tenant_id = $1 AND conversation_id = $4",
        &[&t, &s, &through_value, &n],
    )
    .await?;
    let memory = read_memory(&tx, t, s, "").await?;
    if let Some(forked) = memory.and_then(|m| conversation::memory_within(&m, through)) {
        insert_memory(&tx, t, n, &forked).await?;
    }
    let conversation = read(&tx, t, n).await?;
    tx.commit().await?;
    Ok(conversation)
}

/// The conversation's working memory, if any; `lock` is appended to the query (`FOR UPDATE`).
async fn read_memory(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    lock: &str,
) -> Result<Option<WorkingMemory>, StoreError> {
    let query = format!(
        "SELECT document AS memory_document, through_sequence AS memory_through_sequence,
             version AS memory_version FROM working_memory
         WHERE tenant_id = $1 AND conversation_id = $2 {lock}"
    );
    match tx.query_opt(&query, &[&tenant, &conversation]).await? {
        Some(row) => rows::memory_from_row(&row),
        None => Ok(None),
    }
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

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, sequence = sequence.get()))]
pub(super) async fn redact(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    sequence: Sequence,
) -> Result<Redaction, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let at = sequence.as_i64();
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::limit(&tx).await?;
    // The conversation row first, as appends and summaries lock it; counting the redaction
    // keeps a summary computed from the text before it from being stored after it.
    let watermark = tx
        .query_opt(
            "UPDATE conversations SET redactions = redactions + 1
             WHERE tenant_id = $1 AND conversation_id = $2
             RETURNING summary_through_sequence",
            &[&t, &c],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let mut summary_through = Sequence::from_stored(column(&watermark, "summary_through_sequence")?);
    let query = format!(
        "SELECT {} FROM messages WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3",
        rows::MESSAGE_COLUMNS
    );
    let row = tx
        .query_opt(&query, &[&t, &c, &at])
        .await?
        .ok_or(StoreError::MessageNotFound)?;
    let mut stored = rows::stored_message(&row)?;
    stored.message = conversation::tombstone(&stored.message);
    stored.tokens = TokenCounts::of(&stored.message);
    stored.reasoning_tokens = TokenCounts::default();
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    tx.execute(
        "UPDATE messages SET content = $4, tool_calls = $5, attachments = '[]', error = NULL,
             native = NULL, tokens_o200k = $6, tokens_cl100k = $7, tokens_approx = $8
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
        ],
    )
    .await?;
    let summaries_removed = tx
        .execute(
            "DELETE FROM summaries WHERE tenant_id = $1 AND conversation_id = $2 AND through_sequence >= $3",
            &[&t, &c, &at],
        )
        .await?;
    if summaries_removed > 0 {
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
        summary_through = Sequence::from_stored(column(&row, "summary_through_sequence")?);
    }
    let mut memory_version = 0;
    if let Some(mut memory) = read_memory(&tx, t, c, "FOR UPDATE").await? {
        // A new version even when nothing cited the message: an extraction that read the text
        // before the redaction cannot be stored after it.
        conversation::forget_in_memory(&mut memory, sequence);
        let row = tx
            .query_one(
                "UPDATE working_memory SET document = $3, version = version + 1, updated_at = now()
                 WHERE tenant_id = $1 AND conversation_id = $2 RETURNING version",
                &[&t, &c, &Json(&memory)],
            )
            .await?;
        memory_version = column::<i64>(&row, "version")?.max(0) as u64;
    }
    let redacted_hash = &PayloadHash::REDACTED.0[..];
    tx.execute(
        "UPDATE idempotency_keys SET payload_hash = $4
         WHERE tenant_id = $1 AND conversation_id = $2 AND first_sequence <= $3 AND last_sequence >= $3",
        &[&t, &c, &at, &redacted_hash],
    )
    .await?;
    tx.commit().await?;
    Ok(Redaction {
        message: stored,
        summaries_removed,
        summary_through_sequence: summary_through,
        memory_version,
    })
}

#[tracing::instrument(skip_all, fields(batch = rule.batch))]
pub(super) async fn sweep(pool: &Pool, rule: RetentionRule) -> Result<Swept, StoreError> {
    let limit = rule.batch as i64;
    let inactive_before = rule.inactive.and_then(|d| rule.now.checked_sub(d));
    let client = pool.get().await?;
    let mut candidates: Vec<(String, String)> = client
        .query(
            "SELECT tenant_id, conversation_id FROM conversations
             WHERE expire_time <= $1 ORDER BY expire_time LIMIT $2",
            &[&rule.now, &limit],
        )
        .await?
        .iter()
        .map(tenant_and_conversation)
        .collect::<Result<_, _>>()?;
    if let Some(before) = inactive_before {
        let room = limit - candidates.len() as i64;
        if room > 0 {
            let inactive = client
                .query(
                    "SELECT tenant_id, conversation_id FROM conversations
                     WHERE expire_time IS NULL AND updated_at < $1 ORDER BY updated_at LIMIT $2",
                    &[&before, &room],
                )
                .await?;
            for row in &inactive {
                candidates.push(tenant_and_conversation(row)?);
            }
        }
    }
    drop(client);
    let mut swept = Swept::default();
    for (t, c) in candidates {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        // Still expired now that the row is locked: an append or update since the scan keeps it.
        let removed = tx
            .execute(
                "DELETE FROM conversations WHERE tenant_id = $1 AND conversation_id = $2
                   AND (expire_time <= $3 OR (expire_time IS NULL AND updated_at < $4))",
                &[&t, &c, &rule.now, &inactive_before],
            )
            .await?;
        if removed == 0 {
            continue;
        }
        let messages = super::messages::delete_rows(&tx, &t, &c).await?;
        tx.commit().await?;
        swept.conversations += 1;
        swept.messages += messages;
    }
    Ok(swept)
}

/// The `tenant_id` and `conversation_id` columns of a row.
fn tenant_and_conversation(row: &Row) -> Result<(String, String), StoreError> {
    Ok((column(row, "tenant_id")?, column(row, "conversation_id")?))
}
