//! Full-text search over a conversation's messages (recall, docs/design.md "Recall").
//!
//! One set of rules for both stores: a message's searchable text becomes a [`SearchDocument`]
//! here (words, stop words left out, stemmed by the configured [`Language`]), and a query
//! becomes the OR of its [`SearchQuery`] terms. PostgreSQL stores the document as a `tsvector`
//! under a GIN index, which finds the candidates; both stores then rank them here, by BM25 with
//! the conversation's own term statistics ([`Weights`]), from the same figures. Both stores
//! therefore find the same messages in the same order, with bit-identical scores.

use std::{collections::HashSet, fmt::Write as _};

use crate::domain::message::{Message, Role};

mod language;
pub mod page_token;
mod rank;
mod snippet;
pub mod vectors;

use language::is_word_char;
pub use language::{Language, MAX_WORD_BYTES};
pub use rank::{Collection, Weights};
pub use snippet::{Weighted, excerpt, snippet};

/// The most text of one message that is searched: its first 64 KiB.
pub const MAX_SEARCHED_BYTES: usize = 64 * 1024;
/// The most distinct terms one message's document holds (the first ones of its text): an index
/// entry costs tens of bytes on either store, and 64 KiB of distinct two-letter words (CJK text
/// without spaces) would otherwise make 20,000 of them (measured: 38x the text in the in-memory
/// store's RSS, 19x in PostgreSQL's table and index). Prose of that length holds 2,000 to
/// 3,000 distinct words; a message's first 2,048 are what a search of it is about.
pub const MAX_DOCUMENT_TERMS: usize = 2_048;
/// The most distinct terms a query looks for; the rest of a longer query is ignored.
pub const MAX_QUERY_TERMS: usize = 32;
/// A term more messages of the conversation hold than this is *common* there, as a stop word
/// is: it still adds to a hit's score, but does not make a message a candidate while the query
/// has a term that is not common. When every term is common, the candidates are the newest
/// this many matches. Either way a search ranks a bounded number of messages, whatever the
/// conversation's length (docs/design.md, "Recall").
pub const COMMON_TERM_MESSAGES: usize = 1000;
/// Whatever the conversation's length, a term more than this many messages hold is common
/// when they are more than a quarter of its messages (see [`is_common`]).
const COMMON_SHARE_FLOOR: u64 = 16;

/// Whether a term `holders` of the conversation's `messages` hold is *common*: held by more
/// than [`COMMON_TERM_MESSAGES`], or by more than a quarter of the messages (and more than
/// 16). A participant's name or a greeting in a chat is common; it still adds (little) to a
/// hit's score, but does not make a message a candidate while the query has a term that is
/// not common, so a message that only names someone never enters the ranking.
pub fn is_common(holders: u64, messages: u64) -> bool {
    holders > COMMON_TERM_MESSAGES as u64
        || (holders > COMMON_SHARE_FLOOR && holders.saturating_mul(4) > messages)
}
/// How many of a conversation's messages hold each term of a query ([`SearchQuery::terms`]
/// order), counted up to [`COMMON_TERM_MESSAGES`] + 1, and how many messages there are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermHolders {
    pub holders: Vec<u64>,
    pub messages: u64,
}

/// A term the semantic half of a search leaves out of the query it embeds: held by more than
/// one message in 20 of the conversation (and by more than 3). A small embedding model's query
/// vector leans on the words a conversation says all the time (its participants' names,
/// greetings), which match every message about as well; the lexical half already weighs them
/// as little as they deserve (docs/design.md, "Recall").
pub fn too_common_to_embed(holders: u64, messages: u64) -> bool {
    holders > 3 && holders.saturating_mul(20) > messages
}

/// `text` as the semantic half of a search embeds it: without the words whose terms
/// `holders` says are too common in the conversation ([`too_common_to_embed`]); stop words and
/// punctuation stay, so the question still reads as one. `text` itself when that would leave
/// no term.
pub fn semantic_text(text: &str, query: &SearchQuery, holders: &TermHolders, language: Language) -> String {
    let dropped: HashSet<&str> = query
        .terms()
        .iter()
        .zip(&holders.holders)
        .filter(|&(_, &n)| too_common_to_embed(n, holders.messages))
        .map(|(term, _)| term.as_str())
        .collect();
    if dropped.is_empty() || dropped.len() == query.terms().len() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let word_len = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
        let (word, after) = rest.split_at(word_len);
        let mut common = false;
        if !word.is_empty() {
            language.terms(word, |term, _| common |= dropped.contains(term));
        }
        if !common {
            out.push_str(word);
        }
        let gap_len = after.find(is_word_char).unwrap_or(after.len());
        out.push_str(&after[..gap_len]);
        rest = &after[gap_len..];
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Positions PostgreSQL keeps per lexeme (`MAXNUMPOS`).
const MAX_POSITIONS: usize = 256;
/// The largest word position of a `tsvector` (`MAXENTRYPOS - 1`); later words share it.
const MAX_POSITION: u16 = 16_383;

/// The text of `message` that search looks at, at most [`MAX_SEARCHED_BYTES`]: its content,
/// then each tool call's name and arguments, then a failed call's message and partial output.
pub fn searchable_text(message: &Message) -> String {
    let mut text = String::new();
    let mut add = |part: &str| {
        if text.len() >= MAX_SEARCHED_BYTES || part.is_empty() {
            return;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let room = MAX_SEARCHED_BYTES.saturating_sub(text.len());
        text.push_str(cut_at_char(part, room));
    };
    add(&message.content);
    for call in &message.tool_calls {
        add(&call.name);
        add(&call.arguments);
    }
    if let Some(error) = &message.error {
        add(&error.message);
        add(&error.partial_output);
    }
    text
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn cut_at_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A message as search sees it: its terms (sorted as PostgreSQL sorts lexemes: bytewise,
/// a prefix first), each with its positions (ascending, at most 256, capped at 16,383).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchDocument {
    entries: Vec<(Box<str>, Vec<u16>)>,
}

impl SearchDocument {
    /// The document of `message` in `language`. Redacted messages and UI-only ones are still
    /// documents; the stores decide what to index (docs/design.md, "Recall").
    pub fn of(message: &Message, language: Language) -> Self {
        Self::of_text(&searchable_text(message), language)
    }

    /// The document of a text: its first [`MAX_DOCUMENT_TERMS`] distinct terms.
    pub fn of_text(text: &str, language: Language) -> Self {
        let mut entries: Vec<(Box<str>, Vec<u16>)> = Vec::new();
        language.numbered_terms(text, |term, number, position| {
            let position = u16::try_from(position).unwrap_or(MAX_POSITION).min(MAX_POSITION);
            if number == entries.len() && number < MAX_DOCUMENT_TERMS {
                entries.push((term.into(), Vec::new()));
            }
            let Some((_, positions)) = entries.get_mut(number) else {
                return;
            };
            if positions.len() < MAX_POSITIONS && positions.last() != Some(&position) {
                positions.push(position);
            }
        });
        entries.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Self { entries }
    }

    /// No term: nothing can find it.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Its terms, sorted.
    pub fn terms(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(t, _)| &**t)
    }

    /// The positions of `term`, if the document has it.
    pub fn positions(&self, term: &str) -> Option<&[u16]> {
        self.entries
            .binary_search_by(|(t, _)| (**t).cmp(term))
            .ok()
            .map(|i| self.entries[i].1.as_slice())
    }

    /// Distinct terms (`tsvector`'s `size`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Positions over all terms.
    pub fn word_count(&self) -> usize {
        self.entries.iter().map(|(_, p)| p.len().max(1)).sum()
    }

    /// How often the document holds `term` (its positions, as the `tsvector` keeps them).
    pub fn occurrences(&self, term: &str) -> u32 {
        self.positions(term).map_or(0, |p| p.len().max(1) as u32)
    }

    /// The document as `tsvector` input, every term behind `scope` (see [`scope`]).
    pub fn tsvector(&self, scope: &str) -> String {
        let mut out = String::new();
        for (term, positions) in &self.entries {
            if !out.is_empty() {
                out.push(' ');
            }
            push_quoted(&mut out, scope, term);
            for (i, position) in positions.iter().enumerate() {
                let separator = if i == 0 { ':' } else { ',' };
                let _ = write!(out, "{separator}{position}");
            }
        }
        out
    }
}

/// What a query looks for: its distinct terms, sorted, at most [`MAX_QUERY_TERMS`] (the first
/// ones of the text). A message matches when it has any of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SearchQuery {
    terms: Vec<String>,
}

impl SearchQuery {
    /// The query of `text` in `language`.
    pub fn parse(text: &str, language: Language) -> Self {
        let mut terms: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        language.terms(cut_at_char(text, MAX_SEARCHED_BYTES), |term, _| {
            if terms.len() < MAX_QUERY_TERMS && seen.insert(term.to_owned()) {
                terms.push(term.to_owned());
            }
        });
        terms.sort();
        Self { terms }
    }

    /// Nothing to look for (no words, or only stop words).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The query of `terms` as [`Language::terms`] gives them (at most [`MAX_QUERY_TERMS`]).
    pub fn from_terms(mut terms: Vec<String>) -> Self {
        terms.sort();
        terms.dedup();
        terms.truncate(MAX_QUERY_TERMS);
        Self { terms }
    }

    /// The terms, sorted.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// The query of the terms `keep` says yes to (the candidates' query, see
    /// [`COMMON_TERM_MESSAGES`]).
    pub fn only(&self, mut keep: impl FnMut(&str) -> bool) -> SearchQuery {
        SearchQuery {
            terms: self.terms.iter().filter(|t| keep(t)).cloned().collect(),
        }
    }

    /// Each term as `tsquery` input behind `scope`, in order.
    pub fn tsquery_terms(&self, scope: &str) -> Vec<String> {
        self.terms
            .iter()
            .map(|term| {
                let mut out = String::new();
                push_quoted(&mut out, scope, term);
                out
            })
            .collect()
    }

    /// The query as `tsquery` input: its terms behind `scope`, OR-ed.
    pub fn tsquery(&self, scope: &str) -> String {
        let mut out = String::new();
        for term in &self.terms {
            if !out.is_empty() {
                out.push_str(" | ");
            }
            push_quoted(&mut out, scope, term);
        }
        out
    }
}

/// `'scope term'` as `tsvector` and `tsquery` input quote a lexeme (a quote doubled, a
/// backslash escaped; terms never hold either, as words are letters and digits).
fn push_quoted(out: &mut String, scope: &str, term: &str) {
    out.push('\'');
    for c in scope.chars().chain(term.chars()) {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

/// The prefix of every lexeme a conversation's messages are indexed under in PostgreSQL: eight
/// hex digits of a hash of tenant and conversation, then `:`. One GIN index then holds each
/// conversation's terms apart, so a search reads the postings of its own conversation only
/// (O(matches), not the matches of every conversation); a collision costs a recheck, never a
/// wrong hit, as queries also filter by tenant and conversation.
pub fn scope(tenant: &str, conversation: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(tenant.as_bytes())
        .chain_update([0u8])
        .chain_update(conversation.as_bytes())
        .finalize();
    format!(
        "{:02x}{:02x}{:02x}{:02x}:",
        digest[0], digest[1], digest[2], digest[3]
    )
}

/// Whether a message with `role` passes a role filter (empty = every role).
pub fn role_passes(roles: &[Role], role: Role) -> bool {
    roles.is_empty() || roles.contains(&role)
}

#[cfg(test)]
mod tests;
