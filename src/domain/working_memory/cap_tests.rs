use super::*;

fn goals(memory: &mut WorkingMemory, prefix: &str, n: usize) {
    let mut editor = MemoryEditor::new(memory);
    for i in 0..n {
        editor.add(
            Category::Goals,
            &format!("{prefix} {i}"),
            &[],
            Supersedes::Nothing,
        );
    }
}

#[test]
fn a_document_over_its_cap_sheds_history_first_and_refuses_current_facts() {
    let mut memory = WorkingMemory::default();
    goals(&mut memory, "old", 600);
    for item in &mut memory.goals {
        item.superseded_by = Some("x".into());
    }
    goals(&mut memory, "new", 700);
    assert_eq!(memory.fit(), Ok(()));
    assert_eq!(memory.goals.len(), MAX_DOCUMENT_ITEMS);
    assert_eq!(
        memory.goals.iter().filter(|g| g.superseded_by.is_none()).count(),
        700
    );
    goals(&mut memory, "more", 400);
    let refused = memory.clone().fit().unwrap_err();
    assert!(
        refused.contains("goals would hold 1100 current items"),
        "{refused}"
    );
    let dropped = memory.fit_dropping_oldest();
    assert_eq!(memory.goals.len(), MAX_DOCUMENT_ITEMS);
    assert_eq!(dropped, 100);
    assert_eq!(
        memory.goals.last().unwrap().text,
        "more 399",
        "the newest facts stay"
    );
}

#[test]
fn merging_keeps_ids_unique_and_updates_by_id() {
    let mut memory = WorkingMemory::default();
    goals(&mut memory, "g", 3);
    let mut update = WorkingMemory::default();
    update.push_item(Category::Goals, "g2".into(), "renamed".into(), vec![], None);
    update.push_item(Category::Goals, "g9".into(), "brand new".into(), vec![], None);
    update.push_item(Category::Goals, String::new(), "G 0".into(), vec![], None);
    memory.merge(update);
    let texts: Vec<&str> = memory.goals.iter().map(|g| g.text.as_str()).collect();
    assert_eq!(texts, ["g 0", "renamed", "g 2", "brand new"]);
    let mut ids: Vec<&str> = memory.goals.iter().map(|g| g.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
}
