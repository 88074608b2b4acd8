//! The change feed's vocabulary (DESIGN 2.11, docs/design.md "Change feed"): what a change is,
//! and the cursor a consumer resumes from.
//!
//! Every write records one change in its own transaction. A change's place in the feed is its
//! [`Cursor`]: a *position* (on PostgreSQL, derived from the writing transaction's id so that a
//! transaction still running can only ever commit *after* every position already read; on the
//! in-memory store, a counter taken under the store's lock), then the conversation and that
//! conversation's change number. Within a conversation the change numbers follow commit order,
//! and positions never go down, so reading in cursor order delivers each conversation's changes
//! in the order they committed.

use std::time::{Duration, SystemTime};

use base64::Engine as _;

use super::{ConversationId, Sequence, StoredMessage};

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// An AppendMessage: `first..=last` are the appended sequences.
    Appended,
    /// A RedactMessage: `first == last` is the redacted message.
    Redacted,
    /// A RewindConversation: messages after `first - 1` are gone (`last` was the old end).
    Rewound,
    /// A DeleteConversation: the conversation and everything in it are gone.
    Deleted,
    /// The retention sweep deleted the conversation.
    Expired,
    /// A ForkConversation created this conversation holding `first..=last` of its source.
    Forked,
    /// An UpdateConversation changed the resource (title, status, labels, expiry).
    Updated,
    /// A summary was stored, through `last`.
    Summarized,
    /// The working memory was stored.
    MemoryUpdated,
}

impl ChangeKind {
    /// Every kind, by its stored code (`changes.kind`).
    const ALL: [ChangeKind; 9] = [
        ChangeKind::Appended,
        ChangeKind::Redacted,
        ChangeKind::Rewound,
        ChangeKind::Deleted,
        ChangeKind::Expired,
        ChangeKind::Forked,
        ChangeKind::Updated,
        ChangeKind::Summarized,
        ChangeKind::MemoryUpdated,
    ];

    /// The kind as the stores keep it: 1 to 9, the proto enum's numbers.
    pub fn code(self) -> i16 {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0) as i16 + 1
    }

    /// The kind a stored code names.
    pub fn from_code(code: i16) -> Option<Self> {
        let index = usize::try_from(code).ok()?.checked_sub(1)?;
        Self::ALL.get(index).copied()
    }
}

/// A place in the change feed: every change after it is still to come. Ordered by position,
/// then conversation (byte order; the store orders one position's changes by its collation,
/// see `service::change_window`), then the conversation's change number; its time takes no part
/// (see [`Ord`]).
#[derive(Debug, Clone)]
pub struct Cursor {
    /// Where the change's transaction stands among the others (see the module's notes).
    pub position: i64,
    /// The conversation, empty for a cursor between changes ([`Cursor::before`]).
    pub conversation: String,
    /// The conversation's change number.
    pub number: i64,
    /// When the change was made (or the cursor taken), in microseconds since the epoch: how
    /// retention tells a cursor it no longer holds.
    pub time_micros: i64,
}

impl Cursor {
    fn key(&self) -> (i64, &str, i64) {
        (self.position, &self.conversation, self.number)
    }
}

impl PartialEq for Cursor {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Cursor {}

impl PartialOrd for Cursor {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cursor {
    /// As the store compares them: the time is the cursor's, not part of its place.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// The prefix of every cursor this version writes: another format can come after it.
const CURSOR_PREFIX: &str = "c1.";

impl Cursor {
    /// A cursor before every change at `position` and after, taken at `time`.
    pub fn before(position: i64, time: SystemTime) -> Self {
        Cursor {
            position,
            conversation: String::new(),
            number: i64::MIN,
            time_micros: micros(time),
        }
    }

    /// The cursor as a client holds it: opaque, printable, URL-safe.
    pub fn encode(&self) -> String {
        let conversation = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&self.conversation);
        format!(
            "{CURSOR_PREFIX}{}.{}.{}.{conversation}",
            self.position, self.number, self.time_micros
        )
    }

    /// Reads a cursor a client sent; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let bad = || {
            "is not a cursor this server gave out (resume from a cursor of a change or a heartbeat)"
                .to_string()
        };
        let rest = raw.strip_prefix(CURSOR_PREFIX).ok_or_else(bad)?;
        let mut parts = rest.splitn(4, '.');
        let mut number = || parts.next().and_then(|p| p.parse::<i64>().ok());
        let (position, change, time_micros) = (number(), number(), number());
        let conversation = parts
            .next()
            .and_then(|p| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(p).ok())
            .and_then(|b| String::from_utf8(b).ok());
        match (position, change, time_micros, conversation) {
            (Some(position), Some(number), Some(time_micros), Some(conversation))
                if conversation.is_empty() || ConversationId::parse(conversation.clone()).is_ok() =>
            {
                Ok(Cursor {
                    position,
                    conversation,
                    number,
                    time_micros,
                })
            }
            _ => Err(bad()),
        }
    }

    /// When the cursor was taken.
    pub fn time(&self) -> SystemTime {
        from_micros(self.time_micros)
    }

    /// Whether a feed that keeps changes for `retention` still holds every change after this
    /// cursor at `now`.
    pub fn held(&self, retention: Duration, now: SystemTime) -> bool {
        now.duration_since(self.time())
            .map_or(true, |age| age <= retention)
    }
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Its place in the feed; resume after it with this cursor.
    pub cursor: Cursor,
    /// What it did.
    pub kind: ChangeKind,
    /// The first sequence it concerns (see [`ChangeKind`]; zero when none).
    pub first_sequence: Sequence,
    /// The last sequence it concerns (see [`ChangeKind`]; zero when none).
    pub last_sequence: Sequence,
    /// When it was made.
    pub time: SystemTime,
}

impl Change {
    /// The conversation it happened to.
    pub fn conversation(&self) -> &str {
        &self.cursor.conversation
    }
}

/// A change as a store records it in the transaction that makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewChange {
    /// What it did.
    pub kind: ChangeKind,
    /// The first sequence it concerns.
    pub first_sequence: Sequence,
    /// The last sequence it concerns.
    pub last_sequence: Sequence,
}

impl NewChange {
    /// A change that concerns `first..=last`.
    pub fn new(kind: ChangeKind, first: Sequence, last: Sequence) -> Self {
        Self {
            kind,
            first_sequence: first,
            last_sequence: last,
        }
    }

    /// A change that concerns no message.
    pub fn whole(kind: ChangeKind) -> Self {
        Self::new(kind, Sequence::ZERO, Sequence::ZERO)
    }
}

/// What a watcher asks the store for.
#[derive(Debug, Clone)]
pub struct ChangeQuery {
    /// Changes after this cursor.
    pub after: Cursor,
    /// Only this conversation's, when set.
    pub conversation: Option<ConversationId>,
    /// At most this many.
    pub limit: usize,
}

/// A page of changes, in cursor order.
#[derive(Debug, Clone, Default)]
pub struct ChangePage {
    /// The changes after the query's cursor that are settled (no transaction still running can
    /// come before them), at most the query's limit.
    pub changes: Vec<Change>,
    /// Where the next read starts: the last change's cursor when the page is full, else the
    /// settled horizon (every change before it was in this page or earlier ones).
    pub next: Option<Cursor>,
}

/// A change with the messages a watcher asked for.
#[derive(Debug, Clone)]
pub struct DeliveredChange {
    /// The change.
    pub change: Change,
    /// For an APPENDED change with `include_messages`: its messages as the log holds them when
    /// the change is delivered (a message redacted since comes as its tombstone, one rewound
    /// since does not come).
    pub messages: Vec<StoredMessage>,
    /// The append's messages did not all fit one response: those after the last carried are
    /// read with ListMessages.
    pub messages_truncated: bool,
}

/// Microseconds since the epoch.
pub fn micros(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The time `micros` microseconds after the epoch.
pub fn from_micros(micros: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(micros.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_it_was_written() {
        let cursor = Cursor {
            position: 7_300_000_123,
            conversation: "project-42/pm chat".into(),
            number: 12,
            time_micros: 1_790_000_000_000_000,
        };
        assert_eq!(Cursor::parse(&cursor.encode()), Ok(cursor));
        let between = Cursor::before(9, SystemTime::now());
        assert_eq!(Cursor::parse(&between.encode()), Ok(between));
    }

    #[test]
    fn anything_else_is_refused() {
        for raw in [
            "",
            "c1.",
            "c1.1.2.3",
            "c2.1.2.3.",
            "c1.x.2.3.",
            "c1.1.2.3.!!",
            "12",
        ] {
            assert!(Cursor::parse(raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn cursors_order_by_position_then_conversation_then_number() {
        let at = |position, conversation: &str, number| Cursor {
            position,
            conversation: conversation.into(),
            number,
            time_micros: 0,
        };
        assert!(Cursor::before(5, SystemTime::UNIX_EPOCH) < at(5, "a", 1));
        assert!(at(5, "a", 1) < at(5, "a", 2));
        assert!(at(5, "a", 9) < at(5, "b", 1));
        assert!(at(5, "b", 9) < at(6, "a", 1));
    }

    #[test]
    fn kinds_keep_their_codes() {
        for kind in ChangeKind::ALL {
            assert_eq!(ChangeKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(ChangeKind::Appended.code(), 1);
        assert_eq!(ChangeKind::MemoryUpdated.code(), 9);
        assert_eq!(ChangeKind::from_code(0), None);
        assert_eq!(ChangeKind::from_code(10), None);
    }
}
