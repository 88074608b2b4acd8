//! Languages: how search turns text into terms (PostgreSQL's text search configurations,
//! reproduced: a Snowball stemmer with the language's stop words, or lower case only).

use std::{
    collections::{HashMap, HashSet},
    str::FromStr,
    sync::OnceLock,
};

/// Words longer than this (hashes, base64, minified code) are not indexed.
pub const MAX_WORD_BYTES: usize = 64;

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
    /// (stop words take a position but yield no term, as in PostgreSQL). Queries, excerpts
    /// and snippets read short texts word by word through this; documents go through
    /// [`Self::numbered_terms`].
    pub(super) fn terms(self, text: &str, mut each: impl FnMut(&str, usize)) {
        let stemming = self
            .stemming()
            .map(|(algorithm, _)| (rust_stemmers::Stemmer::create(algorithm), self.stop_words()));
        for (position, word) in words(text).enumerate() {
            if word.len() > MAX_WORD_BYTES {
                continue;
            }
            let word = word.to_lowercase();
            let term = match &stemming {
                None => std::borrow::Cow::Borrowed(word.as_str()),
                Some((_, stop)) if stop.contains(word.as_str()) => continue,
                Some((stemmer, _)) => stemmer.stem(&word),
            };
            if !term.is_empty() {
                each(&term, position + 1);
            }
        }
    }

    /// [`Self::terms`] for a whole message, each term with its number: 0 for the text's first
    /// distinct term, 1 for the next, and so on.
    ///
    /// Each distinct word is lowered, looked up among the stop words and stemmed once per
    /// text: a message repeats its words (a tool's output most of all), and stemming was the
    /// largest part of an append's CPU for an 8 kB output (docs/benchmarks.md, "Append at the
    /// limit"). The hashers are seeded per process: their keys are the caller's words.
    pub(super) fn numbered_terms(self, text: &str, mut each: impl FnMut(&str, usize, usize)) {
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
pub(super) fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_word_char(c)).filter(|w| !w.is_empty())
}

pub(super) fn is_word_char(c: char) -> bool {
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
