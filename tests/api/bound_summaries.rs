//! Caller summaries and memories stay bound to what was prepared (Hardening V, docs/api.md,
//! "Summaries"): a summary or memory made from a request prepared before a redaction or rewind
//! is refused, first or later, with `expected_log_changes` or without it, and the removed text
//! never reaches a pack. Eight cases, on both stores.

use ctxd::proto;
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, assistant, spawn_app, user},
};

contract_tests!(
    no_caller_summary_or_memory_prepared_before_a_removal_brings_its_text_back,
    a_caller_summary_prepared_after_the_removal_is_stored,
);

const SECRET: &str = "4111-1111-1111-1111";

async fn prepare(app: &TestApp, conversation: &str) -> proto::PreparedRequest {
    let request = proto::SummarizeRequest {
        conversation_id: conversation.into(),
        mode: proto::SummarizeMode::Prepare as i32,
        keep_recent_tokens: 1,
        ..Default::default()
    };
    let response = app.client.clone().summarize(request).await.unwrap().into_inner();
    response.prepared.expect("a prepared request")
}

/// What the caller's model made of `prepared`: it holds the secret the prepared request held.
fn provided(
    conversation: &str,
    prepared: &proto::PreparedRequest,
    base: u64,
    expected_log_changes: Option<u64>,
) -> proto::SummarizeRequest {
    let text = match prepared.rendered.contains(SECRET) {
        true => format!("The user's card is {SECRET}."),
        false => "The user booked a trip.".to_string(),
    };
    proto::SummarizeRequest {
        conversation_id: conversation.into(),
        mode: proto::SummarizeMode::Provided as i32,
        summary_text: text,
        through_sequence: prepared.through_sequence,
        expected_through_sequence: Some(base),
        expected_log_changes,
        ..Default::default()
    }
}

/// A conversation with a first summary through message 2, then a turn holding the secret and
/// more turns after it, none summarized yet. Returns the summary's watermark.
async fn with_a_first_summary(app: &TestApp, conversation: &str) -> u64 {
    app.append_ok(conversation, vec![user("Plan a trip."), assistant("Where to?")])
        .await;
    let first = prepare(app, conversation).await;
    let request = provided(conversation, &first, 0, Some(first.log_changes));
    let stored = app.client.clone().summarize(request).await.unwrap().into_inner();
    let base = stored.summary.expect("first summary").through_sequence;
    app.append_ok(
        conversation,
        vec![
            user(&format!("Charge my card {SECRET}.")),
            assistant("Charged."),
            user("Thanks."),
            assistant("You are welcome."),
            user("Book the hotel too."),
            assistant("Booked."),
        ],
    )
    .await;
    base
}

/// The secret's sequence: message 3 of [`with_a_first_summary`].
const SECRET_AT: u64 = 3;

async fn redact(app: &TestApp, conversation: &str) {
    let request = proto::RedactMessageRequest {
        conversation_id: conversation.into(),
        sequence: SECRET_AT,
    };
    app.client.clone().redact_message(request).await.unwrap();
}

async fn rewind(app: &TestApp, conversation: &str) {
    let request = proto::RewindConversationRequest {
        conversation_id: conversation.into(),
        after_sequence: SECRET_AT - 1,
        expected_last_sequence: None,
    };
    app.client.clone().rewind_conversation(request).await.unwrap();
    app.append_ok(
        conversation,
        vec![
            user("Charge the card on file."),
            assistant("Charged."),
            user("Thanks."),
            assistant("You are welcome."),
            user("Book the hotel too."),
            assistant("Booked."),
        ],
    )
    .await;
}

async fn pack_holds_the_secret(app: &TestApp, conversation: &str) -> bool {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: 20_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    let pack = app
        .client
        .clone()
        .build_context(request)
        .await
        .unwrap()
        .into_inner();
    pack.rendered.contains(SECRET)
}

fn memory_update(conversation: &str, expected_log_changes: Option<u64>) -> proto::UpdateWorkingMemoryRequest {
    proto::UpdateWorkingMemoryRequest {
        conversation_id: conversation.into(),
        memory: Some(proto::WorkingMemory {
            decisions: vec![proto::MemoryItem {
                text: format!("Card {SECRET} on file."),
                source_sequences: vec![SECRET_AT],
                ..Default::default()
            }],
            ..Default::default()
        }),
        expected_version: None,
        expected_log_changes,
    }
}

async fn no_caller_summary_or_memory_prepared_before_a_removal_brings_its_text_back(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut cases = 0;
    // Later summaries (one exists): prepared, then a redaction or a rewind of a message they
    // cover, then sent with the honest value or without one.
    for (removal, expected_given) in [
        ("redact", false),
        ("redact", true),
        ("rewind", false),
        ("rewind", true),
    ] {
        let conversation = format!("later-{removal}-{expected_given}");
        let base = with_a_first_summary(&app, &conversation).await;
        let prepared = prepare(&app, &conversation).await;
        assert!(
            prepared.rendered.contains(SECRET),
            "the prepared request reads the secret"
        );
        match removal {
            "redact" => redact(&app, &conversation).await,
            _ => rewind(&app, &conversation).await,
        }
        let expected = expected_given.then_some(prepared.log_changes);
        let request = provided(&conversation, &prepared, base, expected);
        let status = app.client.clone().summarize(request).await.unwrap_err();
        assert_eq!(status.code(), Code::Aborted, "{conversation}: {status:?}");
        assert!(
            !pack_holds_the_secret(&app, &conversation).await,
            "{conversation}"
        );
        cases += 1;
    }
    // A first summary of a conversation redacted after the prepare, with and without the value.
    for expected_given in [false, true] {
        let conversation = format!("first-{expected_given}");
        app.append_ok(
            &conversation,
            vec![
                user("Plan a trip."),
                assistant("Where to?"),
                user(&format!("Charge my card {SECRET}.")),
                assistant("Charged."),
                user("Thanks."),
                assistant("Welcome."),
            ],
        )
        .await;
        let prepared = prepare(&app, &conversation).await;
        redact(&app, &conversation).await;
        let request = provided(
            &conversation,
            &prepared,
            0,
            expected_given.then_some(prepared.log_changes),
        );
        let status = app.client.clone().summarize(request).await.unwrap_err();
        assert_eq!(status.code(), Code::Aborted, "{conversation}: {status:?}");
        assert!(
            !pack_holds_the_secret(&app, &conversation).await,
            "{conversation}"
        );
        cases += 1;
    }
    // Working memory, first and later, after a redaction, sent without the value.
    for later in [false, true] {
        let conversation = format!("memory-{later}");
        with_a_first_summary(&app, &conversation).await;
        if later {
            let mut first = memory_update(&conversation, None);
            first.memory.as_mut().unwrap().decisions[0].text = "Books hotels.".into();
            first.memory.as_mut().unwrap().decisions[0].source_sequences = vec![1];
            app.client.clone().update_working_memory(first).await.unwrap();
        }
        redact(&app, &conversation).await;
        let status = app
            .client
            .clone()
            .update_working_memory(memory_update(&conversation, None))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Aborted, "{conversation}: {status:?}");
        assert!(
            !pack_holds_the_secret(&app, &conversation).await,
            "{conversation}"
        );
        cases += 1;
    }
    assert_eq!(cases, 8);
}

async fn a_caller_summary_prepared_after_the_removal_is_stored(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let base = with_a_first_summary(&app, "after").await;
    redact(&app, "after").await;
    let prepared = prepare(&app, "after").await;
    assert_eq!(prepared.log_changes, 1);
    assert!(!prepared.rendered.contains(SECRET));
    // Without the value it is refused: nothing tells what the model read.
    let status = app
        .client
        .clone()
        .summarize(provided("after", &prepared, base, None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    let request = provided("after", &prepared, base, Some(prepared.log_changes));
    let stored = app.client.clone().summarize(request).await.unwrap().into_inner();
    assert_eq!(
        stored.summary.unwrap().through_sequence,
        prepared.through_sequence
    );
    assert!(!pack_holds_the_secret(&app, "after").await);
}
