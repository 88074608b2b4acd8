//! The part of a message's text that matters to a query: search hits' snippets and recall's
//! excerpts (docs/design.md, "Recall").
//!
//! The window holds the most query weight it can: each query term counts once, by its weight
//! in the conversation (a rare term far more than a participant's name), so the window sits
//! where the rare terms cluster, not at the first match of a common one. Windows are whole
//! sentences when the best one fits in whole sentences; word windows otherwise. Once chosen,
//! the window grows by the sentences (or words) around it while they fit, the one after first
//! (an answer tends to follow what names its subject).

use super::{Language, SearchQuery, is_word_char};

/// Marks text left out at either end of a snippet.
const ELLIPSIS: &str = "…";

/// The query's terms with their weights: what a window is scored by.
#[derive(Debug, Clone, Copy)]
pub struct Weighted<'a> {
    /// The query.
    pub query: &'a SearchQuery,
    /// Each term's weight, in the query's term order; every term weighs 1 when empty.
    pub weights: &'a [f32],
    /// How words are matched.
    pub language: Language,
}

impl Weighted<'_> {
    fn weight(&self, term: usize) -> f64 {
        f64::from(self.weights.get(term).copied().unwrap_or(1.0))
    }

    /// The query terms `text` holds, as bits by term index.
    fn mask(&self, text: &str) -> u64 {
        let mut mask = 0u64;
        self.language.terms(text, |term, _| {
            if let Ok(i) = self.query.terms().binary_search_by(|t| t.as_str().cmp(term)) {
                mask |= 1 << (i % 64);
            }
        });
        mask
    }

    fn weight_of(&self, mask: u64) -> f64 {
        (0..64)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| self.weight(i))
            .sum()
    }
}

/// A snippet of at most about `max_bytes` of `text` (plus the ellipses), white space
/// collapsed: the window holding the most query weight ([`excerpt`]).
pub fn snippet(text: &str, query: Weighted<'_>, max_bytes: usize) -> String {
    let collapsed = collapse_whitespace(text);
    excerpt(&collapsed, query, max_bytes)
}

/// `text` whole when it fits `max_bytes`; otherwise the window of at most `max_bytes` (plus
/// the ellipses) holding the most query weight, in whole sentences when they can hold as much
/// as words can, grown by what is around it while it fits. The start of the text when no word
/// matches (the match was in a part the text does not show).
pub fn excerpt(text: &str, query: Weighted<'_>, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let words = segments(text, word_ends(text), query);
    let sentences = sentences(&words, sentence_ends(text));
    let by_sentence = best_window(&sentences, max_bytes, query);
    let by_word = best_window(&words, max_bytes, query);
    let (segments, (first, last)) = match (by_sentence, by_word) {
        (Some((window, weight)), Some((_, word_weight))) if weight >= word_weight => (&sentences, window),
        (_, Some((window, _))) => (&words, window),
        (Some((window, _)), None) => (&sentences, window),
        // Nothing fits whole (one word longer than the window): the text's start.
        (None, None) => return cut(text, 0, floor_char(text, max_bytes)),
    };
    // From its matching segments, the window grows around them.
    let matching = |i: &usize| segments[*i].mask != 0;
    let core = (
        (first..=last).find(matching).unwrap_or(first),
        (first..=last).rev().find(matching).unwrap_or(first),
    );
    let (first, last) = grow(segments, core, max_bytes);
    cut(text, segments[first].start, segments[last].end)
}

/// A piece of the text (a sentence or a word, with the white space after it) and the query
/// terms it holds.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: usize,
    end: usize,
    mask: u64,
}

/// The first characters of each query term (up to 3), lower case: a word can only stem to a
/// term that its own first characters start (the stemmers take suffixes), so the other words
/// are not stemmed at all. Snippets and excerpts scan whole texts (64 KiB at most); most of
/// their words share no start with the query.
fn term_heads(query: &SearchQuery) -> Vec<Vec<char>> {
    query
        .terms()
        .iter()
        .map(|t| t.chars().map(fold).take(3).collect())
        .collect()
}

/// A character as the heads compare it: some stemmers drop accents (German umlauts, Spanish
/// acute accents, Russian `ё`), so an accented letter stands for its plain one. A prefilter:
/// folding too much only costs a stemming.
fn fold(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' => 'i',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        'ç' => 'c',
        'ñ' => 'n',
        'ß' => 's',
        'ё' => 'е',
        c => c,
    }
}

/// Whether `word` (a segment: the word and the separators after it) may hold one of the terms
/// whose starts are `heads`.
fn may_hold(word: &str, heads: &[Vec<char>]) -> bool {
    let mut start = ['\0'; 3];
    let mut len = 0;
    let lower = word
        .chars()
        .take_while(|&c| is_word_char(c))
        .flat_map(char::to_lowercase);
    for c in lower.map(fold).take(3) {
        start[len] = c;
        len += 1;
    }
    heads
        .iter()
        .any(|head| head.len() <= len && head[..] == start[..head.len()])
}

fn segments(text: &str, ends: Vec<usize>, query: Weighted<'_>) -> Vec<Segment> {
    let heads = term_heads(query.query);
    let mut start = 0;
    let mut out = Vec::with_capacity(ends.len());
    for end in ends {
        if end > start {
            let word = &text[start..end];
            let mask = match may_hold(word, &heads) {
                true => query.mask(word),
                false => 0,
            };
            out.push(Segment { start, end, mask });
            start = end;
        }
    }
    out
}

/// The sentences ending at `ends`, each holding the terms of the words that start in it.
fn sentences(words: &[Segment], ends: Vec<usize>) -> Vec<Segment> {
    let mut out = Vec::with_capacity(ends.len());
    let mut start = 0;
    let mut word = 0;
    for end in ends {
        if end <= start {
            continue;
        }
        let mut mask = 0;
        while word < words.len() && words[word].start < end {
            mask |= words[word].mask;
            word += 1;
        }
        out.push(Segment { start, end, mask });
        start = end;
    }
    out
}

/// Where each sentence ends (after the white space that follows it): after `.`, `!`, `?` or
/// an ellipsis followed by white space, after a CJK full stop, and at line breaks.
fn sentence_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut closing = false;
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let terminal = matches!(c, '.' | '!' | '?' | '…') && next.is_none_or(char::is_whitespace)
            || matches!(c, '。' | '！' | '？')
            || c == '\n';
        closing |= terminal;
        let at_space = next.is_some_and(char::is_whitespace) && c != '\n';
        if closing && !at_space {
            ends.push(i + c.len_utf8());
            closing = false;
        }
    }
    ends.push(text.len());
    ends
}

/// Where each word ends, with the separators after it.
fn word_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        let word = is_word_char(c);
        if word && !in_word && i > 0 {
            ends.push(i);
        }
        in_word = word;
    }
    ends.push(text.len());
    ends
}

/// The run of segments of at most `max_bytes` that holds the most query weight (each term
/// counted once), with that weight; ties go to the run with more matching segments, then the
/// earlier. `None` when no segment fits alone.
fn best_window(segments: &[Segment], max_bytes: usize, query: Weighted<'_>) -> Option<((usize, usize), f64)> {
    let mut counts = [0u32; 64];
    let mut best: Option<((usize, usize), f64, usize)> = None;
    let mut last = 0;
    let mut matching = 0usize;
    for first in 0..segments.len() {
        if last < first {
            last = first;
            counts = [0; 64];
            matching = 0;
        }
        // Extend while the run fits.
        while last < segments.len() && segments[last].end - segments[first].start <= max_bytes {
            add(&mut counts, segments[last].mask, 1);
            matching += usize::from(segments[last].mask != 0);
            last += 1;
        }
        if last > first {
            let mask = (0..64).filter(|&i| counts[i] > 0).fold(0u64, |m, i| m | 1 << i);
            let weight = query.weight_of(mask);
            let better = best.is_none_or(|(_, w, n)| weight > w || (weight == w && matching > n));
            if better {
                best = Some(((first, last - 1), weight, matching));
            }
            add(&mut counts, segments[first].mask, -1);
            matching -= usize::from(segments[first].mask != 0);
        }
    }
    best.map(|(window, weight, _)| (window, weight))
}

fn add(counts: &mut [u32; 64], mask: u64, by: i32) {
    for (i, count) in counts.iter_mut().enumerate() {
        if mask & (1 << i) != 0 {
            *count = count.saturating_add_signed(by);
        }
    }
}

/// The window `(first, last)` grown by its neighbours while it fits `max_bytes`: the one after
/// first, then the one before, in turn.
fn grow(segments: &[Segment], (mut first, mut last): (usize, usize), max_bytes: usize) -> (usize, usize) {
    let fits = |first: usize, last: usize| segments[last].end - segments[first].start <= max_bytes;
    loop {
        let mut grew = false;
        if last + 1 < segments.len() && fits(first, last + 1) {
            last += 1;
            grew = true;
        }
        if first > 0 && fits(first - 1, last) {
            first -= 1;
            grew = true;
        }
        if !grew {
            return (first, last);
        }
    }
}

/// `text[start..end]` trimmed, with an ellipsis on each side that was cut.
fn cut(text: &str, start: usize, end: usize) -> String {
    let mut out = String::with_capacity(end - start + 2 * ELLIPSIS.len());
    if start > 0 {
        out.push_str(ELLIPSIS);
    }
    out.push_str(text[start..end].trim());
    if end < text.len() {
        out.push_str(ELLIPSIS);
    }
    out
}

/// The largest character boundary of `text` at or below `at`.
fn floor_char(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `text` with every run of white space made one space, trimmed.
fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> SearchQuery {
        SearchQuery::parse(text, Language::English)
    }

    #[test]
    fn the_window_holds_the_rarest_terms_cluster_not_the_first_common_match() {
        // "people" is common in the conversation (weight 0.2); "create" and "place" are rare.
        let q = query("What kind of place does she want to create for people?");
        let weights: Vec<f32> = q
            .terms()
            .iter()
            .map(|t| if t.starts_with("peopl") { 0.2 } else { 5.0 })
            .collect();
        let text = "I keep thinking about people lately. People at work, people at the gym, people \
                    everywhere who seem lonely and tired. My mentor always said we owe something to the \
                    folks around us. So here is my dream: I want to create a safe place for kids who \
                    have nowhere to go after school.";
        let weighted = Weighted {
            query: &q,
            weights: &weights,
            language: Language::English,
        };
        let out = excerpt(text, weighted, 120);
        assert!(out.contains("create a safe place for kids"), "{out}");
        assert!(out.len() <= 120 + 2 * ELLIPSIS.len(), "{out}");
        // Whole sentences: it starts at one.
        assert!(
            out.starts_with("…So here is") || out.starts_with("…I want"),
            "{out}"
        );
    }

    #[test]
    fn a_long_message_whose_answer_is_at_its_end_is_quoted_there() {
        let q = query("Which instrument is Mara learning?");
        let filler = "We talked about the weather and the bus and the neighbours for a while. ".repeat(12);
        let text = format!("{filler}Oh and Mara finally started learning the cello last month!");
        let weighted = Weighted {
            query: &q,
            weights: &[],
            language: Language::English,
        };
        let out = excerpt(&text, weighted, 200);
        assert!(out.ends_with("cello last month!"), "{out}");
        assert!(out.starts_with('…'));
    }

    #[test]
    fn accented_words_are_matched_as_their_stemmers_fold_them() {
        // The German stemmer drops umlauts: "Bäume" is "baum".
        let q = SearchQuery::parse("baum", Language::German);
        let weighted = Weighted {
            query: &q,
            weights: &[],
            language: Language::German,
        };
        let text = format!(
            "{}Die Bäume im Park sind alt.",
            "Wir sprachen lange über das Wetter. ".repeat(10)
        );
        assert!(
            excerpt(&text, weighted, 60).contains("Bäume"),
            "{}",
            excerpt(&text, weighted, 60)
        );
    }

    #[test]
    fn text_that_fits_is_whole_and_a_word_longer_than_the_window_is_cut_at_a_character() {
        let q = query("cello");
        let weighted = Weighted {
            query: &q,
            weights: &[],
            language: Language::English,
        };
        assert_eq!(excerpt("the cello", weighted, 100), "the cello");
        let long = "é".repeat(100);
        let out = excerpt(&long, weighted, 51);
        assert!(out.ends_with('…') && out.len() <= 51 + ELLIPSIS.len(), "{out}");
    }
}
