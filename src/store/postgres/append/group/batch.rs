//! One batch of a group commit: its transaction, from the lock of its conversations to
//! `COMMIT` (see [`super`]).

use std::collections::{HashMap, HashSet};

use deadpool_postgres::{Object, Pool};

use super::{
    member::{Member, Verdict},
    records::{self, Keys, Records},
};
use crate::{
    domain::{
        CountedBatch, Sequence, WritePlan,
        append::{AppendPlan, AppendState, plan},
    },
    store::{
        StoreError,
        postgres::{
            append::{Allocation, insert::MessageRows, placement::Placement},
            rows::{Columns, column},
        },
    },
};

/// Locks the batch's conversations that no one else holds, and reads what their allocation
/// starts from. `$1` tenants, `$2` conversations.
const LOCK: &str = "SELECT c.tenant_id, c.conversation_id, c.last_sequence, c.token_offset, c.turn_offset,
        (c.expire_time IS NULL OR c.expire_time > statement_timestamp()) AS live,
        greatest(pg_current_xact_id()::text::bigint, c.change_position) AS change_position,
        c.changes + 1 AS change
    FROM unnest($1::text[], $2::text[]) AS u(tenant_id, conversation_id)
    JOIN conversations c ON c.tenant_id = u.tenant_id AND c.conversation_id = u.conversation_id
    FOR UPDATE OF c SKIP LOCKED";

/// The allocation of every member at once: the arithmetic of `ALLOCATE`'s `DO UPDATE`, one row
/// per member (`$1`.. are its [`Allocation::params`] as arrays, less the incarnation).
const UPDATE: &str = "UPDATE conversations c SET
        last_sequence = c.last_sequence + u.count,
        last_user_sequence = coalesce(c.last_sequence + u.user_offset, c.last_user_sequence),
        last_response_id = coalesce(u.response_id, c.last_response_id),
        token_offset = c.token_offset + u.total,
        turn_offset = coalesce(c.token_offset + u.last_turn, c.turn_offset),
        turn_offset_before = c.turn_offset,
        updated_at = greatest(c.updated_at, statement_timestamp()),
        usage_input = least(c.usage_input::numeric + u.input, 9223372036854775807),
        usage_output = least(c.usage_output::numeric + u.output, 9223372036854775807),
        usage_cached = least(c.usage_cached::numeric + u.cached, 9223372036854775807),
        usage_reasoning = least(c.usage_reasoning::numeric + u.reasoning, 9223372036854775807),
        change_position = greatest(pg_current_xact_id()::text::bigint, c.change_position),
        changes = c.changes + 1
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[],
                $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
         AS u(tenant_id, conversation_id, count, user_offset, response_id, total, last_turn,
              input, output, cached, reasoning)
    WHERE c.tenant_id = u.tenant_id AND c.conversation_id = u.conversation_id";

/// Every member's change (see `super::super::super::changes`), with the position and number
/// [`LOCK`] read and [`UPDATE`] wrote.
const CHANGES: &str = "INSERT INTO changes (tenant_id, position, conversation_id, change, kind,
        first_sequence, last_sequence, created_at)
    SELECT u.*, statement_timestamp()
    FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::smallint[], $6::bigint[], $7::bigint[]) AS u";

/// Why a batch's write did not take effect.
enum Unsent {
    /// The database refused a statement (or it was never sent): nothing of the batch committed.
    Refused,
    /// The connection failed: whether `COMMIT` took effect is unknown.
    Lost,
}

/// A member whose row the batch locked, with its plan and placement.
struct Planned {
    member: Member,
    write: WritePlan,
    placement: Placement,
    /// The change's position and number.
    change: (i64, i64),
}

/// Sends one batch, and says how many appends it wrote. Whatever fails before `COMMIT` could
/// take effect sends its members to the single path; a failure after is their answer.
pub(super) async fn commit(pool: &Pool, members: Vec<Member>) -> Option<usize> {
    let Ok(client) = pool.get().await else {
        members.into_iter().for_each(|m| m.answer(Verdict::Single));
        return None;
    };
    let mut open = OpenBatch {
        client: Some(client),
        ended: false,
    };
    let planned = match open.lock(members).await {
        Ok(planned) => planned,
        Err(members) => {
            members.into_iter().for_each(|m| m.answer(Verdict::Single));
            return None;
        }
    };
    if planned.is_empty() {
        open.roll_back().await;
        return None;
    }
    open.write(planned).await
}

/// The batch's transaction on its connection; dropped before it ended, it closes the
/// connection (which ends the transaction) instead of pooling it open.
struct OpenBatch {
    client: Option<Object>,
    ended: bool,
}

impl Drop for OpenBatch {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !self.ended
        {
            drop(Object::take(client));
        }
    }
}

impl OpenBatch {
    /// `BEGIN` under the earliest deadline and [`LOCK`], in one round trip; then each member
    /// that was locked and may be written is planned, and the others are sent to the single
    /// path. `Err` gives every member back: nothing was done.
    async fn lock(&mut self, members: Vec<Member>) -> Result<Vec<Planned>, Vec<Member>> {
        let earliest = members
            .iter()
            .filter_map(|m| m.deadline.as_ref())
            .min_by_key(|d| d.work_left());
        let Ok(begin) = crate::store::postgres::writes::begin_text(earliest) else {
            return Err(members);
        };
        let Some(client) = self.client.as_ref() else {
            return Err(members);
        };
        let Ok(lock) = client.prepare_cached(LOCK).await else {
            return Err(members);
        };
        let keys = Keys::of(&members);
        let stored = match keys.is_empty() {
            true => None,
            false => match client.prepare_cached(records::STORED).await {
                Ok(statement) => Some(statement),
                Err(_) => return Err(members),
            },
        };
        let tenants: Vec<&str> = members.iter().map(|m| m.key().0).collect();
        let conversations: Vec<&str> = members.iter().map(|m| m.key().1).collect();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&tenants, &conversations];
        // The records are read after the lock, in the same round trip.
        let locked = tokio::try_join!(
            client.batch_execute(&begin),
            client.query(&lock, &params),
            async {
                match &stored {
                    Some(statement) => client.query(statement, &keys.params()).await,
                    None => Ok(Vec::new()),
                }
            }
        );
        let Ok(((), rows, stored)) = locked else {
            return Err(members);
        };
        // A member whose key has a record takes the single path, which replays or refuses.
        let replays: HashSet<(String, String)> = stored
            .iter()
            .filter_map(|row| {
                Some((
                    column(row, "tenant_id").ok()?,
                    column(row, "conversation_id").ok()?,
                ))
            })
            .collect();
        let mut states = HashMap::new();
        for row in &rows {
            if let Ok(state) = LockedRow::of(row) {
                states.insert((state.tenant.clone(), state.conversation.clone()), state);
            }
        }
        let mut planned = Vec::new();
        for member in members {
            let key = (member.key().0.to_owned(), member.key().1.to_owned());
            let state = states.remove(&key).filter(|_| !replays.contains(&key));
            match state.and_then(|state| state.plan(&member.batch)) {
                Some((write, placement, change)) => planned.push(Planned {
                    member,
                    write,
                    placement,
                    change,
                }),
                None => member.answer(Verdict::Single),
            }
        }
        Ok(planned)
    }

    /// The members' claims, then [`UPDATE`], every member's rows and `COMMIT`, pipelined; the
    /// appends written, if the batch committed.
    async fn write(mut self, planned: Vec<Planned>) -> Option<usize> {
        let mut claimed = Vec::with_capacity(planned.len());
        for planned in planned {
            if planned.member.reply.is_closed() {
                // The caller has gone: its append is not written.
                continue;
            }
            match crate::store::claim_commit(planned.member.deadline.as_ref()) {
                Ok(()) => claimed.push(planned),
                Err(error) => planned.member.answer(Verdict::Done(Err(error))),
            }
        }
        if claimed.is_empty() {
            self.roll_back().await;
            return None;
        }
        let written = self.send(&claimed).await;
        match written {
            Ok(()) => {
                self.ended = true;
                let written = claimed.len();
                for planned in claimed {
                    let outcome = planned.write.outcome;
                    planned.member.answer(Verdict::Done(Ok(outcome)));
                }
                return Some(written);
            }
            // The database refused a statement: the transaction rolled back, nothing of it
            // committed, and each member may try again alone.
            Err(Unsent::Refused) => {
                self.roll_back().await;
                claimed.into_iter().for_each(|p| p.member.answer(Verdict::Single));
            }
            // The connection failed: whether `COMMIT` took effect is unknown, as it is on the
            // single path, and the members are told so.
            Err(Unsent::Lost) => {
                for planned in claimed {
                    let error = StoreError::Unavailable {
                        source: "the database connection failed while a batch of appends committed".into(),
                    };
                    planned.member.answer(Verdict::Done(Err(error)));
                }
            }
        }
        None
    }

    async fn send(&self, claimed: &[Planned]) -> Result<(), Unsent> {
        let client = self.client.as_ref().ok_or(Unsent::Refused)?;
        // Prepared before anything is sent: a pipelined `COMMIT` can never overtake a statement
        // still being prepared. A failure here leaves the transaction open and unwritten.
        let update = client.prepare_cached(UPDATE).await.map_err(|_| Unsent::Refused)?;
        let record = client
            .prepare_cached(CHANGES)
            .await
            .map_err(|_| Unsent::Refused)?;
        let changes = Changes::of(claimed);
        let records = Records::of(claimed.iter().map(|p| (&p.member, &p.write)));
        let insert_records = match records.is_empty() {
            true => None,
            false => Some(
                client
                    .prepare_cached(records::INSERT)
                    .await
                    .map_err(|_| Unsent::Refused)?,
            ),
        };
        let mut inserts = Vec::with_capacity(claimed.len());
        for planned in claimed {
            let count = planned.member.batch.messages.len();
            inserts.push(
                MessageRows::prepare(client, count)
                    .await
                    .map_err(|_| Unsent::Refused)?,
            );
        }
        let allocations = Allocations::of(claimed);
        let rows: Vec<MessageRows<'_>> = claimed.iter().map(Planned::rows).collect();
        let writes = rows
            .iter()
            .zip(&inserts)
            .map(|(rows, prepared)| rows.send(client, prepared));
        // try_join polls all at once: the update, every member's rows, the changes, the keys'
        // records and COMMIT are sent, in order, before any answer is read.
        let ((), (), (), (), ()) = tokio::try_join!(
            async { client.execute(&update, &allocations.params()).await.map(|_| ()) },
            async { futures_util::future::try_join_all(writes).await.map(|_| ()) },
            async { client.execute(&record, &changes.params()).await.map(|_| ()) },
            async {
                match &insert_records {
                    Some(statement) => client.execute(statement, &records.params()).await.map(|_| ()),
                    None => Ok(()),
                }
            },
            client.batch_execute("COMMIT")
        )
        .map_err(|error| match error.code() {
            Some(_) => Unsent::Refused,
            None => Unsent::Lost,
        })?;
        Ok(())
    }

    /// Ends the transaction without writing; if even that fails, the drop closes the
    /// connection.
    async fn roll_back(&mut self) {
        if let Some(client) = &self.client
            && client.batch_execute("ROLLBACK").await.is_ok()
        {
            self.ended = true;
        }
    }
}

impl Planned {
    fn rows(&self) -> MessageRows<'_> {
        let batch = &*self.member.batch;
        let (tenant, conversation) = self.member.key();
        MessageRows {
            tenant,
            conversation,
            sequences: (0..batch.messages.len())
                .map(|i| self.write.sequence_of(i).as_i64())
                .collect(),
            columns: Columns::of(batch),
            call_sequences: vec![None; batch.messages.len()],
            placement: self.placement.clone(),
            search: crate::store::postgres::append::insert::search_column(tenant, conversation, batch),
        }
    }
}

/// What [`LOCK`] read of a member's conversation.
struct LockedRow {
    tenant: String,
    conversation: String,
    last_sequence: i64,
    token_offset: i64,
    turn_offset: Option<i64>,
    live: bool,
    change: (i64, i64),
}

impl LockedRow {
    fn of(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        Ok(Self {
            tenant: column(row, "tenant_id")?,
            conversation: column(row, "conversation_id")?,
            last_sequence: column(row, "last_sequence")?,
            token_offset: column(row, "token_offset")?,
            turn_offset: column(row, "turn_offset")?,
            live: column(row, "live")?,
            change: (column(row, "change_position")?, column(row, "change")?),
        })
    }

    /// The member's write as the single path would plan it from this state (its key has no
    /// record), or `None` when it is not a write (past its expire time, or refused, as for a
    /// guard that does not hold: the single path answers).
    fn plan(self, batch: &CountedBatch) -> Option<(WritePlan, Placement, (i64, i64))> {
        if !self.live {
            return None;
        }
        let state = AppendState {
            last_sequence: Sequence::from_stored(self.last_sequence),
            idempotency: None,
            known_calls: Default::default(),
            last_time: None,
        };
        match plan(batch, &state) {
            Ok(AppendPlan::Write(write)) => {
                let placement = Placement::of(batch).after(self.token_offset, self.turn_offset);
                Some((write, placement, self.change))
            }
            _ => None,
        }
    }
}

/// [`CHANGES`]' arrays, one element per member.
struct Changes<'a> {
    tenants: Vec<&'a str>,
    positions: Vec<i64>,
    conversations: Vec<&'a str>,
    numbers: Vec<i64>,
    kinds: Vec<i16>,
    firsts: Vec<i64>,
    lasts: Vec<i64>,
}

impl<'a> Changes<'a> {
    fn of(claimed: &'a [Planned]) -> Self {
        let kind = crate::domain::changes::ChangeKind::Appended.code();
        Self {
            tenants: claimed.iter().map(|p| p.member.key().0).collect(),
            positions: claimed.iter().map(|p| p.change.0).collect(),
            conversations: claimed.iter().map(|p| p.member.key().1).collect(),
            numbers: claimed.iter().map(|p| p.change.1).collect(),
            kinds: vec![kind; claimed.len()],
            firsts: claimed.iter().map(|p| p.write.sequence_of(0).as_i64()).collect(),
            lasts: claimed
                .iter()
                .map(|p| p.write.after.as_i64() + p.member.batch.messages.len() as i64)
                .collect(),
        }
    }

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 7] {
        [
            &self.tenants,
            &self.positions,
            &self.conversations,
            &self.numbers,
            &self.kinds,
            &self.firsts,
            &self.lasts,
        ]
    }
}

/// [`UPDATE`]'s arrays, one element per member.
struct Allocations<'a> {
    tenants: Vec<&'a str>,
    conversations: Vec<&'a str>,
    counts: Vec<i64>,
    user_offsets: Vec<Option<i64>>,
    response_ids: Vec<Option<&'a str>>,
    totals: Vec<i64>,
    last_turns: Vec<Option<i64>>,
    usage: [Vec<i64>; 4],
}

impl<'a> Allocations<'a> {
    fn of(claimed: &'a [Planned]) -> Self {
        let each: Vec<Allocation<'a>> = claimed
            .iter()
            .map(|p| Allocation::of(&p.member.tenant, &p.member.batch))
            .collect();
        Self {
            tenants: each.iter().map(|a| a.tenant).collect(),
            conversations: each.iter().map(|a| a.conversation).collect(),
            counts: each.iter().map(|a| a.count).collect(),
            user_offsets: each.iter().map(|a| a.user_offset).collect(),
            response_ids: each.iter().map(|a| a.response_id).collect(),
            totals: each.iter().map(|a| a.relative.total).collect(),
            last_turns: each.iter().map(|a| a.relative.last_turn).collect(),
            usage: [0, 1, 2, 3].map(|k| each.iter().map(|a| a.usage[k]).collect()),
        }
    }

    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 11] {
        [
            &self.tenants,
            &self.conversations,
            &self.counts,
            &self.user_offsets,
            &self.response_ids,
            &self.totals,
            &self.last_turns,
            &self.usage[0],
            &self.usage[1],
            &self.usage[2],
            &self.usage[3],
        ]
    }
}
