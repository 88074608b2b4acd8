//! Context editing (docs/design.md, "Context editing"): older tool results replaced by a
//! placeholder that names the tool, the tokens it held and the sequence `ListMessages` returns it
//! at, so that the budget holds more of the conversation.
//!
//! The walk prices every optional unit as if its clearable results were cleared (a lower bound
//! of what it costs), so that it reaches as far back as clearing could let history go. What is
//! cleared is then decided from the window alone:
//! - newest-that-fits history clears every clearable result it holds;
//! - cache-stable history starts at a turn anchor of the step's level (as without clearing)
//!   and keeps its messages whole from the anchor [`CLEARED_CELLS`] steps later on: between
//!   the two, clearable results are cleared (but for that part's `keep_recent` newest
//!   results), so that the cleared part holds a few steps of history in little room. The
//!   start is the oldest anchor whose pack fits; fewer cleared steps, down to none, where none
//!   fits. Both boundaries are anchors of the log, fixed once written: while history stays put
//!   each pack extends the previous one, and when it no longer fits both move forward one
//!   step, which frees a step, as a jump without clearing does.
//!
//! A result is clearable when it is not among the `keep_recent` newest results, its tool is not
//! excluded, it is not pinned and not part of the current turn, and the placeholder is shorter.
//! Nothing is cleared when all history fits whole.

use std::collections::{HashMap, HashSet};

use super::{ContextPacker, Phase};
use crate::domain::{
    context::{
        ContextMessage, HistoryPolicy,
        cost::{adjusted, attachments_delta, context_text, message_cost_with_text, saturate},
    },
    message::Role,
};

/// Steps of the anchor grid between where cache-stable history starts and where its verbatim
/// part starts. Three: in the benchmark's tool loop (docs/benchmarks.md) packs then hold
/// about twice the user turns with the same share of calls where history jumps; two hold
/// less, four jump on half the calls.
const CLEARED_CELLS: usize = 3;

/// What clearing a message saves, in tokens: `now`, and `aged`, once it is no longer among
/// the `keep_recent` newest results (the same for every other message). Where a cache-stable
/// history's cleared part ends is worked out from `aged`, which does not change as the log grows,
/// so that it stays put while results age.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Saving {
    pub(super) now: u32,
    pub(super) aged: u32,
}

/// Clearing's state during the walk.
#[derive(Debug, Default)]
pub(super) struct Clearing {
    /// Tool results walked so far (the newest `keep_recent` are never cleared).
    results_seen: u32,
}

impl ContextPacker {
    /// What clearing each message of `unit` (a unit the walk just completed, newest first)
    /// would save, in tokens; zeros when clearing is off or the unit is mandatory.
    pub(super) fn unit_savings(&mut self, unit: &[ContextMessage]) -> Vec<Saving> {
        let mut savings = vec![Saving::default(); unit.len()];
        let Some(clear) = self.request.clear_tool_results.clone() else {
            return savings;
        };
        let optional = self.walk.phase == Phase::Optional;
        let names = call_names(unit);
        let (mut cleared_now, mut cleared_aged) = (HashSet::new(), HashSet::new());
        for (i, m) in unit
            .iter()
            .enumerate()
            .filter(|(_, m)| m.message.role == Role::Tool)
        {
            self.clearing.results_seen += 1;
            let recent = self.clearing.results_seen <= clear.keep_recent;
            let id = m.message.tool_call_id.clone().unwrap_or_default();
            let tool = names.get(&id).cloned().unwrap_or_default();
            if !optional || self.is_pinned(m) || clear.exclude_tools.contains(&tool) {
                continue;
            }
            let saved = m
                .tokens
                .saturating_sub(self.cleared(m, &names, &HashSet::new()).tokens);
            if saved > 0 {
                savings[i].aged = saved;
                cleared_aged.insert(id.clone());
                if !recent {
                    savings[i].now = saved;
                    cleared_now.insert(id);
                }
            }
        }
        if clear.clear_arguments && !cleared_aged.is_empty() {
            for (i, m) in unit.iter().enumerate() {
                if plain_call(m) && !self.is_pinned(m) {
                    let saved =
                        |ids: &HashSet<String>| m.tokens.saturating_sub(self.cleared(m, &names, ids).tokens);
                    savings[i] = Saving {
                        now: saved(&cleared_now),
                        aged: saved(&cleared_aged),
                    };
                }
            }
        }
        savings
    }

    /// `message` as a pack carries it cleared: a tool result's content replaced by the
    /// placeholder; a call message's arguments of the calls in `cleared_calls` emptied.
    fn cleared(
        &self,
        message: &ContextMessage,
        names: &HashMap<String, String>,
        cleared_calls: &HashSet<String>,
    ) -> ContextMessage {
        let mut cleared = message.clone();
        let m = &mut cleared.message;
        if m.role == Role::Tool {
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            let tool = names.get(id).map_or("the tool", String::as_str);
            let sequence = message.sequence.map_or(0, |s| s.get());
            m.content = format!(
                "[tool result cleared to save context: {tool} returned {} tokens; \
                 ListMessages returns it at sequence {sequence}]",
                message.tokens
            );
            m.attachments.clear();
            // A cleared result renders from its text, not its stored JSON.
            m.native = None;
        } else {
            for call in m.tool_calls.iter_mut().filter(|c| cleared_calls.contains(&c.id)) {
                call.arguments = "{}".into();
            }
        }
        let cost = message_cost_with_text(m, &context_text(m), self.tokenizer);
        cleared.tokens = saturate(adjusted(cost, attachments_delta(m, self.request.format)));
        cleared
    }

    /// After the walk: decides what is cleared and where a cache-stable history starts (see
    /// the module documentation), and clears it. False when nothing is to be cleared (the
    /// window is then settled as without clearing).
    pub(super) fn settle_clearing(&mut self) -> bool {
        if self.request.clear_tool_results.is_none() || self.stats.over_budget {
            return false;
        }
        let all_fit_whole = self.walk.exhausted && self.budget.fits(0);
        if self.window.savings_total == 0 || all_fit_whole {
            return false;
        }
        let n = self.window.messages.len();
        let stable = match self.request.history {
            HistoryPolicy::Newest => None,
            HistoryPolicy::CacheStable => self.stable_clearing_span(),
        };
        // Newest-that-fits (and cache-stable history with too little to clear a full part):
        // every result clearable now, all the walk kept.
        let (clear, start) = stable.unwrap_or_else(|| {
            let now = (0..n).filter(|&i| self.window.savings[i].now > 0).collect();
            (now, n)
        });
        if start < n {
            self.drop_window_from(start);
        }
        self.clear_window(&clear);
        true
    }

    /// Cache-stable clearing: the window indices to clear and where the window ends
    /// (exclusive), or `None` when no anchor of the step's level fits even without clearing
    /// (then the pack clears as newest-that-fits does). History starts at the oldest anchor of
    /// the step's level whose pack fits, where a start's pack clears up to the anchor
    /// [`CLEARED_CELLS`] anchors later (the part's `keep_recent` newest results stay whole) and
    /// keeps the newer messages whole; see the module documentation.
    fn stable_clearing_span(&mut self) -> Option<(Vec<usize>, usize)> {
        // The step of cache-stable history without clearing; history starts at an anchor of
        // it and the verbatim part at the anchor CLEARED_CELLS later.
        let step_level = self.stable_step_level();
        let keep = self
            .request
            .clear_tool_results
            .as_ref()
            .map_or(0, |c| c.keep_recent as usize);
        let parts = Parts::of(self, keep);
        let n = self.window.messages.len();
        let window = &self.window;
        let anchors: Vec<usize> = parts
            .turns
            .iter()
            .copied()
            .filter(|&i| {
                let level = window.messages[i].sequence.and_then(|s| window.anchors.get(&s));
                level.is_some_and(|&l| l >= step_level)
            })
            .collect();
        // The oldest start whose pack fits, clearing CLEARED_CELLS steps; fewer when none
        // fits so (history whose tool results save little), down to none.
        for cells in (0..=CLEARED_CELLS).rev() {
            for j in (cells..anchors.len()).rev() {
                let (s, t) = (anchors[j], anchors[j - cells]);
                let dropped = parts.whole[n] - parts.whole[s + 1];
                if self.budget.fits_saving(0, dropped + parts.saved(t, s)) {
                    self.stats.history_step_tokens = 1 << step_level;
                    return Some((parts.cleared_indices(t, s), s + 1));
                }
            }
        }
        None
    }

    /// Clears the window's tool results at `indices`, with their accounting; with
    /// `clear_arguments`, the calls of the cleared results too (their arguments emptied,
    /// whatever that saves, unless it would cost more).
    fn clear_window(&mut self, indices: &[usize]) {
        let names = call_names(&self.window.messages);
        let messages = &self.window.messages;
        let results: Vec<usize> = indices
            .iter()
            .copied()
            .filter(|&i| messages[i].message.role == Role::Tool)
            .collect();
        let cleared_ids: HashSet<String> = results
            .iter()
            .filter_map(|&i| messages[i].message.tool_call_id.clone())
            .collect();
        let clear_arguments = self
            .request
            .clear_tool_results
            .as_ref()
            .is_some_and(|c| c.clear_arguments);
        let callers = (0..messages.len()).filter(|&i| {
            let m = &messages[i];
            clear_arguments
                && plain_call(m)
                && !self.is_pinned(m)
                && m.message.tool_calls.iter().any(|c| cleared_ids.contains(&c.id))
        });
        let callers: Vec<usize> = callers.collect();
        for i in results.into_iter().chain(callers) {
            let cleared = self.cleared(&self.window.messages[i], &names, &cleared_ids);
            let before = self.window.messages[i].tokens;
            let saved = before.saturating_sub(cleared.tokens);
            let result = cleared.message.role == Role::Tool;
            if cleared.tokens > before || (result && saved == 0) {
                continue;
            }
            if let Some(sequence) = cleared.sequence {
                // Not verbatim any more (a result's content, a call's arguments).
                self.shaping.cleared.insert(sequence);
            }
            if result {
                self.stats.tool_results_cleared += 1;
                // Its head and tail, if it was cut, are gone with the rest.
                if let Some(sequence) = cleared.sequence {
                    self.shaping.cut.remove(&sequence);
                }
            }
            self.stats.tool_result_tokens_cleared += saved;
            self.stats.history_tokens -= saved;
            self.budget.used -= saved as usize;
            self.window.messages[i] = cleared;
        }
    }
}

/// The window's sums a cache-stable clearing is worked out from (indices newest first).
struct Parts {
    /// Tokens counted (pinned messages are counted apart) of the first `i` messages.
    whole: Vec<usize>,
    /// Their savings once aged.
    aged: Vec<usize>,
    /// Each message's saving once aged.
    each: Vec<usize>,
    /// Optional turn starts, ascending.
    turns: Vec<usize>,
    /// Clearable results, ascending, with the index of the message that called each.
    results: Vec<(usize, Option<usize>)>,
    /// Results a cleared part keeps whole: its newest `keep`.
    keep: usize,
}

impl Parts {
    fn of(packer: &ContextPacker, keep: usize) -> Self {
        let window = &packer.window;
        let n = window.messages.len();
        let (mut whole, mut aged) = (vec![0usize; n + 1], vec![0usize; n + 1]);
        let mut caller = HashMap::new();
        for (j, m) in window.messages.iter().enumerate() {
            let counted = if packer.is_pinned(m) { 0 } else { m.tokens as usize };
            whole[j + 1] = whole[j] + counted;
            aged[j + 1] = aged[j] + window.savings[j].aged as usize;
            caller.extend(m.message.tool_calls.iter().map(|c| (c.id.as_str(), j)));
        }
        let mut turns: Vec<usize> = window.optional_turns.iter().copied().filter(|&i| i < n).collect();
        turns.sort_unstable();
        let results = (0..n)
            .filter(|&j| window.savings[j].aged > 0 && window.messages[j].message.role == Role::Tool)
            .map(|j| {
                let id = window.messages[j]
                    .message
                    .tool_call_id
                    .as_deref()
                    .unwrap_or_default();
                (j, caller.get(id).copied())
            })
            .collect();
        Parts {
            whole,
            aged,
            each: window.savings.iter().map(|s| s.aged as usize).collect(),
            turns,
            results,
            keep,
        }
    }

    /// The cleared part `(t, s]`'s newest `keep` results, with the messages that called them.
    fn kept(&self, t: usize, s: usize) -> impl Iterator<Item = (usize, Option<usize>)> + '_ {
        let from = self.results.partition_point(|&(j, _)| j <= t);
        self.results[from..]
            .iter()
            .take(self.keep)
            .filter(move |&&(j, _)| j <= s)
            .copied()
    }

    /// What clearing `(t, s]` saves, at least: a call one of whose results stays whole is
    /// counted as saving nothing (its other results' arguments are emptied all the same).
    fn saved(&self, t: usize, s: usize) -> usize {
        let kept: HashSet<usize> = self
            .kept(t, s)
            .flat_map(|(j, caller)| std::iter::once(j).chain(caller))
            .collect();
        let kept: usize = kept.iter().map(|&j| self.each[j]).sum();
        self.aged[s + 1] - self.aged[t + 1] - kept
    }

    /// The messages of `(t, s]` to clear: every clearable result but the part's newest `keep`,
    /// and the calls (clearing empties the arguments of the cleared results' calls only).
    fn cleared_indices(&self, t: usize, s: usize) -> Vec<usize> {
        let kept: HashSet<usize> = self.kept(t, s).map(|(j, _)| j).collect();
        (t + 1..=s)
            .filter(|j| self.each[*j] > 0 && !kept.contains(j))
            .collect()
    }
}

/// Whether `m` makes calls and carries nothing that its arguments would have to stay in step
/// with (native JSON, reasoning, signatures): the calls whose arguments may be emptied.
fn plain_call(m: &ContextMessage) -> bool {
    let message = &m.message;
    message.role == Role::Assistant
        && !message.tool_calls.is_empty()
        && message.native.is_none()
        && message.reasoning.is_empty()
        && message.tool_calls.iter().all(|c| c.signature.is_empty())
}

/// The tool name of every call among `messages`, by call id.
fn call_names(messages: &[ContextMessage]) -> HashMap<String, String> {
    messages
        .iter()
        .flat_map(|m| &m.message.tool_calls)
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect()
}
