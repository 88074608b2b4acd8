//! The walk: the log's tail, newest first, cut into units (the shortest runs of messages that
//! split no tool-call group), each kept whole or ending the walk.

use std::collections::{HashMap, HashSet};

use super::{ContextPacker, PendingCalls, Phase, groups};
use crate::domain::{
    context::{ContextMessage, ContextSnapshot, cost::saturate},
    ids::Sequence,
    message::{Role, StoredMessage},
};

/// Where the walk is in the log and what it still has to reach.
#[derive(Debug)]
pub(super) struct Walk {
    pub(super) phase: Phase,
    /// Exclusive upper bound of the next page.
    pub(super) cursor: Sequence,
    pub(super) pages_read: usize,
    /// The log has nothing more above the floor.
    pub(super) exhausted: bool,
    /// The walk is mandatory down to this sequence: the newest user message (unless a pending
    /// message is the user turn) and the oldest call that pending results answer.
    mandatory_until: Option<Sequence>,
    /// Calls answered by pending results, by id, not yet reached.
    pending_calls: PendingCalls,
    /// Lower bound of the optional walk: the summary watermark when the summary is included.
    pub(super) optional_floor: Sequence,
}

impl Walk {
    /// A walk from the log's newest message down.
    pub(super) fn new(snapshot: &ContextSnapshot, pending_user: bool) -> Self {
        let newest_user = snapshot.last_user_sequence.filter(|_| !pending_user);
        let mandatory_until = newest_user
            .into_iter()
            .chain(snapshot.pending_calls.values().copied())
            .min();
        Self {
            phase: Phase::Mandatory,
            cursor: snapshot.last_sequence.plus(1),
            pages_read: 0,
            exhausted: false,
            mandatory_until,
            pending_calls: snapshot.pending_calls.clone(),
            optional_floor: Sequence::ZERO,
        }
    }

    /// Whether the mandatory part is behind the walk: the current turn and every call that
    /// pending results answer are in (`unit_empty`: no unit is half built).
    pub(super) fn mandatory_reached(&self, unit_empty: bool) -> bool {
        let reached = |until: Sequence| self.exhausted || (self.cursor <= until && unit_empty);
        self.mandatory_until.is_none_or(reached)
    }
}

/// The unit being built, newest first.
#[derive(Debug, Default)]
pub(super) struct Unit {
    pub(super) messages: Vec<StoredMessage>,
    /// Results in the unit whose call has not been reached yet: call id -> call sequence.
    open: HashMap<String, Sequence>,
}

impl ContextPacker {
    /// Whether `message` holds the provider's compaction in the pack's own format (Anthropic
    /// Messages, OpenAI Responses), which a pack starts from (docs/native.md, "Provider
    /// compaction").
    pub(super) fn holds_compaction(&self, message: &StoredMessage) -> bool {
        let format = self.request.format;
        message
            .message
            .native
            .as_ref()
            .is_some_and(|n| n.format == format && n.compaction_start().is_some())
    }

    /// After the walk took the message at `sequence`, holding a compaction: true when the pack
    /// starts there (the message was kept and closed its unit, and no pending result answers
    /// a call before it), its native JSON then cut to begin at the compaction; false otherwise,
    /// the compaction then taken out of the message if the walk holds it (it cannot stand
    /// inside a pack).
    pub(super) fn start_at_compaction(&mut self, sequence: Sequence) -> bool {
        let closed = self.unit.messages.is_empty() && self.walk.pending_calls.is_empty();
        if closed
            && let Some(first) = self
                .window
                .messages
                .last_mut()
                .filter(|m| m.sequence == Some(sequence))
        {
            if let Some(native) = first.message.native.as_mut() {
                native.start_at_compaction();
            }
            return true;
        }
        let held = self.unit.messages.iter_mut().find(|m| m.sequence == sequence);
        if let Some(native) = held.and_then(|m| m.message.native.as_mut()) {
            native.strip_compaction();
        }
        let kept = self
            .window
            .messages
            .iter_mut()
            .find(|m| m.sequence == Some(sequence));
        if let Some(native) = kept.and_then(|m| m.message.native.as_mut()) {
            native.strip_compaction();
        }
        false
    }

    /// Adds one message (older than every message taken so far) to the unit being built.
    pub(super) fn take(&mut self, message: StoredMessage) {
        if self.left_out.trailing_replies && self.omit_trailing_reply(&message) {
            // Left out, it may have been the last of the mandatory part: the floor then moves
            // up to the summary's watermark before the next message is taken, as it would
            // have had the message closed a unit.
            self.advance_phase();
            return;
        }
        self.shaping.note_walked(&message);
        let m = &message.message;
        if m.role == Role::Tool {
            let call_id = m.tool_call_id.clone().unwrap_or_default();
            match message.call_sequence {
                // The call is beyond the walk (under the summary): the result cannot be sent alone.
                Some(call) if call > self.floor() => {
                    self.unit.open.insert(call_id, call);
                }
                _ => {
                    self.stats.incomplete_tool_groups += 1;
                    return;
                }
            }
        }
        let mut incomplete = false;
        for call in &m.tool_calls {
            let answered_in_unit = self.unit.open.remove(&call.id).is_some();
            let answered_by_pending = self.walk.pending_calls.remove(&call.id).is_some();
            incomplete |= !answered_in_unit && !answered_by_pending;
        }
        let is_call = !m.tool_calls.is_empty();
        self.left_out.trailing_replies &= !is_call || incomplete;
        self.unit.messages.push(message);
        if is_call && incomplete {
            self.stats.incomplete_tool_groups += 1;
            self.drop_incomplete_group();
        }
        if self.unit.open.is_empty() {
            self.close_unit();
        }
    }

    /// Removes the newest-taken call message and its results from the unit.
    fn drop_incomplete_group(&mut self) {
        let Some(call_message) = self.unit.messages.pop() else {
            return;
        };
        let ids: HashSet<&str> = call_message
            .message
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        self.unit.messages.retain(|m| {
            !m.message
                .tool_call_id
                .as_deref()
                .is_some_and(|id| ids.contains(id))
        });
    }

    /// At the end of the walk: results whose call never came are incomplete groups.
    pub(super) fn close_dangling_unit(&mut self) {
        if !self.unit.open.is_empty() {
            self.stats.incomplete_tool_groups += self.unit.open.len() as u32;
            let open: HashSet<String> = self.unit.open.drain().map(|(id, _)| id).collect();
            self.unit.messages.retain(|m| {
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
        if self.unit.messages.is_empty() {
            return;
        }
        let unit: Vec<ContextMessage> = std::mem::take(&mut self.unit.messages)
            .into_iter()
            .map(|m| self.shape(m))
            .collect();
        let cost: usize = unit
            .iter()
            .filter(|m| !self.is_pinned(m))
            .map(|m| m.tokens as usize)
            .sum();
        // With clearing on, the walk reaches as far as cleared results would let it.
        let savings = self.unit_savings(&unit);
        let cleared_cost = cost - savings.iter().map(|s| s.now as usize).sum::<usize>();
        if self.walk.phase == Phase::Optional && !self.unit_fits(&unit, cleared_cost) {
            self.stats.tool_groups_dropped += groups(&unit);
            self.walk.phase = Phase::Done;
            self.settle_oldest_turn();
            return;
        }
        self.budget.used += cost;
        self.stats.history_tokens += saturate(cost);
        let counted = unit.iter().filter(|m| !self.is_pinned(m)).count() as u32;
        let optional = self.walk.phase == Phase::Optional;
        self.window.extend(unit, savings, (counted, cost), optional);
        self.advance_phase();
    }

    /// Whether an optional unit costing `cost` keeps the request's turn and message caps and
    /// the budget (with the notice's room).
    fn unit_fits(&self, unit: &[ContextMessage], cost: usize) -> bool {
        let users = unit.iter().filter(|m| m.message.role == Role::User).count() as u32;
        let caps = &self.request.budget;
        let over_turns = caps.max_turns.is_some_and(|max| self.window.turns + users > max);
        let over_messages = caps
            .max_messages
            .is_some_and(|max| self.window.counted + unit.len() as u32 > max);
        !over_turns && !over_messages && self.budget.fits_saving(cost, self.window.savings_total)
    }
}
