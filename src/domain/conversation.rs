//! Conversations as resources (docs/design.md, "Conversations as resources"): their title, status, labels and expiry, the
//! keyset of the newest-activity-first listing, and what forking and redaction do to a log and
//! to what was derived from it. The stores write what these functions decide.

use std::{collections::BTreeMap, time::SystemTime};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

use super::{
    ConversationId, Message, Sequence, ToolCall,
    violation::{Violations, check_no_nul},
    working_memory::WorkingMemory,
};

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

/// What [`Message`] becomes when redacted: role, name, tool-call ids and names, the answered
/// call, flags and response id stay (the protocol and the ordering hold); content becomes
/// [`REDACTED_CONTENT`], tool arguments `{}`, and attachments, error details, reasoning,
/// signatures and item ids go. Metadata
/// stays: it is the caller's bookkeeping (mode, run id), not what was said.
pub fn tombstone(message: &Message) -> Message {
    Message {
        role: message.role,
        content: REDACTED_CONTENT.to_owned(),
        name: message.name.clone(),
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| ToolCall::new(call.id.clone(), call.name.clone(), "{}"))
            .collect(),
        tool_call_id: message.tool_call_id.clone(),
        attachments: Vec::new(),
        metadata: message.metadata.clone(),
        exclude_from_context: message.exclude_from_context,
        pinned: message.pinned,
        error: None,
        response_id: message.response_id.clone(),
        reasoning: Vec::new(),
        content_item_id: String::new(),
        content_signature: String::new(),
        content_phase: String::new(),
    }
}

/// Why a log cannot be forked at a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkRefusal {
    /// The sequence is past the log's end.
    PastEnd {
        /// The log's last sequence.
        last: Sequence,
    },
    /// A tool result after the sequence answers a call at or before it.
    InsideToolGroup,
}

impl ForkRefusal {
    /// The field violation it answers with.
    pub fn violations(self) -> Violations {
        let description = match self {
            ForkRefusal::PastEnd { last } => {
                format!("is past the end of the conversation (last sequence {last})")
            }
            ForkRefusal::InsideToolGroup => "is inside a tool-call group: a call at or before it \
                 is answered after it; fork before the call or after its last result"
                .to_owned(),
        };
        Violations::single("through_sequence", description)
    }
}

/// The working memory a fork through `through` starts with: only the items and glossary
/// entries whose every source lies within it; a superseding item that is left out no longer
/// supersedes; the prose summary only if the memory did not read past `through`. `None` when
/// nothing is left.
pub fn memory_within(memory: &WorkingMemory, through: Sequence) -> Option<WorkingMemory> {
    let mut forked = memory.clone();
    forked.retain_sources(|s| s <= through);
    if forked.through_sequence > through {
        forked.summary.clear();
        forked.through_sequence = through;
    }
    forked.version = 1;
    (!forked.is_empty()).then_some(forked)
}

/// The working memory without anything taken from `sequence`: items and glossary entries
/// citing it are removed (an item they superseded is current again), and the prose summary is
/// cleared when the memory had read the message. True when anything changed.
pub fn forget_in_memory(memory: &mut WorkingMemory, sequence: Sequence) -> bool {
    let before = memory.clone();
    memory.retain_sources(|s| s != sequence);
    if memory.through_sequence >= sequence && !memory.summary.is_empty() {
        memory.summary.clear();
    }
    *memory != before
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::working_memory::{Category, Supersedes};

    fn query(status: Option<ConversationStatus>, labels: &[(&str, &str)]) -> ListQuery {
        ListQuery {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            status,
            limit: 10,
            after: None,
        }
    }

    #[test]
    fn a_page_token_reads_back_only_with_the_filters_it_was_made_with() {
        let key = ActivityKey {
            micros: 1_763_000_000_123_456,
            id: ConversationId::parse("project-42/pm ~?").expect("valid id"),
        };
        let q = query(Some(ConversationStatus::Idle), &[("project", "p42")]);
        let token = q.page_token(&key);
        assert_eq!(q.parse_page_token(&token), Ok(key.clone()));
        for other in [
            query(None, &[("project", "p42")]),
            query(Some(ConversationStatus::Idle), &[]),
            query(Some(ConversationStatus::Idle), &[("project", "p43")]),
        ] {
            assert!(other.parse_page_token(&token).is_err());
        }
        for garbage in ["", "!!", "AAAA", &format!("A{}", &token[1..])] {
            assert!(q.parse_page_token(garbage).is_err(), "{garbage:?}");
        }
    }

    #[test]
    fn label_keys_follow_the_documented_syntax() {
        for ok in ["a", "project", "k8s.io_name-2", &"a".repeat(63)] {
            assert!(label_key_ok(ok), "{ok}");
        }
        for bad in ["", "A", "1abc", "_x", "a b", "ä", &"a".repeat(64)] {
            assert!(!label_key_ok(bad), "{bad}");
        }
    }

    #[test]
    fn a_tombstone_keeps_the_protocol_and_drops_the_text() {
        let mut message = Message::text(crate::domain::Role::Assistant, "secret".into());
        message.tool_calls = vec![ToolCall {
            signature: "secret-signature".into(),
            ..ToolCall::new("c1", "login", r#"{"password":"secret"}"#)
        }];
        message.reasoning = vec![crate::domain::Reasoning {
            text: "secret thoughts".into(),
            signature: "secret-thought".into(),
            ..crate::domain::Reasoning::new(crate::domain::Provider::Gemini, "thought")
        }];
        message.content_signature = "secret-text".into();
        message.error = Some(crate::domain::LlmError {
            code: "x".into(),
            message: "secret".into(),
            partial_output: "secret".into(),
        });
        let tomb = tombstone(&message);
        assert!(!format!("{tomb:?}").contains("secret"));
        assert_eq!(tomb.native_provider(), None, "reasoning and signatures go");
        assert_eq!(
            (tomb.tool_calls[0].id.as_str(), tomb.tool_calls[0].name.as_str()),
            ("c1", "login")
        );
        assert_eq!(tombstone(&tomb), tomb, "redacting twice changes nothing");
    }

    /// A memory whose items cite random sources, some superseding others.
    fn memory() -> impl Strategy<Value = WorkingMemory> {
        let item = (0..3usize, prop::collection::vec(1..20i64, 1..4), any::<bool>());
        (prop::collection::vec(item, 0..30), 0..25u64).prop_map(|(items, through)| {
            let mut memory = WorkingMemory::default();
            for (i, (category, sources, supersede)) in items.into_iter().enumerate() {
                let category = [Category::Decisions, Category::Goals, Category::Constraints][category];
                let sources: Vec<Sequence> = sources.into_iter().map(Sequence::from_stored).collect();
                let how = if supersede {
                    Supersedes::Newest
                } else {
                    Supersedes::Nothing
                };
                memory.add(category, &format!("fact {i}"), &sources, how);
                if i % 4 == 0 {
                    memory.define(&format!("term {i}"), "meaning", &sources);
                }
            }
            memory.summary = "prose".into();
            memory.through_sequence = Sequence::from_stored(through as i64);
            memory.version = 3;
            memory
        })
    }

    fn every_item(memory: &WorkingMemory) -> Vec<&crate::domain::working_memory::MemoryItem> {
        Category::ALL.iter().flat_map(|c| memory.items(*c)).collect()
    }

    proptest! {
        #[test]
        fn a_forks_memory_holds_exactly_the_facts_sourced_within_the_prefix(
            memory in memory(),
            through in 0..22u64,
        ) {
            let through = Sequence::from_stored(through as i64);
            let within = |sources: &[Sequence]| sources.iter().all(|s| *s <= through);
            let expected: Vec<&str> = every_item(&memory)
                .into_iter()
                .filter(|i| within(&i.source_sequences))
                .map(|i| i.id.as_str())
                .collect();
            match memory_within(&memory, through) {
                None => prop_assert!(expected.is_empty()),
                Some(forked) => {
                    let ids: Vec<&str> = every_item(&forked).into_iter().map(|i| i.id.as_str()).collect();
                    prop_assert_eq!(ids, expected);
                    prop_assert!(forked.glossary.iter().all(|e| within(&e.source_sequences)));
                    prop_assert!(forked.through_sequence <= through);
                    prop_assert_eq!(forked.version, 1);
                    // Nothing is superseded by an item the fork does not have.
                    let kept: Vec<&str> = every_item(&forked).into_iter().map(|i| i.id.as_str()).collect();
                    for item in every_item(&forked) {
                        if let Some(by) = &item.superseded_by {
                            prop_assert!(kept.contains(&by.as_str()));
                        }
                    }
                    if memory.through_sequence > through {
                        prop_assert!(forked.summary.is_empty());
                    }
                }
            }
        }

        #[test]
        fn forgetting_a_message_removes_what_cites_it_and_keeps_the_rest(
            memory in memory(),
            sequence in 1..20u64,
        ) {
            let sequence = Sequence::from_stored(sequence as i64);
            let mut forgotten = memory.clone();
            let changed = forget_in_memory(&mut forgotten, sequence);
            prop_assert_eq!(changed, forgotten != memory);
            let cites = |sources: &[Sequence]| sources.contains(&sequence);
            prop_assert!(every_item(&forgotten).iter().all(|i| !cites(&i.source_sequences)));
            prop_assert!(forgotten.glossary.iter().all(|e| !cites(&e.source_sequences)));
            let kept: Vec<&str> = every_item(&memory)
                .into_iter()
                .filter(|i| !cites(&i.source_sequences))
                .map(|i| i.id.as_str())
                .collect();
            let ids: Vec<&str> = every_item(&forgotten).into_iter().map(|i| i.id.as_str()).collect();
            prop_assert_eq!(ids, kept);
            if memory.through_sequence >= sequence {
                prop_assert!(forgotten.summary.is_empty());
            }
        }
    }
}
