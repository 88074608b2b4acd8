use proptest::prelude::*;

use super::*;
use crate::domain::{
    Message, ToolCall,
    working_memory::{Category, Supersedes, WorkingMemory},
};

fn query(status: Option<ConversationStatus>, labels: &[(&str, &str)]) -> ListQuery {
    ListQuery {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        status,
        limit: 10,
        after: None,
    }
}

#[test]
fn a_page_token_reads_back_only_with_the_filters_it_was_made_with() {
    let key = ActivityKey {
        micros: 1_763_000_000_123_456,
        id: ConversationId::parse("project-42/pm ~?").expect("valid id"),
    };
    let q = query(Some(ConversationStatus::Idle), &[("project", "p42")]);
    let token = q.page_token(&key);
    assert_eq!(q.parse_page_token(&token), Ok(key.clone()));
    for other in [
        query(None, &[("project", "p42")]),
        query(Some(ConversationStatus::Idle), &[]),
        query(Some(ConversationStatus::Idle), &[("project", "p43")]),
    ] {
        assert!(other.parse_page_token(&token).is_err());
    }
    for garbage in ["", "!!", "AAAA", &format!("A{}", &token[1..])] {
        assert!(q.parse_page_token(garbage).is_err(), "{garbage:?}");
    }
}

#[test]
fn label_keys_follow_the_documented_syntax() {
    for ok in ["a", "project", "k8s.io_name-2", &"a".repeat(63)] {
        assert!(label_key_ok(ok), "{ok}");
    }
    for bad in ["", "A", "1abc", "_x", "a b", "ä", &"a".repeat(64)] {
        assert!(!label_key_ok(bad), "{bad}");
    }
}

#[test]
fn a_tombstone_keeps_the_protocol_and_drops_the_text() {
    let mut message = Message::text(crate::domain::Role::Assistant, "secret".into());
    message.tool_calls = vec![ToolCall {
        signature: "secret-signature".into(),
        ..ToolCall::new("c1", "login", r#"{"password":"secret"}"#)
    }];
    message.reasoning = vec![crate::domain::Reasoning {
        text: "secret thoughts".into(),
        signature: "secret-thought".into(),
        ..crate::domain::Reasoning::new(crate::domain::Provider::Gemini, "thought")
    }];
    message.content_signature = "secret-text".into();
    message.error = Some(crate::domain::LlmError {
        code: "x".into(),
        message: "secret".into(),
        partial_output: "secret".into(),
    });
    let tomb = tombstone(&message);
    assert!(!format!("{tomb:?}").contains("secret"));
    assert_eq!(tomb.native_provider(), None, "reasoning and signatures go");
    assert_eq!(
        (tomb.tool_calls[0].id.as_str(), tomb.tool_calls[0].name.as_str()),
        ("c1", "login")
    );
    assert_eq!(tombstone(&tomb), tomb, "redacting twice changes nothing");
}

/// A memory whose items cite random sources, some superseding others.
fn memory() -> impl Strategy<Value = WorkingMemory> {
    let item = (0..3usize, prop::collection::vec(1..20i64, 1..4), any::<bool>());
    (prop::collection::vec(item, 0..30), 0..25u64).prop_map(|(items, through)| {
        let mut memory = WorkingMemory::default();
        for (i, (category, sources, supersede)) in items.into_iter().enumerate() {
            let category = [Category::Decisions, Category::Goals, Category::Constraints][category];
            let sources: Vec<Sequence> = sources.into_iter().map(Sequence::from_stored).collect();
            let how = if supersede {
                Supersedes::Newest
            } else {
                Supersedes::Nothing
            };
            memory.add(category, &format!("fact {i}"), &sources, how);
            if i % 4 == 0 {
                memory.define(&format!("term {i}"), "meaning", &sources);
            }
        }
        memory.summary = "prose".into();
        memory.through_sequence = Sequence::from_stored(through as i64);
        memory.version = 3;
        memory
    })
}

fn every_item(memory: &WorkingMemory) -> Vec<&crate::domain::working_memory::MemoryItem> {
    Category::ALL.iter().flat_map(|c| memory.items(*c)).collect()
}

proptest! {
    #[test]
    fn a_forks_memory_holds_exactly_the_facts_sourced_within_the_prefix(
        memory in memory(),
        through in 0..22u64,
    ) {
        let through = Sequence::from_stored(through as i64);
        let within = |sources: &[Sequence]| sources.iter().all(|s| *s <= through);
        let expected: Vec<&str> = every_item(&memory)
            .into_iter()
            .filter(|i| within(&i.source_sequences))
            .map(|i| i.id.as_str())
            .collect();
        match memory_within(&memory, through) {
            None => prop_assert!(expected.is_empty()),
            Some(forked) => {
                let ids: Vec<&str> = every_item(&forked).into_iter().map(|i| i.id.as_str()).collect();
                prop_assert_eq!(ids, expected);
                prop_assert!(forked.glossary.iter().all(|e| within(&e.source_sequences)));
                prop_assert!(forked.through_sequence <= through);
                prop_assert_eq!(forked.version, 1);
                // Nothing is superseded by an item the fork does not have.
                let kept: Vec<&str> = every_item(&forked).into_iter().map(|i| i.id.as_str()).collect();
                for item in every_item(&forked) {
                    if let Some(by) = &item.superseded_by {
                        prop_assert!(kept.contains(&by.as_str()));
                    }
                }
                if memory.through_sequence > through {
                    prop_assert!(forked.summary.is_empty());
                }
            }
        }
    }

    #[test]
    fn forgetting_a_message_removes_what_cites_it_and_keeps_the_rest(
        memory in memory(),
        sequence in 1..20u64,
    ) {
        let sequence = Sequence::from_stored(sequence as i64);
        let mut forgotten = memory.clone();
        let changed = forget_in_memory(&mut forgotten, sequence);
        prop_assert_eq!(changed, forgotten != memory);
        let cites = |sources: &[Sequence]| sources.contains(&sequence);
        prop_assert!(every_item(&forgotten).iter().all(|i| !cites(&i.source_sequences)));
        prop_assert!(forgotten.glossary.iter().all(|e| !cites(&e.source_sequences)));
        let kept: Vec<&str> = every_item(&memory)
            .into_iter()
            .filter(|i| !cites(&i.source_sequences))
            .map(|i| i.id.as_str())
            .collect();
        let ids: Vec<&str> = every_item(&forgotten).into_iter().map(|i| i.id.as_str()).collect();
        prop_assert_eq!(ids, kept);
        if memory.through_sequence >= sequence {
            prop_assert!(forgotten.summary.is_empty());
        }
    }
}
