//! Finishing a pack: the window in log order, the truncation notice, pending messages, and
//! the stats.

use super::*;

impl ContextPacker {
    /// Finishes the pack.
    pub fn finish(mut self) -> ContextPack {
        if self.phase != Phase::Done && !self.unit.is_empty() {
            self.close_dangling_unit();
        }
        let tokenizer = self.tokenizer;
        self.window.reverse();
        let oldest = self
            .window
            .first()
            .and_then(|m| m.sequence)
            .unwrap_or(self.snapshot.last_sequence.plus(1));
        self.stats.oldest_included_sequence = self
            .window
            .first()
            .and_then(|m| m.sequence)
            .map_or(0, Sequence::get);
        let in_window: HashSet<Sequence> = self.window.iter().filter_map(|m| m.sequence).collect();
        self.stats.truncated = !in_window.is_disjoint(&self.cut);
        let older_pinned: Vec<StoredMessage> = self
            .snapshot
            .pinned
            .iter()
            .filter(|m| !in_window.contains(&m.sequence))
            .cloned()
            .collect();
        // Log positions strictly between `floor` and the window, pinned ones (shown) aside.
        let missing_after = |floor: u64| {
            let pinned = older_pinned
                .iter()
                .filter(|m| m.sequence.get() > floor && m.sequence < oldest)
                .count();
            oldest
                .get()
                .saturating_sub(floor + 1)
                .saturating_sub(pinned as u64)
        };
        let included_floor = self.stats.summary_through_sequence;
        self.stats.messages_dropped = saturate(missing_after(included_floor) as usize);
        let watermark = self
            .snapshot
            .summary
            .as_ref()
            .map_or(0, |s| s.through_sequence.get());
        let needs_summary = missing_after(watermark) > 0;
        let floor = Sequence::from_stored(included_floor as i64);

        let mut messages = Vec::new();
        if !self.request.system_prompt.is_empty() {
            let text = std::mem::take(&mut self.request.system_prompt);
            messages.push(ContextMessage {
                source: Source::SystemPrompt,
                sequence: None,
                tokens: self.stats.system_prompt_tokens,
                message: Message::text(Role::System, text),
            });
        }
        messages.extend(older_pinned.into_iter().map(|m| self.shape(m)));
        messages.append(&mut self.sections);
        if self.stats.messages_dropped > 0 {
            let (first, last) = (floor.get() + 1, oldest.get() - 1);
            let text = notice_text(self.stats.messages_dropped as u64, first, last);
            // Always sent when history is missing: room for it is kept whenever optional
            // parts are added, so it only overflows when the mandatory parts already do.
            let tokens = text_message_cost("system", &text, tokenizer);
            self.used += tokens;
            self.stats.truncation_notice_tokens = saturate(tokens);
            messages.push(ContextMessage {
                source: Source::TruncationNotice,
                sequence: None,
                tokens: saturate(tokens),
                message: Message::text(Role::System, text),
            });
        }
        messages.append(&mut self.window);
        self.stats.messages_included = messages.iter().filter(|m| m.source == Source::History).count() as u32;
        for message in std::mem::take(&mut self.request.pending) {
            let tokens = saturate(message_cost_with_text(
                &message,
                &context_text(&message),
                tokenizer,
            ));
            messages.push(ContextMessage {
                source: Source::Pending,
                sequence: None,
                tokens,
                message,
            });
        }
        self.stats.total_tokens = saturate(self.used);
        self.stats.over_budget |= self.used > self.available;
        ContextPack {
            messages,
            stats: self.stats,
            needs_summary,
            previous_response_id: self.snapshot.last_response_id.take(),
        }
    }
}

pub(super) fn summary_text(text: &str, through: Sequence) -> String {
    format!("Summary of the conversation so far (messages 1 to {through}):\n{text}")
}

fn notice_text(count: u64, first: u64, last: u64) -> String {
    format!(
        "[{count} earlier messages of this conversation (sequences {first} to {last}) are not included here.]"
    )
}

/// Upper bound of the notice's cost: its numbers are at most `last`, and both OpenAI encodings
/// (and the approximation) cost a number by its digit count alone.
pub(super) fn notice_reserve(last: Sequence, tokenizer: Tokenizer) -> usize {
    let n = last.get();
    text_message_cost("system", &notice_text(n, n, n), tokenizer)
}
