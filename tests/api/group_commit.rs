//! Group commit on PostgreSQL (issue 62): concurrent plain appends to different conversations
//! share transactions, and every promise of the single path holds. Each message's `xmin` (the
//! transaction that wrote it) shows which appends shared one. On Citus group commit is off,
//! and the same checks hold with one transaction per append.

use std::{collections::HashMap, sync::Arc, time::Duration};

use ctxd::{
    domain::{ConversationId, CountedBatch, IdempotencyKey, Message, ParsedBatch, Role, Sequence, TenantId},
    runtime::deadline::Deadline,
    store::{self, PostgresOptions, Store, StoreError},
};
use tokio::task::JoinSet;

use crate::helpers::fresh_database;

/// Far more than half the test store's pool (8): appends join batches only past half.
const CONVERSATIONS: usize = 32;
const ROUNDS: usize = 20;

/// Appends from 32 tasks at once: every log is gapless and in order, the messages carry the
/// log positions the same batches get appended one at a time, and (on PostgreSQL) appends
/// shared transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_share_transactions_and_land_as_if_alone() {
    let (store, db, t) = seeded().await;
    let mut tasks = JoinSet::new();
    for c in 0..CONVERSATIONS {
        let (store, t) = (store.clone(), t.clone());
        tasks.spawn(async move {
            for round in 0..ROUNDS {
                let batch = round_batch(&format!("c{c}"), c, round);
                store.append_messages(&t, &batch, None).await.unwrap();
            }
        });
    }
    tasks.join_all().await;
    // The same batches, one at a time, into twins: the single path's placement.
    for c in 0..CONVERSATIONS {
        let twin = format!("twin{c}");
        store
            .append_messages(&t, &plain(&twin, "hello"), None)
            .await
            .unwrap();
        for round in 0..ROUNDS {
            let batch = round_batch(&twin, c, round);
            store.append_messages(&t, &batch, None).await.unwrap();
        }
    }
    let rows = db
        .query(
            "SELECT conversation_id, sequence, content, token_offset, previous_turn_offset, xmin::text AS tx
             FROM messages WHERE tenant_id = $1 ORDER BY conversation_id, sequence",
            &[&t.as_str()],
        )
        .await
        .unwrap();
    let mut logs: HashMap<String, Vec<Stored>> = HashMap::new();
    let mut transactions = std::collections::HashSet::new();
    for row in &rows {
        let conversation: String = row.get("conversation_id");
        if conversation.starts_with('c') && row.get::<_, i64>("sequence") > 1 {
            transactions.insert(row.get::<_, String>("tx"));
        }
        logs.entry(conversation).or_default().push((
            row.get("sequence"),
            row.get("content"),
            row.get("token_offset"),
            row.get("previous_turn_offset"),
        ));
    }
    for c in 0..CONVERSATIONS {
        let log = &logs[&format!("c{c}")];
        let twin = &logs[&format!("twin{c}")];
        let sequences: Vec<i64> = log.iter().map(|m| m.0).collect();
        assert_eq!(
            sequences,
            (1..=log.len() as i64).collect::<Vec<_>>(),
            "c{c} gapless"
        );
        assert_eq!(log, twin, "c{c} is stored as the same batches appended alone");
    }
    let appends = CONVERSATIONS * ROUNDS;
    println!(
        "{} transactions for {appends} concurrent appends",
        transactions.len()
    );
    // On Citus each append is its own single-shard transaction (each worker counts its own
    // transaction ids, so they are not compared).
    if !on_citus(&db).await {
        assert!(
            transactions.len() < appends * 3 / 4,
            "{} transactions for {appends} concurrent appends: appends shared transactions",
            transactions.len()
        );
    }
}

/// A conversation whose row another session holds: its append waits alone, and the batches
/// around it go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conversation_locked_elsewhere_does_not_stall_the_batch() {
    let url = fresh_database().await;
    let store = postgres_store(&url).await;
    let mut holder = connect(&url).await;
    let t = tenant();
    seed(&store, &t).await;
    store
        .append_messages(&t, &plain("locked", "first"), None)
        .await
        .unwrap();
    let lock = holder.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM conversations WHERE tenant_id = $1 AND conversation_id = 'locked' FOR UPDATE",
        &[&t.as_str()],
    )
    .await
    .unwrap();
    let mut others = JoinSet::new();
    for c in 0..CONVERSATIONS {
        let (store, t) = (store.clone(), t.clone());
        others.spawn(async move {
            for round in 0..ROUNDS {
                let batch = plain(&format!("c{c}"), &format!("round {round}"));
                store.append_messages(&t, &batch, None).await.unwrap();
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let blocked = {
        let (store, t) = (store.clone(), t.clone());
        tokio::spawn(async move { store.append_messages(&t, &plain("locked", "second"), None).await })
    };
    tokio::time::timeout(Duration::from_secs(20), others.join_all())
        .await
        .expect("appends to other conversations go on while one is locked");
    assert!(
        !blocked.is_finished(),
        "the locked conversation's append waits for its lock"
    );
    lock.commit().await.unwrap();
    let outcome = blocked.await.unwrap().unwrap();
    assert_eq!(outcome.first_sequence, Sequence::from_stored(2));
}

/// Appends whose deadlines pass while batches form and run: every append answered is stored
/// once, and none answered DEADLINE_EXCEEDED is, once everything settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_append_whose_deadline_passes_in_a_batch_is_never_stored() {
    let (store, db, t) = seeded().await;
    let mut tasks = JoinSet::new();
    for c in 0..CONVERSATIONS {
        let (store, t) = (store.clone(), t.clone());
        tasks.spawn(async move {
            let mut answered = Vec::new();
            for round in 0..ROUNDS {
                let content = format!("c{c} round {round}");
                // 56-130 ms: enough to join a batch, short enough for some to end in one.
                let allowed = Duration::from_millis(62 + ((c * 7 + round * 13) % 80) as u64);
                let deadline = Deadline::after(allowed);
                let batch = plain(&format!("c{c}"), &content);
                match store.append_messages(&t, &batch, Some(&deadline)).await {
                    Ok(_) => answered.push((content, true)),
                    Err(StoreError::DeadlineExceeded) => answered.push((content, false)),
                    Err(other) => panic!("{other}"),
                }
            }
            answered
        });
    }
    let answered: Vec<(String, bool)> = tasks.join_all().await.into_iter().flatten().collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stored: Vec<String> = db
        .query(
            "SELECT content FROM messages WHERE tenant_id = $1",
            &[&t.as_str()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (content, acknowledged) in &answered {
        let copies = stored.iter().filter(|s| *s == content).count();
        assert_eq!(
            copies,
            usize::from(*acknowledged),
            "{content}: acknowledged {acknowledged}"
        );
    }
}

/// Keyed and guarded appends (what the clients send) join batches too: each key's record is
/// written with its rows, a retry of any of them is replayed with its first answer, and a guard
/// that does not hold is refused; nothing is stored twice or out of turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_and_guarded_appends_join_batches_and_their_retries_replay() {
    let (store, db, t) = seeded().await;
    let mut tasks = JoinSet::new();
    for c in 0..CONVERSATIONS {
        let (store, t) = (store.clone(), t.clone());
        tasks.spawn(async move {
            let mut last = 1;
            let mut sent = Vec::new();
            for round in 0..ROUNDS {
                let batch = checked(&format!("c{c}"), c, round, last);
                let outcome = store.append_messages(&t, &batch, None).await.unwrap();
                assert!(!outcome.replayed);
                assert_eq!(outcome.first_sequence.get(), last + 1, "c{c} round {round}");
                last = outcome.last_sequence.get();
                sent.push((batch, outcome));
            }
            (c, sent)
        });
    }
    let sent = tasks.join_all().await;
    let rows = written(&db, &t).await;
    let transactions: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
    let appends = CONVERSATIONS * ROUNDS;
    if !on_citus(&db).await {
        assert!(
            transactions.len() < appends * 3 / 4,
            "{} transactions for {appends} keyed, guarded appends: they shared transactions",
            transactions.len()
        );
    }
    // Every append retried at once, with its guard now stale: each replayed as first answered.
    let mut retries = JoinSet::new();
    for (c, sent) in sent {
        let (store, t) = (store.clone(), t.clone());
        retries.spawn(async move {
            let last = sent.last().map(|(_, o)| o.last_sequence.get()).unwrap_or(1);
            for (batch, first) in &sent {
                let replay = store.append_messages(&t, batch, None).await.unwrap();
                assert!(replay.replayed, "c{c}");
                assert_eq!(
                    (replay.first_sequence, replay.last_sequence),
                    (first.first_sequence, first.last_sequence)
                );
            }
            // A guard behind the log, under a new key: refused, nothing stored.
            let stale = checked(&format!("c{c}"), c, ROUNDS, last - 1);
            let refused = store.append_messages(&t, &stale, None).await.unwrap_err();
            assert!(
                matches!(refused, StoreError::SequenceMismatch { .. }),
                "c{c}: {refused:?}"
            );
        });
    }
    retries.join_all().await;
    assert_eq!(written(&db, &t).await.len(), rows.len(), "retries stored nothing");
    let records: i64 = db
        .query_one(
            "SELECT count(*) FROM idempotency_keys WHERE tenant_id = $1",
            &[&t.as_str()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(records as usize, appends);
}

/// The transaction of each message after the seeded first.
async fn written(db: &tokio_postgres::Client, t: &TenantId) -> Vec<tokio_postgres::Row> {
    db.query(
        "SELECT xmin::text FROM messages WHERE tenant_id = $1 AND sequence > 1",
        &[&t.as_str()],
    )
    .await
    .unwrap()
}

/// [`round_batch`] under the key `r<round>` and the guard `last`.
fn checked(id: &str, c: usize, round: usize, last: u64) -> CountedBatch {
    let conversation = ConversationId::parse(id.to_owned()).unwrap();
    let parsed = ParsedBatch {
        idempotency_key: IdempotencyKey::parse_optional(format!("r{round}")).unwrap(),
        expected_last_sequence: Some(Sequence::from_stored(last as i64)),
        ..ParsedBatch::new(conversation, round_messages(c, round))
    };
    parsed
        .count(
            Default::default(),
            ctxd::domain::token_counts::Tokenizers::ALL,
            None,
            &|| false,
        )
        .expect("counted")
}

/// A stored message as compared: sequence, content, token offset, previous turn start.
type Stored = (i64, String, i64, Option<i64>);

/// A store on a fresh database, a connection to it, and the seeded conversations' tenant.
async fn seeded() -> (Arc<dyn Store>, tokio_postgres::Client, TenantId) {
    let url = fresh_database().await;
    let store = postgres_store(&url).await;
    let db = connect(&url).await;
    let t = tenant();
    seed(&store, &t).await;
    (store, db, t)
}

/// The conversations, created one at a time (a new conversation takes the single path).
async fn seed(store: &Arc<dyn Store>, t: &TenantId) {
    for c in 0..CONVERSATIONS {
        store
            .append_messages(t, &plain(&format!("c{c}"), "hello"), None)
            .await
            .unwrap();
    }
}

/// Round `round` of conversation `c`: one to three messages, turns of differing lengths.
fn round_batch(id: &str, c: usize, round: usize) -> CountedBatch {
    counted(id, round_messages(c, round))
}

/// The messages of [`round_batch`].
fn round_messages(c: usize, round: usize) -> Vec<Message> {
    let count = 1 + (c + round) % 3;
    (0..count)
        .map(|i| {
            let role = if (round + i).is_multiple_of(2) {
                Role::User
            } else {
                Role::Assistant
            };
            let words = "words ".repeat(1 + (c * round + i) % 9);
            Message::text(role, format!("round {round} message {i}: {words}"))
        })
        .collect()
}

fn plain(id: &str, content: &str) -> CountedBatch {
    counted(id, vec![Message::text(Role::User, content.to_owned())])
}

fn counted(id: &str, messages: Vec<Message>) -> CountedBatch {
    let conversation = ConversationId::parse(id.to_owned()).unwrap();
    ParsedBatch::new(conversation, messages)
        .count(
            Default::default(),
            ctxd::domain::token_counts::Tokenizers::ALL,
            None,
            &|| false,
        )
        .expect("counted")
}

fn tenant() -> TenantId {
    TenantId::parse("group").unwrap()
}

async fn postgres_store(url: &str) -> Arc<dyn Store> {
    let options = PostgresOptions {
        url: url.to_owned(),
        pool_size: 8,
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(30),
        message_cache_bytes: 0,
        group_commit: true,
    };
    let store = store::open(Some(&options)).expect("store opens");
    store.migrate().await.expect("store migrates");
    store
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn on_citus(db: &tokio_postgres::Client) -> bool {
    db.query_opt("SELECT 1 FROM pg_extension WHERE extname = 'citus'", &[])
        .await
        .unwrap()
        .is_some()
}
