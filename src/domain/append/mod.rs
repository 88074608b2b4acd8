//! The rules of appending messages: per-message checks by role and size limits
//! ([`validate`]), a batch's stages ([`ParsedBatch`] as parsed, [`CountedBatch`] as stored,
//! with the payload hash that makes idempotent retries recognisable), and the append decision
//! itself ([`plan`]), run by one driver ([`drive`]) over each store's transaction
//! ([`AppendTx`]): the stores read the conversation's state and write the plan.

use super::ids::Sequence;

mod batch;
mod drive;
mod plan;
mod provider_checks;
mod validate;

pub use batch::{BatchFacts, CountedBatch, CountedMessage, Idempotency, ParsedBatch, ParsedMessage};
pub use drive::{AppendTx, StoredState, drive};
pub use plan::{
    AppendPlan, AppendRejection, AppendState, IdempotencyRecord, WritePlan, needs_state, plan, reads_the_log,
};
pub use provider_checks::{MAX_REASONING_BLOCKS, parse_native};
pub use validate::{MAX_CLOCK_SKEW, check_batch_size, check_message, check_times};

/// Maximum length of a tool call id, tool name, message name or response id, in bytes.
pub const MAX_SHORT_FIELD_BYTES: usize = 256;

/// Configurable size limits of an append. Defaults are documented in the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendLimits {
    /// Messages in one request.
    pub max_messages_per_request: usize,
    /// Bytes of one message's `content` (and of an error's `partial_output`).
    pub max_content_bytes: usize,
    /// Bytes of one attachment's inline data or URI.
    pub max_attachment_bytes: usize,
    /// Attachments on one message.
    pub max_attachments_per_message: usize,
    /// Tool calls on one message.
    pub max_tool_calls_per_message: usize,
    /// Metadata entries on one message.
    pub max_metadata_entries: usize,
    /// The largest response a read may answer with (`CTXD_MAX_RESPONSE_BYTES`): a message is
    /// accepted only if a read can return it, itself and its rendering (see
    /// `validate::read_back_bytes`).
    pub max_read_bytes: usize,
}

impl Default for AppendLimits {
    fn default() -> Self {
        Self {
            max_messages_per_request: 100,
            max_content_bytes: 1024 * 1024,
            max_attachment_bytes: 8 * 1024 * 1024,
            max_attachments_per_message: 16,
            max_tool_calls_per_message: 128,
            max_metadata_entries: 64,
            max_read_bytes: 16 << 20,
        }
    }
}

/// SHA-256 of an append's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHash(pub [u8; 32]);

impl PayloadHash {
    /// What a record keeps once a message it stored was redacted: no hash, so the record no
    /// longer confirms a guessed payload. A retry with its key is answered as a replay, whatever
    /// it carries.
    pub const REDACTED: PayloadHash = PayloadHash([0; 32]);

    /// True for [`PayloadHash::REDACTED`].
    pub fn is_redacted(&self) -> bool {
        *self == Self::REDACTED
    }
}

/// What an append did, as returned to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Sequence of the first stored message.
    pub first_sequence: Sequence,
    /// Sequence of the last stored message.
    pub last_sequence: Sequence,
    /// The conversation's last sequence right after the append.
    pub conversation_last_sequence: Sequence,
    /// True for an idempotent replay of an earlier append.
    pub replayed: bool,
}

impl AppendOutcome {
    /// The outcome of storing `count` messages after `last_sequence`.
    pub fn stored(last_sequence: Sequence, count: usize) -> Self {
        let count = count as u64;
        Self {
            first_sequence: last_sequence.plus(1),
            last_sequence: last_sequence.plus(count),
            conversation_last_sequence: last_sequence.plus(count),
            replayed: false,
        }
    }
}
