//! Linear edits of a working memory: the lookups a run of adds needs (current items by text,
//! items by id, the newest current item, glossary entries by term), built once per run instead
//! of a scan per add, so extracting or merging n facts costs O(n), not O(n²).

use std::collections::HashMap;

use super::{Category, GlossaryEntry, MemoryItem, Supersedes, WorkingMemory, merge_sources, normalize};
use crate::domain::ids::Sequence;

/// A working memory being edited, with its lookups.
#[derive(Debug)]
pub struct MemoryEditor<'a> {
    memory: &'a mut WorkingMemory,
    /// Current (not superseded) items by category and normalized text.
    current: HashMap<(Category, String), usize>,
    /// Every item by category and id.
    ids: HashMap<(Category, String), usize>,
    /// Per category, indices of items that were current when pushed, oldest first; superseded
    /// ones are skipped (and popped) when the newest is asked for.
    stacks: HashMap<Category, Vec<usize>>,
    /// Glossary entries by normalized term.
    terms: HashMap<String, usize>,
}

impl<'a> MemoryEditor<'a> {
    /// Indexes `memory` (O(items)).
    pub fn new(memory: &'a mut WorkingMemory) -> Self {
        let mut current = HashMap::new();
        let mut ids = HashMap::new();
        let mut stacks: HashMap<Category, Vec<usize>> = HashMap::new();
        for category in Category::ALL {
            for (i, item) in memory.items(category).iter().enumerate() {
                ids.insert((category, item.id.clone()), i);
                if item.superseded_by.is_none() {
                    current.entry((category, normalize(&item.text))).or_insert(i);
                    stacks.entry(category).or_default().push(i);
                }
            }
        }
        let mut terms = HashMap::new();
        for (i, entry) in memory.glossary.iter().enumerate() {
            terms.entry(normalize(&entry.term)).or_insert(i);
        }
        Self {
            memory,
            current,
            ids,
            stacks,
            terms,
        }
    }

    /// The memory being edited.
    pub fn memory(&mut self) -> &mut WorkingMemory {
        self.memory
    }

    /// See [`WorkingMemory::add`].
    pub fn add(
        &mut self,
        category: Category,
        text: &str,
        sources: &[Sequence],
        supersedes: Supersedes<'_>,
    ) -> String {
        let key = (category, normalize(text));
        if let Some(&i) = self.current.get(&key) {
            let existing = &mut self.memory.items_mut(category)[i];
            merge_sources(&mut existing.source_sequences, sources);
            return existing.id.clone();
        }
        let id = self.fresh_id(category);
        let target = match supersedes {
            Supersedes::Nothing => None,
            Supersedes::Item(old) => self
                .ids
                .get(&(category, old.to_owned()))
                .copied()
                .filter(|&i| self.memory.items(category)[i].superseded_by.is_none()),
            Supersedes::Newest => self.newest_current(category),
        };
        if let Some(i) = target {
            self.supersede(category, i, id.clone());
        }
        let items = self.memory.items_mut(category);
        let index = items.len();
        items.push(MemoryItem {
            id: id.clone(),
            text: text.to_owned(),
            source_sequences: sorted(sources),
            superseded_by: None,
        });
        self.ids.insert((category, id.clone()), index);
        self.current.insert(key, index);
        self.stacks.entry(category).or_default().push(index);
        id
    }

    /// See [`WorkingMemory::define`].
    pub fn define(&mut self, term: &str, definition: &str, sources: &[Sequence]) {
        let key = normalize(term);
        match self.terms.get(&key) {
            Some(&i) => {
                let entry = &mut self.memory.glossary[i];
                entry.definition = definition.to_owned();
                merge_sources(&mut entry.source_sequences, sources);
            }
            None => {
                self.terms.insert(key, self.memory.glossary.len());
                self.memory.glossary.push(GlossaryEntry {
                    term: term.to_owned(),
                    definition: definition.to_owned(),
                    source_sequences: sorted(sources),
                });
            }
        }
    }

    /// Updates the item with `item.id` (text, sources, `superseded_by` when given); false when
    /// there is none.
    pub fn update(&mut self, category: Category, item: &MemoryItem) -> bool {
        let Some(&i) = self.ids.get(&(category, item.id.clone())) else {
            return false;
        };
        let existing = &self.memory.items(category)[i];
        if existing.superseded_by.is_none() {
            let old_key = (category, normalize(&existing.text));
            if self.current.get(&old_key) == Some(&i) {
                self.current.remove(&old_key);
            }
        }
        let existing = &mut self.memory.items_mut(category)[i];
        existing.text.clone_from(&item.text);
        merge_sources(&mut existing.source_sequences, &item.source_sequences);
        if item.superseded_by.is_some() {
            existing.superseded_by.clone_from(&item.superseded_by);
        }
        if existing.superseded_by.is_none() {
            self.current.entry((category, normalize(&item.text))).or_insert(i);
        }
        true
    }

    /// The item of `category` with `id`.
    pub fn item(&self, category: Category, id: &str) -> Option<&MemoryItem> {
        let i = *self.ids.get(&(category, id.to_owned()))?;
        self.memory.items(category).get(i)
    }

    /// Marks the item of `category` with `id` as replaced by `by` (no-op when there is none).
    pub fn close(&mut self, category: Category, id: &str, by: &str) {
        if let Some(&i) = self.ids.get(&(category, id.to_owned())) {
            self.supersede(category, i, by.to_owned());
        }
    }

    /// Marks item `i` of `category` as replaced by `by`.
    pub fn supersede(&mut self, category: Category, i: usize, by: String) {
        let item = &mut self.memory.items_mut(category)[i];
        let key = (category, normalize(&item.text));
        item.superseded_by = Some(by);
        if self.current.get(&key) == Some(&i) {
            self.current.remove(&key);
        }
    }

    /// The newest current item of `category` (amortized O(1)).
    pub fn newest_current(&mut self, category: Category) -> Option<usize> {
        let stack = self.stacks.entry(category).or_default();
        while let Some(&i) = stack.last() {
            if self.memory.items(category)[i].superseded_by.is_none() {
                return Some(i);
            }
            stack.pop();
        }
        None
    }

    /// `g12`, `d3`...: the category's prefix and the first free number from its length up.
    fn fresh_id(&self, category: Category) -> String {
        let mut n = self.memory.items(category).len() + 1;
        loop {
            let id = format!("{}{n}", category.id_prefix());
            if !self.ids.contains_key(&(category, id.clone())) {
                return id;
            }
            n += 1;
        }
    }
}

fn sorted(sources: &[Sequence]) -> Vec<Sequence> {
    let mut sources = sources.to_vec();
    sources.sort();
    sources.dedup();
    sources
}

/// Edits of the document, each through a [`MemoryEditor`].
impl WorkingMemory {
    /// Adds a fact, merging it into an equal current item (same text, any case and spacing).
    /// With `supersedes`, the named current item (or, for `true`, the newest current item of
    /// the category) is marked as replaced by the new one. For many adds, use one
    /// [`MemoryEditor`]: this indexes the document each time.
    pub fn add(
        &mut self,
        category: Category,
        text: &str,
        sources: &[Sequence],
        supersedes: Supersedes<'_>,
    ) -> String {
        MemoryEditor::new(self).add(category, text, sources, supersedes)
    }

    /// Adds or refines a glossary entry (the newest definition of a term wins; sources merge).
    pub fn define(&mut self, term: &str, definition: &str, sources: &[Sequence]) {
        MemoryEditor::new(self).define(term, definition, sources);
    }

    /// Merges a caller's document (bring your own LLM): items with a known id update that item
    /// (text and `superseded_by`), other items are added like extracted ones; glossary entries
    /// are defined; the summary is replaced when given; the watermark only moves forward.
    /// Linear in the sizes of both documents.
    pub fn merge(&mut self, update: WorkingMemory) {
        let mut editor = MemoryEditor::new(self);
        for category in Category::ALL {
            for item in update.items(category) {
                if item.id.is_empty() || !editor.update(category, item) {
                    editor.add(category, &item.text, &item.source_sequences, Supersedes::Nothing);
                }
            }
        }
        for entry in &update.glossary {
            editor.define(&entry.term, &entry.definition, &entry.source_sequences);
        }
        if !update.summary.is_empty() {
            self.summary = update.summary;
        }
        self.through_sequence = self.through_sequence.max(update.through_sequence);
    }
}
