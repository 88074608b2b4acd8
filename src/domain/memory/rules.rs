//! The embedded `rules` extractor: deterministic patterns ("we decided", "must", "assume",
//! unanswered questions, "X means Y") over sentences, no network.

use super::{Category, MemoryEditor, Supersedes, WorkingMemory};
use crate::domain::{
    ids::Sequence,
    message::{Role, StoredMessage},
    summary::{clip, sentences},
};

/// Patterns of the `rules` extractor, by category, matched on lower-cased sentences.
const PATTERNS: &[(Category, &[&str])] = &[
    (
        Category::Decisions,
        &[
            "we decided",
            "decided to",
            "decision:",
            "we will go with",
            "let's go with",
            "we agreed",
            "agreed to",
            "we chose",
            "we'll use",
            "we will use",
            "going with",
        ],
    ),
    (
        Category::Requirements,
        &[
            "must ",
            "needs to",
            "need to",
            "has to",
            "required",
            "requirement",
            "should support",
            "it should",
        ],
    ),
    (
        Category::Constraints,
        &[
            "cannot",
            "can't",
            "must not",
            "mustn't",
            "no more than",
            "at most",
            "at least",
            "deadline",
            "budget",
            "limited to",
            "only use",
            "not allowed",
        ],
    ),
    (
        Category::Goals,
        &[
            "goal is",
            "our goal",
            "the goal",
            "we want to",
            "i want to",
            "aim to",
            "objective",
            "trying to",
            "we need a",
            "i need a",
        ],
    ),
    (
        Category::Assumptions,
        &["assume", "assuming", "presumably", "we expect that", "probably"],
    ),
    (
        Category::Stakeholders,
        &[
            "stakeholder",
            "owner is",
            "owned by",
            "sponsor",
            "our client",
            "the client",
            "customer is",
            "product manager",
            "team lead",
            "reports to",
        ],
    ),
];

/// Words that make a new decision replace the previous one.
const REVISIONS: &[&str] = &[
    "instead",
    "no longer",
    "changed our mind",
    "change of plan",
    "actually",
    "rather than",
];

/// The embedded `rules` extractor: folds the facts stated in `messages` (oldest first) into
/// `memory` and moves its watermark to the last message. Linear in the text: one index of the
/// document ([`MemoryEditor`]), one pass over the messages.
/// `cancelled` is asked between messages: when it says so, the extraction stops where it is
/// (its caller has given up and discards the result).
pub fn extract_rules(memory: &mut WorkingMemory, messages: &[StoredMessage], cancelled: &dyn Fn() -> bool) {
    // A question is answered when an assistant reply with content comes after it.
    let last_reply = messages
        .iter()
        .rposition(|m| m.message.role == Role::Assistant && !m.message.content.is_empty());
    let mut editor = MemoryEditor::new(memory);
    // Open questions not yet closed by a reply, oldest first.
    let mut open: Vec<String> = editor
        .memory()
        .open_questions
        .iter()
        .filter(|q| q.superseded_by.is_none())
        .map(|q| q.id.clone())
        .collect();
    for (index, m) in messages.iter().enumerate() {
        if cancelled() {
            return;
        }
        let msg = &m.message;
        if msg.exclude_from_context || !matches!(msg.role, Role::User | Role::Assistant | Role::System) {
            continue;
        }
        let source = [m.sequence];
        for sentence in sentences(&msg.content) {
            let lower = sentence.to_lowercase();
            let text = clip(sentence, 300);
            if let Some((term, definition)) = definition(sentence) {
                editor.define(&term, &definition, &source);
                continue;
            }
            if msg.role == Role::User && sentence.ends_with('?') {
                if last_reply.is_none_or(|reply| reply < index) {
                    let id = editor.add(Category::OpenQuestions, &text, &source, Supersedes::Nothing);
                    open.push(id);
                }
                continue;
            }
            for (category, patterns) in PATTERNS {
                if patterns.iter().any(|p| lower.contains(p)) {
                    let supersedes = match category {
                        Category::Decisions if REVISIONS.iter().any(|r| lower.contains(r)) => {
                            Supersedes::Newest
                        }
                        _ => Supersedes::Nothing,
                    };
                    editor.add(*category, &text, &source, supersedes);
                    break;
                }
            }
        }
        if msg.role == Role::Assistant && !msg.content.is_empty() {
            close_answered_questions(&mut editor, &mut open, m.sequence);
        }
    }
    if let Some(last) = messages.last() {
        memory.through_sequence = memory.through_sequence.max(last.sequence);
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

/// "X means Y", "X stands for Y", "X is short for Y", "X: Y" (X a short term).
fn definition(sentence: &str) -> Option<(String, String)> {
    let body = sentence.trim_end_matches(['.', '!']);
    for marker in [" means ", " stands for ", " is short for ", " refers to "] {
        if let Some((term, def)) = body.split_once(marker) {
            return short_term(term).map(|t| (t, def.trim().to_owned()));
        }
    }
    let (term, def) = body.split_once(": ")?;
    let term = short_term(term)?;
    (term.chars().next()?.is_uppercase() && def.split_whitespace().count() >= 2)
        .then(|| (term, def.trim().to_owned()))
}

fn short_term(term: &str) -> Option<String> {
    let term = term.trim().trim_matches(['"', '\'', '`', '*']);
    let words = term.split_whitespace().count();
    (1..=4).contains(&words).then(|| term.to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::domain::{context::TokenCounts, message::Message};

    fn said(sequence: u64, role: Role, text: &str) -> StoredMessage {
        let message = Message::text(role, text.into());
        StoredMessage {
            sequence: Sequence::parse(sequence).unwrap(),
            created_at: UNIX_EPOCH,
            tokens: TokenCounts::default(),
            reasoning_tokens: TokenCounts::default(),
            call_sequence: None,
            turn_anchor: None,
            message,
        }
    }

    #[test]
    fn rules_find_each_kind_of_fact_with_its_source() {
        let mut memory = WorkingMemory::default();
        let log = [
            said(
                1,
                Role::User,
                "Our goal is to launch the beta in March. The API must support OAuth.",
            ),
            said(
                2,
                Role::Assistant,
                "We decided to use PostgreSQL. SLA means service level agreement.",
            ),
            said(
                3,
                Role::User,
                "The budget is at most $5000. Assume traffic stays under 100 rps. Who owns billing?",
            ),
        ];
        extract_rules(&mut memory, &log, &|| false);
        assert_eq!(memory.goals[0].text, "Our goal is to launch the beta in March.");
        assert_eq!(
            memory.requirements[0].source_sequences,
            [Sequence::parse(1).unwrap()]
        );
        assert!(memory.decisions[0].text.contains("PostgreSQL"));
        assert_eq!(memory.glossary[0].term, "SLA");
        assert!(memory.constraints[0].text.contains("$5000"));
        assert!(memory.assumptions[0].text.starts_with("Assume traffic"));
        assert_eq!(memory.open_questions[0].text, "Who owns billing?");
        assert_eq!(memory.through_sequence, Sequence::parse(3).unwrap());
    }

    #[test]
    fn a_revised_decision_supersedes_the_previous_one() {
        let mut memory = WorkingMemory::default();
        extract_rules(
            &mut memory,
            &[said(1, Role::User, "We decided to use MySQL.")],
            &|| false,
        );
        extract_rules(
            &mut memory,
            &[said(
                2,
                Role::User,
                "Actually we decided to use PostgreSQL instead.",
            )],
            &|| false,
        );
        assert_eq!(memory.decisions.len(), 2, "superseded, not deleted");
        assert_eq!(memory.decisions[0].superseded_by.as_deref(), Some("d2"));
        let rendered = memory.render().unwrap();
        assert!(rendered.contains("PostgreSQL") && !rendered.contains("MySQL"));
    }

    #[test]
    fn answered_questions_leave_the_open_list() {
        let mut memory = WorkingMemory::default();
        extract_rules(
            &mut memory,
            &[said(1, Role::User, "Which region should we deploy to?")],
            &|| false,
        );
        assert_eq!(memory.render().unwrap().matches("Which region").count(), 1);
        extract_rules(
            &mut memory,
            &[said(2, Role::Assistant, "Deploy to eu-west-1.")],
            &|| false,
        );
        assert!(memory.open_questions.iter().all(|q| q.superseded_by.is_some()));
    }
}
