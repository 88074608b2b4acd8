//! Full-text search over a conversation's messages (recall, docs/design.md "Recall").
//!
//! One set of rules for both stores: a message's searchable text becomes a [`SearchDocument`]
//! here (words, stop words left out, stemmed by the configured [`Language`]), and a query
//! becomes the OR of its [`SearchQuery`] terms. PostgreSQL stores the document as a `tsvector`
//! under a GIN index, which finds the candidates; both stores then rank them here, by BM25 with
//! the conversation's own term statistics ([`Weights`]), from the same figures. Both stores
//! therefore find the same messages in the same order, with bit-identical scores.

use std::{
    collections::{HashMap, HashSet},
    fmt::Write as _,
    str::FromStr,
    sync::OnceLock,
};

use crate::domain::message::{Message, Role};

pub mod page_token;
mod rank;
mod snippet;
pub mod vectors;

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
/// Words longer than this (hashes, base64, minified code) are not indexed.
pub const MAX_WORD_BYTES: usize = 64;
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

/// How words are normalized: a Snowball stemmer with the language's stop words (PostgreSQL's
/// own lists), or `simple` (lower case only), for text that is not in one language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Language {
    Simple,
    Danish,
    Dutch,
    #[default]
    English,
    French,
    German,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Russian,
    Spanish,
    Swedish,
    Turkish,
}

impl Language {
    /// Every language, in the order `--help` lists them.
    pub const ALL: [Language; 14] = [
        Language::Simple,
        Language::Danish,
        Language::Dutch,
        Language::English,
        Language::French,
        Language::German,
        Language::Hungarian,
        Language::Italian,
        Language::Norwegian,
        Language::Portuguese,
        Language::Russian,
        Language::Spanish,
        Language::Swedish,
        Language::Turkish,
    ];

    /// The name configuration uses (PostgreSQL's text search configuration of that name).
    pub fn name(self) -> &'static str {
        match self {
            Language::Simple => "simple",
            Language::Danish => "danish",
            Language::Dutch => "dutch",
            Language::English => "english",
            Language::French => "french",
            Language::German => "german",
            Language::Hungarian => "hungarian",
            Language::Italian => "italian",
            Language::Norwegian => "norwegian",
            Language::Portuguese => "portuguese",
            Language::Russian => "russian",
            Language::Spanish => "spanish",
            Language::Swedish => "swedish",
            Language::Turkish => "turkish",
        }
    }

    fn stemming(self) -> Option<(rust_stemmers::Algorithm, &'static str)> {
        use rust_stemmers::Algorithm as A;
        Some(match self {
            Language::Simple => return None,
            Language::Danish => (A::Danish, include_str!("stopwords/danish.stop")),
            Language::Dutch => (A::Dutch, include_str!("stopwords/dutch.stop")),
            Language::English => (A::English, include_str!("stopwords/english.stop")),
            Language::French => (A::French, include_str!("stopwords/french.stop")),
            Language::German => (A::German, include_str!("stopwords/german.stop")),
            Language::Hungarian => (A::Hungarian, include_str!("stopwords/hungarian.stop")),
            Language::Italian => (A::Italian, include_str!("stopwords/italian.stop")),
            Language::Norwegian => (A::Norwegian, include_str!("stopwords/norwegian.stop")),
            Language::Portuguese => (A::Portuguese, include_str!("stopwords/portuguese.stop")),
            Language::Russian => (A::Russian, include_str!("stopwords/russian.stop")),
            Language::Spanish => (A::Spanish, include_str!("stopwords/spanish.stop")),
            Language::Swedish => (A::Swedish, include_str!("stopwords/swedish.stop")),
            Language::Turkish => (A::Turkish, include_str!("stopwords/turkish.stop")),
        })
    }

    /// The language's stop words, read once.
    fn stop_words(self) -> &'static HashSet<&'static str> {
        static SETS: [OnceLock<HashSet<&'static str>>; 14] = [const { OnceLock::new() }; 14];
        let index = Language::ALL.iter().position(|l| *l == self).unwrap_or(0);
        SETS[index].get_or_init(|| match self.stemming() {
            Some((_, list)) => list.lines().map(str::trim).filter(|w| !w.is_empty()).collect(),
            None => HashSet::new(),
        })
    }

    /// The words of `text` as this language indexes them, with their 1-based positions
    /// (stop words take a position but yield no term, as in PostgreSQL).
    fn terms(self, text: &str, mut each: impl FnMut(&str, usize)) {
        self.numbered_terms(text, |term, _, position| each(term, position));
    }

    /// [`Self::terms`], each term with its number: 0 for the text's first distinct term, 1 for
    /// the next, and so on.
    ///
    /// Each distinct word is lowered, looked up among the stop words and stemmed once per
    /// text: a message repeats its words (a tool's output most of all), and stemming was the
    /// largest part of an append's CPU for an 8 kB output (docs/benchmarks.md, "Append at the
    /// limit"). The hashers are seeded per process: their keys are the caller's words.
    fn numbered_terms(self, text: &str, mut each: impl FnMut(&str, usize, usize)) {
        type Seeded = foldhash::fast::RandomState;
        let stemming = self
            .stemming()
            .map(|(algorithm, _)| (rust_stemmers::Stemmer::create(algorithm), self.stop_words()));
        let mut words_seen: HashMap<&str, Option<usize>, Seeded> = HashMap::default();
        let mut numbers: HashMap<Box<str>, usize, Seeded> = HashMap::default();
        let mut terms: Vec<Box<str>> = Vec::new();
        for (position, word) in words(text).enumerate() {
            if word.len() > MAX_WORD_BYTES {
                continue;
            }
            let number = *words_seen.entry(word).or_insert_with(|| {
                let word = word.to_lowercase();
                let term = match &stemming {
                    None => word,
                    Some((_, stop)) if stop.contains(word.as_str()) => return None,
                    Some((stemmer, _)) => stemmer.stem(&word).into_owned(),
                };
                if term.is_empty() {
                    return None;
                }
                let term = term.into_boxed_str();
                Some(*numbers.entry(term.clone()).or_insert_with(|| {
                    terms.push(term);
                    terms.len() - 1
                }))
            });
            if let Some(number) = number {
                each(&terms[number], number, position + 1);
            }
        }
    }
}

impl FromStr for Language {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Language::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let names: Vec<&str> = Language::ALL.iter().map(|l| l.name()).collect();
                format!("unknown search language {name:?}; one of {}", names.join(", "))
            })
    }
}

/// The words of `text`: maximal runs of letters and digits (any script). Punctuation,
/// symbols and white space separate words, so `INV-2291` is the words `INV` and `2291`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty())
}

fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    // Letters, digits and the combining marks of scripts such as Devanagari; not white space
    // or the punctuation blocks.
    c.is_alphanumeric()
        || !(c.is_whitespace()
            || c.is_control()
            || matches!(c, '\u{2000}'..='\u{2BFF}' | '\u{3000}'..='\u{303F}' | '\u{FE30}'..='\u{FE6F}'
                | '\u{FF00}'..='\u{FF0F}' | '\u{FF1A}'..='\u{FF20}' | '\u{FF3B}'..='\u{FF40}'
                | '\u{FF5B}'..='\u{FF65}' | '\u{A0}'..='\u{BF}' | '\u{D7}' | '\u{F7}'))
}

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
