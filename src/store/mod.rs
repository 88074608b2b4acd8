//! Conversation storage: one [`Store`] trait, a Postgres implementation for production and an
//! in-memory one for development, both held to the same contract tests (`tests/api/store_contract.rs`).
//!
//! A store reads and writes; it decides nothing the domain can decide (the append decision is
//! [`crate::domain::append::plan`]). Each implementation lives in its own folder; [`open`] is
//! the one place that knows them all.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::{
    domain::{
        AppendOutcome, AppendRejection, ConversationId, CountedBatch, Sequence, TenantId, Violations,
        changes::{ChangePage, ChangeQuery, Cursor},
        context::{PageRequest, cost::CountedLate},
        conversation::{
            Conversation, ConversationPage, ConversationPatch, ForkRefusal, IfMissing, ListQuery,
            RewindRefusal,
        },
        summary::Summary,
        tool_protocol::ProtocolViolation,
        working_memory::WorkingMemory,
    },
    runtime::deadline::Deadline,
};

pub mod in_memory;
mod open;
pub mod postgres;
mod records;

pub use in_memory::InMemoryStore;
pub use open::open;
pub use postgres::{PostgresOptions, PostgresStore};
pub use records::{
    CacheStats, CappedPage, ChangeSignal, EmbeddingBacklog, EmbeddingBatch, FoundMessage, LogVersion,
    MemoryBase, MemoryState, MessagePage, MessageVector, NewSummary, OpenedContext, PoolStats,
    QueryEmbedding, Redaction, RetentionRule, Rewind, SearchPage, SearchSpec, SummaryState, Swept,
};

/// Failures of a store operation, by what the caller can do about them.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The conversation does not exist for this tenant.
    #[error("conversation not found")]
    NotFound,
    /// The conversation does not have the message.
    #[error("message not found")]
    MessageNotFound,
    /// A conversation with the id to create exists already.
    #[error("the conversation exists already")]
    AlreadyExists,
    /// `expected_last_sequence` differs from the conversation's last sequence.
    #[error("the conversation's last sequence is {current}")]
    SequenceMismatch {
        /// The current last sequence.
        current: Sequence,
    },
    /// The summary watermark is not the one the caller based its summary on.
    #[error("the summary watermark is {current}")]
    SummaryMoved {
        /// The current watermark.
        current: Sequence,
    },
    /// The working memory version is not the one the caller based its update on.
    #[error("the working memory version is {current}")]
    MemoryVersionMismatch {
        /// The current version.
        current: u64,
    },
    /// Messages were redacted or rewound since the prepared request a caller's summary or
    /// memory was made from (or, without one, ever, before a first summary or memory): what
    /// the caller's model read may hold removed text.
    #[error("the conversation's log changed: {current} redactions and rewinds")]
    LogChanged {
        /// The conversation's redactions and rewinds now.
        current: u64,
    },
    /// The conversation is past its `expire_time`: it takes no more messages (the retention
    /// sweep deletes it), so nothing is acknowledged only to be deleted.
    #[error("the conversation is past its expire_time")]
    Expired,
    /// An idempotency key was reused for different messages.
    #[error("idempotency key was already used for a different payload")]
    IdempotencyKeyReused,
    /// A request field is invalid given the stored conversation (a fork inside a tool-call
    /// group, a rewind past the end).
    #[error("invalid request: {violations}")]
    Invalid {
        /// What is wrong, by field.
        violations: Violations,
    },
    /// The batch breaks the tool-call protocol given the stored conversation: the violations
    /// name messages by their index in the batch, which the caller names as its request did.
    #[error("the batch breaks the tool-call protocol ({} violations)", violations.len())]
    ToolProtocol {
        /// What is wrong, by message and field.
        violations: Vec<ProtocolViolation>,
    },
    /// The call's deadline passed while the database worked or waited (for the conversation's
    /// row lock, or for the conversation's other writes); nothing was written.
    #[error("the call's deadline passed in the database")]
    DeadlineExceeded,
    /// The database cannot be reached or refused service for now; retryable.
    #[error("store unavailable")]
    Unavailable {
        /// The underlying failure, for logs.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Anything else: a bug or corrupt data.
    #[error("store failure")]
    Internal {
        /// The underlying failure, for logs.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl From<AppendRejection> for StoreError {
    fn from(rejection: AppendRejection) -> Self {
        match rejection {
            AppendRejection::KeyReused => StoreError::IdempotencyKeyReused,
            AppendRejection::SequenceMismatch { current } => StoreError::SequenceMismatch { current },
            AppendRejection::ToolProtocol { violations } => StoreError::ToolProtocol { violations },
        }
    }
}

impl From<ForkRefusal> for StoreError {
    fn from(refusal: ForkRefusal) -> Self {
        StoreError::Invalid {
            violations: refusal.violations(),
        }
    }
}

impl From<RewindRefusal> for StoreError {
    fn from(refusal: RewindRefusal) -> Self {
        match refusal {
            RewindRefusal::Stale { current } => StoreError::SequenceMismatch { current },
            RewindRefusal::PastEnd { last } => StoreError::Invalid {
                violations: RewindRefusal::violations(last),
            },
        }
    }
}

impl StoreError {
    /// An internal error with a plain explanation.
    pub fn internal(message: impl Into<String>) -> Self {
        let message: String = message.into();
        StoreError::Internal {
            source: message.into(),
        }
    }
}

/// Claims the call's commit ([`Deadline::claim_commit`]) before a write takes effect (sends
/// `COMMIT`, or changes the in-memory store): a call already answered DEADLINE_EXCEEDED writes
/// nothing. Writes outside a call (`None`) always may.
pub(crate) fn claim_commit(deadline: Option<&Deadline>) -> Result<(), StoreError> {
    match deadline {
        Some(deadline) if !deadline.claim_commit() => Err(StoreError::DeadlineExceeded),
        _ => Ok(()),
    }
}

/// The storage contract. Every method is scoped to a tenant: another tenant's conversation is
/// indistinguishable from a missing one.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// Appends a batch atomically: all messages with gapless sequences after the current last
    /// one, or nothing. Creates the conversation on first use. Honours the idempotency key and
    /// the sequence guard, and checks the tool-call protocol against the stored conversation.
    async fn append_messages(
        &self,
        tenant: &TenantId,
        batch: &CountedBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, StoreError>;

    /// Returns up to `limit` messages with a sequence greater than `after`, in order, that fit
    /// in `max_bytes` (see [`Message::loaded_bytes`]): the message that would take the page past
    /// it is left for the next page, except a page's first, which always comes. A page cut that
    /// way has `has_more`.
    async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        limit: usize,
        max_bytes: usize,
    ) -> Result<MessagePage, StoreError>;

    /// Erases a conversation and everything attached to it; returns the number of messages.
    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<u64, StoreError>;

    /// Reads what context assembly needs before walking the log (last sequence, newest user
    /// message, newest response id, pinned messages) together with the first page of the tail:
    /// the newest `first_page` non-excluded messages, newest first, and no more once their size
    /// reaches `max_bytes` (see [`CappedPage`]).
    async fn open_context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first_page: usize,
        max_bytes: usize,
    ) -> Result<OpenedContext, StoreError>;

    /// Reads a page of the log's tail as of `version` (from [`OpenedContext`]), newest first, leaving out excluded (UI-only) messages,
    /// and no more once their size reaches `page.max_bytes` (see [`CappedPage`]). Empty for an unknown conversation (the caller opened it with
    /// [`Store::open_context`]; a concurrent delete leaves nothing to page).
    async fn tail(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        version: LogVersion,
        page: PageRequest,
    ) -> Result<CappedPage, StoreError>;

    /// Every open call (no result yet) of the messages that made an open call among `ids`, with
    /// the sequence of that message: the calls among `ids` and their open siblings, which
    /// pending results must answer too. Empty for an unknown conversation.
    async fn open_calls(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[String],
    ) -> Result<HashMap<String, Sequence>, StoreError>;

    /// The current summary, the messages after its watermark (oldest first, excluded ones
    /// too, no more once their size reaches `max_bytes`) and the last sequence.
    async fn summary_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        max_bytes: usize,
    ) -> Result<SummaryState, StoreError>;

    /// Stores a new summary version if the watermark still equals `base` (compare-and-set in
    /// one statement); the new watermark must be greater and within the log.
    async fn store_summary(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: Sequence,
        summary: NewSummary,
        deadline: Option<&Deadline>,
    ) -> Result<Summary, StoreError>;

    /// The working memory (version 0 when none was stored) and, with `messages_up_to`, the
    /// messages after its watermark, oldest first, no more once their size reaches that many
    /// bytes.
    async fn memory_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        messages_up_to: Option<usize>,
    ) -> Result<MemoryState, StoreError>;

    /// Stores `memory` as the next version if the stored version is still `base.version` and
    /// no redaction happened since `base` was read ([`MemoryBase`]).
    async fn store_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        base: MemoryBase,
        memory: &WorkingMemory,
        deadline: Option<&Deadline>,
    ) -> Result<WorkingMemory, StoreError>;

    /// Tries to take the conversation's background-summarizer lease, held by at most one
    /// process at a time (across replicas on Postgres, taken on the node that holds the
    /// conversation). `None` when another holder has it, or when the conversation does not
    /// exist (there is nothing to summarize).
    async fn try_summarizer_lease(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Option<Lease>, StoreError>;

    /// The conversation as a resource.
    async fn get_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Conversation, StoreError>;

    /// Sets the patched fields (and the activity time); [`IfMissing`] says whether a missing
    /// conversation is created empty first or is NOT_FOUND.
    async fn update_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        patch: &ConversationPatch,
        if_missing: IfMissing,
        deadline: Option<&Deadline>,
    ) -> Result<Conversation, StoreError>;

    /// A page of the tenant's conversations matching `query`, newest activity first (see
    /// [`crate::domain::conversation::ActivityKey`]), after `query.after`.
    async fn list_conversations(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
    ) -> Result<ConversationPage, StoreError>;

    /// Creates `target` holding messages 1..=`through` of `source` (with their tool-call
    /// bookkeeping and log positions), the newest summary version within them, and the memory
    /// items whose provenance lies within them ([`crate::domain::conversation::memory_within`]),
    /// in one transaction. Refuses a `through` past the end or inside a tool-call group
    /// ([`crate::domain::conversation::ForkRefusal`]) and a `target` that exists.
    async fn fork_conversation(
        &self,
        tenant: &TenantId,
        source: &ConversationId,
        through: Sequence,
        target: &ConversationId,
        deadline: Option<&Deadline>,
    ) -> Result<Conversation, StoreError>;

    /// Replaces the message with its [`crate::domain::conversation::tombstone`] (tokens
    /// recounted, log positions kept) and removes what was derived from it in one transaction:
    /// summary versions covering it, memory items citing it, idempotency hashes of the append
    /// that stored it.
    async fn redact_message(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        sequence: Sequence,
        deadline: Option<&Deadline>,
    ) -> Result<Redaction, StoreError>;

    /// Keeps token counts a read made after the append (a tokenizer `CTXD_TOKENIZERS` left
    /// out): each one only where its message is still the one it was made from (same sequence
    /// and creation time) and has no count under that tokenizer yet. Nothing else changes: no
    /// change is recorded, and the log's version stays (a count is what any reader would make).
    async fn store_late_counts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        counts: &[CountedLate],
    ) -> Result<(), StoreError>;

    /// Removes the messages after `after` and what was derived from them in one transaction
    /// ([`crate::domain::conversation::rewound_memory`] for the working memory): summaries
    /// through a removed message, the idempotency records of appends that stored one, tool
    /// calls made by one; calls one answered are open again; the log's end moves back to where
    /// message `after + 1` was placed. Refuses `after` past the end (INVALID_ARGUMENT) and a
    /// stale `expected_last` (SequenceMismatch); counts itself (`rewinds`) so that a summary or
    /// first memory read before it is not stored after it.
    async fn rewind_conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        after: Sequence,
        expected_last: Option<Sequence>,
        deadline: Option<&Deadline>,
    ) -> Result<Rewind, StoreError>;

    /// Deletes up to `rule.batch` conversations that `rule` says have expired, each in its own
    /// transaction and whole (as [`Store::delete_conversation`] does), across tenants.
    /// The messages of a conversation that match `spec`, best first (NotFound without the
    /// conversation). Messages without a search document (UI-only, redacted, no words) are
    /// never found.
    async fn search_messages(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        spec: &SearchSpec,
    ) -> Result<SearchPage, StoreError>;

    /// How many of the conversation's messages (up to `through`) hold each of `query`'s terms,
    /// in its term order, counted up to [`crate::domain::search::COMMON_TERM_MESSAGES`] + 1,
    /// and how many messages that is: what the semantic half of a search leaves out of the
    /// query it embeds ([`crate::domain::search::semantic_text`]). `None` without the
    /// conversation.
    async fn term_holders(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        query: &crate::domain::search::SearchQuery,
        through: Option<Sequence>,
    ) -> Result<Option<crate::domain::search::TermHolders>, StoreError>;

    async fn sweep_expired(&self, rule: RetentionRule) -> Result<Swept, StoreError>;

    /// The messages after the conversation's embedding watermark, oldest first: at most
    /// `limit`, and no more once their size reaches `max_bytes` (a first one always comes);
    /// the searchable ones among them, with the version of the log they were read under.
    /// `None` without the conversation.
    async fn embedding_backlog(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Option<EmbeddingBacklog>, StoreError>;

    /// Stores the batch's vectors and moves the watermark to `batch.through`, in one
    /// transaction, if the log is still at `batch.version` and the watermark at `batch.after`;
    /// false, and nothing stored, otherwise (a rewind, a redaction or another replica came
    /// first). Redaction, rewind, delete, fork and retention remove or carry the vectors with
    /// their messages, so no vector of a removed message is ever searched.
    async fn store_embeddings(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: &EmbeddingBatch,
    ) -> Result<bool, StoreError>;

    /// The tenant's changes after `query.after` that have settled (no transaction still
    /// running can come before them), in cursor order (DESIGN 2.11, docs/design.md "Change
    /// feed").
    async fn read_changes(&self, tenant: &TenantId, query: &ChangeQuery) -> Result<ChangePage, StoreError>;

    /// A cursor before every change that has not settled yet: where a watch "from now" starts.
    async fn change_horizon(&self) -> Result<Cursor, StoreError>;

    /// The cursor just before the tenant's oldest change made at or after `since` (where a
    /// consumer whose cursor is past retention can start again, after a resync).
    async fn oldest_change(
        &self,
        tenant: &TenantId,
        since: std::time::SystemTime,
    ) -> Result<Option<Cursor>, StoreError>;

    /// Deletes up to `batch` changes made before `before`, across tenants; returns how many.
    async fn sweep_changes(&self, before: std::time::SystemTime, batch: usize) -> Result<u64, StoreError>;

    /// Told after this replica's writes: what wakes its watchers at once (changes written by
    /// other replicas are found by polling, docs/design.md "Change feed").
    fn change_signal(&self) -> &ChangeSignal;

    /// Tries to take the retention sweeper's lease, held by at most one process at a time.
    async fn try_retention_lease(&self) -> Result<Option<Lease>, StoreError>;

    /// Checks that the store can serve requests (used by health reporting).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Brings the store's schema up to date; returns how many migrations were applied. Safe to
    /// run from many processes at once. Stores without a schema have nothing to do.
    async fn migrate(&self) -> Result<usize, StoreError> {
        Ok(0)
    }

    /// Connection pool figures for the metrics endpoint, for stores that pool connections.
    fn pool_stats(&self) -> Option<PoolStats> {
        None
    }

    /// Message cache figures for the metrics endpoint, for stores that keep one.
    fn cache_stats(&self) -> Option<CacheStats> {
        None
    }

    /// Stops handing out connections (after the server drained); idle ones are closed.
    fn close(&self) {}
}

/// A held background-summarizer lease; released by [`Lease::release`] or, as a fallback, on
/// drop (each store's [`HeldLease`] makes sure a dropped lease does not stay held).
#[derive(Debug)]
pub struct Lease {
    held: Box<dyn HeldLease>,
}

impl Lease {
    /// Wraps a store's lease.
    pub fn new(held: impl HeldLease + 'static) -> Self {
        Self { held: Box::new(held) }
    }

    /// Gives the lease back.
    pub async fn release(self) {
        self.held.release().await;
    }
}

/// A store's implementation of a held lease.
#[async_trait]
pub trait HeldLease: Send + std::fmt::Debug {
    /// Gives the lease back.
    async fn release(self: Box<Self>);
}
