//! Working memory: the structured facts of a conversation with their provenance, the embedded
//! `rules` extractor, and the merge that supersedes items instead of deleting them.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    ids::Sequence,
    message::{Message, Role, StoredMessage},
    summary::{clip, sentences, transcript},
};

/// Items of one category (or glossary entries) one UpdateWorkingMemory may carry: merging is
/// quadratic in them, so a hostile document must not be unbounded.
pub const MAX_MEMORY_ITEMS: usize = 1_000;

/// One remembered fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryItem {
    /// Stable id within the document (`g1`, `d3`...).
    pub id: String,
    /// The fact.
    pub text: String,
    /// The messages it came from.
    pub source_sequences: Vec<Sequence>,
    /// The item that replaced it; `None` while current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
}

/// A defined term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlossaryEntry {
    /// The term.
    pub term: String,
    /// Its definition.
    pub definition: String,
    /// The messages it came from.
    pub source_sequences: Vec<Sequence>,
}

/// Kinds of facts, in the order they are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// What the conversation tries to achieve.
    Goals,
    /// What the result must do.
    Requirements,
    /// Limits to respect.
    Constraints,
    /// Choices made.
    Decisions,
    /// Things taken as true.
    Assumptions,
    /// Questions not answered yet.
    OpenQuestions,
    /// People and parties involved.
    Stakeholders,
}

impl Category {
    /// Every category, in rendering order.
    pub const ALL: [Category; 7] = [
        Category::Goals,
        Category::Requirements,
        Category::Constraints,
        Category::Decisions,
        Category::Assumptions,
        Category::OpenQuestions,
        Category::Stakeholders,
    ];

    /// The JSON and heading name.
    pub fn name(self) -> &'static str {
        match self {
            Category::Goals => "goals",
            Category::Requirements => "requirements",
            Category::Constraints => "constraints",
            Category::Decisions => "decisions",
            Category::Assumptions => "assumptions",
            Category::OpenQuestions => "open_questions",
            Category::Stakeholders => "stakeholders",
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Category::Goals => "g",
            Category::Requirements => "r",
            Category::Constraints => "c",
            Category::Decisions => "d",
            Category::Assumptions => "a",
            Category::OpenQuestions => "q",
            Category::Stakeholders => "s",
        }
    }
}

/// The working memory document.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WorkingMemory {
    /// Short prose summary of the facts.
    #[serde(default)]
    pub summary: String,
    /// Goals.
    #[serde(default)]
    pub goals: Vec<MemoryItem>,
    /// Requirements.
    #[serde(default)]
    pub requirements: Vec<MemoryItem>,
    /// Constraints.
    #[serde(default)]
    pub constraints: Vec<MemoryItem>,
    /// Decisions.
    #[serde(default)]
    pub decisions: Vec<MemoryItem>,
    /// Assumptions.
    #[serde(default)]
    pub assumptions: Vec<MemoryItem>,
    /// Open questions.
    #[serde(default)]
    pub open_questions: Vec<MemoryItem>,
    /// Stakeholders.
    #[serde(default)]
    pub stakeholders: Vec<MemoryItem>,
    /// Glossary.
    #[serde(default)]
    pub glossary: Vec<GlossaryEntry>,
    /// Facts were extracted through this sequence.
    #[serde(skip)]
    pub through_sequence: Sequence,
    /// Version, incremented on each change (0 = never stored).
    #[serde(skip)]
    pub version: u64,
    /// When this version was stored.
    #[serde(skip)]
    pub updated_at: Option<SystemTime>,
}

impl WorkingMemory {
    /// The items of a category.
    pub fn items(&self, category: Category) -> &Vec<MemoryItem> {
        match category {
            Category::Goals => &self.goals,
            Category::Requirements => &self.requirements,
            Category::Constraints => &self.constraints,
            Category::Decisions => &self.decisions,
            Category::Assumptions => &self.assumptions,
            Category::OpenQuestions => &self.open_questions,
            Category::Stakeholders => &self.stakeholders,
        }
    }

    fn items_mut(&mut self, category: Category) -> &mut Vec<MemoryItem> {
        match category {
            Category::Goals => &mut self.goals,
            Category::Requirements => &mut self.requirements,
            Category::Constraints => &mut self.constraints,
            Category::Decisions => &mut self.decisions,
            Category::Assumptions => &mut self.assumptions,
            Category::OpenQuestions => &mut self.open_questions,
            Category::Stakeholders => &mut self.stakeholders,
        }
    }

    /// Appends an item as given (a caller's update document, before [`WorkingMemory::merge`]).
    pub fn push_item(
        &mut self,
        category: Category,
        id: String,
        text: String,
        source_sequences: Vec<Sequence>,
        superseded_by: Option<String>,
    ) {
        self.items_mut(category).push(MemoryItem {
            id,
            text,
            source_sequences,
            superseded_by,
        });
    }

    /// True when no fact is recorded.
    pub fn is_empty(&self) -> bool {
        self.summary.is_empty()
            && self.glossary.is_empty()
            && Category::ALL.iter().all(|c| self.items(*c).is_empty())
    }

    /// Adds a fact, merging it into an equal current item (same text, any case and spacing).
    /// With `supersedes`, the named current item (or, for `true`, the newest current item of
    /// the category) is marked as replaced by the new one.
    pub fn add(
        &mut self,
        category: Category,
        text: &str,
        sources: &[Sequence],
        supersedes: Supersedes<'_>,
    ) -> String {
        let key = normalize(text);
        let items = self.items_mut(category);
        if let Some(existing) = items
            .iter_mut()
            .find(|i| i.superseded_by.is_none() && normalize(&i.text) == key)
        {
            merge_sources(&mut existing.source_sequences, sources);
            return existing.id.clone();
        }
        let id = format!("{}{}", category.id_prefix(), items.len() + 1);
        let target = match supersedes {
            Supersedes::Nothing => None,
            Supersedes::Item(old) => items
                .iter_mut()
                .find(|i| i.id == old && i.superseded_by.is_none()),
            Supersedes::Newest => items.iter_mut().rev().find(|i| i.superseded_by.is_none()),
        };
        if let Some(old) = target {
            old.superseded_by = Some(id.clone());
        }
        items.push(MemoryItem {
            id: id.clone(),
            text: text.to_owned(),
            source_sequences: sources.to_vec(),
            superseded_by: None,
        });
        id
    }

    /// Adds or refines a glossary entry (the newest definition of a term wins; sources merge).
    pub fn define(&mut self, term: &str, definition: &str, sources: &[Sequence]) {
        let key = normalize(term);
        match self.glossary.iter_mut().find(|e| normalize(&e.term) == key) {
            Some(entry) => {
                entry.definition = definition.to_owned();
                merge_sources(&mut entry.source_sequences, sources);
            }
            None => self.glossary.push(GlossaryEntry {
                term: term.to_owned(),
                definition: definition.to_owned(),
                source_sequences: sources.to_vec(),
            }),
        }
    }

    /// Merges a caller's document (bring your own LLM): items with a known id update that item
    /// (text and `superseded_by`), other items are added like extracted ones; glossary entries
    /// are defined; the summary is replaced when given; the watermark only moves forward.
    pub fn merge(&mut self, update: WorkingMemory) {
        for category in Category::ALL {
            for item in update.items(category).clone() {
                let existing = self
                    .items_mut(category)
                    .iter_mut()
                    .find(|i| !item.id.is_empty() && i.id == item.id);
                match existing {
                    Some(existing) => {
                        existing.text = item.text.clone();
                        merge_sources(&mut existing.source_sequences, &item.source_sequences);
                        if item.superseded_by.is_some() {
                            existing.superseded_by = item.superseded_by.clone();
                        }
                    }
                    None => {
                        self.add(category, &item.text, &item.source_sequences, Supersedes::Nothing);
                    }
                }
            }
        }
        for entry in update.glossary {
            self.define(&entry.term, &entry.definition, &entry.source_sequences);
        }
        if !update.summary.is_empty() {
            self.summary = update.summary;
        }
        self.through_sequence = self.through_sequence.max(update.through_sequence);
    }

    /// The current facts as text for a context pack; `None` when there are none.
    pub fn render(&self) -> Option<String> {
        let mut out = String::from("Working memory (facts of this conversation; [#n] = message number):");
        let mut any = false;
        if !self.summary.is_empty() {
            out.push_str(&format!("\n{}", self.summary));
            any = true;
        }
        for category in Category::ALL {
            let current: Vec<&MemoryItem> = self
                .items(category)
                .iter()
                .filter(|i| i.superseded_by.is_none())
                .collect();
            if current.is_empty() {
                continue;
            }
            any = true;
            out.push_str(&format!("\n{}:", heading(category)));
            for item in current {
                out.push_str(&format!("\n- {}{}", item.text, cite(&item.source_sequences)));
            }
        }
        if !self.glossary.is_empty() {
            any = true;
            out.push_str("\nGlossary:");
            for e in &self.glossary {
                out.push_str(&format!(
                    "\n- {}: {}{}",
                    e.term,
                    e.definition,
                    cite(&e.source_sequences)
                ));
            }
        }
        any.then_some(out)
    }
}

/// What a new item replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supersedes<'a> {
    /// Nothing.
    Nothing,
    /// The current item with this id.
    Item(&'a str),
    /// The newest current item of the category.
    Newest,
}

fn heading(category: Category) -> &'static str {
    match category {
        Category::Goals => "Goals",
        Category::Requirements => "Requirements",
        Category::Constraints => "Constraints",
        Category::Decisions => "Decisions",
        Category::Assumptions => "Assumptions",
        Category::OpenQuestions => "Open questions",
        Category::Stakeholders => "Stakeholders",
    }
}

fn cite(sources: &[Sequence]) -> String {
    if sources.is_empty() {
        return String::new();
    }
    let tags: Vec<String> = sources.iter().map(|s| format!("#{s}")).collect();
    format!(" [{}]", tags.join(", "))
}

fn merge_sources(into: &mut Vec<Sequence>, from: &[Sequence]) {
    into.extend_from_slice(from);
    into.sort();
    into.dedup();
}

fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .trim_end_matches('.')
        .to_owned()
}

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
/// `memory` and moves its watermark to the last message.
pub fn extract_rules(memory: &mut WorkingMemory, messages: &[StoredMessage]) {
    for (index, m) in messages.iter().enumerate() {
        let msg = &m.message;
        if msg.exclude_from_context || !matches!(msg.role, Role::User | Role::Assistant | Role::System) {
            continue;
        }
        let source = [m.sequence];
        for sentence in sentences(&msg.content) {
            let lower = sentence.to_lowercase();
            let text = clip(sentence, 300);
            if let Some((term, definition)) = definition(sentence) {
                memory.define(&term, &definition, &source);
                continue;
            }
            if msg.role == Role::User && sentence.ends_with('?') && !answered_later(messages, index) {
                memory.add(Category::OpenQuestions, &text, &source, Supersedes::Nothing);
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
                    memory.add(*category, &text, &source, supersedes);
                    break;
                }
            }
        }
        if msg.role == Role::Assistant && !msg.content.is_empty() {
            close_answered_questions(memory, m.sequence);
        }
    }
    if let Some(last) = messages.last() {
        memory.through_sequence = memory.through_sequence.max(last.sequence);
    }
}

fn answered_later(messages: &[StoredMessage], index: usize) -> bool {
    messages[index + 1..]
        .iter()
        .any(|m| m.message.role == Role::Assistant && !m.message.content.is_empty())
}

/// An assistant reply answers the questions asked before it: they are superseded by a note.
fn close_answered_questions(memory: &mut WorkingMemory, answer: Sequence) {
    let open: Vec<(String, String)> = memory
        .open_questions
        .iter()
        .filter(|q| q.superseded_by.is_none() && q.source_sequences.iter().all(|s| *s < answer))
        .map(|q| (q.id.clone(), q.text.clone()))
        .collect();
    for (id, text) in open {
        let note = format!("Answered at #{answer}: {text}");
        memory.add(Category::OpenQuestions, &note, &[answer], Supersedes::Item(&id));
        // The note itself records history, not an open question.
        if let Some(n) = memory.open_questions.last_mut() {
            n.superseded_by = Some("answered".into());
        }
    }
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

/// JSON schema of the extraction output (OpenAI structured output, strict mode).
pub fn extraction_schema() -> Value {
    let item = json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "source_sequences": {"type": "array", "items": {"type": "integer"}}
        },
        "required": ["text", "source_sequences"],
        "additionalProperties": false
    });
    let mut properties = serde_json::Map::new();
    properties.insert("summary".into(), json!({"type": "string"}));
    for category in Category::ALL {
        properties.insert(category.name().into(), json!({"type": "array", "items": item}));
    }
    properties.insert(
        "glossary".into(),
        json!({"type": "array", "items": {
            "type": "object",
            "properties": {
                "term": {"type": "string"},
                "definition": {"type": "string"},
                "source_sequences": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["term", "definition", "source_sequences"],
            "additionalProperties": false
        }}),
    );
    let required: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// The extraction request for an LLM: instructions with the schema, the current facts, and the
/// new messages.
pub fn extraction_request(memory: &WorkingMemory, messages: &[StoredMessage]) -> Vec<Message> {
    let instructions = format!(
        "Extract the structured facts of this conversation: goals, requirements, constraints, decisions, \
         assumptions, open questions, stakeholders, and a glossary of defined terms. Report only facts \
         stated in the new messages; give each the message numbers it came from in source_sequences. \
         Do not repeat facts already known. Answer with JSON matching this schema:\n{}",
        extraction_schema()
    );
    let known = memory.render().unwrap_or_else(|| "Known facts: none yet.".into());
    let body = format!("{known}\n\nNew messages:\n{}", transcript(messages));
    vec![
        Message::text(Role::System, instructions),
        Message::text(Role::User, body),
    ]
}

/// Parses an extraction answer (JSON per [`extraction_schema`]) into a document to merge.
pub fn parse_extraction(answer: &str) -> Result<WorkingMemory, serde_json::Error> {
    #[derive(Deserialize)]
    struct Item {
        text: String,
        #[serde(default)]
        source_sequences: Vec<u64>,
    }
    let value: Value = serde_json::from_str(answer)?;
    let mut memory = WorkingMemory::default();
    for category in Category::ALL {
        let items: Vec<Item> =
            serde_json::from_value(value.get(category.name()).cloned().unwrap_or(json!([])))?;
        for item in items {
            let sources: Vec<Sequence> = item
                .source_sequences
                .into_iter()
                .filter_map(|s| Sequence::parse(s).ok())
                .collect();
            memory.add(category, &item.text, &sources, Supersedes::Nothing);
        }
    }
    #[derive(Deserialize)]
    struct Entry {
        term: String,
        definition: String,
        #[serde(default)]
        source_sequences: Vec<u64>,
    }
    let glossary: Vec<Entry> = serde_json::from_value(value.get("glossary").cloned().unwrap_or(json!([])))?;
    for e in glossary {
        let sources: Vec<Sequence> = e
            .source_sequences
            .into_iter()
            .filter_map(|s| Sequence::parse(s).ok())
            .collect();
        memory.define(&e.term, &e.definition, &sources);
    }
    memory.summary = value
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(memory)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::domain::context::TokenCounts;

    fn said(sequence: u64, role: Role, text: &str) -> StoredMessage {
        let message = Message::text(role, text.into());
        StoredMessage {
            sequence: Sequence::parse(sequence).unwrap(),
            created_at: UNIX_EPOCH,
            tokens: TokenCounts::default(),
            call_sequence: None,
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
        extract_rules(&mut memory, &log);
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
        extract_rules(&mut memory, &[said(1, Role::User, "We decided to use MySQL.")]);
        extract_rules(
            &mut memory,
            &[said(
                2,
                Role::User,
                "Actually we decided to use PostgreSQL instead.",
            )],
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
        );
        assert_eq!(memory.render().unwrap().matches("Which region").count(), 1);
        extract_rules(&mut memory, &[said(2, Role::Assistant, "Deploy to eu-west-1.")]);
        assert!(memory.open_questions.iter().all(|q| q.superseded_by.is_some()));
    }

    #[test]
    fn extraction_answers_parse_into_items() {
        let answer = r#"{"summary":"s","goals":[{"text":"Ship","source_sequences":[4]}],"requirements":[],
            "constraints":[],"decisions":[],"assumptions":[],"open_questions":[],"stakeholders":[],
            "glossary":[{"term":"GA","definition":"general availability","source_sequences":[5]}]}"#;
        let memory = parse_extraction(answer).unwrap();
        assert_eq!(memory.goals[0].source_sequences, [Sequence::parse(4).unwrap()]);
        assert_eq!(memory.glossary[0].definition, "general availability");
        assert_eq!(extraction_schema()["required"].as_array().unwrap().len(), 9);
    }
}
