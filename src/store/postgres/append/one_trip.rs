//! An append of up to 16 messages that needs no stored state but its idempotency record, in
//! one round trip on plain PostgreSQL: `BEGIN` with the call's limits, one statement that
//! claims and writes (the conversation's upsert, the message rows, the change row and the key's
//! record as data-modifying CTEs) and `COMMIT`, pipelined. A key stored before fails the statement and
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
    domain::{AppendOutcome, CountedBatch, Sequence, TenantId, append::reads_the_log, changes::ChangeKind},
    runtime::deadline::Deadline,
    store::{
        StoreError,
        postgres::rows::{Columns, column},
    },
};

/// The type of each value a message row carries in [`statement`]'s `VALUES`: its 16
/// [`Columns`], its offset and its newest earlier turn start within the batch, and its search
/// document (as `tsvector` text). Each is cast: a parameter takes no type from a target column
/// in a `SELECT`.
const ROW_TYPES: [&str; 19] = [
    "text", "text", "text", "jsonb", "text", "jsonb", "jsonb", "boolean", "boolean", "jsonb", "text",
    "integer", "integer", "integer", "json", "integer", "bigint", "bigint", "text",
];

/// What a batch brings to the statement beyond its rows.
#[derive(Debug, Clone, Copy)]
struct Shape {
    rows: usize,
    /// An idempotency key: its record is written.
    keyed: bool,
    /// An expected last sequence: [`guarded`] claims the sequences only when it holds.
    guarded: bool,
}

impl Shape {
    fn of(batch: &CountedBatch) -> Self {
        Shape {
            rows: batch.messages.len(),
            keyed: batch.idempotency.is_some(),
            guarded: batch.expected_last_sequence.is_some(),
        }
    }

    /// Its place in [`STATEMENTS`].
    fn index(self) -> Option<usize> {
        let rows = self
            .rows
            .checked_sub(1)
            .filter(|&r| r < insert::ROWS_PER_INSERT)?;
        Some(rows * 4 + usize::from(self.keyed) * 2 + usize::from(self.guarded))
    }
}

/// [`statement`]'s text for every [`Shape`], in [`Shape::index`] order.
static STATEMENTS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut texts = Vec::new();
    for rows in 1..=insert::ROWS_PER_INSERT {
        for keyed in [false, true] {
            for guarded in [false, true] {
                texts.push(statement(Shape { rows, keyed, guarded }));
            }
        }
    }
    texts
});

/// [`ALLOCATE`] under a sequence guard (the parameter `$guard`): it proposes the row only when
/// the guard is 0 or the conversation exists, and updates it only when its last sequence is
/// the guard (`DO UPDATE`'s `WHERE` sees the row's newest version, locked). Otherwise it claims
/// nothing and returns no row. As a `SELECT`, the row's parameters take their types from casts.
fn guarded(guard: usize) -> String {
    let swaps = [
        (
            "VALUES ($1, $2, $3, $4, $5, $6, $7, statement_timestamp(),",
            "SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::text, $6::bigint, $7::bigint,
                 statement_timestamp(),"
                .to_owned(),
        ),
        (
            "$8, $9, $10, $11, $12,
                 pg_current_xact_id()::text::bigint, 1)",
            format!(
                "$8::bigint, $9::bigint, $10::bigint, $11::bigint, $12::bigint,
                 pg_current_xact_id()::text::bigint, 1
             WHERE ${guard}::bigint = 0 OR EXISTS (SELECT 1 FROM conversations
                 WHERE tenant_id = $1 AND conversation_id = $2)"
            ),
        ),
        (
            "WHERE conversations.expire_time IS NULL OR conversations.expire_time > EXCLUDED.updated_at",
            format!(
                "WHERE (conversations.expire_time IS NULL OR conversations.expire_time > EXCLUDED.updated_at)
             AND conversations.last_sequence = ${guard}::bigint"
            ),
        ),
    ];
    let mut text = ALLOCATE.to_owned();
    for (from, to) in swaps {
        debug_assert!(text.contains(from), "ALLOCATE has `{from}`");
        text = text.replacen(from, &to, 1);
    }
    text
}

/// [`ALLOCATE`] (`$1..=$12`; [`guarded`] for a guarded batch), then the message rows from what
/// it returned (from `$13`, [`ROW_TYPES`] for each), the change row (its kind next), for a
/// keyed batch the record under its idempotency key (then the key and the payload's hash), and
/// the guard last. The log positions are [`super::placement::Placement::after`]'s arithmetic,
/// with the log's end before the batch `token_offset - $6`; message `k` (from 1) of the `$3`
/// gets `last_sequence - $3 + k`. A key stored before breaks the record's primary key: the
/// statement fails, the pipelined `COMMIT` ends the transaction with nothing written, and the
/// append takes the path that reads the record (a replay, or a key reused for other messages).
fn statement(shape: Shape) -> String {
    let Shape {
        rows,
        keyed,
        guarded: guard,
    } = shape;
    let mut values = Vec::with_capacity(rows);
    let mut next = 13;
    for k in 1..=rows {
        let row: Vec<String> = ROW_TYPES
            .iter()
            .map(|t| {
                next += 1;
                format!("${}::{t}", next - 1)
            })
            .collect();
        values.push(format!("({k}, {})", row.join(", ")));
    }
    let kind = next;
    let allocate = match guard {
        true => guarded(kind + 1 + 2 * usize::from(keyed)),
        false => ALLOCATE.to_owned(),
    };
    let record = match keyed {
        false => String::new(),
        true => format!(
            ",
         k AS (INSERT INTO idempotency_keys (tenant_id, conversation_id, idempotency_key, payload_hash,
                 first_sequence, last_sequence, conversation_last_sequence)
             SELECT $1, $2, ${}::text, ${}::bytea, a.last_sequence - $3 + 1, a.last_sequence,
                 a.last_sequence
             FROM a)",
            kind + 1,
            kind + 2
        ),
    };
    format!(
        "WITH a AS ({allocate}),
         m AS (INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name,
                 tool_calls, tool_call_id, attachments, metadata, exclude_from_context, pinned, error,
                 response_id, tokens_o200k, tokens_cl100k, tokens_approx, native, loaded_bytes,
                 call_sequence, token_offset, previous_turn_offset, search, created_at)
             SELECT $1, $2, a.last_sequence - $3 + v.k, v.role, v.content, v.name, v.tool_calls,
                 v.tool_call_id, v.attachments, v.metadata, v.excluded, v.pinned, v.error,
                 v.response_id, v.o200k, v.cl100k, v.approx, v.native, v.loaded_bytes, NULL,
                 a.token_offset - $6 + v.token_offset,
                 coalesce(a.token_offset - $6 + v.previous_turn, a.turn_offset_before),
                 v.search::tsvector, now()
             FROM a, (VALUES {}) AS v(k, role, content, name, tool_calls, tool_call_id,
                 attachments, metadata, excluded, pinned, error, response_id, o200k, cl100k, approx,
                 native, loaded_bytes, token_offset, previous_turn, search)),
         c AS (INSERT INTO changes (tenant_id, position, conversation_id, change, kind,
                 first_sequence, last_sequence, created_at)
             SELECT $1, a.change_position, $2, a.changes, ${kind}::smallint, a.last_sequence - $3 + 1,
                 a.last_sequence, statement_timestamp()
             FROM a){record}
         SELECT last_sequence FROM a",
        values.join(",\n                 ")
    )
}

/// Whether `batch` may take [`append`]: at most [`insert::ROWS_PER_INSERT`] messages, and no
/// state to read but its key's record and its guard ([`reads_the_log`]).
pub(super) fn fits(batch: &CountedBatch) -> bool {
    Shape::of(batch).index().is_some() && !reads_the_log(batch)
}

/// Appends a batch that [`fits`] in one round trip; `None` when the statement wrote nothing
/// for the caller's key or guard to explain (its key was stored before, or its guard did not
/// hold, or held not for an expired conversation): then the connection is back in the pool
/// idle, and the path that reads the state decides. The commit is claimed before anything is
/// sent: from then on the call answers with what the database did, and the statement runs
/// under the call's deadline (`SET LOCAL statement_timeout`), so a write that outlived its
/// caller fails instead of committing late.
pub(super) async fn append(
    pool: &Pool,
    tenant: &TenantId,
    batch: &CountedBatch,
    deadline: Option<&Deadline>,
) -> Result<Option<AppendOutcome>, StoreError> {
    let allocation = Allocation::of(tenant, batch);
    let begin = crate::store::postgres::writes::begin_text(deadline)?;
    let shape = Shape::of(batch);
    let text = (shape.index())
        .and_then(|index| STATEMENTS.get(index))
        .ok_or_else(|| StoreError::internal("a one-trip append of more rows than it has shapes for"))?;
    let client = pool.get().await?;
    let statement = client.prepare_cached(text).await?;
    let (t, c) = (tenant.as_str(), batch.conversation_id.as_str());
    let columns = Columns::of(batch);
    let search = insert::search_column(t, c, batch);
    let kind = ChangeKind::Appended.code();
    let key = (batch.idempotency.as_ref()).map(|k| (k.key.as_str(), &k.payload_hash.0[..]));
    let guard = batch.expected_last_sequence.map(Sequence::as_i64);
    let mut params: Vec<&(dyn ToSql + Sync)> = allocation.params().to_vec();
    let relative = &allocation.relative;
    for (i, document) in search.iter().enumerate() {
        params.extend(columns.row(i));
        params.push(&relative.offsets[i]);
        params.push(&relative.previous_turns[i]);
        params.push(document);
    }
    params.push(&kind);
    if let Some((key, hash)) = &key {
        params.push(key);
        params.push(hash);
    }
    if let Some(guard) = &guard {
        params.push(guard);
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
        (Ok(()), Ok(Some(row)), Ok(())) => row,
        // An expired conversation, or a guard that did not hold (then the other path tells).
        (Ok(()), Ok(None), Ok(())) if shape.guarded => return Ok(None),
        (Ok(()), Ok(None), Ok(())) => return Err(StoreError::Expired),
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
    let last = column::<i64>(&row, "last_sequence")?;
    Ok(Some(AppendOutcome::stored(
        Sequence::from_stored(last - allocation.count),
        batch.messages.len(),
    )))
}

/// Whether `error` is the idempotency record's primary key refusing a key stored before.
fn key_taken(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| {
        *db.code() == SqlState::UNIQUE_VIOLATION && db.constraint() == Some("idempotency_keys_pkey")
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{ALLOCATE, ROW_TYPES, STATEMENTS, Shape, guarded, statement};

    /// Every shape numbers its parameters `$1..=$n` without a hole, as many as it is given.
    #[test]
    fn each_shape_numbers_its_parameters_without_a_hole() {
        for rows in [1, 2, 16] {
            for (keyed, guarded) in [(false, false), (true, false), (false, true), (true, true)] {
                let shape = Shape { rows, keyed, guarded };
                let text = statement(shape);
                assert_eq!(STATEMENTS[shape.index().unwrap()], text);
                let numbers: BTreeSet<usize> = text
                    .split('$')
                    .skip(1)
                    .filter_map(|after| {
                        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
                        digits.parse().ok()
                    })
                    .collect();
                let expected =
                    12 + rows * ROW_TYPES.len() + 1 + 2 * usize::from(keyed) + usize::from(guarded);
                assert_eq!(numbers, (1..=expected).collect(), "{shape:?}");
            }
        }
        assert_eq!(
            Shape {
                rows: 17,
                keyed: false,
                guarded: false
            }
            .index(),
            None
        );
        assert_eq!(
            Shape {
                rows: 0,
                keyed: true,
                guarded: false
            }
            .index(),
            None
        );
    }

    /// The guard is in all three places of the allocation: the row proposed only for a new
    /// conversation at 0 or an existing one, and updated only at the guard.
    #[test]
    fn the_guarded_allocation_checks_the_guard_where_it_proposes_and_updates() {
        let text = guarded(40);
        assert!(!text.contains("VALUES"), "{text}");
        assert!(text.contains("WHERE $40::bigint = 0 OR EXISTS"), "{text}");
        assert!(
            text.contains("AND conversations.last_sequence = $40::bigint"),
            "{text}"
        );
        assert_eq!(
            text.matches("RETURNING").count(),
            ALLOCATE.matches("RETURNING").count()
        );
    }
}
