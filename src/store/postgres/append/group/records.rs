//! The idempotency records of a batch's keyed members: which keys are stored already (those
//! members take the single path, which replays or refuses), and the new records, written with
//! the members' rows. A record the batch did not see stored still breaks the records' primary
//! key: the batch is refused, nothing of it commits, and every member takes the single path.

use super::member::Member;
use crate::domain::WritePlan;

/// Which of the keys (`$1` tenants, `$2` conversations, `$3` keys) have a record. Sent after
/// the batch's lock as a statement of its own, so with a snapshot taken after the locks:
/// whoever wrote a record for a locked conversation held its row's lock, and has committed.
pub(super) const STORED: &str = "SELECT k.tenant_id, k.conversation_id FROM idempotency_keys k
    JOIN unnest($1::text[], $2::text[], $3::text[]) AS u(tenant_id, conversation_id, idempotency_key)
      ON k.tenant_id = u.tenant_id AND k.conversation_id = u.conversation_id
     AND k.idempotency_key = u.idempotency_key";

/// The members' new records, one element of each array per keyed member.
pub(super) const INSERT: &str = "INSERT INTO idempotency_keys (tenant_id, conversation_id, idempotency_key,
        payload_hash, first_sequence, last_sequence, conversation_last_sequence)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bigint[], $6::bigint[],
        $7::bigint[])";

/// [`STORED`]'s arrays: the keyed members' keys.
pub(super) struct Keys<'a> {
    tenants: Vec<&'a str>,
    conversations: Vec<&'a str>,
    keys: Vec<&'a str>,
}

impl<'a> Keys<'a> {
    pub(super) fn of(members: &'a [Member]) -> Self {
        let keyed = || members.iter().filter(|m| m.batch.idempotency.is_some());
        Self {
            tenants: keyed().map(|m| m.key().0).collect(),
            conversations: keyed().map(|m| m.key().1).collect(),
            keys: keyed()
                .filter_map(|m| m.batch.idempotency.as_ref())
                .map(|i| i.key.as_str())
                .collect(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(super) fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 3] {
        [&self.tenants, &self.conversations, &self.keys]
    }
}

/// [`INSERT`]'s arrays: the record of each member whose plan has one.
#[derive(Default)]
pub(super) struct Records<'a> {
    tenants: Vec<&'a str>,
    conversations: Vec<&'a str>,
    keys: Vec<&'a str>,
    hashes: Vec<&'a [u8]>,
    firsts: Vec<i64>,
    lasts: Vec<i64>,
    conversation_lasts: Vec<i64>,
}

impl<'a> Records<'a> {
    pub(super) fn of(written: impl Iterator<Item = (&'a Member, &'a WritePlan)>) -> Self {
        let mut records = Records::default();
        for (member, write) in written {
            let (Some(idempotency), Some(record)) = (&member.batch.idempotency, &write.idempotency) else {
                continue;
            };
            let outcome = record.outcome;
            records.tenants.push(member.key().0);
            records.conversations.push(member.key().1);
            records.keys.push(idempotency.key.as_str());
            records.hashes.push(&record.payload_hash.0[..]);
            records.firsts.push(outcome.first_sequence.as_i64());
            records.lasts.push(outcome.last_sequence.as_i64());
            records
                .conversation_lasts
                .push(outcome.conversation_last_sequence.as_i64());
        }
        records
    }

    pub(super) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(super) fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 7] {
        [
            &self.tenants,
            &self.conversations,
            &self.keys,
            &self.hashes,
            &self.firsts,
            &self.lasts,
            &self.conversation_lasts,
        ]
    }
}
