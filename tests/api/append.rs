//! AppendMessage: gapless sequences, atomic batches, idempotency, optimistic concurrency.

use std::collections::HashSet;

use ctxd::proto;
use tonic::Code;
use tonic_types::StatusExt;

use crate::{
    contract_tests,
    helpers::{
        StoreKind, append, assert_field_violation, assistant, assistant_calling, spawn_app, tool_result, user,
    },
};

contract_tests!(
    sequences_stay_gapless_under_16_concurrent_appenders,
    a_batch_with_one_invalid_message_stores_nothing,
    a_failed_append_leaves_no_gap_for_the_next_one,
    an_idempotent_replay_returns_the_original_sequences_and_stores_nothing,
    reusing_an_idempotency_key_with_a_different_payload_fails_precondition,
    an_expected_last_sequence_mismatch_is_aborted_with_the_current_value,
    expected_last_sequence_zero_appends_only_to_an_empty_conversation,
    a_tool_result_may_answer_a_call_made_earlier_in_the_same_request,
    every_message_field_round_trips,
);

async fn sequences_stay_gapless_under_16_concurrent_appenders(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut tasks = Vec::new();
    for writer in 0..16 {
        let mut client = app.client.clone();
        tasks.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in 0..20 {
                // Batches of 1 to 3 messages, so ranges of different sizes interleave.
                let size = 1 + (writer + i) % 3;
                let messages = (0..size).map(|k| user(&format!("w{writer}-i{i}-k{k}"))).collect();
                let response = client
                    .append_message(append("race", messages))
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(response.last_sequence - response.first_sequence + 1, size as u64);
                acknowledged.push((
                    response.first_sequence,
                    (0..size).map(move |k| format!("w{writer}-i{i}-k{k}")),
                ));
            }
            acknowledged
                .into_iter()
                .flat_map(|(first, contents)| contents.enumerate().map(move |(k, c)| (first + k as u64, c)))
                .collect::<Vec<_>>()
        }));
    }
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.extend(task.await.unwrap());
    }
    let stored = app.all_messages("race").await.unwrap();
    let sequences: Vec<u64> = stored.iter().map(|m| m.sequence).collect();
    let expected: Vec<u64> = (1..=acknowledged.len() as u64).collect();
    assert_eq!(sequences, expected, "sequences must be exactly 1..N");
    for (sequence, content) in acknowledged {
        assert_eq!(
            stored[sequence as usize - 1].content,
            content,
            "acknowledged message at {sequence}"
        );
    }
}

async fn a_batch_with_one_invalid_message_stores_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let status = client
        .append_message(append(
            "atomic",
            vec![user("fine"), tool_result("nobody-called-this", "out")],
        ))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[1].tool_call_id");
    assert_eq!(
        app.all_messages("atomic").await.unwrap_err().code(),
        Code::NotFound
    );

    app.append_ok("atomic", vec![user("first")]).await;
    let status = client
        .append_message(append(
            "atomic",
            vec![assistant_calling(&["c1"]), proto::Message::default()],
        ))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[1].role");
    assert_eq!(app.all_messages("atomic").await.unwrap().len(), 1);
}

async fn a_failed_append_leaves_no_gap_for_the_next_one(kind: StoreKind) {
    let app = spawn_app(kind).await;
    app.append_ok("gap", vec![user("one")]).await;
    let mut client = app.client.clone();
    // Rejected by the store, after sequences were provisionally allocated.
    let rejected = append("gap", vec![user("two"), tool_result("unknown", "x")]);
    assert_eq!(
        client.append_message(rejected).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let next = app.append_ok("gap", vec![user("two")]).await;
    assert_eq!((next.first_sequence, next.last_sequence), (2, 2));
}

async fn an_idempotent_replay_returns_the_original_sequences_and_stores_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    app.append_ok("idem", vec![user("before")]).await;
    let request = proto::AppendMessageRequest {
        idempotency_key: "turn-7".into(),
        ..append("idem", vec![user("a"), user("b")])
    };
    let first = client.append_message(request.clone()).await.unwrap().into_inner();
    assert_eq!(
        (first.first_sequence, first.last_sequence, first.replayed),
        (2, 3, false)
    );
    app.append_ok("idem", vec![user("after")]).await;

    let replay = client.append_message(request.clone()).await.unwrap().into_inner();
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
    assert_eq!(contents(&app, "idem").await, ["before", "a", "b", "after"]);

    // A one-message keyed append (PostgreSQL writes it and its record in one statement, which
    // a stored key fails): retried many times over, each retry answered alike and the
    // connections it used still good for the next append.
    let single = proto::AppendMessageRequest {
        idempotency_key: "turn-8".into(),
        ..append("idem", vec![user("single")])
    };
    let original = client.append_message(single.clone()).await.unwrap().into_inner();
    assert_eq!((original.first_sequence, original.replayed), (5, false));
    for _ in 0..40 {
        let replay = client.append_message(single.clone()).await.unwrap().into_inner();
        assert_eq!((replay.first_sequence, replay.conversation_last_sequence), (5, 5));
        assert!(replay.replayed);
    }
    assert_eq!(app.append_ok("idem", vec![user("next")]).await.first_sequence, 6);
    assert_eq!(
        contents(&app, "idem").await,
        ["before", "a", "b", "after", "single", "next"]
    );

    // Concurrent retries of one request: one effect, identical answers.
    let concurrent = proto::AppendMessageRequest {
        idempotency_key: "burst".into(),
        ..append("idem", vec![user("c")])
    };
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (mut client, request) = (app.client.clone(), concurrent.clone());
        tasks.push(tokio::spawn(async move {
            client.append_message(request).await.unwrap().into_inner()
        }));
    }
    let mut answers = HashSet::new();
    let mut originals = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        originals += usize::from(!answer.replayed);
        answers.insert((
            answer.first_sequence,
            answer.last_sequence,
            answer.conversation_last_sequence,
        ));
    }
    assert_eq!(originals, 1, "exactly one request takes effect");
    assert_eq!(answers.len(), 1, "every retry gets the same answer");
    assert_eq!(app.all_messages("idem").await.unwrap().len(), 7);
}

/// The contents of a conversation's messages, in order.
async fn contents(app: &crate::helpers::TestApp, conversation: &str) -> Vec<String> {
    let messages = app.all_messages(conversation).await.unwrap();
    messages.into_iter().map(|m| m.content).collect()
}

async fn reusing_an_idempotency_key_with_a_different_payload_fails_precondition(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let keyed = |content: &str| proto::AppendMessageRequest {
        idempotency_key: "k".into(),
        ..append("reuse", vec![user(content)])
    };
    client.append_message(keyed("original")).await.unwrap();
    let status = client.append_message(keyed("different")).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(app.all_messages("reuse").await.unwrap().len(), 1);
}

async fn an_expected_last_sequence_mismatch_is_aborted_with_the_current_value(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    app.append_ok("occ", vec![user("a"), user("b")]).await;
    let guarded = |expected: u64| proto::AppendMessageRequest {
        expected_last_sequence: Some(expected),
        ..append("occ", vec![user("c")])
    };
    let status = client.append_message(guarded(1)).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted);
    assert!(status.message().contains("is 2"), "{}", status.message());
    let info = status.get_details_error_info().expect("ErrorInfo details");
    assert_eq!(
        info.metadata.get("current_last_sequence").map(String::as_str),
        Some("2")
    );
    assert_eq!(app.all_messages("occ").await.unwrap().len(), 2);

    let ok = client.append_message(guarded(2)).await.unwrap().into_inner();
    assert_eq!(ok.first_sequence, 3);
}

async fn expected_last_sequence_zero_appends_only_to_an_empty_conversation(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let create = proto::AppendMessageRequest {
        expected_last_sequence: Some(0),
        ..append("new", vec![user("hi")])
    };
    assert_eq!(
        client
            .append_message(create.clone())
            .await
            .unwrap()
            .into_inner()
            .first_sequence,
        1
    );
    assert_eq!(
        client.append_message(create).await.unwrap_err().code(),
        Code::Aborted
    );
    // A guard past 0 on a conversation that does not exist: refused, and nothing created.
    let ahead = proto::AppendMessageRequest {
        expected_last_sequence: Some(3),
        ..append("never", vec![user("hi"), assistant("hello")])
    };
    let status = client.append_message(ahead).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted);
    assert!(status.message().contains("is 0"), "{}", status.message());
    assert_eq!(
        app.all_messages("never").await.unwrap_err().code(),
        Code::NotFound
    );
    // A keyed, guarded append retried after the conversation moved on: replayed, not refused.
    let guarded = proto::AppendMessageRequest {
        expected_last_sequence: Some(1),
        idempotency_key: "guarded-turn".into(),
        ..append("new", vec![user("second"), assistant("reply")])
    };
    let first = client.append_message(guarded.clone()).await.unwrap().into_inner();
    assert_eq!((first.first_sequence, first.last_sequence), (2, 3));
    app.append_ok("new", vec![user("later")]).await;
    let retry = client.append_message(guarded).await.unwrap().into_inner();
    assert!(retry.replayed);
    assert_eq!((retry.first_sequence, retry.last_sequence), (2, 3));
    assert_eq!(app.all_messages("new").await.unwrap().len(), 4);
}

async fn a_tool_result_may_answer_a_call_made_earlier_in_the_same_request(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    app.append_ok(
        "tools",
        vec![
            user("weather?"),
            assistant_calling(&["a", "b"]),
            tool_result("b", "rain"),
            tool_result("a", "sun"),
        ],
    )
    .await;
    // Results of earlier requests' calls, one at a time.
    app.append_ok("tools", vec![assistant_calling(&["c"])]).await;
    app.append_ok("tools", vec![tool_result("c", "done")]).await;
    let status = client
        .append_message(append("tools", vec![tool_result("c", "again")]))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0].tool_call_id");
    let status = client
        .append_message(append("tools", vec![assistant_calling(&["a"])]))
        .await
        .unwrap_err();
    assert_field_violation(&status, "messages[0].tool_calls[0].id");
    assert_eq!(app.all_messages("tools").await.unwrap().len(), 6);
}

async fn every_message_field_round_trips(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let image = proto::Attachment {
        mime_type: "image/png".into(),
        filename: "chart.png".into(),
        source: Some(proto::attachment::Source::Data(vec![0, 159, 146, 150, 255])),
        ..Default::default()
    };
    let link = proto::Attachment {
        mime_type: "application/pdf".into(),
        filename: String::new(),
        source: Some(proto::attachment::Source::Uri(
            "https://example.com/spec.pdf".into(),
        )),
        ..Default::default()
    };
    let opener = proto::Message {
        name: "alice".into(),
        attachments: vec![image, link],
        metadata: [
            ("mode".to_string(), "plan".to_string()),
            ("run".to_string(), "r1".to_string()),
        ]
        .into(),
        pinned: true,
        // Imported with its time.
        occurred_at: Some(prost_types::Timestamp {
            seconds: 1_683_122_700,
            nanos: 0,
        }),
        ..user("Build me a plan. 日本語 ✓")
    };
    let failed = proto::Message {
        role: proto::Role::Assistant as i32,
        error: Some(proto::LlmError {
            code: "timeout".into(),
            message: "deadline exceeded".into(),
            partial_output: "Step 1:".into(),
        }),
        response_id: "resp_123".into(),
        ..Default::default()
    };
    let ui_event = proto::Message {
        exclude_from_context: true,
        ..user("clicked retry")
    };
    let sent = vec![opener, failed, ui_event];
    app.append_ok("fields", sent.clone()).await;
    let stored = app.all_messages("fields").await.unwrap();
    for (i, (stored, sent)) in stored.into_iter().zip(sent).enumerate() {
        assert_eq!(stored.sequence, i as u64 + 1);
        assert!(stored.created_at.is_some());
        // Without a time of its own, a message happened when it was appended.
        let occurred_at = match sent.occurred_at {
            Some(_) => stored.occurred_at,
            None => {
                assert_eq!(stored.occurred_at, stored.created_at);
                None
            }
        };
        let stored = proto::Message {
            sequence: 0,
            created_at: None,
            occurred_at,
            tokens: None,
            reasoning_tokens: None,
            ..stored
        };
        assert_eq!(stored, sent);
    }
}
