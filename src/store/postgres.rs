//! The production store on PostgreSQL (tokio-postgres + deadpool-postgres).
//!
//! An append is one transaction: the conversation's counter row is incremented by the batch size
//! first (creating it on first use), which both allocates the sequences and locks the
//! conversation, so concurrent appenders to one conversation queue on that row and sequences stay
//! gapless. Everything after that decides against a stable state.

use std::{collections::HashMap, time::Duration};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::{NoTls, Row, types::Json};

use super::{MessagePage, Store, StoreError, migrations};
use crate::domain::{
    AppendBatch, AppendDecision, AppendOutcome, CallState, ConversationId, IdempotencyRecord, PayloadHash,
    Role, Sequence, StoredMessage, TenantId, ToolEffects, decide_append,
    message::{Attachment, LlmError, Message, ToolCall},
    tool_protocol::{check_tool_protocol, mentioned_call_ids},
};

/// Pool and connection settings of the Postgres store.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// libpq-style URL, e.g. `postgres://ctxd:secret@db:5432/ctxd`.
    pub url: String,
    /// Maximum pooled connections.
    pub pool_size: usize,
    /// How long a request waits for a pooled connection or a new one before UNAVAILABLE.
    pub connect_timeout: Duration,
}

/// Conversations in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool,
}

impl PostgresStore {
    /// Builds the pool. Connections are opened lazily; see [`PostgresStore::migrate`].
    pub fn connect(options: &PostgresOptions) -> Result<Self, StoreError> {
        let mut pg_config: tokio_postgres::Config = options
            .url
            .parse()
            .map_err(|e| StoreError::Internal { source: Box::new(e) })?;
        pg_config.connect_timeout(options.connect_timeout);
        pg_config.application_name("ctxd");
        let manager = Manager::from_config(
            pg_config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Internal { source: Box::new(e) })?;
        Ok(Self { pool })
    }

    /// Applies pending migrations under the advisory lock; returns how many were applied.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.pool.get().await.map_err(pool_error)?;
        migrations::run(&mut client).await
    }

    /// Closes the pool: idle connections are dropped and new checkouts fail.
    pub fn close(&self) {
        self.pool.close();
    }
}

/// Sorts a Postgres failure into retryable (connection trouble) and internal.
pub(crate) fn classify(error: tokio_postgres::Error) -> StoreError {
    let retryable = match error.code() {
        None => true, // I/O, closed connection, timeout: no server verdict at all.
        Some(state) => {
            let code = state.code();
            code.starts_with("08")
                || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
        }
    };
    if retryable {
        StoreError::Unavailable {
            source: Box::new(error),
        }
    } else {
        StoreError::Internal {
            source: Box::new(error),
        }
    }
}

fn pool_error(error: PoolError) -> StoreError {
    match error {
        PoolError::Backend(e) => classify(e),
        other => StoreError::Unavailable {
            source: Box::new(other),
        },
    }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::internal(format!("corrupt stored data: {what}"))
}

const ALLOCATE: &str =
    "INSERT INTO conversations (tenant_id, conversation_id, last_sequence) VALUES ($1, $2, $3)
     ON CONFLICT (tenant_id, conversation_id)
     DO UPDATE SET last_sequence = conversations.last_sequence + EXCLUDED.last_sequence
     RETURNING last_sequence";

const INSERT_MESSAGES: &str = "INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name,
         tool_calls, tool_call_id, attachments, metadata, exclude_from_context, pinned, error, response_id, created_at)
     SELECT $1, $2, u.*, now()
     FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::text[], $9::jsonb[],
                 $10::jsonb[], $11::bool[], $12::bool[], $13::jsonb[], $14::text[]) AS u";

const MESSAGE_COLUMNS: &str =
    "sequence, role, content, name, tool_calls, tool_call_id, attachments, metadata,
     exclude_from_context, pinned, error, response_id, created_at";

#[async_trait]
impl Store for PostgresStore {
    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %batch.conversation_id, count = batch.messages.len()))]
    async fn append_messages(
        &self,
        tenant: &TenantId,
        batch: &AppendBatch,
    ) -> Result<AppendOutcome, StoreError> {
        let hash = batch.payload_hash();
        let count = batch.messages.len() as i64;
        let (t, c) = (tenant.as_str(), batch.conversation_id.as_str());
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let tx = client.transaction().await.map_err(classify)?;

        let allocate = tx.prepare_cached(ALLOCATE).await.map_err(classify)?;
        let row = tx
            .query_one(&allocate, &[&t, &c, &count])
            .await
            .map_err(classify)?;
        let last = Sequence::from_stored(row.get::<_, i64>(0) - count);

        let record = match &batch.idempotency_key {
            Some(key) => idempotency_record(&tx, t, c, key.as_str()).await?,
            None => None,
        };
        match decide_append(batch, hash, last, record) {
            AppendDecision::Proceed => {}
            // Dropping the transaction rolls back the counter increment.
            AppendDecision::Replay(outcome) => return Ok(outcome),
            AppendDecision::KeyReused => return Err(StoreError::IdempotencyKeyReused),
            AppendDecision::SequenceMismatch { current } => {
                return Err(StoreError::SequenceMismatch { current });
            }
        }

        let mentioned = mentioned_call_ids(&batch.messages);
        let known = if mentioned.is_empty() {
            HashMap::new()
        } else {
            call_states(&tx, t, c, &mentioned).await?
        };
        let effects = check_tool_protocol(&batch.messages, &known)
            .map_err(|violations| StoreError::Invalid { violations })?;

        insert_messages(&tx, t, c, last, &batch.messages).await?;
        record_tool_calls(&tx, t, c, last, &effects).await?;
        let outcome = AppendOutcome::stored(last, batch.messages.len());
        if let Some(key) = &batch.idempotency_key {
            let insert = tx
                .prepare_cached(
                    "INSERT INTO idempotency_keys (tenant_id, conversation_id, idempotency_key, payload_hash,
                         first_sequence, last_sequence, conversation_last_sequence)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .await
                .map_err(classify)?;
            let first = outcome.first_sequence.as_i64();
            let last_seq = outcome.last_sequence.as_i64();
            tx.execute(
                &insert,
                &[&t, &c, &key.as_str(), &&hash.0[..], &first, &last_seq, &last_seq],
            )
            .await
            .map_err(classify)?;
        }
        tx.commit().await.map_err(classify)?;
        Ok(outcome)
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
    async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        limit: usize,
    ) -> Result<MessagePage, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let query = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3
             ORDER BY sequence LIMIT $4"
        );
        let statement = client.prepare_cached(&query).await.map_err(classify)?;
        let fetch = limit as i64 + 1;
        let rows = client
            .query(
                &statement,
                &[&tenant.as_str(), &conversation.as_str(), &after.as_i64(), &fetch],
            )
            .await
            .map_err(classify)?;
        if rows.is_empty() {
            let exists = client
                .query_opt(
                    "SELECT 1 FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
                    &[&tenant.as_str(), &conversation.as_str()],
                )
                .await
                .map_err(classify)?;
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
    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<u64, StoreError> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let tx = client.transaction().await.map_err(classify)?;
        let removed = tx
            .execute(
                "DELETE FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
                &[&t, &c],
            )
            .await
            .map_err(classify)?;
        if removed == 0 {
            return Err(StoreError::NotFound);
        }
        let messages = tx
            .execute(
                "DELETE FROM messages WHERE tenant_id = $1 AND conversation_id = $2",
                &[&t, &c],
            )
            .await
            .map_err(classify)?;
        for table in ["tool_calls", "idempotency_keys"] {
            let statement = format!("DELETE FROM {table} WHERE tenant_id = $1 AND conversation_id = $2");
            tx.execute(&statement, &[&t, &c]).await.map_err(classify)?;
        }
        tx.commit().await.map_err(classify)?;
        Ok(messages)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        client.simple_query("SELECT 1").await.map_err(classify)?;
        Ok(())
    }
}

async fn idempotency_record(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    conversation: &str,
    key: &str,
) -> Result<Option<IdempotencyRecord>, StoreError> {
    let statement = tx
        .prepare_cached(
            "SELECT payload_hash, first_sequence, last_sequence, conversation_last_sequence
             FROM idempotency_keys WHERE tenant_id = $1 AND conversation_id = $2 AND idempotency_key = $3",
        )
        .await
        .map_err(classify)?;
    let Some(row) = tx
        .query_opt(&statement, &[&tenant, &conversation, &key])
        .await
        .map_err(classify)?
    else {
        return Ok(None);
    };
    let hash: Vec<u8> = row.get(0);
    let payload_hash = PayloadHash(hash.try_into().map_err(|_| corrupt("idempotency payload hash"))?);
    let outcome = AppendOutcome {
        first_sequence: Sequence::from_stored(row.get(1)),
        last_sequence: Sequence::from_stored(row.get(2)),
        conversation_last_sequence: Sequence::from_stored(row.get(3)),
        replayed: false,
    };
    Ok(Some(IdempotencyRecord {
        payload_hash,
        outcome,
    }))
}

async fn call_states(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    conversation: &str,
    ids: &[String],
) -> Result<HashMap<String, CallState>, StoreError> {
    let statement = tx
        .prepare_cached(
            "SELECT call_id, result_sequence IS NOT NULL FROM tool_calls
             WHERE tenant_id = $1 AND conversation_id = $2 AND call_id = ANY($3)",
        )
        .await
        .map_err(classify)?;
    let rows = tx
        .query(&statement, &[&tenant, &conversation, &ids])
        .await
        .map_err(classify)?;
    Ok(rows
        .iter()
        .map(|row| {
            let state = if row.get::<_, bool>(1) {
                CallState::Answered
            } else {
                CallState::Open
            };
            (row.get::<_, String>(0), state)
        })
        .collect())
}

async fn insert_messages(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    conversation: &str,
    last: Sequence,
    messages: &[Message],
) -> Result<(), StoreError> {
    let sequences: Vec<i64> = (1..=messages.len() as u64)
        .map(|i| last.plus(i).as_i64())
        .collect();
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    let contents: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    let names: Vec<&str> = messages.iter().map(|m| m.name.as_str()).collect();
    let tool_calls: Vec<Json<&Vec<ToolCall>>> = messages.iter().map(|m| Json(&m.tool_calls)).collect();
    let tool_call_ids: Vec<Option<&str>> = messages.iter().map(|m| m.tool_call_id.as_deref()).collect();
    let attachments: Vec<Json<&Vec<Attachment>>> = messages.iter().map(|m| Json(&m.attachments)).collect();
    let metadata: Vec<Json<_>> = messages.iter().map(|m| Json(&m.metadata)).collect();
    let excluded: Vec<bool> = messages.iter().map(|m| m.exclude_from_context).collect();
    let pinned: Vec<bool> = messages.iter().map(|m| m.pinned).collect();
    let errors: Vec<Option<Json<&LlmError>>> = messages.iter().map(|m| m.error.as_ref().map(Json)).collect();
    let response_ids: Vec<&str> = messages.iter().map(|m| m.response_id.as_str()).collect();
    let statement = tx.prepare_cached(INSERT_MESSAGES).await.map_err(classify)?;
    tx.execute(
        &statement,
        &[
            &tenant,
            &conversation,
            &sequences,
            &roles,
            &contents,
            &names,
            &tool_calls,
            &tool_call_ids,
            &attachments,
            &metadata,
            &excluded,
            &pinned,
            &errors,
            &response_ids,
        ],
    )
    .await
    .map_err(classify)?;
    Ok(())
}

async fn record_tool_calls(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    conversation: &str,
    last: Sequence,
    effects: &ToolEffects,
) -> Result<(), StoreError> {
    let sequence_of = |index: usize| last.plus(index as u64 + 1).as_i64();
    let answered_here: HashMap<&str, i64> = effects
        .answered
        .iter()
        .map(|(i, id)| (id.as_str(), sequence_of(*i)))
        .collect();
    if !effects.new_calls.is_empty() {
        let ids: Vec<&str> = effects.new_calls.iter().map(|(_, id)| id.as_str()).collect();
        let call_sequences: Vec<i64> = effects.new_calls.iter().map(|(i, _)| sequence_of(*i)).collect();
        let results: Vec<Option<i64>> = ids.iter().map(|id| answered_here.get(id).copied()).collect();
        let statement = tx
            .prepare_cached(
                "INSERT INTO tool_calls (tenant_id, conversation_id, call_id, call_sequence, result_sequence)
                 SELECT $1, $2, u.* FROM unnest($3::text[], $4::bigint[], $5::bigint[]) AS u",
            )
            .await
            .map_err(classify)?;
        tx.execute(
            &statement,
            &[&tenant, &conversation, &ids, &call_sequences, &results],
        )
        .await
        .map_err(classify)?;
    }
    let new_here: Vec<&str> = effects.new_calls.iter().map(|(_, id)| id.as_str()).collect();
    let (earlier_ids, earlier_results): (Vec<&str>, Vec<i64>) = effects
        .answered
        .iter()
        .filter(|(_, id)| !new_here.contains(&id.as_str()))
        .map(|(i, id)| (id.as_str(), sequence_of(*i)))
        .unzip();
    if !earlier_ids.is_empty() {
        let statement = tx
            .prepare_cached(
                "UPDATE tool_calls SET result_sequence = u.result_sequence
                 FROM unnest($3::text[], $4::bigint[]) AS u(call_id, result_sequence)
                 WHERE tool_calls.tenant_id = $1 AND tool_calls.conversation_id = $2
                   AND tool_calls.call_id = u.call_id",
            )
            .await
            .map_err(classify)?;
        tx.execute(
            &statement,
            &[&tenant, &conversation, &earlier_ids, &earlier_results],
        )
        .await
        .map_err(classify)?;
    }
    Ok(())
}

fn stored_message(row: &Row) -> Result<StoredMessage, StoreError> {
    let decode = |e: tokio_postgres::Error| StoreError::Internal { source: Box::new(e) };
    let role_name: &str = row.try_get("role").map_err(decode)?;
    let role = Role::from_name(role_name).ok_or_else(|| corrupt("role"))?;
    let Json(tool_calls) = row.try_get("tool_calls").map_err(decode)?;
    let Json(attachments) = row.try_get("attachments").map_err(decode)?;
    let Json(metadata) = row.try_get("metadata").map_err(decode)?;
    let error: Option<Json<LlmError>> = row.try_get("error").map_err(decode)?;
    Ok(StoredMessage {
        sequence: Sequence::from_stored(row.try_get("sequence").map_err(decode)?),
        created_at: row.try_get("created_at").map_err(decode)?,
        message: Message {
            role,
            content: row.try_get("content").map_err(decode)?,
            name: row.try_get("name").map_err(decode)?,
            tool_calls,
            tool_call_id: row.try_get("tool_call_id").map_err(decode)?,
            attachments,
            metadata,
            exclude_from_context: row.try_get("exclude_from_context").map_err(decode)?,
            pinned: row.try_get("pinned").map_err(decode)?,
            error: error.map(|Json(e)| e),
            response_id: row.try_get("response_id").map_err(decode)?,
        },
    })
}
