//! The step from the mandatory part to optional history, where the rolling summary and the
//! working memory go in (each only once everything above it fits).

use super::{ContextPacker, Phase};
use crate::domain::{
    context::{
        ContextMessage, SUMMARY_CUT_MARKER, Source,
        cost::{saturate, text_message_cost},
    },
    ids::Sequence,
    message::{Message, Role},
    working_memory::WorkingMemory,
};

/// The fewest tokens of summary text worth sending cut; with less room the pack says
/// `over_budget` instead.
const MIN_CUT_SUMMARY_TOKENS: usize = 16;

impl ContextPacker {
    /// Moves from the mandatory part to the sections and optional history once the current turn
    /// and every call answered by pending results are in.
    pub(super) fn advance_phase(&mut self) {
        let unit_empty = self.unit.messages.is_empty();
        if self.walk.phase != Phase::Mandatory || !self.walk.mandatory_reached(unit_empty) {
            return;
        }
        self.walk.phase = Phase::Optional;
        self.window.turn_start = self.window.messages.len();
        if self.budget.used > self.budget.available {
            self.stats.over_budget = true;
            self.walk.phase = Phase::Done;
            return;
        }
        if !self.add_summary() {
            // Everything it covers is left out, and it cannot say what that was.
            self.stats.over_budget = true;
            self.walk.phase = Phase::Done;
            return;
        }
        let memory = self
            .snapshot
            .memory
            .as_ref()
            .filter(|_| self.request.include_memory)
            .and_then(WorkingMemory::render);
        if let Some(memory) = memory
            && !self.add_section(Source::WorkingMemory, memory)
        {
            self.walk.phase = Phase::Done;
        }
    }

    /// Adds the rolling summary, whole or cut, and moves the walk's floor to its watermark;
    /// false when the request wants it and it does not fit even cut.
    fn add_summary(&mut self) -> bool {
        let summary = self
            .snapshot
            .summary
            .clone()
            .filter(|_| self.request.include_summary);
        let Some(summary) = summary else {
            return true;
        };
        let text = summary_text(&summary.text, summary.through_sequence);
        let added = self.add_section(Source::Summary, text.clone()) || self.add_cut_summary(&text);
        if added {
            self.stats.summary_through_sequence = summary.through_sequence.get();
            self.walk.optional_floor = summary.through_sequence;
        }
        added
    }

    /// Adds the summary section cut to the room left (its beginning, the marker, its end),
    /// when at least [`MIN_CUT_SUMMARY_TOKENS`] of it fit.
    fn add_cut_summary(&mut self, text: &str) -> bool {
        let room = self.budget.room();
        let frame = text_message_cost("system", SUMMARY_CUT_MARKER, self.tokenizer);
        let mut keep = room.saturating_sub(frame);
        while keep >= MIN_CUT_SUMMARY_TOKENS {
            let (head, tail) = self.tokenizer.head_and_tail(text, keep * 2 / 3, keep);
            let cut = format!("{head}{SUMMARY_CUT_MARKER}{tail}");
            // Joined text may tokenize a little longer than its parts.
            if text_message_cost("system", &cut, self.tokenizer) <= room {
                self.stats.summary_cut = true;
                return self.add_section(Source::Summary, cut);
            }
            keep -= keep / 8 + 1;
        }
        false
    }

    /// Adds a summary or working-memory section when it fits with the notice's room.
    fn add_section(&mut self, source: Source, text: String) -> bool {
        let tokens = text_message_cost("system", &text, self.tokenizer);
        if !self.budget.fits(tokens) {
            return false;
        }
        self.budget.used += tokens;
        match source {
            Source::Summary => self.stats.summary_tokens = saturate(tokens),
            _ => self.stats.working_memory_tokens = saturate(tokens),
        }
        self.sections.push(ContextMessage {
            source,
            sequence: None,
            tokens: saturate(tokens),
            message: Message::text(Role::System, text),
        });
        true
    }
}

/// The summary section's text: what it covers, then the summary.
fn summary_text(text: &str, through: Sequence) -> String {
    format!("Summary of the conversation so far (messages 1 to {through}):\n{text}")
}
