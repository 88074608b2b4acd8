//! What a provider reports it spent on a call.

use serde::{Deserialize, Serialize};

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

    /// The sum of two, saturating.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cached_input_tokens: self.cached_input_tokens.saturating_add(other.cached_input_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(other.reasoning_tokens),
        }
    }
}
