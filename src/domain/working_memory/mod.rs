//! Working memory: the structured facts of a conversation with their provenance, and the merge
//! that supersedes items instead of deleting them. The embedded `rules` extractor is in
//! [`rules`]; the LLM extraction protocol (prompt, schema, answer parsing) in
//! `crate::models::summarize::prompts`.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::ids::Sequence;

mod edit;
mod extraction;
mod rules;

pub use edit::MemoryEditor;
pub use extraction::{ExtractedItem, Extraction};
pub use rules::extract_rules;

/// Items of one category (or glossary entries) one UpdateWorkingMemory may carry.
pub const MAX_MEMORY_ITEMS: usize = 1_000;

/// Items one category of the stored document holds (current and superseded), and entries of
/// its glossary: the whole document is read on every BuildContext, so it is bounded.
pub const MAX_DOCUMENT_ITEMS: usize = 1_000;

/// Bytes of text (summary, items, glossary) the stored document holds.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

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

    /// Keeps only the items and glossary entries all of whose sources pass `keep`; an item
    /// superseded by one that went is current again (what it was replaced by is gone).
    pub fn retain_sources(&mut self, keep: impl Fn(Sequence) -> bool) {
        let kept = |sources: &[Sequence]| sources.iter().all(|s| keep(*s));
        for category in Category::ALL {
            let items = self.items_mut(category);
            let removed: std::collections::HashSet<String> = items
                .iter()
                .filter(|i| !kept(&i.source_sequences))
                .map(|i| i.id.clone())
                .collect();
            if removed.is_empty() {
                continue;
            }
            items.retain(|i| !removed.contains(&i.id));
            for item in items.iter_mut() {
                if item.superseded_by.as_ref().is_some_and(|by| removed.contains(by)) {
                    item.superseded_by = None;
                }
            }
        }
        self.glossary.retain(|e| kept(&e.source_sequences));
    }

    /// True when no fact is recorded.
    pub fn is_empty(&self) -> bool {
        self.summary.is_empty()
            && self.glossary.is_empty()
            && Category::ALL.iter().all(|c| self.items(*c).is_empty())
    }

    /// Keeps the document within [`MAX_DOCUMENT_ITEMS`] and [`MAX_DOCUMENT_BYTES`]: superseded
    /// items (history) are dropped first, oldest first; when the current facts alone exceed a
    /// limit, the error says which (the caller supersedes some facts) and the document, possibly
    /// shed of history already, must not be stored.
    pub fn fit(&mut self) -> Result<(), String> {
        for category in Category::ALL {
            let items = self.items_mut(category);
            let mut excess = items.len().saturating_sub(MAX_DOCUMENT_ITEMS);
            items.retain(|i| {
                let drop = excess > 0 && i.superseded_by.is_some();
                excess -= usize::from(drop);
                !drop
            });
        }
        let mut excess = self.text_bytes().saturating_sub(MAX_DOCUMENT_BYTES);
        for category in Category::ALL {
            self.items_mut(category).retain(|i| {
                let drop = excess > 0 && i.superseded_by.is_some();
                if drop {
                    excess = excess.saturating_sub(i.text.len());
                }
                !drop
            });
        }
        for category in Category::ALL {
            let count = self.items(category).len();
            if count > MAX_DOCUMENT_ITEMS {
                return Err(format!(
                    "{} would hold {count} current items; the limit is {MAX_DOCUMENT_ITEMS} (supersede some)",
                    category.name()
                ));
            }
        }
        if self.glossary.len() > MAX_DOCUMENT_ITEMS {
            return Err(format!(
                "the glossary would hold {} entries; the limit is {MAX_DOCUMENT_ITEMS}",
                self.glossary.len()
            ));
        }
        let bytes = self.text_bytes();
        if bytes > MAX_DOCUMENT_BYTES {
            return Err(format!(
                "the document would hold {bytes} bytes of current text; the limit is {MAX_DOCUMENT_BYTES}"
            ));
        }
        Ok(())
    }

    /// [`WorkingMemory::fit`] for extractors, which nobody can ask to supersede: when the
    /// current facts alone exceed a limit, the oldest current items (and glossary entries) go
    /// too, so a refresh always advances. Returns how many current items were dropped.
    pub fn fit_dropping_oldest(&mut self) -> usize {
        if self.fit().is_ok() {
            return 0;
        }
        let mut dropped = 0;
        for category in Category::ALL {
            let items = self.items_mut(category);
            let excess = items.len().saturating_sub(MAX_DOCUMENT_ITEMS);
            items.drain(..excess);
            dropped += excess;
        }
        let excess = self.glossary.len().saturating_sub(MAX_DOCUMENT_ITEMS);
        self.glossary.drain(..excess);
        dropped += excess;
        let mut over = self.text_bytes().saturating_sub(MAX_DOCUMENT_BYTES);
        for category in Category::ALL {
            self.items_mut(category).retain(|i| {
                let drop = over > 0;
                if drop {
                    over = over.saturating_sub(i.text.len());
                    dropped += 1;
                }
                !drop
            });
        }
        if over > 0 {
            // Only the summary and glossary are left to give.
            self.glossary.clear();
            let mut end = MAX_DOCUMENT_BYTES.min(self.summary.len());
            while !self.summary.is_char_boundary(end) {
                end -= 1;
            }
            self.summary.truncate(end);
        }
        dropped
    }

    /// Bytes of all the document's text.
    fn text_bytes(&self) -> usize {
        let items: usize = Category::ALL
            .iter()
            .flat_map(|c| self.items(*c))
            .map(|i| i.text.len())
            .sum();
        let glossary: usize = self
            .glossary
            .iter()
            .map(|e| e.term.len() + e.definition.len())
            .sum();
        self.summary.len() + items + glossary
    }

    /// The current facts as text for a context pack; `None` when there are none.
    pub fn render(&self) -> Option<String> {
        self.render_as(false)
    }

    /// The current facts for an extractor: each item prefixed with its id (`d3: ...`), which
    /// an extracted fact names to supersede it.
    pub fn render_with_ids(&self) -> Option<String> {
        self.render_as(true)
    }

    fn render_as(&self, ids: bool) -> Option<String> {
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
                let id = if ids {
                    format!("{}: ", item.id)
                } else {
                    String::new()
                };
                out.push_str(&format!("\n- {id}{}{}", item.text, cite(&item.source_sequences)));
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

/// Adds `from` to the sorted, deduplicated `into`: O(log n) per source arriving in order, as
/// extraction feeds them.
fn merge_sources(into: &mut Vec<Sequence>, from: &[Sequence]) {
    for s in from {
        if let Err(at) = into.binary_search(s) {
            into.insert(at, *s);
        }
    }
}

fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .trim_end_matches('.')
        .to_owned()
}

#[cfg(test)]
mod cap_tests;
