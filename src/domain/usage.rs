//! What a provider reports it spent on a call.

use serde::{Deserialize, Serialize};

/// The most a usage figure or sum holds: `i64::MAX`, PostgreSQL's `bigint`.
pub const MAX_TOTAL: u64 = i64::MAX as u64;

/// Tokens a provider reported for a call (zero when unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cached_input_tokens: u64,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Whether nothing was reported.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    /// The sum of two, saturating at [`MAX_TOTAL`] (what PostgreSQL's `bigint` holds, so that
    /// every store shows the same totals).
    pub fn plus(self, other: Usage) -> Usage {
        let add = |a: u64, b: u64| a.saturating_add(b).min(MAX_TOTAL);
        Usage {
            input_tokens: add(self.input_tokens, other.input_tokens),
            output_tokens: add(self.output_tokens, other.output_tokens),
            cached_input_tokens: add(self.cached_input_tokens, other.cached_input_tokens),
            reasoning_tokens: add(self.reasoning_tokens, other.reasoning_tokens),
        }
    }
}
