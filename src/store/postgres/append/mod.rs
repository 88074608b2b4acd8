//! AppendMessage on PostgreSQL: the store's side of the append ([`AppendTx`]), which
//! [`drive`] runs. The claim is one statement ([`ALLOCATE`]) sent with `BEGIN`; a batch that
//! needs no state goes out as its rows with `COMMIT`: two round trips in all. One message that
//! needs no state but its idempotency record takes one round trip on plain PostgreSQL
//! ([`one_trip`]).

use std::collections::HashMap;

use deadpool_postgres::{GenericClient, Object, Pool};
use tokio_postgres::{Statement, types::ToSql};

use super::{
    errors::corrupt,
    rows::{Columns, column},
};
mod group;
mod insert;
mod one_trip;
mod placement;

pub(super) use group::GroupCommit;

use insert::MessageRows;
use placement::Placement;

use crate::{
    domain::{
        AppendOutcome, CallState, CountedBatch, IdempotencyKey, IdempotencyRecord, KnownCall, PayloadHash,
        Sequence, TenantId, WritePlan,
        append::{AppendTx, StoredState, drive},
        changes::ChangeKind,
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
/// `expire_time` is not updated, and no row comes back ([`StoreError::Expired`]). It also counts
/// the append's change (see [`super::changes`]): the position and number come back for the
/// change row the write inserts (a replay rolls both back).
const ALLOCATE: &str = "INSERT INTO conversations
             (tenant_id, conversation_id, last_sequence, last_user_sequence, last_response_id,
              token_offset, turn_offset, updated_at, listing,
              usage_input, usage_output, usage_cached, usage_reasoning, incarnation,
              change_position, changes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, statement_timestamp(),
                 jsonb_build_object('t', $1::text, 's', 'active', 'l', '{}'::jsonb), $8, $9, $10, $11, $12,
                 pg_current_xact_id()::text::bigint, 1)
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
             usage_reasoning = least(conversations.usage_reasoning::numeric + EXCLUDED.usage_reasoning, 9223372036854775807),
             change_position = greatest(EXCLUDED.change_position, conversations.change_position),
             changes = conversations.changes + 1
         WHERE conversations.expire_time IS NULL OR conversations.expire_time > EXCLUDED.updated_at
         RETURNING last_sequence, token_offset, turn_offset_before, change_position, changes";

/// What [`ALLOCATE`] is given for a batch.
struct Allocation<'a> {
    tenant: &'a str,
    conversation: &'a str,
    count: i64,
    user_offset: Option<i64>,
    response_id: Option<&'a str>,
    /// The batch's placement relative to its start.
    relative: Placement,
    /// The batch's usage: input, output, cached input, reasoning.
    usage: [i64; 4],
    /// The row's `incarnation`, should the append create it.
    incarnation: i64,
}

impl<'a> Allocation<'a> {
    fn of(tenant: &'a TenantId, batch: &'a CountedBatch) -> Self {
        let facts = &batch.facts;
        let usage = facts.usage;
        Allocation {
            tenant: tenant.as_str(),
            conversation: batch.conversation_id.as_str(),
            count: batch.messages.len() as i64,
            user_offset: facts.newest_user.map(|p| i64::try_from(p).unwrap_or(i64::MAX)),
            response_id: facts.newest_response_id.as_deref(),
            relative: Placement::of(batch),
            usage: [
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens,
                usage.reasoning_tokens,
            ]
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
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

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %batch.conversation_id, count = batch.messages.len()))]
pub(super) async fn append_messages(
    pool: &Pool,
    citus: &super::citus::Citus,
    tenant: &TenantId,
    batch: &CountedBatch,
    deadline: Option<&Deadline>,
) -> Result<AppendOutcome, StoreError> {
    // One round trip where it can; when the batch's key was stored before, the path below reads
    // the record, and replays or refuses.
    if one_trip::fits(batch)
        && !citus.is_in(pool).await?
        && let Some(outcome) = one_trip::append(pool, tenant, batch, deadline).await?
    {
        return Ok(outcome);
    }
    let tx = PostgresAppend {
        pool,
        tenant,
        conversation: batch.conversation_id.as_str(),
        deadline,
        client: None,
        ended: false,
        inserts: Vec::new(),
        placement: None,
        change: (0, 0),
        record: None,
    };
    drive(tx, batch).await
}

/// One append's transaction, opened by hand on a pooled connection (to pipeline it). Dropped
/// before it ended (the call was cancelled between round trips), it closes the connection,
/// which ends the transaction, instead of handing it back to the pool still open.
struct PostgresAppend<'a> {
    pool: &'a Pool,
    tenant: &'a TenantId,
    conversation: &'a str,
    deadline: Option<&'a Deadline>,
    /// The connection, once the claim took one.
    client: Option<Object>,
    /// The transaction ended (committed or rolled back): the connection may be reused.
    ended: bool,
    /// The batch's row INSERTs, prepared before `BEGIN`: a pipelined `COMMIT` can never
    /// overtake a statement still being prepared.
    inserts: Vec<Statement>,
    /// Where the batch's messages go in the log, from the claim.
    placement: Option<Placement>,
    /// The change's position and number, from the claim.
    change: (i64, i64),
    /// [`super::changes::INSERT`], prepared with the rows.
    record: Option<Statement>,
}

impl Drop for PostgresAppend<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !self.ended
        {
            drop(Object::take(client));
        }
    }
}

impl PostgresAppend<'_> {
    fn client(&self) -> Result<&Object, StoreError> {
        self.client
            .as_ref()
            .ok_or_else(|| StoreError::internal("append connection missing"))
    }
}

impl AppendTx for PostgresAppend<'_> {
    type Error = StoreError;

    /// `BEGIN` (with the call's limits) and [`ALLOCATE`], in one round trip.
    async fn claim(&mut self, batch: &CountedBatch) -> Result<Sequence, StoreError> {
        let allocation = Allocation::of(self.tenant, batch);
        let begin = super::writes::begin_text(self.deadline)?;
        let client = self.pool.get().await?;
        let allocate = client.prepare_cached(ALLOCATE).await?;
        self.inserts = MessageRows::prepare(&client, batch.messages.len()).await?;
        self.record = Some(client.prepare_cached(super::changes::INSERT).await?);
        let client = &*self.client.insert(client);
        let params = allocation.params();
        // try_join polls both at once: both are sent before either answer is read.
        let ((), row) = tokio::try_join!(client.batch_execute(&begin), client.query_opt(&allocate, &params))?;
        let row = row.ok_or(StoreError::Expired)?;
        let last = column::<i64>(&row, "last_sequence")? - allocation.count;
        let base = column::<i64>(&row, "token_offset")? - allocation.relative.total;
        let turn_before = column(&row, "turn_offset_before")?;
        self.placement = Some(allocation.relative.after(base, turn_before));
        self.change = (column(&row, "change_position")?, column(&row, "changes")?);
        Ok(Sequence::from_stored(last))
    }

    async fn read_state(
        &mut self,
        key: Option<&IdempotencyKey>,
        call_ids: &[String],
        time_of: Option<Sequence>,
    ) -> Result<StoredState, StoreError> {
        let client = self.client()?;
        let (t, c) = (self.tenant.as_str(), self.conversation);
        let idempotency = match key {
            Some(key) => idempotency_record(client, t, c, key.as_str()).await?,
            None => None,
        };
        let known_calls = match call_ids.is_empty() {
            true => HashMap::new(),
            false => call_states(client, t, c, call_ids).await?,
        };
        let last_time = match time_of {
            Some(sequence) => message_time(client, t, c, sequence).await?,
            None => None,
        };
        Ok(StoredState {
            idempotency,
            known_calls,
            last_time,
        })
    }

    /// The rows, then the calls and the idempotency record where the plan has them, then
    /// `COMMIT`; a plan with neither sends its rows with `COMMIT`, in one round trip.
    async fn write(&mut self, batch: &CountedBatch, plan: &WritePlan) -> Result<(), StoreError> {
        let placement = self
            .placement
            .take()
            .ok_or_else(|| StoreError::internal("append written before its claim"))?;
        let client = self.client()?;
        let (t, c) = (self.tenant.as_str(), self.conversation);
        let rows = MessageRows {
            tenant: t,
            conversation: c,
            sequences: (0..batch.messages.len())
                .map(|i| plan.sequence_of(i).as_i64())
                .collect(),
            columns: Columns::of(batch),
            call_sequences: plan
                .call_sequences
                .iter()
                .map(|s| s.map(Sequence::as_i64))
                .collect(),
            placement,
            search: insert::search_column(t, c, batch),
        };
        let record = self
            .record
            .as_ref()
            .ok_or_else(|| StoreError::internal("append written before its claim"))?;
        let (first, last) = (
            plan.sequence_of(0).as_i64(),
            plan.after.as_i64() + batch.messages.len() as i64,
        );
        let kind = ChangeKind::Appended.code();
        let (position, number) = &self.change;
        let change_params: [&(dyn ToSql + Sync); 7] = [&t, &c, position, number, &kind, &first, &last];
        let change = async { Ok::<_, StoreError>(client.execute(record, &change_params).await.map(drop)?) };
        let plain = plan.idempotency.is_none() && plan.effects == Default::default();
        if plain {
            // The rows and the change go out with COMMIT.
            crate::store::claim_commit(self.deadline)?;
            let commit = async { Ok(client.batch_execute("COMMIT").await?) };
            let ((), (), ()) = tokio::try_join!(rows.execute(client, &self.inserts), change, commit)?;
        } else {
            let ((), ()) = tokio::try_join!(rows.execute(client, &self.inserts), change)?;
            record_tool_calls(client, t, c, plan).await?;
            if let (Some(idempotency), Some(record)) = (&batch.idempotency, plan.idempotency) {
                insert_idempotency(client, t, c, &idempotency.key, record).await?;
            }
            crate::store::claim_commit(self.deadline)?;
            client.batch_execute("COMMIT").await?;
        }
        self.ended = true;
        Ok(())
    }

    /// A `ROLLBACK` after a `COMMIT` that already ended the transaction only draws a warning;
    /// if even that fails, the drop closes the connection.
    async fn roll_back(&mut self) {
        if let Some(client) = &self.client
            && !self.ended
            && client.batch_execute("ROLLBACK").await.is_ok()
        {
            self.ended = true;
        }
    }
}

async fn idempotency_record<C: GenericClient + Sync>(
    tx: &C,
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

async fn call_states<C: GenericClient + Sync>(
    tx: &C,
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

/// The time of the message at `sequence`: the caller's `occurred_at` (kept in the `native`
/// column, in microseconds), else `created_at`.
async fn message_time<C: GenericClient + Sync>(
    tx: &C,
    tenant: &str,
    conversation: &str,
    sequence: Sequence,
) -> Result<Option<std::time::SystemTime>, StoreError> {
    let statement = tx
        .prepare_cached(
            "SELECT coalesce((native->>'occurred_at')::bigint,
                             (extract(epoch FROM created_at) * 1000000)::bigint) AS micros
             FROM messages WHERE tenant_id = $1 AND conversation_id = $2 AND sequence = $3",
        )
        .await?;
    let row = tx
        .query_opt(&statement, &[&tenant, &conversation, &sequence.as_i64()])
        .await?;
    row.map(|row| column::<i64>(&row, "micros").map(crate::store::postgres::rows::from_micros))
        .transpose()
}

/// Keeps what the append returned under its idempotency key.
async fn insert_idempotency<C: GenericClient + Sync>(
    tx: &C,
    t: &str,
    c: &str,
    key: &IdempotencyKey,
    record: IdempotencyRecord,
) -> Result<(), StoreError> {
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
    Ok(())
}

async fn record_tool_calls<C: GenericClient + Sync>(
    tx: &C,
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
