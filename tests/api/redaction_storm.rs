//! Server-side summaries and refreshes converge while other messages are being redacted over
//! and over: a redaction of a message they did not read is not a conflict to hand the caller
//! (the redaction count and the memory version move, what they were made from does not).

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use ctxd::proto::{self, SummarizeMode};
use tonic::Code;

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, assistant, spawn_app, user},
};

contract_tests!(summaries_and_refreshes_converge_under_a_redaction_storm);

const ROUNDS: usize = 12;

/// Redacts `sequence` of `conversation` again and again until `stop`.
fn storm(
    app: &TestApp,
    conversation: &'static str,
    sequence: u64,
    stop: Arc<AtomicBool>,
) -> (tokio::task::JoinHandle<usize>, Arc<AtomicUsize>) {
    let mut client = app.client.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let counted = done.clone();
    let task = tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let request = proto::RedactMessageRequest {
                conversation_id: conversation.into(),
                sequence,
            };
            if client.redact_message(request).await.is_ok() {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        }
        counted.load(Ordering::Relaxed)
    });
    (task, done)
}

/// Waits (at most 5 s) until the storm has redacted past `seen`, so that the call that follows
/// meets a storm that runs, however the scheduler shares the machine; returns the count.
async fn storm_moved(done: &AtomicUsize, seen: usize) -> usize {
    for _ in 0..500 {
        let now = done.load(Ordering::Relaxed);
        if now > seen {
            return now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    done.load(Ordering::Relaxed)
}

fn turn(round: usize) -> Vec<proto::Message> {
    (0..10)
        .flat_map(|i| {
            [
                user(&format!(
                    "round {round} question {i}: what about the ledger migration?"
                )),
                assistant(&format!("round {round} answer {i}: we move it in batches.")),
            ]
        })
        .collect()
}

async fn summaries_and_refreshes_converge_under_a_redaction_storm(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();

    // Summaries keep the newest turns verbatim; the storm redacts the newest message, which
    // no summary step reads.
    app.append_ok("s", turn(0)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut aborted = 0;
    let mut redactions = 0;
    for round in 1..=ROUNDS {
        app.append_ok("s", turn(round)).await;
        let newest = app.all_messages("s").await.unwrap().len() as u64;
        let stop_round = Arc::new(AtomicBool::new(false));
        let (redacting, _) = storm(&app, "s", newest, stop_round.clone());
        tokio::task::yield_now().await;
        let result = client
            .summarize(proto::SummarizeRequest {
                conversation_id: "s".into(),
                mode: SummarizeMode::Server as i32,
                keep_recent_tokens: 200,
                ..Default::default()
            })
            .await;
        stop_round.store(true, Ordering::Relaxed);
        redactions += redacting.await.unwrap();
        match result {
            Ok(response) => assert!(response.into_inner().changed, "round {round}: nothing folded"),
            Err(status) if status.code() == Code::Aborted => aborted += 1,
            Err(status) => panic!("round {round}: {status:?}"),
        }
    }
    println!("{kind:?}: {ROUNDS} SERVER summaries during {redactions} redactions: {aborted} ABORTED");
    assert_eq!(
        aborted, 0,
        "summaries starved by redactions of messages they did not read"
    );

    // Refreshes read what is past the memory's watermark; the storm redacts the first
    // message, which the memory has read and does not cite.
    let mut aborted = 0;
    app.append_ok("m", vec![user("hello there"), assistant("hi")])
        .await;
    app.refreshed_memory("m").await;
    let (redacting, done) = storm(&app, "m", 1, stop.clone());
    let mut seen = 0;
    for round in 1..=ROUNDS {
        app.append_ok(
            "m",
            vec![
                user(&format!(
                    "Decision {round}: we will use AWS DMS for batch {round}."
                )),
                assistant("Noted."),
            ],
        )
        .await;
        seen = storm_moved(&done, seen).await;
        let result = client
            .get_working_memory(proto::GetWorkingMemoryRequest {
                conversation_id: "m".into(),
                refresh: true,
                prepare: false,
            })
            .await;
        match result {
            Ok(_) => {}
            Err(status) if status.code() == Code::Aborted => aborted += 1,
            Err(status) => panic!("round {round}: {status:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let redactions = redacting.await.unwrap();
    println!("{kind:?}: {ROUNDS} refreshes during {redactions} redactions: {aborted} ABORTED");
    assert!(
        redactions >= ROUNDS,
        "the storm hardly ran: {redactions} redactions"
    );
    assert_eq!(
        aborted, 0,
        "refreshes starved by redactions of messages they did not read"
    );
}
