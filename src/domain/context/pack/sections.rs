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

/// The fewest tokens of summary text worth sending cut; with less room the summary is left
/// out with the history it covers, and the truncation notice names what that was.
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
            // It does not fit even cut: it is left out as the history it covers is, and the
            // truncation notice (whose room is kept) names what that was. The pack fits.
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
            return;
        }
        // Recall ranks below the summary and the memory, above older history. A pack that ends
        // on an assistant reply takes no recalled turn, so it keeps no room for one.
        let recall = self.request.recall.as_ref().filter(|_| !self.ends_on_reply());
        let room = recall.map_or(0, |r| r.room(&self.request.budget));
        self.budget.recall_reserve = room.min(self.budget.room());
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
        let added = self.add_section(Source::Summary, text.clone())
            || self.add_cut_summary(&text, summary.through_sequence);
        if added {
            self.stats.summary_through_sequence = summary.through_sequence.get();
            self.walk.optional_floor = summary.through_sequence;
        }
        added
    }

    /// Adds the summary section cut to the room left (its beginning, the marker, its end),
    /// when at least [`MIN_CUT_SUMMARY_TOKENS`] of it fit. When the mandatory history starts
    /// right after the summary's watermark, nothing can be left out between them, so no
    /// truncation notice can follow and the notice's room goes to the summary too: a summary
    /// that fits cut is never dropped for a notice that would not be sent.
    fn add_cut_summary(&mut self, text: &str, through: Sequence) -> bool {
        let room = match self.nothing_between(through) {
            true => self.budget.room() + self.budget.notice_part,
            false => self.budget.room(),
        };
        let frame = text_message_cost("system", SUMMARY_CUT_MARKER, self.tokenizer);
        let mut keep = room.saturating_sub(frame);
        while keep >= MIN_CUT_SUMMARY_TOKENS {
            let (head, tail) = self.tokenizer.head_and_tail(text, keep * 2 / 3, keep);
            let cut = format!("{head}{SUMMARY_CUT_MARKER}{tail}");
            // Joined text may tokenize a little longer than its parts.
            let tokens = text_message_cost("system", &cut, self.tokenizer);
            if tokens <= room {
                self.stats.summary_cut = true;
                self.push_section(Source::Summary, cut, tokens);
                return true;
            }
            keep -= keep / 8 + 1;
        }
        false
    }

    /// Whether no message lies between the summary's watermark `through` and the history the
    /// mandatory part holds (and none was left out of it), so no notice can be needed.
    fn nothing_between(&self, through: Sequence) -> bool {
        if self.stats.messages_dropped > 0 {
            return false;
        }
        let oldest = self.window.messages.iter().filter_map(|m| m.sequence).min();
        match oldest {
            Some(oldest) => oldest.get() <= through.get() + 1,
            None => self.snapshot.last_sequence <= through,
        }
    }

    /// Adds a summary or working-memory section when it fits with the notice's room.
    fn add_section(&mut self, source: Source, text: String) -> bool {
        let tokens = text_message_cost("system", &text, self.tokenizer);
        if !self.budget.fits(tokens) {
            return false;
        }
        self.push_section(source, text, tokens);
        true
    }

    fn push_section(&mut self, source: Source, text: String, tokens: usize) {
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
    }
}

/// The summary section's text: what it covers, then the summary.
fn summary_text(text: &str, through: Sequence) -> String {
    format!("Summary of the conversation so far (messages 1 to {through}):\n{text}")
}
