//! The rules of appending messages: per-message checks by role and size limits
//! ([`validate`]), the payload hash that makes idempotent retries recognisable, and the append
//! decision itself ([`plan`]): the stores read the conversation's state and write the plan.

use sha2::{Digest, Sha256};

use super::{
    ids::{ConversationId, IdempotencyKey, Sequence},
    message::Message,
    search::{Language, SearchDocument},
    token_counts::TokenCounts,
};

mod plan;
mod provider_checks;
mod validate;

pub use plan::{
    AppendPlan, AppendRejection, AppendState, IdempotencyRecord, WritePlan, needs_state, newest_facts, plan,
};
pub use provider_checks::{MAX_REASONING_BLOCKS, parse_native};
pub use validate::{check_batch_size, check_message};

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

/// A parsed, valid AppendMessage request.
#[derive(Debug, Clone)]
pub struct AppendBatch {
    /// Target conversation.
    pub conversation_id: ConversationId,
    /// Messages in order; never empty.
    pub messages: Vec<Message>,
    /// Idempotency key, when the caller gave one.
    pub idempotency_key: Option<IdempotencyKey>,
    /// Optimistic concurrency guard, when the caller gave one.
    pub expected_last_sequence: Option<Sequence>,
    /// Each message's token counts, in order (see [`AppendBatch::count_tokens`]).
    pub tokens: Vec<TokenCounts>,
    /// Each message's reasoning token counts, in order (see [`AppendBatch::count_tokens`]).
    pub reasoning_tokens: Vec<TokenCounts>,
    /// Each message's native JSON token counts, in order (see [`AppendBatch::count_tokens`]).
    pub native_tokens: Vec<TokenCounts>,
    /// For a batch parsed from native JSON: each message's JSON path, which violations of the
    /// message name instead of `messages[i]`.
    pub origins: Vec<String>,
    /// Tool results of a native batch that name their call by function name only (see
    /// [`crate::domain::native::Parsed::unbound`]); bound before the append.
    pub unbound: Vec<(usize, String)>,
    /// The payload hash as the caller sent the batch, fixed before the server binds anything
    /// in it ([`AppendBatch::fix_payload_hash`]): a keyed retry replays even when the binding
    /// would now come out differently.
    pub sent_hash: Option<PayloadHash>,
    /// How search indexes the batch's messages (the server's `CTXD_SEARCH_LANGUAGE`).
    pub search_language: Language,
    /// Each message's search document, in order (see [`AppendBatch::count_tokens`]); empty for
    /// a message search never finds (excluded from context, or no words).
    pub search: Vec<SearchDocument>,
}

impl AppendBatch {
    /// A batch of `messages` with no key or guard, not yet counted.
    pub fn new(conversation_id: ConversationId, messages: Vec<Message>) -> Self {
        Self {
            conversation_id,
            messages,
            idempotency_key: None,
            expected_last_sequence: None,
            tokens: Vec::new(),
            reasoning_tokens: Vec::new(),
            native_tokens: Vec::new(),
            origins: Vec::new(),
            unbound: Vec::new(),
            sent_hash: None,
            search_language: Language::default(),
            search: Vec::new(),
        }
    }

    /// Computes the token counts of every message under every tokenizer, and its search
    /// document (CPU work: callers with large batches run it off the async executor).
    pub fn count_tokens(&mut self) {
        self.count_tokens_until(&|| false);
    }

    /// [`Self::count_tokens`], stopping between messages once `cancelled` says nobody waits
    /// for the counts any more (they are then incomplete).
    pub fn count_tokens_until(&mut self, cancelled: &dyn Fn() -> bool) {
        self.tokens.clear();
        self.reasoning_tokens.clear();
        self.native_tokens.clear();
        self.search.clear();
        for attachment in self.messages.iter_mut().flat_map(|m| m.attachments.iter_mut()) {
            crate::domain::attachments::measure(attachment);
        }
        for message in &self.messages {
            if cancelled() {
                return;
            }
            self.tokens.push(TokenCounts::of(message));
            self.reasoning_tokens.push(TokenCounts::of_native(message));
            self.native_tokens.push(TokenCounts::of_native_json(message));
            self.search.push(match message.exclude_from_context {
                true => SearchDocument::default(),
                false => SearchDocument::of(message, self.search_language),
            });
        }
    }

    /// Bytes of text token counting reads (content, partial outputs, tool calls): what
    /// decides whether counting runs off the async workers.
    pub fn text_bytes(&self) -> usize {
        self.messages
            .iter()
            .map(|m| {
                let calls: usize = m
                    .tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum();
                let partial = m.error.as_ref().map_or(0, |e| e.partial_output.len());
                let json = m.native.as_ref().map_or(0, |n| n.bytes());
                m.content.len() + partial + calls + m.native_bytes() + json
            })
            .sum()
    }

    /// Fixes the payload hash at what the caller sent, before the server fills anything in.
    pub fn fix_payload_hash(&mut self) {
        self.sent_hash = Some(self.payload_hash());
    }

    /// Hash of the payload (the messages), compared on idempotent retries.
    pub fn payload_hash(&self) -> PayloadHash {
        if let Some(hash) = self.sent_hash {
            return hash;
        }
        let mut hasher = Sha256::new();
        for message in &self.messages {
            // Serializing a plain struct with ordered maps cannot fail and is deterministic.
            let encoded = serde_json::to_vec(message).unwrap_or_default();
            hasher.update((encoded.len() as u64).to_le_bytes());
            hasher.update(&encoded);
        }
        PayloadHash(hasher.finalize().into())
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
