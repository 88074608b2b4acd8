//! Semantic search on PostgreSQL (docs/design.md, "Recall"): the embedding backlog and its
//! compare-and-set, and the semantic half of a search. A replica keeps each searched
//! conversation's sign-bit codes in memory ([`VectorCodes`], bounded in bytes), checked against
//! the log's version and extended as the watermark moves, so a search scans them without
//! reading them again; the shortlisted chunks are rescored from their rows, which also holds
//! them to the log as it is (a removed message has no rows), so a stale code can only cost a
//! candidate, never bring back a removed message.

use std::{collections::HashMap, sync::Arc};

use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use super::rows::{MESSAGE_BYTES, MESSAGE_COLUMNS, byte_limit, column, stored_messages};
use crate::{
    domain::{
        ConversationId, Role, Sequence, TenantId,
        search::{
            self,
            vectors::{self, ChunkCode, PassageVector, QueryVector},
        },
    },
    store::{EmbeddingBacklog, EmbeddingBatch, LogVersion, StoreError},
};

/// The log's version and watermark, as the conversation row holds them (no row: none).
pub(super) const VERSION_COLUMNS: &str =
    "(extract(epoch FROM c.created_at) * 1000000)::bigint AS created_micros,
     c.redactions + c.rewinds AS changes, coalesce(c.incarnation, 0) AS incarnation, c.embedded_through";

/// The version of a row with [`VERSION_COLUMNS`].
pub(super) fn version_of(row: &tokio_postgres::Row) -> Result<LogVersion, StoreError> {
    Ok(LogVersion {
        created_micros: column(row, "created_micros")?,
        changes: column::<i64>(row, "changes")?.max(0) as u64,
        incarnation: column(row, "incarnation")?,
    })
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
            "UPDATE conversations c SET embedded_through = $3
             WHERE c.tenant_id = $1 AND c.conversation_id = $2 AND c.embedded_through = $4
               AND c.last_sequence >= $3 AND c.redactions + c.rewinds = $5
               AND coalesce(c.incarnation, 0) = $6
               AND (extract(epoch FROM c.created_at) * 1000000)::bigint = $7",
            &[
                &t,
                &c,
                &batch.through.as_i64(),
                &batch.after.as_i64(),
                &(batch.version.changes as i64),
                &batch.version.incarnation,
                &batch.version.created_micros,
            ],
        )
        .await?;
    if moved == 0 {
        return Ok(false);
    }
    let inside = |s: Sequence| s > batch.after && s <= batch.through;
    let kept: Vec<_> = batch.vectors.iter().filter(|v| inside(v.sequence)).collect();
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

/// [`Codes::dimensions`] of codes held without their vectors.
const NOT_HELD: usize = usize::MAX;

/// A conversation's codes as a replica holds them.
#[derive(Debug, Clone)]
struct Codes {
    version: LogVersion,
    /// The watermark they were read up to.
    through: i64,
    /// `(sequence, chunk)` of each code, ascending.
    keys: Vec<(Sequence, u16)>,
    /// The role and size ([`MESSAGE_BYTES`]) of each code's message, fixed while the version
    /// stands.
    messages: Vec<(Role, i64)>,
    /// The codes, `words` words each.
    words: Vec<u64>,
    width: usize,
    /// Each code's vector (scale, then `dimensions` values), when the replica holds them: the
    /// rescoring then reads no rows. Empty when the conversation's vectors would not fit the
    /// budget with them (its rescoring then reads the shortlist's rows).
    scales: Vec<f32>,
    values: Vec<i8>,
    dimensions: usize,
}

impl Codes {
    fn bytes(&self) -> usize {
        self.keys.len() * 32 + self.words.len() * 8 + self.scales.len() * 4 + self.values.len() + 64
    }

    /// Whether the replica holds the vectors too.
    fn has_vectors(&self) -> bool {
        self.dimensions != NOT_HELD && !self.keys.is_empty() && self.scales.len() == self.keys.len()
    }

    /// Adds a row of the fill query: its code, its message's role and size, and its vector
    /// while every vector so far is held and of one size.
    fn push_row(&mut self, row: &tokio_postgres::Row) -> Result<(), StoreError> {
        let code = vectors::code_from_bytes(&column::<Vec<u8>>(row, "code")?);
        if self.width == 0 {
            self.width = code.len();
        }
        let role: String = column(row, "role")?;
        // Vectors of another model's size (the configuration changed) are not comparable.
        let (Some(role), true) = (Role::from_name(&role), code.len() == self.width) else {
            return Ok(());
        };
        self.keys.push((
            Sequence::from_stored(column(row, "sequence")?),
            column::<i16>(row, "chunk")?.max(0) as u16,
        ));
        self.messages.push((role, column(row, "own")?));
        self.words.extend(code);
        let vector = PassageVector::from_bytes(&column::<Vec<u8>>(row, "vector")?);
        match vector {
            Some(v)
                if self.dimensions != NOT_HELD
                    && (self.dimensions == 0 || self.dimensions == v.dimensions()) =>
            {
                let (scale, parts) = v.parts();
                self.dimensions = parts.len();
                self.scales.push(scale);
                self.values.extend_from_slice(parts);
            }
            _ => self.dimensions = NOT_HELD,
        }
        Ok(())
    }

    /// The vector of `(sequence, chunk)`, when the replica holds it.
    fn vector(&self, sequence: Sequence, chunk: u16) -> Option<PassageVector> {
        if !self.has_vectors() {
            return None;
        }
        let i = self.keys.binary_search(&(sequence, chunk)).ok()?;
        let values = &self.values[i * self.dimensions..(i + 1) * self.dimensions];
        Some(PassageVector::from_parts(self.scales[i], values))
    }

    /// The codes, each with its message's role.
    fn iter(&self) -> impl Iterator<Item = (ChunkCode<'_>, Role)> {
        self.keys.iter().enumerate().map(|(i, &(sequence, chunk))| {
            let code = ChunkCode {
                sequence,
                chunk,
                code: &self.words[i * self.width..(i + 1) * self.width],
            };
            (code, self.messages[i].0)
        })
    }

    /// The size of the message at `sequence`, if it has codes.
    fn size(&self, sequence: Sequence) -> Option<i64> {
        let i = self.keys.partition_point(|&(s, _)| s < sequence);
        self.keys
            .get(i)
            .filter(|(s, _)| *s == sequence)
            .map(|_| self.messages[i].1)
    }
}

/// Codes by tenant and conversation, least recently used first.
type CodesByConversation = lru::LruCache<(String, String), Arc<Codes>>;

/// The codes of the conversations this replica searched, least recently used dropped first
/// past a byte budget.
#[derive(Debug)]
pub(super) struct VectorCodes {
    budget: usize,
    /// The codes, and their bytes together.
    inner: std::sync::Mutex<(CodesByConversation, usize)>,
}

impl VectorCodes {
    pub(super) fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: std::sync::Mutex::new((lru::LruCache::unbounded(), 0)),
        }
    }

    fn get(&self, key: &(String, String)) -> Option<Arc<Codes>> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.0.get(key).cloned()
    }

    fn put(&self, key: (String, String), codes: Arc<Codes>) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (cache, used) = &mut *guard;
        let bytes = codes.bytes();
        if let Some(old) = cache.pop(&key) {
            *used -= old.bytes();
        }
        if bytes > self.budget {
            return;
        }
        while *used + bytes > self.budget {
            match cache.pop_lru() {
                Some((_, old)) => *used -= old.bytes(),
                None => break,
            }
        }
        *used += bytes;
        cache.put(key, codes);
    }
}

/// What the semantic half of a search knows of the log: its version, watermark and end.
pub(super) struct LogState {
    pub(super) version: LogVersion,
    pub(super) embedded_through: i64,
    pub(super) last: i64,
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
) -> Result<(Vec<Sequence>, HashMap<i64, i64>), StoreError> {
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
                .filter_map(|&(s, chunk)| Some((s, codes.vector(s, chunk)?)));
            vectors::semantic_ranking(query, held)
        }
        false => rescore_from_rows(client, (t, c), query, &shortlist).await?,
    };
    if !filters.tools.is_empty() {
        let sequences: Vec<i64> = ranked.iter().map(|s| s.as_i64()).collect();
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
        ranked.retain(|s| passing.contains(&s.as_i64()));
    }
    let sizes = ranked
        .iter()
        .filter_map(|&s| Some((s.as_i64(), codes.size(s)?)))
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
) -> Result<Vec<Sequence>, StoreError> {
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
        Some((s, vector))
    });
    Ok(vectors::semantic_ranking(query, ordered))
}

/// The conversation's codes up to its watermark: the replica's, extended or read again as the
/// log's version and watermark say.
async fn current_codes(
    client: &deadpool_postgres::Object,
    cache: &VectorCodes,
    (t, c): (&str, &str),
    state: &LogState,
) -> Result<Arc<Codes>, StoreError> {
    let key = (t.to_string(), c.to_string());
    let held = cache
        .get(&key)
        .filter(|h| h.version == state.version && h.through <= state.embedded_through);
    if let Some(held) = &held
        && held.through == state.embedded_through
    {
        return Ok(held.clone());
    }
    let from = held.as_ref().map_or(0, |h| h.through);
    let rows = client
        .query_typed(
            &format!(
                "SELECT v.sequence, v.chunk, v.code, v.vector, m.role, ({MESSAGE_BYTES})::bigint AS own
                 FROM message_vectors v
                 JOIN messages m ON m.tenant_id = v.tenant_id AND m.conversation_id = v.conversation_id
                      AND m.sequence = v.sequence
                 WHERE v.tenant_id = $1 AND v.conversation_id = $2 AND v.sequence > $3 AND v.sequence <= $4
                 ORDER BY v.sequence, v.chunk"
            ),
            &[
                (&t, Type::TEXT),
                (&c, Type::TEXT),
                (&from, Type::INT8),
                (&state.embedded_through, Type::INT8),
            ],
        )
        .await?;
    let mut codes = match &held {
        Some(h) => Codes {
            version: state.version,
            through: state.embedded_through,
            ..Codes::clone(h)
        },
        None => Codes {
            version: state.version,
            through: state.embedded_through,
            keys: Vec::new(),
            messages: Vec::new(),
            words: Vec::new(),
            width: 0,
            scales: Vec::new(),
            values: Vec::new(),
            dimensions: 0,
        },
    };
    for row in &rows {
        codes.push_row(row)?;
    }
    // Too large with its vectors: held without them (its rescoring reads rows).
    if codes.dimensions == NOT_HELD || codes.bytes() > cache.budget {
        codes.scales = Vec::new();
        codes.values = Vec::new();
        codes.dimensions = NOT_HELD;
    }
    let codes = Arc::new(codes);
    cache.put(key, codes.clone());
    Ok(codes)
}
