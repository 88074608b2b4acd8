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
            "at the latest",
            "at the very latest",
            "no later than",
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
            "another goal",
            "we want ",
            "the aim",
            "end state",
            "we're after",
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
            "signs off",
            "sign-off",
            "sign off",
            "approval from",
            "is responsible for",
            "is accountable for",
            "point of contact",
        ],
    ),
];

/// Sentence labels ("Decision: ...") that name a category; matched on the lower-cased text
/// before the first ": ". A labelled sentence is that category's fact, never a glossary entry.
const LABELS: &[(Category, &[&str])] = &[
    (
        Category::Decisions,
        &["decision", "decisions", "decided", "resolution"],
    ),
    (
        Category::Requirements,
        &["requirement", "requirements", "req", "must-have", "must have"],
    ),
    (
        Category::Constraints,
        &[
            "constraint",
            "constraints",
            "limit",
            "limits",
            "deadline",
            "budget",
            "hard limit",
        ],
    ),
    (
        Category::Goals,
        &["goal", "goals", "objective", "objectives", "aim", "mission"],
    ),
    (
        Category::Assumptions,
        &["assumption", "assumptions", "assume", "premise"],
    ),
    (
        Category::Stakeholders,
        &[
            "stakeholder",
            "stakeholders",
            "owner",
            "owners",
            "approver",
            "sponsor",
            "contact",
        ],
    ),
    (Category::OpenQuestions, &["open question", "question", "tbd"]),
];

/// Labels that are neither a category nor a defined term ("Note: ...", "Update: ...").
const NOT_TERMS: &[&str] = &[
    "note",
    "notes",
    "fyi",
    "update",
    "status",
    "summary",
    "recap",
    "next",
    "next step",
    "next steps",
    "todo",
    "action item",
    "action items",
    "reminder",
    "heads up",
    "edit",
    "ps",
    "answer",
    "result",
    "results",
    "example",
    "tip",
    "warning",
    "important",
    "context",
];

/// Replies that acknowledge without answering: they leave the questions before them open.
const ACKNOWLEDGEMENTS: &[&str] = &[
    "noted",
    "ok",
    "okay",
    "k",
    "got it",
    "sure",
    "thanks",
    "thank you",
    "understood",
    "will do",
    "on it",
    "acknowledged",
    "sounds good",
    "great",
    "cool",
    "right",
    "roger",
    "copy that",
    "will keep that in mind",
    "got it will keep that in mind",
    "noted thanks",
    "ok noted",
    "noted will do",
    "makes sense",
    "i see",
    "good point",
    "good question",
];

/// Verbs that make "Name (Role) ..." a stakeholder.
const ROLE_VERBS: &[&str] = &[
    "signs off",
    "sign off",
    "approves",
    "approve",
    "owns",
    "leads",
    "reviews",
    "sponsors",
    "decides",
    "is responsible",
    "is accountable",
    "runs",
    "manages",
    "will review",
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
    // A question is answered when an assistant reply that answers (not only acknowledges)
    // comes after it.
    // A question is answered by the first assistant reply with content after it, when that
    // reply answers rather than acknowledges ("Noted."): after an acknowledgement it stays open.
    let replies =
        |m: &StoredMessage| m.message.role == Role::Assistant && !m.message.content.trim().is_empty();
    let mut next_reply = vec![None; messages.len()];
    let mut next = None;
    for (i, m) in messages.iter().enumerate().rev() {
        next_reply[i] = next;
        if replies(m) {
            next = Some(answers_questions(&m.message.content));
        }
    }
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
    for (index, m) in messages.iter().enumerate() {
        if cancelled() {
            return;
        }
        let msg = &m.message;
        if msg.exclude_from_context || !matches!(msg.role, Role::User | Role::Assistant | Role::System) {
            continue;
        }
        let source = [m.sequence];
        'sentences: for sentence in sentences(&msg.content) {
            let lower = sentence.to_lowercase();
            let text = clip(sentence, 300);
            if let Some(category) = labelled(&lower) {
                let supersedes = match category {
                    Category::Decisions if REVISIONS.iter().any(|r| lower.contains(r)) => Supersedes::Newest,
                    _ => Supersedes::Nothing,
                };
                editor.add(category, &text, &source, supersedes);
                continue;
            }
            if let Some((term, definition)) = definition(sentence) {
                editor.define(&term, &definition, &source);
                continue;
            }
            if names_a_role(sentence, &lower) {
                editor.add(Category::Stakeholders, &text, &source, Supersedes::Nothing);
                continue;
            }
            if msg.role == Role::User && sentence.ends_with('?') {
                match next_reply[index] {
                    // Answered within this run: never open.
                    Some(true) => {}
                    // Only acknowledged: open.
                    Some(false) => {
                        editor.add(Category::OpenQuestions, &text, &source, Supersedes::Nothing);
                    }
                    // No reply yet: open until the next reply, if that answers.
                    None => {
                        let id = editor.add(Category::OpenQuestions, &text, &source, Supersedes::Nothing);
                        open.push(id);
                    }
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
                    continue 'sentences;
                }
            }
            // "We'll store amounts as bigint": a plan stated as what we will do.
            if lower.starts_with("we'll ") || lower.starts_with("we will ") {
                let supersedes = match REVISIONS.iter().any(|r| lower.contains(r)) {
                    true => Supersedes::Newest,
                    false => Supersedes::Nothing,
                };
                editor.add(Category::Decisions, &text, &source, supersedes);
            }
        }
        if replies(m) {
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

/// Phrases of a reply that puts the answer off ("I'll find out", "on the open items list").
const DEFERRALS: &[&str] = &[
    "open item",
    "keep that in mind",
    "keep it in mind",
    "add it to",
    "added it to",
    "look into",
    "get back to you",
    "find out",
    "follow up",
    "note that down",
    "noted it",
    "will check",
    "i'll check",
    "on the list",
];

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

    /// Issue 17, item 9: the three classes the labelled evaluation set found.
    #[test]
    fn labels_roles_and_acknowledgements_are_read_for_what_they_are() {
        let mut memory = WorkingMemory::default();
        let log = [
            said(
                1,
                Role::User,
                "Decision: we will store the ledger in PostgreSQL 16. Requirement: every transfer is idempotent. \
                 Constraint: no downtime longer than 5 minutes. Note: the vendor call moved to Friday.",
            ),
            said(
                2,
                Role::User,
                "Dana Kim (CFO) signs off on the cutover plan. Who runs the dry run?",
            ),
            said(3, Role::Assistant, "Noted."),
        ];
        extract_rules(&mut memory, &log, &|| false);
        assert!(
            memory.glossary.is_empty(),
            "labels are no terms: {:?}",
            memory.glossary
        );
        assert!(
            memory.decisions[0]
                .text
                .starts_with("Decision: we will store the ledger")
        );
        assert!(
            memory.requirements[0]
                .text
                .starts_with("Requirement: every transfer")
        );
        assert!(memory.constraints[0].text.starts_with("Constraint: no downtime"));
        assert!(
            memory.stakeholders[0]
                .text
                .starts_with("Dana Kim (CFO) signs off")
        );
        let open: Vec<&str> = memory
            .open_questions
            .iter()
            .filter(|q| q.superseded_by.is_none())
            .map(|q| q.text.as_str())
            .collect();
        assert_eq!(
            open,
            ["Who runs the dry run?"],
            "an acknowledgement answers nothing"
        );
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
