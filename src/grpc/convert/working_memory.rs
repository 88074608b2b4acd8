//! Working memory on the wire.

use crate::{
    domain::{
        AppendLimits, Sequence, Violations,
        violation::NUL_DESCRIPTION,
        working_memory::{Category, GlossaryEntry, MAX_MEMORY_ITEMS, WorkingMemory},
    },
    proto,
};

fn sequences_to_proto(sequences: &[Sequence]) -> Vec<u64> {
    sequences.iter().map(|s| s.get()).collect()
}

/// The wire form of a working memory.
pub(crate) fn memory_to_proto(memory: &WorkingMemory) -> proto::WorkingMemory {
    let items = |category: Category| {
        memory
            .items(category)
            .iter()
            .map(|i| proto::MemoryItem {
                text: i.text.clone(),
                source_sequences: sequences_to_proto(&i.source_sequences),
                id: i.id.clone(),
                superseded_by: i.superseded_by.clone().unwrap_or_default(),
            })
            .collect()
    };
    proto::WorkingMemory {
        summary: memory.summary.clone(),
        goals: items(Category::Goals),
        requirements: items(Category::Requirements),
        constraints: items(Category::Constraints),
        decisions: items(Category::Decisions),
        assumptions: items(Category::Assumptions),
        open_questions: items(Category::OpenQuestions),
        stakeholders: items(Category::Stakeholders),
        glossary: memory
            .glossary
            .iter()
            .map(|e| proto::GlossaryEntry {
                term: e.term.clone(),
                definition: e.definition.clone(),
                source_sequences: sequences_to_proto(&e.source_sequences),
            })
            .collect(),
        through_sequence: memory.through_sequence.get(),
        version: memory.version,
        updated_at: memory.updated_at.map(Into::into),
    }
}

/// Parses a caller's working memory update; violations are recorded under `memory.*`.
pub(crate) fn memory_from_proto(
    raw: proto::WorkingMemory,
    limits: &AppendLimits,
    v: &mut Violations,
) -> WorkingMemory {
    let proto::WorkingMemory {
        summary,
        goals,
        requirements,
        constraints,
        decisions,
        assumptions,
        open_questions,
        stakeholders,
        glossary,
        through_sequence,
        // Server-set.
        version: _,
        updated_at: _,
    } = raw;
    let mut memory = WorkingMemory::default();
    let lists = [
        (Category::Goals, goals),
        (Category::Requirements, requirements),
        (Category::Constraints, constraints),
        (Category::Decisions, decisions),
        (Category::Assumptions, assumptions),
        (Category::OpenQuestions, open_questions),
        (Category::Stakeholders, stakeholders),
    ];
    // Malformed sequences are reported as they are met, the other problems after them.
    let mut problems = Vec::new();
    for (category, items) in lists {
        items_from_proto(&mut memory, category, items, limits, v, &mut problems);
    }
    glossary_from_proto(&mut memory, glossary, v, &mut problems);
    summary_problems(&summary, limits, &mut problems);
    for (field, description) in problems {
        v.add(field, description);
    }
    memory.summary = summary;
    memory.through_sequence = Sequence::parse(through_sequence)
        .map_err(|e| v.add("memory.through_sequence", e))
        .unwrap_or_default();
    memory
}

/// A field's problem, reported after the malformed sequences.
type Problem = (String, String);

/// Source sequences, each that does not parse reported under `field`.
fn sequences(field: &str, raw: Vec<u64>, v: &mut Violations) -> Vec<Sequence> {
    raw.into_iter()
        .filter_map(|s| Sequence::parse(s).map_err(|e| v.add(field.to_owned(), e)).ok())
        .collect()
}

/// The items of one category, pushed into `memory`.
fn items_from_proto(
    memory: &mut WorkingMemory,
    category: Category,
    items: Vec<proto::MemoryItem>,
    limits: &AppendLimits,
    v: &mut Violations,
    problems: &mut Vec<Problem>,
) {
    if items.len() > MAX_MEMORY_ITEMS {
        problems.push((
            format!("memory.{}", category.name()),
            format!("{} items; the limit is {MAX_MEMORY_ITEMS}", items.len()),
        ));
        return;
    }
    for (i, item) in items.into_iter().enumerate() {
        let proto::MemoryItem {
            text,
            source_sequences,
            id,
            superseded_by,
        } = item;
        let path = format!("memory.{}[{i}]", category.name());
        if text.trim().is_empty() || text.len() > limits.max_content_bytes {
            problems.push((
                format!("{path}.text"),
                format!("must be 1 to {} bytes", limits.max_content_bytes),
            ));
        }
        for (field, value) in [("text", &text), ("id", &id), ("superseded_by", &superseded_by)] {
            if value.contains('\0') {
                problems.push((format!("{path}.{field}"), NUL_DESCRIPTION.into()));
            }
        }
        let sources = sequences(&format!("{path}.source_sequences"), source_sequences, v);
        memory.push_item(
            category,
            id,
            text,
            sources,
            Some(superseded_by).filter(|s| !s.is_empty()),
        );
    }
}

/// The glossary entries, pushed into `memory` (at most [`MAX_MEMORY_ITEMS`]).
fn glossary_from_proto(
    memory: &mut WorkingMemory,
    glossary: Vec<proto::GlossaryEntry>,
    v: &mut Violations,
    problems: &mut Vec<Problem>,
) {
    if glossary.len() > MAX_MEMORY_ITEMS {
        problems.push((
            "memory.glossary".into(),
            format!("{} entries; the limit is {MAX_MEMORY_ITEMS}", glossary.len()),
        ));
    }
    for (i, entry) in glossary.into_iter().take(MAX_MEMORY_ITEMS).enumerate() {
        let proto::GlossaryEntry {
            term,
            definition,
            source_sequences,
        } = entry;
        if term.trim().is_empty() || definition.trim().is_empty() {
            problems.push((
                format!("memory.glossary[{i}]"),
                "term and definition are required".into(),
            ));
        }
        for (field, value) in [("term", &term), ("definition", &definition)] {
            if value.contains('\0') {
                problems.push((format!("memory.glossary[{i}].{field}"), NUL_DESCRIPTION.into()));
            }
        }
        let sources = sequences(
            &format!("memory.glossary[{i}].source_sequences"),
            source_sequences,
            v,
        );
        memory.glossary.push(GlossaryEntry {
            term,
            definition,
            source_sequences: sources,
        });
    }
}

/// The summary's size and characters.
fn summary_problems(summary: &str, limits: &AppendLimits, problems: &mut Vec<Problem>) {
    if summary.len() > limits.max_content_bytes {
        problems.push((
            "memory.summary".into(),
            format!(
                "{} bytes; the limit is {}",
                summary.len(),
                limits.max_content_bytes
            ),
        ));
    }
    if summary.contains('\0') {
        problems.push(("memory.summary".into(), NUL_DESCRIPTION.into()));
    }
}
