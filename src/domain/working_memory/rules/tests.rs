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
        native_tokens: TokenCounts::default(),
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

/// The three classes the labelled evaluation set found.
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
