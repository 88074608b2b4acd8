//! The sign-bit codes of semantic search as a replica holds them ([`VectorCodes`]): each
//! searched conversation's, bounded in bytes, checked against the log's version and its late
//! stores, and extended as the watermark moves (docs/design.md, "Recall").

use std::sync::Arc;

use tokio_postgres::types::Type;

use super::rows::{MESSAGE_BYTES, column};
use crate::{
    domain::{
        Role, Sequence,
        search::vectors::{self, ChunkCode, PassageVector},
    },
    store::{LogVersion, StoreError},
};

/// [`Codes::dimensions`] of codes held without their vectors.
const NOT_HELD: usize = usize::MAX;

/// A conversation's codes as a replica holds them.
#[derive(Debug, Clone)]
pub(super) struct Codes {
    version: LogVersion,
    /// The watermark they were read up to.
    through: i64,
    /// The conversation's late stores when they were read: one since, and they are read again.
    late: i64,
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
    pub(super) fn has_vectors(&self) -> bool {
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
    pub(super) fn vector(&self, sequence: Sequence, chunk: u16) -> Option<PassageVector> {
        if !self.has_vectors() {
            return None;
        }
        let i = self.keys.binary_search(&(sequence, chunk)).ok()?;
        let values = &self.values[i * self.dimensions..(i + 1) * self.dimensions];
        Some(PassageVector::from_parts(self.scales[i], values))
    }

    /// The codes, each with its message's role.
    pub(super) fn iter(&self) -> impl Iterator<Item = (ChunkCode<'_>, Role)> {
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
    pub(super) fn size(&self, sequence: Sequence) -> Option<i64> {
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
    /// Vectors stored late, at or before the watermark (migration 17), so far.
    pub(super) embedded_late: i64,
    pub(super) last: i64,
}

/// The conversation's codes up to its watermark: the replica's, extended or read again as the
/// log's version and watermark say.
pub(super) async fn current_codes(
    client: &deadpool_postgres::Object,
    cache: &VectorCodes,
    (t, c): (&str, &str),
    state: &LogState,
) -> Result<Arc<Codes>, StoreError> {
    let key = (t.to_string(), c.to_string());
    let held = cache.get(&key).filter(|h| {
        h.version == state.version && h.late == state.embedded_late && h.through <= state.embedded_through
    });
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
            late: state.embedded_late,
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
