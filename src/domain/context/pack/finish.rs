//! Finishing a pack: the window in log order, the truncation notice, pending messages, and
//! the stats.

use super::super::ReasoningPolicy;
use super::*;
use crate::domain::context::{Format, render::anthropic_renders};

impl ContextPacker {
    /// Finishes the pack.
    pub fn finish(mut self) -> ContextPack {
        if self.phase != Phase::Done && !self.unit.is_empty() {
            self.close_dangling_unit();
        }
        self.settle_stable_start();
        let tokenizer = self.tokenizer;
        self.window.reverse();
        // Where the history the pack accounts for begins: replies left out because they would
        // end the pack are counted apart (`final_assistant_omitted`), not as dropped history;
        // one inside a tool group goes with the group, which may have been dropped.
        let oldest = self
            .window
            .first()
            .and_then(|m| m.sequence)
            .unwrap_or(self.snapshot.last_sequence.plus(1))
            .min(self.oldest_free_omitted.unwrap_or(Sequence::MAX));
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
        // Log positions strictly between `floor` and the window, pinned ones (shown) aside, and
        // replies left out because they would end the pack (counted apart, in
        // `final_assistant_omitted`).
        let missing_after = |floor: u64| {
            let between = |s: Sequence| s.get() > floor && s < oldest;
            let pinned = older_pinned.iter().filter(|m| between(m.sequence)).count();
            let omitted = self.omitted.iter().filter(|&&s| between(s)).count();
            oldest
                .get()
                .saturating_sub(floor + 1)
                .saturating_sub((pinned + omitted) as u64)
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
        let mut conversation = std::mem::take(&mut self.window);
        for message in std::mem::take(&mut self.request.pending) {
            let tokens = saturate(pending_message_cost(&message, tokenizer));
            conversation.push(ContextMessage {
                source: Source::Pending,
                sequence: None,
                tokens,
                message,
            });
        }
        messages.extend(answers_after_calls(conversation));
        // Where the left-out replies were: the next pack, built after a new user message,
        // sends them there, so it repeats this pack only up to that point.
        let omits = self.request.final_assistant.omits(self.request.format);
        // The walk left these replies out already (`omit_trailing_reply`), before spending budget
        // on them; this pass over the pack as it renders is the backstop.
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
        // What the next call repeats: with a stable start, everything before the pending
        // messages; otherwise only what precedes the notice, when history was left out.
        let sliding = self.request.history == HistoryPolicy::Newest && self.stats.messages_dropped > 0;
        self.stats.stable_prefix_tokens = match sliding {
            false => saturate(
                self.used
                    .saturating_sub(REPLY_PRIMING + self.stats.pending_tokens as usize),
            ),
            true => messages
                .iter()
                .take_while(|m| {
                    matches!(
                        m.source,
                        Source::SystemPrompt | Source::Summary | Source::WorkingMemory
                    ) || (m.source == Source::History && self.is_pinned(m))
                })
                .map(|m| m.tokens)
                .sum(),
        };
        if let Some(&oldest) = self.omitted.iter().min() {
            // The replies left out during the walk come back, in the next pack, before the
            // log's messages that followed them; or they do not fit there, and the notice
            // counts them. When the room they left went to older history, the next pack has
            // to give that up for them: only what precedes history repeats.
            let crowded = self.used + self.omitted_tokens > self.available;
            let before: u32 = messages
                .iter()
                .take_while(|m| m.source != Source::TruncationNotice)
                .take_while(|m| match m.source {
                    Source::History if crowded => self.is_pinned(m) && m.sequence.is_some_and(|s| s < oldest),
                    Source::History => m.sequence.is_none_or(|s| s < oldest),
                    _ => true,
                })
                .map(|m| m.tokens)
                .sum();
            self.stats.stable_prefix_tokens = self.stats.stable_prefix_tokens.min(before);
        }
        if let Some(at) = omitted_at {
            // The messages that preceded them (`at` of them), and a placeholder among them.
            let mut counted = 0;
            let before: u32 = messages
                .iter()
                .take_while(|m| {
                    counted += usize::from(m.source != Source::Placeholder);
                    counted <= at
                })
                .map(|m| m.tokens)
                .sum();
            self.stats.stable_prefix_tokens = self.stats.stable_prefix_tokens.min(before);
        }
        if self.request.reasoning == ReasoningPolicy::CurrentTurn {
            // The current turn's reasoning leaves the pack once a user message ends the turn:
            // the next pack may repeat only what precedes it.
            let before_reasoning: u32 = messages
                .iter()
                .take_while(|m| m.source != Source::History || m.message.native_provider().is_none())
                .map(|m| m.tokens)
                .sum();
            self.stats.stable_prefix_tokens = self.stats.stable_prefix_tokens.min(before_reasoning);
        }
        // After the stable prefix: the next pack, built after a user message, has no closing
        // turn.
        if omits {
            self.close_with_user_turn(&mut messages);
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

    /// Leaves out the log's assistant messages that would end the pack (docs/design.md, "Provider rules"): the
    /// pack then ends on the user turn or the tool results they answered. Messages that are not
    /// turns (system parts, blank text) are looked past. A pending assistant message (the
    /// caller's own prefill) or a pinned one (always kept) ends the search, and stays. Returns
    /// where the first of them was, if any was left out.
    fn omit_final_assistant(&mut self, messages: &mut Vec<ContextMessage>) -> Option<usize> {
        let mut omitted = Vec::new();
        for (i, m) in messages.iter().enumerate().rev() {
            let history_reply = m.source == Source::History
                && m.message.role == Role::Assistant
                && m.message.tool_calls.is_empty()
                && !self.is_pinned(m);
            if history_reply {
                omitted.push(i);
            } else if m.message.role != Role::System && anthropic_renders(&m.message) {
                break;
            }
        }
        let first = *omitted.last()?;
        for i in omitted {
            let m = messages.remove(i);
            let reasoning = native_cost(&m.message, self.tokenizer);
            self.used -= m.tokens as usize;
            self.stats.history_tokens -= m.tokens;
            self.stats.reasoning_tokens = self.stats.reasoning_tokens.saturating_sub(saturate(reasoning));
            self.stats.final_assistant_omitted += 1;
        }
        let oldest = messages
            .iter()
            .filter(|m| m.source == Source::History)
            .filter_map(|m| m.sequence)
            .map(Sequence::get)
            .filter(|&s| s >= self.stats.oldest_included_sequence)
            .min();
        self.stats.oldest_included_sequence = oldest.unwrap_or(0);
        Some(first)
    }

    /// When a pack that may not end on an assistant message still does after
    /// [`Self::omit_final_assistant`] (a pinned one, always kept, is its last turn), the
    /// placeholder [`CLOSING_TURN`] closes it. A pending assistant message is the caller's own
    /// prefill and stays last.
    fn close_with_user_turn(&mut self, messages: &mut Vec<ContextMessage>) {
        let last_turn = messages
            .iter()
            .rev()
            .find(|m| m.message.role != Role::System && anthropic_renders(&m.message));
        let stored_reply =
            last_turn.is_some_and(|m| m.message.role == Role::Assistant && m.source == Source::History);
        if !stored_reply {
            return;
        }
        let tokens = text_message_cost("user", CLOSING_TURN, self.tokenizer);
        self.used += tokens;
        self.stats.truncation_notice_tokens += saturate(tokens);
        messages.push(ContextMessage {
            source: Source::Placeholder,
            sequence: None,
            tokens: saturate(tokens),
            message: Message::text(Role::User, CLOSING_TURN.to_owned()),
        });
    }

    /// Anthropic and Gemini require the first message to be a user turn: when the first
    /// message that renders is not one (an assistant opener, a window that starts inside a
    /// turn, no message at all), a placeholder user turn opens the conversation. Its room is
    /// kept with the notice's.
    fn open_with_user_turn(&mut self, messages: &mut Vec<ContextMessage>) {
        let opens_with_user = messages
            .iter()
            .find(|m| m.message.role != Role::System && anthropic_renders(&m.message))
            .is_some_and(|m| m.message.role == Role::User);
        if opens_with_user {
            return;
        }
        let at = messages
            .iter()
            .position(|m| m.message.role != Role::System)
            .unwrap_or(messages.len());
        let tokens = text_message_cost("user", PLACEHOLDER_TURN, self.tokenizer);
        self.used += tokens;
        self.stats.truncation_notice_tokens += saturate(tokens);
        messages.insert(
            at,
            ContextMessage {
                source: Source::Placeholder,
                sequence: None,
                tokens: saturate(tokens),
                message: Message::text(Role::User, PLACEHOLDER_TURN.to_owned()),
            },
        );
    }
}

/// The user turn that opens an Anthropic or Gemini pack whose first message would otherwise
/// not be one.
pub const PLACEHOLDER_TURN: &str = "[The conversation continues from earlier messages.]";

/// The user turn that closes a pack which may not end on an assistant message when a pinned
/// assistant message would end it.
pub const CLOSING_TURN: &str = "[The conversation continues.]";

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

pub(super) fn summary_text(text: &str, through: Sequence) -> String {
    format!("Summary of the conversation so far (messages 1 to {through}):\n{text}")
}

fn notice_text(count: u64, first: u64, last: u64) -> String {
    format!(
        "[{count} earlier messages of this conversation (sequences {first} to {last}) are not included here.]"
    )
}

/// Room kept for what closes the optional walk: the truncation notice and, for Anthropic and
/// Gemini, a placeholder opening turn.
pub(super) fn closing_reserve(last: Sequence, format: Format, tokenizer: Tokenizer) -> usize {
    let placeholder = match format.opens_with_user_turn() {
        true => text_message_cost("user", PLACEHOLDER_TURN, tokenizer),
        false => 0,
    };
    notice_reserve(last, tokenizer) + placeholder
}

/// Upper bound of the notice's cost: its numbers are at most `last`, and both OpenAI encodings
/// (and the approximation) cost a number by its digit count alone.
fn notice_reserve(last: Sequence, tokenizer: Tokenizer) -> usize {
    let n = last.get();
    text_message_cost("system", &notice_text(n, n, n), tokenizer)
}
