//! Token counts of a message under every tokenizer: computed once at append (by
//! `context::cost`, which knows the framing) and stored with the message.

use crate::domain::tokenize::Tokenizer;

/// A message's cost under every tokenizer, computed once at append and stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCounts {
    /// Under o200k_base.
    pub o200k_base: u32,
    /// Under cl100k_base.
    pub cl100k_base: u32,
    /// Under the approximation.
    pub approx: u32,
}

impl TokenCounts {
    /// The count under `tokenizer`.
    pub fn get(&self, tokenizer: Tokenizer) -> u32 {
        match tokenizer {
            Tokenizer::O200kBase => self.o200k_base,
            Tokenizer::Cl100kBase => self.cl100k_base,
            Tokenizer::Approx => self.approx,
        }
    }
}
