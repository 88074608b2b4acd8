//! The INSERT statements that write a batch's message rows: fixed shapes of at most
//! [`ROWS_PER_INSERT`] rows, prepared before the transaction and pipelined inside it.

use deadpool_postgres::GenericClient;
use tokio_postgres::{Statement, types::ToSql};

use super::placement::Placement;
use crate::{
    domain::{CountedBatch, search},
    store::{StoreError, postgres::rows::Columns},
};

/// The most messages one INSERT statement carries: a batch goes in statements of this many
/// rows and one of the rest, so a connection prepares at most this many statement shapes.
pub(super) const ROWS_PER_INSERT: usize = 16;

/// Parameters per message row of [`insert_sql`]: the sequence, the 16 [`Columns`], the
/// sequence of the call a tool result answers, the 2 log positions and the search document.
const PARAMS_PER_ROW: usize = 21;

/// A multi-row `INSERT ... VALUES` of `rows` messages: `$1` and `$2` are the tenant and
/// conversation, then [`PARAMS_PER_ROW`] parameters per row. Plain VALUES with the
/// distribution column given: Citus routes it to the conversation's shard with the cheapest
/// planning it has, where an `INSERT ... SELECT` would be planned in full or on the
/// coordinator (docs/scaling.md).
fn insert_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO messages (tenant_id, conversation_id, sequence, role, content, name,
             tool_calls, tool_call_id, attachments, metadata, exclude_from_context, pinned, error,
             response_id, tokens_o200k, tokens_cl100k, tokens_approx, native, loaded_bytes, call_sequence,
             token_offset, previous_turn_offset, search, created_at)
         VALUES ",
    );
    for row in 0..rows {
        let first = 3 + row * PARAMS_PER_ROW;
        let last = first + PARAMS_PER_ROW - 1;
        let params: Vec<String> = (first..last).map(|n| format!("${n}")).collect();
        let separator = if row == 0 { "" } else { ", " };
        // The document comes as `tsvector` text (see `SearchDocument::tsvector`).
        sql.push_str(&format!(
            "{separator}($1, $2, {}, ${last}::text::tsvector, now())",
            params.join(", ")
        ));
    }
    sql
}

/// The rows each INSERT statement of a `count`-message batch carries, in order.
fn chunks(count: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..count)
        .step_by(ROWS_PER_INSERT)
        .map(move |start| start..(start + ROWS_PER_INSERT).min(count))
}

/// A batch's rows as the [`insert_sql`] statements take them.
pub(super) struct MessageRows<'a> {
    pub(super) tenant: &'a str,
    pub(super) conversation: &'a str,
    pub(super) sequences: Vec<i64>,
    pub(super) columns: Columns<'a>,
    pub(super) call_sequences: Vec<Option<i64>>,
    pub(super) placement: Placement,
    /// Each message's search document as `tsvector` text (see [`search_column`]).
    pub(super) search: Vec<Option<String>>,
}

/// The `search` column of a batch's rows: each document under the conversation's scope, NULL
/// where it has no term (a UI-only message, no words).
pub(super) fn search_column(tenant: &str, conversation: &str, batch: &CountedBatch) -> Vec<Option<String>> {
    let scope = search::scope(tenant, conversation);
    batch
        .messages
        .iter()
        .map(|m| {
            Some(&m.search)
                .filter(|d| !d.is_empty())
                .map(|d| d.tsvector(&scope))
        })
        .collect()
}

impl MessageRows<'_> {
    /// The parameters of each INSERT statement, in [`chunks`] order.
    fn statements(&self) -> Vec<Vec<&(dyn ToSql + Sync)>> {
        chunks(self.sequences.len())
            .map(|rows| {
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&self.tenant, &self.conversation];
                for i in rows.clone() {
                    params.push(&self.sequences[i]);
                    params.extend(self.columns.row(i));
                    params.push(&self.call_sequences[i]);
                    params.push(&self.placement.offsets[i]);
                    params.push(&self.placement.previous_turns[i]);
                    params.push(&self.search[i]);
                }
                params
            })
            .collect()
    }

    /// Prepares (or finds cached) the INSERT statements of `count` rows: done before the
    /// transaction opens, so a pipelined `COMMIT` can never overtake a statement that was still
    /// being prepared.
    pub(super) async fn prepare<C: GenericClient + Sync>(
        client: &C,
        count: usize,
    ) -> Result<Vec<Statement>, StoreError> {
        let mut prepared = Vec::new();
        for rows in chunks(count) {
            prepared.push(client.prepare_cached(&insert_sql(rows.len())).await?);
        }
        Ok(prepared)
    }

    /// Runs the [`Self::prepare`]d statements: every one is sent before any answer is read.
    pub(super) async fn execute<C: GenericClient + Sync>(
        &self,
        client: &C,
        prepared: &[Statement],
    ) -> Result<(), StoreError> {
        Ok(self.send(client, prepared).await?)
    }

    /// [`Self::execute`], with the driver's error (a group commit tells refusals from lost
    /// connections by it).
    pub(super) async fn send<C: GenericClient + Sync>(
        &self,
        client: &C,
        prepared: &[Statement],
    ) -> Result<(), tokio_postgres::Error> {
        let statements = self.statements();
        let inserts = statements
            .iter()
            .zip(prepared)
            .map(|(params, statement)| client.execute(statement, params));
        futures_util::future::try_join_all(inserts).await?;
        Ok(())
    }
}
