//! Each message as the pack carries it: native data (reasoning, signatures, item ids) kept only
//! for the format's provider within the reasoning policy, oversize tool output cut to head and
//! tail, names as OpenAI accepts them.

use std::collections::HashSet;

use super::ContextPacker;
use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        context::{
            ContextMessage, ContextRequest, ContextSnapshot, Format, ReasoningPolicy, Source,
            cost::{
                adjusted, attachments_delta, context_text, message_cost_with_text, native_cost, openai_name,
                saturate,
            },
            render::anthropic_renders,
        },
        ids::Sequence,
        message::{Message, Role, StoredMessage},
        native::NativeContent,
    },
};

/// What shaping decides by, and what it found.
#[derive(Debug)]
pub(super) struct Shaping {
    /// Which history messages keep the format provider's native data.
    reasoning: ReasoningScope,
    /// The history messages the walk found within `reasoning`.
    keeps_reasoning: HashSet<Sequence>,
    /// Tool results whose output was cut to head + tail; `truncated` counts only those that
    /// end up in the pack (a cut result of a dropped group is not in it).
    pub(super) cut: HashSet<Sequence>,
    /// Tool results whose content clearing replaced with a placeholder, and calls whose
    /// arguments it emptied.
    pub(super) cleared: HashSet<Sequence>,
}

impl Shaping {
    /// Shaping for `request`; `pending_user` when a pending user message ends the stored turns.
    pub(super) fn new(request: &ContextRequest, pending_user: bool) -> Self {
        let reasoning = match request.reasoning {
            _ if request.format.provider().is_none() => ReasoningScope::None,
            ReasoningPolicy::All => ReasoningScope::All,
            ReasoningPolicy::CurrentTurn if pending_user => ReasoningScope::None,
            ReasoningPolicy::CurrentTurn => ReasoningScope::CurrentTurn {
                format: request.format,
                user_run: false,
                ended: false,
            },
        };
        Self {
            reasoning,
            keeps_reasoning: HashSet::new(),
            cut: HashSet::new(),
            cleared: HashSet::new(),
        }
    }

    /// Notes a message the walk reached (older than every one noted so far).
    pub(super) fn note_walked(&mut self, message: &StoredMessage) {
        if self.reasoning.keeps(&message.message) {
            self.keeps_reasoning.insert(message.sequence);
        }
    }
}

impl ContextPacker {
    /// The message as it goes into the pack: oversize tool output cut to head + tail; native
    /// data kept only for the format's provider within the reasoning policy (and never on
    /// pinned messages, whose cost is counted before the walk).
    pub(super) fn shape(&mut self, stored: StoredMessage) -> ContextMessage {
        let tokenizer = self.tokenizer;
        let StoredMessage {
            sequence,
            tokens,
            reasoning_tokens,
            native_tokens,
            mut message,
            turn_anchor,
            ..
        } = stored;
        if let Some(level) = turn_anchor {
            self.window.anchors.insert(sequence, level);
        }
        let native = self.keep_native(sequence, &mut message, reasoning_tokens.get(tokenizer) as usize);
        let mut cost = match renamed_for_openai(&message) {
            true => message_cost_with_text(&message, &context_text(&message), tokenizer),
            false => tokens.get(tokenizer) as usize,
        };
        if message.native.is_some() {
            cost += native_tokens.get(tokenizer) as usize;
        }
        cost = adjusted(cost, attachments_delta(&message, self.request.format));
        if let Some(cut_cost) = self.cut_tool_output(sequence, &mut message, cost) {
            cost = cut_cost;
        }
        ContextMessage {
            source: Source::History,
            sequence: Some(sequence),
            tokens: saturate(cost + native),
            message,
        }
    }

    /// Keeps or strips the message's native data and counts it; returns the tokens kept.
    fn keep_native(&mut self, sequence: Sequence, message: &mut Message, native: usize) -> usize {
        message.keep_native_json_for(self.request.format);
        // Most messages carry no native data: nothing to decide or strip.
        let provider = message.native_provider();
        let ours = provider.is_some() && provider == self.request.format.provider();
        let keep =
            ours && self.shaping.keeps_reasoning.contains(&sequence) && !self.pinned.contains(&sequence);
        match (keep, ours) {
            (true, _) => self.stats.reasoning_tokens += saturate(native),
            (false, true) => self.stats.reasoning_tokens_omitted += saturate(native),
            (false, false) => {}
        }
        if !keep && provider.is_some() {
            message.strip_native();
        }
        drop_foreign_phase(message, self.request.format);
        if keep { native } else { 0 }
    }

    /// Cuts a tool result over `tool_output_max_tokens` to its head and tail with a note saying
    /// where the whole output is; returns the new cost when it did.
    fn cut_tool_output(&mut self, sequence: Sequence, message: &mut Message, cost: usize) -> Option<usize> {
        let tokenizer = self.tokenizer;
        let limit = self.request.tool_output_max_tokens.map(|l| l as usize)?;
        if message.role != Role::Tool || cost <= limit {
            return None;
        }
        let (head, tail) = tokenizer.head_and_tail(&message.content, limit / 2, limit);
        if tail.is_empty() {
            return None;
        }
        let omitted = tokenizer.count(&message.content).saturating_sub(limit);
        // The cut result renders from its text, not its stored JSON.
        message.native = None;
        message.content = format!(
            "{head}\n[... {omitted} tokens of this tool output omitted; \
             ListMessages returns it in full at sequence {sequence} ...]\n{tail}"
        );
        self.shaping.cut.insert(sequence);
        let cost = message_cost_with_text(message, &context_text(message), tokenizer);
        Some(adjusted(cost, attachments_delta(message, self.request.format)))
    }
}

/// Which history messages keep native data, decided newest first as the walk takes them.
#[derive(Debug, Clone, Copy)]
enum ReasoningScope {
    /// None (a format without native data, or a pending user message ends the stored turns).
    None,
    /// All ([`ReasoningPolicy::All`]).
    All,
    /// The current turn: everything after the newest user message that opens a turn of its
    /// own, as the turns render (system parts and blank messages are not turns). A user message
    /// right after tool results or calls (nothing but user and system messages in between) does
    /// not: it is rendered into the same user turn as the results (a user typing while tools
    /// ran), so the tool loop, whose thinking Anthropic requires, goes on past it.
    CurrentTurn {
        /// The pack's format (what shows as a turn in it).
        format: Format,
        /// User messages were taken since the last other message (their turn is undecided).
        user_run: bool,
        /// An assistant reply older than an opening user message was reached: the turn ended.
        ended: bool,
    },
}

impl ReasoningScope {
    /// Notes `message` (older than every message noted so far); true if it keeps native data.
    fn keeps(&mut self, message: &Message) -> bool {
        let (format, user_run, ended) = match self {
            ReasoningScope::None => return false,
            ReasoningScope::All => return true,
            // Once the turn has ended, nothing older is in it.
            ReasoningScope::CurrentTurn { ended: true, .. } => return false,
            ReasoningScope::CurrentTurn {
                format,
                user_run,
                ended,
            } => (*format, user_run, ended),
        };
        match message.role {
            // Messages a pack does not show as turns (system parts, blank text) change nothing,
            // nor does a provider compaction alone: inside the pack it is taken out (the pack
            // cannot hold it), and where the pack starts from it nothing older is walked.
            Role::System => {}
            _ if !anthropic_renders(format, message) => {}
            _ if message
                .native
                .as_ref()
                .is_some_and(NativeContent::reply_is_compaction)
                && message.tool_calls.is_empty()
                && context_text(message).trim().is_empty() => {}
            Role::User => *user_run = true,
            Role::Tool => *user_run = false,
            Role::Assistant if !message.tool_calls.is_empty() => *user_run = false,
            Role::Assistant => *ended |= *user_run,
        }
        !*ended
    }
}

/// Strips from the pending messages the native data the pack does not carry (another
/// provider's; under [`ReasoningPolicy::CurrentTurn`], that of messages before the last pending
/// user message) and returns the tokens of what stays.
pub(super) fn keep_pending_reasoning(request: &mut ContextRequest) -> usize {
    let provider = request.format.provider();
    let current_from = match request.reasoning {
        ReasoningPolicy::All => 0,
        ReasoningPolicy::CurrentTurn => request
            .pending
            .iter()
            .rposition(|m| m.role == Role::User)
            .map_or(0, |i| i + 1),
    };
    let mut kept = 0;
    for (i, message) in request.pending.iter_mut().enumerate() {
        if provider.is_some() && message.native_provider() == provider && i >= current_from {
            kept += native_cost(message, request.tokenizer);
        } else {
            message.strip_native();
        }
        drop_foreign_phase(message, request.format);
    }
    kept
}

/// Clears an OpenAI phase outside Responses packs. Unlike the rest of the native data it is
/// kept on every assistant message of its own format, reasoning or not.
fn drop_foreign_phase(message: &mut Message, format: Format) {
    if format != Format::OpenAiResponses {
        message.content_phase.clear();
    }
}

/// Whether OpenAI packs carry `message` under other names than stored (see
/// [`openai_name`]). Counts stored before names were counted that way are then recounted.
fn renamed_for_openai(message: &Message) -> bool {
    let renamed = |name: &str| openai_name(name).is_some_and(|n| n != name);
    renamed(&message.name) || message.tool_calls.iter().any(|c| renamed(&c.name))
}

/// Tokens of the pinned messages, which are sent whatever else fits.
pub(super) fn pinned_cost(snapshot: &ContextSnapshot, tokenizer: Tokenizer, format: Format) -> usize {
    snapshot
        .pinned
        .iter()
        .map(|m| {
            let cost = match renamed_for_openai(&m.message) {
                true => message_cost_with_text(&m.message, &context_text(&m.message), tokenizer),
                false => m.tokens.get(tokenizer) as usize,
            };
            adjusted(cost, attachments_delta(&m.message, format))
        })
        .sum()
}

/// Tokens of a pending message (its native data as [`keep_pending_reasoning`] left it).
pub(super) fn pending_message_cost(message: &Message, tokenizer: Tokenizer, format: Format) -> usize {
    let cost =
        message_cost_with_text(message, &context_text(message), tokenizer) + native_cost(message, tokenizer);
    adjusted(cost, attachments_delta(message, format))
}
