//! The change feed on PostgreSQL (migration 19, docs/design.md "Change feed"): each write
//! records its change in its own transaction ([`record`]), and watchers read the settled ones
//! ([`read`]): positions below the oldest transaction still running.

use std::time::SystemTime;

use deadpool_postgres::{GenericClient, Pool};
use tokio_postgres::Row;

use super::{citus::Citus, errors::corrupt, rows::column};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId,
        changes::{Change, ChangeKind, ChangePage, ChangeQuery, Cursor, NewChange, micros},
    },
    store::StoreError,
};

/// Counts a change of a conversation whose row exists, and gives its position and number: the
/// statement locks the row (or has locked it already in this transaction), so the numbers
/// follow commit order and positions never go down.
pub(super) const COUNT: &str = "UPDATE conversations
     SET change_position = greatest(pg_current_xact_id()::text::bigint, change_position),
         changes = changes + 1
     WHERE tenant_id = $1 AND conversation_id = $2
     RETURNING change_position, changes";

/// Records one change with its position and number given (`$3`, `$4`): the append's, whose
/// claim counted it, and a deleted conversation's, whose row is gone.
pub(super) const INSERT: &str = "INSERT INTO changes (tenant_id, position, conversation_id, change,
         kind, first_sequence, last_sequence, created_at)
     VALUES ($1, $3, $2, $4, $5, $6, $7, statement_timestamp())";

/// Records a change ordered by its own transaction only (`$3` its kind, no sequences): a
/// working-memory write, which does not take the conversation's row lock (see
/// `working_memory::store_memory`). The position is the transaction's id, evaluated in VALUES
/// (on Citus, on the coordinator); the number is 0.
pub(super) const INSERT_AT_TRANSACTION: &str =
    "INSERT INTO changes (tenant_id, position, conversation_id, change,
         kind, first_sequence, last_sequence, created_at)
     VALUES ($1, pg_current_xact_id()::text::bigint, $2, 0, $3, 0, 0, statement_timestamp())";

/// Records `change` of the conversation in the open transaction `tx`, which holds the
/// conversation's row lock already (or takes it here, after what it locked before).
pub(super) async fn record<C: GenericClient + Sync>(
    tx: &C,
    tenant: &str,
    conversation: &str,
    change: NewChange,
) -> Result<(), StoreError> {
    let counted = count(tx, tenant, conversation).await?;
    insert(tx, tenant, conversation, counted, change).await
}

/// Counts a change of the conversation in `tx` and locks its row: a write that would otherwise
/// take a weaker lock first (a `FOR SHARE`) calls this before, so it never upgrades a lock
/// that a redaction or rewind waits behind. Its position and number, for [`insert`].
pub(super) async fn count<C: GenericClient + Sync>(
    tx: &C,
    tenant: &str,
    conversation: &str,
) -> Result<(i64, i64), StoreError> {
    let count = tx.prepare_cached(COUNT).await?;
    let counted = tx
        .query_opt(&count, &[&tenant, &conversation])
        .await?
        .ok_or(StoreError::NotFound)?;
    Ok((column(&counted, "change_position")?, column(&counted, "changes")?))
}

/// Inserts the change [`count`] counted.
pub(super) async fn insert<C: GenericClient + Sync>(
    tx: &C,
    tenant: &str,
    conversation: &str,
    (position, number): (i64, i64),
    change: NewChange,
) -> Result<(), StoreError> {
    let (first, last) = (change.first_sequence.as_i64(), change.last_sequence.as_i64());
    let insert = tx.prepare_cached(INSERT).await?;
    let kind = change.kind.code();
    tx.execute(
        &insert,
        &[&tenant, &conversation, &position, &number, &kind, &first, &last],
    )
    .await?;
    Ok(())
}

/// Records the change of a conversation whose row the transaction deleted, returning its
/// `change_position` and `changes` (see [`DELETED_COLUMNS`]).
pub(super) async fn record_removal<C: GenericClient + Sync>(
    tx: &C,
    tenant: &str,
    conversation: &str,
    kind: ChangeKind,
    removed: &Row,
) -> Result<(), StoreError> {
    let position: i64 = column(removed, "change_position")?;
    let number: i64 = column(removed, "changes")?;
    // A statement of its own: on Citus a RETURNING list is evaluated on the shard, and the
    // position must be the coordinator's transaction.
    let xid: i64 = column(&tx.query_one(TRANSACTION, &[]).await?, "xid")?;
    let zero = 0i64;
    tx.execute(
        INSERT,
        &[
            &tenant,
            &conversation,
            &position.max(xid),
            &(number + 1),
            &kind.code(),
            &zero,
            &zero,
        ],
    )
    .await?;
    Ok(())
}

/// What a `DELETE FROM conversations ... RETURNING` gives [`record_removal`].
pub(super) const DELETED_COLUMNS: &str = "change_position, changes";

/// The transaction's id, where the session runs (the coordinator, on Citus).
const TRANSACTION: &str = "SELECT pg_current_xact_id()::text::bigint AS xid";

/// The position below which every transaction has ended and every row it wrote is visible:
/// changes there are settled. On Citus, also below every two-phase commit the coordinator still
/// holds in doubt (see [`super::citus`]): such a transaction has ended on the coordinator before
/// its shards' rows are visible.
async fn settled<C: GenericClient + Sync>(client: &C, citus: &Citus) -> Result<Settled, StoreError> {
    if !citus.is(client).await? {
        let row = client
            .query_one(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin",
                &[],
            )
            .await?;
        return Ok(Settled {
            position: column(&row, "xmin")?,
            held: false,
        });
    }
    // A record's `xmin` is its transaction's id (32 bits): made whole against the snapshot's
    // `xmax`, above every transaction it can see.
    let row = client
        .query_one(
            "SELECT least(s.xmin, d.held) AS xmin, d.held IS NOT NULL AS held
             FROM (SELECT pg_snapshot_xmin(snapshot)::text::bigint AS xmin,
                          pg_snapshot_xmax(snapshot)::text::bigint AS xmax
                   FROM pg_current_snapshot() AS snapshot) s,
             LATERAL (SELECT s.xmax - max(((s.xmax & 4294967295) - t.xmin::text::bigint + 4294967296)
                                          % 4294967296) AS held
                      FROM pg_catalog.pg_dist_transaction t) d",
            &[],
        )
        .await?;
    Ok(Settled {
        position: column(&row, "xmin")?,
        held: column(&row, "held")?,
    })
}

/// Where changes are settled up to.
struct Settled {
    position: i64,
    /// Citus two-phase commits hold it back.
    held: bool,
}

/// A cursor before every change not yet settled.
pub(super) async fn horizon(pool: &Pool, citus: &Citus) -> Result<Cursor, StoreError> {
    let client = pool.get().await?;
    Ok(Cursor::before(
        settled_now(&client, citus).await?,
        SystemTime::now(),
    ))
}

/// [`settled`], after Citus has forgotten the two-phase commits whose shards have committed
/// (most of those it holds), so that the feed waits for a fork only as long as its commit takes.
async fn settled_now<C: GenericClient + Sync>(client: &C, citus: &Citus) -> Result<i64, StoreError> {
    let first = settled(client, citus).await?;
    if first.held && citus.recover(client).await? {
        return Ok(settled(client, citus).await?.position);
    }
    Ok(first.position)
}

const COLUMNS: &str = "position, conversation_id, change, kind, first_sequence, last_sequence, created_at";

/// The settled changes after `query.after`. The horizon is read first, in its own statement:
/// on Citus it is the coordinator's, whose transactions end after their shards' writes.
pub(super) async fn read(
    pool: &Pool,
    citus: &Citus,
    tenant: &TenantId,
    query: &ChangeQuery,
) -> Result<ChangePage, StoreError> {
    let client = pool.get().await?;
    let horizon = settled_now(&client, citus).await?;
    let after = &query.after;
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let t = tenant.as_str();
    let rows = match &query.conversation {
        None => {
            let sql = format!(
                "SELECT {COLUMNS} FROM changes
                 WHERE tenant_id = $1 AND (position, conversation_id, change) > ($2, $3, $4) AND position < $5
                 ORDER BY position, conversation_id, change LIMIT $6"
            );
            let statement = client.prepare_cached(&sql).await?;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
                &t,
                &after.position,
                &after.conversation,
                &after.number,
                &horizon,
                &limit,
            ];
            client.query(&statement, &params).await?
        }
        Some(conversation) => {
            let sql = format!(
                "SELECT {COLUMNS} FROM changes
                 WHERE tenant_id = $1 AND conversation_id = $7
                   AND (position, conversation_id, change) > ($2, $3, $4) AND position < $5
                 ORDER BY position, conversation_id, change LIMIT $6"
            );
            let statement = client.prepare_cached(&sql).await?;
            let c = conversation.as_str();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
                &t,
                &after.position,
                &after.conversation,
                &after.number,
                &horizon,
                &limit,
                &c,
            ];
            client.query(&statement, &params).await?
        }
    };
    let changes = rows.iter().map(change).collect::<Result<Vec<_>, _>>()?;
    let next = match changes.last() {
        Some(last) if changes.len() == query.limit => last.cursor.clone(),
        _ => Cursor::before(horizon, SystemTime::now()).max(after.clone()),
    };
    Ok(ChangePage {
        changes,
        next: Some(next),
    })
}

fn change(row: &Row) -> Result<Change, StoreError> {
    let time: SystemTime = column(row, "created_at")?;
    let kind = ChangeKind::from_code(column(row, "kind")?).ok_or_else(|| corrupt("change kind"))?;
    let conversation: String = column(row, "conversation_id")?;
    ConversationId::parse(conversation.clone()).map_err(|_| corrupt("change's conversation id"))?;
    Ok(Change {
        cursor: Cursor {
            position: column(row, "position")?,
            conversation,
            number: column(row, "change")?,
            time_micros: micros(time),
        },
        kind,
        first_sequence: Sequence::from_stored(column(row, "first_sequence")?),
        last_sequence: Sequence::from_stored(column(row, "last_sequence")?),
        time,
    })
}

/// The cursor just before the tenant's oldest change made at or after `since`.
pub(super) async fn oldest(
    pool: &Pool,
    tenant: &TenantId,
    since: SystemTime,
) -> Result<Option<Cursor>, StoreError> {
    let client = pool.get().await?;
    let sql = format!(
        "SELECT {COLUMNS} FROM changes WHERE tenant_id = $1 AND created_at >= $2
         ORDER BY position, conversation_id, change LIMIT 1"
    );
    let row = client.query_opt(&sql, &[&tenant.as_str(), &since]).await?;
    row.map(|row| {
        let change = change(&row)?;
        Ok(Cursor {
            number: change.cursor.number - 1,
            ..change.cursor
        })
    })
    .transpose()
}

/// Deletes up to `batch` changes made before `before`; returns how many. The rows are chosen
/// first and deleted by key, so each statement is bounded.
pub(super) async fn sweep(
    pool: &Pool,
    citus: &Citus,
    before: SystemTime,
    batch: usize,
) -> Result<u64, StoreError> {
    let client = pool.get().await?;
    let limit = i64::try_from(batch).unwrap_or(i64::MAX);
    // Only settled changes: one a transaction still running holds back is kept until it can be
    // delivered (the horizon is read first, on Citus the coordinator's).
    let horizon = settled(&client, citus).await?.position;
    let old = client
        .query(
            "SELECT tenant_id, position, conversation_id, change FROM changes
             WHERE created_at < $1 AND position < $3 LIMIT $2",
            &[&before, &limit, &horizon],
        )
        .await?;
    let mut swept = 0;
    for row in &old {
        let key: (String, i64, String, i64) = (
            column(row, "tenant_id")?,
            column(row, "position")?,
            column(row, "conversation_id")?,
            column(row, "change")?,
        );
        swept += client
            .execute(
                "DELETE FROM changes WHERE tenant_id = $1 AND position = $2 AND conversation_id = $3 AND change = $4",
                &[&key.0, &key.1, &key.2, &key.3],
            )
            .await?;
    }
    Ok(swept)
}
