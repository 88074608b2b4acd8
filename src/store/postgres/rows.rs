//! Row decoding and the column lists statements share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use tokio_postgres::{
    Row,
    types::{FromSql, Json, ToSql},
};

use super::errors::corrupt;
use crate::{
    domain::{
        CountedBatch, Role, Sequence, StoredMessage,
        context::{TokenCounts, anchor::LogPosition},
        message::{Attachment, LlmError, Message, Reasoning, ToolCall, Usage},
        native::NativeContent,
        tokenize::Tokenizer,
        working_memory::WorkingMemory,
    },
    store::{CappedPage, StoreError},
};

/// Columns of a stored message, as [`stored_messages`] reads them by name.
/// Empty JSON lists and maps come back as NULL: most messages have no tool calls, attachments or
/// metadata, and skipping their JSON decoding is a sizeable part of BuildContext's CPU.
pub(super) const MESSAGE_COLUMNS: &str =
    "sequence, role, content, name, NULLIF(tool_calls, '[]') AS tool_calls, tool_call_id,
     NULLIF(attachments, '[]') AS attachments, NULLIF(metadata, '{}') AS metadata,
     exclude_from_context, pinned, error, response_id, created_at,
     tokens_o200k, tokens_cl100k, tokens_approx, call_sequence, token_offset, previous_turn_offset,
     native";

/// A message's size as ctxd loads it, in bytes: its text and JSON columns as PostgreSQL
/// measures them (`Message::loaded_bytes` up to JSON punctuation). `octet_length` of a text
/// reads the stored length without decompressing it.
/// Empty JSON lists and maps (most messages) are not serialized to be measured.
/// Rows appended since migration 12 carry it (`loaded_bytes`, [`Message::loaded_bytes`] at
/// append); older ones are measured.
pub(super) const MESSAGE_BYTES: &str = "coalesce(loaded_bytes, octet_length(content) + octet_length(name)
     + coalesce(octet_length(tool_call_id), 0) + octet_length(response_id)
     + CASE WHEN tool_calls = '[]' THEN 0 ELSE octet_length(tool_calls::text) END
     + CASE WHEN attachments = '[]' THEN 0 ELSE octet_length(attachments::text) END
     + CASE WHEN metadata = '{}' THEN 0 ELSE octet_length(metadata::text) END
     + coalesce(octet_length(error::text), 0) + coalesce(octet_length(native::text), 0) + 256)";

/// The messages matching `filter`, ordered by sequence in `order` (`ASC` or `DESC`), at most
/// `limit` of them, and no more once their [`MESSAGE_BYTES`] reach `max_bytes` (the message
/// that reaches it is the last one; a first message is always returned). `limit` and
/// `max_bytes` are placeholders (`$n::bigint`). After the [`MESSAGE_COLUMNS`] comes one bool,
/// `reached`: true when the page reached `max_bytes`, so more may follow.
pub(super) fn capped_page(filter: &str, order: &str, limit: &str, max_bytes: &str) -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS}, upto >= {max_bytes} AS reached FROM (
             SELECT m.*, {MESSAGE_BYTES} AS own,
                    sum({MESSAGE_BYTES}) OVER (ORDER BY sequence {order} ROWS UNBOUNDED PRECEDING) AS upto
             FROM messages m WHERE {filter}
             ORDER BY sequence {order} LIMIT {limit}) page
         WHERE upto - own < {max_bytes}
         ORDER BY sequence {order}"
    )
}

/// As [`capped_page`], but the message that would take the page past `max_bytes` is left out
/// (a first message is always returned), and `reached` says that one was.
pub(super) fn fitting_page(filter: &str, limit: &str, max_bytes: &str) -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS}, coalesce(upto + next_own > {max_bytes}, false) AS reached FROM (
             SELECT sized.*,
                    sum(own) OVER (ORDER BY sequence ROWS UNBOUNDED PRECEDING) AS upto,
                    lead(own) OVER (ORDER BY sequence) AS next_own
             FROM (SELECT m.*, {MESSAGE_BYTES} AS own FROM messages m WHERE {filter}) sized
             ORDER BY sequence LIMIT {limit}) page
         WHERE upto <= {max_bytes} OR upto = own
         ORDER BY sequence"
    )
}

/// `max_bytes` as a [`capped_page`] parameter (`usize::MAX` means no limit).
pub(super) fn byte_limit(max_bytes: usize) -> i64 {
    i64::try_from(max_bytes).unwrap_or(i64::MAX)
}

/// The rows of a [`capped_page`] query.
pub(super) fn capped_messages(rows: &[Row]) -> Result<CappedPage, StoreError> {
    let cut_by_size = match rows.last() {
        Some(row) => column(row, "reached")?,
        None => false,
    };
    Ok(CappedPage {
        messages: stored_messages(rows)?,
        cut_by_size,
    })
}

/// One column of `row` by name; a missing column or a type mismatch is an internal error, never
/// a panic.
pub(super) fn column<'a, T: FromSql<'a>>(row: &'a Row, name: &str) -> Result<T, StoreError> {
    row.try_get(name)
        .map_err(|e| StoreError::Internal { source: Box::new(e) })
}

/// Rows of [`MESSAGE_COLUMNS`]. The columns are looked up by name once per result set, not
/// once per row (a name lookup scans the columns, on every row of every BuildContext).
pub(super) fn stored_messages(rows: &[Row]) -> Result<Vec<StoredMessage>, StoreError> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let at = MessageColumns::locate(first)?;
    rows.iter().map(|row| at.decode(row)).collect()
}

/// One row of [`MESSAGE_COLUMNS`].
pub(super) fn stored_message(row: &Row) -> Result<StoredMessage, StoreError> {
    MessageColumns::locate(row)?.decode(row)
}

/// Column `index` of `row` (located by name in [`MessageColumns::locate`]).
fn at<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|e| StoreError::Internal { source: Box::new(e) })
}

/// Where each of [`MESSAGE_COLUMNS`] is in a result set.
struct MessageColumns {
    sequence: usize,
    role: usize,
    content: usize,
    name: usize,
    tool_calls: usize,
    tool_call_id: usize,
    attachments: usize,
    metadata: usize,
    exclude_from_context: usize,
    pinned: usize,
    error: usize,
    response_id: usize,
    created_at: usize,
    tokens: [usize; 3],
    call_sequence: usize,
    token_offset: usize,
    previous_turn_offset: usize,
    native: usize,
}

impl MessageColumns {
    /// The positions of the named columns in `row`'s result set.
    fn locate(row: &Row) -> Result<Self, StoreError> {
        let at = |name: &str| {
            row.columns()
                .iter()
                .position(|c| c.name() == name)
                .ok_or_else(|| corrupt(&format!("message column {name}")))
        };
        Ok(Self {
            sequence: at("sequence")?,
            role: at("role")?,
            content: at("content")?,
            name: at("name")?,
            tool_calls: at("tool_calls")?,
            tool_call_id: at("tool_call_id")?,
            attachments: at("attachments")?,
            metadata: at("metadata")?,
            exclude_from_context: at("exclude_from_context")?,
            pinned: at("pinned")?,
            error: at("error")?,
            response_id: at("response_id")?,
            created_at: at("created_at")?,
            tokens: [at("tokens_o200k")?, at("tokens_cl100k")?, at("tokens_approx")?],
            call_sequence: at("call_sequence")?,
            token_offset: at("token_offset")?,
            previous_turn_offset: at("previous_turn_offset")?,
            native: at("native")?,
        })
    }

    /// The stored message in `row`.
    fn decode(&self, row: &Row) -> Result<StoredMessage, StoreError> {
        let role_name: &str = at(row, self.role)?;
        let role = Role::from_name(role_name).ok_or_else(|| corrupt("role"))?;
        let tool_calls: Option<Json<_>> = at(row, self.tool_calls)?;
        let attachments: Option<Json<_>> = at(row, self.attachments)?;
        let metadata: Option<Json<_>> = at(row, self.metadata)?;
        let error: Option<Json<LlmError>> = at(row, self.error)?;
        let native: Option<Json<NativeColumn>> = at(row, self.native)?;
        let native = native.map(|Json(n)| n).unwrap_or_default();
        let message = Message {
            role,
            content: at(row, self.content)?,
            name: at(row, self.name)?,
            tool_calls: tool_calls.map(|Json(v)| v).unwrap_or_default(),
            tool_call_id: at(row, self.tool_call_id)?,
            attachments: attachments.map(|Json(v)| v).unwrap_or_default(),
            metadata: metadata.map(|Json(v)| v).unwrap_or_default(),
            exclude_from_context: at(row, self.exclude_from_context)?,
            pinned: at(row, self.pinned)?,
            error: error.map(|Json(e)| e),
            response_id: at(row, self.response_id)?,
            reasoning: native.reasoning,
            content_item_id: native.content_item_id,
            content_signature: native.content_signature,
            content_phase: native.content_phase,
            native: native.json,
            usage: native.usage,
            occurred_at: native.occurred_at.map(from_micros),
        };
        let count = |index: usize| -> Result<Option<u32>, StoreError> {
            at(row, index).map(|n: Option<i32>| n.map(|n| n.max(0) as u32))
        };
        let offset = |index: usize| -> Result<Option<u64>, StoreError> {
            at(row, index).map(|v: Option<i64>| v.map(|v| v.max(0) as u64))
        };
        let position = LogPosition {
            offset: offset(self.token_offset)?.unwrap_or(0),
            previous_turn: offset(self.previous_turn_offset)?,
        };
        let call_sequence: Option<i64> = at(row, self.call_sequence)?;
        Ok(StoredMessage {
            sequence: Sequence::from_stored(at(row, self.sequence)?),
            created_at: at(row, self.created_at)?,
            tokens: [
                count(self.tokens[0])?,
                count(self.tokens[1])?,
                count(self.tokens[2])?,
            ]
            .into(),
            reasoning_tokens: native.tokens.into(),
            native_tokens: native.json_tokens.into(),
            call_sequence: call_sequence.map(Sequence::from_stored),
            turn_anchor: position.anchor(&message),
            message,
        })
    }
}

/// The `native` column: a message's reasoning, the text's item id and signature, and their
/// token counts (o200k, cl100k, approx: always all three); NULL when the message has none.
#[derive(Debug, Default, Serialize, Deserialize)]
struct NativeColumn {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    reasoning: Vec<Reasoning>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    content_item_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    content_signature: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    content_phase: String,
    #[serde(default)]
    tokens: [u32; 3],
    #[serde(default)]
    json: Option<NativeContent>,
    #[serde(default)]
    json_tokens: [u32; 3],
    #[serde(default)]
    usage: Usage,
    /// The caller's `occurred_at`, in microseconds since the Unix epoch.
    #[serde(default)]
    occurred_at: Option<i64>,
}

/// What a message stores in the `native` column (see [`NativeColumn`]).
#[derive(Debug, Serialize)]
pub(super) struct NativeRef<'a> {
    #[serde(skip_serializing_if = "<[Reasoning]>::is_empty")]
    reasoning: &'a [Reasoning],
    #[serde(skip_serializing_if = "str::is_empty")]
    content_item_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    content_signature: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    content_phase: &'a str,
    tokens: [u32; 3],
    #[serde(skip_serializing_if = "Option::is_none")]
    json: Option<&'a NativeContent>,
    #[serde(skip_serializing_if = "is_zero_counts")]
    json_tokens: [u32; 3],
    #[serde(skip_serializing_if = "Usage::is_zero")]
    usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    occurred_at: Option<i64>,
}

fn is_zero_counts(counts: &[u32; 3]) -> bool {
    *counts == [0; 3]
}

/// A time as microseconds since the Unix epoch (negative before it), as the `native` column
/// keeps `occurred_at`.
pub(super) fn to_micros(time: std::time::SystemTime) -> i64 {
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// [`to_micros`] back.
pub(super) fn from_micros(micros: i64) -> std::time::SystemTime {
    let magnitude = std::time::Duration::from_micros(micros.unsigned_abs());
    match micros >= 0 {
        true => std::time::UNIX_EPOCH + magnitude,
        false => std::time::UNIX_EPOCH - magnitude,
    }
}

/// A message size as the `loaded_bytes` column holds it.
pub(super) fn stored_size(bytes: usize) -> i32 {
    i32::try_from(bytes).unwrap_or(i32::MAX)
}

/// Sums of the messages' usage (in their `native` column) as `input`, `output`, `cached` and
/// `reasoning`, for a SELECT over `messages`: saturating at `bigint`'s largest value, as every
/// usage total does (`Usage::plus`).
pub(super) const USAGE_SUMS: &str = "least(coalesce(sum((native->'usage'->>'input_tokens')::numeric), 0), 9223372036854775807) AS input,
     least(coalesce(sum((native->'usage'->>'output_tokens')::numeric), 0), 9223372036854775807) AS output,
     least(coalesce(sum((native->'usage'->>'cached_input_tokens')::numeric), 0), 9223372036854775807) AS cached,
     least(coalesce(sum((native->'usage'->>'reasoning_tokens')::numeric), 0), 9223372036854775807) AS reasoning";

/// The `native` column of `message`, `None` when it carries no native data (its tool calls'
/// signatures count: their tokens are stored here), no phase, no native JSON and no usage.
pub(super) fn native_column(
    message: &Message,
    tokens: TokenCounts,
    json_tokens: TokenCounts,
) -> Option<Json<NativeRef<'_>>> {
    let bare = message.native_provider().is_none()
        && message.content_phase.is_empty()
        && message.native.is_none()
        && message.usage.is_zero()
        && message.occurred_at.is_none();
    if bare {
        return None;
    }
    Some(Json(NativeRef {
        reasoning: &message.reasoning,
        content_item_id: &message.content_item_id,
        content_signature: &message.content_signature,
        content_phase: &message.content_phase,
        tokens: Tokenizer::ALL.map(|t| tokens.get(t)),
        json: message.native.as_ref(),
        json_tokens: Tokenizer::ALL.map(|t| json_tokens.get(t)),
        usage: message.usage,
        occurred_at: message.occurred_at.map(to_micros),
    }))
}

/// Counts as the `native` column stores them: o200k, cl100k and approx.
impl From<[u32; 3]> for TokenCounts {
    fn from(counts: [u32; 3]) -> Self {
        counts.map(Some).into()
    }
}

/// Counts as the messages table stores them: o200k, cl100k and approx, none where not
/// counted yet.
impl From<[Option<u32>; 3]> for TokenCounts {
    fn from(stored: [Option<u32>; 3]) -> Self {
        let mut counts = TokenCounts::default();
        for (tokenizer, count) in Tokenizer::ALL.into_iter().zip(stored) {
            match count {
                Some(count) => counts.set(tokenizer, count),
                None => counts.uncounted = counts.uncounted.with(tokenizer),
            }
        }
        counts
    }
}

/// A working memory from the `memory_document`, `memory_through_sequence` and `memory_version`
/// columns (NULL when none is stored).
pub(super) fn memory_from_row(row: &Row) -> Result<Option<WorkingMemory>, StoreError> {
    let document: Option<Json<WorkingMemory>> = column(row, "memory_document")?;
    let through: Option<i64> = column(row, "memory_through_sequence")?;
    let version: Option<i64> = column(row, "memory_version")?;
    Ok(document.map(|Json(mut memory)| {
        memory.through_sequence = Sequence::from_stored(through.unwrap_or(0));
        memory.version = version.unwrap_or(0).max(0) as u64;
        memory
    }))
}

/// A batch's messages, column by column, as the append statements insert them; token counts
/// included.
pub(super) struct Columns<'a> {
    roles: Vec<&'a str>,
    contents: Vec<&'a str>,
    names: Vec<&'a str>,
    tool_calls: Vec<Json<&'a Vec<ToolCall>>>,
    tool_call_ids: Vec<Option<&'a str>>,
    attachments: Vec<Json<&'a Vec<Attachment>>>,
    metadata: Vec<Json<&'a BTreeMap<String, String>>>,
    excluded: Vec<bool>,
    pinned: Vec<bool>,
    errors: Vec<Option<Json<&'a LlmError>>>,
    response_ids: Vec<&'a str>,
    o200k: Vec<Option<i32>>,
    cl100k: Vec<Option<i32>>,
    approx: Vec<Option<i32>>,
    native: Vec<Option<Json<NativeRef<'a>>>>,
    loaded_bytes: Vec<i32>,
}

impl<'a> Columns<'a> {
    pub(super) fn of(batch: &'a CountedBatch) -> Self {
        let counted = &batch.messages;
        let m: Vec<&'a Message> = counted.iter().map(|c| &c.message).collect();
        let count = |tokenizer: Tokenizer| -> Vec<Option<i32>> {
            counted
                .iter()
                .map(|c| c.tokens.counted(tokenizer).map(stored_count))
                .collect()
        };
        Columns {
            roles: m.iter().map(|m| m.role.as_str()).collect(),
            contents: m.iter().map(|m| m.content.as_str()).collect(),
            names: m.iter().map(|m| m.name.as_str()).collect(),
            tool_calls: m.iter().map(|m| Json(&m.tool_calls)).collect(),
            tool_call_ids: m.iter().map(|m| m.tool_call_id.as_deref()).collect(),
            attachments: m.iter().map(|m| Json(&m.attachments)).collect(),
            metadata: m.iter().map(|m| Json(&m.metadata)).collect(),
            excluded: m.iter().map(|m| m.exclude_from_context).collect(),
            pinned: m.iter().map(|m| m.pinned).collect(),
            errors: m.iter().map(|m| m.error.as_ref().map(Json)).collect(),
            response_ids: m.iter().map(|m| m.response_id.as_str()).collect(),
            o200k: count(Tokenizer::O200kBase),
            cl100k: count(Tokenizer::Cl100kBase),
            approx: count(Tokenizer::Approx),
            native: counted
                .iter()
                .map(|c| native_column(&c.message, c.reasoning_tokens, c.native_tokens))
                .collect(),
            loaded_bytes: m.iter().map(|m| stored_size(m.loaded_bytes())).collect(),
        }
    }

    /// Message `i`'s values, in the order of the messages table's columns from `role` on.
    pub(super) fn row(&self, i: usize) -> [&(dyn ToSql + Sync); 16] {
        [
            &self.roles[i],
            &self.contents[i],
            &self.names[i],
            &self.tool_calls[i],
            &self.tool_call_ids[i],
            &self.attachments[i],
            &self.metadata[i],
            &self.excluded[i],
            &self.pinned[i],
            &self.errors[i],
            &self.response_ids[i],
            &self.o200k[i],
            &self.cl100k[i],
            &self.approx[i],
            &self.native[i],
            &self.loaded_bytes[i],
        ]
    }
}

/// A token count in its `integer` column.
pub(super) fn stored_count(count: u32) -> i32 {
    i32::try_from(count).unwrap_or(i32::MAX)
}
