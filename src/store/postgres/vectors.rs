//! Semantic search on PostgreSQL (docs/design.md, "Recall"): the embedding backlog and its
//! compare-and-set, and the semantic half of a search. A replica keeps each searched
//! conversation's sign-bit codes in memory ([`VectorCodes`], bounded in bytes), checked against
//! the log's version and extended as the watermark moves, so a search scans them without
//! reading them again; the shortlisted chunks are rescored from their rows, which also holds
//! them to the log as it is (a removed message has no rows), so a stale code can only cost a
//! candidate, never bring back a removed message.

use std::collections::HashMap;

use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use super::{
    rows::{MESSAGE_BYTES, MESSAGE_COLUMNS, byte_limit, column, stored_messages},
    vector_codes::{LogState, VectorCodes, current_codes},
};
use crate::{
    domain::{
        ConversationId, Role, Sequence, TenantId,
        search::{
            self,
            vectors::{self, PassageVector, QueryVector},
        },
    },
    store::{EmbeddingBacklog, EmbeddingBatch, LogVersion, StoreError},
};

/// The log's version and watermark, as the conversation row holds them (no row: none).
pub(super) const VERSION_COLUMNS: &str =
    "(extract(epoch FROM c.created_at) * 1000000)::bigint AS created_micros,
     c.redactions + c.rewinds AS changes, coalesce(c.incarnation, 0) AS incarnation, c.embedded_through,
     c.embedded_late";

/// The version of a row with [`VERSION_COLUMNS`].
pub(super) fn version_of(row: &tokio_postgres::Row) -> Result<LogVersion, StoreError> {
    Ok(LogVersion {
        created_micros: column(row, "created_micros")?,
        changes: column::<i64>(row, "changes")?.max(0) as u64,
        incarnation: column(row, "incarnation")?,
    })
}

/// The creation time a [`LogVersion::created_micros`] stands for.
fn created_at(micros: i64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros.max(0) as u64)
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn embedding_backlog(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    limit: usize,
    max_bytes: usize,
) -> Result<Option<EmbeddingBacklog>, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    // The version first: a change after it fails the compare-and-set that stores the vectors.
    let state = client
        .query_opt(
            &format!(
                "SELECT {VERSION_COLUMNS} FROM conversations c WHERE c.tenant_id = $1 AND c.conversation_id = $2"
            ),
            &[&t, &c],
        )
        .await?;
    let Some(state) = state else {
        return Ok(None);
    };
    let version = version_of(&state)?;
    let after: i64 = column(&state, "embedded_through")?;
    // Only searchable messages count against the byte limit; the first one always comes.
    let sized = format!("CASE WHEN m.search IS NULL THEN 0 ELSE {MESSAGE_BYTES} END");
    let rows = client
        .query_typed(
            &format!(
                "SELECT {MESSAGE_COLUMNS}, searchable FROM (
                     SELECT m.*, m.search IS NOT NULL AS searchable, {sized} AS own,
                            sum({sized}) OVER (ORDER BY m.sequence ROWS UNBOUNDED PRECEDING) AS upto
                     FROM messages m
                     WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.sequence > $3
                     ORDER BY m.sequence LIMIT $4) page
                 WHERE upto - own < $5 OR sequence = $3 + 1
                 ORDER BY sequence"
            ),
            &[
                (&t, Type::TEXT),
                (&c, Type::TEXT),
                (&after, Type::INT8),
                (&(limit.max(1) as i64), Type::INT8),
                (&byte_limit(max_bytes), Type::INT8),
            ],
        )
        .await?;
    let messages = stored_messages(&rows)?;
    let through = messages
        .last()
        .map_or(Sequence::from_stored(after), |m| m.sequence);
    let mut searchable = Vec::with_capacity(messages.len());
    for (row, message) in rows.iter().zip(messages) {
        if column::<bool>(row, "searchable")? {
            searchable.push(message);
        }
    }
    Ok(Some(EmbeddingBacklog {
        version,
        after: Sequence::from_stored(after),
        through,
        messages: searchable,
    }))
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn store_embeddings(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    batch: &EmbeddingBatch,
) -> Result<bool, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    // The conversation row first, as rewinds and redactions lock it: one of them that came
    // first changed the version, and this stores nothing.
    let moved = tx
        .execute(
            "UPDATE conversations c SET embedded_through = $3, embedded_late = embedded_late + $8
             WHERE c.tenant_id = $1 AND c.conversation_id = $2 AND c.embedded_through = $4
               AND c.last_sequence >= $3 AND c.redactions + c.rewinds = $5
               AND coalesce(c.incarnation, 0) = $6
               AND c.created_at = $7",
            &[
                &t,
                &c,
                &batch.through.as_i64(),
                &batch.after.as_i64(),
                &(batch.version.changes as i64),
                &batch.version.incarnation,
                // The time itself, not `extract(...)` of the column: Citus refuses a STABLE
                // function with a column reference in an UPDATE.
                &created_at(batch.version.created_micros),
                &i64::from(!batch.late.is_empty()),
            ],
        )
        .await?;
    if moved == 0 {
        return Ok(false);
    }
    let inside = |s: Sequence| s > batch.after && s <= batch.through;
    let late = batch.late.iter().filter(|v| v.sequence <= batch.after);
    let kept: Vec<_> = batch
        .vectors
        .iter()
        .filter(|v| inside(v.sequence))
        .chain(late)
        .collect();
    let sequences: Vec<i64> = kept.iter().map(|v| v.sequence.as_i64()).collect();
    let chunks: Vec<i16> = kept.iter().map(|v| v.chunk as i16).collect();
    let codes: Vec<Vec<u8>> = kept.iter().map(|v| vectors::code_to_bytes(&v.code)).collect();
    let values: Vec<Vec<u8>> = kept.iter().map(|v| v.vector.to_bytes()).collect();
    tx.execute(
        "INSERT INTO message_vectors (tenant_id, conversation_id, sequence, chunk, code, vector)
         SELECT $1, $2, k.sequence, k.chunk, k.code, k.vector
         FROM unnest($3::bigint[], $4::smallint[], $5::bytea[], $6::bytea[]) AS k(sequence, chunk, code, vector)
         JOIN messages m ON m.tenant_id = $1 AND m.conversation_id = $2 AND m.sequence = k.sequence
         WHERE m.search IS NOT NULL
         ON CONFLICT DO NOTHING",
        &[&t, &c, &sequences, &chunks, &codes, &values],
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// What a search holds its semantic hits to.
pub(super) struct Filters<'a> {
    /// Never scanned (recall: what the pack holds verbatim).
    pub(super) skip: &'a [Sequence],
    pub(super) roles: &'a [Role],
    pub(super) tools: &'a [String],
    /// The SQL that holds a row `s` to the tools `$6` (of tenant `$1`, conversation `$2`).
    pub(super) tool_filter: &'a str,
}

/// The semantic half of a search ([`vectors`]): the messages the query's vector ranks best,
/// each with its size. The scan skips the skipped messages and holds the rest to the roles (the
/// replica's codes know them); only the shortlist's vectors are read, by key; the ranking is
/// then held to the tools. A vector row exists only for a searchable message that is in the
/// log: redaction, rewind and delete remove the rows in their transactions.
pub(super) async fn semantic(
    client: &deadpool_postgres::Object,
    codes_cache: &VectorCodes,
    (t, c): (&str, &str),
    state: &LogState,
    query: &QueryVector,
    filters: Filters<'_>,
) -> Result<(Vec<(Sequence, u16)>, HashMap<i64, i64>), StoreError> {
    let codes = current_codes(client, codes_cache, (t, c), state).await?;
    let mut skip = filters.skip.to_vec();
    skip.sort_unstable();
    let last = Sequence::from_stored(state.last);
    let scanned = codes
        .iter()
        .filter(|(code, role)| {
            code.sequence <= last
                && (skip.is_empty() || skip.binary_search(&code.sequence).is_err())
                && (filters.roles.is_empty() || search::role_passes(filters.roles, *role))
        })
        .map(|(code, _)| code);
    let shortlist = vectors::shortlist(query, scanned);
    if shortlist.is_empty() {
        return Ok((Vec::new(), HashMap::new()));
    }
    let mut ranked = match codes.has_vectors() {
        true => {
            let held = shortlist
                .iter()
                .filter_map(|&(s, chunk)| Some((s, chunk, codes.vector(s, chunk)?)));
            vectors::semantic_ranking(query, held)
        }
        false => rescore_from_rows(client, (t, c), query, &shortlist).await?,
    };
    if !filters.tools.is_empty() {
        let sequences: Vec<i64> = ranked.iter().map(|(s, _)| s.as_i64()).collect();
        let rows = client
            .query_typed(
                &format!(
                    "SELECT s.sequence FROM messages s
                     WHERE s.tenant_id = $1 AND s.conversation_id = $2 AND s.sequence = ANY($3::bigint[])
                       AND {}",
                    filters.tool_filter.replace("$6", "$4")
                ),
                &[
                    (&t, Type::TEXT),
                    (&c, Type::TEXT),
                    (&sequences, Type::INT8_ARRAY),
                    (&filters.tools, Type::TEXT_ARRAY),
                ],
            )
            .await?;
        let passing: std::collections::HashSet<i64> = rows
            .iter()
            .map(|row| column(row, "sequence"))
            .collect::<Result<_, _>>()?;
        ranked.retain(|(s, _)| passing.contains(&s.as_i64()));
    }
    let sizes = ranked
        .iter()
        .filter_map(|&(s, _)| Some((s.as_i64(), codes.size(s)?)))
        .collect();
    Ok((ranked, sizes))
}

/// The shortlist rescored from its vector rows (a conversation whose vectors the replica does
/// not hold).
async fn rescore_from_rows(
    client: &deadpool_postgres::Object,
    (t, c): (&str, &str),
    query: &QueryVector,
    shortlist: &[(Sequence, u16)],
) -> Result<Vec<(Sequence, u16)>, StoreError> {
    let sequences: Vec<i64> = shortlist.iter().map(|(s, _)| s.as_i64()).collect();
    let chunks: Vec<i16> = shortlist.iter().map(|&(_, c)| c as i16).collect();
    // Each key looked up by the primary key (the fence keeps a young conversation's stale
    // statistics from turning the lookups into a scan of all its vectors).
    let rows = client
        .query_typed(
            "SELECT k.sequence, k.chunk, v.vector
             FROM unnest($3::bigint[], $4::smallint[]) AS k(sequence, chunk)
             CROSS JOIN LATERAL (SELECT v.vector FROM message_vectors v
                  WHERE v.tenant_id = $1 AND v.conversation_id = $2
                    AND v.sequence = k.sequence AND v.chunk = k.chunk OFFSET 0) v",
            &[
                (&t, Type::TEXT),
                (&c, Type::TEXT),
                (&sequences, Type::INT8_ARRAY),
                (&chunks, Type::INT2_ARRAY),
            ],
        )
        .await?;
    let mut rescored: HashMap<(i64, i16), PassageVector> = HashMap::new();
    for row in &rows {
        let bytes: Vec<u8> = column(row, "vector")?;
        if let Some(vector) = PassageVector::from_bytes(&bytes) {
            rescored.insert((column(row, "sequence")?, column(row, "chunk")?), vector);
        }
    }
    // In shortlist order, as the in-memory store rescores.
    let ordered = shortlist.iter().filter_map(|&(s, chunk)| {
        let vector = rescored.remove(&(s.as_i64(), chunk as i16))?;
        Some((s, chunk, vector))
    });
    Ok(vectors::semantic_ranking(query, ordered))
}
