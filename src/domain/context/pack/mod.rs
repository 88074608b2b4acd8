//! The packing algorithm (docs/design.md, "Context assembly").
//!
//! The log's tail is walked newest first and cut into *units*: the shortest runs of messages
//! that split no tool-call group. Units are all or nothing, and the walk stops at the first unit
//! that does not fit, so history stays a contiguous suffix. Sections are filled in priority
//! order, each considered only once every higher one fits (which keeps "a bigger budget never
//! yields less history" true):
//!
//! 1. mandatory: reply priming, system prompt, pinned messages, pending messages, and the current
//!    turn (from the newest user message on, plus any call that pending results answer);
//! 2. the rolling summary; 3. the working memory;
//! 4. older history, newest first, keeping room for a truncation notice.
//!
//! Older history starts at a turn boundary (docs/design.md, "Provider rules"): the oldest turn walked is kept
//! whole or not at all, unless nothing before it in the window starts a turn (the current turn
//! is pending, or the window starts at a tool call that pending results answer); then its
//! newest units that fit are kept. At the log's start or the summary watermark, whatever
//! follows is kept, turn boundary or not, so that nothing falls between summary and history.
//! Where the window still does not open with a user message, Anthropic packs open with a
//! placeholder user turn (see [`finish`]).

use std::collections::{HashMap, HashSet};

pub use finish::{CLOSING_TURN, PLACEHOLDER_TURN};
use finish::{closing_reserve, summary_text};

use super::render::anthropic_renders;

use super::{
    ContextMessage, ContextPack, ContextRequest, ContextSnapshot, ContextStats, Format, HistoryPolicy,
    ReasoningPolicy, SUMMARY_CUT_MARKER, Source,
    cost::{context_text, message_cost_with_text, native_cost, openai_name, saturate, text_message_cost},
};
use crate::{
    domain::{
        ids::Sequence,
        message::{Message, Role, StoredMessage},
        working_memory::WorkingMemory,
    },
    tokenize::{REPLY_PRIMING, Tokenizer},
};

mod finish;

/// Largest page of one tail read.
const MAX_PAGE: usize = 1000;
/// The fewest tokens of summary text worth sending cut; with less room the pack says
/// `over_budget` instead.
const MIN_CUT_SUMMARY_TOKENS: usize = 16;
/// Typical tokens per message, used to size the first page so that one read usually suffices.
const TYPICAL_MESSAGE_TOKENS: usize = 24;

/// Size of the first tail read for `request`: enough messages of typical size to fill the
/// budget, so most packs need one read (which the stores run alongside the snapshot query).
pub fn initial_page_limit(request: &ContextRequest) -> usize {
    let by_budget = request.budget.available() / TYPICAL_MESSAGE_TOKENS;
    let by_count = request.budget.max_messages.map_or(MAX_PAGE, |m| m as usize + 16);
    by_budget.min(by_count).clamp(32, MAX_PAGE)
}

/// Which messages a [`ContextPacker`] wants next: sequences in `(floor, before)`, newest first,
/// at most `limit`, excluded (UI-only) messages left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// Exclusive upper bound.
    pub before: Sequence,
    /// Exclusive lower bound.
    pub floor: Sequence,
    /// Maximum messages to return.
    pub limit: usize,
    /// Stop once the messages' size reaches this many bytes (a first message always comes).
    pub max_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Mandatory,
    Optional,
    Done,
}

/// Assembles a pack from the request, the conversation snapshot and tail pages fed to it.
#[derive(Debug)]
pub struct ContextPacker {
    request: ContextRequest,
    snapshot: ContextSnapshot,
    tokenizer: Tokenizer,
    available: usize,
    used: usize,
    phase: Phase,
    /// Exclusive upper bound of the next page.
    cursor: Sequence,
    pages_read: usize,
    exhausted: bool,
    /// The walk is mandatory down to this sequence: the newest user message (unless a pending
    /// message is the user turn) and the oldest call that pending results answer.
    mandatory_until: Option<Sequence>,
    /// Calls answered by pending results, by id.
    pending_calls: HashMap<String, Sequence>,
    /// Lower bound of the optional walk: the summary watermark when the summary is included.
    optional_floor: Sequence,
    /// Room kept for the truncation notice (and the placeholder turn, see [`closing_reserve`]).
    notice_reserve: usize,
    pinned: HashSet<Sequence>,
    /// Tool results whose output was cut to head + tail; `truncated` counts only those that
    /// end up in the pack (a cut result of a dropped group is not in it).
    cut: HashSet<Sequence>,
    /// Messages of the unit being built, newest first.
    unit: Vec<StoredMessage>,
    /// Results in `unit` whose call has not been reached yet: call id -> call sequence.
    open: HashMap<String, Sequence>,
    /// Included history, newest first.
    window: Vec<ContextMessage>,
    /// Where in `window` the turn being walked begins: the units from here on belong to a turn
    /// whose opening user message has not been reached yet.
    turn_start: usize,
    /// Where in `window` optional turns begin: the user messages that open them (the oldest
    /// message of their unit), where a cache-stable history may start.
    optional_turns: Vec<usize>,
    /// Turn anchor levels of the history messages shaped so far, by sequence.
    anchors: HashMap<Sequence, u8>,
    /// Tokens of the pinned messages.
    pinned_cost: usize,
    /// Which history messages keep the format provider's native data.
    reasoning: ReasoningScope,
    /// The history messages the walk found within `reasoning`.
    keeps_reasoning: HashSet<Sequence>,
    sections: Vec<ContextMessage>,
    turns: u32,
    /// History messages included by the walk, pinned ones aside (what `max_messages` caps).
    window_messages: u32,
    /// The walk is still among the messages that would end the pack, where assistant replies
    /// are left out under [`super::FinalAssistant`] (before any budget is spent on them).
    trailing_replies: bool,
    /// The replies left out that way, newest first, and their tokens.
    omitted: Vec<Sequence>,
    /// The oldest of them that was not inside a tool group being walked (a group whose
    /// results came after it): history the pack accounts for starts no later than it.
    oldest_free_omitted: Option<Sequence>,
    omitted_tokens: usize,
    stats: ContextStats,
}

impl ContextPacker {
    /// Starts a pack: accounts for the mandatory parts known before reading the log.
    pub fn new(mut request: ContextRequest, snapshot: ContextSnapshot) -> Self {
        let tokenizer = request.tokenizer;
        let available = request.budget.available();
        let pinned_cost: usize = snapshot
            .pinned
            .iter()
            .map(|m| match renamed_for_openai(&m.message) {
                true => message_cost_with_text(&m.message, &context_text(&m.message), tokenizer),
                false => m.tokens.get(tokenizer) as usize,
            })
            .sum();
        let pending_reasoning = keep_pending_reasoning(&mut request);
        let pending_cost: usize = request
            .pending
            .iter()
            .map(|m| pending_message_cost(m, tokenizer))
            .sum();
        let system_cost = match request.system_prompt.is_empty() {
            true => 0,
            false => text_message_cost("system", &request.system_prompt, tokenizer),
        };
        let pending_user = request.pending.iter().any(|m| m.role == Role::User);
        // Pending results go right after their calls, so only another pending turn ends the
        // pack in place of the log's replies.
        let pending_turn = request
            .pending
            .iter()
            .any(|m| !matches!(m.role, Role::Tool | Role::System) && anthropic_renders(m));
        let trailing_replies = request.final_assistant.omits(request.format) && !pending_turn;
        let newest_user = snapshot.last_user_sequence.filter(|_| !pending_user);
        let reasoning = match request.reasoning {
            _ if request.format.provider().is_none() => ReasoningScope::None,
            ReasoningPolicy::All => ReasoningScope::All,
            ReasoningPolicy::CurrentTurn if pending_user => ReasoningScope::None,
            ReasoningPolicy::CurrentTurn => ReasoningScope::CurrentTurn {
                user_run: false,
                ended: false,
            },
        };
        let mandatory_until = newest_user
            .into_iter()
            .chain(snapshot.pending_calls.values().copied())
            .min();
        let stats = ContextStats {
            budget_tokens: saturate(available),
            log_last_sequence: snapshot.last_sequence.get(),
            system_prompt_tokens: saturate(system_cost),
            pending_tokens: saturate(pending_cost),
            history_tokens: saturate(pinned_cost),
            reasoning_tokens: saturate(pending_reasoning),
            ..ContextStats::default()
        };
        let mut packer = Self {
            tokenizer,
            available,
            used: REPLY_PRIMING + system_cost + pinned_cost + pending_cost,
            phase: Phase::Mandatory,
            cursor: snapshot.last_sequence.plus(1),
            pages_read: 0,
            exhausted: false,
            mandatory_until,
            pending_calls: snapshot.pending_calls.clone(),
            optional_floor: Sequence::ZERO,
            notice_reserve: closing_reserve(snapshot.last_sequence, request.format, tokenizer)
                + closing_turn_reserve(trailing_replies, &snapshot, tokenizer),
            pinned: snapshot.pinned.iter().map(|m| m.sequence).collect(),
            cut: HashSet::new(),
            unit: Vec::new(),
            open: HashMap::new(),
            window: Vec::new(),
            turn_start: 0,
            optional_turns: Vec::new(),
            anchors: HashMap::new(),
            pinned_cost,
            reasoning,
            keeps_reasoning: HashSet::new(),
            sections: Vec::new(),
            turns: 0,
            window_messages: 0,
            trailing_replies,
            omitted: Vec::new(),
            oldest_free_omitted: None,
            omitted_tokens: 0,
            stats,
            request,
            snapshot,
        };
        packer.advance_phase();
        packer
    }

    /// The next page to read, or `None` when the packer has seen enough.
    pub fn next_page(&self) -> Option<PageRequest> {
        let floor = self.floor();
        if self.phase == Phase::Done || self.exhausted || self.cursor <= floor.plus(1) {
            return None;
        }
        // Each further read is four times larger: the first one was sized for typical
        // messages, so needing more means they are smaller than typical.
        let first = initial_page_limit(&self.request);
        let mut limit = (first << (2 * self.pages_read.min(4))).min(MAX_PAGE);
        if let (Phase::Optional, Some(max)) = (self.phase, self.request.budget.max_messages) {
            let left = max.saturating_sub(self.window_messages) as usize;
            limit = limit.min(left + 16);
        }
        Some(PageRequest {
            before: self.cursor,
            floor,
            limit,
            max_bytes: usize::MAX,
        })
    }

    /// Feeds the first page, read together with the snapshot: the newest `limit` non-excluded
    /// messages at that moment. Messages appended after the snapshot are ignored.
    pub fn feed_first(&mut self, mut page: Vec<StoredMessage>, limit: usize) {
        let last = self.snapshot.last_sequence;
        let newer = page.iter().take_while(|m| m.sequence > last).count();
        page.drain(..newer);
        let Some(mut requested) = self.next_page() else {
            return;
        };
        requested.limit = limit - newer;
        self.feed(page, requested);
    }

    /// Feeds the page answering the last [`PageRequest`] (newest first).
    pub fn feed(&mut self, page: Vec<StoredMessage>, requested: PageRequest) {
        self.pages_read += 1;
        let mut reached_floor = page.len() < requested.limit;
        for message in page {
            if self.phase == Phase::Done {
                return;
            }
            if message.sequence <= self.floor() {
                // A phase change moved the floor up past the rest of this page.
                reached_floor = true;
                break;
            }
            self.cursor = message.sequence;
            self.stats.messages_considered += 1;
            self.take(message);
        }
        if self.phase != Phase::Done && (reached_floor || self.cursor <= self.floor().plus(1)) {
            self.exhausted = true;
            self.close_dangling_unit();
            self.advance_phase();
        }
    }

    fn floor(&self) -> Sequence {
        match self.phase {
            Phase::Mandatory => Sequence::ZERO,
            Phase::Optional | Phase::Done => self.optional_floor,
        }
    }

    /// Adds one message (older than every message taken so far) to the unit being built.
    fn take(&mut self, message: StoredMessage) {
        if self.trailing_replies && self.omit_trailing_reply(&message) {
            return;
        }
        if self.reasoning.keeps(&message.message) {
            self.keeps_reasoning.insert(message.sequence);
        }
        let m = &message.message;
        if m.role == Role::Tool {
            let call_id = m.tool_call_id.clone().unwrap_or_default();
            match message.call_sequence {
                // The call is beyond the walk (under the summary): the result cannot be sent alone.
                Some(call) if call > self.floor() => {
                    self.open.insert(call_id, call);
                }
                _ => {
                    self.stats.incomplete_tool_groups += 1;
                    return;
                }
            }
        }
        let mut incomplete = false;
        for call in &m.tool_calls {
            let answered_in_unit = self.open.remove(&call.id).is_some();
            let answered_by_pending = self.pending_calls.remove(&call.id).is_some();
            incomplete |= !answered_in_unit && !answered_by_pending;
        }
        let is_call = !m.tool_calls.is_empty();
        self.trailing_replies &= !is_call || incomplete;
        self.unit.push(message);
        if is_call && incomplete {
            self.stats.incomplete_tool_groups += 1;
            self.drop_incomplete_group();
        }
        if self.open.is_empty() {
            self.close_unit();
        }
    }

    /// While the walk is among the messages that would end the pack: leaves out an assistant
    /// reply (not pinned, no calls) and says so; the first other turn ends that stretch. Tool
    /// results do not: the pack places them right after their calls, before any reply of the log
    /// that came between. System parts, blank messages and incomplete tool groups are no turns
    /// of the pack.
    fn omit_trailing_reply(&mut self, stored: &StoredMessage) -> bool {
        let m = &stored.message;
        let reply =
            m.role == Role::Assistant && m.tool_calls.is_empty() && !self.pinned.contains(&stored.sequence);
        if reply {
            self.stats.final_assistant_omitted += 1;
            self.omitted.push(stored.sequence);
            if self.unit.is_empty() {
                self.oldest_free_omitted = Some(stored.sequence);
            }
            self.omitted_tokens +=
                (stored.tokens.get(self.tokenizer) + stored.reasoning_tokens.get(self.tokenizer)) as usize;
            return true;
        }
        // A call ends it once its group is known to be complete (in `take`): an incomplete one
        // is left out of the pack.
        let call = !m.tool_calls.is_empty();
        if !call && !matches!(m.role, Role::Tool | Role::System) && anthropic_renders(m) {
            self.trailing_replies = false;
        }
        false
    }

    /// Removes the newest-taken call message and its results from the unit.
    fn drop_incomplete_group(&mut self) {
        let Some(call_message) = self.unit.pop() else {
            return;
        };
        let ids: HashSet<&str> = call_message
            .message
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        self.unit.retain(|m| {
            !m.message
                .tool_call_id
                .as_deref()
                .is_some_and(|id| ids.contains(id))
        });
    }

    /// At the end of the walk: results whose call never came are incomplete groups.
    fn close_dangling_unit(&mut self) {
        if !self.open.is_empty() {
            self.stats.incomplete_tool_groups += self.open.len() as u32;
            let open: HashSet<String> = self.open.drain().map(|(id, _)| id).collect();
            self.unit.retain(|m| {
                !m.message
                    .tool_call_id
                    .as_ref()
                    .is_some_and(|id| open.contains(id))
            });
        }
        self.close_unit();
    }

    /// Decides the unit just completed: include it whole, or stop the walk.
    fn close_unit(&mut self) {
        if self.unit.is_empty() {
            return;
        }
        let unit: Vec<ContextMessage> = std::mem::take(&mut self.unit)
            .into_iter()
            .map(|m| self.shape(m))
            .collect();
        let cost: usize = unit
            .iter()
            .filter(|m| !self.is_pinned(m))
            .map(|m| m.tokens as usize)
            .sum();
        let users = unit.iter().filter(|m| m.message.role == Role::User).count() as u32;
        let messages = unit.len() as u32;
        if self.phase == Phase::Optional {
            let over_turns = self
                .request
                .budget
                .max_turns
                .is_some_and(|max| self.turns + users > max);
            let over_messages = self
                .request
                .budget
                .max_messages
                .is_some_and(|max| self.window_messages + messages > max);
            if over_turns || over_messages || self.used + cost + self.notice_reserve > self.available {
                self.stats.tool_groups_dropped += groups(&unit);
                self.phase = Phase::Done;
                self.settle_oldest_turn();
                return;
            }
        }
        self.used += cost;
        self.turns += users;
        self.stats.history_tokens += saturate(cost);
        self.window_messages += unit.iter().filter(|m| !self.is_pinned(m)).count() as u32;
        let opens_turn = unit.last().is_some_and(|m| m.message.role == Role::User);
        self.window.extend(unit);
        if opens_turn {
            self.turn_start = self.window.len();
            if self.phase == Phase::Optional {
                self.optional_turns.push(self.window.len() - 1);
            }
        }
        self.advance_phase();
    }

    /// The walk stopped before the opening user message of the turn it was in: that turn's
    /// units are dropped when the window already starts at a turn boundary without them.
    fn settle_oldest_turn(&mut self) {
        let at_boundary = self
            .turn_start
            .checked_sub(1)
            .is_some_and(|i| self.window[i].message.role == Role::User);
        if !at_boundary || self.turn_start == self.window.len() {
            return;
        }
        self.drop_window_from(self.turn_start);
    }

    /// Cache-stable history (docs/design.md, "Cache-stable packs"): when not all history after the floor fits, it
    /// begins at the oldest turn anchor in the window of the step's level, so that it stays put
    /// while the log grows until the pack no longer fits. The step is the largest power of two
    /// at most half the room the stable parts (system prompt, pinned messages, summary,
    /// memory, notice) leave; when no anchor of its level is in the window, the highest level
    /// that is.
    fn settle_stable_start(&mut self) {
        if self.request.history != HistoryPolicy::CacheStable
            || self.exhausted
            || self.stats.over_budget
            || self.nothing_missing_before_window()
        {
            return;
        }
        let fixed = REPLY_PRIMING
            + self.stats.system_prompt_tokens as usize
            + self.pinned_cost
            + self.stats.summary_tokens as usize
            + self.stats.working_memory_tokens as usize
            + self.notice_reserve;
        let step_level = (self.available.saturating_sub(fixed) / 2).max(1).ilog2() as u8;
        let candidates: Vec<(usize, u8)> = self
            .optional_turns
            .iter()
            .filter(|&&i| i < self.window.len())
            .filter_map(|&i| {
                let level = self.anchors.get(&self.window[i].sequence?)?;
                Some((i, (*level).min(step_level)))
            })
            .collect();
        let Some(level) = candidates.iter().map(|&(_, level)| level).max() else {
            return;
        };
        self.stats.history_step_tokens = 1 << level;
        let start = candidates
            .iter()
            .filter(|&&(_, l)| l == level)
            .map(|&(i, _)| i)
            .max()
            .unwrap_or(self.window.len());
        if start + 1 < self.window.len() {
            self.drop_window_from(start + 1);
        }
    }

    /// Whether every log position between the floor and the window is pinned (and so sent
    /// anyway): then no history is missing and a cache-stable cut would only drop messages.
    fn nothing_missing_before_window(&self) -> bool {
        let oldest = self.window.last().and_then(|m| m.sequence).unwrap_or(self.cursor);
        let floor = self.optional_floor;
        let pinned = self
            .snapshot
            .pinned
            .iter()
            .filter(|m| m.sequence > floor && m.sequence < oldest)
            .count() as u64;
        oldest.get().saturating_sub(floor.get() + 1) <= pinned
    }

    /// Drops the window's messages from index `at` on (older ones), with their accounting.
    fn drop_window_from(&mut self, at: usize) {
        let partial = self.window.split_off(at);
        self.stats.tool_groups_dropped += groups(&partial);
        self.turns -= partial.iter().filter(|m| m.message.role == Role::User).count() as u32;
        let counted: Vec<u32> = partial
            .iter()
            .filter(|m| !self.is_pinned(m))
            .map(|m| m.tokens)
            .collect();
        self.used -= counted.iter().map(|&t| t as usize).sum::<usize>();
        self.stats.history_tokens -= counted.iter().sum::<u32>();
        self.window_messages -= counted.len() as u32;
    }

    fn is_pinned(&self, message: &ContextMessage) -> bool {
        message.sequence.is_some_and(|s| self.pinned.contains(&s))
    }

    /// Moves from the mandatory part to the sections and optional history once the current turn
    /// and every call answered by pending results are in.
    fn advance_phase(&mut self) {
        let reached = |until: Sequence| self.exhausted || (self.cursor <= until && self.unit.is_empty());
        if self.phase != Phase::Mandatory || !self.mandatory_until.is_none_or(reached) {
            return;
        }
        self.phase = Phase::Optional;
        self.turn_start = self.window.len();
        if self.used > self.available {
            self.stats.over_budget = true;
            self.phase = Phase::Done;
            return;
        }
        let summary = self
            .snapshot
            .summary
            .clone()
            .filter(|_| self.request.include_summary);
        if let Some(summary) = summary {
            let text = summary_text(&summary.text, summary.through_sequence);
            let added = self.add_section(Source::Summary, text.clone()) || self.add_cut_summary(&text);
            if !added {
                // Everything it covers is left out, and it cannot say what that was.
                self.stats.over_budget = true;
                self.phase = Phase::Done;
                return;
            }
            self.stats.summary_through_sequence = summary.through_sequence.get();
            self.optional_floor = summary.through_sequence;
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
            self.phase = Phase::Done;
        }
    }

    /// Adds the summary section cut to the room left (its beginning, the marker, its end),
    /// when at least [`MIN_CUT_SUMMARY_TOKENS`] of it fit.
    fn add_cut_summary(&mut self, text: &str) -> bool {
        let room = self.available.saturating_sub(self.used + self.notice_reserve);
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

    fn add_section(&mut self, source: Source, text: String) -> bool {
        let tokens = text_message_cost("system", &text, self.tokenizer);
        if self.used + tokens + self.notice_reserve > self.available {
            return false;
        }
        self.used += tokens;
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

    /// The message as it goes into the pack: oversize tool output cut to head + tail; native
    /// data kept only for the format's provider within the reasoning policy (and never on
    /// pinned messages, whose cost is counted before the walk).
    fn shape(&mut self, stored: StoredMessage) -> ContextMessage {
        let tokenizer = self.tokenizer;
        let StoredMessage {
            sequence,
            tokens,
            reasoning_tokens,
            mut message,
            turn_anchor,
            ..
        } = stored;
        if let Some(level) = turn_anchor {
            self.anchors.insert(sequence, level);
        }
        let native = reasoning_tokens.get(tokenizer) as usize;
        // Most messages carry no native data: nothing to decide or strip.
        let provider = message.native_provider();
        let ours = provider.is_some() && provider == self.request.format.provider();
        let keep = ours && self.keeps_reasoning.contains(&sequence) && !self.pinned.contains(&sequence);
        match (keep, ours) {
            (true, _) => self.stats.reasoning_tokens += saturate(native),
            (false, true) => self.stats.reasoning_tokens_omitted += saturate(native),
            (false, false) => {}
        }
        if !keep && provider.is_some() {
            message.strip_native();
        }
        drop_foreign_phase(&mut message, self.request.format);
        let native = if keep { native } else { 0 };
        let mut cost = match renamed_for_openai(&message) {
            true => message_cost_with_text(&message, &context_text(&message), tokenizer),
            false => tokens.get(tokenizer) as usize,
        };
        if let Some(limit) = self.request.tool_output_max_tokens.map(|l| l as usize)
            && message.role == Role::Tool
            && cost > limit
        {
            let (head, tail) = tokenizer.head_and_tail(&message.content, limit / 2, limit);
            if !tail.is_empty() {
                let omitted = tokenizer.count(&message.content).saturating_sub(limit);
                message.content = format!(
                    "{head}\n[... {omitted} tokens of this tool output omitted; \
                     ListMessages returns it in full at sequence {sequence} ...]\n{tail}"
                );
                cost = message_cost_with_text(&message, &context_text(&message), tokenizer);
                self.cut.insert(sequence);
            }
        }
        ContextMessage {
            source: Source::History,
            sequence: Some(sequence),
            tokens: saturate(cost + native),
            message,
        }
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
    /// own, as the turns render (system parts and blank messages are not turns). A user message right after tool results or calls (nothing but user and system
    /// messages in between) does not: it is rendered into the same user turn as the results
    /// (a user typing while tools ran), so the tool loop, whose thinking Anthropic requires,
    /// goes on past it.
    CurrentTurn {
        /// User messages were taken since the last other message (their turn is undecided).
        user_run: bool,
        /// An assistant reply older than an opening user message was reached: the turn ended.
        ended: bool,
    },
}

impl ReasoningScope {
    /// Notes `message` (older than every message noted so far); true if it keeps native data.
    fn keeps(&mut self, message: &Message) -> bool {
        let (user_run, ended) = match self {
            ReasoningScope::None => return false,
            ReasoningScope::All => return true,
            // Once the turn has ended, nothing older is in it.
            ReasoningScope::CurrentTurn { ended: true, .. } => return false,
            ReasoningScope::CurrentTurn { user_run, ended } => (user_run, ended),
        };
        match message.role {
            // Messages a pack does not show as turns (system parts, blank text) change nothing.
            Role::System => {}
            _ if !anthropic_renders(message) => {}
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
fn keep_pending_reasoning(request: &mut ContextRequest) -> usize {
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

/// Room for the closing turn ([`CLOSING_TURN`]) where a pinned assistant message could end a
/// pack that may not end on one: one newer than the newest user message.
fn closing_turn_reserve(trailing_replies: bool, snapshot: &ContextSnapshot, tokenizer: Tokenizer) -> usize {
    let newest_user = snapshot.last_user_sequence.unwrap_or(Sequence::ZERO);
    let pinned_reply = snapshot
        .pinned
        .iter()
        .any(|m| m.message.role == Role::Assistant && m.sequence > newest_user);
    match trailing_replies && pinned_reply {
        true => text_message_cost("user", CLOSING_TURN, tokenizer),
        false => 0,
    }
}

/// Tokens of a pending message (its native data as [`keep_pending_reasoning`] left it).
pub(super) fn pending_message_cost(message: &Message, tokenizer: Tokenizer) -> usize {
    message_cost_with_text(message, &context_text(message), tokenizer) + native_cost(message, tokenizer)
}

/// Tool-call groups among `messages`.
fn groups(messages: &[ContextMessage]) -> u32 {
    messages
        .iter()
        .filter(|m| !m.message.tool_calls.is_empty())
        .count() as u32
}
