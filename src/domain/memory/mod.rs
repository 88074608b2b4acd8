//! Working memory: the structured facts of a conversation with their provenance, and the merge
//! that supersedes items instead of deleting them. The embedded `rules` extractor is in
//! [`rules`]; the LLM extraction protocol (prompt, schema, answer parsing) in
//! `crate::summarize::prompts`.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::ids::Sequence;

mod rules;

pub use rules::extract_rules;

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
