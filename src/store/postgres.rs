//! The production store on PostgreSQL (tokio-postgres + deadpool-postgres).
//!
//! An append is one transaction: the conversation's counter row is incremented by the batch size
//! first (creating it on first use), which both allocates the sequences and locks the
//! conversation, so concurrent appenders to one conversation queue on that row and sequences stay
//! gapless. Everything after that decides against a stable state.

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::{
    NoTls, Row,
    types::{Json, ToSql},
};

use super::{
    Lease, MemoryState, MessagePage, NewSummary, Store, StoreError, SummaryState, migrations, newest_facts,
};
use crate::domain::{
    AppendBatch, AppendDecision, AppendOutcome, CallState, ConversationId, IdempotencyRecord, KnownCall,
    PayloadHash, Role, Sequence, StoredMessage, TenantId, ToolEffects,
    context::{ContextSnapshot, PageRequest, SummarySection, TokenCounts},
    decide_append,
    memory::WorkingMemory,
    message::{Attachment, LlmError, Message, ToolCall},
    summary::Summary,
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
    /// Server-side cap on any one statement (`statement_timeout`), so no request holds the
    /// database past its own deadline.
    pub statement_timeout: Duration,
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
        pg_config.options(format!(
            "-c statement_timeout={}",
            options.statement_timeout.as_millis()
        ));
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

    /// [`APPEND_PLAIN`]: the common append (text turns) in one round trip.
    async fn append_plain(
        &self,
        tenant: &TenantId,
        batch: &AppendBatch,
    ) -> Result<AppendOutcome, StoreError> {
        let count = batch.messages.len() as i64;
        let (user_offset, response_id) = newest_facts(&batch.messages, Sequence::ZERO);
        let user_offset = user_offset.map(Sequence::as_i64);
        let (t, c) = (tenant.as_str(), batch.conversation_id.as_str());
        let columns = Columns::of(batch);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&t, &c, &count, &user_offset, &response_id];
        params.extend(columns.params());
        let client = self.pool.get().await.map_err(pool_error)?;
        let statement = client.prepare_cached(APPEND_PLAIN).await.map_err(classify)?;
        let row = client.query_one(&statement, &params).await.map_err(classify)?;
        let last = Sequence::from_stored(row.get::<_, i64>(0) - count);
        Ok(AppendOutcome::stored(last, batch.messages.len()))
    }

    /// Reads the pool's (size, available, waiting) for the metrics endpoint.
    pub fn pool_status(&self) -> crate::metrics::PoolStatus {
        let pool = self.pool.clone();
        std::sync::Arc::new(move || {
            let status = pool.status();
            let waiting = status.waiting as i64;
            (status.size as i64, status.available as i64, waiting)
        })
    }

    /// Closes the pool: idle connections are dropped and new checkouts fail.
    pub fn close(&self) {
        self.pool.close();
    }
}

/// Sorts a Postgres failure into retryable (connection trouble) and internal.
pub(crate) fn classify(error: tokio_postgres::Error) -> StoreError {
    let retryable = match error.code() {
        // No server verdict: retryable only if the connection itself failed.
        None => {
            error.is_closed()
                || std::error::Error::source(&error)
                    .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        }
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

/// Creates or locks the conversation and allocates the batch's sequences in one statement.
/// `$4` is the 1-based position of the batch's newest user message (NULL if none) and `$5` its
/// newest response id; SET expressions see the row as it was before the update. A macro so that
/// [`APPEND_PLAIN`] can embed the same text.
macro_rules! allocate_sql {
    () => {
        "INSERT INTO conversations
             (tenant_id, conversation_id, last_sequence, last_user_sequence, last_response_id)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET
             last_sequence = conversations.last_sequence + EXCLUDED.last_sequence,
             last_user_sequence = coalesce(conversations.last_sequence + $4, conversations.last_user_sequence),
             last_response_id = coalesce($5, conversations.last_response_id)
         RETURNING last_sequence"
    };
}

/// See [`allocate_sql`].
const ALLOCATE: &str = allocate_sql!();

/// Inserts a batch: `$3` holds the sequences, `$4..=$17` the [`Columns`], `$18` the sequence
/// of the call each tool result answers.
const INSERT_MESSAGES: &str =
    "INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name,
         tool_calls, tool_call_id, attachments, metadata, exclude_from_context, pinned, error, response_id,
         tokens_o200k, tokens_cl100k, tokens_approx, call_sequence, created_at)
     SELECT $1, $2, u.*, now()
     FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::text[], $9::jsonb[],
                 $10::jsonb[], $11::bool[], $12::bool[], $13::jsonb[], $14::text[],
                 $15::int[], $16::int[], $17::int[], $18::bigint[]) AS u";

/// The whole append of a batch without tool calls, results, idempotency key or expected
/// sequence, in one statement (one round trip, its own transaction): [`ALLOCATE`]'s upsert
/// locks the conversation and allocates, and the insert numbers the rows after it. `$6..=$19`
/// are the [`Columns`].
const APPEND_PLAIN: &str = concat!(
    "WITH allocated AS (",
    allocate_sql!(),
    "     ), stored AS (
         INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name,
             tool_calls, tool_call_id, attachments, metadata, exclude_from_context, pinned, error,
             response_id, tokens_o200k, tokens_cl100k, tokens_approx, created_at)
         SELECT $1, $2, a.last_sequence - $3 + u.n, u.role, u.content, u.name, u.tool_calls,
                u.tool_call_id, u.attachments, u.metadata, u.excluded, u.pinned, u.error,
                u.response_id, u.o200k, u.cl100k, u.approx, now()
         FROM allocated a,
              unnest($6::text[], $7::text[], $8::text[], $9::jsonb[], $10::text[], $11::jsonb[],
                     $12::jsonb[], $13::bool[], $14::bool[], $15::jsonb[], $16::text[],
                     $17::int[], $18::int[], $19::int[])
                  WITH ORDINALITY AS u(role, content, name, tool_calls, tool_call_id, attachments,
                     metadata, excluded, pinned, error, response_id, o200k, cl100k, approx, n)
     )
     SELECT last_sequence FROM allocated"
);

/// Columns of a stored message, in the positions [`stored_message`] reads.
/// Empty JSON lists and maps come back as NULL: most messages have no tool calls, attachments or
/// metadata, and skipping their JSON decoding is a sizeable part of BuildContext's CPU.
const MESSAGE_COLUMNS: &str = "sequence, role, content, name, NULLIF(tool_calls, '[]'), tool_call_id,
     NULLIF(attachments, '[]'), NULLIF(metadata, '{}'),
     exclude_from_context, pinned, error, response_id, created_at,
     tokens_o200k, tokens_cl100k, tokens_approx, call_sequence";

#[async_trait]
impl Store for PostgresStore {
    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %batch.conversation_id, count = batch.messages.len()))]
    async fn append_messages(
        &self,
        tenant: &TenantId,
        batch: &AppendBatch,
    ) -> Result<AppendOutcome, StoreError> {
        let mentioned = mentioned_call_ids(&batch.messages);
        if batch.idempotency_key.is_none() && batch.expected_last_sequence.is_none() && mentioned.is_empty() {
            return self.append_plain(tenant, batch).await;
        }
        let hash = batch.payload_hash();
        let count = batch.messages.len() as i64;
        let (t, c) = (tenant.as_str(), batch.conversation_id.as_str());
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let tx = client.transaction().await.map_err(classify)?;

        let (user_offset, response_id) = newest_facts(&batch.messages, Sequence::ZERO);
        let user_offset = user_offset.map(Sequence::as_i64);
        let allocate = tx.prepare_cached(ALLOCATE).await.map_err(classify)?;
        let row = tx
            .query_one(&allocate, &[&t, &c, &count, &user_offset, &response_id])
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

        let known = if mentioned.is_empty() {
            HashMap::new()
        } else {
            call_states(&tx, t, c, &mentioned).await?
        };
        let effects = check_tool_protocol(&batch.messages, last, &known)
            .map_err(|violations| StoreError::Invalid { violations })?;

        insert_messages(&tx, t, c, last, batch, &effects).await?;
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
        for table in ["tool_calls", "idempotency_keys", "summaries", "working_memory"] {
            let statement = format!("DELETE FROM {table} WHERE tenant_id = $1 AND conversation_id = $2");
            tx.execute(&statement, &[&t, &c]).await.map_err(classify)?;
        }
        tx.commit().await.map_err(classify)?;
        Ok(messages)
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
    async fn open_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first_page: usize,
    ) -> Result<(ContextSnapshot, Vec<StoredMessage>), StoreError> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let client = self.pool.get().await.map_err(pool_error)?;
        let state = client
            .prepare_cached(
                "SELECT c.last_sequence, c.last_user_sequence, c.last_response_id,
                        s.text, s.through_sequence, m.document, m.through_sequence, m.version
                 FROM conversations c
                 LEFT JOIN summaries s ON s.tenant_id = c.tenant_id
                      AND s.conversation_id = c.conversation_id AND s.version = c.summary_version
                 LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
                 WHERE c.tenant_id = $1 AND c.conversation_id = $2",
            )
            .await
            .map_err(classify)?;
        let pinned_query = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE tenant_id = $1 AND conversation_id = $2 AND pinned AND NOT exclude_from_context
             ORDER BY sequence"
        );
        let pinned = client.prepare_cached(&pinned_query).await.map_err(classify)?;
        let newest_query = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE tenant_id = $1 AND conversation_id = $2 AND NOT exclude_from_context
             ORDER BY sequence DESC LIMIT $3"
        );
        let newest = client.prepare_cached(&newest_query).await.map_err(classify)?;
        let limit = first_page as i64;
        let newest_params: &[&(dyn tokio_postgres::types::ToSql + Sync)] = &[&t, &c, &limit];
        let params: &[&(dyn tokio_postgres::types::ToSql + Sync)] = &[&t, &c];
        // The three queries go out together on one connection: one network round trip. The
        // server runs them in order, so the pages never miss a message the state counts;
        // anything newer than the state is dropped here or by the packer.
        let (state, pinned, newest) = tokio::try_join!(
            client.query_opt(&state, params),
            client.query(&pinned, params),
            client.query(&newest, newest_params),
        )
        .map_err(classify)?;
        let state = state.ok_or(StoreError::NotFound)?;
        let last_sequence = Sequence::from_stored(state.get(0));
        let last_user: Option<i64> = state.get(1);
        let pinned: Vec<StoredMessage> = pinned.iter().map(stored_message).collect::<Result<_, _>>()?;
        let summary_text: Option<String> = state.get(3);
        let summary = summary_text.map(|text| SummarySection {
            text,
            through_sequence: Sequence::from_stored(state.get(4)),
        });
        let memory = memory_from_row(&state, 5)?;
        let snapshot = ContextSnapshot {
            last_sequence,
            last_user_sequence: last_user.map(Sequence::from_stored),
            last_response_id: state.get(2),
            pinned: pinned
                .into_iter()
                .filter(|m| m.sequence <= last_sequence)
                .collect(),
            summary,
            memory: memory.as_ref().and_then(WorkingMemory::render),
            pending_calls: HashMap::new(),
        };
        Ok((
            snapshot,
            newest.iter().map(stored_message).collect::<Result<_, _>>()?,
        ))
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, before = page.before.get(), limit = page.limit))]
    async fn tail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        page: PageRequest,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let query = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE tenant_id = $1 AND conversation_id = $2 AND sequence < $3 AND sequence > $4
               AND NOT exclude_from_context
             ORDER BY sequence DESC LIMIT $5"
        );
        let statement = client.prepare_cached(&query).await.map_err(classify)?;
        let limit = page.limit as i64;
        let rows = client
            .query(
                &statement,
                &[
                    &tenant.as_str(),
                    &conversation.as_str(),
                    &page.before.as_i64(),
                    &page.floor.as_i64(),
                    &limit,
                ],
            )
            .await
            .map_err(classify)?;
        rows.iter().map(stored_message).collect()
    }

    async fn open_calls(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[String],
    ) -> Result<HashMap<String, Sequence>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        let rows = client
            .query(
                "SELECT call_id, call_sequence FROM tool_calls
                 WHERE tenant_id = $1 AND conversation_id = $2 AND call_id = ANY($3) AND result_sequence IS NULL",
                &[&tenant.as_str(), &conversation.as_str(), &ids],
            )
            .await
            .map_err(classify)?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), Sequence::from_stored(r.get(1))))
            .collect())
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
    async fn summary_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<SummaryState, StoreError> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let client = self.pool.get().await.map_err(pool_error)?;
        let state = client
            .query_opt(
                "SELECT c.last_sequence, s.text, s.through_sequence, s.summarizer, s.version, s.created_at
                 FROM conversations c
                 LEFT JOIN summaries s ON s.tenant_id = c.tenant_id
                      AND s.conversation_id = c.conversation_id AND s.version = c.summary_version
                 WHERE c.tenant_id = $1 AND c.conversation_id = $2",
                &[&t, &c],
            )
            .await
            .map_err(classify)?
            .ok_or(StoreError::NotFound)?;
        let text: Option<String> = state.get(1);
        let summary = text.map(|text| Summary {
            text,
            through_sequence: Sequence::from_stored(state.get(2)),
            summarizer: state.get(3),
            version: state.get::<_, i64>(4).max(0) as u64,
            updated_at: state.get(5),
        });
        let watermark = summary.as_ref().map_or(Sequence::ZERO, |s| s.through_sequence);
        let messages = messages_after(&client, t, c, watermark).await?;
        Ok(SummaryState {
            summary,
            messages,
            last_sequence: Sequence::from_stored(state.get(0)),
        })
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, base = base.get()))]
    async fn store_summary(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: Sequence,
        summary: NewSummary,
    ) -> Result<Summary, StoreError> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let client = self.pool.get().await.map_err(pool_error)?;
        let through = summary.through_sequence.as_i64();
        // Compare-and-set of the watermark and the new version row, in one statement.
        let row = client
            .query_opt(
                "WITH moved AS (
                     UPDATE conversations
                     SET summary_through_sequence = $4, summary_version = summary_version + 1
                     WHERE tenant_id = $1 AND conversation_id = $2 AND summary_through_sequence = $3
                       AND $4 > $3 AND $4 <= last_sequence
                     RETURNING summary_version)
                 INSERT INTO summaries (tenant_id, conversation_id, version, text, through_sequence, summarizer)
                 SELECT $1, $2, summary_version, $5, $4, $6 FROM moved
                 RETURNING version, created_at",
                &[&t, &c, &base.as_i64(), &through, &summary.text, &summary.summarizer],
            )
            .await
            .map_err(classify)?;
        match row {
            Some(row) => Ok(Summary {
                text: summary.text,
                through_sequence: summary.through_sequence,
                summarizer: summary.summarizer,
                version: row.get::<_, i64>(0).max(0) as u64,
                updated_at: row.get(1),
            }),
            None => {
                let current = client
                    .query_opt(
                        "SELECT summary_through_sequence FROM conversations
                         WHERE tenant_id = $1 AND conversation_id = $2",
                        &[&t, &c],
                    )
                    .await
                    .map_err(classify)?
                    .ok_or(StoreError::NotFound)?;
                Err(StoreError::SummaryMoved {
                    current: Sequence::from_stored(current.get(0)),
                })
            }
        }
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
    async fn memory_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        with_messages: bool,
    ) -> Result<MemoryState, StoreError> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let client = self.pool.get().await.map_err(pool_error)?;
        let row = client
            .query_opt(
                "SELECT m.document, m.through_sequence, m.version, m.updated_at, c.last_sequence
                 FROM conversations c
                 LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
                 WHERE c.tenant_id = $1 AND c.conversation_id = $2",
                &[&t, &c],
            )
            .await
            .map_err(classify)?
            .ok_or(StoreError::NotFound)?;
        let mut memory = memory_from_row(&row, 0)?.unwrap_or_default();
        memory.updated_at = row.get(3);
        let messages = match with_messages {
            true => messages_after(&client, t, c, memory.through_sequence).await?,
            false => Vec::new(),
        };
        Ok(MemoryState {
            memory,
            messages,
            last_sequence: Sequence::from_stored(row.get(4)),
        })
    }

    #[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, expected_version))]
    async fn store_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        expected_version: u64,
        memory: &WorkingMemory,
    ) -> Result<WorkingMemory, StoreError> {
        let (t, c) = (tenant.as_str(), conversation.as_str());
        let client = self.pool.get().await.map_err(pool_error)?;
        let (document, through) = (Json(memory), memory.through_sequence.as_i64());
        let row = if expected_version == 0 {
            client
                .query_opt(
                    "INSERT INTO working_memory (tenant_id, conversation_id, document, through_sequence, version)
                     SELECT $1, $2, $3, $4, 1 WHERE EXISTS (
                         SELECT 1 FROM conversations WHERE tenant_id = $1 AND conversation_id = $2)
                     ON CONFLICT (tenant_id, conversation_id) DO NOTHING
                     RETURNING version, updated_at",
                    &[&t, &c, &document, &through],
                )
                .await
        } else {
            client
                .query_opt(
                    "UPDATE working_memory
                     SET document = $3, through_sequence = $4, version = version + 1, updated_at = now()
                     WHERE tenant_id = $1 AND conversation_id = $2 AND version = $5
                     RETURNING version, updated_at",
                    &[&t, &c, &document, &through, &(expected_version as i64)],
                )
                .await
        }
        .map_err(classify)?;
        if let Some(row) = row {
            return Ok(WorkingMemory {
                version: row.get::<_, i64>(0).max(0) as u64,
                updated_at: row.get(1),
                ..memory.clone()
            });
        }
        let current = client
            .query_opt(
                "SELECT m.version FROM conversations c
                 LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
                 WHERE c.tenant_id = $1 AND c.conversation_id = $2",
                &[&t, &c],
            )
            .await
            .map_err(classify)?
            .ok_or(StoreError::NotFound)?;
        let current: Option<i64> = current.get(0);
        Err(StoreError::MemoryVersionMismatch {
            current: current.unwrap_or(0).max(0) as u64,
        })
    }

    async fn try_summarizer_lease(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<Lease>, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        // A transaction-scoped advisory lock on a dedicated connection: whatever happens to
        // this process, the lock ends with the transaction or the connection.
        client.batch_execute("BEGIN").await.map_err(classify)?;
        let key = format!("ctxd-summarizer/{tenant}/{conversation}");
        let row = client
            .query_one(
                "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
                &[&key],
            )
            .await
            .map_err(classify)?;
        let lease = PostgresLease { client: Some(client) };
        if row.get::<_, bool>(0) {
            Ok(Some(Lease::postgres(lease)))
        } else {
            lease.release().await;
            Ok(None)
        }
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
) -> Result<HashMap<String, KnownCall>, StoreError> {
    let statement = tx
        .prepare_cached(
            "SELECT call_id, result_sequence IS NOT NULL, call_sequence FROM tool_calls
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
            let sequence = Sequence::from_stored(row.get(2));
            (row.get::<_, String>(0), KnownCall { state, sequence })
        })
        .collect())
}

async fn insert_messages(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    conversation: &str,
    last: Sequence,
    batch: &AppendBatch,
    effects: &ToolEffects,
) -> Result<(), StoreError> {
    let count = batch.messages.len();
    let sequences: Vec<i64> = (1..=count as u64).map(|i| last.plus(i).as_i64()).collect();
    let call_sequences: Vec<Option<i64>> = effects
        .call_sequences(count)
        .into_iter()
        .map(|s| s.map(Sequence::as_i64))
        .collect();
    let columns = Columns::of(batch);
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&tenant, &conversation, &sequences];
    params.extend(columns.params());
    params.push(&call_sequences);
    let statement = tx.prepare_cached(INSERT_MESSAGES).await.map_err(classify)?;
    tx.execute(&statement, &params).await.map_err(classify)?;
    Ok(())
}

/// A batch's messages as one array per column, for `unnest`; token counts included.
struct Columns<'a> {
    roles: Vec<&'a str>,
    contents: Vec<&'a str>,
    names: Vec<&'a str>,
    tool_calls: Vec<Json<&'a Vec<ToolCall>>>,
    tool_call_ids: Vec<Option<&'a str>>,
    attachments: Vec<Json<&'a Vec<Attachment>>>,
    metadata: Vec<Json<&'a BTreeMap<String, String>>>,
    excluded: Vec<bool>,
    pinned: Vec<bool>,
    errors: Vec<Option<Json<&'a LlmError>>>,
    response_ids: Vec<&'a str>,
    o200k: Vec<i32>,
    cl100k: Vec<i32>,
    approx: Vec<i32>,
}

impl<'a> Columns<'a> {
    fn of(batch: &'a AppendBatch) -> Self {
        let m = &batch.messages;
        let count = |pick: fn(&TokenCounts) -> u32| -> Vec<i32> {
            batch
                .tokens
                .iter()
                .map(|t| i32::try_from(pick(t)).unwrap_or(i32::MAX))
                .collect()
        };
        Columns {
            roles: m.iter().map(|m| m.role.as_str()).collect(),
            contents: m.iter().map(|m| m.content.as_str()).collect(),
            names: m.iter().map(|m| m.name.as_str()).collect(),
            tool_calls: m.iter().map(|m| Json(&m.tool_calls)).collect(),
            tool_call_ids: m.iter().map(|m| m.tool_call_id.as_deref()).collect(),
            attachments: m.iter().map(|m| Json(&m.attachments)).collect(),
            metadata: m.iter().map(|m| Json(&m.metadata)).collect(),
            excluded: m.iter().map(|m| m.exclude_from_context).collect(),
            pinned: m.iter().map(|m| m.pinned).collect(),
            errors: m.iter().map(|m| m.error.as_ref().map(Json)).collect(),
            response_ids: m.iter().map(|m| m.response_id.as_str()).collect(),
            o200k: count(|t| t.o200k_base),
            cl100k: count(|t| t.cl100k_base),
            approx: count(|t| t.approx),
        }
    }

    /// In the order of the `unnest` lists of [`INSERT_MESSAGES`] and [`APPEND_PLAIN`].
    fn params(&self) -> [&(dyn ToSql + Sync); 14] {
        [
            &self.roles,
            &self.contents,
            &self.names,
            &self.tool_calls,
            &self.tool_call_ids,
            &self.attachments,
            &self.metadata,
            &self.excluded,
            &self.pinned,
            &self.errors,
            &self.response_ids,
            &self.o200k,
            &self.cl100k,
            &self.approx,
        ]
    }
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
        .map(|(i, id, _)| (id.as_str(), sequence_of(*i)))
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
        .filter(|(_, id, _)| !new_here.contains(&id.as_str()))
        .map(|(i, id, _)| (id.as_str(), sequence_of(*i)))
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

/// A row of [`MESSAGE_COLUMNS`], read by position (name lookups cost a scan per column on
/// every row of every BuildContext).
fn stored_message(row: &Row) -> Result<StoredMessage, StoreError> {
    let decode = |e: tokio_postgres::Error| StoreError::Internal { source: Box::new(e) };
    let role_name: &str = row.try_get(1).map_err(decode)?;
    let role = Role::from_name(role_name).ok_or_else(|| corrupt("role"))?;
    let tool_calls: Option<Json<_>> = row.try_get(4).map_err(decode)?;
    let attachments: Option<Json<_>> = row.try_get(6).map_err(decode)?;
    let metadata: Option<Json<_>> = row.try_get(7).map_err(decode)?;
    let error: Option<Json<LlmError>> = row.try_get(10).map_err(decode)?;
    let count = |column: usize| -> Result<u32, StoreError> {
        Ok(row.try_get::<_, i32>(column).map_err(decode)?.max(0) as u32)
    };
    let call_sequence: Option<i64> = row.try_get(16).map_err(decode)?;
    Ok(StoredMessage {
        sequence: Sequence::from_stored(row.try_get(0).map_err(decode)?),
        created_at: row.try_get(12).map_err(decode)?,
        tokens: TokenCounts {
            o200k_base: count(13)?,
            cl100k_base: count(14)?,
            approx: count(15)?,
        },
        call_sequence: call_sequence.map(Sequence::from_stored),
        message: Message {
            role,
            content: row.try_get(2).map_err(decode)?,
            name: row.try_get(3).map_err(decode)?,
            tool_calls: tool_calls.map(|Json(v)| v).unwrap_or_default(),
            tool_call_id: row.try_get(5).map_err(decode)?,
            attachments: attachments.map(|Json(v)| v).unwrap_or_default(),
            metadata: metadata.map(|Json(v)| v).unwrap_or_default(),
            exclude_from_context: row.try_get(8).map_err(decode)?,
            pinned: row.try_get(9).map_err(decode)?,
            error: error.map(|Json(e)| e),
            response_id: row.try_get(11).map_err(decode)?,
        },
    })
}

/// Every message after `after`, oldest first.
async fn messages_after(
    client: &deadpool_postgres::Client,
    tenant: &str,
    conversation: &str,
    after: Sequence,
) -> Result<Vec<StoredMessage>, StoreError> {
    let query = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3 ORDER BY sequence"
    );
    let statement = client.prepare_cached(&query).await.map_err(classify)?;
    let rows = client
        .query(&statement, &[&tenant, &conversation, &after.as_i64()])
        .await
        .map_err(classify)?;
    rows.iter().map(stored_message).collect()
}

/// A working memory from `document, through_sequence, version` columns starting at `first`.
fn memory_from_row(row: &Row, first: usize) -> Result<Option<WorkingMemory>, StoreError> {
    let decode = |e: tokio_postgres::Error| StoreError::Internal { source: Box::new(e) };
    let document: Option<Json<WorkingMemory>> = row.try_get(first).map_err(decode)?;
    let through: Option<i64> = row.try_get(first + 1).map_err(decode)?;
    let version: Option<i64> = row.try_get(first + 2).map_err(decode)?;
    Ok(document.map(|Json(mut memory)| {
        memory.through_sequence = Sequence::from_stored(through.unwrap_or(0));
        memory.version = version.unwrap_or(0).max(0) as u64;
        memory
    }))
}

/// A background-summarizer lease: an advisory lock held by an open transaction on a dedicated
/// pooled connection.
#[derive(Debug)]
pub(crate) struct PostgresLease {
    client: Option<deadpool_postgres::Object>,
}

impl PostgresLease {
    /// Ends the transaction (releasing the lock) and returns the connection to the pool.
    pub(crate) async fn release(mut self) {
        if let Some(client) = self.client.take()
            && client.batch_execute("COMMIT").await.is_err()
        {
            // Unknown state: keep the connection out of the pool; closing it frees the lock.
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

impl Drop for PostgresLease {
    fn drop(&mut self) {
        // Dropped without release (a panic or a cancelled task): the connection is still in a
        // transaction, so it must not go back to the pool. Closing it frees the lock.
        if let Some(client) = self.client.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}
