//! What a rewind does (docs/design.md, "Conversations as resources"): the stores lock the
//! conversation, [`check_rewind`] refuses or lets it go on, and the stores remove the later
//! messages and what was derived from them, applying [`rewound_memory`] to the working memory;
//! [`rewind`] runs that sequence over each store's [`RewindTx`].

use std::future::Future;

use crate::domain::{Sequence, violation::Violations, working_memory::WorkingMemory};

/// One rewind's transaction, as a store runs it (the store commits after [`rewind`] returns).
pub trait RewindTx: Send {
    /// What the store reports of a rewind.
    type Rewound: Send;
    /// The store's error; refusals become one.
    type Error: From<RewindRefusal> + Send;

    /// Locks the conversation, counts the rewind (so that a summary or first memory read
    /// before it is not stored after it), and returns its last sequence.
    fn lock(&mut self) -> impl Future<Output = Result<Sequence, Self::Error>> + Send;

    /// Removes the messages after `after` and what was derived from them.
    fn write(&mut self, after: Sequence) -> impl Future<Output = Result<Self::Rewound, Self::Error>> + Send;
}

/// Rewinds to `after` by `tx`, refusing a stale `expected_last` or an `after` past the end.
pub async fn rewind<T: RewindTx>(
    mut tx: T,
    after: Sequence,
    expected_last: Option<Sequence>,
) -> Result<T::Rewound, T::Error> {
    let last = tx.lock().await?;
    check_rewind(after, last, expected_last)?;
    tx.write(after).await
}

/// Why a conversation cannot be rewound to a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindRefusal {
    /// The sequence is past the log's end.
    PastEnd {
        /// The log's last sequence.
        last: Sequence,
    },
    /// `expected_last_sequence` is not the log's last sequence.
    Stale {
        /// The log's last sequence.
        current: Sequence,
    },
}

impl RewindRefusal {
    /// The field violation of [`RewindRefusal::PastEnd`].
    pub fn violations(last: Sequence) -> Violations {
        Violations::single(
            "after_sequence",
            format!("is past the end of the conversation (last sequence {last})"),
        )
    }
}

/// Refuses a rewind to `after` of a log ending at `last` when `after` is past it or the caller
/// expected another end.
pub fn check_rewind(
    after: Sequence,
    last: Sequence,
    expected_last: Option<Sequence>,
) -> Result<(), RewindRefusal> {
    if expected_last.is_some_and(|expected| expected != last) {
        return Err(RewindRefusal::Stale { current: last });
    }
    if after > last {
        return Err(RewindRefusal::PastEnd { last });
    }
    Ok(())
}

/// The working memory without what the removed messages (after `after`) gave it: items and
/// glossary entries citing one go (an item they superseded is current again), and when the
/// memory had read past `after`, its prose summary is cleared and its watermark moves back.
pub fn rewound_memory(memory: &mut WorkingMemory, after: Sequence) {
    memory.retain_sources(|s| s <= after);
    if memory.through_sequence > after {
        memory.summary.clear();
        memory.through_sequence = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: u64) -> Sequence {
        Sequence::parse(n).expect("sequence")
    }

    #[test]
    fn a_rewind_is_refused_past_the_end_or_on_a_stale_end() {
        assert_eq!(check_rewind(seq(3), seq(5), None), Ok(()));
        assert_eq!(check_rewind(seq(5), seq(5), Some(seq(5))), Ok(()));
        assert_eq!(check_rewind(Sequence::ZERO, seq(5), None), Ok(()));
        assert_eq!(
            check_rewind(seq(6), seq(5), None),
            Err(RewindRefusal::PastEnd { last: seq(5) })
        );
        assert_eq!(
            check_rewind(seq(3), seq(5), Some(seq(4))),
            Err(RewindRefusal::Stale { current: seq(5) })
        );
    }
}
