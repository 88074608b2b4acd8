//! Conversations as resources (docs/design.md, "Conversations as resources"): their title, status, labels and expiry, the
//! keyset of the newest-activity-first listing, and what forking and redaction do to a log and
//! to what was derived from it. The stores write what these functions decide.

use std::{collections::BTreeMap, time::SystemTime};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

use super::{
    ConversationId, Sequence,
    message::Usage,
    violation::{Violations, check_no_nul},
};

mod fork;
mod redaction;
mod rewind;

/// Bytes a title may have.
pub const MAX_TITLE_BYTES: usize = 1024;
/// Labels a conversation may carry.
pub const MAX_LABELS: usize = 64;
/// Bytes of a label key.
pub const MAX_LABEL_KEY_BYTES: usize = 63;
/// Bytes of a label value.
pub const MAX_LABEL_VALUE_BYTES: usize = 256;
/// Conversations one ListConversations page holds at most.
pub const MAX_LIST_PAGE: usize = 1000;
/// Page size of ListConversations when the request leaves it at 0.
pub const DEFAULT_LIST_PAGE: usize = 50;

/// What a redacted message's content becomes.
pub const REDACTED_CONTENT: &str = "[redacted]";

/// Where a conversation stands, as its owner sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConversationStatus {
    /// In use (every conversation starts here).
    #[default]
    Active,
    /// Waiting for the user's answer.
    AwaitingAnswer,
    /// Nothing happening.
    Idle,
    /// Finished.
    Closed,
}

impl ConversationStatus {
    /// The name the database stores.
    pub fn as_str(self) -> &'static str {
        match self {
            ConversationStatus::Active => "active",
            ConversationStatus::AwaitingAnswer => "awaiting_answer",
            ConversationStatus::Idle => "idle",
            ConversationStatus::Closed => "closed",
        }
    }

    /// Parses a name written by [`ConversationStatus::as_str`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "active" => Some(ConversationStatus::Active),
            "awaiting_answer" => Some(ConversationStatus::AwaitingAnswer),
            "idle" => Some(ConversationStatus::Idle),
            "closed" => Some(ConversationStatus::Closed),
            _ => None,
        }
    }
}

/// A conversation as a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// Its id.
    pub id: ConversationId,
    /// Caller-set title, possibly empty.
    pub title: String,
    /// Caller-set status.
    pub status: ConversationStatus,
    /// Caller-set labels.
    pub labels: BTreeMap<String, String>,
    /// When it was created.
    pub created_at: SystemTime,
    /// Its last append or update: the order of the listing.
    pub updated_at: SystemTime,
    /// The log's last sequence.
    pub last_sequence: Sequence,
    /// The summary's watermark.
    pub summary_through_sequence: Sequence,
    /// The working memory's version (0 without one).
    pub memory_version: u64,
    /// When retention deletes it, if set.
    pub expire_time: Option<SystemTime>,
    /// The conversation and sequence it was forked from.
    pub forked_from: Option<(ConversationId, Sequence)>,
    /// The usage of the messages the log holds, summed.
    pub usage: Usage,
}

impl Conversation {
    /// Its place in the listing.
    pub fn activity_key(&self) -> ActivityKey {
        ActivityKey {
            micros: micros(self.updated_at),
            id: self.id.clone(),
        }
    }
}

/// Microseconds since the epoch: the resolution PostgreSQL keeps, so both stores order and
/// page alike.
pub fn micros(time: SystemTime) -> i64 {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// `time` at microsecond resolution (what PostgreSQL keeps), so both stores hold the same
/// value.
pub fn to_micros(time: SystemTime) -> SystemTime {
    let micros = micros(time);
    match u64::try_from(micros) {
        Ok(after) => SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(after),
        Err(_) => SystemTime::UNIX_EPOCH - std::time::Duration::from_micros(micros.unsigned_abs()),
    }
}

/// Seconds since the epoch of the earliest and latest times ctxd stores (the range of
/// `google.protobuf.Timestamp`: years 1 to 9999; PostgreSQL holds all of them).
pub const TIME_RANGE_SECS: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// The fields an update sets; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationPatch {
    /// New title.
    pub title: Option<String>,
    /// New status.
    pub status: Option<ConversationStatus>,
    /// New labels (the whole map).
    pub labels: Option<BTreeMap<String, String>>,
    /// New expiry (`Some(None)` clears it).
    pub expire_time: Option<Option<SystemTime>>,
}

impl ConversationPatch {
    /// Applies the patch to `conversation`.
    pub fn apply_to(&self, conversation: &mut Conversation) {
        if let Some(title) = &self.title {
            conversation.title.clone_from(title);
        }
        if let Some(status) = self.status {
            conversation.status = status;
        }
        if let Some(labels) = &self.labels {
            conversation.labels.clone_from(labels);
        }
        if let Some(expire_time) = self.expire_time {
            conversation.expire_time = expire_time;
        }
    }
}

/// Records what is wrong with a title.
pub fn check_title(v: &mut Violations, title: &str, field: &str) {
    if title.len() > MAX_TITLE_BYTES {
        v.add(
            field,
            format!("is {} bytes; the limit is {MAX_TITLE_BYTES}", title.len()),
        );
    }
    if title.chars().any(|c| c.is_control()) {
        v.add(field, "must not contain control characters");
    }
}

/// Records what is wrong with a set of labels (`field` names the map): at most [`MAX_LABELS`];
/// keys of 1 to 63 bytes, a lowercase letter then lowercase letters, digits, `_`, `-` or `.`;
/// values up to 256 bytes without control characters.
pub fn check_labels(v: &mut Violations, labels: &BTreeMap<String, String>, field: &str) {
    if labels.len() > MAX_LABELS {
        v.add(
            field,
            format!("has {} labels; the limit is {MAX_LABELS}", labels.len()),
        );
    }
    for (key, value) in labels {
        if !label_key_ok(key) {
            v.add(
                format!("{field}[{}]", clip(key)),
                format!(
                    "label keys are 1 to {MAX_LABEL_KEY_BYTES} bytes: a lowercase letter, then lowercase letters, digits, '_', '-' or '.'"
                ),
            );
        }
        if value.len() > MAX_LABEL_VALUE_BYTES {
            v.add(
                format!("{field}[{}]", clip(key)),
                format!(
                    "value is {} bytes; the limit is {MAX_LABEL_VALUE_BYTES}",
                    value.len()
                ),
            );
        }
        if value.chars().any(|c| c.is_control()) {
            v.add(
                format!("{field}[{}]", clip(key)),
                "value must not contain control characters",
            );
        }
        check_no_nul(v, value, || format!("{field}[{}]", clip(key)));
    }
}

fn label_key_ok(key: &str) -> bool {
    let mut bytes = key.bytes();
    key.len() <= MAX_LABEL_KEY_BYTES
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.'))
}

/// A key echoed in a field path: printable ASCII, at most 64 bytes.
fn clip(key: &str) -> String {
    key.chars().filter(|c| c.is_ascii_graphic()).take(64).collect()
}

/// A conversation's place in the newest-activity-first order: later activity first, then the
/// greater id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActivityKey {
    /// [`Conversation::updated_at`] in microseconds.
    pub micros: i64,
    /// The conversation id.
    pub id: ConversationId,
}

/// What ListConversations asks a store for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Labels every listed conversation carries (with these values).
    pub labels: BTreeMap<String, String>,
    /// Only conversations with this status.
    pub status: Option<ConversationStatus>,
    /// The page's size.
    pub limit: usize,
    /// Only conversations after this key (the previous page's last).
    pub after: Option<ActivityKey>,
}

impl ListQuery {
    /// True when `conversation` passes the filters.
    pub fn matches(&self, conversation: &Conversation) -> bool {
        self.status.is_none_or(|s| s == conversation.status)
            && self
                .labels
                .iter()
                .all(|(k, v)| conversation.labels.get(k) == Some(v))
    }

    /// A fingerprint of the filters, so a page token is refused with other filters.
    fn fingerprint(&self) -> [u8; 8] {
        let mut hasher = Sha256::new();
        hasher.update(self.status.map_or("", ConversationStatus::as_str));
        for (k, v) in &self.labels {
            hasher.update((k.len() as u64).to_le_bytes());
            hasher.update(k);
            hasher.update((v.len() as u64).to_le_bytes());
            hasher.update(v);
        }
        let digest = hasher.finalize();
        let mut fingerprint = [0; 8];
        fingerprint.copy_from_slice(&digest[..8]);
        fingerprint
    }

    /// The opaque token of the page after `last`.
    pub fn page_token(&self, last: &ActivityKey) -> String {
        let mut raw = Vec::with_capacity(16 + last.id.as_str().len());
        raw.extend_from_slice(&self.fingerprint());
        raw.extend_from_slice(&last.micros.to_be_bytes());
        raw.extend_from_slice(last.id.as_str().as_bytes());
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Reads a token [`ListQuery::page_token`] made for the same filters.
    pub fn parse_page_token(&self, token: &str) -> Result<ActivityKey, &'static str> {
        const UNREADABLE: &str = "is not a page token of ListConversations";
        let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| UNREADABLE)?;
        if raw.len() < 17 {
            return Err(UNREADABLE);
        }
        if raw[..8] != self.fingerprint() {
            return Err("was made for other filters (labels, status)");
        }
        let micros = i64::from_be_bytes(raw[8..16].try_into().map_err(|_| UNREADABLE)?);
        if !TIME_RANGE_SECS.contains(&micros.div_euclid(1_000_000)) {
            return Err(UNREADABLE);
        }
        let id = String::from_utf8(raw[16..].to_vec()).map_err(|_| UNREADABLE)?;
        let id = ConversationId::parse(id).map_err(|_| UNREADABLE)?;
        Ok(ActivityKey { micros, id })
    }
}

/// A page of conversations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationPage {
    /// Newest activity first.
    pub conversations: Vec<Conversation>,
    /// True when more conversations follow the last one.
    pub has_more: bool,
}

pub use fork::{ForkPlan, ForkRefusal, ForkSource, ForkTx, fork, memory_within};
pub use redaction::{
    append_covers, forget_in_memory, redacted, same_memory, summary_covers, tombstone, unchanged_since,
};
pub use rewind::{RewindRefusal, RewindTx, check_rewind, rewind, rewound_memory};

/// What UpdateConversation does when the conversation does not exist (`allow_missing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    /// Creates it empty, then patches it.
    Create,
    /// Answers NOT_FOUND.
    NotFound,
}

#[cfg(test)]
mod tests;
