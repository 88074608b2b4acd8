//! Finishing a pack: the window in log order, the truncation notice, pending messages, the
//! turns that make the provider accept it, and the stats.

use std::collections::{HashMap, HashSet};

use super::{ContextPacker, Phase, left_out::notice_text, shape::pending_message_cost};
use crate::domain::{
    context::{
        ContextMessage, ContextPack, Source,
        cost::{saturate, text_message_cost},
    },
    ids::Sequence,
    message::{Message, Role, StoredMessage},
};

/// Where the history the pack accounts for lies, decided once the window is settled.
#[derive(Debug)]
struct HistorySpan {
    /// The oldest log position the pack accounts for (the window's start, or a reply left out
    /// before it).
    oldest: Sequence,
    /// The watermark of the summary the pack includes (zero without one).
    floor: Sequence,
    /// History is missing above the stored summary's watermark.
    needs_summary: bool,
    /// Pinned messages older than the window: sent ahead of the sections.
    older_pinned: Vec<StoredMessage>,
}

impl ContextPacker {
    /// Finishes the pack.
    pub fn finish(mut self) -> ContextPack {
        self.settle_window();
        let span = self.history_span();
        let needs_summary = span.needs_summary;
        let mut messages = self.assemble(span);
        // The walk left the replies that would end the pack out already (`omit_trailing_reply`),
        // before spending budget on them; this pass over the pack as it renders is the backstop.
        let omits = self.request.final_assistant.omits(self.request.format);
        let omitted_at = match omits {
            true => self.omit_final_assistant(&mut messages),
            false => None,
        };
        debug_assert!(
            omitted_at.is_none(),
            "a reply that would end the pack got past the walk"
        );
        self.stats.messages_included = messages.iter().filter(|m| m.source == Source::History).count() as u32;
        if self.request.format.opens_with_user_turn() {
            self.open_with_user_turn(&mut messages);
        }
        self.stats.stable_prefix_tokens = self.stable_prefix_tokens(&messages, omitted_at);
        // After the stable prefix: the next pack, built after a user message, has no closing
        // turn.
        if omits {
            self.close_with_user_turn(&mut messages);
        }
        self.stats.total_tokens = saturate(self.budget.used);
        self.stats.over_budget |= self.budget.used > self.budget.available;
        let abridged = messages
            .iter()
            .filter_map(|m| m.sequence.filter(|_| m.source == Source::History))
            .filter(|s| self.shaping.cut.contains(s) || self.shaping.cleared.contains(s))
            .collect();
        ContextPack {
            abridged,
            messages,
            stats: self.stats,
            needs_summary,
            previous_response_id: self.snapshot.last_response_id.take(),
        }
    }

    /// Ends the walk where it stands, moves the start of a cache-stable window, and puts the
    /// window in log order.
    fn settle_window(&mut self) {
        if self.walk.phase != Phase::Done && !self.unit.messages.is_empty() {
            self.close_dangling_unit();
        }
        if !self.settle_clearing() {
            self.settle_stable_start();
        }
        self.window.messages.reverse();
    }

    /// Where the history the pack accounts for begins and what it leaves out, with the stats
    /// that say so. Replies left out because they would end the pack are counted apart
    /// (`final_assistant_omitted`), not as dropped history; one inside a tool group goes with
    /// the group, which may have been dropped.
    fn history_span(&mut self) -> HistorySpan {
        let first_kept = self.window.messages.first().and_then(|m| m.sequence);
        let oldest = first_kept
            .unwrap_or(self.snapshot.last_sequence.plus(1))
            .min(self.left_out.oldest_free_omitted.unwrap_or(Sequence::MAX));
        self.stats.oldest_included_sequence = first_kept.map_or(0, Sequence::get);
        let in_window: HashSet<Sequence> = self.window.messages.iter().filter_map(|m| m.sequence).collect();
        self.stats.truncated = !in_window.is_disjoint(&self.shaping.cut);
        // Pinned messages before a provider compaction are among what it replaced: a pack
        // that starts from it may hold nothing before it.
        let compaction = Sequence::from_stored(self.stats.compaction_sequence as i64);
        let older_pinned: Vec<StoredMessage> = self
            .snapshot
            .pinned
            .iter()
            .filter(|m| !in_window.contains(&m.sequence))
            .filter(|m| compaction == Sequence::ZERO || m.sequence > compaction)
            .cloned()
            .collect();
        // Log positions strictly between `floor` and the window, pinned ones (shown) aside, and
        // replies left out because they would end the pack.
        let missing_after = |floor: u64| {
            let between = |s: Sequence| s.get() > floor && s < oldest;
            let pinned = older_pinned.iter().filter(|m| between(m.sequence)).count();
            let omitted = self.left_out.omitted.iter().filter(|&&s| between(s)).count();
            oldest
                .get()
                .saturating_sub(floor + 1)
                .saturating_sub((pinned + omitted) as u64)
        };
        // A provider compaction the pack starts from covers what came before it, as a summary.
        let compacted = self.stats.compaction_sequence.saturating_sub(1);
        let included_floor = self.stats.summary_through_sequence.max(compacted);
        let dropped = missing_after(included_floor);
        let watermark = self
            .snapshot
            .summary
            .as_ref()
            .map_or(0, |s| s.through_sequence.get());
        let needs_summary = missing_after(watermark.max(compacted)) > 0;
        self.stats.messages_dropped = saturate(dropped as usize);
        HistorySpan {
            oldest,
            floor: Sequence::from_stored(included_floor as i64),
            needs_summary,
            older_pinned,
        }
    }

    /// The pack in order: system prompt, older pinned messages, summary and memory, the notice
    /// when history is missing, then history and pending messages with every tool result right
    /// after its call.
    fn assemble(&mut self, span: HistorySpan) -> Vec<ContextMessage> {
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
        messages.extend(span.older_pinned.into_iter().map(|m| self.shape(m)));
        messages.append(&mut self.sections);
        if self.stats.messages_dropped > 0 {
            messages.push(self.notice(span.floor, span.oldest));
        }
        let mut conversation = std::mem::take(&mut self.window.messages);
        for message in std::mem::take(&mut self.request.pending) {
            let tokens = saturate(pending_message_cost(
                &message,
                self.tokenizer,
                self.request.format,
            ));
            conversation.push(ContextMessage {
                source: Source::Pending,
                sequence: None,
                tokens,
                message,
            });
        }
        messages.extend(answers_after_calls(conversation));
        messages
    }

    /// The truncation notice for the positions between `floor` and `oldest`. Always sent when
    /// history is missing: room for it is kept whenever optional parts are added, so it only
    /// overflows when the mandatory parts already do.
    fn notice(&mut self, floor: Sequence, oldest: Sequence) -> ContextMessage {
        let (first, last) = (floor.get() + 1, oldest.get() - 1);
        let text = notice_text(self.stats.messages_dropped as u64, first, last);
        let tokens = text_message_cost("system", &text, self.tokenizer);
        self.budget.used += tokens;
        self.stats.truncation_notice_tokens = saturate(tokens);
        ContextMessage {
            source: Source::TruncationNotice,
            sequence: None,
            tokens: saturate(tokens),
            message: Message::text(Role::System, text),
        }
    }
}

/// The conversation part of a pack (history, then pending messages) with every tool result
/// moved up to follow its call: messages that the log recorded between a call and its results
/// (a user typing while a tool ran, an assistant note between parallel results) come after the
/// group's results, so no call is followed by anything but its answers. Results keep their
/// log order; everything else keeps its relative order.
fn answers_after_calls(messages: Vec<ContextMessage>) -> Vec<ContextMessage> {
    let result_at: HashMap<&str, usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.message.role == Role::Tool)
        .filter_map(|(i, m)| Some((m.message.tool_call_id.as_deref()?, i)))
        .collect();
    let mut order = Vec::with_capacity(messages.len());
    let mut placed = vec![false; messages.len()];
    for (i, message) in messages.iter().enumerate() {
        if placed[i] {
            continue;
        }
        order.push(i);
        placed[i] = true;
        let mut answers: Vec<usize> = message
            .message
            .tool_calls
            .iter()
            .filter_map(|call| result_at.get(call.id.as_str()).copied())
            .filter(|&j| j > i && !placed[j])
            .collect();
        answers.sort_unstable();
        for j in answers {
            order.push(j);
            placed[j] = true;
        }
    }
    let mut slots: Vec<Option<ContextMessage>> = messages.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}
