//! Summarize: the no-gap rule, forward-only watermarks, the three modes, and BuildContext's use
//! of the summary. On both stores.

use std::collections::HashSet;

use ctxd::proto::{self, ContextSource, SummarizeMode};
use serde_json::Value;
use tonic::Code;
use tonic_types::StatusExt;

use crate::{
    contract_tests,
    helpers::{
        StoreKind, TestApp, assert_field_violation, assistant, assistant_calling, spawn_app, spawn_app_with,
        tool_result, user,
    },
};

contract_tests!(
    a_server_summary_folds_old_history_and_build_context_continues_after_it,
    summaries_and_appends_interleaved_never_leave_a_gap,
    prepare_stores_nothing_and_provided_stores_the_callers_summary,
    prepare_steps_over_a_tool_group_larger_than_the_model_context,
    a_stale_provided_summary_is_aborted_and_changes_nothing,
    a_provided_summary_may_not_split_a_tool_group,
    concurrent_server_summaries_leave_one_consistent_result,
    needs_summary_agrees_with_what_summarize_folds_in,
    background_summarization_folds_history_past_the_threshold,
    a_summary_larger_than_the_budget_is_cut_never_dropped,
);

fn summarize(conversation: &str, keep_recent_tokens: u32) -> proto::SummarizeRequest {
    proto::SummarizeRequest {
        conversation_id: conversation.into(),
        keep_recent_tokens,
        ..Default::default()
    }
}

async fn run(app: &TestApp, request: proto::SummarizeRequest) -> proto::SummarizeResponse {
    app.client
        .clone()
        .summarize(request)
        .await
        .expect("summarize succeeds")
        .into_inner()
}

async fn build(app: &TestApp, conversation: &str, max_tokens: u32) -> proto::BuildContextResponse {
    let request = proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens,
            ..Default::default()
        }),
        ..Default::default()
    };
    app.client
        .clone()
        .build_context(request)
        .await
        .expect("build succeeds")
        .into_inner()
}

async fn seed(app: &TestApp, conversation: &str, turns: usize) {
    for t in 0..turns {
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = format!("{conversation}-call-{n}");
        app.append_ok(
            conversation,
            vec![
                user(&format!(
                    "Turn {t}: we decided to use option {t}. The budget must stay under {t}00 euros."
                )),
                assistant_calling(&[&call]),
                tool_result(&call, &format!("lookup {t} returned 42 rows")),
                proto::Message {
                    role: proto::Role::Assistant as i32,
                    content: format!("Done with turn {t}."),
                    ..Default::default()
                },
            ],
        )
        .await;
    }
}

async fn a_server_summary_folds_old_history_and_build_context_continues_after_it(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "s", 10).await;
    let response = run(&app, summarize("s", 100)).await;
    assert!(response.changed);
    let summary = response.summary.unwrap();
    assert_eq!((summary.summarizer.as_str(), summary.version), ("extractive", 1));
    let through = summary.through_sequence;
    assert!(through > 0 && through < 40, "{through}");
    assert!(summary.text.contains("[#1] User: Turn 0"), "{}", summary.text);

    let pack = build(&app, "s", 100_000).await;
    let stats = pack.stats.unwrap();
    assert_eq!(stats.summary_through_sequence, through);
    assert_eq!(
        stats.oldest_included_sequence,
        through + 1,
        "history starts right after the summary"
    );
    assert_eq!(pack.messages[0].source(), ContextSource::Summary);
    assert!(!pack.needs_summary);
    // Nothing left to fold while the kept window is under keep_recent_tokens.
    let again = run(&app, summarize("s", 100)).await;
    assert!(!again.changed);
    assert_eq!(again.summary.unwrap().version, 1);
}

async fn summaries_and_appends_interleaved_never_leave_a_gap(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut watermark = 0;
    for round in 0..12 {
        seed(&app, "gap", 1 + round % 3).await;
        let response = run(&app, summarize("gap", [0, 20, 60, 200][round % 4])).await;
        let through = response.summary.map_or(0, |s| s.through_sequence);
        assert!(
            through >= watermark,
            "watermark moved backward: {watermark} -> {through}"
        );
        watermark = through;
        let pack = build(&app, "gap", 1_000_000).await;
        let stats = pack.stats.unwrap();
        let sequences: Vec<u64> = pack
            .messages
            .iter()
            .map(|m| m.sequence)
            .filter(|s| *s > 0)
            .collect();
        // The current turn is always verbatim, so it may overlap the summary; a hole never.
        let first = sequences.first().copied().unwrap_or(stats.log_last_sequence + 1);
        assert!(
            first <= watermark + 1,
            "hole between the summary (1..={watermark}) and history at {first}"
        );
        let expected: Vec<u64> = (first..=stats.log_last_sequence).collect();
        assert_eq!(
            sequences, expected,
            "summary 1..={watermark} + verbatim history = every message"
        );
        assert_eq!(stats.summary_through_sequence, watermark);
    }
    assert!(watermark > 0);
}

async fn prepare_stores_nothing_and_provided_stores_the_callers_summary(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "byo", 6).await;
    let prepared = run(
        &app,
        proto::SummarizeRequest {
            mode: SummarizeMode::Prepare as i32,
            ..summarize("byo", 50)
        },
    )
    .await;
    assert!(!prepared.changed && prepared.summary.is_none());
    let request = prepared.prepared.unwrap();
    assert_eq!(request.base_through_sequence, 0);
    let rendered: Vec<Value> = serde_json::from_str(&request.rendered).unwrap();
    assert_eq!(
        (rendered[0]["role"].as_str(), rendered[1]["role"].as_str()),
        (Some("system"), Some("user"))
    );
    assert!(
        rendered[0]["content"]
            .as_str()
            .unwrap()
            .contains("Open questions")
    );
    assert!(
        rendered[1]["content"]
            .as_str()
            .unwrap()
            .contains("[#1 user] Turn 0")
    );
    assert_eq!(request.messages.len(), 2);

    let provided = run(
        &app,
        proto::SummarizeRequest {
            mode: SummarizeMode::Provided as i32,
            summary_text: "Goals: ship. Decisions: option 3.".into(),
            through_sequence: request.through_sequence,
            expected_through_sequence: Some(request.base_through_sequence),
            ..summarize("byo", 0)
        },
    )
    .await;
    let summary = provided.summary.unwrap();
    assert!(provided.changed);
    assert_eq!(
        (summary.summarizer.as_str(), summary.through_sequence),
        ("provided", request.through_sequence)
    );
    assert!(summary.tokens > 0);
}

/// PREPARE's steps always end where a provided summary may end: a tool group too large for the
/// model's context is one step, its results cut to fit, never split.
async fn prepare_steps_over_a_tool_group_larger_than_the_model_context(kind: StoreKind) {
    let app = spawn_app_with(kind, &["--openai-context-tokens", "4096"]).await;
    let file = "fn main() { println!(\"hello\"); }\n".repeat(400);
    let mut messages = vec![user("Read the three files.")];
    messages.push(assistant_calling(&["read-a", "read-b", "read-c"]));
    for id in ["read-a", "read-b", "read-c"] {
        messages.push(tool_result(id, &file));
    }
    messages.push(assistant("They print hello."));
    messages.push(user("Thanks."));
    app.append_ok("big-group", messages).await;
    let mut steps = Vec::new();
    loop {
        let prepared = run(
            &app,
            proto::SummarizeRequest {
                mode: SummarizeMode::Prepare as i32,
                ..summarize("big-group", 1)
            },
        )
        .await;
        let Some(request) = prepared.prepared else {
            break;
        };
        let rendered: Vec<Value> = serde_json::from_str(&request.rendered).unwrap();
        let transcript = rendered[1]["content"].as_str().unwrap();
        // The request fits the context, counted by a real tokenizer (with 8 tokens of chat
        // framing per message).
        let counted: usize = request
            .messages
            .iter()
            .map(|m| ctxd::domain::tokenize::Tokenizer::Cl100kBase.count(&m.content) + 8)
            .sum();
        assert!(
            counted + request.max_output_tokens as usize <= 4_096,
            "{counted} tokens and {} for the answer",
            request.max_output_tokens
        );
        steps.push((request.through_sequence, transcript.contains("cut to fit")));
        run(
            &app,
            proto::SummarizeRequest {
                mode: SummarizeMode::Provided as i32,
                summary_text: format!("Step {}.", steps.len()),
                through_sequence: request.through_sequence,
                expected_through_sequence: Some(request.base_through_sequence),
                ..summarize("big-group", 0)
            },
        )
        .await;
        assert!(steps.len() < 10, "steps advance: {steps:?}");
    }
    assert!(
        steps.iter().any(|&(through, cut)| through == 5 && cut),
        "the group (2 to 5) was one step, its results cut: {steps:?}"
    );
    assert_eq!(steps.last().map(|s| s.0), Some(6), "{steps:?}");
}

async fn a_stale_provided_summary_is_aborted_and_changes_nothing(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "stale", 6).await;
    let prepared = run(
        &app,
        proto::SummarizeRequest {
            mode: SummarizeMode::Prepare as i32,
            ..summarize("stale", 50)
        },
    )
    .await
    .prepared
    .unwrap();
    // Someone else summarizes first.
    let server = run(&app, summarize("stale", 10)).await.summary.unwrap();
    let status = app
        .client
        .clone()
        .summarize(proto::SummarizeRequest {
            mode: SummarizeMode::Provided as i32,
            summary_text: "late".into(),
            through_sequence: prepared.through_sequence,
            expected_through_sequence: Some(prepared.base_through_sequence),
            ..summarize("stale", 0)
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Aborted);
    let info = status.get_details_error_info().unwrap();
    assert_eq!(
        info.metadata["current_through_sequence"],
        server.through_sequence.to_string()
    );
    let current = run(&app, summarize("stale", 1_000_000)).await.summary.unwrap();
    assert_eq!((current.version, current.text), (server.version, server.text));
}

async fn a_provided_summary_may_not_split_a_tool_group(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "split", 2).await;
    let request = proto::SummarizeRequest {
        mode: SummarizeMode::Provided as i32,
        summary_text: "half a group".into(),
        through_sequence: 2, // the call; its result is 3
        ..summarize("split", 0)
    };
    let status = app.client.clone().summarize(request).await.unwrap_err();
    assert_field_violation(&status, "through_sequence");
    let beyond = proto::SummarizeRequest {
        mode: SummarizeMode::Provided as i32,
        summary_text: "future".into(),
        through_sequence: 99,
        ..summarize("split", 0)
    };
    assert_field_violation(
        &app.client.clone().summarize(beyond).await.unwrap_err(),
        "through_sequence",
    );
}

async fn concurrent_server_summaries_leave_one_consistent_result(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "race", 20).await;
    let mut tasks = Vec::new();
    for keep in [0u32, 10, 40, 80, 160, 320, 640, 1280] {
        let mut client = app.client.clone();
        tasks.push(tokio::spawn(async move {
            client.summarize(summarize("race", keep)).await
        }));
    }
    let mut versions = HashSet::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(response) => {
                let response = response.into_inner();
                if response.changed {
                    assert!(
                        versions.insert(response.summary.unwrap().version),
                        "a version was stored twice"
                    );
                }
            }
            // A summarizer whose cut fell behind the moved watermark may give up after retries.
            Err(status) => assert_eq!(status.code(), Code::Aborted),
        }
    }
    let pack = build(&app, "race", 1_000_000).await;
    let stats = pack.stats.unwrap();
    assert!(
        stats.oldest_included_sequence <= stats.summary_through_sequence + 1,
        "no gap after the race"
    );
    assert!(!pack.needs_summary);
    assert!(!versions.is_empty());
}

async fn needs_summary_agrees_with_what_summarize_folds_in(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "agree", 12).await;
    let small = build(&app, "agree", 300).await;
    assert!(small.needs_summary);
    let keep = small.stats.unwrap().history_tokens;
    let folded = run(&app, summarize("agree", keep)).await;
    assert!(folded.changed, "needs_summary said there is something to fold");

    seed(&app, "fits", 1).await;
    let everything = build(&app, "fits", 10_000).await;
    assert!(!everything.needs_summary);
    let keep = everything.stats.unwrap().history_tokens;
    assert!(
        !run(&app, summarize("fits", keep)).await.changed,
        "nothing dropped, nothing to fold"
    );
}

async fn background_summarization_folds_history_past_the_threshold(kind: StoreKind) {
    let app = crate::helpers::spawn_app_with(kind, &["--auto-summarize-tokens", "150"]).await;
    seed(&app, "auto", 12).await;
    let mut through = 0;
    for _ in 0..100 {
        let stats = build(&app, "auto", 1_000_000).await.stats.unwrap();
        through = stats.summary_through_sequence;
        if through > 0 {
            assert!(stats.oldest_included_sequence <= through + 1, "no gap");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(through > 0, "a background summary was stored");
    let off = spawn_app(kind).await;
    seed(&off, "manual", 12).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        build(&off, "manual", 1_000_000)
            .await
            .stats
            .unwrap()
            .summary_through_sequence,
        0,
        "off by default"
    );
}

/// A summary larger than the budget is cut to fit, with a marker, and says
/// so; it is never left out while the history it covers is missing too.
async fn a_summary_larger_than_the_budget_is_cut_never_dropped(kind: StoreKind) {
    let app = spawn_app(kind).await;
    seed(&app, "big", 4).await;
    let text = (0..2_000)
        .map(|i| format!("Decision {i}: keep option {i}."))
        .collect::<Vec<_>>()
        .join(" ");
    let provided = proto::SummarizeRequest {
        mode: SummarizeMode::Provided as i32,
        summary_text: text,
        through_sequence: 12,
        ..summarize("big", 0)
    };
    run(&app, provided).await;
    let pack = build(&app, "big", 4_000).await;
    let stats = pack.stats.unwrap();
    let summary: Vec<&proto::ContextMessage> = pack
        .messages
        .iter()
        .filter(|m| m.source() == ContextSource::Summary)
        .collect();
    assert_eq!(summary.len(), 1, "the summary is in the pack");
    let content = &summary[0].content;
    assert!(content.contains("Decision 0: keep option 0."), "its beginning");
    assert!(content.contains("Decision 1999: keep option 1999."), "its end");
    assert!(content.contains("part of the summary was cut"), "the marker");
    assert!(stats.summary_cut && !stats.over_budget && !pack.needs_summary);
    assert!(stats.total_tokens <= 4_000, "{}", stats.total_tokens);
    assert_eq!(stats.summary_through_sequence, 12);
    assert_eq!(stats.oldest_included_sequence, 13, "history continues after it");
}
