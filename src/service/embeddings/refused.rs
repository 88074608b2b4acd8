//! Messages whose texts the embeddings endpoint refuses (a 400, 413 or 422 for them, or a
//! vector that is not finite, is zero, or has other dimensions): one bad message is one bad
//! message. The backlog skips it (its watermark moves past; the message stays findable
//! lexically), counts it (`ctxd_embedding_refused_total`), logs its sequence, and a replica
//! keeps it here to try again rarely: after [`FIRST_WAIT`], doubling to [`MAX_WAIT`], at most
//! [`ATTEMPTS`] times. At most [`MAX_HELD`] are kept; past that, new ones are given up at once.

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

use crate::domain::{ConversationId, Sequence, TenantId};

/// The wait before a refused message is tried again, and the longest (doubling per attempt).
const FIRST_WAIT: Duration = Duration::from_secs(10 * 60);
const MAX_WAIT: Duration = Duration::from_secs(6 * 60 * 60);
/// Tries of a refused message after the first, before it is given up.
const ATTEMPTS: u32 = 5;
/// Refused messages a replica keeps to try again.
const MAX_HELD: usize = 10_000;
/// Refused messages of one conversation tried again at once.
pub(super) const TAKE: usize = 16;

type Key = (TenantId, ConversationId);

/// The refused messages a replica keeps, by conversation.
#[derive(Debug, Default)]
pub(super) struct Refused {
    held: HashMap<Key, Held>,
    count: usize,
}

#[derive(Debug)]
struct Held {
    /// Each message's tries so far.
    sequences: BTreeMap<Sequence, u32>,
    /// When the conversation's are tried again.
    due: Instant,
}

impl Refused {
    /// Keeps `refused` (with the tries each had) to try again; returns when the conversation's
    /// next try is due, for the caller to queue it then.
    pub(super) fn keep(
        &mut self,
        key: &Key,
        refused: impl IntoIterator<Item = (Sequence, u32)>,
    ) -> Option<Instant> {
        let mut fewest = None::<u32>;
        for (sequence, tries) in refused {
            if tries >= ATTEMPTS || self.count >= MAX_HELD {
                continue;
            }
            let held = self.held.entry(key.clone()).or_insert_with(|| Held {
                sequences: BTreeMap::new(),
                due: Instant::now(),
            });
            if held.sequences.insert(sequence, tries).is_none() {
                self.count += 1;
            }
            fewest = Some(fewest.map_or(tries, |f| f.min(tries)));
        }
        let tries = fewest?;
        let wait = FIRST_WAIT.saturating_mul(1 << tries.min(16)).min(MAX_WAIT);
        let held = self.held.get_mut(key)?;
        held.due = Instant::now() + wait;
        Some(held.due)
    }

    /// Takes up to [`TAKE`] of the conversation's refused messages when their try is due, with
    /// the tries each had.
    pub(super) fn take_due(&mut self, key: &Key) -> Vec<(Sequence, u32)> {
        let Some(held) = self.held.get_mut(key).filter(|h| h.due <= Instant::now()) else {
            return Vec::new();
        };
        let taken: Vec<Sequence> = held.sequences.keys().take(TAKE).copied().collect();
        let out: Vec<(Sequence, u32)> = taken
            .iter()
            .filter_map(|s| held.sequences.remove(s).map(|tries| (*s, tries)))
            .collect();
        if held.sequences.is_empty() {
            self.held.remove(key);
        }
        self.count -= out.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        (TenantId::parse("t").unwrap(), ConversationId::parse("c").unwrap())
    }

    #[test]
    fn refused_messages_wait_their_turn_and_are_given_up_after_their_tries() {
        let mut refused = Refused::default();
        let seq = |n| Sequence::parse(n).unwrap();
        let due = refused.keep(&key(), [(seq(3), 0), (seq(5), ATTEMPTS)]).unwrap();
        assert!(due > Instant::now() + FIRST_WAIT - Duration::from_secs(1));
        assert!(refused.take_due(&key()).is_empty(), "not due yet");
        refused.held.get_mut(&key()).unwrap().due = Instant::now();
        assert_eq!(
            refused.take_due(&key()),
            [(seq(3), 0)],
            "the one past its tries was given up"
        );
        assert_eq!(refused.count, 0);
        assert!(refused.keep(&key(), [(seq(3), ATTEMPTS)]).is_none());
    }
}
