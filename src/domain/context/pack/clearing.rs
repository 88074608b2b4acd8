//! Context editing (docs/design.md, "Context editing"): older tool results replaced by a
//! placeholder that names the tool, the tokens it held and the sequence `ListMessages` returns it
//! at, so that the budget holds more of the conversation.
//!
//! The walk prices every optional unit as if its clearable results were cleared (a lower bound
//! of what it costs), so that it reaches as far back as clearing could let history go. What is
//! cleared is then decided from the window alone:
//! - newest-that-fits history clears every clearable result it holds;
//! - cache-stable history has three parts: a start, a cleared part and a verbatim part.
//!   - The start is the oldest turn anchor of a coarse level whose pack fits with every
//!     clearable result cleared: [`ContextPacker::start_spread`] levels above the step without
//!     clearing, as many as cleared turns are cheaper than whole ones. It stays put for long
//!     and jumps by a large step only when even cleared history no longer fits. History that
//!     fits cleared all the way back to the floor (the log's start or the summary's watermark)
//!     starts there, as without clearing: that start moves only with the summary.
//!   - The verbatim part starts at the *frontier*: the oldest anchor of the frontier's level
//!     whose pack fits with the clearable results between start and frontier cleared (but for
//!     that part's `keep_recent` newest results). The frontier's level is one above the
//!     *slack*, the room left with everything clearable cleared; where no such anchor fits,
//!     every clearable result is cleared. So the verbatim part grows, pack after pack, until
//!     its results no longer fit whole; then they are cleared nearly all at once, near the end
//!     of the pack where clearing costs little of the cache, and the frontier stays put again.
//!     As the cleared part fills the room the slack shrinks, and the frontier's grid with it.
//!
//! Start and frontier are anchors of the log, fixed once written: while both stay put each
//! pack extends the previous one. Chosen by measuring (docs/benchmarks.md, "Context editing
//! II"); without tool results worth clearing the start's level is the step without clearing.
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

/// The most levels above the step of cache-stable history without clearing that a history
/// with clearing starts at (see [`ContextPacker::start_spread`]).
const MAX_START_SPREAD: u8 = 4;

/// How many levels above the slack (the room left with everything clearable cleared) the
/// anchors are that the verbatim part starts at: one, so that the verbatim part, once its
/// results no longer fit whole, is cleared nearly all at once rather than a turn at a time,
/// and then grows for long without moving what precedes it.
const FRONTIER_SPREAD: u32 = 1;

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
    /// (exclusive), or `None` when no start fits even with everything clearable cleared (then
    /// the pack clears as newest-that-fits does); see the module documentation.
    fn stable_clearing_span(&mut self) -> Option<(Vec<usize>, usize)> {
        let keep = self
            .request
            .clear_tool_results
            .as_ref()
            .map_or(0, |c| c.keep_recent as usize);
        let parts = Parts::of(self, keep);
        let n = self.window.messages.len();
        let dropped = |s: usize| parts.whole[n] - parts.whole[s + 1];
        // The start: the oldest anchor of the start's level (or the highest level the window
        // holds below it) whose pack fits with all it holds cleared.
        let start_level = self
            .stable_step_level()
            .saturating_add(self.start_spread())
            .min(63);
        let window = &self.window;
        let mut starts: Vec<(usize, u8)> = parts
            .turns
            .iter()
            .filter_map(|&i| {
                let level = window.anchors.get(&window.messages[i].sequence?)?;
                Some((i, (*level).min(start_level)))
            })
            .collect();
        // History that reaches the floor (the log's start or the summary's watermark) may start
        // there: the start that moves only with the summary, holding all of it.
        if self.walk.exhausted && n > 0 {
            starts.push((n - 1, start_level));
        }
        // Highest level first, then oldest first.
        starts.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let (s, level) = starts
            .into_iter()
            .find(|&(s, _)| self.budget.fits_saving(0, dropped(s) + parts.now[s + 1]))?;
        self.stats.history_step_tokens = 1u32.checked_shl(u32::from(level)).unwrap_or(u32::MAX);
        // The verbatim part: from the oldest anchor of the frontier's level whose pack fits,
        // clearing what lies between the start and it (but for that part's `keep_recent`
        // newest results); everything clearable cleared where none fits.
        let slack = self.budget.slack_saving(dropped(s) + parts.now[s + 1]);
        let frontier_level = slack.max(1).ilog2() + FRONTIER_SPREAD;
        let frontier = parts
            .turns
            .iter()
            .copied()
            .filter(|&t| t < s)
            .filter(|&t| {
                let level = window.messages[t].sequence.and_then(|q| window.anchors.get(&q));
                level.is_some_and(|&l| u32::from(l) >= frontier_level)
            })
            .rev()
            .find(|&t| self.budget.fits_saving(0, dropped(s) + parts.saved(t + 1, s)));
        let clear = match frontier {
            Some(t) => parts.cleared_indices(t + 1, s),
            None => (0..=s).filter(|&j| self.window.savings[j].now > 0).collect(),
        };
        Some((clear, s + 1))
    }

    /// How many levels above the step of cache-stable history without clearing the anchors are
    /// that history with clearing starts at: the base-2 logarithm of how many times the
    /// window's messages outweigh them cleared, at most [`MAX_START_SPREAD`]. History then
    /// starts at an anchor of about a quarter to half of what clearing lets the pack reach
    /// back, so that it jumps about as often as without clearing (a jump frees as much of the
    /// cleared history as a step frees of whole history) and holds on average nearly all it
    /// can. In the tool loops of docs/benchmarks.md (results of about 600 tokens, 5 to 7 times
    /// their placeholders) that is two levels; one level less jumps twice as often for a few
    /// more turns, one more holds a tenth fewer turns.
    fn start_spread(&self) -> u8 {
        let whole = self.budget.used.max(1);
        let cleared = whole.saturating_sub(self.window.savings_total).max(1);
        ((whole / cleared).max(1).ilog2() as u8).min(MAX_START_SPREAD)
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
            // A call whose arguments were `{}` already is still verbatim: recall must not
            // quote it as if the pack had abridged it.
            let unchanged = cleared.message == self.window.messages[i].message;
            if cleared.tokens > before || (result && saved == 0) || unchanged {
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
    /// Their savings now (all clearable results cleared).
    now: Vec<usize>,
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
        let (mut whole, mut aged, mut now) = (vec![0usize; n + 1], vec![0usize; n + 1], vec![0usize; n + 1]);
        let mut caller = HashMap::new();
        for (j, m) in window.messages.iter().enumerate() {
            let counted = if packer.is_pinned(m) { 0 } else { m.tokens as usize };
            whole[j + 1] = whole[j] + counted;
            aged[j + 1] = aged[j] + window.savings[j].aged as usize;
            now[j + 1] = now[j] + window.savings[j].now as usize;
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
            now,
            each: window.savings.iter().map(|s| s.aged as usize).collect(),
            turns,
            results,
            keep,
        }
    }

    /// The cleared part `[f, s]`'s newest `keep` results, with the messages that called them.
    fn kept(&self, f: usize, s: usize) -> impl Iterator<Item = (usize, Option<usize>)> + '_ {
        let from = self.results.partition_point(|&(j, _)| j < f);
        self.results[from..]
            .iter()
            .take(self.keep)
            .filter(move |&&(j, _)| j <= s)
            .copied()
    }

    /// What clearing `[f, s]` saves, at least: a call one of whose results stays whole is
    /// counted as saving nothing (its other results' arguments are emptied all the same).
    fn saved(&self, f: usize, s: usize) -> usize {
        let kept: HashSet<usize> = self
            .kept(f, s)
            .flat_map(|(j, caller)| std::iter::once(j).chain(caller))
            .collect();
        let kept: usize = kept.iter().map(|&j| self.each[j]).sum();
        self.aged[s + 1] - self.aged[f] - kept
    }

    /// The messages of `[f, s]` to clear: every clearable result but the part's newest `keep`,
    /// and the calls (clearing empties the arguments of the cleared results' calls only).
    fn cleared_indices(&self, f: usize, s: usize) -> Vec<usize> {
        let kept: HashSet<usize> = self.kept(f, s).map(|(j, _)| j).collect();
        (f..=s)
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
