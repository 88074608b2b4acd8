//! Token counts of a message under every tokenizer: computed at append (by `context::cost`,
//! which knows the framing) under the tokenizers the deployment counts, and stored with the
//! message. A tokenizer left out is counted when a read first needs it (docs/design.md,
//! "Token counts").

use crate::domain::tokenize::Tokenizer;

/// A set of tokenizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Tokenizers(u8);

impl Tokenizers {
    /// No tokenizer.
    pub const NONE: Tokenizers = Tokenizers(0);
    /// Every tokenizer.
    pub const ALL: Tokenizers = Tokenizers(0b111);

    /// This set with `tokenizer` in it.
    pub const fn with(self, tokenizer: Tokenizer) -> Tokenizers {
        Tokenizers(self.0 | Self::bit(tokenizer))
    }

    /// This set without `tokenizer`.
    pub const fn without(self, tokenizer: Tokenizer) -> Tokenizers {
        Tokenizers(self.0 & !Self::bit(tokenizer))
    }

    /// Whether `tokenizer` is in the set.
    pub const fn contains(self, tokenizer: Tokenizer) -> bool {
        self.0 & Self::bit(tokenizer) != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    const fn bit(tokenizer: Tokenizer) -> u8 {
        match tokenizer {
            Tokenizer::O200kBase => 1,
            Tokenizer::Cl100kBase => 2,
            Tokenizer::Approx => 4,
        }
    }
}

impl FromIterator<Tokenizer> for Tokenizers {
    fn from_iter<I: IntoIterator<Item = Tokenizer>>(iter: I) -> Self {
        iter.into_iter().fold(Tokenizers::NONE, Tokenizers::with)
    }
}

/// A message's cost under every tokenizer, computed at append and stored. A tokenizer in
/// `uncounted` has not been counted yet: its figure is 0 until a read counts it. The
/// approximation is always counted (it is free, and log positions are placed by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCounts {
    /// Under o200k_base.
    pub o200k_base: u32,
    /// Under cl100k_base.
    pub cl100k_base: u32,
    /// Under the approximation.
    pub approx: u32,
    /// The tokenizers not counted yet.
    pub uncounted: Tokenizers,
}

impl TokenCounts {
    /// The count under `tokenizer` (0 while it is uncounted: see [`Self::counted`]).
    pub fn get(&self, tokenizer: Tokenizer) -> u32 {
        match tokenizer {
            Tokenizer::O200kBase => self.o200k_base,
            Tokenizer::Cl100kBase => self.cl100k_base,
            Tokenizer::Approx => self.approx,
        }
    }

    /// The count under `tokenizer`, if it was counted.
    pub fn counted(&self, tokenizer: Tokenizer) -> Option<u32> {
        (!self.uncounted.contains(tokenizer)).then(|| self.get(tokenizer))
    }

    /// Sets the count under `tokenizer`, which is counted from then on.
    pub fn set(&mut self, tokenizer: Tokenizer, tokens: u32) {
        match tokenizer {
            Tokenizer::O200kBase => self.o200k_base = tokens,
            Tokenizer::Cl100kBase => self.cl100k_base = tokens,
            Tokenizer::Approx => self.approx = tokens,
        }
        self.uncounted = self.uncounted.without(tokenizer);
    }

    /// Counts under the tokenizers of `counted` (and the approximation) with `count`; the
    /// others are left uncounted.
    pub fn by(counted: Tokenizers, count: impl Fn(Tokenizer) -> u32) -> Self {
        let counted = counted.with(Tokenizer::Approx);
        let mut counts = TokenCounts::default();
        for tokenizer in Tokenizer::ALL {
            match counted.contains(tokenizer) {
                true => counts.set(tokenizer, count(tokenizer)),
                false => counts.uncounted = counts.uncounted.with(tokenizer),
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_a_set_leave_the_rest_uncounted_but_always_count_the_approximation() {
        let set: Tokenizers = [Tokenizer::Cl100kBase].into_iter().collect();
        let counts = TokenCounts::by(set, |t| match t {
            Tokenizer::O200kBase => 1,
            Tokenizer::Cl100kBase => 2,
            Tokenizer::Approx => 3,
        });
        assert_eq!(counts.counted(Tokenizer::O200kBase), None);
        assert_eq!(counts.counted(Tokenizer::Cl100kBase), Some(2));
        assert_eq!(counts.counted(Tokenizer::Approx), Some(3));
        let mut filled = counts;
        filled.set(Tokenizer::O200kBase, 7);
        assert_eq!(filled.counted(Tokenizer::O200kBase), Some(7));
        assert!(filled.uncounted.is_empty());
        assert_eq!(
            TokenCounts::by(Tokenizers::ALL, |_| 5).uncounted,
            Tokenizers::NONE
        );
    }
}
