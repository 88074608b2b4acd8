//! The window: the history the walk kept, newest first, and where it starts (a turn boundary;
//! for cache-stable packs, a turn anchor that stays put while the log grows).

use std::collections::HashMap;

use super::{ContextPacker, clearing::Saving, groups};
use crate::{
    domain::tokenize::REPLY_PRIMING,
    domain::{
        context::{ContextMessage, HistoryPolicy},
        ids::Sequence,
        message::Role,
    },
};

/// Included history, newest first, with what deciding its start needs.
#[derive(Debug, Default)]
pub(super) struct Window {
    pub(super) messages: Vec<ContextMessage>,
    /// Where in `messages` the turn being walked begins: the units from here on belong to a
    /// turn whose opening user message has not been reached yet.
    pub(super) turn_start: usize,
    /// Where in `messages` optional turns begin: the user messages that open them (the oldest
    /// message of their unit), where a cache-stable history may start.
    pub(super) optional_turns: Vec<usize>,
    /// Turn anchor levels of the history messages shaped so far, by sequence.
    pub(super) anchors: HashMap<Sequence, u8>,
    /// User messages in `messages` (what `max_turns` caps).
    pub(super) turns: u32,
    /// Messages in `messages`, pinned ones aside (what `max_messages` caps).
    pub(super) counted: u32,
    /// What clearing each message of `messages` would save (see [`super::clearing`]).
    pub(super) savings: Vec<Saving>,
    /// The sum of `savings` now.
    pub(super) savings_total: usize,
    /// The messages of the mandatory part: the first `mandatory_len` of `messages`, costing
    /// `mandatory_cost` (pinned ones aside).
    pub(super) mandatory_len: usize,
    pub(super) mandatory_cost: usize,
}

impl Window {
    /// Adds a unit the walk kept (`counted` of its messages not pinned, costing `cost`), with
    /// what clearing its messages would save; `optional` when the walk is past the mandatory
    /// part.
    pub(super) fn extend(
        &mut self,
        unit: Vec<ContextMessage>,
        savings: Vec<Saving>,
        (counted, cost): (u32, usize),
        optional: bool,
    ) {
        self.turns += unit.iter().filter(|m| m.message.role == Role::User).count() as u32;
        self.counted += counted;
        if !optional {
            self.mandatory_len += unit.len();
            self.mandatory_cost += cost;
        }
        self.savings_total += savings.iter().map(|s| s.now as usize).sum::<usize>();
        self.savings.extend(savings);
        let opens_turn = unit.last().is_some_and(|m| m.message.role == Role::User);
        self.messages.extend(unit);
        if opens_turn {
            self.turn_start = self.messages.len();
            if optional {
                self.optional_turns.push(self.messages.len() - 1);
            }
        }
    }

    /// The sequence of the oldest message kept, if any.
    fn oldest(&self) -> Option<Sequence> {
        self.messages.last().and_then(|m| m.sequence)
    }
}

impl ContextPacker {
    /// The walk stopped before the opening user message of the turn it was in: that turn's
    /// units are dropped when the window already starts at a turn boundary without them.
    pub(super) fn settle_oldest_turn(&mut self) {
        let start = self.window.turn_start;
        let at_boundary = start
            .checked_sub(1)
            .is_some_and(|i| self.window.messages[i].message.role == Role::User);
        if !at_boundary || start == self.window.messages.len() {
            return;
        }
        self.drop_window_from(start);
    }

    /// Cache-stable history (docs/design.md, "Cache-stable packs"): when not all history after
    /// the floor fits, it begins at the oldest turn anchor in the window of the step's level, so
    /// that it stays put while the log grows until the pack no longer fits. The step is the
    /// largest power of two at most half the room the stable parts (system prompt, pinned
    /// messages, summary, memory, notice) leave; when no anchor of its level is in the window,
    /// the highest level that is.
    pub(super) fn settle_stable_start(&mut self) {
        if self.request.history != HistoryPolicy::CacheStable
            || self.walk.exhausted
            || self.stats.over_budget
            || self.nothing_missing_before_window()
        {
            return;
        }
        let step_level = self.stable_step_level();
        let window = &self.window;
        let candidates: Vec<(usize, u8)> = window
            .optional_turns
            .iter()
            .filter(|&&i| i < window.messages.len())
            .filter_map(|&i| {
                let level = window.anchors.get(&window.messages[i].sequence?)?;
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
            .unwrap_or(window.messages.len());
        if start + 1 < self.window.messages.len() {
            self.drop_window_from(start + 1);
        }
    }

    /// The level of the anchors a cache-stable history starts at: the largest power of two at
    /// most half the room the stable parts (system prompt, pinned messages, summary, memory,
    /// notice) leave.
    pub(super) fn stable_step_level(&self) -> u8 {
        let fixed = REPLY_PRIMING
            + self.stats.system_prompt_tokens as usize
            + self.budget.pinned_cost
            + self.stats.summary_tokens as usize
            + self.stats.working_memory_tokens as usize
            + self.budget.notice_reserve
            + self.budget.recall_reserve;
        (self.budget.available.saturating_sub(fixed) / 2).max(1).ilog2() as u8
    }

    /// Whether every log position between the floor and the window is pinned (and so sent
    /// anyway): then no history is missing and a cache-stable cut would only drop messages.
    fn nothing_missing_before_window(&self) -> bool {
        let oldest = self.window.oldest().unwrap_or(self.walk.cursor);
        let floor = self.walk.optional_floor;
        let pinned = self
            .snapshot
            .pinned
            .iter()
            .filter(|m| m.sequence > floor && m.sequence < oldest)
            .count() as u64;
        oldest.get().saturating_sub(floor.get() + 1) <= pinned
    }

    /// Drops the window's messages from index `at` on (older ones), with their accounting.
    pub(super) fn drop_window_from(&mut self, at: usize) {
        let partial = self.window.messages.split_off(at);
        let savings = self.window.savings.split_off(at.min(self.window.savings.len()));
        self.window.savings_total -= savings.iter().map(|s| s.now as usize).sum::<usize>();
        self.stats.tool_groups_dropped += groups(&partial);
        self.window.turns -= partial.iter().filter(|m| m.message.role == Role::User).count() as u32;
        let counted: Vec<u32> = partial
            .iter()
            .filter(|m| !self.is_pinned(m))
            .map(|m| m.tokens)
            .collect();
        self.budget.used -= counted.iter().map(|&t| t as usize).sum::<usize>();
        self.stats.history_tokens -= counted.iter().sum::<u32>();
        self.window.counted -= counted.len() as u32;
    }
}
