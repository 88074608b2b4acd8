//! An append's two stages, each complete when it moves on: the transport parses a request into
//! a [`ParsedBatch`] (the caller's messages, nothing counted or bound), and the service counts
//! it into a [`CountedBatch`] (each message with its token counts and search document), which
//! is what the stores write. One struct per message, so a message's counts travel with it.

use sha2::{Digest, Sha256};

use super::PayloadHash;
use crate::domain::{
    ids::{ConversationId, IdempotencyKey, Sequence},
    message::{Message, Role},
    search::{Language, SearchDocument},
    token_counts::{TokenCounts, Tokenizers},
    usage::Usage,
};

/// A parsed, valid AppendMessage request, before the server counts or binds anything.
#[derive(Debug, Clone)]
pub struct ParsedBatch {
    /// Target conversation.
    pub conversation_id: ConversationId,
    /// Messages in order; never empty.
    pub messages: Vec<ParsedMessage>,
    /// Idempotency key, when the caller gave one.
    pub idempotency_key: Option<IdempotencyKey>,
    /// Optimistic concurrency guard, when the caller gave one.
    pub expected_last_sequence: Option<Sequence>,
}

/// One message of a [`ParsedBatch`].
#[derive(Debug, Clone)]
pub struct ParsedMessage {
    /// The message as the caller sent it.
    pub message: Message,
    /// For a message parsed from provider JSON: its JSON path, which violations of the message
    /// name instead of `messages[i]`.
    pub origin: Option<String>,
    /// For a native tool result that names its call by function name only (see
    /// [`crate::domain::native::Parsed::unbound`]): that name; the service binds it to an
    /// open call before the append.
    pub unbound_call: Option<String>,
}

impl ParsedMessage {
    /// A message sent as a `Message` (not provider JSON), bound as sent.
    pub fn plain(message: Message) -> Self {
        Self {
            message,
            origin: None,
            unbound_call: None,
        }
    }
}

impl ParsedBatch {
    /// A batch of plain `messages` with no key or guard.
    pub fn new(conversation_id: ConversationId, messages: Vec<Message>) -> Self {
        Self {
            conversation_id,
            messages: messages.into_iter().map(ParsedMessage::plain).collect(),
            idempotency_key: None,
            expected_last_sequence: None,
        }
    }

    /// The request field that names message `index`: its JSON path for a batch parsed from
    /// provider JSON, else `messages[index]`.
    pub fn field_of(&self, index: usize) -> String {
        field_of(self.messages.get(index).and_then(|m| m.origin.as_deref()), index)
    }

    /// Bytes of text token counting reads (content, partial outputs, tool calls, native
    /// data): what decides whether counting runs off the async workers.
    pub fn text_bytes(&self) -> usize {
        self.messages.iter().map(|m| text_bytes(&m.message)).sum()
    }

    /// Hash of the messages as they are now, compared on idempotent retries.
    pub fn payload_hash(&self) -> PayloadHash {
        payload_hash(self.messages.iter().map(|m| &m.message))
    }

    /// Counts every message under the tokenizers of `counted_by` (and the approximation;
    /// the others are counted when a read first needs them) and makes its search document in
    /// `language` (CPU work: callers with large batches run it off the async executor),
    /// stopping between messages once `cancelled` says nobody waits for the counts any more
    /// (`None`). `sent_hash` is the payload hash fixed before the server bound anything in the
    /// batch ([`Self::payload_hash`], taken before binding); without one, a keyed batch is
    /// hashed as counted.
    pub fn count(
        self,
        language: Language,
        counted_by: Tokenizers,
        sent_hash: Option<PayloadHash>,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<CountedBatch> {
        let ParsedBatch {
            conversation_id,
            mut messages,
            idempotency_key,
            expected_last_sequence,
        } = self;
        for attachment in messages.iter_mut().flat_map(|m| m.message.attachments.iter_mut()) {
            crate::domain::attachments::measure(attachment);
        }
        let idempotency = idempotency_key.map(|key| Idempotency {
            key,
            payload_hash: sent_hash.unwrap_or_else(|| payload_hash(messages.iter().map(|m| &m.message))),
        });
        let mut counted = Vec::with_capacity(messages.len());
        for ParsedMessage {
            message,
            origin,
            unbound_call: _,
        } in messages
        {
            if cancelled() {
                return None;
            }
            counted.push(CountedMessage {
                tokens: TokenCounts::of(&message, counted_by),
                reasoning_tokens: TokenCounts::of_native(&message),
                native_tokens: TokenCounts::of_native_json(&message),
                search: match message.exclude_from_context {
                    true => SearchDocument::default(),
                    false => SearchDocument::of(&message, language),
                },
                origin,
                message,
            });
        }
        Some(CountedBatch {
            conversation_id,
            facts: BatchFacts::of(counted.iter().map(|m| &m.message)),
            messages: counted,
            idempotency,
            expected_last_sequence,
        })
    }
}

/// An idempotency key with the hash of the payload it was first sent with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The caller's key.
    pub key: IdempotencyKey,
    /// Hash of the messages as the caller sent them.
    pub payload_hash: PayloadHash,
}

/// A batch ready to store: every message counted.
#[derive(Debug, Clone)]
pub struct CountedBatch {
    /// Target conversation.
    pub conversation_id: ConversationId,
    /// Messages in order, each with its counts; never empty.
    pub messages: Vec<CountedMessage>,
    /// The idempotency key and payload hash, when the caller gave a key.
    pub idempotency: Option<Idempotency>,
    /// Optimistic concurrency guard, when the caller gave one.
    pub expected_last_sequence: Option<Sequence>,
    /// What the batch changes of the conversation's own fields, whatever it is appended after.
    pub facts: BatchFacts,
}

/// What a batch changes of the conversation's fields, relative to the batch's start: the
/// stores add it to the conversation's row as they claim the batch's sequences.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchFacts {
    /// The 1-based position in the batch of its newest user message that counts for context.
    pub newest_user: Option<u64>,
    /// The batch's newest assistant response id.
    pub newest_response_id: Option<String>,
    /// The summed usage of the batch's messages.
    pub usage: Usage,
}

impl BatchFacts {
    /// The facts of `messages`.
    pub fn of<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Self {
        let mut facts = BatchFacts::default();
        for (i, m) in messages.into_iter().enumerate() {
            if m.role == Role::User && !m.exclude_from_context {
                facts.newest_user = Some(i as u64 + 1);
            }
            if m.role == Role::Assistant && !m.response_id.is_empty() {
                facts.newest_response_id = Some(m.response_id.clone());
            }
            facts.usage = facts.usage.plus(m.usage);
        }
        facts
    }
}

/// One message of a [`CountedBatch`] with what the server computed of it at append.
#[derive(Debug, Clone)]
pub struct CountedMessage {
    /// The message.
    pub message: Message,
    /// Its JSON path, for a message parsed from provider JSON (see [`ParsedMessage::origin`]).
    pub origin: Option<String>,
    /// Its token counts.
    pub tokens: TokenCounts,
    /// Its reasoning's token counts.
    pub reasoning_tokens: TokenCounts,
    /// Its native JSON's token counts.
    pub native_tokens: TokenCounts,
    /// Its search document; empty for a message search never finds (excluded from context, or
    /// no words).
    pub search: SearchDocument,
}

impl CountedBatch {
    /// The request field that names message `index` (see [`ParsedBatch::field_of`]).
    pub fn field_of(&self, index: usize) -> String {
        field_of(self.messages.get(index).and_then(|m| m.origin.as_deref()), index)
    }

    /// The batch's messages, in order.
    pub fn iter_messages(&self) -> impl ExactSizeIterator<Item = &Message> {
        self.messages.iter().map(|m| &m.message)
    }
}

fn field_of(origin: Option<&str>, index: usize) -> String {
    match origin {
        Some(origin) => origin.to_owned(),
        None => format!("messages[{index}]"),
    }
}

fn text_bytes(m: &Message) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| c.name.len() + c.arguments.len())
        .sum();
    let partial = m.error.as_ref().map_or(0, |e| e.partial_output.len());
    let json = m.native.as_ref().map_or(0, |n| n.bytes());
    m.content.len() + partial + calls + m.native_bytes() + json
}

fn payload_hash<'a>(messages: impl Iterator<Item = &'a Message>) -> PayloadHash {
    let mut hasher = Sha256::new();
    for message in messages {
        // Serializing a plain struct with ordered maps cannot fail and is deterministic.
        let encoded = serde_json::to_vec(message).unwrap_or_default();
        hasher.update((encoded.len() as u64).to_le_bytes());
        hasher.update(&encoded);
    }
    PayloadHash(hasher.finalize().into())
}
