//! Lexical ranking: Okapi BM25 with the conversation's own term statistics (docs/design.md,
//! "Recall"). Both stores hand the same figures to [`Weights::new`] and [`Weights::score`], which
//! compute in one order and precision, so they rank bit for bit alike.
//!
//! - A term's weight is its inverse document frequency among the conversation's messages up to
//!   the searched end: `ln(1 + (N - n + 0.5) / (n + 0.5))` for `n` of `N` messages holding it.
//!   A participant's name or a greeting that half the messages hold weighs about 0.7; a word
//!   three messages of a thousand hold, 5.7. Holders are counted up to
//!   [`super::COMMON_TERM_MESSAGES`] + 1 (a search stays O(candidates)): a term more messages
//!   hold counts as held by that many, which is already common, and makes no candidate.
//! - A message's score sums, over the query's terms it holds, the weight times
//!   `f (k1 + 1) / (f + k1 (1 - b + b L / avgL))`: `f` the term's occurrences in it, `L` its
//!   length and `avgL` the mean length, in the log's approximate tokens (which every message
//!   stores, with the offset of everything before it). A repeated term saturates, and a short
//!   message is not favoured for its length alone.

use super::SearchQuery;

/// Term frequency saturation. With [`B`], the defaults of Anserini's BM25 (k1 0.9, b 0.4), not
/// the textbook 1.2 and 0.75: a chat's answer is often a long turn among short reactions, and
/// the textbook's length normalization ranked it below short near-misses. Evidence in the top 5
/// rose by 1 to 2.5 points on each of the three evaluation sets (docs/benchmarks.md, "Recall
/// III").
const K1: f64 = 0.9;
/// Length normalization (see [`K1`]).
const B: f64 = 0.4;

/// What the conversation's messages up to the searched end say: how many there are and their
/// length together, in approximate tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collection {
    pub messages: u64,
    pub length: u64,
}

impl Collection {
    fn mean_length(&self) -> f64 {
        (self.length.max(1) as f64) / (self.messages.max(1) as f64)
    }
}

/// The query's terms weighed against a [`Collection`].
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// Per query term (in [`SearchQuery::terms`] order), its inverse document frequency.
    idf: Vec<f64>,
    mean_length: f64,
}

impl Weights {
    /// The weights of `query`'s terms, `holders[i]` messages of `collection` holding term `i`
    /// (counted up to [`super::COMMON_TERM_MESSAGES`] + 1).
    pub fn new(query: &SearchQuery, holders: &[u64], collection: Collection) -> Self {
        let n = collection.messages as f64;
        let idf = (0..query.terms().len())
            .map(|i| {
                let held = holders.get(i).copied().unwrap_or(0).min(collection.messages) as f64;
                (1.0 + (n - held + 0.5) / (held + 0.5)).ln()
            })
            .collect();
        Self {
            idf,
            mean_length: collection.mean_length(),
        }
    }

    /// Each query term's weight (its inverse document frequency), in [`SearchQuery::terms`]
    /// order: what recall's excerpts and search's snippets centre on.
    pub fn term_weights(&self) -> Vec<f32> {
        self.idf.iter().map(|&w| w as f32).collect()
    }

    /// A score as a share of the query's whole weight, from 0 to 1: the score of a message of
    /// mean length that holds every query term once is the sum of the terms' weights, and a
    /// message scores that share of it (capped at 1: repeats and short messages score above).
    /// A message holding only a participant's name scores a few hundredths; one holding the
    /// rarest of three terms, about half.
    pub fn relevance(&self, score: f32) -> f32 {
        let whole: f64 = self.idf.iter().sum();
        if whole <= 0.0 {
            return 0.0;
        }
        (f64::from(score) / whole).clamp(0.0, 1.0) as f32
    }

    /// The score of a message `length` approximate tokens long that holds query term `i`
    /// `occurrences(i)` times; 0 when it holds none.
    pub fn score(&self, length: u32, occurrences: impl Fn(usize) -> u32) -> f32 {
        let norm = K1 * (1.0 - B + B * f64::from(length.max(1)) / self.mean_length);
        let mut score = 0.0f64;
        for (i, idf) in self.idf.iter().enumerate() {
            let f = f64::from(occurrences(i));
            if f > 0.0 {
                score += idf * f * (K1 + 1.0) / (f + norm);
            }
        }
        score as f32
    }
}
