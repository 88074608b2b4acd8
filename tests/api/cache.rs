//! Cache-stable packs through gRPC (docs/design.md, "Cache-stable packs"): a tool loop replayed call by call, the
//! packs of consecutive calls compared byte for byte, and the same bytes from every store and
//! replica.

use ctxd::proto;

use crate::{
    contract_tests,
    helpers::{
        StoreKind, TestApp, assistant, assistant_calling, fresh_database, spawn_app, spawn_on, tool_result,
        user,
    },
};

contract_tests!(cache_stable_packs_repeat_the_previous_pack_until_history_jumps);

const BUDGET: u32 = 1500;

fn request(
    conversation: &str,
    format: proto::Format,
    policy: proto::HistoryPolicy,
) -> proto::BuildContextRequest {
    proto::BuildContextRequest {
        conversation_id: conversation.into(),
        budget: Some(proto::Budget {
            max_tokens: BUDGET,
            ..Default::default()
        }),
        system_prompt: "You are the build assistant of the ledger team.".into(),
        format: format as i32,
        history_policy: policy as i32,
        ..Default::default()
    }
}

/// The rendered pack without its Anthropic cache breakpoints, which move to the newest
/// messages on every call and are not part of what the provider caches.
fn cached_content(rendered: &str) -> String {
    rendered.replace(r#""cache_control":{"type":"ephemeral"},"#, "")
}

/// Turn `turn` of a tool loop: the user's question, then the assistant's call, its result and
/// the answer.
fn turn(turn: usize) -> (proto::Message, Vec<proto::Message>) {
    let id = format!("call-{turn}");
    let question = user(&format!(
        "Step {turn}: check the ledger partition {turn} and report. {}",
        "Details follow. ".repeat(turn % 7)
    ));
    let rest = vec![
        assistant_calling(&[&id]),
        tool_result(
            &id,
            &format!("partition {turn}: {}", "row ok; ".repeat(10 + (turn * 13) % 40)),
        ),
        assistant(&format!(
            "Partition {turn} is consistent. {}",
            "Noted. ".repeat(turn % 5)
        )),
    ];
    (question, rest)
}

/// Replays a 60-turn tool loop: before each turn the backend builds its pack with the
/// question pending, then appends the turn. Returns, per call after the first, whether the
/// previous pack was an exact prefix of this one (closing bracket aside), and the packs' stats.
async fn replay(
    app: &TestApp,
    conversation: &str,
    format: proto::Format,
    policy: proto::HistoryPolicy,
) -> Vec<(bool, proto::ContextStats)> {
    let mut client = app.client.clone();
    let mut previous: Option<String> = None;
    let mut calls = Vec::new();
    for n in 0..60 {
        let (question, rest) = turn(n);
        let mut request = request(conversation, format, policy);
        request.pending_messages = vec![question.clone()];
        let pack = match n {
            0 => None,
            _ => Some(
                client
                    .build_context(request)
                    .await
                    .expect("pack builds")
                    .into_inner(),
            ),
        };
        if let Some(pack) = pack {
            let stats = pack.stats.expect("stats");
            assert!(!stats.over_budget && stats.total_tokens <= BUDGET);
            let rendered = cached_content(&pack.rendered);
            if let Some(before) = &previous {
                calls.push((rendered.starts_with(&before[..before.len() - 2]), stats));
            }
            previous = Some(rendered);
        }
        let mut messages = vec![question];
        messages.extend(rest);
        app.append_ok(conversation, messages).await;
    }
    calls
}

async fn cache_stable_packs_repeat_the_previous_pack_until_history_jumps(kind: StoreKind) {
    let app = spawn_app(kind).await;
    for format in [proto::Format::OpenaiChat, proto::Format::AnthropicMessages] {
        let name = format!("loop-{}", format as i32);
        let stable = replay(
            &app,
            &format!("{name}-stable"),
            format,
            proto::HistoryPolicy::Unspecified,
        )
        .await;
        let newest = replay(
            &app,
            &format!("{name}-newest"),
            format,
            proto::HistoryPolicy::Newest,
        )
        .await;
        let overflowing = |calls: &[(bool, proto::ContextStats)]| {
            calls.iter().filter(|(_, s)| s.messages_dropped > 0).count()
        };
        assert!(overflowing(&stable) > 30, "the history outgrows the budget early");
        let repeated = |calls: &[(bool, proto::ContextStats)]| calls.iter().filter(|(same, _)| *same).count();
        let (stable_repeats, newest_repeats) = (repeated(&stable), repeated(&newest));
        assert!(
            stable_repeats * 10 >= stable.len() * 7,
            "{format:?}: {stable_repeats} of {} packs repeat the previous one",
            stable.len()
        );
        assert!(
            newest_repeats * 10 <= newest.len() * 3,
            "{format:?}: newest-that-fits slides: {newest_repeats}"
        );
        // A pack repeats its predecessor exactly when its history did not jump, and says so.
        for window in stable.windows(2) {
            let [(_, before), (same, after)] = window else {
                unreachable!()
            };
            if after.oldest_included_sequence == before.oldest_included_sequence
                && after.summary_through_sequence == before.summary_through_sequence
            {
                assert!(
                    same,
                    "{format:?}: history stayed at {} but the pack changed",
                    after.oldest_included_sequence
                );
                assert!(after.stable_prefix_tokens >= before.stable_prefix_tokens);
            }
            if after.messages_dropped > 0 {
                assert!(after.history_step_tokens > 0 && after.history_step_tokens.is_power_of_two());
            }
        }
        let used: f64 = stable
            .iter()
            .map(|(_, s)| f64::from(s.total_tokens) / f64::from(s.budget_tokens))
            .sum::<f64>()
            / stable.len() as f64;
        assert!(
            used >= 0.6,
            "{format:?}: packs use {used:.2} of the budget on average"
        );
        assert!(newest.iter().all(|(_, s)| s.history_step_tokens == 0));
    }
}

/// Same log, same request: the same bytes from the in-memory store, and from two replicas on
/// one PostgreSQL database, for every format and policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_store_and_replica_builds_the_same_bytes() {
    let url = fresh_database().await;
    let memory = spawn_on(None, &[]).await;
    let first = spawn_on(Some(url.clone()), &[]).await;
    let second = spawn_on(Some(url), &[]).await;
    for n in 0..40 {
        let (question, rest) = turn(n);
        let mut messages = vec![question];
        messages.extend(rest);
        memory.append_ok("same", messages.clone()).await;
        first.append_ok("same", messages).await;
    }
    for format in [proto::Format::OpenaiChat, proto::Format::AnthropicMessages] {
        for policy in [proto::HistoryPolicy::CacheStable, proto::HistoryPolicy::Newest] {
            let mut packs = Vec::new();
            for app in [&memory, &first, &second] {
                let pack = app
                    .client
                    .clone()
                    .build_context(request("same", format, policy))
                    .await
                    .unwrap()
                    .into_inner();
                packs.push((pack.rendered, pack.stats));
            }
            assert!(packs[0].1.as_ref().unwrap().messages_dropped > 0);
            assert_eq!(packs[0], packs[1], "{format:?} {policy:?}: memory and PostgreSQL");
            assert_eq!(packs[1], packs[2], "{format:?} {policy:?}: two replicas");
        }
    }
}
