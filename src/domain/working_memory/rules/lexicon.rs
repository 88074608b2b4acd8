//! The words the `rules` extractor looks for, by what they signal. Matched on lower-cased
//! sentences; kept apart from the matching so the lists can grow without touching the logic.

use super::super::Category;

/// Patterns of the `rules` extractor, by category, matched on lower-cased sentences.
pub(super) const PATTERNS: &[(Category, &[&str])] = &[
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
pub(super) const LABELS: &[(Category, &[&str])] = &[
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
pub(super) const NOT_TERMS: &[&str] = &[
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
pub(super) const ACKNOWLEDGEMENTS: &[&str] = &[
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
pub(super) const ROLE_VERBS: &[&str] = &[
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
pub(super) const REVISIONS: &[&str] = &[
    "instead",
    "no longer",
    "changed our mind",
    "change of plan",
    "actually",
    "rather than",
];

/// Phrases of a reply that puts the answer off ("I'll find out", "on the open items list").
pub(super) const DEFERRALS: &[&str] = &[
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
