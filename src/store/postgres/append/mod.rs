//! AppendMessage on PostgreSQL: read the locked conversation's state, let the domain
//! [`plan`] the append, write the plan.

use std::collections::HashMap;

use deadpool_postgres::{GenericClient, Pool, Transaction};
use tokio_postgres::types::ToSql;

use super::{
    errors::corrupt,
    rows::{Columns, column},
};
mod insert;
mod placement;

use insert::MessageRows;
use placement::Placement;

use crate::{
    domain::{
        AppendBatch, AppendOutcome, AppendPlan, AppendState, CallState, IdempotencyRecord, KnownCall,
        PayloadHash, Sequence, TenantId, Usage, WritePlan,
        append::{needs_state, newest_facts, plan},
        tool_protocol::mentioned_call_ids,
    },
    runtime::deadline::Deadline,
    store::StoreError,
};

/// Creates or locks the conversation and allocates the batch's sequences and log positions in
/// one statement. `$4` is the 1-based position of the batch's newest user message (NULL if
/// none) and `$5` its newest response id; `$6` is the batch's approximate tokens and `$7` the
/// offset of its newest turn start within the batch (NULL if none), see [`Placement`]. SET
/// expressions see the row as it was before the update, so `turn_offset_before` keeps the
/// newest turn start before the batch. The time comes in through the VALUES: Citus refuses
/// any function that is not immutable in `DO UPDATE SET`. A conversation past its
/// `expire_time` is not updated, and no row comes back ([`StoreError::Expired`]).
const ALLOCATE: &str = "INSERT INTO conversations
             (tenant_id, conversation_id, last_sequence, last_user_sequence, last_response_id,
              token_offset, turn_offset, updated_at, listing,
              usage_input, usage_output, usage_cached, usage_reasoning, incarnation)
         VALUES ($1, $2, $3, $4, $5, $6, $7, statement_timestamp(),
                 jsonb_build_object('t', $1::text, 's', 'active', 'l', '{}'::jsonb), $8, $9, $10, $11, $12)
         ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET
             last_sequence = conversations.last_sequence + EXCLUDED.last_sequence,
             last_user_sequence = coalesce(conversations.last_sequence + $4, conversations.last_user_sequence),
             last_response_id = coalesce($5, conversations.last_response_id),
             token_offset = conversations.token_offset + EXCLUDED.token_offset,
             turn_offset = coalesce(conversations.token_offset + $7, conversations.turn_offset),
             turn_offset_before = conversations.turn_offset,
             updated_at = greatest(conversations.updated_at, EXCLUDED.updated_at),
             usage_input = least(conversations.usage_input::numeric + EXCLUDED.usage_input, 9223372036854775807),
             usage_output = least(conversations.usage_output::numeric + EXCLUDED.usage_output, 9223372036854775807),
             usage_cached = least(conversations.usage_cached::numeric + EXCLUDED.usage_cached, 9223372036854775807),
             usage_reasoning = least(conversations.usage_reasoning::numeric + EXCLUDED.usage_reasoning, 9223372036854775807)
         WHERE conversations.expire_time IS NULL OR conversations.expire_time > EXCLUDED.updated_at
         RETURNING last_sequence, token_offset, turn_offset_before";

/// A pooled connection in a transaction opened by hand (to pipeline it). Dropped before
/// [`OpenTransaction::finish`] — the call was cancelled between round trips — it closes the
/// connection, which ends the transaction, instead of handing it back to the pool still open.
struct OpenTransaction(Option<deadpool_postgres::Object>);

impl OpenTransaction {
    /// The transaction ended (committed or rolled back): the connection may be reused.
    fn finish(mut self) {
        drop(self.0.take());
    }
}

impl Drop for OpenTransaction {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// What [`ALLOCATE`] is given for a batch.
struct Allocation<'a> {
    tenant: &'a str,
    conversation: &'a str,
    count: i64,
    user_offset: Option<i64>,
    response_id: Option<String>,
    /// The batch's placement relative to its start.
    relative: Placement,
    /// The batch's usage: input, output, cached input, reasoning.
    usage: [i64; 4],
    /// The row's `incarnation`, should the append create it.
    incarnation: i64,
}

impl<'a> Allocation<'a> {
    fn of(tenant: &'a TenantId, batch: &'a AppendBatch) -> Self {
        let (user_offset, response_id) = newest_facts(&batch.messages, Sequence::ZERO);
        Allocation {
            tenant: tenant.as_str(),
            conversation: batch.conversation_id.as_str(),
            count: batch.messages.len() as i64,
            user_offset: user_offset.map(Sequence::as_i64),
            response_id,
            relative: Placement::of(batch),
            usage: batch_usage(batch),
            incarnation: super::writes::new_incarnation(),
        }
    }

    /// `$1..=$12` of [`ALLOCATE`].
    fn params(&self) -> [&(dyn ToSql + Sync); 12] {
        [
            &self.tenant,
            &self.conversation,
            &self.count,
            &self.user_offset,
            &self.response_id,
            &self.relative.total,
            &self.relative.last_turn,
            &self.usage[0],
            &self.usage[1],
            &self.usage[2],
            &self.usage[3],
            &self.incarnation,
        ]
    }
}

/// The summed usage of a batch's messages, as [`ALLOCATE`] adds it.
fn batch_usage(batch: &AppendBatch) -> [i64; 4] {
    let usage = batch
        .messages
        .iter()
        .fold(Usage::default(), |sum, m| sum.plus(m.usage));
    [
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.reasoning_tokens,
    ]
    .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %batch.conversation_id, count = batch.messages.len()))]
pub(super) async fn append_messages(
    pool: &Pool,
    tenant: &TenantId,
    batch: &AppendBatch,
    deadline: Option<&Deadline>,
) -> Result<AppendOutcome, StoreError> {
    if !needs_state(batch) {
        return append_plain(pool, tenant, batch, deadline).await;
    }
    let allocation = Allocation::of(tenant, batch);
    let (t, c, count) = (allocation.tenant, allocation.conversation, allocation.count);
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;

    let allocate = tx.prepare_cached(ALLOCATE).await?;
    let row = tx
        .query_opt(&allocate, &allocation.params())
        .await?
        .ok_or(StoreError::Expired)?;
    let last_sequence = Sequence::from_stored(column::<i64>(&row, "last_sequence")? - count);
    let base = column::<i64>(&row, "token_offset")? - allocation.relative.total;
    let placement = allocation
        .relative
        .after(base, column(&row, "turn_offset_before")?);
    let idempotency = match &batch.idempotency_key {
        Some(key) => idempotency_record(&tx, t, c, key.as_str()).await?,
        None => None,
    };
    let mentioned = mentioned_call_ids(&batch.messages);
    let known_calls = match mentioned.is_empty() {
        true => HashMap::new(),
        false => call_states(&tx, t, c, &mentioned).await?,
    };
    let state = AppendState {
        last_sequence,
        idempotency,
        known_calls,
    };
    let write = match plan(batch, &state)? {
        // Dropping the transaction rolls back the counter increment.
        AppendPlan::Replay(outcome) => return Ok(outcome),
        AppendPlan::Write(write) => write,
    };
    insert_messages(&tx, t, c, batch, &write, placement).await?;
    record_tool_calls(&tx, t, c, &write).await?;
    if let (Some(key), Some(record)) = (&batch.idempotency_key, write.idempotency) {
        let insert = tx
            .prepare_cached(
                "INSERT INTO idempotency_keys (tenant_id, conversation_id, idempotency_key, payload_hash,
                     first_sequence, last_sequence, conversation_last_sequence)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .await?;
        let outcome = record.outcome;
        let (first, last) = (outcome.first_sequence.as_i64(), outcome.last_sequence.as_i64());
        let conversation_last = outcome.conversation_last_sequence.as_i64();
        let hash = &record.payload_hash.0[..];
        tx.execute(
            &insert,
            &[&t, &c, &key.as_str(), &hash, &first, &last, &conversation_last],
        )
        .await?;
    }
    super::writes::commit(tx, deadline).await?;
    Ok(write.outcome)
}

/// A batch that [`needs_state`] says any conversation accepts, in two round trips: `BEGIN`
/// with [`ALLOCATE`], then the rows' INSERT with `COMMIT`. Statements on one row and its
/// co-located rows: on Citus, one shard and no two-phase commit (docs/scaling.md).
async fn append_plain(
    pool: &Pool,
    tenant: &TenantId,
    batch: &AppendBatch,
    deadline: Option<&Deadline>,
) -> Result<AppendOutcome, StoreError> {
    let allocation = Allocation::of(tenant, batch);
    let (t, c, count) = (allocation.tenant, allocation.conversation, allocation.count);
    let begin = match super::writes::write_limits(deadline)? {
        Some(limits) => format!("BEGIN; {limits}"),
        None => "BEGIN".to_owned(),
    };
    let client = pool.get().await?;
    let allocate = client.prepare_cached(ALLOCATE).await?;
    let inserts = MessageRows::prepare(&client, batch.messages.len()).await?;
    let open = OpenTransaction(Some(client));
    let Some(client) = open.0.as_ref() else {
        return Err(StoreError::internal("append connection missing"));
    };
    let written = async {
        let params = allocation.params();
        // try_join polls both at once: both are sent before either answer is read.
        let ((), row) = tokio::try_join!(client.batch_execute(&begin), client.query_opt(&allocate, &params))?;
        let row = row.ok_or(StoreError::Expired)?;
        let first = column::<i64>(&row, "last_sequence")? - count + 1;
        let relative = allocation.relative;
        let base = column::<i64>(&row, "token_offset")? - relative.total;
        let turn_offset_before = column(&row, "turn_offset_before")?;
        let rows = MessageRows {
            tenant: t,
            conversation: c,
            sequences: (first..first + count).collect(),
            columns: Columns::of(batch),
            call_sequences: vec![None; batch.messages.len()],
            placement: relative.after(base, turn_offset_before),
            search: insert::search_column(t, c, batch),
        };
        // The rows go out with COMMIT.
        crate::store::claim_commit(deadline)?;
        let commit = async { Ok(client.batch_execute("COMMIT").await?) };
        let ((), ()) = tokio::try_join!(rows.execute(client, &inserts), commit)?;
        Ok::<_, StoreError>(Sequence::from_stored(first - 1))
    }
    .await;
    match written {
        Ok(last) => {
            open.finish();
            Ok(AppendOutcome::stored(last, batch.messages.len()))
        }
        Err(error) => {
            // The transaction may still be open (a failed statement); a ROLLBACK after a
            // COMMIT that already ended it only draws a warning. If even that fails, dropping
            // `open` closes the connection.
            if client.batch_execute("ROLLBACK").await.is_ok() {
                open.finish();
            }
            Err(error)
        }
    }
}

async fn idempotency_record(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    key: &str,
) -> Result<Option<IdempotencyRecord>, StoreError> {
    let statement = tx
        .prepare_cached(
            "SELECT payload_hash, first_sequence, last_sequence, conversation_last_sequence
             FROM idempotency_keys WHERE tenant_id = $1 AND conversation_id = $2 AND idempotency_key = $3",
        )
        .await?;
    let Some(row) = tx.query_opt(&statement, &[&tenant, &conversation, &key]).await? else {
        return Ok(None);
    };
    let hash: Vec<u8> = column(&row, "payload_hash")?;
    let payload_hash = PayloadHash(hash.try_into().map_err(|_| corrupt("idempotency payload hash"))?);
    let outcome = AppendOutcome {
        first_sequence: Sequence::from_stored(column(&row, "first_sequence")?),
        last_sequence: Sequence::from_stored(column(&row, "last_sequence")?),
        conversation_last_sequence: Sequence::from_stored(column(&row, "conversation_last_sequence")?),
        replayed: false,
    };
    Ok(Some(IdempotencyRecord {
        payload_hash,
        outcome,
    }))
}

async fn call_states(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    ids: &[String],
) -> Result<HashMap<String, KnownCall>, StoreError> {
    let statement = tx
        .prepare_cached(
            "SELECT call_id, result_sequence IS NOT NULL AS answered, call_sequence FROM tool_calls
             WHERE tenant_id = $1 AND conversation_id = $2 AND call_id = ANY($3)",
        )
        .await?;
    let rows = tx.query(&statement, &[&tenant, &conversation, &ids]).await?;
    rows.iter()
        .map(|row| {
            let state = match column(row, "answered")? {
                true => CallState::Answered,
                false => CallState::Open,
            };
            let sequence = Sequence::from_stored(column(row, "call_sequence")?);
            Ok((column(row, "call_id")?, KnownCall { state, sequence }))
        })
        .collect()
}

async fn insert_messages(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    batch: &AppendBatch,
    write: &WritePlan,
    placement: Placement,
) -> Result<(), StoreError> {
    let rows = MessageRows {
        tenant,
        conversation,
        sequences: (0..batch.messages.len())
            .map(|i| write.sequence_of(i).as_i64())
            .collect(),
        columns: Columns::of(batch),
        call_sequences: write
            .call_sequences
            .iter()
            .map(|s| s.map(Sequence::as_i64))
            .collect(),
        placement,
        search: insert::search_column(tenant, conversation, batch),
    };
    let prepared = MessageRows::prepare(tx, rows.sequences.len()).await?;
    rows.execute(tx, &prepared).await
}

async fn record_tool_calls(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    write: &WritePlan,
) -> Result<(), StoreError> {
    let effects = &write.effects;
    let sequence_of = |index: usize| write.sequence_of(index).as_i64();
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
                 SELECT c.tenant_id, c.conversation_id, u.*
                 FROM conversations c, unnest($3::text[], $4::bigint[], $5::bigint[]) AS u
                 WHERE c.tenant_id = $1 AND c.conversation_id = $2",
            )
            .await?;
        tx.execute(
            &statement,
            &[&tenant, &conversation, &ids, &call_sequences, &results],
        )
        .await?;
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
            .await?;
        tx.execute(
            &statement,
            &[&tenant, &conversation, &earlier_ids, &earlier_results],
        )
        .await?;
    }
    Ok(())
}
