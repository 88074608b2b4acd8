//! The replica's cache of decoded messages (docs/design.md, "Database work per call"): whatever
//! one replica changes, the other never serves a stale message from its cache. On PostgreSQL
//! two replicas share one database, each with its own cache, warmed before the change; on the
//! in-memory store both handles reach the one server.

use std::time::{Duration, SystemTime};

use ctxd::proto;
use tonic::{Code, transport::Channel};

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, append, assistant, fresh_database, spawn_on, user},
};

type Client = proto::context_service_client::ContextServiceClient<Channel>;

contract_tests!(
    a_redaction_on_one_replica_is_never_served_from_another_replicas_cache,
    a_rewind_on_one_replica_is_never_served_from_another_replicas_cache,
    a_deleted_conversation_is_never_served_from_another_replicas_cache,
    a_fork_into_a_reused_id_is_never_served_from_another_replicas_cache,
    a_conversation_the_sweeper_deleted_is_never_served_from_another_replicas_cache,
    after_a_change_a_warm_replica_packs_what_a_cold_one_packs_as_the_chat_grows,
);

/// Two replicas (`a`, `b`): on PostgreSQL two servers on one database, each with its own
/// cache; in memory one server. The sweeper runs every 100 ms.
async fn replicas(kind: StoreKind) -> (Vec<TestApp>, Client, Client, Option<String>) {
    let flags = ["--retention-sweep-interval-ms", "100"];
    let url = match kind {
        StoreKind::InMemory => None,
        StoreKind::Postgres => Some(fresh_database().await),
    };
    let apps = match &url {
        None => vec![spawn_on(None, &flags).await],
        Some(url) => vec![
            spawn_on(Some(url.clone()), &flags).await,
            spawn_on(Some(url.clone()), &flags).await,
        ],
    };
    let (a, b) = (apps[0].client.clone(), apps[apps.len() - 1].client.clone());
    (apps, a, b, url)
}

/// A chat of `turns` exchanges; turn `n`'s user message says `said`.
async fn chat(client: &mut Client, conversation: &str, turns: usize, said: &str) {
    let messages: Vec<proto::Message> = (0..turns)
        .flat_map(|n| {
            [
                user(&format!("{said} {n}: what about the ledger partition {n}?")),
                assistant(&format!("Partition {n} is consistent.")),
            ]
        })
        .collect();
    for chunk in messages.chunks(50) {
        client
            .append_message(append(conversation, chunk.to_vec()))
            .await
            .unwrap();
    }
}

/// The whole pack's rendering (the budget holds every message).
async fn pack(client: &mut Client, conversation: &str) -> Result<String, tonic::Status> {
    pack_within(client, conversation, 200_000).await
}

/// The rendering of a pack of at most `max_tokens`.
async fn pack_within(
    client: &mut Client,
    conversation: &str,
    max_tokens: u32,
) -> Result<String, tonic::Status> {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens,
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok(client.build_context(request).await?.into_inner().rendered)
}

/// Builds packs on both replicas until both caches hold the conversation, growing it between
/// calls as a chat does (so later calls read only what is new).
async fn warm(a: &mut Client, b: &mut Client, conversation: &str) {
    for n in 0..3 {
        pack(a, conversation).await.unwrap();
        pack(b, conversation).await.unwrap();
        a.append_message(append(
            conversation,
            vec![user(&format!("and one more thing {n}"))],
        ))
        .await
        .unwrap();
    }
}

async fn a_redaction_on_one_replica_is_never_served_from_another_replicas_cache(kind: StoreKind) {
    let (_apps, mut a, mut b, _) = replicas(kind).await;
    chat(&mut a, "c", 40, "the card number is 4111-1111").await;
    warm(&mut a, &mut b, "c").await;
    assert!(pack(&mut a, "c").await.unwrap().contains("4111-1111 7:"));
    // Redact one message on b, then another after a has seen the first.
    b.redact_message(proto::RedactMessageRequest {
        conversation_id: "c".into(),
        sequence: 15,
    })
    .await
    .unwrap();
    for client in [&mut a, &mut b] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(!rendered.contains("4111-1111 7:"), "redacted text served");
        assert!(rendered.contains("4111-1111 8:"));
    }
    chat(&mut b, "c", 1, "later").await;
    a.redact_message(proto::RedactMessageRequest {
        conversation_id: "c".into(),
        sequence: 17,
    })
    .await
    .unwrap();
    for client in [&mut b, &mut a] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(!rendered.contains("4111-1111 7:") && !rendered.contains("4111-1111 8:"));
        assert!(rendered.contains("later 0:"));
    }
}

async fn a_rewind_on_one_replica_is_never_served_from_another_replicas_cache(kind: StoreKind) {
    let (_apps, mut a, mut b, _) = replicas(kind).await;
    chat(&mut a, "c", 40, "first draft").await;
    warm(&mut a, &mut b, "c").await;
    b.rewind_conversation(proto::RewindConversationRequest {
        conversation_id: "c".into(),
        after_sequence: 60,
        expected_last_sequence: None,
    })
    .await
    .unwrap();
    // The same sequences again, with other words.
    chat(&mut b, "c", 12, "second draft").await;
    for client in [&mut a, &mut b] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(rendered.contains("first draft 29:") && !rendered.contains("first draft 30:"));
        assert!(rendered.contains("second draft 11:"));
        assert!(!rendered.contains("one more thing"), "rewound messages served");
    }
}

async fn a_deleted_conversation_is_never_served_from_another_replicas_cache(kind: StoreKind) {
    let (_apps, mut a, mut b, _) = replicas(kind).await;
    chat(&mut a, "c", 40, "before").await;
    warm(&mut a, &mut b, "c").await;
    b.delete_conversation(proto::DeleteConversationRequest {
        conversation_id: "c".into(),
    })
    .await
    .unwrap();
    assert_eq!(pack(&mut a, "c").await.unwrap_err().code(), Code::NotFound);
    // The id again, as long as before and longer, with other words.
    chat(&mut b, "c", 43, "after").await;
    for client in [&mut a, &mut b] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(!rendered.contains("before") && !rendered.contains("one more thing"));
        assert!(rendered.contains("after 0:") && rendered.contains("after 42:"));
    }
}

async fn a_fork_into_a_reused_id_is_never_served_from_another_replicas_cache(kind: StoreKind) {
    let (_apps, mut a, mut b, _) = replicas(kind).await;
    chat(&mut a, "source", 60, "source").await;
    chat(&mut a, "c", 40, "stale").await;
    warm(&mut a, &mut b, "c").await;
    b.delete_conversation(proto::DeleteConversationRequest {
        conversation_id: "c".into(),
    })
    .await
    .unwrap();
    b.fork_conversation(proto::ForkConversationRequest {
        conversation_id: "source".into(),
        // Longer than the deleted conversation was: only the version tells them apart.
        through_sequence: 100,
        new_conversation_id: "c".into(),
    })
    .await
    .unwrap();
    for client in [&mut a, &mut b] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(!rendered.contains("stale"), "the deleted conversation served");
        assert!(rendered.contains("source 49:") && !rendered.contains("source 50:"));
    }
}

async fn a_conversation_the_sweeper_deleted_is_never_served_from_another_replicas_cache(kind: StoreKind) {
    let (_apps, mut a, mut b, _) = replicas(kind).await;
    chat(&mut a, "c", 40, "expiring").await;
    warm(&mut a, &mut b, "c").await;
    let expire = SystemTime::now() + Duration::from_millis(300);
    let update = proto::UpdateConversationRequest {
        conversation: Some(proto::Conversation {
            conversation_id: "c".into(),
            expire_time: Some(expire.into()),
            ..Default::default()
        }),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["expire_time".into()],
        }),
        ..Default::default()
    };
    b.update_conversation(update).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match pack(&mut a, "c").await {
            Err(status) if status.code() == Code::NotFound => break,
            Ok(rendered) => assert!(rendered.contains("expiring 0:")),
            Err(status) => panic!("{status:?}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "not swept");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    chat(&mut b, "c", 45, "renewed").await;
    for client in [&mut a, &mut b] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(!rendered.contains("expiring"), "the swept conversation served");
        assert!(rendered.contains("renewed 44:"));
    }
}

/// After a redaction and a rewind elsewhere, the chat grows by more than a first page between
/// calls (a 3,000-token budget reads 125 messages first, and the pack needs more): the warm
/// replica's packs equal those of a replica that never cached the conversation.
async fn after_a_change_a_warm_replica_packs_what_a_cold_one_packs_as_the_chat_grows(kind: StoreKind) {
    let (_apps, mut a, mut b, url) = replicas(kind).await;
    chat(&mut a, "c", 40, "before").await;
    warm(&mut a, &mut b, "c").await;
    b.redact_message(proto::RedactMessageRequest {
        conversation_id: "c".into(),
        sequence: 3,
    })
    .await
    .unwrap();
    pack_within(&mut a, "c", 3_000).await.unwrap();
    for round in 0..3 {
        chat(&mut b, "c", 80, &format!("round {round}")).await;
        if round == 1 {
            b.rewind_conversation(proto::RewindConversationRequest {
                conversation_id: "c".into(),
                after_sequence: 200,
                expected_last_sequence: None,
            })
            .await
            .unwrap();
            chat(&mut b, "c", 70, "rewritten").await;
        }
        // A replica started now has nothing cached (in memory: the same server).
        let cold = match &url {
            None => None,
            Some(url) => Some(spawn_on(Some(url.clone()), &[]).await),
        };
        let mut cold_client = cold.as_ref().map_or(b.clone(), |app| app.client.clone());
        for max_tokens in [3_000, 200_000] {
            let warm = pack_within(&mut a, "c", max_tokens).await.unwrap();
            let fresh = pack_within(&mut cold_client, "c", max_tokens).await.unwrap();
            assert_eq!(warm, fresh, "round {round}, budget {max_tokens}");
        }
    }
}

/// A deleted id created again in the same microsecond, with as many redactions and rewinds
/// (zero) and a longer log: only the row's incarnation tells the two apart, and the replica
/// that cached the first one never serves it for the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_created_again_in_the_same_microsecond_is_another_version() {
    let (_apps, mut a, mut b, url) = replicas(StoreKind::Postgres).await;
    let url = url.expect("a database");
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    chat(&mut a, "c", 40, "first life").await;
    warm(&mut a, &mut b, "c").await;
    let created: String = db
        .query_one(
            "SELECT created_at::text FROM conversations WHERE conversation_id = 'c'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    b.delete_conversation(proto::DeleteConversationRequest {
        conversation_id: "c".into(),
    })
    .await
    .unwrap();
    chat(&mut b, "c", 45, "second life").await;
    db.execute(
        "UPDATE conversations SET created_at = $1::text::timestamptz WHERE conversation_id = 'c'",
        &[&created],
    )
    .await
    .unwrap();
    for client in [&mut a, &mut b] {
        let rendered = pack(client, "c").await.unwrap();
        assert!(
            !rendered.contains("first life"),
            "the deleted conversation served"
        );
        assert!(rendered.contains("second life 44:"));
    }
}
