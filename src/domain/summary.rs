//! Rolling summaries: where the cut goes and the embedded extractive summarizer (what an LLM
//! summarizer is given is in `crate::models::summarize::prompts`). Pure: the service reads the messages after the watermark and stores
//! the result with a compare-and-set.

use std::time::SystemTime;

use super::{
    ids::Sequence,
    message::{Role, StoredMessage},
};
use crate::domain::tokenize::Tokenizer;

/// A stored summary version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The text.
    pub text: String,
    /// It covers sequences 1..=through_sequence.
    pub through_sequence: Sequence,
    /// Who wrote it: `extractive`, `openai`, `provided`.
    pub summarizer: String,
    /// Version number, from 1.
    pub version: u64,
    /// When this version was stored.
    pub updated_at: SystemTime,
}

/// Where a new summary should end: the newest sequence such that at least `keep_recent_tokens`
/// of history stay verbatim after it, snapped back so that no tool-call group (including one
/// still waiting for results) is split, and further back to just before a turn anchor of the
/// step nearest half of `keep_recent_tokens` when there is one (docs/design.md, "Cache-stable packs"): the
/// verbatim history after a summary then begins where cache-stable packs begin theirs, on
/// the grid every later pack jumps along. `messages` are the messages after the current
/// watermark, oldest first. `None` when nothing can be folded in.
pub fn summary_cut(
    messages: &[StoredMessage],
    keep_recent_tokens: usize,
    tokenizer: Tokenizer,
) -> Option<Sequence> {
    // Keep the shortest suffix holding at least `keep_recent_tokens`.
    let mut kept = 0usize;
    let mut start = messages.len();
    while start > 0 && kept < keep_recent_tokens {
        start -= 1;
        if !messages[start].message.exclude_from_context {
            kept += messages[start].tokens.get(tokenizer) as usize;
        }
    }
    if kept < keep_recent_tokens {
        return None;
    }
    let boundaries = group_boundaries(messages);
    let level = (keep_recent_tokens / 2).max(1).ilog2() as u8;
    let anchored = |i: usize| {
        messages
            .get(i)
            .and_then(|m| m.turn_anchor)
            .is_some_and(|anchor| anchor >= level)
    };
    let at_anchor = (1..=start).rev().find(|&i| boundaries[i] && anchored(i));
    at_anchor
        .or_else(|| (1..=start).rev().find(|&i| boundaries[i]))
        .map(|i| messages[i - 1].sequence)
}

/// The messages a new summary would fold in (those up to [`summary_cut`]), with the cut.
pub fn messages_to_fold(
    messages: &[StoredMessage],
    keep_recent_tokens: usize,
    tokenizer: Tokenizer,
) -> Option<(Sequence, &[StoredMessage])> {
    let through = summary_cut(messages, keep_recent_tokens, tokenizer)?;
    let count = messages.iter().take_while(|m| m.sequence <= through).count();
    Some((through, &messages[..count]))
}

/// True when a summary through `through` splits no tool-call group of `messages` (the
/// messages after the current watermark, oldest first).
pub fn is_boundary(messages: &[StoredMessage], through: Sequence) -> bool {
    let count = messages.iter().take_while(|m| m.sequence <= through).count();
    group_boundaries(messages)[count]
}

/// `result[i]` is true when cutting after `messages[..i]` splits no tool-call group. A call
/// holds the cut open until its result is seen (forever if it never is); a result whose call
/// lies under the watermark holds nothing open.
pub(crate) fn group_boundaries(messages: &[StoredMessage]) -> Vec<bool> {
    let mut pending = std::collections::HashSet::new();
    let mut result = Vec::with_capacity(messages.len() + 1);
    result.push(true);
    for m in messages {
        pending.extend(m.message.tool_calls.iter().map(|c| c.id.as_str()));
        if let Some(id) = m.message.tool_call_id.as_deref() {
            pending.remove(id);
        }
        result.push(pending.is_empty());
    }
    result
}

/// Words that mark a sentence as a decision, requirement or constraint worth keeping.
const KEY_PHRASES: &[&str] = &[
    "decide",
    "decision",
    "agreed",
    "we will",
    "we'll",
    "let's go with",
    "go with",
    "chose",
    "choose",
    "must",
    "should",
    "need to",
    "needs to",
    "require",
    "requirement",
    "constraint",
    "cannot",
    "can't",
    "never",
    "always",
    "deadline",
    "budget",
    "at most",
    "at least",
    "no more than",
    "limit",
    "important",
    "owner",
    "sponsor",
    "customer",
    "client",
    "stakeholder",
];

/// The embedded summarizer: deterministic, no network. Folds the new messages into the
/// previous summary as tagged bullet lines: user requests, decisions, requirements and
/// constraints, tool calls and their outcomes, failed calls, the gist of answers. When the
/// result exceeds `max_summary_tokens`, the oldest lines go first. `cancelled` is asked between
/// messages (an empty text comes back when it says so: the caller has given up).
pub fn extractive_summary(
    previous: Option<&Summary>,
    messages: &[StoredMessage],
    max_summary_tokens: usize,
    tokenizer: Tokenizer,
    cancelled: &dyn Fn() -> bool,
) -> String {
    let mut lines: Vec<String> = previous
        .map(|s| {
            s.text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for m in messages.iter().filter(|m| !m.message.exclude_from_context) {
        if cancelled() {
            return String::new();
        }
        lines.extend(summary_lines(m));
    }
    // Over the budget, drop the oldest minor lines first (chit-chat, gists), then the oldest
    // key lines (decisions, requirements, numbers, tool calls and outcomes).
    let costs: Vec<usize> = lines.iter().map(|l| tokenizer.count(l) + 1).collect();
    let mut total: usize = costs.iter().sum();
    let mut keep = vec![true; lines.len()];
    for pass_key in [false, true] {
        for (i, line) in lines.iter().enumerate() {
            if total <= max_summary_tokens {
                break;
            }
            if is_key_line(line) == pass_key {
                keep[i] = false;
                total -= costs[i];
            }
        }
    }
    let kept: Vec<&str> = lines
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(l, _)| l.as_str())
        .collect();
    kept.join("\n")
}

fn summary_lines(stored: &StoredMessage) -> Vec<String> {
    let m = &stored.message;
    let tag = format!("- [#{}]", stored.sequence);
    let text = collapse(&m.content);
    let mut lines = Vec::new();
    match m.role {
        Role::User => {
            lines.push(format!("{tag} User: {}", clip(&text, 300)));
        }
        Role::System => lines.push(format!("{tag} System: {}", clip(&text, 200))),
        Role::Tool => {
            let id = m.tool_call_id.as_deref().unwrap_or("?");
            lines.push(format!("{tag} Result of {id}: {}", clip(&text, 200)));
        }
        Role::Assistant => {
            let key: Vec<&str> = sentences(&text).filter(|s| is_key_sentence(s)).collect();
            if !key.is_empty() {
                lines.push(format!("{tag} Assistant noted: {}", clip(&key.join(" "), 400)));
            } else if !text.is_empty() {
                let first = sentences(&text).next().unwrap_or_default();
                lines.push(format!("{tag} Assistant: {}", clip(first, 200)));
            }
            for call in &m.tool_calls {
                lines.push(format!(
                    "{tag} Called {}({}) as {}",
                    call.name,
                    clip(&call.arguments, 160),
                    call.id
                ));
            }
            if let Some(error) = &m.error {
                lines.push(format!(
                    "{tag} LLM call failed ({}): {}",
                    error.code,
                    clip(&error.message, 120)
                ));
            }
        }
    }
    lines
}

/// Splits text into sentences (on `.`, `!`, `?` or newline followed by a space or the end).
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let trimmed = rest.trim_start();
        if trimmed.is_empty() {
            return None;
        }
        let bytes = trimmed.as_bytes();
        let mut end = trimmed.len();
        for (i, b) in bytes.iter().enumerate() {
            let boundary =
                matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
            if boundary || *b == b'\n' {
                end = i + 1;
                break;
            }
        }
        let (sentence, tail) = trimmed.split_at(end);
        rest = tail;
        Some(sentence.trim())
    })
    .filter(|s| !s.is_empty())
}

/// A summary line worth keeping longest: tool activity, failures, or a key sentence.
fn is_key_line(line: &str) -> bool {
    let body = line.split_once("] ").map_or(line, |(_, rest)| rest);
    body.starts_with("Called ")
        || body.starts_with("Result of ")
        || body.starts_with("LLM call failed")
        || is_key_sentence(body)
}

/// A sentence stating a decision, requirement, constraint or stakeholder (by phrase), a
/// number in a real statement (four words or more), or a name (two capitalized words inside it).
fn is_key_sentence(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    let words: Vec<&str> = sentence.split_whitespace().collect();
    let capitalized = |w: &&str| w.chars().next().is_some_and(char::is_uppercase);
    let names_someone = words
        .windows(2)
        .skip(1)
        .any(|pair| capitalized(&pair[0]) && capitalized(&pair[1]));
    KEY_PHRASES.iter().any(|p| lower.contains(p))
        || (words.len() >= 4 && sentence.chars().any(|c| c.is_ascii_digit()))
        || names_someone
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Cuts `text` to at most `max` characters, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::domain::Message;
    use crate::domain::{message::ToolCall, token_counts::TokenCounts};

    fn stored(sequence: u64, message: Message, call_sequence: Option<u64>) -> StoredMessage {
        StoredMessage {
            sequence: Sequence::parse(sequence).unwrap(),
            created_at: UNIX_EPOCH,
            tokens: TokenCounts::of(&message, crate::domain::token_counts::Tokenizers::ALL),
            reasoning_tokens: TokenCounts::default(),
            native_tokens: TokenCounts::default(),
            call_sequence: call_sequence.map(|c| Sequence::parse(c).unwrap()),
            turn_anchor: None,
            message,
        }
    }

    fn log() -> Vec<StoredMessage> {
        let call = Message {
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: "{}".into(),
                signature: String::new(),
                item_id: String::new(),
            }],
            ..Message::text(Role::Assistant, String::new())
        };
        let result = Message {
            tool_call_id: Some("c".into()),
            ..Message::text(Role::Tool, "done".into())
        };
        vec![
            stored(1, Message::text(Role::User, "first question here".into()), None),
            stored(2, call, None),
            stored(3, result, Some(2)),
            stored(4, Message::text(Role::User, "second question here".into()), None),
        ]
    }

    #[test]
    fn the_cut_never_splits_a_tool_group() {
        let log = log();
        // Keeping just the last message: cut after 3 (the group 2-3 is complete).
        assert_eq!(
            summary_cut(&log, 1, Tokenizer::Approx),
            Some(Sequence::parse(3).unwrap())
        );
        // Keeping the last two would cut between call 2 and result 3: snapped back to 1.
        let keep = (log[2].tokens.approx + log[3].tokens.approx) as usize;
        assert_eq!(
            summary_cut(&log, keep, Tokenizer::Approx),
            Some(Sequence::parse(1).unwrap())
        );
        assert_eq!(summary_cut(&log, 100_000, Tokenizer::Approx), None);
    }

    #[test]
    fn the_cut_lands_before_a_turn_anchor_of_the_step_when_there_is_one() {
        let mut log = Vec::new();
        let mut end = crate::domain::context::anchor::LogEnd::default();
        for i in 0..40u64 {
            let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
            let message = Message::text(role, "some words of the conversation ".repeat(3));
            let mut stored = stored(i + 1, message, None);
            stored.turn_anchor = end
                .place(&stored.message, stored.tokens.approx)
                .anchor(&stored.message);
            log.push(stored);
        }
        for keep in [60, 200, 400] {
            let through = summary_cut(&log, keep, Tokenizer::Approx).unwrap();
            let plain = {
                let unanchored: Vec<StoredMessage> = log
                    .iter()
                    .cloned()
                    .map(|m| StoredMessage {
                        turn_anchor: None,
                        ..m
                    })
                    .collect();
                summary_cut(&unanchored, keep, Tokenizer::Approx).unwrap()
            };
            let next = &log[through.get() as usize];
            let level = (keep / 2).ilog2() as u8;
            assert!(
                next.turn_anchor.is_some_and(|a| a >= level),
                "keep {keep}: cut at {through}"
            );
            assert!(through <= plain, "never keeps less than asked");
            let kept: u32 = log[through.get() as usize..]
                .iter()
                .map(|m| m.tokens.approx)
                .sum();
            let newer_anchor = log[through.get() as usize + 1..=plain.get() as usize]
                .iter()
                .any(|m| m.turn_anchor.is_some_and(|a| a >= level));
            assert!(
                !newer_anchor && kept as usize >= keep,
                "keep {keep}: the newest such anchor"
            );
        }
    }

    #[test]
    fn an_unanswered_call_holds_the_cut_before_it() {
        let mut log = log();
        log.truncate(2);
        log.push(stored(3, Message::text(Role::User, "meanwhile".into()), None));
        assert_eq!(
            summary_cut(&log, 0, Tokenizer::Approx),
            Some(Sequence::parse(1).unwrap())
        );
    }

    #[test]
    fn the_extractive_summary_keeps_key_lines_longest_within_its_budget() {
        let log = log();
        let full = extractive_summary(None, &log, 10_000, Tokenizer::Approx, &|| false);
        assert!(full.contains("[#1] User: first question here") && full.contains("Called f({}) as c"));
        let short = extractive_summary(None, &log, 12, Tokenizer::Approx, &|| false);
        assert!(
            short.contains("[#3] Result of c") && !short.contains("[#1]"),
            "{short}"
        );
        assert!(Tokenizer::Approx.count(&short) <= 12);
    }

    #[test]
    fn sentences_split_on_terminal_punctuation() {
        let s: Vec<&str> = sentences("We decided on Postgres. Why? Because 3.5 is fine!\nNext").collect();
        assert_eq!(
            s,
            ["We decided on Postgres.", "Why?", "Because 3.5 is fine!", "Next"]
        );
    }
}
