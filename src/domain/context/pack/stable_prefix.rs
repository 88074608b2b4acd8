//! `stable_prefix_tokens`: how much of this pack the next one repeats byte for byte, so that a
//! provider's prompt cache serves it (docs/design.md, "Cache-stable packs"). Worked out once,
//! from the finished pack, as the least of what each reason to diverge allows.

use super::ContextPacker;
use crate::{
    domain::context::{ContextMessage, HistoryPolicy, ReasoningPolicy, Source, cost::saturate},
    domain::tokenize::REPLY_PRIMING,
};

impl ContextPacker {
    /// The tokens at the start of `messages` (the pack before any closing turn) that the next
    /// pack, built after a new user message, repeats. `omitted_at` is where the render-time
    /// backstop left out replies, if it did.
    pub(super) fn stable_prefix_tokens(&self, messages: &[ContextMessage], omitted_at: Option<usize>) -> u32 {
        [
            Some(self.repeated_parts(messages)),
            self.before_left_out_replies(messages),
            omitted_at.map(|at| before_backstop_omission(messages, at)),
            self.before_current_reasoning(messages),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0)
    }

    /// With a stable start, everything before the pending messages; when history slides
    /// (newest history, some left out), only the parts before the notice that do not move:
    /// system prompt, summary, memory and pinned messages.
    fn repeated_parts(&self, messages: &[ContextMessage]) -> u32 {
        // Newest history that left some out, or cleared results (the next pack clears one
        // more as results age past `keep_recent`), slides.
        let sliding = self.request.history == HistoryPolicy::Newest
            && (self.stats.messages_dropped > 0 || self.stats.tool_results_cleared > 0);
        if !sliding {
            let pending = self.stats.pending_tokens as usize;
            return saturate(self.budget.used.saturating_sub(REPLY_PRIMING + pending));
        }
        messages
            .iter()
            .take_while(|m| {
                matches!(
                    m.source,
                    Source::SystemPrompt | Source::Summary | Source::WorkingMemory
                ) || (m.source == Source::History && self.is_pinned(m))
            })
            .map(|m| m.tokens)
            .sum()
    }

    /// The replies the walk left out come back, in the next pack, before the log's messages
    /// that followed them; or they do not fit there, and the notice counts them. When the room
    /// they left went to older history, the next pack has to give that up for them: only what
    /// precedes history repeats.
    fn before_left_out_replies(&self, messages: &[ContextMessage]) -> Option<u32> {
        let &oldest = self.left_out.omitted.iter().min()?;
        let crowded = self.budget.used + self.left_out.omitted_tokens > self.budget.available;
        let before = messages
            .iter()
            .take_while(|m| m.source != Source::TruncationNotice)
            .take_while(|m| match m.source {
                Source::History if crowded => self.is_pinned(m) && m.sequence.is_some_and(|s| s < oldest),
                Source::History => m.sequence.is_none_or(|s| s < oldest),
                _ => true,
            })
            .map(|m| m.tokens)
            .sum();
        Some(before)
    }

    /// The current turn's reasoning leaves the pack once a user message ends the turn: the
    /// next pack may repeat only what precedes it.
    fn before_current_reasoning(&self, messages: &[ContextMessage]) -> Option<u32> {
        if self.request.reasoning != ReasoningPolicy::CurrentTurn {
            return None;
        }
        let before = messages
            .iter()
            .take_while(|m| m.source != Source::History || m.message.native_provider().is_none())
            .map(|m| m.tokens)
            .sum();
        Some(before)
    }
}

/// The messages that preceded replies the render-time backstop left out (`at` of them, not
/// counting a placeholder among them): where the next pack sends those replies.
fn before_backstop_omission(messages: &[ContextMessage], at: usize) -> u32 {
    let mut counted = 0;
    messages
        .iter()
        .take_while(|m| {
            counted += usize::from(m.source != Source::Placeholder);
            counted <= at
        })
        .map(|m| m.tokens)
        .sum()
}
