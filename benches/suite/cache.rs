//! Prompt-cache economics (docs/design.md, "Cache-stable packs"): a long tool-using conversation replayed call by
//! call, the way an agent backend drives ctxd. Before each turn the backend builds its pack
//! with the user's question pending, sends it to the model, then appends the question, the
//! tool calls, their results and the answer. For each history policy and format it prints the
//! share of each pack that repeats the previous call's pack as an exact prefix (what a provider
//! serves from its prompt cache), the budget use, and the input cost under a price model where
//! cached input costs 0.1x; and how many user turns each pack holds, cache-stable with and
//! without clearing older tool results, and newest-that-fits with clearing.

use ctxd::proto::{self, context_service_client::ContextServiceClient};
use tonic::transport::Channel;

use crate::{Scale, replica::Replica};

/// The budget of every pack: the history outgrows it within the first dozen turns.
const BUDGET: u32 = 6_000;
/// Price of a cached input token relative to an uncached one (Anthropic cache reads, OpenAI
/// cached input on recent models).
const CACHED_PRICE: f64 = 0.1;

pub(crate) async fn run(server: &Replica, scale: Scale) -> anyhow::Result<()> {
    let client = server.client().await?;
    let turns = if scale.samples < 100 { 80 } else { 300 };
    println!(
        "# prompt-cache economics: {turns} turns with tool calls, budget {BUDGET}, cached input at {CACHED_PRICE}x"
    );
    println!(
        "{:<22} {:<10} {:>11} {:>13} {:>11} {:>11} {:>11} {:>12}",
        "policy",
        "format",
        "user turns",
        "median reuse",
        "mean reuse",
        "budget use",
        "cost ratio",
        "jumps/calls"
    );
    // Context editing (docs/design.md, "Context editing"): the same loop with older tool
    // results cleared, the three newest kept.
    // Conversations of their own on every run, as the database may be reused.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let clearing = proto::ClearToolResults {
        keep_recent: 3,
        ..Default::default()
    };
    for format in [proto::Format::OpenaiChat, proto::Format::AnthropicMessages] {
        for (policy, clear) in [
            (proto::HistoryPolicy::CacheStable, None),
            (proto::HistoryPolicy::CacheStable, Some(clearing.clone())),
            (proto::HistoryPolicy::Newest, None),
            (proto::HistoryPolicy::Newest, Some(clearing.clone())),
        ] {
            let conversation = format!(
                "cache-{run}-{}-{}-{}",
                format as i32,
                policy as i32,
                clear.is_some()
            );
            let variant = Variant {
                format,
                policy,
                clear,
            };
            let calls = replay(&client, &conversation, turns, &variant).await?;
            report(&variant, &calls);
        }
    }
    Ok(())
}

/// What a replay asks for.
struct Variant {
    format: proto::Format,
    policy: proto::HistoryPolicy,
    clear: Option<proto::ClearToolResults>,
}

/// One call: the share of its rendered pack that repeats the previous pack, its tokens, the
/// budget, and whether its history moved.
struct Call {
    reuse: f64,
    tokens: u32,
    budget: u32,
    jumped: bool,
    /// User messages of the log the pack holds (verbatim: user messages are never cleared).
    user_turns: usize,
}

fn report(variant: &Variant, calls: &[Call]) {
    let (policy, format) = (variant.policy, variant.format);
    let mut turns: Vec<usize> = calls.iter().map(|c| c.user_turns).collect();
    turns.sort_unstable();
    let median_turns = turns[turns.len() / 2];
    let mut reuse: Vec<f64> = calls.iter().map(|c| c.reuse).collect();
    reuse.sort_by(f64::total_cmp);
    let mean = |values: &mut dyn Iterator<Item = f64>| {
        let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
        sum / n.max(1) as f64
    };
    let median = reuse[reuse.len() / 2];
    let mean_reuse = mean(&mut reuse.iter().copied());
    let used = mean(&mut calls.iter().map(|c| f64::from(c.tokens) / f64::from(c.budget)));
    // Input cost of each pack: the repeated part at the cached price, the rest in full; as a
    // ratio of the same packs' cost without any caching.
    let full: f64 = calls.iter().map(|c| f64::from(c.tokens)).sum();
    let cached: f64 = calls
        .iter()
        .map(|c| f64::from(c.tokens) * (c.reuse * CACHED_PRICE + (1.0 - c.reuse)))
        .sum();
    let jumps = calls.iter().filter(|c| c.jumped).count();
    let policy = match (policy, &variant.clear) {
        (proto::HistoryPolicy::Newest, None) => "newest".to_string(),
        (proto::HistoryPolicy::Newest, Some(c)) => format!("newest, clear {}", c.keep_recent),
        (_, None) => "cache-stable".to_string(),
        (_, Some(c)) => format!("cache-stable, clear {}", c.keep_recent),
    };
    let format = match format {
        proto::Format::AnthropicMessages => "anthropic",
        _ => "openai",
    };
    println!(
        "{policy:<22} {format:<10} {median_turns:>11} {median:>13.3} {mean_reuse:>11.3} {used:>11.3} {:>11.3} {:>12}",
        cached / full,
        format!("{jumps}/{}", calls.len())
    );
}

/// The rendered pack without Anthropic's cache breakpoints, which move to the newest messages
/// on every call and are not part of the cached content.
fn cached_content(rendered: &str) -> String {
    rendered.replace(r#""cache_control":{"type":"ephemeral"},"#, "")
}

async fn replay(
    client: &ContextServiceClient<Channel>,
    conversation: &str,
    turns: usize,
    variant: &Variant,
) -> anyhow::Result<Vec<Call>> {
    let (format, policy) = (variant.format, variant.policy);
    let mut client = client.clone();
    let mut rng = 0x00c0_ffee_u64;
    let mut below = |n: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % n
    };
    let mut previous: Option<(String, u64)> = None;
    let mut calls = Vec::with_capacity(turns);
    for turn in 0..turns {
        let question = message(
            proto::Role::User,
            format!(
                "Turn {turn}: {}",
                "please look into the failing ledger job and ".repeat(1 + below(6) as usize)
            ),
        );
        let request = proto::BuildContextRequest {
            conversation_id: conversation.into(),
            budget: Some(proto::Budget {
                max_tokens: BUDGET,
                reserve_output_tokens: 0,
                ..Default::default()
            }),
            system_prompt:
                "You are the on-call assistant of the payments team. Use the tools to inspect jobs, \
                            logs and tables before answering, and say what you checked."
                    .into(),
            pending_messages: vec![question.clone()],
            format: format as i32,
            history_policy: policy as i32,
            clear_tool_results: variant.clear.clone(),
            ..Default::default()
        };
        if turn > 0 {
            let pack = client.build_context(request).await?.into_inner();
            let user_turns = pack
                .messages
                .iter()
                .filter(|m| {
                    m.source == proto::ContextSource::History as i32 && m.role == proto::Role::User as i32
                })
                .count();
            let stats = pack.stats.unwrap_or_default();
            let rendered = cached_content(&pack.rendered);
            if let Some((before, start)) = &previous {
                let common = rendered
                    .bytes()
                    .zip(before.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                calls.push(Call {
                    reuse: common as f64 / rendered.len() as f64,
                    tokens: stats.total_tokens,
                    budget: stats.budget_tokens,
                    jumped: *start != stats.oldest_included_sequence,
                    user_turns,
                });
            }
            previous = Some((rendered, stats.oldest_included_sequence));
        }
        let mut messages = vec![question];
        for step in 0..=below(3) {
            let id = format!("call-{turn}-{step}");
            messages.push(proto::Message {
                role: proto::Role::Assistant as i32,
                tool_calls: vec![proto::ToolCall {
                    id: id.clone(),
                    name: "query_logs".into(),
                    arguments: format!(r#"{{"job":"ledger-{turn}","step":{step}}}"#),
                    ..Default::default()
                }],
                ..Default::default()
            });
            let lines = 2 + below(25) as usize;
            let output = (0..lines)
                .map(|l| {
                    format!(
                        "2026-11-23T10:{:02}:{:02} ledger-{turn} worker {l} status ok rows {}",
                        l % 60,
                        step,
                        below(9000)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            messages.push(proto::Message {
                role: proto::Role::Tool as i32,
                tool_call_id: id,
                content: output,
                ..Default::default()
            });
        }
        messages.push(message(
            proto::Role::Assistant,
            format!(
                "I checked the job logs for turn {turn}. {}",
                "The ledger rows reconcile. ".repeat(1 + below(5) as usize)
            ),
        ));
        client
            .append_message(proto::AppendMessageRequest {
                conversation_id: conversation.into(),
                messages,
                ..Default::default()
            })
            .await?;
    }
    Ok(calls)
}

fn message(role: proto::Role, content: String) -> proto::Message {
    proto::Message {
        role: role as i32,
        content,
        ..Default::default()
    }
}
