//! Where a batch's messages go in the log's token stream: the offsets and turn starts the
//! rows carry, so BuildContext can find a turn boundary by index.

use crate::domain::{CountedBatch, context::anchor::LogEnd};

/// Where a batch's messages go in the log's token stream, relative to its start: what
/// `ALLOCATE` adds to the conversation's totals and the rows' positions are computed from.
#[derive(Debug, Clone)]
pub(super) struct Placement {
    /// The batch's approximate tokens.
    pub(super) total: i64,
    /// Offset of the batch's newest turn start, if any.
    pub(super) last_turn: Option<i64>,
    /// Each message's offset.
    pub(super) offsets: Vec<i64>,
    /// Each message's newest earlier turn start within the batch, if any.
    pub(super) previous_turns: Vec<Option<i64>>,
}

impl Placement {
    /// Places `batch` relative to its start.
    pub(super) fn of(batch: &CountedBatch) -> Self {
        let mut end = LogEnd::default();
        let (offsets, previous_turns) = batch
            .messages
            .iter()
            .map(|counted| {
                let position = end.place(&counted.message, counted.tokens.approx);
                (stored(position.offset), position.previous_turn.map(stored))
            })
            .unzip();
        Placement {
            total: stored(end.offset),
            last_turn: end.last_turn.map(stored),
            offsets,
            previous_turns,
        }
    }
}

impl Placement {
    /// The batch-relative placement moved to a log whose end was at `base`, with its newest
    /// turn start at `turn_before`: the arithmetic the allocation's answer is put through.
    pub(super) fn after(mut self, base: i64, turn_before: Option<i64>) -> Self {
        for offset in &mut self.offsets {
            *offset += base;
        }
        for previous in &mut self.previous_turns {
            *previous = previous.map(|p| p + base).or(turn_before);
        }
        self.last_turn = self.last_turn.map(|t| t + base);
        self
    }
}

fn stored(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}
