//! Facts an LLM extracted, checked like an UpdateWorkingMemory and folded into the stored
//! document by content: a model's answer carries no ids of its own, so an extracted fact is
//! the stored fact with the same normalized text (or glossary term) or a new one, and a stored
//! fact changes only when the answer names it in `supersedes`.

use super::{Category, GlossaryEntry, MAX_MEMORY_ITEMS, MemoryEditor, Supersedes, WorkingMemory};
use crate::domain::{Violations, ids::Sequence};

/// One extracted fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedItem {
    /// Its category.
    pub category: Category,
    /// The fact.
    pub text: String,
    /// The messages it came from.
    pub source_sequences: Vec<Sequence>,
    /// The id of the stored current fact of the same category it replaces, if any.
    pub supersedes: Option<String>,
}

/// What one extraction answer says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extraction {
    /// Facts, in the answer's order.
    pub items: Vec<ExtractedItem>,
    /// Defined terms.
    pub glossary: Vec<GlossaryEntry>,
    /// A new short summary of the facts (empty: keep the stored one).
    pub summary: String,
}

impl Extraction {
    /// The checks of UpdateWorkingMemory: at most [`MAX_MEMORY_ITEMS`] per category and in the
    /// glossary, texts of 1 to `max_text_bytes` bytes without U+0000, and sources no later than
    /// the last message the extractor was shown.
    pub fn check(&self, max_text_bytes: usize, last: Sequence) -> Result<(), Violations> {
        let mut v = Violations::default();
        for category in Category::ALL {
            let n = self.items.iter().filter(|i| i.category == category).count();
            if n > MAX_MEMORY_ITEMS {
                let problem = format!("{n} items; the limit is {MAX_MEMORY_ITEMS}");
                v.add(category.name(), problem);
            }
        }
        if self.glossary.len() > MAX_MEMORY_ITEMS {
            let problem = format!("{} entries; the limit is {MAX_MEMORY_ITEMS}", self.glossary.len());
            v.add("glossary", problem);
        }
        let mut text = |field: String, value: &str| {
            if value.trim().is_empty() || value.len() > max_text_bytes {
                v.add(field, format!("must be 1 to {max_text_bytes} bytes"));
            } else if value.contains('\0') {
                v.add(field, "contains U+0000");
            }
        };
        for (i, item) in self.items.iter().enumerate() {
            text(format!("{}[{i}].text", item.category.name()), &item.text);
        }
        for (i, entry) in self.glossary.iter().enumerate() {
            text(format!("glossary[{i}].term"), &entry.term);
            text(format!("glossary[{i}].definition"), &entry.definition);
        }
        if self.summary.len() > max_text_bytes || self.summary.contains('\0') {
            v.add(
                "summary",
                format!("must be at most {max_text_bytes} bytes, without U+0000"),
            );
        }
        let sources = self
            .items
            .iter()
            .map(|i| (i.category.name(), &i.source_sequences))
            .chain(self.glossary.iter().map(|e| ("glossary", &e.source_sequences)));
        for (field, sources) in sources {
            if let Some(s) = sources.iter().find(|s| s.get() == 0 || **s > last) {
                v.add(
                    format!("{field}.source_sequences"),
                    format!("cites message {s}; messages shown run from 1 to {last}"),
                );
                break;
            }
        }
        match v.is_empty() {
            true => Ok(()),
            false => Err(v),
        }
    }
}

impl WorkingMemory {
    /// Folds an extraction in by content (see the module docs). Never removes an item, and
    /// changes a stored one only by marking it superseded by a fact of this extraction.
    pub fn absorb(&mut self, extraction: Extraction) {
        let mut editor = MemoryEditor::new(self);
        for item in &extraction.items {
            let supersedes = match &item.supersedes {
                Some(id) => Supersedes::Item(id),
                None => Supersedes::Nothing,
            };
            editor.add(item.category, &item.text, &item.source_sequences, supersedes);
        }
        for entry in &extraction.glossary {
            editor.define(&entry.term, &entry.definition, &entry.source_sequences);
        }
        if !extraction.summary.trim().is_empty() {
            self.summary = extraction.summary;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn seq(n: u64) -> Sequence {
        Sequence::parse(n).unwrap()
    }

    fn item(category: Category, text: &str, supersedes: Option<&str>) -> ExtractedItem {
        ExtractedItem {
            category,
            text: text.into(),
            source_sequences: vec![seq(1)],
            supersedes: supersedes.map(str::to_owned),
        }
    }

    #[test]
    fn a_second_refresh_keeps_the_facts_of_the_first() {
        let mut memory = WorkingMemory::default();
        let first = Extraction {
            items: vec![item(Category::Decisions, "Use AWS DMS", None)],
            ..Extraction::default()
        };
        memory.absorb(first);
        // The model numbers its answer from 1 again: that says nothing about stored facts.
        let second = Extraction {
            items: vec![item(Category::Decisions, "Cutover on March 22", None)],
            ..Extraction::default()
        };
        memory.absorb(second);
        let texts: Vec<(&str, bool)> = memory
            .decisions
            .iter()
            .map(|d| (d.text.as_str(), d.superseded_by.is_none()))
            .collect();
        assert_eq!(texts, [("Use AWS DMS", true), ("Cutover on March 22", true)]);
        let third = Extraction {
            items: vec![item(Category::Decisions, "Use pglogical", Some("d1"))],
            ..Extraction::default()
        };
        memory.absorb(third);
        assert_eq!(memory.decisions[0].superseded_by.as_deref(), Some("d3"));
        assert_eq!(memory.decisions[2].text, "Use pglogical");
    }

    #[test]
    fn extracted_items_meet_the_update_checks() {
        let ok = Extraction {
            items: vec![item(Category::Goals, "Ship", None)],
            ..Extraction::default()
        };
        assert!(ok.check(100, seq(3)).is_ok());
        let empty = Extraction {
            items: vec![item(Category::Goals, "  ", None)],
            ..Extraction::default()
        };
        assert!(
            empty
                .check(100, seq(3))
                .unwrap_err()
                .to_string()
                .contains("goals[0].text")
        );
        let huge = Extraction {
            items: vec![item(Category::Goals, &"x".repeat(101), None)],
            ..Extraction::default()
        };
        assert!(huge.check(100, seq(3)).is_err());
        let elsewhere = Extraction {
            items: vec![ExtractedItem {
                source_sequences: vec![seq(4)],
                ..item(Category::Goals, "Ship", None)
            }],
            ..Extraction::default()
        };
        let refused = elsewhere.check(100, seq(3)).unwrap_err().to_string();
        assert!(refused.contains("cites message 4"), "{refused}");
    }

    fn category() -> impl Strategy<Value = Category> {
        proptest::sample::select(Category::ALL.to_vec())
    }

    fn extraction() -> impl Strategy<Value = Extraction> {
        let text = proptest::sample::select(vec![
            "Use DMS",
            "use  dms.",
            "Cutover",
            "Ship v2",
            "Budget 5k",
            "Ship V2",
        ]);
        let id = proptest::option::of(proptest::sample::select(vec!["g1", "d1", "d2", "r1", "x9", "q3"]));
        let item = (category(), text, 1u64..20, id).prop_map(|(category, text, s, id)| ExtractedItem {
            category,
            text: text.to_owned(),
            source_sequences: vec![seq(s)],
            supersedes: id.map(str::to_owned),
        });
        proptest::collection::vec(item, 0..8).prop_map(|items| Extraction {
            items,
            ..Extraction::default()
        })
    }

    proptest! {
        /// A refresh never removes an item, never rewrites one, and supersedes an item only
        /// with a fact of the same refresh that the answer said replaces it.
        #[test]
        fn a_refresh_never_loses_a_fact(refreshes in proptest::collection::vec(extraction(), 1..5)) {
            let mut memory = WorkingMemory::default();
            for refresh in refreshes {
                let before = memory.clone();
                let named: Vec<(Category, String)> = refresh
                    .items
                    .iter()
                    .filter_map(|i| Some((i.category, i.supersedes.clone()?)))
                    .collect();
                memory.absorb(refresh);
                for category in Category::ALL {
                    let (old, new) = (before.items(category), memory.items(category));
                    prop_assert!(new.len() >= old.len());
                    for (o, n) in old.iter().zip(new) {
                        prop_assert_eq!(&o.id, &n.id);
                        prop_assert_eq!(&o.text, &n.text);
                        prop_assert!(o.source_sequences.iter().all(|s| n.source_sequences.contains(s)));
                        if o.superseded_by != n.superseded_by {
                            prop_assert!(o.superseded_by.is_none());
                            prop_assert!(named.contains(&(category, o.id.clone())));
                            let by = n.superseded_by.as_ref().unwrap();
                            prop_assert!(new[old.len()..].iter().any(|i| &i.id == by));
                        }
                    }
                    let mut ids: Vec<&String> = new.iter().map(|i| &i.id).collect();
                    ids.sort();
                    ids.dedup();
                    prop_assert_eq!(ids.len(), new.len());
                }
            }
        }
    }
}
