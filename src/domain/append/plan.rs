//! The append decision, made once for every store: given what a store read of the locked
//! conversation ([`AppendState`]), [`plan`] says whether the batch is a replay, is refused, or
//! what exactly to write ([`WritePlan`]). The stores only read the state and write the plan
//! ([`super::drive`] runs the sequence).

use std::{collections::HashMap, time::SystemTime};

use super::{AppendOutcome, CountedBatch, PayloadHash};
use crate::domain::{
    ids::Sequence,
    tool_protocol::{CallField, KnownCall, ProtocolViolation, ToolEffects, check_tool_protocol},
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
    /// The time of the log's last message, read when the batch's first message has an
    /// `occurred_at` (which may not be earlier).
    pub last_time: Option<SystemTime>,
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
    #[error("the batch breaks the tool-call protocol ({} violations)", violations.len())]
    ToolProtocol {
        /// What is wrong, by message and field.
        violations: Vec<ProtocolViolation>,
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
pub fn plan(batch: &CountedBatch, state: &AppendState) -> Result<AppendPlan, AppendRejection> {
    let hash = batch.idempotency.as_ref().map(|i| i.payload_hash);
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
    let first_time = batch.iter_messages().next().and_then(|m| m.occurred_at);
    if let (Some(time), Some(last)) = (first_time, state.last_time)
        && time < last
    {
        let violation = ProtocolViolation {
            message: 0,
            field: CallField::OccurredAt,
            description: format!(
                "is earlier than the time of the conversation's last message (sequence {after}): a log's times never go back"
            ),
        };
        return Err(AppendRejection::ToolProtocol {
            violations: vec![violation],
        });
    }
    let effects = check_tool_protocol(batch.iter_messages(), after, &state.known_calls)
        .map_err(|violations| AppendRejection::ToolProtocol { violations })?;
    let outcome = AppendOutcome::stored(after, batch.messages.len());
    let newest_user = batch.facts.newest_user.map(|position| after.plus(position));
    let newest_response_id = batch.facts.newest_response_id.clone();
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
pub fn needs_state(batch: &CountedBatch) -> bool {
    batch.idempotency.is_some() || batch.expected_last_sequence.is_some() || reads_the_log(batch)
}

/// Whether [`plan`] reads the stored log itself: the time of its last message (the batch's
/// first message has an `occurred_at`) or the state of the calls the batch mentions. A batch
/// that does not is decided by its key's record and its guard alone, which a store may check in
/// the write itself, falling back to [`super::drive`] when either does not hold.
pub fn reads_the_log(batch: &CountedBatch) -> bool {
    batch
        .iter_messages()
        .next()
        .is_some_and(|m| m.occurred_at.is_some())
        || batch
            .iter_messages()
            .any(|m| !m.tool_calls.is_empty() || m.tool_call_id.is_some())
}
