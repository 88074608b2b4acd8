//! WatchChanges (DESIGN 2.11) on both stores: every kind of change, in commit order, from a
//! cursor a consumer resumes from on another server, scoped to its tenant, refused when the
//! cursor is not one or is past retention, and heartbeats on an idle stream.

use std::{collections::HashMap, time::Duration};

use ctxd::proto::{self, ChangeKind};
use tonic::{Code, Streaming};

type Client = proto::context_service_client::ContextServiceClient<tonic::transport::Channel>;

use crate::{
    contract_tests,
    helpers::{
        StoreKind, TestApp, append, as_tenant, assert_field_violation, spawn_app, spawn_app_with, spawn_on,
        user,
    },
};

contract_tests!(
    every_kind_of_change_arrives_in_commit_order,
    a_consumer_resumes_from_its_cursor_on_another_server_without_a_gap,
    a_watch_sees_its_tenant_only_and_its_conversation_when_asked,
    a_cursor_that_is_not_one_or_past_retention_is_refused,
    an_idle_stream_gets_heartbeats_to_resume_from,
    an_append_larger_than_a_response_carries_what_fits_and_says_so,
    a_replica_with_little_memory_still_delivers_messages,
    a_cursor_among_one_commits_changes_resumes_without_a_gap,
    a_replica_serves_its_watcher_cap_and_ends_streams_when_it_shuts_down,
    a_tenant_holds_at_most_its_share_of_the_watchers,
    the_sweep_forgets_changes_in_bounded_batches,
);

/// How long a test waits for a change it expects.
const PATIENCE: Duration = Duration::from_secs(20);

fn watch(after: &str, conversation: &str, include_messages: bool) -> proto::WatchChangesRequest {
    proto::WatchChangesRequest {
        after_cursor: after.into(),
        conversation_id: conversation.into(),
        include_messages,
    }
}

async fn open(app: &TestApp, request: proto::WatchChangesRequest) -> Streaming<proto::WatchChangesResponse> {
    app.client
        .clone()
        .watch_changes(request)
        .await
        .expect("watch")
        .into_inner()
}

/// Reads changes until `n` have come.
async fn take(stream: &mut Streaming<proto::WatchChangesResponse>, n: usize) -> Vec<proto::Change> {
    let mut changes = Vec::new();
    while changes.len() < n {
        let next = tokio::time::timeout(PATIENCE, stream.message()).await;
        let response = next
            .unwrap_or_else(|_| panic!("only {} of {n} changes came", changes.len()))
            .expect("stream ok")
            .expect("stream open");
        changes.extend(response.changes);
    }
    changes
}

fn kinds(changes: &[proto::Change]) -> Vec<(ChangeKind, u64, u64)> {
    changes
        .iter()
        .map(|c| (c.kind(), c.first_sequence, c.last_sequence))
        .collect()
}

async fn every_kind_of_change_arrives_in_commit_order(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let mut stream = open(&app, watch("", "", true)).await;

    let secret = "my card number is 4111 1111 1111 1111";
    app.append_ok("c", vec![user("hello there"), user(secret)]).await;
    app.append_ok("c", vec![user("a third message"), user("and a fourth")])
        .await;
    let update = proto::UpdateConversationRequest {
        conversation: Some(proto::Conversation {
            conversation_id: "c".into(),
            title: "Support chat".into(),
            ..Default::default()
        }),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["title".into()],
        }),
        allow_missing: false,
    };
    client.update_conversation(update).await.unwrap();
    let summarize = proto::SummarizeRequest {
        conversation_id: "c".into(),
        mode: proto::SummarizeMode::Provided as i32,
        summary_text: "A greeting and some messages.".into(),
        through_sequence: 3,
        expected_through_sequence: Some(0),
        ..Default::default()
    };
    client.summarize(summarize).await.unwrap();
    let memory = proto::UpdateWorkingMemoryRequest {
        conversation_id: "c".into(),
        memory: Some(proto::WorkingMemory {
            decisions: vec![proto::MemoryItem {
                text: "Answer by email.".into(),
                source_sequences: vec![1],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    client.update_working_memory(memory).await.unwrap();
    let redact = proto::RedactMessageRequest {
        conversation_id: "c".into(),
        sequence: 2,
    };
    client.redact_message(redact).await.unwrap();
    let fork = proto::ForkConversationRequest {
        conversation_id: "c".into(),
        through_sequence: 3,
        new_conversation_id: "f".into(),
    };
    client.fork_conversation(fork).await.unwrap();
    let rewind = proto::RewindConversationRequest {
        conversation_id: "c".into(),
        after_sequence: 1,
        expected_last_sequence: None,
    };
    client.rewind_conversation(rewind).await.unwrap();
    let delete = proto::DeleteConversationRequest {
        conversation_id: "c".into(),
    };
    client.delete_conversation(delete).await.unwrap();

    let changes = take(&mut stream, 9).await;
    let of = |id: &str| {
        changes
            .iter()
            .filter(|c| c.conversation_id == id)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        kinds(&of("c")),
        [
            (ChangeKind::Appended, 1, 2),
            (ChangeKind::Appended, 3, 4),
            (ChangeKind::Updated, 0, 0),
            (ChangeKind::Summarized, 0, 3),
            (ChangeKind::MemoryUpdated, 0, 0),
            (ChangeKind::Redacted, 2, 2),
            (ChangeKind::Rewound, 2, 4),
            (ChangeKind::Deleted, 0, 0),
        ]
    );
    assert_eq!(kinds(&of("f")), [(ChangeKind::Forked, 1, 3)]);
    // The fork came after the redaction and before the rewind, in one order for every reader.
    let position = |kind: ChangeKind| changes.iter().position(|c| c.kind() == kind).unwrap();
    assert!(position(ChangeKind::Redacted) < position(ChangeKind::Forked));
    assert!(position(ChangeKind::Forked) < position(ChangeKind::Rewound));
    // Messages come with appends only, as the log holds them when delivered; removals carry
    // nothing, and no change ever carries the redacted text once it is redacted.
    for change in &changes {
        match change.kind() {
            ChangeKind::Appended => assert!(change.messages.len() <= 2),
            _ => assert!(change.messages.is_empty(), "{:?} carries messages", change.kind()),
        }
        assert!(change.time.is_some() && !change.cursor.is_empty());
    }
    let cursors: Vec<&str> = changes.iter().map(|c| c.cursor.as_str()).collect();
    let mut unique = cursors.clone();
    unique.dedup();
    assert_eq!(unique, cursors, "every change has its own cursor");

    // Read again after the first change: the rest again, in the same order.
    let mut again = open(&app, watch(&changes[0].cursor, "", true)).await;
    let replayed = take(&mut again, 8).await;
    assert_eq!(kinds(&replayed), kinds(&changes[1..]));
    let appended = &replayed[0];
    assert_eq!(appended.kind(), ChangeKind::Appended);
    // Conversation "c" is gone: the append's messages are not there to carry.
    assert!(appended.messages.is_empty());
}

/// Appends `per` messages to each of `conversations`, one append at a time, concurrently.
async fn append_many(client: Client, conversations: &'static [&'static str], per: usize) {
    let mut tasks = Vec::new();
    for conversation in conversations {
        let mut client = client.clone();
        let conversation = conversation.to_string();
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                let request = append(
                    &conversation,
                    vec![user(&format!("message {i} of {conversation}"))],
                );
                client.append_message(request).await.expect("append");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

async fn a_consumer_resumes_from_its_cursor_on_another_server_without_a_gap(kind: StoreKind) {
    let (app, url) = match kind {
        StoreKind::InMemory => (spawn_app(kind).await, None),
        StoreKind::Postgres => {
            let url = crate::helpers::fresh_database().await;
            (spawn_on(Some(url.clone()), &[]).await, Some(url))
        }
    };
    let conversations = ["a", "b", "c", "d"];
    let mut stream = open(&app, watch("", "", false)).await;
    let writers = tokio::spawn(append_many(app.client.clone(), &["a", "b", "c", "d"], 15));
    // Half the changes from this stream, then the consumer is cut off.
    let first = take(&mut stream, 20).await;
    drop(stream);
    let resume_from = first.last().unwrap().cursor.clone();
    writers.await.unwrap();
    // The rest from another server on the same database (the same one in memory).
    let another;
    let other = match &url {
        Some(url) => {
            another = spawn_on(Some(url.clone()), &[]).await;
            &another
        }
        None => &app,
    };
    let mut resumed = open(other, watch(&resume_from, "", false)).await;
    let rest = take(&mut resumed, 60 - first.len()).await;
    let mut seen: HashMap<String, Vec<u64>> = HashMap::new();
    for change in first.iter().chain(&rest) {
        assert_eq!(change.kind(), ChangeKind::Appended);
        assert_eq!(change.first_sequence, change.last_sequence);
        seen.entry(change.conversation_id.clone())
            .or_default()
            .push(change.first_sequence);
    }
    for conversation in conversations {
        let expected: Vec<u64> = (1..=15).collect();
        assert_eq!(
            seen[conversation], expected,
            "{conversation}: every append once, in order"
        );
    }
}

/// Group commit writes many conversations' changes at one position, ordered among themselves by
/// conversation in the database's collation, which is not byte order (the test cluster's is
/// ICU en-US: "Zeta" after "alpha", "a-b" before "aB"). A consumer that resumes from any of
/// them gets every change after it: none is skipped by a cursor compared in another order.
async fn a_cursor_among_one_commits_changes_resumes_without_a_gap(kind: StoreKind) {
    // A small pool: the 16 writers are more than half of it in flight, so appends batch.
    let app = spawn_app_with(kind, &["--db-pool-size", "4"]).await;
    const CONVERSATIONS: &[&str] = &[
        "Zeta", "alpha", "a-b", "aB", "a_c", "B", "b", "a b", "zz", "A", "a.b", "ab", "AB", "_x", "0", "a~",
    ];
    let mut stream = open(&app, watch("", "", false)).await;
    append_many(app.client.clone(), CONVERSATIONS, 8).await;
    let all = take(&mut stream, CONVERSATIONS.len() * 8).await;
    // `stream` stays open: the replica keeps the tenant's recent changes for its watchers, and
    // the resumed ones read them there, as well as from the store.
    // Group commit is off on Citus (one shard per transaction): no batch there.
    if kind == StoreKind::Postgres && std::env::var("TEST_CITUS_URL").is_err() {
        // The cursor's position (its first number): batches share one.
        let position = |cursor: &str| cursor.rsplitn(4, '.').last().map(str::to_owned);
        let positions: std::collections::HashSet<_> = all.iter().map(|c| position(&c.cursor)).collect();
        assert!(
            positions.len() < all.len(),
            "no two changes at one position: no batch was tested"
        );
    }
    for i in 0..all.len() - 1 {
        let mut resumed = open(&app, watch(&all[i].cursor, "", false)).await;
        let rest = take(&mut resumed, all.len() - 1 - i).await;
        let delivered: std::collections::HashSet<(&str, u64)> = rest
            .iter()
            .map(|c| (c.conversation_id.as_str(), c.first_sequence))
            .collect();
        for later in &all[i + 1..] {
            assert!(
                delivered.contains(&(later.conversation_id.as_str(), later.first_sequence)),
                "resumed after change {i}: {} {} skipped",
                later.conversation_id,
                later.first_sequence
            );
        }
    }
}

async fn a_watch_sees_its_tenant_only_and_its_conversation_when_asked(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let mut tenant_a = client
        .watch_changes(as_tenant("acme", watch("", "", true)))
        .await
        .unwrap()
        .into_inner();
    let mut only_two = client
        .watch_changes(as_tenant("acme", watch("", "two", false)))
        .await
        .unwrap()
        .into_inner();
    client
        .append_message(as_tenant("globex", append("one", vec![user("globex secret")])))
        .await
        .unwrap();
    client
        .append_message(as_tenant("acme", append("one", vec![user("acme one")])))
        .await
        .unwrap();
    client
        .append_message(as_tenant("acme", append("two", vec![user("acme two")])))
        .await
        .unwrap();
    let seen = take(&mut tenant_a, 2).await;
    assert_eq!(
        seen.iter()
            .map(|c| c.conversation_id.as_str())
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(seen[0].messages[0].content, "acme one");
    let two = take(&mut only_two, 1).await;
    assert_eq!(two[0].conversation_id, "two");
    assert!(two[0].messages.is_empty(), "messages only when asked for");
    // Nothing else arrives on either: the other tenant's append is not theirs.
    let more = tokio::time::timeout(Duration::from_millis(700), tenant_a.message()).await;
    assert!(more.is_err(), "no more changes: {more:?}");
}

async fn a_cursor_that_is_not_one_or_past_retention_is_refused(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--changes-retention", "1h"]).await;
    let mut client = app.client.clone();
    app.append_ok("c", vec![user("kept")]).await;

    let status = client
        .watch_changes(watch("not-a-cursor", "", false))
        .await
        .unwrap_err();
    assert_field_violation(&status, "after_cursor");
    let status = client
        .watch_changes(watch("", "bad\u{7}id", false))
        .await
        .unwrap_err();
    assert_field_violation(&status, "conversation_id");

    let old =
        ctxd::domain::changes::Cursor::before(1, std::time::SystemTime::now() - Duration::from_secs(7200));
    let status = client
        .watch_changes(watch(&old.encode(), "", false))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(
        status.message().contains("CTXD_CHANGES_RETENTION"),
        "{}",
        status.message()
    );
    use tonic_types::StatusExt as _;
    let info = status.get_details_error_info().expect("an ErrorInfo");
    assert_eq!(info.reason, "CURSOR_EXPIRED");
    // The oldest cursor held reads back every change kept: the append.
    let oldest = &info.metadata["oldest_cursor"];
    let mut stream = open(&app, watch(oldest, "", false)).await;
    let changes = take(&mut stream, 1).await;
    assert_eq!(kinds(&changes), [(ChangeKind::Appended, 1, 1)]);
}

async fn an_idle_stream_gets_heartbeats_to_resume_from(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--changes-heartbeat-secs", "1"]).await;
    app.append_ok("before", vec![user("before the heartbeat")]).await;
    let mut stream = open(&app, watch("", "", false)).await;
    let heartbeat = loop {
        let response = tokio::time::timeout(PATIENCE, stream.message())
            .await
            .expect("a heartbeat in time")
            .unwrap()
            .unwrap();
        // "From now" is at least once: a change that committed while a transaction that began
        // before it still ran (another test's, on a shared cluster) may come first.
        for change in &response.changes {
            assert_eq!(change.conversation_id, "before");
        }
        if let Some(heartbeat) = response.heartbeat {
            assert!(response.changes.is_empty());
            break heartbeat;
        }
    };
    drop(stream);
    app.append_ok("after", vec![user("after the heartbeat")]).await;
    // Resumed from the heartbeat: what came after it. At least once, as above: a heartbeat
    // sent while another test's transaction was open on a shared cluster may sit before the
    // change that came first, which then comes again; nothing else does.
    let mut resumed = open(&app, watch(&heartbeat.cursor, "", false)).await;
    let mut seen = Vec::new();
    while !seen.iter().any(|c: &proto::Change| c.conversation_id == "after") {
        seen.extend(take(&mut resumed, 1).await);
    }
    let order: Vec<&str> = seen.iter().map(|c| c.conversation_id.as_str()).collect();
    assert!(
        order.iter().all(|&id| id == "before" || id == "after") && order.last() == Some(&"after"),
        "{order:?}"
    );
    assert!(order.len() <= 2, "{order:?}");
}

/// One response carries at most 2 MiB of messages, within the 4 MiB a gRPC client accepts by
/// default (this test's client refuses a larger one): an append of 4.5 MB carries the messages
/// that fit, says so, and the rest is read with ListMessages; nothing is lost silently.
async fn an_append_larger_than_a_response_carries_what_fits_and_says_so(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut stream = open(&app, watch("", "big", true)).await;
    let texts: Vec<String> = (0..5u8)
        .map(|i| char::from(b'a' + i).to_string().repeat(900_000))
        .collect();
    app.append_ok("big", texts.iter().map(|t| user(t)).collect())
        .await;
    app.append_ok("big", vec![user("small, after")]).await;
    let changes = take(&mut stream, 2).await;
    let (large, small) = (&changes[0], &changes[1]);
    assert_eq!((large.first_sequence, large.last_sequence), (1, 5));
    assert!(large.messages_truncated);
    let carried: Vec<&str> = large.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(carried, texts[..2].iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!small.messages_truncated);
    assert_eq!(small.messages.len(), 1);
    assert_eq!(small.messages[0].content, "small, after");
    // The rest, read with ListMessages from the last message carried: pages of this test
    // client's 4 MiB hold what fits, and a whole-log read works too.
    let after = large
        .messages
        .last()
        .map_or(large.first_sequence - 1, |m| m.sequence);
    let log = app.all_messages("big").await.expect("the whole log, in pages");
    let rest: Vec<String> = log
        .into_iter()
        .filter(|m| m.sequence > after && m.sequence <= large.last_sequence)
        .map(|m| m.content)
        .collect();
    assert_eq!(rest, texts[2..]);
}

/// With little memory for loaded messages (4 MiB, 2 for one tenant) a response carries less,
/// so that each read fits what the tenant may hold: every append still arrives, in parts, and
/// none waits for memory it could never get.
async fn a_replica_with_little_memory_still_delivers_messages(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--response-memory-mib", "4"]).await;
    let mut stream = open(&app, watch("", "small-replica", true)).await;
    let texts: Vec<String> = (0..3u8)
        .map(|i| char::from(b'x' + i).to_string().repeat(300_000))
        .collect();
    for _ in 0..3 {
        app.append_ok("small-replica", texts.iter().map(|t| user(t)).collect())
            .await;
    }
    let changes = take(&mut stream, 3).await;
    for change in &changes {
        assert!(
            change.messages_truncated,
            "a quarter of 2 MiB holds one message of 300 kB"
        );
        assert_eq!(change.messages.len(), 1);
        assert_eq!(change.messages[0].content, texts[0]);
    }
}

/// On Citus a fork commits in two phases: its shards prepare, the coordinator commits, then the
/// shards commit, so for a moment the fork's transaction has ended while its FORKED change is not
/// yet visible. That moment is made here by hand and held: a shard transaction that wrote a
/// change is left prepared while the coordinator's record of it commits, as Citus does, and a
/// plain append commits meanwhile. The change is delivered, before the append, never skipped.
/// Runs on Citus only (TEST_CITUS_URL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_shard_commits_after_the_coordinator_is_never_skipped() {
    if std::env::var("TEST_CITUS_URL").is_err() {
        eprintln!("skipped: a two-phase commit needs a Citus cluster (TEST_CITUS_URL)");
        return;
    }
    let url = crate::helpers::fresh_database().await;
    let app = spawn_on(Some(url.clone()), &["--changes-heartbeat-secs", "1"]).await;
    app.append_ok("warm", vec![user("the schema is ready")]).await;
    let mut stream = open(&app, watch("", "", false)).await;
    let connect = |conninfo: String| async move {
        let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    };
    let coordinator = connect(url.clone()).await;
    let shard = coordinator
        .query_one(
            "SELECT n.nodename, n.nodeport, n.groupid, s.shardid FROM pg_dist_shard s
             JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n ON n.groupid = p.groupid
             WHERE s.shardid = get_shard_id_for_distribution_column('changes', 'late')",
            &[],
        )
        .await
        .unwrap();
    let (host, port, group, shard): (String, i32, i32, i64) =
        (shard.get(0), shard.get(1), shard.get(2), shard.get(3));
    let config: tokio_postgres::Config = url.parse().unwrap();
    let database = config.get_dbname().unwrap();
    let worker = connect(format!("host={host} port={port} user=postgres dbname={database}")).await;

    // The coordinator's transaction, whose id is the change's position.
    coordinator.batch_execute("BEGIN").await.unwrap();
    let position: i64 = coordinator
        .query_one("SELECT pg_current_xact_id()::text::bigint", &[])
        .await
        .unwrap()
        .get(0);
    let gid = format!("citus_0_99999_{position}_0");
    worker
        .batch_execute(&format!(
            "BEGIN;
             INSERT INTO changes_{shard} (tenant_id, position, conversation_id, change, kind,
                 first_sequence, last_sequence, created_at)
             VALUES ('default', {position}, 'late', 1, 6, 1, 1, now());
             PREPARE TRANSACTION '{gid}'"
        ))
        .await
        .unwrap();
    coordinator
        .execute(
            "INSERT INTO pg_dist_transaction (groupid, gid) VALUES ($1, $2)",
            &[&group, &gid],
        )
        .await
        .unwrap();
    coordinator.batch_execute("COMMIT").await.unwrap();
    // Ended on the coordinator, prepared on its shard: an append commits meanwhile.
    app.append_ok("after", vec![user("committed while the shard is prepared")])
        .await;
    // "From now" is at least once: the warm-up append may come first.
    let mut order = Vec::new();
    while order.len() < 2 {
        for change in take(&mut stream, 1).await {
            if change.conversation_id != "warm" {
                order.push((change.conversation_id.clone(), change.kind()));
            }
        }
    }
    let expected = [
        ("late".to_owned(), ChangeKind::Forked),
        ("after".to_owned(), ChangeKind::Appended),
    ];
    assert_eq!(order, expected);
    let prepared: i64 = worker
        .query_one("SELECT count(*) FROM pg_prepared_xacts WHERE gid = $1", &[&gid])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        prepared, 0,
        "the coordinator's recovery committed the shard's transaction"
    );
}

/// The guarantee the cursor is built on (docs/design.md, "Change feed"): a change whose
/// transaction began first but commits last is delivered, before the changes that committed
/// while it ran, to a consumer that resumed from any cursor it was given meanwhile. An append
/// with a tool call is held at its `tool_calls` insert by a session that locks that table
/// (without taking a transaction id of its own, so only the append holds the feed back),
/// after it took its id and wrote its change; a plain append to another conversation commits
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_commits_late_with_a_lower_position_is_never_skipped() {
    let url = crate::helpers::fresh_database().await;
    let app = spawn_on(Some(url.clone()), &["--changes-heartbeat-secs", "1"]).await;
    app.append_ok("warm", vec![user("the schema is ready")]).await;
    let mut stream = open(&app, watch("", "", false)).await;

    let (blocker, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    blocker
        .batch_execute("BEGIN; LOCK TABLE tool_calls IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let assigned = blocker
        .query_one("SELECT pg_current_xact_id_if_assigned() IS NULL AS none", &[])
        .await
        .unwrap();
    assert!(
        assigned.get::<_, bool>("none"),
        "the blocker holds no transaction id"
    );
    let mut slow_client = app.client.clone();
    let slow = tokio::spawn(async move {
        let request = append(
            "slow",
            vec![user("look this up"), crate::helpers::assistant_calling(&["t1"])],
        );
        slow_client.append_message(request).await
    });
    // The slow append has its id and waits on the lock.
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.append_ok("fast", vec![user("committed while the other waits")])
        .await;

    // While the slow one runs, the fast change is held back: heartbeats only, and their
    // cursors stay before both changes. ("warm" may come too: a watch from now starts at
    // least once, and other tests' transactions on this server may have held it back.)
    let mut heartbeats = 0;
    let mut heartbeat = None;
    while heartbeats < 3 {
        let response = tokio::time::timeout(PATIENCE, stream.message())
            .await
            .expect("a heartbeat")
            .unwrap()
            .unwrap();
        assert!(
            response.changes.iter().all(|c| c.conversation_id == "warm"),
            "delivered past a running transaction: {response:?}"
        );
        if let Some(h) = response.heartbeat {
            heartbeat = Some(h.cursor);
            heartbeats += 1;
        }
    }
    let heartbeat = heartbeat.expect("a heartbeat cursor");

    blocker.batch_execute("COMMIT").await.unwrap();
    slow.await.unwrap().expect("the slow append commits");
    let mut order = Vec::new();
    while order.len() < 2 {
        let changes = take(&mut stream, 1).await;
        order.extend(
            changes
                .into_iter()
                .map(|c| c.conversation_id)
                .filter(|c| c != "warm"),
        );
    }
    assert_eq!(order, ["slow", "fast"], "in the order of their positions");
    // A consumer that resumed from the heartbeat taken meanwhile misses neither.
    let mut resumed = open(&app, watch(&heartbeat, "", false)).await;
    let again = take(&mut resumed, 2).await;
    let order: Vec<&str> = again.iter().map(|c| c.conversation_id.as_str()).collect();
    assert_eq!(order, ["slow", "fast"]);
}

async fn a_replica_serves_its_watcher_cap_and_ends_streams_when_it_shuts_down(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--max-watchers", "2"]).await;
    let mut first = open(&app, watch("", "", false)).await;
    let _second = open(&app, watch("", "", false)).await;
    let status = app
        .client
        .clone()
        .watch_changes(watch("", "", false))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("CTXD_MAX_WATCHERS"),
        "{}",
        status.message()
    );
    // The opening heartbeat, then the shutdown: UNAVAILABLE, to resume elsewhere.
    let opening = first.message().await.unwrap().unwrap();
    assert!(opening.heartbeat.is_some());
    drop(app);
    let ended = tokio::time::timeout(PATIENCE, first.message())
        .await
        .expect("the stream ends in time");
    let status = ended.expect_err("the stream ends with a status");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("resume"), "{}", status.message());
}

/// One tenant's consumers cannot take every stream a replica serves: past its share its next
/// watch is RESOURCE_EXHAUSTED while another tenant's is served, and a stream it closes gives
/// its slot back.
async fn a_tenant_holds_at_most_its_share_of_the_watchers(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--max-watchers", "4", "--max-watchers-per-tenant", "2"]).await;
    let mut client = app.client.clone();
    let watch_as = |tenant: &'static str| {
        let mut client = client.clone();
        async move {
            client
                .watch_changes(as_tenant(tenant, watch("", "", false)))
                .await
        }
    };
    let first = watch_as("acme").await.expect("acme's first").into_inner();
    let _second = watch_as("acme").await.expect("acme's second");
    let status = watch_as("acme").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("CTXD_MAX_WATCHERS_PER_TENANT"),
        "{}",
        status.message()
    );
    let _other = watch_as("globex").await.expect("another tenant is served");
    // A stream closed gives its slot back (once the server sees it gone).
    drop(first);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match watch_as("acme").await {
            Ok(_) => break,
            Err(status)
                if status.code() == Code::ResourceExhausted && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(status) => panic!("the slot never came back: {status:?}"),
        }
    }
    let _ = client
        .append_message(append("c", vec![user("still served")]))
        .await
        .unwrap();
}

async fn the_sweep_forgets_changes_in_bounded_batches(kind: StoreKind) {
    use crate::store_contract::{batch, store_of, tenant, text};
    use ctxd::domain::{Role, changes::ChangeQuery};
    let store = store_of(kind).await;
    let t = tenant("t");
    for content in ["a", "b", "c"] {
        store
            .append_messages(&t, &batch("c", vec![text(Role::User, content)]), None)
            .await
            .unwrap();
    }
    let query = ChangeQuery {
        after: ctxd::domain::changes::Cursor::before(0, std::time::SystemTime::now()),
        conversation: None,
        limit: 10,
    };
    // Settled once the transactions running meanwhile (other tests', on a shared cluster) end.
    let mut settled = 0;
    for _ in 0..200 {
        settled = store.read_changes(&t, &query).await.unwrap().changes.len();
        if settled == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(settled, 3);
    // Nothing is older than an hour; everything is older than a second from now.
    let past = std::time::SystemTime::now() - Duration::from_secs(3600);
    assert_eq!(store.sweep_changes(past, 10).await.unwrap(), 0);
    let future = std::time::SystemTime::now() + Duration::from_secs(1);
    assert_eq!(store.sweep_changes(future, 2).await.unwrap(), 2);
    assert_eq!(store.read_changes(&t, &query).await.unwrap().changes.len(), 1);
    assert_eq!(store.sweep_changes(future, 2).await.unwrap(), 1);
    assert!(store.read_changes(&t, &query).await.unwrap().changes.is_empty());
}
