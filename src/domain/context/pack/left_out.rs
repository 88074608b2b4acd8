//! What the pack leaves out or adds so that the provider accepts how it begins and ends: the
//! log's assistant replies that would end it (docs/design.md, "Provider rules"), and the
//! placeholder user turns that open or close it.

use super::{ContextPacker, Sequence};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        context::{
            ContextMessage, ContextRequest, ContextSnapshot, Format, Source,
            cost::{native_cost, saturate, text_message_cost},
            render::{anthropic_renders, renders_as_turn},
        },
        message::{Message, Role, StoredMessage},
    },
};

/// The user turn that opens an Anthropic or Gemini pack whose first message would otherwise
/// not be one.
pub const PLACEHOLDER_TURN: &str = "[The conversation continues from earlier messages.]";

/// The user turn that closes a pack which may not end on an assistant message when a pinned
/// assistant message would end it.
pub const CLOSING_TURN: &str = "[The conversation continues.]";

/// The assistant replies the walk leaves out because they would end the pack.
#[derive(Debug)]
pub(super) struct LeftOut {
    /// The walk is still among the messages that would end the pack, where assistant replies
    /// are left out under [`crate::domain::context::FinalAssistant`] (before any budget is
    /// spent on them).
    pub(super) trailing_replies: bool,
    /// The replies left out that way, newest first.
    pub(super) omitted: Vec<Sequence>,
    /// The oldest of them that was not inside a tool group being walked (a group whose
    /// results came after it): history the pack accounts for starts no later than it.
    pub(super) oldest_free_omitted: Option<Sequence>,
    /// Their tokens, native data included.
    pub(super) omitted_tokens: usize,
}

impl LeftOut {
    /// Nothing left out yet; replies are left out when the request's format refuses a pack
    /// ending on one and no pending turn ends the pack in their place.
    pub(super) fn new(request: &ContextRequest) -> Self {
        // Pending results go right after their calls, so only another pending turn ends the
        // pack in place of the log's replies.
        let pending_turn = request
            .pending
            .iter()
            .any(|m| !matches!(m.role, Role::Tool | Role::System) && renders_as_turn(request.format, m));
        Self {
            trailing_replies: request.final_assistant.omits(request.format) && !pending_turn,
            omitted: Vec::new(),
            oldest_free_omitted: None,
            omitted_tokens: 0,
        }
    }

    /// Room for the closing turn ([`CLOSING_TURN`]) where a pinned assistant message could end
    /// a pack that may not end on one: one newer than the newest user message.
    pub(super) fn closing_turn_reserve(&self, snapshot: &ContextSnapshot, tokenizer: Tokenizer) -> usize {
        let newest_user = snapshot.last_user_sequence.unwrap_or(Sequence::ZERO);
        let pinned_reply = snapshot
            .pinned
            .iter()
            .any(|m| m.message.role == Role::Assistant && m.sequence > newest_user);
        match self.trailing_replies && pinned_reply {
            true => text_message_cost("user", CLOSING_TURN, tokenizer),
            false => 0,
        }
    }
}

impl ContextPacker {
    /// Whether the pack ends on an assistant reply of the log, known once the mandatory part is
    /// in: no pending message follows it, the format keeps such a reply, and the newest message
    /// of the current turn is one (older history only goes before it).
    pub(super) fn ends_on_reply(&self) -> bool {
        self.request.pending.is_empty()
            && !self.request.final_assistant.omits(self.request.format)
            && self
                .window
                .messages
                .first()
                .is_some_and(|m| m.message.role == Role::Assistant)
    }

    /// While the walk is among the messages that would end the pack: leaves out an assistant
    /// reply (not pinned, no calls) and says so, and a blank message among them that the format
    /// does not send (the pack holds nothing past the turn it ends on); the first other turn
    /// ends that stretch. Tool results do not: the pack places them right after their calls,
    /// before any reply of the log that came between. System parts and incomplete tool groups
    /// are no turns of the pack.
    pub(super) fn omit_trailing_reply(&mut self, stored: &StoredMessage) -> bool {
        let m = &stored.message;
        // A call ends it once its group is known to be complete (in `take`): an incomplete one
        // is left out of the pack.
        if !m.tool_calls.is_empty() || matches!(m.role, Role::Tool | Role::System) {
            return false;
        }
        let pinned = self.pinned.contains(&stored.sequence);
        let reply = m.role == Role::Assistant && !pinned;
        // Another turn of the pack's format ends it (blank text is one for the OpenAI formats,
        // and nothing for Anthropic's and Gemini's, which leave it out).
        if !reply && renders_as_turn(self.request.format, m) {
            self.left_out.trailing_replies = false;
            return false;
        }
        if pinned {
            return false;
        }
        if reply {
            self.stats.final_assistant_omitted += 1;
        }
        let left_out = &mut self.left_out;
        left_out.omitted.push(stored.sequence);
        if self.unit.messages.is_empty() {
            left_out.oldest_free_omitted = Some(stored.sequence);
        }
        left_out.omitted_tokens +=
            (stored.tokens.get(self.tokenizer) + stored.reasoning_tokens.get(self.tokenizer)) as usize;
        true
    }

    /// Leaves out the log's assistant messages that would end the pack: the pack then ends on
    /// the user turn or the tool results they answered. Messages that are not turns (system
    /// parts, blank text) are looked past. A pending assistant message (the caller's own
    /// prefill) or a pinned one (always kept) ends the search, and stays. Returns where the
    /// first of them was, if any was left out.
    pub(super) fn omit_final_assistant(&mut self, messages: &mut Vec<ContextMessage>) -> Option<usize> {
        let mut omitted = Vec::new();
        for (i, m) in messages.iter().enumerate().rev() {
            let history_reply = m.source == Source::History
                && m.message.role == Role::Assistant
                && m.message.tool_calls.is_empty()
                && !self.is_pinned(m);
            if history_reply {
                omitted.push(i);
            } else if m.message.role != Role::System && renders_as_turn(self.request.format, &m.message) {
                break;
            }
        }
        let first = *omitted.last()?;
        for i in omitted {
            let m = messages.remove(i);
            let reasoning = native_cost(&m.message, self.tokenizer);
            self.budget.used -= m.tokens as usize;
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
    pub(super) fn close_with_user_turn(&mut self, messages: &mut Vec<ContextMessage>) {
        let format = self.request.format;
        let last_turn = messages
            .iter()
            .rev()
            .find(|m| m.message.role != Role::System && renders_as_turn(format, &m.message));
        let stored_reply =
            last_turn.is_some_and(|m| m.message.role == Role::Assistant && m.source == Source::History);
        if !stored_reply {
            return;
        }
        let placeholder = self.placeholder(CLOSING_TURN);
        messages.push(placeholder);
    }

    /// Anthropic and Gemini require the first message to be a user turn: when the first
    /// message that renders is not one (an assistant opener, a window that starts inside a
    /// turn, no message at all), a placeholder user turn opens the conversation. Its room is
    /// kept with the notice's.
    pub(super) fn open_with_user_turn(&mut self, messages: &mut Vec<ContextMessage>) {
        let first = messages
            .iter()
            .find(|m| m.message.role != Role::System && anthropic_renders(self.request.format, &m.message));
        let opens_with_user = first.is_some_and(|m| m.message.role == Role::User);
        // The provider's compaction opens the conversation itself: Anthropic refuses one that
        // is not its first block.
        let opens_with_compaction = first.is_some_and(|m| {
            m.sequence
                .is_some_and(|s| s.get() == self.stats.compaction_sequence)
        });
        if opens_with_user || opens_with_compaction {
            return;
        }
        let at = messages
            .iter()
            .position(|m| m.message.role != Role::System)
            .unwrap_or(messages.len());
        let placeholder = self.placeholder(PLACEHOLDER_TURN);
        messages.insert(at, placeholder);
    }

    /// A placeholder user turn, counted with the notice.
    fn placeholder(&mut self, text: &str) -> ContextMessage {
        let tokens = text_message_cost("user", text, self.tokenizer);
        self.budget.used += tokens;
        self.stats.truncation_notice_tokens += saturate(tokens);
        ContextMessage {
            source: Source::Placeholder,
            sequence: None,
            tokens: saturate(tokens),
            message: Message::text(Role::User, text.to_owned()),
        }
    }
}

/// The notice that stands for the history left out between the summary (or the log's start)
/// and the window.
pub(super) fn notice_text(count: u64, first: u64, last: u64) -> String {
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
pub(super) fn notice_reserve(last: Sequence, tokenizer: Tokenizer) -> usize {
    let n = last.get();
    text_message_cost("system", &notice_text(n, n, n), tokenizer)
}
