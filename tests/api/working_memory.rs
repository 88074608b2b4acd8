//! Working memory: extraction with provenance, caller updates with optimistic concurrency,
//! the prepare path, and the memory section of BuildContext. On both stores.

use ctxd::proto::{self, ContextSource};
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, spawn_app, user},
};

contract_tests!(
    refresh_extracts_facts_with_their_sources,
    updates_merge_with_optimistic_concurrency,
    prepare_returns_the_extraction_request_and_stores_nothing,
    build_context_includes_the_working_memory,
    delete_erases_summary_and_memory,
);

fn get(conversation: &str, refresh: bool, prepare: bool) -> proto::GetWorkingMemoryRequest {
    proto::GetWorkingMemoryRequest {
        conversation_id: conversation.into(),
        refresh,
        prepare,
    }
}

async fn memory(app: &TestApp, request: proto::GetWorkingMemoryRequest) -> proto::GetWorkingMemoryResponse {
    app.client
        .clone()
        .get_working_memory(request)
        .await
        .expect("get memory")
        .into_inner()
}

async fn facts(app: &TestApp, conversation: &str) {
    app.append_ok(
        conversation,
        vec![
            user("Our goal is to launch the billing service by March."),
            user("We decided to use PostgreSQL 15. The API must support idempotency keys."),
            user("SLA means service level agreement. Which region should we use?"),
        ],
    )
    .await;
}

async fn refresh_extracts_facts_with_their_sources(kind: StoreKind) {
    let app = spawn_app(kind).await;
    facts(&app, "m").await;
    let empty = memory(&app, get("m", false, false)).await.memory.unwrap();
    assert_eq!((empty.version, empty.goals.len()), (0, 0));
    let refreshed = memory(&app, get("m", true, false)).await.memory.unwrap();
    assert_eq!(refreshed.version, 1);
    assert_eq!(refreshed.through_sequence, 3);
    assert_eq!(refreshed.goals[0].source_sequences, [1]);
    assert!(refreshed.decisions[0].text.contains("PostgreSQL 15"));
    assert_eq!(refreshed.requirements[0].source_sequences, [2]);
    assert_eq!(refreshed.glossary[0].term, "SLA");
    assert_eq!(refreshed.open_questions[0].text, "Which region should we use?");
    // Nothing new: no new version.
    assert_eq!(
        memory(&app, get("m", true, false)).await.memory.unwrap().version,
        1
    );
    let unknown = app
        .client
        .clone()
        .get_working_memory(get("nope", true, false))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

async fn updates_merge_with_optimistic_concurrency(kind: StoreKind) {
    let app = spawn_app(kind).await;
    facts(&app, "u").await;
    let current = memory(&app, get("u", true, false)).await.memory.unwrap();
    let update = |expected: Option<u64>| proto::UpdateWorkingMemoryRequest {
        conversation_id: "u".into(),
        memory: Some(proto::WorkingMemory {
            decisions: vec![proto::MemoryItem {
                text: "Use PostgreSQL 16 instead.".into(),
                source_sequences: vec![3],
                ..Default::default()
            }],
            stakeholders: vec![proto::MemoryItem {
                text: "Dana (finance) owns billing.".into(),
                source_sequences: vec![2],
                ..Default::default()
            }],
            through_sequence: 3,
            ..Default::default()
        }),
        expected_version: expected,
        expected_log_changes: None,
    };
    let merged = app
        .client
        .clone()
        .update_working_memory(update(Some(current.version)))
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(merged.version, current.version + 1);
    assert_eq!(merged.decisions.len(), 2, "merged, nothing lost");
    assert_eq!(merged.stakeholders[0].text, "Dana (finance) owns billing.");
    let status = app
        .client
        .clone()
        .update_working_memory(update(Some(current.version)))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Aborted);
    // Superseding an item by id keeps it, marked.
    let supersede = proto::UpdateWorkingMemoryRequest {
        conversation_id: "u".into(),
        memory: Some(proto::WorkingMemory {
            decisions: vec![proto::MemoryItem {
                id: merged.decisions[0].id.clone(),
                text: merged.decisions[0].text.clone(),
                superseded_by: merged.decisions[1].id.clone(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        expected_version: Some(merged.version),
        expected_log_changes: None,
    };
    let after = app
        .client
        .clone()
        .update_working_memory(supersede)
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    assert_eq!(after.decisions[0].superseded_by, merged.decisions[1].id);
    let beyond = proto::UpdateWorkingMemoryRequest {
        conversation_id: "u".into(),
        memory: Some(proto::WorkingMemory {
            through_sequence: 99,
            ..Default::default()
        }),
        expected_version: None,
        expected_log_changes: None,
    };
    let status = app
        .client
        .clone()
        .update_working_memory(beyond)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
}

async fn prepare_returns_the_extraction_request_and_stores_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    facts(&app, "p").await;
    let response = memory(&app, get("p", false, true)).await;
    let prepared = response.prepared.unwrap();
    assert_eq!(
        (prepared.base_through_sequence, prepared.through_sequence),
        (0, 3)
    );
    assert!(prepared.rendered.contains("source_sequences") && prepared.rendered.contains("[#2 user]"));
    // The schema comes as a response_format to send as it is, not only inside the instructions.
    let format: serde_json::Value = serde_json::from_str(&prepared.response_format).unwrap();
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    assert!(format["json_schema"]["schema"]["properties"]["decisions"].is_object());
    assert!(prepared.max_output_tokens > 0);
    assert_eq!(response.memory.unwrap().version, 0);
    assert_eq!(
        memory(&app, get("p", false, false)).await.memory.unwrap().version,
        0
    );
}

async fn build_context_includes_the_working_memory(kind: StoreKind) {
    let app = spawn_app(kind).await;
    facts(&app, "b").await;
    memory(&app, get("b", true, false)).await;
    let request = |omit| proto::BuildContextRequest {
        conversation_id: "b".into(),
        budget: Some(proto::Budget {
            max_tokens: 10_000,
            ..Default::default()
        }),
        omit_working_memory: omit,
        ..Default::default()
    };
    let pack = app
        .client
        .clone()
        .build_context(request(false))
        .await
        .unwrap()
        .into_inner();
    let section = pack
        .messages
        .iter()
        .find(|m| m.source() == ContextSource::WorkingMemory)
        .unwrap();
    assert!(
        section.content.contains("Decisions:") && section.content.contains("[#2]"),
        "{}",
        section.content
    );
    assert!(pack.stats.unwrap().working_memory_tokens > 0);
    let without = app
        .client
        .clone()
        .build_context(request(true))
        .await
        .unwrap()
        .into_inner();
    assert!(
        without
            .messages
            .iter()
            .all(|m| m.source() != ContextSource::WorkingMemory)
    );
}

async fn delete_erases_summary_and_memory(kind: StoreKind) {
    let app = spawn_app(kind).await;
    facts(&app, "d").await;
    memory(&app, get("d", true, false)).await;
    let summarize = proto::SummarizeRequest {
        conversation_id: "d".into(),
        ..Default::default()
    };
    assert!(
        app.client
            .clone()
            .summarize(summarize.clone())
            .await
            .unwrap()
            .into_inner()
            .changed
    );
    app.client
        .clone()
        .delete_conversation(proto::DeleteConversationRequest {
            conversation_id: "d".into(),
        })
        .await
        .unwrap();
    facts(&app, "d").await;
    assert_eq!(
        memory(&app, get("d", false, false)).await.memory.unwrap().version,
        0
    );
    let again = app
        .client
        .clone()
        .summarize(summarize)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.summary.unwrap().version, 1, "summary history starts over");
}
