//! The append decision, made once for every store: given what a store read of the locked
//! conversation ([`AppendState`]), [`plan`] says whether the batch is a replay, is refused, or
//! what exactly to write ([`WritePlan`]). The stores only read the state and write the plan.

use std::collections::HashMap;

use super::{AppendBatch, AppendOutcome, PayloadHash};
use crate::domain::{
    ids::Sequence,
    message::{Message, Role},
    tool_protocol::{KnownCall, ToolEffects, check_tool_protocol},
    violation::Violations,
};

/// An earlier append recorded under the batch's idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// Hash of the earlier append's messages.
    pub payload_hash: PayloadHash,
    /// What the earlier append returned.
    pub outcome: AppendOutcome,
}

/// What a store reads of a conversation, with it locked, before deciding an append.
#[derive(Debug, Clone, Default)]
pub struct AppendState {
    /// The conversation's last sequence (0 for a new conversation).
    pub last_sequence: Sequence,
    /// The record stored under the batch's idempotency key, if the batch has a key and the
    /// conversation has a record for it.
    pub idempotency: Option<IdempotencyRecord>,
    /// The stored state of every call id the batch mentions
    /// ([`crate::domain::tool_protocol::mentioned_call_ids`]); absent ids were never made.
    pub known_calls: HashMap<String, KnownCall>,
}

/// Why an append is refused; nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendRejection {
    /// The idempotency key was used for different messages.
    #[error("idempotency key was already used for a different payload")]
    KeyReused,
    /// `expected_last_sequence` differs from the current last sequence.
    #[error("the conversation's last sequence is {current}")]
    SequenceMismatch {
        /// The conversation's current last sequence.
        current: Sequence,
    },
    /// The batch breaks the tool-call protocol given the stored conversation.
    #[error("invalid append: {violations}")]
    Invalid {
        /// What is wrong, by field.
        violations: Violations,
    },
}

/// What to do with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendPlan {
    /// A retry of an earlier append: answer with its outcome, store nothing.
    Replay(AppendOutcome),
    /// Store the batch.
    Write(WritePlan),
}

/// Everything a store writes for an accepted batch, computed from the batch and the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritePlan {
    /// The conversation's last sequence before the batch; message `i` gets `after + i + 1`.
    pub after: Sequence,
    /// What the append returns.
    pub outcome: AppendOutcome,
    /// For each message, the sequence of the call it answers (tool results only).
    pub call_sequences: Vec<Option<Sequence>>,
    /// The calls the batch makes and answers.
    pub effects: ToolEffects,
    /// The batch's newest user message that counts for context, if any.
    pub newest_user: Option<Sequence>,
    /// The batch's newest assistant response id, if any.
    pub newest_response_id: Option<String>,
    /// The record to store under the batch's idempotency key, when it has one.
    pub idempotency: Option<IdempotencyRecord>,
}

impl WritePlan {
    /// The sequence message `index` of the batch gets.
    pub fn sequence_of(&self, index: usize) -> Sequence {
        self.after.plus(index as u64 + 1)
    }
}

/// Decides an append. Replays win over the sequence guard, so a retry of an append that
/// succeeded is answered even though the conversation has moved on; the tool-call protocol is
/// checked last, against the calls the state knows.
pub fn plan(batch: &AppendBatch, state: &AppendState) -> Result<AppendPlan, AppendRejection> {
    let hash = batch.idempotency_key.as_ref().map(|_| batch.payload_hash());
    if let (Some(record), Some(hash)) = (state.idempotency, hash) {
        return if record.payload_hash == hash || record.payload_hash.is_redacted() {
            Ok(AppendPlan::Replay(AppendOutcome {
                replayed: true,
                ..record.outcome
            }))
        } else {
            Err(AppendRejection::KeyReused)
        };
    }
    let after = state.last_sequence;
    if let Some(expected) = batch.expected_last_sequence
        && expected != after
    {
        return Err(AppendRejection::SequenceMismatch { current: after });
    }
    let effects = check_tool_protocol(&batch.messages, after, &state.known_calls)
        .map_err(|violations| AppendRejection::Invalid { violations })?;
    let outcome = AppendOutcome::stored(after, batch.messages.len());
    let (newest_user, newest_response_id) = newest_facts(&batch.messages, after);
    Ok(AppendPlan::Write(WritePlan {
        after,
        outcome,
        call_sequences: effects.call_sequences(batch.messages.len()),
        effects,
        newest_user,
        newest_response_id,
        idempotency: hash.map(|payload_hash| IdempotencyRecord {
            payload_hash,
            outcome,
        }),
    }))
}

/// Whether [`plan`] can refuse `batch` or needs any state beyond the last sequence: false for a
/// batch without idempotency key, sequence guard or tool call ids, which any conversation
/// accepts as is (the stores' one-statement fast path).
pub fn needs_state(batch: &AppendBatch) -> bool {
    batch.idempotency_key.is_some()
        || batch.expected_last_sequence.is_some()
        || batch
            .messages
            .iter()
            .any(|m| !m.tool_calls.is_empty() || m.tool_call_id.is_some())
}

/// The newest user message that counts for context and the newest assistant response id among
/// `messages`, stored after `last`.
pub fn newest_facts(messages: &[Message], last: Sequence) -> (Option<Sequence>, Option<String>) {
    let mut user = None;
    let mut response_id = None;
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::User && !m.exclude_from_context {
            user = Some(last.plus(i as u64 + 1));
        }
        if m.role == Role::Assistant && !m.response_id.is_empty() {
            response_id = Some(m.response_id.clone());
        }
    }
    (user, response_id)
}
