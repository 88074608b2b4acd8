//! Tokenizers behind one small interface, and the chat framing rules that turn a message into
//! the tokens a provider bills for it.
//!
//! o200k_base and cl100k_base are OpenAI's encodings, counted exactly (the `bpe-openai` crate,
//! checked against tiktoken by `tests/api/tokenize.rs`). `Approx` is UTF-8 bytes / 4, rounded up,
//! for models without a known tokenizer.
//!
//! # Chat framing (applied the same way everywhere: append-time counts, BuildContext, CountTokens
//! users can reproduce it)
//!
//! Following OpenAI's published counting recipe for chat messages:
//! - every message costs [`MESSAGE_OVERHEAD`] (3) tokens of framing plus the tokens of its role
//!   name and of its rendered text;
//! - a `name` costs its tokens plus [`NAME_OVERHEAD`] (1);
//! - each tool call costs its function name and arguments tokens plus [`TOOL_CALL_OVERHEAD`] (3);
//! - each attachment costs a flat [`ATTACHMENT_TOKENS`] (85, a low-detail image) plus its file name
//!   in the stored counts; packs replace the flat figure by what the format's provider charges
//!   (`domain::attachments`);
//! - the pack as a whole costs [`REPLY_PRIMING`] (3) for the assistant reply header.

use std::{collections::HashSet, sync::OnceLock};

use bpe_openai::Tokenizer as Bpe;
use foldhash::fast::FixedState;

/// Framing tokens of every chat message (`<|start|>{role}\n ... <|end|>`).
pub const MESSAGE_OVERHEAD: usize = 3;
/// Extra token of a message carrying a `name`.
pub const NAME_OVERHEAD: usize = 1;
/// Framing tokens of each tool call, on top of its name and arguments.
pub const TOOL_CALL_OVERHEAD: usize = 3;
/// Flat cost of one attachment (OpenAI's low-detail image cost), on top of its file name.
pub const ATTACHMENT_TOKENS: usize = 85;
/// Tokens priming the assistant's reply, counted once per pack.
pub const REPLY_PRIMING: usize = 3;

/// A tokenizer ctxd can count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tokenizer {
    /// OpenAI o200k_base (GPT-4o, GPT-4.1, o-series).
    O200kBase,
    /// OpenAI cl100k_base (GPT-4, GPT-3.5).
    Cl100kBase,
    /// UTF-8 bytes / 4, rounded up.
    Approx,
}

impl Tokenizer {
    /// Every tokenizer, in the order token counts are stored.
    pub const ALL: [Tokenizer; 3] = [Tokenizer::O200kBase, Tokenizer::Cl100kBase, Tokenizer::Approx];

    /// Tokens of `text` alone.
    pub fn count(self, text: &str) -> usize {
        match self.vocabulary() {
            Some(vocabulary) => vocabulary.count(text),
            None => text.len().div_ceil(4),
        }
    }

    /// Cuts `text` to at most `max_tokens` tokens, keeping the first `head` and the last
    /// `max_tokens - head` tokens, and returns (head text, tail text). Token boundaries that
    /// fall inside a UTF-8 character are moved so that both parts are valid text.
    pub fn head_and_tail(self, text: &str, head: usize, max_tokens: usize) -> (String, String) {
        let tail = max_tokens.saturating_sub(head);
        match self.bpe() {
            Some(bpe) => {
                let tokens = bpe.encode(text);
                if tokens.len() <= max_tokens {
                    return (text.to_owned(), String::new());
                }
                let head_text = decode_prefix(bpe, &tokens[..head.min(tokens.len())]);
                let tail_text = decode_suffix(bpe, &tokens[tokens.len() - tail.min(tokens.len())..]);
                (head_text, tail_text)
            }
            None => {
                let (head_bytes, tail_bytes) = (head * 4, tail * 4);
                if text.len() <= head_bytes + tail_bytes {
                    return (text.to_owned(), String::new());
                }
                let head_end = floor_char_boundary(text, head_bytes);
                let tail_start = ceil_char_boundary(text, text.len() - tail_bytes);
                (text[..head_end].to_owned(), text[tail_start..].to_owned())
            }
        }
    }

    /// The tokenizer's name as OpenAI spells it (`approx` for the approximation).
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
            Tokenizer::Approx => "approx",
        }
    }

    fn vocabulary(self) -> Option<&'static Vocabulary> {
        static O200K: OnceLock<Vocabulary> = OnceLock::new();
        static CL100K: OnceLock<Vocabulary> = OnceLock::new();
        let (cell, bpe) = match self {
            Tokenizer::O200kBase => (&O200K, bpe_openai::o200k_base()),
            Tokenizer::Cl100kBase => (&CL100K, bpe_openai::cl100k_base()),
            Tokenizer::Approx => return None,
        };
        Some(cell.get_or_init(|| Vocabulary::of(bpe)))
    }

    fn bpe(self) -> Option<&'static Bpe> {
        match self {
            Tokenizer::O200kBase => Some(bpe_openai::o200k_base()),
            Tokenizer::Cl100kBase => Some(bpe_openai::cl100k_base()),
            Tokenizer::Approx => None,
        }
    }
}

/// An encoding with a set of its tokens' bytes, for counting fast.
///
/// Most pre-tokenized pieces (words with their leading space) are one token. tiktoken itself
/// emits a piece that is a whole token as that token without running BPE merges, so looking
/// it up first gives tiktoken's counts exactly, and skips the byte-pair search (and its
/// allocations) for the common case.
///
/// The set hashes with foldhash rather than SipHash: its keys are the fixed vocabulary, so
/// lookups of caller text cannot flood it, and hashing every piece was a tenth of the count.
struct Vocabulary {
    bpe: &'static Bpe,
    whole: HashSet<&'static [u8], FixedState>,
}

impl Vocabulary {
    fn of(bpe: &'static Bpe) -> Self {
        let whole = (0..bpe.bpe.num_tokens() as u32)
            .map(|id| bpe.bpe.token_bytes(id))
            .collect();
        Vocabulary { bpe, whole }
    }

    fn count(&self, text: &str) -> usize {
        let text = self.bpe.normalize(text);
        self.bpe
            .split(text.as_str())
            .map(|piece| match self.whole.contains(piece.as_bytes()) {
                true => 1,
                false => self.bpe.bpe.count(piece.as_bytes()),
            })
            .sum()
    }
}

/// Decodes the longest prefix of `tokens` that is valid UTF-8 (at most 3 tokens shorter).
fn decode_prefix(bpe: &Bpe, tokens: &[u32]) -> String {
    (0..=tokens.len().min(4))
        .find_map(|drop| bpe.decode(&tokens[..tokens.len() - drop]))
        .unwrap_or_default()
}

/// Decodes the longest suffix of `tokens` that is valid UTF-8 (at most 3 tokens shorter).
fn decode_suffix(bpe: &Bpe, tokens: &[u32]) -> String {
    (0..=tokens.len().min(4))
        .find_map(|drop| bpe.decode(&tokens[drop..]))
        .unwrap_or_default()
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_is_utf8_bytes_over_four_rounded_up() {
        assert_eq!(Tokenizer::Approx.count(""), 0);
        assert_eq!(Tokenizer::Approx.count("abcde"), 2);
        assert_eq!(Tokenizer::Approx.count("日本"), 2);
    }

    #[test]
    fn known_counts_match_tiktoken() {
        assert_eq!(Tokenizer::Cl100kBase.count("Hello, world! 日本語 🎉"), 11);
        assert_eq!(Tokenizer::O200kBase.count("Hello, world! 日本語 🎉"), 8);
    }

    #[test]
    fn head_and_tail_keep_valid_text_within_the_limit() {
        let text = "🎉日本語".repeat(200);
        for tokenizer in Tokenizer::ALL {
            let (head, tail) = tokenizer.head_and_tail(&text, 10, 20);
            assert!(text.starts_with(&head) && text.ends_with(&tail));
            assert!(tokenizer.count(&head) <= 10, "{tokenizer:?}");
            assert!(tokenizer.count(&tail) <= 10, "{tokenizer:?}");
            assert!(!head.is_empty() && !tail.is_empty());
        }
    }

    #[test]
    fn short_text_is_not_cut() {
        assert_eq!(
            Tokenizer::O200kBase.head_and_tail("short", 1, 10),
            ("short".into(), String::new())
        );
    }
}
