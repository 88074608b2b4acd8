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
//! Older history starts at a turn boundary (docs/design.md, "Provider rules"): the oldest turn
//! walked is kept whole or not at all, unless nothing before it in the window starts a turn (the
//! current turn is pending, or the window starts at a tool call that pending results answer);
//! then its newest units that fit are kept. At the log's start or the summary watermark,
//! whatever follows is kept, turn boundary or not, so that nothing falls between summary and
//! history. Where the window still does not open with a user message, Anthropic packs open with
//! a placeholder user turn.
//!
//! The steps, one file each, in the order a pack goes through them:
//! - [`walk`]: the log's tail, newest first, cut into units that are kept or end the walk;
//! - [`sections`]: the phase change after the mandatory part, where summary and memory go in;
//! - [`shape`]: each message as the pack carries it (native data, cut tool output);
//! - [`window`]: the history kept, where it starts (turn boundary, cache-stable anchor);
//! - [`left_out`]: replies that would end the pack, and the placeholder turns;
//! - [`finish`]: the pack in log order with its notice and stats;
//! - [`stable_prefix`]: what the next pack repeats, computed once.

use std::collections::{HashMap, HashSet};

pub use left_out::{CLOSING_TURN, PLACEHOLDER_TURN};

use super::{ContextMessage, ContextRequest, ContextSnapshot, ContextStats, cost::saturate};
use crate::{
    domain::tokenize::{REPLY_PRIMING, Tokenizer},
    domain::{ids::Sequence, message::Role},
};
use shape::{Shaping, pending_message_cost, pinned_cost};
use walk::{Unit, Walk};
use window::Window;

mod clearing;
mod finish;
mod left_out;
mod sections;
mod shape;
mod stable_prefix;
mod walk;
mod window;

/// Largest page of one tail read.
const MAX_PAGE: usize = 1000;
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

/// Where the walk is: in the mandatory part (kept whatever it costs), in optional history
/// (kept while it fits), or done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Mandatory,
    Optional,
    Done,
}

/// The tokens the pack may spend and has spent.
#[derive(Debug)]
struct Budget {
    /// What the request allows.
    available: usize,
    /// What the parts taken so far cost.
    used: usize,
    /// Room kept for the truncation notice (and the placeholder turns, see
    /// [`left_out::closing_reserve`]).
    notice_reserve: usize,
    /// The part of `notice_reserve` that is the notice's own (what a pack with no history
    /// left out does not need).
    notice_part: usize,
    /// Tokens of the pinned messages (counted before the walk).
    pinned_cost: usize,
    /// Room kept for the recalled turn ([`super::Recall::room`]), once the summary and the
    /// working memory are in: older history does not take it.
    recall_reserve: usize,
}

impl Budget {
    /// Whether `tokens` more still leave room for the notice.
    fn fits(&self, tokens: usize) -> bool {
        self.used + tokens + self.notice_reserve + self.recall_reserve <= self.available
    }

    /// Whether `tokens` more still leave room for the notice once `saved` tokens are cleared
    /// from what was taken.
    fn fits_saving(&self, tokens: usize, saved: usize) -> bool {
        self.used.saturating_sub(saved) + tokens + self.notice_reserve + self.recall_reserve <= self.available
    }

    /// What is left once the notice's room is kept and `saved` tokens are cleared from what
    /// was taken.
    fn slack_saving(&self, saved: usize) -> usize {
        self.available
            .saturating_sub(self.used.saturating_sub(saved) + self.notice_reserve + self.recall_reserve)
    }

    /// What is left once the notice's room is kept.
    fn room(&self) -> usize {
        self.available
            .saturating_sub(self.used + self.notice_reserve + self.recall_reserve)
    }
}

/// Assembles a pack from the request, the conversation snapshot and tail pages fed to it.
#[derive(Debug)]
pub struct ContextPacker {
    request: ContextRequest,
    snapshot: ContextSnapshot,
    tokenizer: Tokenizer,
    budget: Budget,
    walk: Walk,
    /// The unit being built.
    unit: Unit,
    /// The history kept so far.
    window: Window,
    /// How messages are shaped for the pack.
    shaping: Shaping,
    /// Pinned messages' sequences: always sent, counted before the walk.
    pinned: HashSet<Sequence>,
    /// Assistant replies left out because they would end the pack.
    left_out: left_out::LeftOut,
    /// The summary and working-memory sections that went in.
    sections: Vec<ContextMessage>,
    /// Which tool results clearing has walked.
    clearing: clearing::Clearing,
    stats: ContextStats,
}

impl ContextPacker {
    /// Starts a pack: accounts for the mandatory parts known before reading the log.
    pub fn new(mut request: ContextRequest, snapshot: ContextSnapshot) -> Self {
        let tokenizer = request.tokenizer;
        let available = request.budget.available();
        let pinned_cost = pinned_cost(&snapshot, tokenizer, request.format);
        let pending_reasoning = shape::keep_pending_reasoning(&mut request);
        let pending_cost: usize = request
            .pending
            .iter()
            .map(|m| pending_message_cost(m, tokenizer, request.format))
            .sum();
        let system_cost = match request.system_prompt.is_empty() {
            true => 0,
            false => super::cost::text_message_cost("system", &request.system_prompt, tokenizer),
        };
        let pending_user = request.pending.iter().any(|m| m.role == Role::User);
        let left_out = left_out::LeftOut::new(&request);
        let notice_reserve = left_out::closing_reserve(snapshot.last_sequence, request.format, tokenizer)
            + left_out.closing_turn_reserve(&snapshot, tokenizer);
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
            budget: Budget {
                available,
                used: REPLY_PRIMING + system_cost + pinned_cost + pending_cost,
                notice_reserve,
                notice_part: left_out::notice_reserve(snapshot.last_sequence, tokenizer),
                pinned_cost,
                recall_reserve: 0,
            },
            walk: Walk::new(&snapshot, pending_user),
            unit: Unit::default(),
            window: Window::default(),
            shaping: Shaping::new(&request, pending_user),
            pinned: snapshot.pinned.iter().map(|m| m.sequence).collect(),
            left_out,
            sections: Vec::new(),
            clearing: Default::default(),
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
        let walk = &self.walk;
        if walk.phase == Phase::Done || walk.exhausted || walk.cursor <= floor.plus(1) {
            return None;
        }
        // Each further read is four times larger: the first one was sized for typical
        // messages, so needing more means they are smaller than typical.
        let first = initial_page_limit(&self.request);
        let mut limit = (first << (2 * walk.pages_read.min(4))).min(MAX_PAGE);
        if let (Phase::Optional, Some(max)) = (walk.phase, self.request.budget.max_messages) {
            let left = max.saturating_sub(self.window.counted) as usize;
            limit = limit.min(left + 16);
        }
        Some(PageRequest {
            before: walk.cursor,
            floor,
            limit,
            max_bytes: usize::MAX,
        })
    }

    /// Feeds the first page, read together with the snapshot: the newest `limit` non-excluded
    /// messages at that moment. Messages appended after the snapshot are ignored.
    pub fn feed_first(&mut self, mut page: Vec<crate::domain::message::StoredMessage>, limit: usize) {
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
    pub fn feed(&mut self, page: Vec<crate::domain::message::StoredMessage>, requested: PageRequest) {
        self.walk.pages_read += 1;
        let mut reached_floor = page.len() < requested.limit;
        for message in page {
            if self.walk.phase == Phase::Done {
                return;
            }
            if message.sequence <= self.floor() {
                // A phase change moved the floor up past the rest of this page.
                reached_floor = true;
                break;
            }
            self.walk.cursor = message.sequence;
            self.stats.messages_considered += 1;
            let compaction = self.holds_compaction(&message);
            let sequence = message.sequence;
            self.take(message);
            // The provider's compaction stands for everything before it: the walk ends there,
            // when it closes a unit (a tool round begun before it cannot start the pack).
            if compaction && self.start_at_compaction(sequence) {
                self.stats.compaction_sequence = sequence.get();
                reached_floor = true;
                break;
            }
        }
        if self.walk.phase != Phase::Done && (reached_floor || self.walk.cursor <= self.floor().plus(1)) {
            self.walk.exhausted = true;
            self.close_dangling_unit();
            self.advance_phase();
        }
    }

    /// The walk's exclusive lower bound: the log's start in the mandatory part, the summary
    /// watermark (when the summary went in) after it.
    fn floor(&self) -> Sequence {
        match self.walk.phase {
            Phase::Mandatory => Sequence::ZERO,
            Phase::Optional | Phase::Done => self.walk.optional_floor,
        }
    }

    fn is_pinned(&self, message: &ContextMessage) -> bool {
        message.sequence.is_some_and(|s| self.pinned.contains(&s))
    }
}

/// Calls answered by pending results, by id, with the sequence of the message that made them.
type PendingCalls = HashMap<String, Sequence>;

/// Tool-call groups among `messages`.
fn groups(messages: &[ContextMessage]) -> u32 {
    messages
        .iter()
        .filter(|m| !m.message.tool_calls.is_empty())
        .count() as u32
}
