//! A one-message append that needs no stored state but its idempotency record, in one round
//! trip on plain PostgreSQL: `BEGIN` with the call's limits, one statement that claims and
//! writes (the conversation's upsert, the message row, the change row and the key's record as
//! data-modifying CTEs) and `COMMIT`, pipelined. A key stored before fails the statement and
//! the append takes [`super::drive`]'s path, which reads the record.
//! PostgreSQL's CPU per lone append falls by about a fifth against the two round trips of
//! [`super::drive`]'s path, and so does the append's latency (docs/benchmarks.md, "Append at
//! the limit"). Citus cannot run data-modifying CTEs on one shard, so there every append takes
//! the two round trips.

use std::sync::LazyLock;

use deadpool_postgres::{Object, Pool};
use tokio_postgres::{error::SqlState, types::ToSql};

use super::{ALLOCATE, Allocation, insert};
use crate::{
    domain::{
        AppendOutcome, CountedBatch, Sequence, TenantId, append::needs_state_beyond_key, changes::ChangeKind,
    },
    runtime::deadline::Deadline,
    store::{
        StoreError,
        postgres::rows::{Columns, column},
    },
};

/// [`ALLOCATE`] (`$1..=$12`), then the message row from what it returned (`$13..=$28` its
/// [`Columns`], `$29` its offset and `$30` its newest earlier turn start within the batch,
/// `$31` its search document) and the change row (`$32` its kind). The parameters of the
/// `SELECT`s are cast: they take no type from a target column there. The log positions are
/// [`super::placement::Placement::after`]'s arithmetic, with the log's end before the batch
/// `token_offset - $6`.
static PLAIN: LazyLock<String> = LazyLock::new(|| statement(""));

/// [`PLAIN`], and the record under the batch's idempotency key (`$33` the key, `$34` the
/// payload's hash). A key stored before breaks the primary key: the statement fails, the
/// pipelined `COMMIT` ends the transaction with nothing written, and the append takes the path
/// that reads the record (a replay, or a key reused for other messages).
static KEYED: LazyLock<String> = LazyLock::new(|| {
    statement(
        ",
         k AS (INSERT INTO idempotency_keys (tenant_id, conversation_id, idempotency_key, payload_hash,
                 first_sequence, last_sequence, conversation_last_sequence)
             SELECT $1, $2, $33::text, $34::bytea, a.last_sequence, a.last_sequence, a.last_sequence
             FROM a)",
    )
});

/// The one statement, with `more` data-modifying CTEs after the change row.
fn statement(more: &str) -> String {
    format!(
        "WITH a AS ({ALLOCATE}),
         m AS (INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name,
                 tool_calls, tool_call_id, attachments, metadata, exclude_from_context, pinned, error,
                 response_id, tokens_o200k, tokens_cl100k, tokens_approx, native, loaded_bytes,
                 call_sequence, token_offset, previous_turn_offset, search, created_at)
             SELECT $1, $2, a.last_sequence, $13::text, $14::text, $15::text, $16::jsonb, $17::text,
                 $18::jsonb, $19::jsonb, $20::boolean, $21::boolean, $22::jsonb, $23::text,
                 $24::integer, $25::integer, $26::integer, $27::json, $28::integer, NULL,
                 a.token_offset - $6 + $29::bigint,
                 coalesce(a.token_offset - $6 + $30::bigint, a.turn_offset_before),
                 $31::text::tsvector, now()
             FROM a),
         c AS (INSERT INTO changes (tenant_id, position, conversation_id, change, kind,
                 first_sequence, last_sequence, created_at)
             SELECT $1, a.change_position, $2, a.changes, $32::smallint, a.last_sequence,
                 a.last_sequence, statement_timestamp()
             FROM a){more}
         SELECT last_sequence FROM a"
    )
}

/// Whether `batch` may take [`append`]: one message, and nothing [`needs_state_beyond_key`]
/// reads.
pub(super) fn fits(batch: &CountedBatch) -> bool {
    batch.messages.len() == 1 && !needs_state_beyond_key(batch)
}

/// Appends a batch that [`fits`] in one round trip; `None` when its idempotency key was stored
/// before (nothing was written, and the connection is back in the pool). The commit is claimed
/// before anything is sent: from then on the call answers with what the database did, and the
/// statement runs under the call's deadline (`SET LOCAL statement_timeout`), so a write that
/// outlived its caller fails instead of committing late.
pub(super) async fn append(
    pool: &Pool,
    tenant: &TenantId,
    batch: &CountedBatch,
    deadline: Option<&Deadline>,
) -> Result<Option<AppendOutcome>, StoreError> {
    let allocation = Allocation::of(tenant, batch);
    let begin = crate::store::postgres::writes::begin_text(deadline)?;
    let client = pool.get().await?;
    let keyed = batch.idempotency.as_ref();
    let statement = match keyed {
        Some(_) => client.prepare_cached(&KEYED).await?,
        None => client.prepare_cached(&PLAIN).await?,
    };
    let (t, c) = (tenant.as_str(), batch.conversation_id.as_str());
    let columns = Columns::of(batch);
    let search = insert::search_column(t, c, batch);
    let kind = ChangeKind::Appended.code();
    let key = keyed.map(|k| (k.key.as_str(), &k.payload_hash.0[..]));
    let mut params: Vec<&(dyn ToSql + Sync)> = allocation.params().to_vec();
    params.extend(columns.row(0));
    params.push(&allocation.relative.offsets[0]);
    params.push(&allocation.relative.previous_turns[0]);
    params.push(&search[0]);
    params.push(&kind);
    if let Some((key, hash)) = &key {
        params.push(key);
        params.push(hash);
    }
    crate::store::claim_commit(deadline)?;
    // All three are sent before any answer is read; each is awaited, so that a statement
    // refused for its key leaves the connection idle (COMMIT answered) and reusable.
    let sent = tokio::join!(
        client.batch_execute(&begin),
        client.query_opt(&statement, &params),
        client.batch_execute("COMMIT")
    );
    let row = match sent {
        (Ok(()), Ok(row), Ok(())) => row.ok_or(StoreError::Expired)?,
        (Ok(()), Err(error), Ok(())) if key_taken(&error) => return Ok(None),
        (began, row, committed) => {
            // Whatever the connection's transaction came to, it is not pooled again.
            drop(Object::take(client));
            let error = began.err().or(row.err()).or(committed.err());
            return Err(error.map_or_else(
                || StoreError::internal("append failed without an error"),
                Into::into,
            ));
        }
    };
    let last = Sequence::from_stored(column::<i64>(&row, "last_sequence")?);
    Ok(Some(AppendOutcome {
        first_sequence: last,
        last_sequence: last,
        conversation_last_sequence: last,
        replayed: false,
    }))
}

/// Whether `error` is the idempotency record's primary key refusing a key stored before.
fn key_taken(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| {
        *db.code() == SqlState::UNIQUE_VIOLATION && db.constraint() == Some("idempotency_keys_pkey")
    })
}
