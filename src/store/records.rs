//! What the store's operations read and write, besides the domain's own types.

use std::time::{Duration, SystemTime};

use crate::domain::{
    Role, Sequence, StoredMessage, context::ContextSnapshot, conversation::REDACTED_CONTENT,
    search::SearchQuery, summary::Summary, working_memory::WorkingMemory,
};

/// What Summarize reads.
#[derive(Debug, Clone)]
pub struct SummaryState {
    /// The current summary, if any.
    pub summary: Option<Summary>,
    /// Messages after the watermark, oldest first.
    pub messages: Vec<StoredMessage>,
    /// False when `messages` stopped at the byte limit before the log's end.
    pub complete: bool,
    /// The log's last sequence.
    pub last_sequence: Sequence,
    /// How many redactions the conversation had when this was read (see [`NewSummary`]).
    pub redactions: u64,
    /// How many rewinds the conversation had when this was read (see [`NewSummary`]).
    pub rewinds: u64,
}

impl SummaryState {
    /// The conversation's redactions and rewinds when this was read.
    pub fn log_changes(&self) -> u64 {
        self.redactions.saturating_add(self.rewinds)
    }

    /// How many of the messages read, through `through`, are redaction tombstones.
    pub fn tombstones_through(&self, through: Sequence) -> u64 {
        self.messages
            .iter()
            .take_while(|m| m.sequence <= through)
            .filter(|m| m.message.content == REDACTED_CONTENT)
            .count() as u64
    }

    /// The current watermark (0 without a summary).
    pub fn watermark(&self) -> Sequence {
        self.summary
            .as_ref()
            .map_or(Sequence::ZERO, |s| s.through_sequence)
    }
}

/// What the working memory RPCs read.
#[derive(Debug, Clone)]
pub struct MemoryState {
    /// The stored memory (version 0 when none).
    pub memory: WorkingMemory,
    /// Messages after its watermark, oldest first (when asked for).
    pub messages: Vec<StoredMessage>,
    /// False when `messages` stopped at the byte limit before the log's end.
    pub complete: bool,
    /// The log's last sequence.
    pub last_sequence: Sequence,
    /// How many redactions the conversation had when this was read (see [`MemoryBase`]).
    pub redactions: u64,
    /// How many rewinds the conversation had when this was read (see [`MemoryBase`]).
    pub rewinds: u64,
}

impl MemoryState {
    /// The conversation's redactions and rewinds when this was read.
    pub fn log_changes(&self) -> u64 {
        self.redactions.saturating_add(self.rewinds)
    }

    /// What a memory computed from this state is based on.
    pub fn base(&self) -> MemoryBase {
        MemoryBase {
            version: self.memory.version,
            redactions: self.redactions,
            rewinds: self.rewinds,
        }
    }
}

/// What a working memory write replaces: the stored version (0: none yet) and the
/// conversation's redaction count when the memory it derives from was read. A redaction since
/// then refuses the write (as a version mismatch): a redaction bumps an existing memory's
/// version, and a first memory is checked against the count, so redacted text cannot come back
/// through an extraction that read it before. Rewinds are counted the same way, so removed
/// messages cannot come back either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryBase {
    /// The version replaced.
    pub version: u64,
    /// [`MemoryState::redactions`] of the read.
    pub redactions: u64,
    /// [`MemoryState::rewinds`] of the read.
    pub rewinds: u64,
}

/// A summary to store.
#[derive(Debug, Clone)]
pub struct NewSummary {
    /// Its text.
    pub text: String,
    /// The watermark it reaches.
    pub through_sequence: Sequence,
    /// Who wrote it.
    pub summarizer: String,
    /// [`SummaryState::redactions`] of the state it was written from. A redaction since then
    /// refuses it (as a moved watermark) if it redacted a message the summary covers, so
    /// redacted text cannot come back through it: the store then counts the tombstones in the
    /// summary's new range and compares them with `tombstones`.
    pub redactions: u64,
    /// Messages of the new range (after the base watermark, through `through_sequence`) that
    /// were tombstones when the summary read them ([`SummaryState::tombstones_through`]).
    pub tombstones: u64,
    /// [`SummaryState::rewinds`] of the state it was written from: any rewind since then
    /// refuses it (as a moved watermark), so removed messages cannot come back through it.
    pub rewinds: u64,
    /// For a caller's summary (SUMMARIZE_MODE_PROVIDED): the conversation's redactions and
    /// rewinds when the request its text was made from was prepared (`expected_log_changes`;
    /// 0 when the caller sent none). The store compares it with the conversation's count under
    /// the lock a redaction and a rewind take, in the transaction that stores the summary, and
    /// refuses any difference ([`super::StoreError::LogChanged`]): text a removal took out
    /// never comes back through a summary prepared before it, however the two race.
    pub prepared_log_changes: Option<u64>,
}

/// What a rewind removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rewind {
    /// Messages removed.
    pub messages_removed: u64,
    /// The last sequence afterwards.
    pub last_sequence: Sequence,
    /// Summary versions removed because they covered removed messages.
    pub summaries_removed: u64,
    /// The summary watermark afterwards.
    pub summary_through_sequence: Sequence,
    /// The working-memory version afterwards (0 without memory).
    pub memory_version: u64,
}

/// A page of messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagePage {
    /// Messages in sequence order.
    pub messages: Vec<StoredMessage>,
    /// True when messages exist after the last one returned.
    pub has_more: bool,
}

/// Messages read up to a byte cap, in the order the read asked for (the tail's pages: newest
/// first).
#[derive(Debug, Clone, Default)]
pub struct CappedPage {
    /// The messages.
    pub messages: Vec<StoredMessage>,
    /// True when the page stopped because its size reached the byte cap: older messages may
    /// follow. (A page shorter than its count limit without the cap reached is the log's start.)
    pub cut_by_size: bool,
}

/// What BuildContext reads before walking the log: the conversation's state and the newest
/// page of its tail.
#[derive(Debug, Clone)]
pub struct OpenedContext {
    /// Last sequence, newest user message, response id, pinned messages, summary, memory.
    pub snapshot: ContextSnapshot,
    /// The first page of the tail.
    pub newest: CappedPage,
    /// The log's version when the snapshot was read: [`Store::tail`] is given it back.
    pub version: LogVersion,
}

/// Which state of a conversation's stored messages a read saw. Messages are immutable except
/// through a redaction or a rewind, each of which counts itself on the conversation row, and a
/// deleted conversation's id comes back with a new creation time and incarnation: two reads that see the same
/// version see the same message at each sequence up to the older read's last sequence. Versions
/// are ordered (creation time, then redactions and rewinds together), so a reader that saw an
/// older version never overrides what a newer one learned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogVersion {
    /// The conversation's creation time, in microseconds since the epoch.
    pub created_micros: i64,
    /// Its redactions and rewinds so far.
    pub changes: u64,
    /// A number drawn at random when the conversation was created (0 where none was), so that
    /// a deleted id created again in the same microsecond is still another version.
    pub incarnation: i64,
}

/// What a redaction changed.
#[derive(Debug, Clone)]
pub struct Redaction {
    /// The message as it is now stored.
    pub message: StoredMessage,
    /// Summary versions removed because they covered the message.
    pub summaries_removed: u64,
    /// The summary watermark afterwards.
    pub summary_through_sequence: Sequence,
    /// The working memory version afterwards (a new one when items citing the message went).
    pub memory_version: u64,
}

/// What one retention sweep deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Conversations deleted.
    pub conversations: u64,
    /// Their messages.
    pub messages: u64,
    /// Change feed changes deleted (older than their retention).
    pub changes: u64,
}

/// Which conversations retention deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionRule {
    /// The sweep's time: conversations whose `expire_time` is at or before it go.
    pub now: SystemTime,
    /// Conversations without `expire_time` go when inactive (no append or update) this long.
    pub inactive: Option<Duration>,
    /// At most this many conversations per sweep.
    pub batch: usize,
}

/// What [`Store::search_messages`](super::Store::search_messages) looks for and where.
#[derive(Debug, Clone)]
pub struct SearchSpec {
    /// The terms; a message matches when it has any of them.
    pub query: SearchQuery,
    /// Only messages of these roles (empty = every role).
    pub roles: Vec<Role>,
    /// Only tool calls of these tools and their results (empty = every message).
    pub tool_names: Vec<String>,
    /// Sequences never returned (recall: what the pack holds verbatim).
    pub skip: Vec<Sequence>,
    /// Only messages up to this sequence (a page after the first: the first one's log end).
    pub through: Option<Sequence>,
    /// Only hits ranked below this one (score, then sequence): the last hit of the page before.
    pub after: Option<(f32, Sequence)>,
    /// Hits at most.
    pub limit: usize,
    /// Stop once the hits' messages reach this many bytes (a first hit always comes).
    pub max_bytes: usize,
    /// Only messages holding a term that is not common ([`crate::domain::search::is_common`]):
    /// a query whose every term is common has no lexical candidates, where otherwise its newest
    /// matches would be ranked (recall's second hop, which only wants what is rare).
    pub rare_only: bool,
    /// The query's embedding, when semantic search is on: then the lexical ranking is fused
    /// with the semantic one ([`crate::domain::search::vectors`]). It may still be on its way
    /// when the search starts (the store reads the term statistics meanwhile).
    pub semantic: Option<QueryEmbedding>,
}

/// A query's embedding, arriving: `None` once it is known that there is none (the endpoint
/// failed; the search is then lexical).
#[derive(Debug, Clone)]
pub struct QueryEmbedding(
    tokio::sync::watch::Receiver<Option<Option<std::sync::Arc<crate::domain::search::vectors::QueryVector>>>>,
);

impl QueryEmbedding {
    /// An embedding `make` computes, started now on the runtime.
    pub fn spawn(
        make: impl std::future::Future<
            Output = Option<std::sync::Arc<crate::domain::search::vectors::QueryVector>>,
        > + Send
        + 'static,
    ) -> Self {
        let (sender, receiver) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            let vector = make.await;
            let _ = sender.send(Some(vector));
        });
        Self(receiver)
    }

    /// An embedding known already.
    pub fn ready(vector: std::sync::Arc<crate::domain::search::vectors::QueryVector>) -> Self {
        let (_, receiver) = tokio::sync::watch::channel(Some(Some(vector)));
        Self(receiver)
    }

    /// The embedding, once it has arrived (`None` when there is none).
    pub async fn get(&self) -> Option<std::sync::Arc<crate::domain::search::vectors::QueryVector>> {
        let mut receiver = self.0.clone();
        let arrived = receiver.wait_for(Option::is_some).await.ok()?;
        arrived.clone().flatten()
    }
}

/// One message a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundMessage {
    /// The message.
    pub message: StoredMessage,
    /// Its rank score: BM25 (see [`crate::domain::search::Weights`]), or the fused score when
    /// the search is hybrid.
    pub score: f32,
    /// How much of the query it matches, 0 to 1 ([`crate::domain::search::Weights::relevance`]).
    pub relevance: f32,
    /// For a tool call, the first tool it calls; for a tool result, the tool that returned it.
    pub tool_name: Option<String>,
    /// The chunk of its text nearest the query, when the semantic half found it
    /// ([`crate::domain::search::vectors::chunks`]).
    pub chunk: Option<u16>,
}

/// A page of hits, best first (equal scores: newest first).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage {
    /// The hits.
    pub found: Vec<FoundMessage>,
    /// The log's last sequence the search saw (the bound of the pages that follow).
    pub through: Sequence,
    /// More hits may follow the last one.
    pub more: bool,
    /// The conversation's rewinds when it was searched: a page token is good for the log it
    /// was made on, and a rewind makes another.
    pub rewinds: u64,
    /// Each query term's weight in the conversation ([`crate::domain::search::Weights::term_weights`]),
    /// in the query's term order; empty when nothing was searched.
    pub term_weights: Vec<f32>,
}

/// Messages that semantic search has no vectors of yet ([`super::Store::embedding_backlog`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingBacklog {
    /// The log's version they were read under.
    pub version: LogVersion,
    /// The conversation's watermark: every message up to it has its vectors.
    pub after: Sequence,
    /// The last message considered: the watermark once their vectors are stored.
    pub through: Sequence,
    /// The messages in `(after, through]` that search can find (with a search document),
    /// oldest first.
    pub messages: Vec<StoredMessage>,
}

/// One chunk's vector of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageVector {
    pub sequence: Sequence,
    /// Which chunk of the message's text (from 0).
    pub chunk: u16,
    pub vector: crate::domain::search::vectors::PassageVector,
    /// Its sign bits around the model's mean ([`crate::domain::search::vectors::centred_code`]).
    pub code: crate::domain::search::vectors::Code,
}

/// Vectors to store, and the watermark they move ([`super::Store::store_embeddings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingBatch {
    /// What the backlog was read under and from.
    pub version: LogVersion,
    pub after: Sequence,
    /// The new watermark.
    pub through: Sequence,
    /// Vectors of messages in `(after, through]`.
    pub vectors: Vec<MessageVector>,
    /// Vectors of messages at or before `after` that the watermark passed without (their texts
    /// refused by the endpoint then, accepted on a later try): stored with the batch, under its
    /// version check, when the message still has its search document.
    pub late: Vec<MessageVector>,
}

/// Wakes a replica's watchers after a write; a count of the writes it was told of.
#[derive(Debug)]
pub struct ChangeSignal(tokio::sync::watch::Sender<u64>);

impl Default for ChangeSignal {
    fn default() -> Self {
        Self(tokio::sync::watch::Sender::new(0))
    }
}

impl ChangeSignal {
    /// Tells every subscriber that a write happened.
    pub fn notify(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees every later [`Self::notify`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// A connection pool's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Open connections.
    pub size: usize,
    /// Idle connections.
    pub available: usize,
    /// Requests waiting for a connection.
    pub waiting: usize,
    /// Group-commit batches sent since the store opened.
    pub append_batches: u64,
    /// Appends those batches wrote.
    pub batched_appends: u64,
}

/// A replica's message cache figures: what it holds, and where BuildContext's tail pages came
/// from since the store opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Bytes of decoded messages held.
    pub bytes: usize,
    /// Tail pages served from the cache.
    pub pages_from_cache: u64,
    /// Tail pages read from the database.
    pub pages_from_database: u64,
}
