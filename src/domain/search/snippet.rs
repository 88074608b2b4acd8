//! The part of a message's text around its first match: search hits' snippets and recall's
//! excerpts.

use super::{Language, SearchQuery, cut_at_char, is_word_char};

/// Marks text left out at either end of a snippet.
const ELLIPSIS: &str = "…";

/// A snippet of at most about `max_bytes` of `text` (plus the ellipses), around the first
/// word that matches `query`, white space collapsed; the start of the text when no word
/// matches (the match was in a part the snippet does not show).
pub fn snippet(text: &str, query: &SearchQuery, language: Language, max_bytes: usize) -> String {
    let collapsed = collapse_whitespace(text);
    excerpt(&collapsed, query, language, max_bytes)
}

/// [`snippet`] without collapsing white space: a window of `text` of at most `max_bytes`
/// (plus the ellipses), starting about a quarter of the window before the first match, cut at
/// word boundaries where it can be.
pub fn excerpt(text: &str, query: &SearchQuery, language: Language, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let at = first_match(text, query, language).unwrap_or(0);
    let mut start = at.saturating_sub(max_bytes / 4);
    if start + max_bytes > text.len() {
        start = text.len().saturating_sub(max_bytes);
    }
    while !text.is_char_boundary(start) {
        start += 1;
    }
    // Begin at a word's start when one is near.
    if start > 0 {
        let skip = text[start..]
            .char_indices()
            .take(24)
            .find(|(_, c)| !is_word_char(*c))
            .map(|(i, c)| i + c.len_utf8());
        if let Some(skip) = skip.filter(|s| start + s <= at) {
            start += skip;
        }
    }
    let window = cut_at_char(&text[start..], max_bytes);
    let mut end = start + window.len();
    // End after a whole word when one ends near.
    let word_end = window
        .char_indices()
        .rev()
        .take(24)
        .find(|(_, c)| !is_word_char(*c))
        .map(|(i, _)| start + i);
    if let Some(word_end) = word_end.filter(|&e| end < text.len() && e > at) {
        end = word_end;
    }
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

/// Byte offset of the first word of `text` whose term is one of `query`'s.
fn first_match(text: &str, query: &SearchQuery, language: Language) -> Option<usize> {
    let mut offset = 0;
    for word in text.split(|c: char| !is_word_char(c)) {
        let at = offset;
        offset += word.len() + text[at + word.len()..].chars().next().map_or(0, char::len_utf8);
        if word.is_empty() {
            continue;
        }
        let mut found = false;
        language.terms(word, |term, _| {
            found |= query.terms().binary_search(&term).is_ok();
        });
        if found {
            return Some(at);
        }
    }
    None
}

/// `text` with every run of white space made one space, trimmed.
fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
