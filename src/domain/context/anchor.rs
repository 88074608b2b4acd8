//! Anchors: the turn starts where a cache-stable history may begin (docs/design.md, "Cache-stable packs").
//!
//! Every message has an *offset*, fixed when it is appended: the approximate tokens (UTF-8
//! bytes / 4, framing included) of every message before it in the log. Lay a grid of step
//! `2^k` over those offsets. The first turn start (a user message that is not excluded from
//! context) at or after a grid line is that line's *anchor*; a turn start's *level* is the
//! largest `k` for which it anchors a line. Levels nest: an anchor of level `k` is one of every
//! lower level too, so packs of different budgets share their boundaries.
//!
//! A turn start's level depends only on its own offset and its previous turn start's, both
//! known when it is appended and never changed afterwards: anchors are a property of the log,
//! the same on every replica, and a history that begins at one stays put as the log grows.

use super::super::message::{Message, Role};

/// Level of the log's first turn start: it anchors every grid line up to its offset.
pub const FIRST_TURN_LEVEL: u8 = 63;

/// The level of a turn start at `offset` whose previous turn start is at `previous` (`None`
/// for the log's first): the largest `k` such that a multiple of `2^k` lies in
/// `(previous, offset]`, which is the highest bit in which the two offsets differ.
pub fn anchor_level(previous: Option<u64>, offset: u64) -> u8 {
    match previous {
        None => FIRST_TURN_LEVEL,
        // Offsets grow with every message; equal ones only come from damaged rows.
        Some(previous) if previous >= offset => 0,
        Some(previous) => (63 - (previous ^ offset).leading_zeros()) as u8,
    }
}

/// Whether `message` starts a turn: where a history may begin.
pub fn starts_turn(message: &Message) -> bool {
    message.role == Role::User && !message.exclude_from_context
}

/// Where one message sits in the log's token stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPosition {
    /// Approximate tokens of every message before it.
    pub offset: u64,
    /// Offset of the newest turn start before it, if any.
    pub previous_turn: Option<u64>,
}

impl LogPosition {
    /// Its level, if `message` (the message at this position) starts a turn.
    pub fn anchor(&self, message: &Message) -> Option<u8> {
        starts_turn(message).then(|| anchor_level(self.previous_turn, self.offset))
    }
}

/// The running totals a conversation keeps so that appends can place their messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogEnd {
    /// Approximate tokens of the whole log.
    pub offset: u64,
    /// Offset of the newest turn start, if any.
    pub last_turn: Option<u64>,
}

impl LogEnd {
    /// The position of `message` (costing `approx` approximate tokens) appended after this
    /// end; moves the end past it.
    pub fn place(&mut self, message: &Message, approx: u32) -> LogPosition {
        let position = LogPosition {
            offset: self.offset,
            previous_turn: self.last_turn,
        };
        if starts_turn(message) {
            self.last_turn = Some(self.offset);
        }
        self.offset += u64::from(approx.max(1));
        position
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, spelled out: the largest k with a multiple of 2^k in (previous, offset].
    fn level_by_search(previous: u64, offset: u64) -> u8 {
        (0..63u8)
            .rev()
            .find(|&k| {
                let step = 1u64 << k;
                offset / step > previous / step
            })
            .unwrap_or(0)
    }

    #[test]
    fn level_is_the_coarsest_grid_line_between_two_turn_starts() {
        for previous in 0..300u64 {
            for offset in previous + 1..previous + 300 {
                assert_eq!(
                    anchor_level(Some(previous), offset),
                    level_by_search(previous, offset),
                    "{previous}..{offset}"
                );
            }
        }
        assert_eq!(anchor_level(None, 500), FIRST_TURN_LEVEL);
        assert_eq!(anchor_level(Some(9), 9), 0);
    }

    #[test]
    fn placing_messages_counts_every_message_and_remembers_turn_starts() {
        let mut end = LogEnd::default();
        let user = Message::text(Role::User, "hi".into());
        let assistant = Message::text(Role::Assistant, "hello".into());
        let mut excluded = user.clone();
        excluded.exclude_from_context = true;
        let first = end.place(&user, 10);
        let second = end.place(&assistant, 20);
        let third = end.place(&excluded, 5);
        let fourth = end.place(&user, 7);
        assert_eq!((first.offset, first.previous_turn), (0, None));
        assert_eq!((second.offset, second.previous_turn), (10, Some(0)));
        assert_eq!((third.offset, third.previous_turn), (30, Some(0)));
        assert_eq!((fourth.offset, fourth.previous_turn), (35, Some(0)));
        assert_eq!(
            end,
            LogEnd {
                offset: 42,
                last_turn: Some(35)
            }
        );
        assert_eq!(first.anchor(&user), Some(FIRST_TURN_LEVEL));
        assert_eq!(second.anchor(&assistant), None);
        assert_eq!(third.anchor(&excluded), None);
        // A multiple of 32 lies in (0, 35], none of 64.
        assert_eq!(fourth.anchor(&user), Some(5));
    }
}
