//! The embedded `rules` extractor: deterministic patterns ("we decided", "must", "assume",
//! unanswered questions, "X means Y") over sentences, no network.

mod lexicon;
#[cfg(test)]
mod tests;

use lexicon::{ACKNOWLEDGEMENTS, DEFERRALS, LABELS, NOT_TERMS, PATTERNS, REVISIONS, ROLE_VERBS};

use super::{Category, MemoryEditor, Supersedes, WorkingMemory};
use crate::domain::{
    ids::Sequence,
    message::{Role, StoredMessage},
    summary::{clip, sentences},
};

/// The embedded `rules` extractor: folds the facts stated in `messages` (oldest first) into
/// `memory` and moves its watermark to the last message. Linear in the text: one index of the
/// document ([`MemoryEditor`]), one pass over the messages.
/// `cancelled` is asked between messages: when it says so, the extraction stops where it is
/// (its caller has given up and discards the result).
pub fn extract_rules(memory: &mut WorkingMemory, messages: &[StoredMessage], cancelled: &dyn Fn() -> bool) {
    let next_reply = next_replies(messages);
    let through = memory.through_sequence;
    let mut editor = MemoryEditor::new(memory);
    // Open questions waiting for the first reply after them: those asked at the end of what
    // was extracted before, oldest first.
    let mut open: Vec<String> = editor
        .memory()
        .open_questions
        .iter()
        .filter(|q| q.superseded_by.is_none() && q.source_sequences.last() == Some(&through))
        .map(|q| q.id.clone())
        .collect();
    for (m, &next_reply) in messages.iter().zip(&next_reply) {
        if cancelled() {
            return;
        }
        let msg = &m.message;
        if msg.exclude_from_context || !matches!(msg.role, Role::User | Role::Assistant | Role::System) {
            continue;
        }
        for sentence in sentences(&msg.content) {
            let said = Said {
                sentence,
                lower: sentence.to_lowercase(),
                role: msg.role,
                source: m.sequence,
                next_reply,
            };
            said.extract(&mut editor, &mut open);
        }
        if is_reply(m) {
            match answers_questions(&msg.content) {
                true => close_answered_questions(&mut editor, &mut open, m.sequence),
                false => open.clear(),
            }
        }
    }
    if let Some(last) = messages.last() {
        memory.through_sequence = memory.through_sequence.max(last.sequence);
    }
}

/// An assistant message with content: the reply that answers or acknowledges the questions
/// asked before it.
fn is_reply(m: &StoredMessage) -> bool {
    m.message.role == Role::Assistant && !m.message.content.trim().is_empty()
}

/// For each message, what the first reply after it does to a question asked there: answers it
/// (`Some(true)`), only acknowledges it ("Noted.", `Some(false)`: it stays open), or none has
/// come yet (`None`).
fn next_replies(messages: &[StoredMessage]) -> Vec<Option<bool>> {
    let mut next_reply = vec![None; messages.len()];
    let mut next = None;
    for (i, m) in messages.iter().enumerate().rev() {
        next_reply[i] = next;
        if is_reply(m) {
            next = Some(answers_questions(&m.message.content));
        }
    }
    next_reply
}

/// One sentence of a message, with what the extractor decides it by.
struct Said<'a> {
    sentence: &'a str,
    lower: String,
    role: Role,
    source: Sequence,
    /// What the first reply after the message does to a question (see [`next_replies`]).
    next_reply: Option<bool>,
}

impl Said<'_> {
    /// Files the sentence under the first rule that matches it, if any: an explicit label, a
    /// definition, a stakeholder, a question, a category pattern, a plan ("we'll ...").
    fn extract(&self, editor: &mut MemoryEditor<'_>, open: &mut Vec<String>) {
        let (lower, source) = (self.lower.as_str(), [self.source]);
        let text = clip(self.sentence, 300);
        let revises = REVISIONS.iter().any(|r| lower.contains(r));
        let decision = |category| match category {
            Category::Decisions if revises => Supersedes::Newest,
            _ => Supersedes::Nothing,
        };
        if let Some(category) = labelled(lower) {
            editor.add(category, &text, &source, decision(category));
        } else if let Some((term, definition)) = definition(self.sentence) {
            editor.define(&term, &definition, &source);
        } else if names_a_role(self.sentence, lower) {
            editor.add(Category::Stakeholders, &text, &source, Supersedes::Nothing);
        } else if self.role == Role::User && self.sentence.ends_with('?') {
            self.ask(editor, open, &text);
        } else if let Some((category, _)) = PATTERNS
            .iter()
            .find(|(_, patterns)| patterns.iter().any(|p| lower.contains(p)))
        {
            editor.add(*category, &text, &source, decision(*category));
        } else if lower.starts_with("we'll ") || lower.starts_with("we will ") {
            // "We'll store amounts as bigint": a plan stated as what we will do.
            editor.add(Category::Decisions, &text, &source, decision(Category::Decisions));
        }
    }

    /// A user's question: open unless the reply after it answered it.
    fn ask(&self, editor: &mut MemoryEditor<'_>, open: &mut Vec<String>, text: &str) {
        let source = [self.source];
        match self.next_reply {
            // Answered within this run: never open.
            Some(true) => {}
            // Only acknowledged: open.
            Some(false) => {
                editor.add(Category::OpenQuestions, text, &source, Supersedes::Nothing);
            }
            // No reply yet: open until the next reply, if that answers.
            None => {
                let id = editor.add(Category::OpenQuestions, text, &source, Supersedes::Nothing);
                open.push(id);
            }
        }
    }
}

/// An assistant reply answers the questions asked before it: each is superseded by a note,
/// which records history, not an open question. Each question is closed once, and looked up by
/// id, so the whole extraction stays linear.
fn close_answered_questions(editor: &mut MemoryEditor<'_>, open: &mut Vec<String>, answer: Sequence) {
    let category = Category::OpenQuestions;
    let mut still_open = Vec::new();
    for id in std::mem::take(open) {
        let Some(question) = editor.item(category, &id).filter(|q| q.superseded_by.is_none()) else {
            continue;
        };
        if !question.source_sequences.iter().all(|s| *s < answer) {
            still_open.push(id);
            continue;
        }
        let note = format!("Answered at #{answer}: {}", question.text);
        let note_id = editor.add(category, &note, &[answer], Supersedes::Item(&id));
        editor.close(category, &note_id, "answered");
    }
    *open = still_open;
}

/// The category a sentence's label names ("Decision: ...", "Open question - ..."), if any.
fn labelled(lower: &str) -> Option<Category> {
    let lower = lower.trim_start_matches(['-', '*', '#', ' ']);
    let (label, rest) = lower.split_once(": ").or_else(|| lower.split_once(" - "))?;
    let label = label.trim().trim_matches(['*', '_']);
    if rest.split_whitespace().count() < 2 {
        return None;
    }
    LABELS
        .iter()
        .find(|(_, labels)| labels.contains(&label))
        .map(|(category, _)| *category)
}

/// "Name (Role) signs off on ...": a capitalized name, a short role in parentheses, a verb of
/// responsibility.
fn names_a_role(sentence: &str, lower: &str) -> bool {
    let Some((before, after)) = sentence.split_once(" (") else {
        return false;
    };
    let Some((role, _)) = after.split_once(')') else {
        return false;
    };
    let named = before
        .split_whitespace()
        .last()
        .and_then(|w| w.chars().next())
        .is_some_and(char::is_uppercase);
    let short_role = (1..=4).contains(&role.split_whitespace().count());
    named && short_role && ROLE_VERBS.iter().any(|v| lower.contains(v))
}

/// Whether an assistant reply answers: it has content that is more than an acknowledgement
/// ("Noted.", "Got it, will keep that in mind.").
fn answers_questions(content: &str) -> bool {
    let words: String = content
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() || c == '\'' { c } else { ' ' })
        .collect();
    let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.is_empty() || ACKNOWLEDGEMENTS.contains(&words.as_str()) {
        return false;
    }
    // "Got it, both are on the open items list.": an acknowledgement that defers the answer.
    let acknowledges = ["noted", "got it", "ok", "okay", "understood", "will do", "sure"]
        .iter()
        .any(|a| words.starts_with(a));
    let defers = DEFERRALS.iter().any(|d| words.contains(d));
    !(acknowledges && defers)
}

/// "X means Y", "X stands for Y", "X is short for Y", "X: Y" (X a short term).
fn definition(sentence: &str) -> Option<(String, String)> {
    let body = sentence.trim_end_matches(['.', '!']);
    // "By X we mean Y", "X is what we call Y".
    if let Some(rest) = body.strip_prefix("By ")
        && let Some((term, def)) = rest.split_once(" we mean ")
    {
        return short_term(term).map(|t| (t, def.trim().to_owned()));
    }
    if let Some((term, def)) = body.split_once(" is what we call ") {
        return short_term(term).map(|t| (t, def.trim().to_owned()));
    }
    // "A journal entry is a balanced group of postings": an article, a short term, a class.
    if let Some(rest) = body.strip_prefix("A ").or_else(|| body.strip_prefix("An ")) {
        for marker in [" is a ", " is an ", " is any "] {
            if let Some((term, def)) = rest.split_once(marker)
                && term.split_whitespace().count() <= 3
                && def.split_whitespace().count() >= 3
            {
                return short_term(term).map(|t| (t, def.trim().to_owned()));
            }
        }
    }
    // "X (short for Y)".
    if let Some((before, after)) = body.split_once(" (short for ")
        && let Some((expansion, _)) = after.split_once(')')
    {
        let term = before.split_whitespace().last().unwrap_or_default();
        return short_term(term).map(|t| (t, expansion.trim().to_owned()));
    }
    for marker in [" means ", " stands for ", " is short for ", " refers to "] {
        if let Some((term, def)) = body.split_once(marker) {
            return short_term(term).map(|t| (t, def.trim().to_owned()));
        }
    }
    let (term, def) = body.split_once(": ")?;
    let term = short_term(term)?;
    let label = term.to_lowercase();
    if NOT_TERMS.contains(&label.as_str()) || labelled(&body.to_lowercase()).is_some() {
        return None;
    }
    (term.chars().next()?.is_uppercase() && def.split_whitespace().count() >= 2)
        .then(|| (term, def.trim().to_owned()))
}

fn short_term(term: &str) -> Option<String> {
    let term = term.trim().trim_matches(['"', '\'', '`', '*']);
    let words = term.split_whitespace().count();
    // "This means we slip": a pronoun or connective is no term.
    let first = term.split_whitespace().next()?.to_lowercase();
    let not_a_term = [
        "this",
        "that",
        "it",
        "which",
        "what",
        "he",
        "she",
        "they",
        "we",
        "i",
        "you",
        "there",
        "here",
        "so",
        "and",
        "but",
        "which",
        "also",
        "then",
        "that's",
        "it's",
        "basically",
    ];
    ((1..=4).contains(&words) && !not_a_term.contains(&first.as_str())).then(|| term.to_owned())
}
