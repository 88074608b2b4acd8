//! The `Store` contract, at the trait: every implementation (the in-memory store and
//! PostgreSQL) must answer these the same way. A new store joins by adding itself to
//! [`store_of`].

use std::{sync::Arc, time::Duration};

use ctxd::{
    domain::{
        ConversationId, CountedBatch, IdempotencyKey, Message, ParsedBatch, Role, Sequence, TenantId,
        ToolCall,
        context::{PageRequest, TokenCounts, anchor::LogEnd},
        conversation::{ConversationPatch, IfMissing},
        tool_protocol::CallField,
        working_memory::{Category, WorkingMemory},
    },
    store::{
        self, EmbeddingBatch, LogVersion, MemoryBase, MessageVector, NewSummary, OpenedContext,
        PostgresOptions, Store, StoreError,
    },
};

use crate::{
    contract_tests,
    helpers::{StoreKind, fresh_database},
};

contract_tests!(
    store_appends_gapless_sequences_and_reads_them_back,
    store_reads_of_an_unknown_conversation_are_not_found,
    store_tail_and_open_calls_of_an_unknown_conversation_are_empty,
    store_keeps_tenants_apart,
    store_replays_an_idempotent_append_and_refuses_a_reused_key,
    store_refuses_a_stale_expected_last_sequence_and_stores_nothing,
    store_tracks_open_calls_and_refuses_a_result_without_its_call,
    store_tail_pages_newest_first_within_bounds_without_excluded_messages,
    store_open_context_carries_pinned_messages_summary_and_memory,
    store_reads_stop_at_their_byte_limit,
    store_places_turn_anchors_where_the_log_says,
    store_summary_watermark_moves_only_forward_by_compare_and_set,
    store_memory_versions_are_compare_and_set,
    store_summarizer_lease_is_exclusive_until_released,
    store_retention_lease_is_exclusive_until_released,
    store_refuses_derived_data_read_before_a_redaction,
    store_refuses_a_first_memory_read_before_a_redaction,
    store_refuses_appends_past_expire_time,
    store_takes_a_summary_when_only_other_messages_were_redacted,
    store_rewinds_the_tail_and_what_was_derived_from_it,
    store_forks_keep_the_sources_log_positions,
    store_embeddings_move_the_watermark_only_by_compare_and_set,
);

/// A fresh, empty store of `kind`, migrated.
pub(crate) async fn store_of(kind: StoreKind) -> Arc<dyn Store> {
    match kind {
        StoreKind::InMemory => {
            let store = store::open(None).expect("store opens");
            store.migrate().await.expect("store migrates");
            store
        }
        StoreKind::Postgres => postgres_store(fresh_database().await).await,
    }
}

/// A PostgreSQL store on `url`, migrated.
pub(crate) async fn postgres_store(url: String) -> Arc<dyn Store> {
    let options = PostgresOptions {
        url,
        pool_size: 4,
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(30),
        message_cache_bytes: 64 << 20,
        group_commit: true,
    };
    let store = store::open(Some(&options)).expect("store opens");
    store.migrate().await.expect("store migrates");
    store
}

pub(crate) fn tenant(name: &str) -> TenantId {
    TenantId::parse(name).unwrap()
}

fn conversation(name: &str) -> ConversationId {
    ConversationId::parse(name).unwrap()
}

fn seq(n: u64) -> Sequence {
    Sequence::parse(n).unwrap()
}

pub(crate) fn text(role: Role, content: &str) -> Message {
    Message::text(role, content.into())
}

fn calling(ids: &[&str]) -> Message {
    Message {
        tool_calls: ids.iter().map(|id| ToolCall::new(*id, "search", "{}")).collect(),
        ..text(Role::Assistant, "")
    }
}

fn result(id: &str) -> Message {
    Message {
        tool_call_id: Some(id.into()),
        ..text(Role::Tool, "done")
    }
}

pub(crate) fn batch(id: &str, messages: Vec<Message>) -> CountedBatch {
    counted(ParsedBatch::new(conversation(id), messages))
}

fn counted(batch: ParsedBatch) -> CountedBatch {
    batch
        .count(
            Default::default(),
            ctxd::domain::token_counts::Tokenizers::NONE.with(ctxd::domain::tokenize::Tokenizer::O200kBase),
            None,
            &|| false,
        )
        .expect("counted")
}

/// A batch of `messages` under the idempotency key `key`.
fn keyed_batch(id: &str, key: &str, messages: Vec<Message>) -> CountedBatch {
    counted(ParsedBatch {
        idempotency_key: IdempotencyKey::parse_optional(key.into()).unwrap(),
        ..ParsedBatch::new(conversation(id), messages)
    })
}

async fn store_appends_gapless_sequences_and_reads_them_back(kind: StoreKind) {
    let store = store_of(kind).await;
    let t = tenant("t");
    let first = store
        .append_messages(
            &t,
            &batch("c", vec![text(Role::User, "a"), text(Role::Assistant, "b")]),
            None,
        )
        .await
        .unwrap();
    assert_eq!((first.first_sequence, first.last_sequence), (seq(1), seq(2)));
    let second = store
        .append_messages(&t, &batch("c", vec![text(Role::User, "c")]), None)
        .await
        .unwrap();
    assert_eq!(
        (second.first_sequence, second.conversation_last_sequence),
        (seq(3), seq(3))
    );
    let page = store
        .list_messages(&t, &conversation("c"), seq(1), 1, usize::MAX)
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 1);
    assert_eq!(page.messages[0].sequence, seq(2));
    assert_eq!(page.messages[0].message.content, "b");
    assert!(page.has_more);
    let rest = store
        .list_messages(&t, &conversation("c"), seq(2), 10, usize::MAX)
        .await
        .unwrap();
    assert_eq!(rest.messages.len(), 1);
    assert!(!rest.has_more);
    assert_eq!(
        store
            .delete_conversation(&t, &conversation("c"), None)
            .await
            .unwrap(),
        3
    );
}

async fn store_reads_of_an_unknown_conversation_are_not_found(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("missing"));
    let not_found = |r: Result<(), StoreError>| matches!(r, Err(StoreError::NotFound));
    assert!(not_found(
        store
            .list_messages(&t, &c, Sequence::ZERO, 10, usize::MAX)
            .await
            .map(drop)
    ));
    assert!(not_found(
        store.open_context(&t, &c, 10, usize::MAX).await.map(drop)
    ));
    assert!(not_found(store.summary_state(&t, &c, usize::MAX).await.map(drop)));
    assert!(not_found(
        store.memory_state(&t, &c, Some(usize::MAX)).await.map(drop)
    ));
    assert!(not_found(store.delete_conversation(&t, &c, None).await.map(drop)));
    let summary = NewSummary {
        text: "s".into(),
        through_sequence: seq(1),
        summarizer: "provided".into(),
        redactions: 0,
        tombstones: 0,
        rewinds: 0,
        prepared_log_changes: None,
    };
    assert!(not_found(
        store
            .store_summary(&t, &c, Sequence::ZERO, summary, None)
            .await
            .map(drop)
    ));
    let memory = WorkingMemory::default();
    assert!(not_found(
        store
            .store_memory(&t, &c, MemoryBase::default(), &memory, None)
            .await
            .map(drop)
    ));
}

async fn store_tail_and_open_calls_of_an_unknown_conversation_are_empty(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("missing"));
    let page = PageRequest {
        before: seq(100),
        floor: Sequence::ZERO,
        limit: 10,
        max_bytes: usize::MAX,
    };
    let version = LogVersion::default();
    assert!(
        store
            .tail(&t, &c, version, page)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    assert!(
        store
            .open_calls(&t, &c, &["call-1".into()])
            .await
            .unwrap()
            .is_empty()
    );
}

async fn store_keeps_tenants_apart(kind: StoreKind) {
    let store = store_of(kind).await;
    store
        .append_messages(
            &tenant("a"),
            &batch("shared", vec![text(Role::User, "mine")]),
            None,
        )
        .await
        .unwrap();
    let other = tenant("b");
    let c = conversation("shared");
    assert!(matches!(
        store
            .list_messages(&other, &c, Sequence::ZERO, 10, usize::MAX)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.delete_conversation(&other, &c, None).await,
        Err(StoreError::NotFound)
    ));
    let outcome = store
        .append_messages(&other, &batch("shared", vec![text(Role::User, "theirs")]), None)
        .await
        .unwrap();
    assert_eq!(
        outcome.first_sequence,
        seq(1),
        "each tenant's conversation has its own log"
    );
}

async fn store_replays_an_idempotent_append_and_refuses_a_reused_key(kind: StoreKind) {
    let store = store_of(kind).await;
    let t = tenant("t");
    let keyed = |content: &str| keyed_batch("c", "key-1", vec![text(Role::User, content)]);
    let first = store.append_messages(&t, &keyed("hello"), None).await.unwrap();
    assert!(!first.replayed);
    store
        .append_messages(&t, &batch("c", vec![text(Role::Assistant, "hi")]), None)
        .await
        .unwrap();
    let replay = store.append_messages(&t, &keyed("hello"), None).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(
        (
            replay.first_sequence,
            replay.last_sequence,
            replay.conversation_last_sequence
        ),
        (
            first.first_sequence,
            first.last_sequence,
            first.conversation_last_sequence
        )
    );
    assert!(matches!(
        store.append_messages(&t, &keyed("different"), None).await,
        Err(StoreError::IdempotencyKeyReused)
    ));
    let log = store
        .list_messages(&t, &conversation("c"), Sequence::ZERO, 10, usize::MAX)
        .await
        .unwrap();
    assert_eq!(log.messages.len(), 2, "replays and refusals store nothing");
}

async fn store_refuses_a_stale_expected_last_sequence_and_stores_nothing(kind: StoreKind) {
    let store = store_of(kind).await;
    let t = tenant("t");
    store
        .append_messages(&t, &batch("c", vec![text(Role::User, "a")]), None)
        .await
        .unwrap();
    let guarded = CountedBatch {
        expected_last_sequence: Some(Sequence::ZERO),
        ..batch("c", vec![text(Role::User, "b")])
    };
    match store.append_messages(&t, &guarded, None).await {
        Err(StoreError::SequenceMismatch { current }) => assert_eq!(current, seq(1)),
        other => panic!("expected SequenceMismatch, got {other:?}"),
    }
    let next = store
        .append_messages(&t, &batch("c", vec![text(Role::User, "c")]), None)
        .await
        .unwrap();
    assert_eq!(next.first_sequence, seq(2), "the refused append left no gap");
}

async fn store_tracks_open_calls_and_refuses_a_result_without_its_call(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    store
        .append_messages(
            &t,
            &batch("c", vec![text(Role::User, "go"), calling(&["x", "y"])]),
            None,
        )
        .await
        .unwrap();
    let open = store
        .open_calls(&t, &c, &["x".into(), "y".into(), "z".into()])
        .await
        .unwrap();
    assert_eq!(open.len(), 2);
    assert_eq!(open["x"], seq(2));
    // Asked for one call, the store names its open siblings too: pending results must
    // complete the group.
    let siblings = store.open_calls(&t, &c, &["y".into()]).await.unwrap();
    assert_eq!(siblings, open);
    store
        .append_messages(&t, &batch("c", vec![result("x")]), None)
        .await
        .unwrap();
    let open = store.open_calls(&t, &c, &["x".into(), "y".into()]).await.unwrap();
    assert_eq!(open.keys().collect::<Vec<_>>(), ["y"]);
    // Refusals name the message by its place in the batch and the field, typed.
    for bad in [result("x"), result("nope")] {
        match store.append_messages(&t, &batch("c", vec![bad]), None).await {
            Err(StoreError::ToolProtocol { violations }) => {
                assert_eq!(violations.len(), 1);
                assert_eq!(
                    (violations[0].message, violations[0].field),
                    (0, CallField::ToolCallId)
                );
            }
            other => panic!("expected ToolProtocol, got {other:?}"),
        }
    }
    match store
        .append_messages(&t, &batch("c", vec![calling(&["y"])]), None)
        .await
    {
        Err(StoreError::ToolProtocol { violations }) => {
            assert_eq!(
                (violations[0].message, violations[0].field),
                (0, CallField::ToolCall(0))
            );
        }
        other => panic!("expected ToolProtocol, got {other:?}"),
    }
    let log = store
        .list_messages(&t, &c, Sequence::ZERO, 10, usize::MAX)
        .await
        .unwrap();
    assert_eq!(log.messages.len(), 3);
    assert_eq!(log.messages[2].call_sequence, Some(seq(2)));
}

async fn store_tail_pages_newest_first_within_bounds_without_excluded_messages(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let hidden = Message {
        exclude_from_context: true,
        ..text(Role::Assistant, "ui only")
    };
    let messages = vec![
        text(Role::User, "1"),
        text(Role::Assistant, "2"),
        hidden,
        text(Role::User, "4"),
        text(Role::Assistant, "5"),
    ];
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    let page = PageRequest {
        before: seq(5),
        floor: seq(1),
        limit: 10,
        max_bytes: usize::MAX,
    };
    let version = store.open_context(&t, &c, 1, usize::MAX).await.unwrap().version;
    for _ in 0..2 {
        // Read twice: the second time from the PostgreSQL store's cache.
        let tail = store.tail(&t, &c, version, page).await.unwrap();
        let sequences: Vec<u64> = tail.messages.iter().map(|m| m.sequence.get()).collect();
        assert_eq!((sequences, tail.cut_by_size), (vec![4, 2], false));
    }
    let limited = store
        .tail(&t, &c, version, PageRequest { limit: 1, ..page })
        .await
        .unwrap()
        .messages;
    assert_eq!(limited[0].sequence, seq(4));
}

async fn store_open_context_carries_pinned_messages_summary_and_memory(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let opener = Message {
        pinned: true,
        ..text(Role::Assistant, "Welcome!")
    };
    let answer = Message {
        response_id: "resp-1".into(),
        ..text(Role::Assistant, "answer")
    };
    let messages = vec![opener, text(Role::User, "question"), answer];
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    let summary = NewSummary {
        text: "the user asked".into(),
        through_sequence: seq(2),
        summarizer: "provided".into(),
        redactions: 0,
        tombstones: 0,
        rewinds: 0,
        prepared_log_changes: None,
    };
    store
        .store_summary(&t, &c, Sequence::ZERO, summary, None)
        .await
        .unwrap();
    let memory = WorkingMemory {
        summary: "facts".into(),
        ..WorkingMemory::default()
    };
    store
        .store_memory(&t, &c, MemoryBase::default(), &memory, None)
        .await
        .unwrap();

    let OpenedContext { snapshot, newest, .. } = store.open_context(&t, &c, 2, usize::MAX).await.unwrap();
    let newest = newest.messages;
    assert_eq!(snapshot.last_sequence, seq(3));
    assert_eq!(snapshot.last_user_sequence, Some(seq(2)));
    assert_eq!(snapshot.last_response_id.as_deref(), Some("resp-1"));
    assert_eq!(
        snapshot.pinned.iter().map(|m| m.sequence).collect::<Vec<_>>(),
        [seq(1)]
    );
    let summary = snapshot.summary.expect("the summary");
    assert_eq!(
        (summary.text.as_str(), summary.through_sequence),
        ("the user asked", seq(2))
    );
    assert_eq!(snapshot.memory.expect("the memory").summary, "facts");
    assert_eq!(
        newest.iter().map(|m| m.sequence.get()).collect::<Vec<_>>(),
        [3, 2]
    );
}

async fn store_summary_watermark_moves_only_forward_by_compare_and_set(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let messages = (0..4).map(|i| text(Role::User, &i.to_string())).collect();
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    let summary = |through: u64| NewSummary {
        text: format!("through {through}"),
        through_sequence: seq(through),
        summarizer: "provided".into(),
        redactions: 0,
        tombstones: 0,
        rewinds: 0,
        prepared_log_changes: None,
    };
    let v1 = store
        .store_summary(&t, &c, Sequence::ZERO, summary(2), None)
        .await
        .unwrap();
    assert_eq!((v1.version, v1.through_sequence), (1, seq(2)));
    for (base, through) in [(0, 3), (2, 2), (2, 5)] {
        let base = Sequence::from_stored(base);
        match store.store_summary(&t, &c, base, summary(through), None).await {
            Err(StoreError::SummaryMoved { current }) => assert_eq!(current, seq(2)),
            other => panic!("expected SummaryMoved for {base}->{through}, got {other:?}"),
        }
    }
    let v2 = store
        .store_summary(&t, &c, seq(2), summary(4), None)
        .await
        .unwrap();
    assert_eq!(v2.version, 2);
    let state = store.summary_state(&t, &c, usize::MAX).await.unwrap();
    assert_eq!(state.watermark(), seq(4));
    assert!(state.messages.is_empty());
    assert_eq!(state.last_sequence, seq(4));
}

async fn store_memory_versions_are_compare_and_set(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    store
        .append_messages(
            &t,
            &batch("c", vec![text(Role::User, "a"), text(Role::User, "b")]),
            None,
        )
        .await
        .unwrap();
    let state = store.memory_state(&t, &c, Some(usize::MAX)).await.unwrap();
    assert_eq!((state.memory.version, state.messages.len()), (0, 2));
    let memory = WorkingMemory {
        summary: "one".into(),
        through_sequence: seq(1),
        ..WorkingMemory::default()
    };
    let v1 = store
        .store_memory(&t, &c, MemoryBase::default(), &memory, None)
        .await
        .unwrap();
    assert_eq!(v1.version, 1);
    match store
        .store_memory(&t, &c, MemoryBase::default(), &memory, None)
        .await
    {
        Err(StoreError::MemoryVersionMismatch { current }) => assert_eq!(current, 1),
        other => panic!("expected MemoryVersionMismatch, got {other:?}"),
    }
    let state = store.memory_state(&t, &c, Some(usize::MAX)).await.unwrap();
    assert_eq!((state.memory.version, state.memory.summary.as_str()), (1, "one"));
    assert_eq!(
        state.messages.iter().map(|m| m.sequence).collect::<Vec<_>>(),
        [seq(2)]
    );
    assert!(
        store
            .memory_state(&t, &c, None)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
}

async fn store_summarizer_lease_is_exclusive_until_released(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    assert!(
        store.try_summarizer_lease(&t, &c).await.unwrap().is_none(),
        "no lease on a conversation that does not exist"
    );
    for name in ["c", "other"] {
        let messages = vec![text(Role::User, "hello")];
        store
            .append_messages(&t, &batch(name, messages), None)
            .await
            .unwrap();
    }
    let held = store
        .try_summarizer_lease(&t, &c)
        .await
        .unwrap()
        .expect("a free lease");
    assert!(store.try_summarizer_lease(&t, &c).await.unwrap().is_none());
    let other = store
        .try_summarizer_lease(&t, &conversation("other"))
        .await
        .unwrap();
    assert!(other.is_some(), "leases are per conversation");
    held.release().await;
    let again = store.try_summarizer_lease(&t, &c).await.unwrap();
    assert!(again.is_some(), "a released lease can be taken again");
}

async fn store_retention_lease_is_exclusive_until_released(kind: StoreKind) {
    let store = store_of(kind).await;
    let held = store.try_retention_lease().await.unwrap().expect("a free lease");
    assert!(store.try_retention_lease().await.unwrap().is_none());
    held.release().await;
    let again = store.try_retention_lease().await.unwrap();
    assert!(again.is_some(), "a released lease can be taken again");
}

/// Every read that loads messages stops at its byte limit and says so, the same on both stores:
/// a ListMessages page holds what fits (the message that would pass the limit waits for the
/// next page), the other reads stop at the message that reaches it; a first one always comes.
async fn store_reads_stop_at_their_byte_limit(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    // Ten messages of about 10 KB each.
    let messages = (0..10)
        .map(|i| {
            text(
                if i % 2 == 0 { Role::User } else { Role::Assistant },
                &"x".repeat(10_000),
            )
        })
        .collect();
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    let limit = 25_000;

    let page = store
        .list_messages(&t, &c, Sequence::ZERO, 100, limit)
        .await
        .unwrap();
    assert_eq!(
        page.messages.len(),
        2,
        "10 KB, 20 KB: a list page leaves out the one that would pass 25 KB"
    );
    assert!(page.has_more);
    let tiny = store.list_messages(&t, &c, Sequence::ZERO, 100, 1).await.unwrap();
    assert_eq!(tiny.messages.len(), 1, "a first message always comes");
    assert!(tiny.has_more);
    let exact = tiny.messages[0].message.loaded_bytes() * 10;
    let whole = store
        .list_messages(&t, &c, Sequence::ZERO, 100, exact)
        .await
        .unwrap();
    assert_eq!(
        (whole.messages.len(), whole.has_more),
        (10, false),
        "exactly full"
    );
    let by_count = store
        .list_messages(&t, &c, Sequence::ZERO, 3, exact)
        .await
        .unwrap();
    assert_eq!((by_count.messages.len(), by_count.has_more), (3, true));
    let all = store
        .list_messages(&t, &c, Sequence::ZERO, 100, usize::MAX)
        .await
        .unwrap();
    assert_eq!((all.messages.len(), all.has_more), (10, false));

    let opened = store.open_context(&t, &c, 100, limit).await.unwrap();
    let (newest, cut, version) = (opened.newest.messages, opened.newest.cut_by_size, opened.version);
    let sequences: Vec<u64> = newest.iter().map(|m| m.sequence.get()).collect();
    assert_eq!((sequences, cut), (vec![10, 9, 8], true));
    let page = PageRequest {
        before: seq(8),
        floor: Sequence::ZERO,
        limit: 100,
        max_bytes: limit,
    };
    let older = store.tail(&t, &c, version, page).await.unwrap();
    let (older, cut) = (older.messages, older.cut_by_size);
    let sequences: Vec<u64> = older.iter().map(|m| m.sequence.get()).collect();
    assert_eq!((sequences, cut), (vec![7, 6, 5], true));
    let rest = store
        .tail(
            &t,
            &c,
            version,
            PageRequest {
                before: seq(3),
                max_bytes: usize::MAX,
                ..page
            },
        )
        .await
        .unwrap();
    assert_eq!((rest.messages.len(), rest.cut_by_size), (2, false));

    let state = store.summary_state(&t, &c, limit).await.unwrap();
    assert_eq!((state.messages.len(), state.complete), (3, false));
    let state = store.memory_state(&t, &c, Some(limit)).await.unwrap();
    assert_eq!((state.messages.len(), state.complete), (3, false));
    let state = store.summary_state(&t, &c, usize::MAX).await.unwrap();
    assert_eq!((state.messages.len(), state.complete), (10, true));
}

/// Turn anchors are a property of the log (docs/design.md, "Cache-stable packs"): whatever the
/// batches and the append path (on PostgreSQL, the one statement for batches of up to 16
/// messages, keyed or not; the transaction for tool calls and longer batches; a group
/// commit's batch), each stored message carries the anchor that placing the whole log one
/// message at a time gives; the same on both stores.
async fn store_places_turn_anchors_where_the_log_says(kind: StoreKind) {
    let store = store_of(kind).await;
    let t = tenant("t");
    let mut excluded = text(Role::User, "a note for the UI only");
    excluded.exclude_from_context = true;
    let mut sent: Vec<Message> = Vec::new();
    for round in 0..12 {
        let long = "word ".repeat(40 * (round % 5) + 3);
        let plain = vec![
            text(Role::User, &format!("question {round}: {long}")),
            text(Role::Assistant, &long),
        ];
        let tools = vec![
            text(Role::User, &format!("run it {round}")),
            calling(&[&format!("call-{round}")]),
            result(&format!("call-{round}")),
            text(Role::Assistant, &long),
        ];
        let messages = match round % 3 {
            0 => plain,
            1 => tools,
            _ => vec![excluded.clone(), text(Role::User, &long)],
        };
        let batch = match round % 4 {
            3 => keyed_batch("c", &format!("key-{round}"), messages),
            _ => batch("c", messages),
        };
        sent.extend(batch.iter_messages().cloned());
        store.append_messages(&t, &batch, None).await.unwrap();
    }
    // One message at a time and small keyed batches (PostgreSQL's one-statement path).
    let singles = [
        batch("c", vec![text(Role::User, "a single question")]),
        keyed_batch(
            "c",
            "single-key",
            vec![text(Role::Assistant, &"a keyed reply ".repeat(30))],
        ),
        batch("c", vec![excluded.clone()]),
        keyed_batch(
            "c",
            "pair-key",
            vec![text(Role::User, "and then?"), text(Role::Assistant, "then this")],
        ),
    ];
    for batch in singles {
        sent.extend(batch.iter_messages().cloned());
        store.append_messages(&t, &batch, None).await.unwrap();
    }
    // Batches longer than one INSERT statement carries (16 rows on PostgreSQL), on the plain
    // path and on the one with tool calls.
    let long_plain: Vec<Message> = (0..37)
        .map(|i| match i % 2 {
            0 => text(
                Role::User,
                &format!("long batch question {i} {}", "word ".repeat(i)),
            ),
            _ => text(Role::Assistant, &format!("answer {i}")),
        })
        .collect();
    let mut long_tools = vec![text(Role::User, "run them all")];
    for i in 0..10 {
        long_tools.push(calling(&[&format!("long-{i}")]));
        long_tools.push(result(&format!("long-{i}")));
    }
    for messages in [long_plain, long_tools] {
        let batch = batch("c", messages);
        sent.extend(batch.iter_messages().cloned());
        let stored = store.append_messages(&t, &batch, None).await.unwrap();
        assert_eq!(
            stored.last_sequence.get() - stored.first_sequence.get() + 1,
            batch.messages.len() as u64
        );
    }
    let page = store
        .list_messages(&t, &conversation("c"), Sequence::ZERO, 1000, usize::MAX)
        .await
        .unwrap();
    assert_eq!(page.messages.len(), sent.len());
    let mut end = LogEnd::default();
    let mut anchors = 0;
    for (stored, message) in page.messages.iter().zip(&sent) {
        let expected = end
            .place(
                message,
                TokenCounts::of(message, ctxd::domain::token_counts::Tokenizers::ALL).approx,
            )
            .anchor(message);
        assert_eq!(stored.turn_anchor, expected, "sequence {}", stored.sequence);
        assert_eq!(
            stored.message.content, message.content,
            "sequence {}",
            stored.sequence
        );
        anchors += usize::from(expected.is_some());
    }
    assert_eq!(
        anchors, 34,
        "every user message that is not excluded starts a turn"
    );
}

/// Logs stored before turn anchors existed get, from migration 4, the positions their appends
/// would have given them, and appends continue from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_4_places_existing_logs_like_appends_do() {
    // A replay of one migration by hand on a single server: Citus refuses the file's several
    // commands in one statement here (the server's own migration of a Citus database is what
    // every other test on it starts with).
    if std::env::var_os("TEST_CITUS_URL").is_some() {
        return;
    }
    let url = fresh_database().await;
    let store = postgres_store(url.clone()).await;
    let t = tenant("t");
    let mut sent = Vec::new();
    for (name, round) in [("a", 0), ("b", 1), ("a", 2), ("b", 3), ("a", 4)] {
        let mut excluded = text(Role::User, "draft");
        excluded.exclude_from_context = true;
        let messages = vec![
            text(Role::User, &"question ".repeat(round * 7 + 1)),
            excluded,
            text(Role::Assistant, &"answer ".repeat(round * 11 + 2)),
        ];
        if name == "a" {
            sent.extend(messages.clone());
        }
        store
            .append_messages(&t, &batch(name, messages), None)
            .await
            .unwrap();
    }
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    // Back to the schema before migration 4, then apply it again as an upgrade would.
    client
        .batch_execute(
            "ALTER TABLE messages DROP COLUMN token_offset;
             ALTER TABLE messages DROP COLUMN previous_turn_offset;
             ALTER TABLE conversations DROP COLUMN token_offset;
             ALTER TABLE conversations DROP COLUMN turn_offset;
             ALTER TABLE conversations DROP COLUMN turn_offset_before;",
        )
        .await
        .unwrap();
    client
        .batch_execute(include_str!(
            "../../src/store/postgres/migrations/0004_log_positions.sql"
        ))
        .await
        .unwrap();
    let later = vec![text(Role::User, "and now?"), text(Role::Assistant, "done")];
    sent.extend(later.clone());
    store.append_messages(&t, &batch("a", later), None).await.unwrap();
    let page = store
        .list_messages(&t, &conversation("a"), Sequence::ZERO, 100, usize::MAX)
        .await
        .unwrap();
    let mut end = LogEnd::default();
    for (stored, message) in page.messages.iter().zip(&sent) {
        let expected = end
            .place(
                message,
                TokenCounts::of(message, ctxd::domain::token_counts::Tokenizers::ALL).approx,
            )
            .anchor(message);
        assert_eq!(stored.turn_anchor, expected, "sequence {}", stored.sequence);
    }
    assert_eq!(page.messages.len(), sent.len());
}

async fn store_refuses_derived_data_read_before_a_redaction(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let messages = (0..4).map(|i| text(Role::User, &format!("secret {i}"))).collect();
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    // A summarizer and an extractor read the log, then the message is redacted.
    let read = store.summary_state(&t, &c, usize::MAX).await.unwrap();
    let memory = store.memory_state(&t, &c, Some(usize::MAX)).await.unwrap();
    assert!(memory.memory.version <= 1);
    let extracted = WorkingMemory {
        through_sequence: seq(4),
        ..Default::default()
    };
    let stored = store
        .store_memory(&t, &c, memory.base(), &extracted, None)
        .await
        .unwrap();
    let stored_base = MemoryBase {
        version: stored.version,
        ..memory.base()
    };
    let redaction = store.redact_message(&t, &c, seq(2), None).await.unwrap();
    assert_eq!(redaction.message.message.content, "[redacted]");
    assert_eq!(
        redaction.memory_version,
        stored.version + 1,
        "a redaction is a new memory version"
    );
    // Both writes based on what they read before it are refused.
    let summary = NewSummary {
        text: "secret 1 was said".into(),
        through_sequence: seq(3),
        summarizer: "openai".into(),
        redactions: read.redactions,
        tombstones: 0,
        rewinds: 0,
        prepared_log_changes: None,
    };
    assert!(matches!(
        store
            .store_summary(&t, &c, read.watermark(), summary.clone(), None)
            .await,
        Err(StoreError::SummaryMoved { .. })
    ));
    assert!(matches!(
        store.store_memory(&t, &c, stored_base, &extracted, None).await,
        Err(StoreError::MemoryVersionMismatch { .. })
    ));
    // Read again, they go through.
    let fresh = store.summary_state(&t, &c, usize::MAX).await.unwrap();
    assert_eq!(fresh.redactions, read.redactions + 1);
    assert_eq!(fresh.messages[1].message.content, "[redacted]");
    let summary = NewSummary {
        redactions: fresh.redactions,
        ..summary
    };
    store
        .store_summary(&t, &c, fresh.watermark(), summary, None)
        .await
        .unwrap();
}

/// A conversation without working memory: an extraction that read the log before a redaction
/// cannot store the first memory after it (the redaction bumps no version to refuse it by).
async fn store_refuses_a_first_memory_read_before_a_redaction(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let messages = (0..3).map(|i| text(Role::User, &format!("secret {i}"))).collect();
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    let read = store.memory_state(&t, &c, Some(usize::MAX)).await.unwrap();
    assert_eq!(read.base(), MemoryBase::default());
    store.redact_message(&t, &c, seq(2), None).await.unwrap();
    let extracted = WorkingMemory {
        through_sequence: seq(3),
        ..Default::default()
    };
    assert!(matches!(
        store.store_memory(&t, &c, read.base(), &extracted, None).await,
        Err(StoreError::MemoryVersionMismatch { current: 0 })
    ));
    let fresh = store.memory_state(&t, &c, Some(usize::MAX)).await.unwrap();
    assert_eq!(
        fresh.base(),
        MemoryBase {
            version: 0,
            redactions: 1,
            rewinds: 0
        }
    );
    let stored = store
        .store_memory(&t, &c, fresh.base(), &extracted, None)
        .await
        .unwrap();
    assert_eq!(stored.version, 1);
}

/// Between its `expire_time` and the sweep, a conversation takes no more messages: nothing is
/// acknowledged only to be deleted; moving `expire_time` away takes it back.
async fn store_refuses_appends_past_expire_time(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let one = || batch("c", vec![text(Role::User, "hello")]);
    store.append_messages(&t, &one(), None).await.unwrap();
    let expire = |at: Option<std::time::SystemTime>| ConversationPatch {
        expire_time: Some(at),
        ..Default::default()
    };
    let past = std::time::SystemTime::now() - Duration::from_secs(1);
    store
        .update_conversation(&t, &c, &expire(Some(past)), IfMissing::NotFound, None)
        .await
        .unwrap();
    assert!(matches!(
        store.append_messages(&t, &one(), None).await,
        Err(StoreError::Expired)
    ));
    assert_eq!(
        store.get_conversation(&t, &c).await.unwrap().last_sequence,
        seq(1)
    );
    store
        .update_conversation(&t, &c, &expire(None), IfMissing::NotFound, None)
        .await
        .unwrap();
    let outcome = store.append_messages(&t, &one(), None).await.unwrap();
    assert_eq!(outcome.last_sequence, seq(2));
}

/// A redaction past a summary's new range does not refuse it; one inside does.
async fn store_takes_a_summary_when_only_other_messages_were_redacted(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let messages = (0..6).map(|i| text(Role::User, &format!("m{i}"))).collect();
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    let read = store.summary_state(&t, &c, usize::MAX).await.unwrap();
    let summary = |through: u64| NewSummary {
        text: "the first messages".into(),
        through_sequence: seq(through),
        summarizer: "provided".into(),
        redactions: read.redactions,
        tombstones: read.tombstones_through(seq(through)),
        rewinds: 0,
        prepared_log_changes: None,
    };
    store.redact_message(&t, &c, seq(5), None).await.unwrap();
    let stored = store
        .store_summary(&t, &c, read.watermark(), summary(3), None)
        .await
        .unwrap();
    assert_eq!(stored.through_sequence, seq(3));
    store.redact_message(&t, &c, seq(4), None).await.unwrap();
    assert!(matches!(
        store.store_summary(&t, &c, seq(3), summary(4), None).await,
        Err(StoreError::SummaryMoved { .. })
    ));
}

/// A rewind removes the later messages, the summaries covering them, the memory items citing
/// them and the idempotency records of their appends; a call they answered is open again; the
/// next append continues gaplessly; derived work read before it is not stored after it.
async fn store_rewinds_the_tail_and_what_was_derived_from_it(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let first = vec![text(Role::User, "plan it"), calling(&["c1"]), result("c1")];
    store.append_messages(&t, &batch("c", first), None).await.unwrap();
    let keyed = |content: &str| {
        keyed_batch(
            "c",
            "key-r",
            vec![text(Role::Assistant, content), text(Role::User, "next")],
        )
    };
    store.append_messages(&t, &keyed("done"), None).await.unwrap();
    let summary = |through: u64, read: &ctxd::store::SummaryState| NewSummary {
        text: format!("through {through}"),
        through_sequence: seq(through),
        summarizer: "provided".into(),
        redactions: read.redactions,
        tombstones: 0,
        rewinds: read.rewinds,
        prepared_log_changes: None,
    };
    let read = store.summary_state(&t, &c, usize::MAX).await.unwrap();
    store
        .store_summary(&t, &c, Sequence::ZERO, summary(1, &read), None)
        .await
        .unwrap();
    let mut memory = WorkingMemory {
        through_sequence: seq(5),
        ..Default::default()
    };
    memory.push_item(
        Category::Decisions,
        "d1".into(),
        "kept".into(),
        vec![seq(1)],
        None,
    );
    memory.push_item(
        Category::Decisions,
        "d2".into(),
        "gone".into(),
        vec![seq(4)],
        None,
    );
    store
        .store_memory(&t, &c, MemoryBase::default(), &memory, None)
        .await
        .unwrap();
    let in_flight = store.summary_state(&t, &c, usize::MAX).await.unwrap();

    assert!(matches!(
        store.rewind_conversation(&t, &c, seq(2), Some(seq(4)), None).await,
        Err(StoreError::SequenceMismatch { current }) if current == seq(5)
    ));
    assert!(matches!(
        store.rewind_conversation(&t, &c, seq(6), None, None).await,
        Err(StoreError::Invalid { .. })
    ));
    let rewind = store
        .rewind_conversation(&t, &c, seq(2), Some(seq(5)), None)
        .await
        .unwrap();
    assert_eq!(
        (
            rewind.messages_removed,
            rewind.last_sequence,
            rewind.summaries_removed
        ),
        (3, seq(2), 0)
    );
    assert_eq!(rewind.summary_through_sequence, seq(1));
    assert_eq!(rewind.memory_version, 2);
    let state = store.memory_state(&t, &c, None).await.unwrap();
    let texts: Vec<&str> = state.memory.decisions.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts, ["kept"]);
    assert_eq!(state.memory.through_sequence, seq(2));
    // A summary read before the rewind is refused; the call is open again; the key is free.
    assert!(matches!(
        store
            .store_summary(&t, &c, seq(1), summary(3, &in_flight), None)
            .await,
        Err(StoreError::SummaryMoved { .. })
    ));
    let answered = store
        .append_messages(&t, &batch("c", vec![result("c1")]), None)
        .await
        .unwrap();
    assert_eq!(answered.first_sequence, seq(3));
    let again = store.append_messages(&t, &keyed("redone"), None).await.unwrap();
    assert_eq!((again.first_sequence, again.replayed), (seq(4), false));
    let page = store
        .list_messages(&t, &c, Sequence::ZERO, 100, usize::MAX)
        .await
        .unwrap();
    let contents: Vec<&str> = page.messages.iter().map(|m| m.message.content.as_str()).collect();
    assert_eq!(contents[3], "redone");
    assert_eq!(page.messages.len(), 5);
    // Rewinding everything leaves an empty log that continues at 1.
    store
        .rewind_conversation(&t, &c, Sequence::ZERO, None, None)
        .await
        .unwrap();
    let restart = store
        .append_messages(&t, &batch("c", vec![text(Role::User, "again")]), None)
        .await
        .unwrap();
    assert_eq!(restart.first_sequence, seq(1));
}

async fn store_forks_keep_the_sources_log_positions(kind: StoreKind) {
    let store = store_of(kind).await;
    let (t, c) = (tenant("t"), conversation("c"));
    let long = "a long user turn ".repeat(40);
    let messages = vec![
        text(Role::User, &long),
        text(Role::Assistant, "short"),
        text(Role::User, &long),
        text(Role::Assistant, "short"),
        text(Role::User, "end"),
    ];
    store
        .append_messages(&t, &batch("c", messages), None)
        .await
        .unwrap();
    // A redaction changes token counts but not positions; forks continue from the source's.
    store.redact_message(&t, &c, seq(1), None).await.unwrap();
    for (through, fork) in [(4, "f4"), (5, "f5")] {
        store
            .fork_conversation(&t, &c, seq(through), &conversation(fork), None)
            .await
            .unwrap();
    }
    let next = |id: &str| batch(id, vec![text(Role::User, "next")]);
    store.append_messages(&t, &next("f4"), None).await.unwrap();
    store.append_messages(&t, &next("f5"), None).await.unwrap();
    let anchors = |id: &'static str| {
        let store = store.clone();
        let t = t.clone();
        async move {
            let page = store
                .list_messages(&t, &conversation(id), Sequence::ZERO, 100, usize::MAX)
                .await
                .unwrap();
            page.messages
                .iter()
                .map(|m| (m.sequence, m.turn_anchor))
                .collect::<Vec<_>>()
        }
    };
    let source = anchors("c").await;
    let f4 = anchors("f4").await;
    let f5 = anchors("f5").await;
    // The fork's copied messages, and the message appended after them, are placed as the
    // source placed (or would place) them.
    assert_eq!(f4[..4], source[..4]);
    assert_eq!(
        f4[4].1, source[4].1,
        "f4's appended turn sits where the source's 5th did"
    );
    assert_eq!(f5[..5], source[..5]);
    assert!(f5[5].1.is_some());
}

/// Server options in the database URL stay in force beside the statement timeout ctxd adds:
/// with `options='-c search_path=...'` the tables land in that schema and every call uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_url_options_reach_every_connection() {
    let url = fresh_database().await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.batch_execute("CREATE SCHEMA ctxd_app").await.unwrap();
    let store = postgres_store(format!("{url} options='-c search_path=ctxd_app'")).await;
    let t = tenant("t");
    store
        .append_messages(&t, &batch("a", vec![text(Role::User, "hello")]), None)
        .await
        .unwrap();

    let placed = client
        .query_one(
            "SELECT (SELECT count(*) FROM ctxd_app.messages),
                    to_regclass('public.messages') IS NULL",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(placed.get::<_, i64>(0), 1, "the message is in the URL's schema");
    assert!(placed.get::<_, bool>(1), "nothing was created in public");
}

/// The embedding backlog's compare-and-set (on PostgreSQL one statement, or two on Citus): a
/// batch read before a redaction stores nothing, a current one moves the watermark and stores
/// its vectors, and the same batch again stores nothing.
async fn store_embeddings_move_the_watermark_only_by_compare_and_set(kind: StoreKind) {
    use ctxd::domain::search::vectors::{PassageVector, centred_code};
    let store = store_of(kind).await;
    let t = tenant("t");
    let c = conversation("c");
    let messages = ["the zoo trip", "a birthday cake", "the lake house"];
    let sent = batch("c", messages.iter().map(|m| text(Role::User, m)).collect());
    store.append_messages(&t, &sent, None).await.unwrap();
    let vectors_of = |backlog: &store::EmbeddingBacklog| -> EmbeddingBatch {
        let vectors = backlog
            .messages
            .iter()
            .map(|m| {
                let mut values = vec![0.0f32; 384];
                values[m.sequence.get() as usize] = 1.0;
                MessageVector {
                    sequence: m.sequence,
                    chunk: 0,
                    vector: PassageVector::quantize(&values).unwrap(),
                    code: centred_code(&values, None).unwrap(),
                }
            })
            .collect();
        EmbeddingBatch {
            version: backlog.version,
            after: backlog.after,
            through: backlog.through,
            vectors,
            late: Vec::new(),
        }
    };
    let stale = store
        .embedding_backlog(&t, &c, 100, usize::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (stale.after, stale.through, stale.messages.len()),
        (seq(0), seq(3), 3)
    );
    store.redact_message(&t, &c, seq(2), None).await.unwrap();
    assert!(!store.store_embeddings(&t, &c, &vectors_of(&stale)).await.unwrap());
    let current = store
        .embedding_backlog(&t, &c, 100, usize::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((current.after, current.through), (seq(0), seq(3)));
    assert_eq!(
        current.messages.len(),
        2,
        "the redacted message is not searchable"
    );
    let batch = vectors_of(&current);
    assert!(store.store_embeddings(&t, &c, &batch).await.unwrap());
    let after = store
        .embedding_backlog(&t, &c, 100, usize::MAX)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((after.after, after.messages.len()), (seq(3), 0));
    assert!(!store.store_embeddings(&t, &c, &batch).await.unwrap());
}
