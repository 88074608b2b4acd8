//! Properties of context assembly (DESIGN.md 2.2, invariants 1-5) over generated conversations:
//! parallel and dangling tool calls, pinned and excluded messages, failed LLM calls, huge tool
//! outputs, unicode, summaries at arbitrary watermarks.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::UNIX_EPOCH,
};

use proptest::prelude::*;

use super::{
    ContextPack, ContextPacker, ContextRequest, ContextSnapshot, Format, Source, SummarySection, TokenBudget,
    TokenCounts,
    cost::{context_text, message_cost_with_text},
    render::render,
};
use crate::{
    domain::{
        ids::{ConversationId, Sequence},
        message::{LlmError, Message, Role, StoredMessage, ToolCall},
    },
    tokenize::{REPLY_PRIMING, Tokenizer},
};

/// One step of a generated conversation.
#[derive(Debug, Clone)]
enum Event {
    User {
        text: String,
        pinned: bool,
        excluded: bool,
    },
    Assistant {
        text: String,
        pinned: bool,
        failed: bool,
    },
    System(String),
    /// An assistant message with `calls` calls, followed by results for those in `answered`.
    Tools {
        calls: usize,
        answered: Vec<bool>,
        output: String,
        huge: bool,
    },
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z ]{1,40}",
        Just("日本語のテキスト 🎉 émoji ✓".to_string()),
        Just("fn main() { println!(\"hi\"); }\n    // code".to_string()),
        Just("     lots   of    whitespace     \n\n\t".to_string()),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (text(), prop::bool::weighted(0.1), prop::bool::weighted(0.15)).prop_map(|(text, pin, excluded)| {
            Event::User { text: if text.is_empty() { "hi".into() } else { text }, pinned: pin && !excluded, excluded }
        }),
        3 => (text(), prop::bool::weighted(0.1), prop::bool::weighted(0.1)).prop_map(|(text, pinned, failed)| {
            Event::Assistant { text: if text.is_empty() && !failed { "ok".into() } else { text }, pinned, failed }
        }),
        1 => text().prop_map(|t| Event::System(if t.is_empty() { "be brief".into() } else { t })),
        3 => (1usize..4, prop::collection::vec(prop::bool::weighted(0.85), 3), text(), prop::bool::weighted(0.2))
            .prop_map(|(calls, answered, output, huge)| Event::Tools { calls, answered, output, huge }),
    ]
}

fn plain(role: Role, content: String) -> Message {
    Message::text(role, content)
}

/// Turns events into a stored log.
fn build_log(events: &[Event]) -> Vec<StoredMessage> {
    let mut messages: Vec<(Message, Option<Sequence>)> = Vec::new();
    for event in events {
        match event.clone() {
            Event::User {
                text,
                pinned,
                excluded,
            } => messages.push((
                Message {
                    pinned,
                    exclude_from_context: excluded,
                    ..plain(Role::User, text)
                },
                None,
            )),
            Event::Assistant { text, pinned, failed } => {
                let error = failed.then(|| LlmError {
                    code: "timeout".into(),
                    message: "deadline exceeded".into(),
                    partial_output: "partial".into(),
                });
                messages.push((
                    Message {
                        pinned,
                        error,
                        ..plain(Role::Assistant, text)
                    },
                    None,
                ));
            }
            Event::System(text) => messages.push((plain(Role::System, text), None)),
            Event::Tools {
                calls,
                answered,
                output,
                huge,
            } => {
                let call_sequence = Sequence::parse(messages.len() as u64 + 1).unwrap();
                let ids: Vec<String> = (0..calls).map(|k| format!("call-{call_sequence}-{k}")).collect();
                let tool_calls = ids
                    .iter()
                    .map(|id| ToolCall {
                        id: id.clone(),
                        name: "lookup".into(),
                        arguments: r#"{"q":"x"}"#.into(),
                    })
                    .collect();
                messages.push((
                    Message {
                        tool_calls,
                        ..plain(Role::Assistant, String::new())
                    },
                    None,
                ));
                for (k, id) in ids.iter().enumerate().rev() {
                    if answered[k] {
                        let content = if huge {
                            format!("{output} {}", "data ".repeat(600))
                        } else {
                            output.clone()
                        };
                        let result = Message {
                            tool_call_id: Some(id.clone()),
                            ..plain(Role::Tool, content)
                        };
                        messages.push((result, Some(call_sequence)));
                    }
                }
            }
        }
    }
    messages
        .into_iter()
        .enumerate()
        .map(|(i, (message, call_sequence))| StoredMessage {
            sequence: Sequence::parse(i as u64 + 1).unwrap(),
            created_at: UNIX_EPOCH,
            tokens: TokenCounts::of(&message),
            call_sequence,
            message,
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Case {
    log: Vec<StoredMessage>,
    max_tokens: u32,
    reserve: u32,
    max_messages: u32,
    max_turns: u32,
    tool_output_max_tokens: u32,
    summary_through: Option<u64>,
    pending_user: Option<String>,
    tokenizer: Tokenizer,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(event(), 0..40),
        1u32..3000,
        0u32..100,
        prop_oneof![3 => Just(0u32), 1 => 1u32..12],
        prop_oneof![3 => Just(0u32), 1 => 1u32..6],
        prop_oneof![Just(0u32), 20u32..200],
        prop::option::weighted(0.3, 0u64..60),
        prop::option::of(text()),
        prop_oneof![4 => Just(Tokenizer::Approx), 1 => Just(Tokenizer::O200kBase), 1 => Just(Tokenizer::Cl100kBase)],
    )
        .prop_map(|(events, max_tokens, reserve, max_messages, max_turns, tool_max, summary, pending, tokenizer)| {
            let log = build_log(&events);
            Case {
                summary_through: summary.map(|s| s.min(log.len() as u64)),
                log,
                max_tokens,
                reserve: reserve.min(max_tokens - 1),
                max_messages,
                max_turns,
                tool_output_max_tokens: tool_max,
                pending_user: pending.map(|t| if t.is_empty() { "next?".into() } else { t }),
                tokenizer,
            }
        })
}

fn request(case: &Case, max_tokens: u32, format: Format) -> ContextRequest {
    ContextRequest {
        conversation_id: ConversationId::parse("prop").unwrap(),
        budget: TokenBudget::parse(
            max_tokens,
            case.reserve.min(max_tokens - 1),
            case.max_messages,
            case.max_turns,
        )
        .unwrap(),
        tokenizer: case.tokenizer,
        system_prompt: "You are a careful assistant.".into(),
        pending: case
            .pending_user
            .iter()
            .map(|t| plain(Role::User, t.clone()))
            .collect(),
        include_summary: true,
        include_memory: true,
        tool_output_max_tokens: (case.tool_output_max_tokens > 0).then_some(case.tool_output_max_tokens),
        format,
    }
}

fn snapshot(case: &Case) -> ContextSnapshot {
    let log = &case.log;
    ContextSnapshot {
        last_sequence: log.last().map_or(Sequence::ZERO, |m| m.sequence),
        last_user_sequence: log
            .iter()
            .rev()
            .find(|m| m.message.role == Role::User && !m.message.exclude_from_context)
            .map(|m| m.sequence),
        last_response_id: None,
        summary: case.summary_through.map(|through| SummarySection {
            text: "Earlier: the user asked about weather.".into(),
            through_sequence: Sequence::parse(through).unwrap(),
        }),
        memory: Some("Goals: plan a trip.".into()),
        pinned: log
            .iter()
            .filter(|m| m.message.pinned && !m.message.exclude_from_context)
            .cloned()
            .collect(),
        pending_calls: HashMap::new(),
    }
}

/// Runs the packer the way the service does, serving pages from the in-memory log.
fn pack(case: &Case, max_tokens: u32, format: Format) -> ContextPack {
    let mut packer = ContextPacker::new(request(case, max_tokens, format), snapshot(case));
    while let Some(page) = packer.next_page() {
        let rows: Vec<StoredMessage> = case
            .log
            .iter()
            .rev()
            .filter(|m| {
                m.sequence < page.before && m.sequence > page.floor && !m.message.exclude_from_context
            })
            .take(page.limit)
            .cloned()
            .collect();
        packer.feed(rows, page);
    }
    packer.finish()
}

/// Call ids whose every result exists in the log.
fn complete_calls(log: &[StoredMessage]) -> HashSet<Sequence> {
    let answered: HashSet<&str> = log
        .iter()
        .filter_map(|m| m.message.tool_call_id.as_deref())
        .collect();
    log.iter()
        .filter(|m| !m.message.tool_calls.is_empty())
        .filter(|m| {
            m.message
                .tool_calls
                .iter()
                .all(|c| answered.contains(c.id.as_str()))
        })
        .map(|m| m.sequence)
        .collect()
}

fn check_invariants(case: &Case, pack: &ContextPack) -> Result<(), TestCaseError> {
    let by_seq: BTreeMap<Sequence, &StoredMessage> = case.log.iter().map(|m| (m.sequence, m)).collect();
    let history: Vec<Sequence> = pack
        .messages
        .iter()
        .filter(|m| m.source == Source::History)
        .filter_map(|m| m.sequence)
        .collect();
    let included: HashSet<Sequence> = history.iter().copied().collect();
    let complete = complete_calls(&case.log);

    // 1. Tool groups whole: no result without its call, no call without all its results.
    for seq in &history {
        let m = &by_seq[seq];
        if let Some(call) = m.call_sequence {
            prop_assert!(included.contains(&call), "result {seq} without its call {call}");
        }
        if !m.message.tool_calls.is_empty() {
            prop_assert!(complete.contains(seq), "incomplete call {seq} included");
            for result in case.log.iter().filter(|r| r.call_sequence == Some(*seq)) {
                prop_assert!(
                    included.contains(&result.sequence),
                    "call {seq} without result {}",
                    result.sequence
                );
            }
        }
    }

    // 2. Newest user message (or the pending one), pending and pinned messages are included.
    let snap = snapshot(case);
    if case.pending_user.is_none() {
        if let Some(user) = snap.last_user_sequence {
            prop_assert!(included.contains(&user), "newest user message {user} missing");
        }
    }
    let pending = pack
        .messages
        .iter()
        .filter(|m| m.source == Source::Pending)
        .count();
    prop_assert_eq!(pending, case.pending_user.iter().count());
    prop_assert!(
        pack.messages
            .last()
            .is_none_or(|m| m.source == Source::Pending || pending == 0)
    );
    for pinned in &snap.pinned {
        prop_assert!(
            included.contains(&pinned.sequence),
            "pinned {} missing",
            pinned.sequence
        );
    }

    // 3. Exact accounting, and within budget unless the mandatory parts alone exceed it.
    let sum: u32 = pack.messages.iter().map(|m| m.tokens).sum::<u32>() + REPLY_PRIMING as u32;
    prop_assert_eq!(sum, pack.stats.total_tokens);
    for m in &pack.messages {
        let exact = message_cost_with_text(&m.message, &context_text(&m.message), case.tokenizer) as u32;
        prop_assert_eq!(m.tokens, exact, "message {:?} miscounted", m.sequence);
    }
    let available = case.max_tokens - case.reserve.min(case.max_tokens - 1);
    if !pack.stats.over_budget {
        prop_assert!(
            pack.stats.total_tokens <= available,
            "{} > {available}",
            pack.stats.total_tokens
        );
    }

    // 4. History in order, a contiguous suffix of the log (pinned and excluded aside), with a
    //    notice when something after the summary was left out.
    prop_assert!(history.windows(2).all(|w| w[0] < w[1]), "history out of order");
    let oldest = Sequence::parse(pack.stats.oldest_included_sequence).unwrap();
    if oldest > Sequence::ZERO {
        for m in case
            .log
            .iter()
            .filter(|m| m.sequence >= oldest && !m.message.exclude_from_context)
        {
            let whole = match (m.message.tool_calls.is_empty(), m.call_sequence) {
                (false, _) => complete.contains(&m.sequence),
                (true, Some(call)) => complete.contains(&call) && call >= oldest,
                (true, None) => true,
            };
            if whole {
                prop_assert!(
                    included.contains(&m.sequence),
                    "hole at {} (window from {oldest})",
                    m.sequence
                );
            }
        }
    }
    let notice = pack.messages.iter().any(|m| m.source == Source::TruncationNotice);
    if pack.stats.messages_dropped > 0 && !pack.stats.over_budget {
        prop_assert!(notice, "history dropped without a notice");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn packs_keep_every_invariant(case in case()) {
        let pack = pack(&case, case.max_tokens, Format::OpenAiChat);
        check_invariants(&case, &pack)?;
    }

    #[test]
    fn packs_are_deterministic(case in case()) {
        for format in [Format::OpenAiChat, Format::AnthropicMessages] {
            let a = pack(&case, case.max_tokens, format);
            let b = pack(&case, case.max_tokens, format);
            prop_assert_eq!(render(&a.messages, format), render(&b.messages, format));
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn a_bigger_budget_never_yields_fewer_history_messages(case in case(), extra in 1u32..2000) {
        let small = pack(&case, case.max_tokens, Format::OpenAiChat);
        let big = pack(&case, case.max_tokens + extra, Format::OpenAiChat);
        prop_assert!(
            big.stats.messages_included >= small.stats.messages_included,
            "{} tokens: {} messages; {} tokens: {}",
            case.max_tokens, small.stats.messages_included, case.max_tokens + extra, big.stats.messages_included
        );
    }
}
