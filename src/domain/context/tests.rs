//! Properties of context assembly (docs/design.md, "Context assembly", invariants 1-5) over generated conversations:
//! parallel and dangling tool calls, pinned and excluded messages, failed LLM calls, huge tool
//! outputs, unicode, summaries at arbitrary watermarks.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::UNIX_EPOCH,
};

use proptest::prelude::*;
use serde_json::Value;

use super::{
    super::working_memory::WorkingMemory,
    CLOSING_TURN, ClearToolResults, ContextMessage, ContextPack, ContextPacker, ContextRequest,
    ContextSnapshot, FinalAssistant, Format, HistoryPolicy, PLACEHOLDER_TURN, ReasoningPolicy,
    SUMMARY_CUT_MARKER, Source, SummarySection, TokenBudget, TokenCounts,
    anchor::LogEnd,
    cost::{adjusted, attachments_delta, context_text, message_cost_with_text},
    initial_page_limit,
    render::{render, renders_as_turn},
};
use crate::{
    domain::tokenize::{REPLY_PRIMING, Tokenizer},
    domain::{
        ids::{ConversationId, Sequence},
        message::{Attachment, AttachmentSource, LlmError, Message, Role, StoredMessage, ToolCall},
    },
};

/// One step of a generated conversation.
#[derive(Debug, Clone)]
enum Event {
    User {
        text: String,
        pinned: bool,
        excluded: bool,
        attach: bool,
    },
    Assistant {
        text: String,
        pinned: bool,
        failed: bool,
    },
    System(String),
    /// An assistant message with `calls` calls, followed by results for those in `answered`,
    /// with a user (or assistant) message typed after `interleave.0` of them.
    Tools {
        calls: usize,
        answered: Vec<bool>,
        output: String,
        huge: bool,
        arguments: &'static str,
        interleave: Option<(usize, Role)>,
    },
}

/// Tool arguments as models produce them, valid or not.
const ARGUMENTS: [&str; 7] = [
    r#"{"q":"x"}"#,
    "{}",
    "",
    "not json",
    "[1, 2]",
    r#""text""#,
    r#" {"a": {"b": [1]}} "#,
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z ]{1,40}",
        Just("日本語のテキスト 🎉 émoji ✓".to_string()),
        Just("fn main() { println!(\"hi\"); }\n    // code".to_string()),
        Just("     lots   of    whitespace     \n\n\t".to_string()),
        Just(" ".to_string()),
        Just("ends in a space ".to_string()),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (text(), prop::bool::weighted(0.1), prop::bool::weighted(0.15), prop::bool::weighted(0.1)).prop_map(
            |(text, pin, excluded, attach)| Event::User {
                text: if text.is_empty() && !attach { "hi".into() } else { text },
                pinned: pin && !excluded,
                excluded,
                attach,
            }
        ),
        3 => (text(), prop::bool::weighted(0.1), prop::bool::weighted(0.1)).prop_map(|(text, pinned, failed)| {
            Event::Assistant { text: if text.is_empty() && !failed { "ok".into() } else { text }, pinned, failed }
        }),
        1 => text().prop_map(|t| Event::System(if t.is_empty() { "be brief".into() } else { t })),
        3 => (
            1usize..4,
            prop::collection::vec(prop::bool::weighted(0.85), 3),
            text(),
            prop::bool::weighted(0.2),
            prop::sample::select(&ARGUMENTS[..]),
            prop::option::weighted(0.25, (0usize..4, prop::sample::select(vec![Role::User, Role::Assistant]))),
        )
            .prop_map(|(calls, answered, output, huge, arguments, interleave)| Event::Tools {
                calls,
                answered,
                output,
                huge,
                arguments,
                interleave,
            }),
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
                attach,
            } => {
                let attachments = if attach {
                    vec![
                        Attachment {
                            mime_type: "image/png".into(),
                            filename: "chart.png".into(),
                            source: AttachmentSource::Data(vec![137, 80, 78, 71]),
                            width: 0,
                            height: 0,
                        },
                        Attachment {
                            mime_type: "application/pdf".into(),
                            filename: "spec.pdf".into(),
                            source: AttachmentSource::Uri("https://example.com/spec.pdf".into()),
                            width: 0,
                            height: 0,
                        },
                        // Types some formats cannot carry as they are.
                        Attachment {
                            mime_type: "image/svg+xml".into(),
                            filename: "logo.svg".into(),
                            source: AttachmentSource::Data(b"<svg/>".to_vec()),
                            width: 0,
                            height: 0,
                        },
                        Attachment {
                            mime_type: "text/plain".into(),
                            filename: "notes.txt".into(),
                            source: AttachmentSource::Data(b"hello".to_vec()),
                            width: 0,
                            height: 0,
                        },
                    ]
                } else {
                    vec![]
                };
                let user = Message {
                    pinned,
                    exclude_from_context: excluded,
                    attachments,
                    ..plain(Role::User, text)
                };
                messages.push((user, None))
            }
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
                arguments,
                interleave,
            } => {
                let call_sequence = Sequence::parse(messages.len() as u64 + 1).unwrap();
                let ids: Vec<String> = (0..calls).map(|k| format!("call-{call_sequence}-{k}")).collect();
                let tool_calls = ids
                    .iter()
                    .enumerate()
                    .map(|(k, id)| ToolCall::new(id.clone(), ["lookup", "fetch"][k % 2], arguments))
                    .collect();
                messages.push((
                    Message {
                        tool_calls,
                        ..plain(Role::Assistant, String::new())
                    },
                    None,
                ));
                for (n, (k, id)) in ids.iter().enumerate().rev().enumerate() {
                    if let Some((at, role)) = interleave
                        && at == n
                    {
                        messages.push((plain(role, "hurry up".into()), None));
                    }
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
    let mut end = LogEnd::default();
    messages
        .into_iter()
        .enumerate()
        .map(|(i, (message, call_sequence))| {
            let tokens = TokenCounts::of(&message, crate::domain::token_counts::Tokenizers::ALL);
            StoredMessage {
                sequence: Sequence::parse(i as u64 + 1).unwrap(),
                created_at: UNIX_EPOCH,
                tokens,
                reasoning_tokens: TokenCounts::default(),
                native_tokens: TokenCounts::default(),
                call_sequence,
                turn_anchor: end.place(&message, tokens.approx).anchor(&message),
                message,
            }
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
    pending: Pending,
    tokenizer: Tokenizer,
    history: HistoryPolicy,
    final_assistant: FinalAssistant,
    clear: Option<ClearToolResults>,
}

/// Pending messages of a request.
#[derive(Debug, Clone)]
enum Pending {
    None,
    User(String),
    /// A pending assistant message (a prefill), possibly the pack's only turn.
    Assistant(String),
    /// Results completing the newest stored call message that has unanswered calls.
    Results,
}

fn pending() -> impl Strategy<Value = Pending> {
    prop_oneof![
        3 => Just(Pending::None),
        3 => text().prop_map(|t| Pending::User(if t.is_empty() { "next?".into() } else { t })),
        1 => prop_oneof![Just("Sure, "), Just("ok")].prop_map(|t| Pending::Assistant(t.into())),
        2 => Just(Pending::Results),
    ]
}

/// The pending messages of `case`, and the stored calls they answer (what the store's
/// `open_calls` returns).
fn pending_messages(case: &Case) -> (Vec<Message>, HashMap<String, Sequence>) {
    match &case.pending {
        Pending::None => (vec![], HashMap::new()),
        Pending::User(text) => (vec![plain(Role::User, text.clone())], HashMap::new()),
        Pending::Assistant(text) => (vec![plain(Role::Assistant, text.clone())], HashMap::new()),
        Pending::Results => {
            let answered: HashSet<&str> = case
                .log
                .iter()
                .filter_map(|m| m.message.tool_call_id.as_deref())
                .collect();
            let newest_open = case.log.iter().rev().find_map(|m| {
                let open: Vec<&ToolCall> = m
                    .message
                    .tool_calls
                    .iter()
                    .filter(|c| !answered.contains(c.id.as_str()))
                    .collect();
                (!open.is_empty()).then_some((m.sequence, open))
            });
            let Some((sequence, open)) = newest_open else {
                return (vec![], HashMap::new());
            };
            let results = open
                .iter()
                .map(|c| Message {
                    tool_call_id: Some(c.id.clone()),
                    ..plain(Role::Tool, "42".into())
                })
                .collect();
            (results, open.iter().map(|c| (c.id.clone(), sequence)).collect())
        }
    }
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
        pending(),
        prop_oneof![4 => Just(Tokenizer::Approx), 1 => Just(Tokenizer::O200kBase), 1 => Just(Tokenizer::Cl100kBase)],
        prop_oneof![Just(HistoryPolicy::CacheStable), Just(HistoryPolicy::Newest)],
        prop_oneof![Just(FinalAssistant::FormatDefault), Just(FinalAssistant::Keep), Just(FinalAssistant::Omit)],
        prop::option::weighted(0.35, (0u32..4, any::<bool>(), any::<bool>())),
    )
        .prop_map(|(events, max_tokens, reserve, max_messages, max_turns, tool_max, summary, pending, tokenizer, history, final_assistant, clear)| {
            let log = build_log(&events);
            Case {
                summary_through: summary.map(|s| s.min(log.len() as u64)),
                log,
                max_tokens,
                reserve: reserve.min(max_tokens - 1),
                max_messages,
                max_turns,
                tool_output_max_tokens: tool_max,
                pending,
                tokenizer,
                history,
                final_assistant,
                clear: clear.map(|(keep_recent, exclude, clear_arguments)| ClearToolResults {
                    keep_recent,
                    exclude_tools: if exclude { vec!["fetch".into()] } else { vec![] },
                    clear_arguments,
                }),
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
        pending: pending_messages(case).0,
        include_summary: true,
        include_memory: true,
        tool_output_max_tokens: (case.tool_output_max_tokens > 0).then_some(case.tool_output_max_tokens),
        format,
        history: case.history,
        reasoning: ReasoningPolicy::CurrentTurn,
        final_assistant: case.final_assistant,
        clear_tool_results: case.clear.clone(),
        recall: None,
    }
}

fn snapshot(case: &Case) -> ContextSnapshot {
    ContextSnapshot {
        summary: case.summary_through.map(|through| SummarySection {
            // From one sentence to a summary larger than most budgets.
            text: "Earlier: the user asked about weather. ".repeat(1 + (through as usize % 5) * 50),
            through_sequence: Sequence::parse(through).unwrap(),
        }),
        memory: Some(WorkingMemory {
            summary: "Goals: plan a trip.".into(),
            ..WorkingMemory::default()
        }),
        pending_calls: pending_messages(case).1,
        ..ContextSnapshot::of_log(&case.log)
    }
}

/// Runs the packer the way the service does, serving pages from the in-memory log.
fn pack(case: &Case, max_tokens: u32, format: Format) -> ContextPack {
    let request = request(case, max_tokens, format);
    let first = initial_page_limit(&request);
    let mut packer = ContextPacker::new(request, snapshot(case));
    let newest = case
        .log
        .iter()
        .rev()
        .filter(|m| !m.message.exclude_from_context)
        .take(first)
        .cloned()
        .collect();
    packer.feed_first(newest, first);
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
    let mut complete = complete_calls(&case.log);
    complete.extend(pending_messages(case).1.into_values());

    // 0. What the pack calls abridged (recall then quotes it) is not what the log holds:
    // clearing that changed nothing (arguments already `{}`) leaves a message verbatim.
    for seq in &pack.abridged {
        let packed = pack.messages.iter().find(|m| m.sequence == Some(*seq));
        let stored = &by_seq[seq].message;
        let verbatim = packed.is_some_and(|m| {
            m.message.content == stored.content && m.message.tool_calls == stored.tool_calls
        });
        prop_assert!(
            !verbatim,
            "message {seq} is called abridged but the pack holds it whole"
        );
    }

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
    let pending_user = matches!(case.pending, Pending::User(_));
    if let (false, Some(user)) = (pending_user, snap.last_user_sequence) {
        prop_assert!(included.contains(&user), "newest user message {user} missing");
    }
    let pending = pack
        .messages
        .iter()
        .filter(|m| m.source == Source::Pending)
        .count();
    let (pending_sent, _) = pending_messages(case);
    prop_assert_eq!(pending, pending_sent.len());
    // Pending results follow their call's group; every other pending message comes last (but
    // for the closing turn after a pinned reply, when the pending messages are no turn).
    if pending_sent.iter().all(|m| m.role != Role::Tool) {
        let last_but_closing = pack
            .messages
            .iter()
            .rev()
            .find(|m| !(m.source == Source::Placeholder && m.message.content == CLOSING_TURN));
        prop_assert!(last_but_closing.is_none_or(|m| m.source == Source::Pending || pending == 0));
    }
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
        // Attachments as the format's provider counts them (the invariants run on chat packs).
        let text = message_cost_with_text(&m.message, &context_text(&m.message), case.tokenizer);
        let exact = adjusted(text, attachments_delta(&m.message, Format::OpenAiChat)) as u32;
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
    //    Log order, except that results follow their call directly (docs/design.md, "Provider rules").
    let calls_of = |seq: &Sequence| by_seq[seq].call_sequence;
    let others: Vec<&Sequence> = history.iter().filter(|s| calls_of(s).is_none()).collect();
    prop_assert!(others.windows(2).all(|w| w[0] < w[1]), "history out of order");
    for w in history.windows(2) {
        if let Some(call) = calls_of(&w[1]) {
            let follows = w[0] == call || (calls_of(&w[0]) == Some(call) && w[0] < w[1]);
            prop_assert!(
                follows,
                "result {} follows {}, not its call {call}'s group",
                w[1],
                w[0]
            );
        }
    }
    let oldest = Sequence::parse(pack.stats.oldest_included_sequence).unwrap();
    let mut excused = 0u32;
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
            // A reply left out because it would end the pack (checked under 7).
            let final_reply = pack.stats.final_assistant_omitted > 0 && is_reply(m);
            excused += u32::from(whole && final_reply && !included.contains(&m.sequence));
            if whole && !final_reply {
                prop_assert!(
                    included.contains(&m.sequence),
                    "hole at {} (window from {oldest})",
                    m.sequence
                );
            }
        }
    }
    // 5. History starts at a turn boundary (docs/design.md, "Provider rules") when something was left out before
    //    it, unless the window holds no turn-opening user message (one outside every group's
    //    span, pending results included) or starts at a call that pending results answer. Only
    //    what could be rendered counts as left out: not a result whose call the summary covers,
    //    nor an incomplete group.
    // The verbatim window (pinned messages older than it are shown apart).
    // (0 when the window is empty).
    let window_start = pack.stats.oldest_included_sequence;
    let mut in_log_order: Vec<Sequence> = history
        .iter()
        .copied()
        .filter(|s| window_start > 0 && s.get() >= window_start)
        .collect();
    in_log_order.sort();
    let floor = pack.stats.summary_through_sequence;
    let (_, pending_answers) = pending_messages(case);
    let answered: HashSet<&str> = case
        .log
        .iter()
        .filter_map(|m| m.message.tool_call_id.as_deref())
        .chain(pending_answers.keys().map(String::as_str))
        .collect();
    let complete_group = |call: Sequence| {
        call.get() > floor
            && by_seq.get(&call).is_none_or(|m| {
                m.message
                    .tool_calls
                    .iter()
                    .all(|c| answered.contains(c.id.as_str()))
            })
    };
    let renderable = |m: &StoredMessage| {
        !m.message.exclude_from_context
            && m.sequence.get() > floor
            && m.call_sequence.is_none_or(complete_group)
            && (m.message.tool_calls.is_empty() || complete_group(m.sequence))
    };
    // A reply left out because it would end the pack is one of invariant 4's exceptions, not
    // history left out (the packer looks past blank messages for it, as the renderers do).
    let final_reply = |m: &StoredMessage| pack.stats.final_assistant_omitted > 0 && is_reply(m);
    let visible_before = |first: &Sequence| {
        case.log
            .iter()
            .any(|m| m.sequence < *first && renderable(m) && !final_reply(m))
    };
    if let Some(first) = in_log_order.first()
        && visible_before(first)
        && by_seq[first].message.role != Role::User
    {
        let spans: Vec<(Sequence, Sequence)> = in_log_order
            .iter()
            .filter_map(|s| by_seq[s].call_sequence.map(|call| (call, *s)))
            .collect();
        let pending_calls: Vec<Sequence> = pending_answers.values().copied().collect();
        let inside_group = |s: Sequence| {
            spans.iter().any(|(call, result)| *call < s && s < *result)
                || pending_calls.iter().any(|call| *call < s)
        };
        let turn_opener = in_log_order
            .iter()
            .find(|s| by_seq[s].message.role == Role::User && !inside_group(**s));
        let answered_by_pending = pending_answers.values().any(|call| call == first);
        prop_assert!(
            turn_opener.is_none() || answered_by_pending,
            "history starts at {first} inside a turn, though {turn_opener:?} opens one"
        );
    }
    let notice = pack.messages.iter().any(|m| m.source == Source::TruncationNotice);
    if pack.stats.messages_dropped > 0 && !pack.stats.over_budget {
        prop_assert!(notice, "history dropped without a notice");
    }
    // 6. No silent hole under the summary: a message the summary covers is in the
    //    pack, or the summary is (whole, or cut with its marker), or the pack says over_budget.
    let summary = pack.messages.iter().find(|m| m.source == Source::Summary);
    if let Some(through) = case.summary_through.filter(|t| *t > 0) {
        let shown: HashSet<Sequence> = pack.messages.iter().filter_map(|m| m.sequence).collect();
        let hole = case
            .log
            .iter()
            .filter(|m| m.sequence.get() <= through && !m.message.exclude_from_context)
            .find(|m| !shown.contains(&m.sequence));
        if let Some(hole) = hole {
            // A summary that does not fit, even cut, is left out as the history it covers is:
            // the truncation notice names the range.
            let named = pack
                .messages
                .iter()
                .filter(|m| m.source == Source::TruncationNotice)
                .any(|m| {
                    notice_range(&m.message.content)
                        .is_some_and(|(a, b)| (a..=b).contains(&hole.sequence.get()))
                });
            prop_assert!(
                summary.is_some() || pack.stats.over_budget || named,
                "message {} is covered by the summary, and neither is in the pack nor named by a notice",
                hole.sequence
            );
        }
    }
    prop_assert_eq!(
        pack.stats.summary_cut,
        summary.is_some_and(|m| m.message.content.contains(SUMMARY_CUT_MARKER)),
        "summary_cut says whether the summary in the pack was cut"
    );
    let cut_in_pack = pack
        .messages
        .iter()
        .any(|m| m.message.role == Role::Tool && m.message.content.contains("tool output omitted"));
    prop_assert_eq!(
        pack.stats.truncated,
        cut_in_pack,
        "truncated says whether a cut tool output is in the pack"
    );
    // 7. Final assistant (docs/design.md, "Provider rules"): when it is to be left out, the pack's last turn is
    //    not an assistant message of the log (a pinned one is followed by the closing turn);
    //    otherwise none is left out. Holes excused under 4 are among the replies left out.
    prop_assert!(
        excused <= pack.stats.final_assistant_omitted,
        "{excused} holes excused"
    );
    match case.final_assistant.omits(Format::OpenAiChat) {
        true => {
            let last_turn =
                pack.messages.iter().rev().find(|m| {
                    m.message.role != Role::System && renders_as_turn(Format::OpenAiChat, &m.message)
                });
            let ends_on_reply =
                last_turn.is_some_and(|m| m.source == Source::History && m.message.role == Role::Assistant);
            prop_assert!(
                !ends_on_reply,
                "the pack ends on reply {:?}",
                last_turn.and_then(|m| m.sequence)
            );
        }
        false => prop_assert_eq!(pack.stats.final_assistant_omitted, 0),
    }
    Ok(())
}

/// An assistant reply of the log that a pack may leave out when it would end the pack.
/// The sequences a truncation notice names: `(sequences A to B)`.
fn notice_range(text: &str) -> Option<(u64, u64)> {
    let rest = text.split("(sequences ").nth(1)?;
    let (first, rest) = rest.split_once(" to ")?;
    let last = rest.split(')').next()?;
    Some((first.parse().ok()?, last.parse().ok()?))
}

fn is_reply(m: &StoredMessage) -> bool {
    m.message.role == Role::Assistant && m.message.tool_calls.is_empty() && !m.message.pinned
}

/// Checks a rendered OpenAI pack against the Chat Completions message format: roles, content
/// types, tool call shape, and that every `tool_calls` entry is answered by the `tool` messages
/// that immediately follow it, exactly once each, and no `tool` message stands alone.
fn check_openai_format(rendered: &str) -> Result<(), String> {
    let messages: Vec<Value> = serde_json::from_str(rendered).map_err(|e| e.to_string())?;
    let mut awaiting: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let obj = m.as_object().ok_or(format!("message {i} is not an object"))?;
        let role = obj
            .get("role")
            .and_then(Value::as_str)
            .ok_or(format!("message {i} has no role"))?;
        for key in obj.keys() {
            let allowed: &[&str] = match role {
                "system" | "user" => &["role", "content", "name"],
                "assistant" => &["role", "content", "name", "tool_calls"],
                "tool" => &["role", "content", "tool_call_id"],
                other => return Err(format!("message {i}: unknown role {other}")),
            };
            if !allowed.contains(&key.as_str()) {
                return Err(format!("message {i}: field {key} not allowed on {role}"));
            }
        }
        if role == "tool" {
            let id = obj
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or(format!("tool {i} without id"))?;
            let at = awaiting
                .iter()
                .position(|a| a == id)
                .ok_or(format!("tool {i} answers no pending call"))?;
            awaiting.remove(at);
            obj.get("content")
                .and_then(Value::as_str)
                .ok_or(format!("tool {i} content is not a string"))?;
            continue;
        }
        if !awaiting.is_empty() {
            return Err(format!(
                "message {i}: calls {awaiting:?} were not answered before it"
            ));
        }
        match (role, obj.get("content")) {
            ("assistant", Some(Value::Null)) if obj.contains_key("tool_calls") => {}
            (_, Some(Value::String(_))) => {}
            ("user", Some(Value::Array(parts))) => {
                for part in parts {
                    let kind = part["type"].as_str().unwrap_or_default();
                    let ok = match kind {
                        "text" => part["text"].is_string(),
                        // PNG, JPEG, WEBP or GIF; a file is a PDF (OpenAI's docs).
                        "image_url" => part["image_url"]["url"].as_str().is_some_and(|url| {
                            !url.starts_with("data:")
                                || ["png", "jpeg", "webp", "gif"]
                                    .iter()
                                    .any(|t| url.starts_with(&format!("data:image/{t};")))
                        }),
                        "file" => part["file"]["file_data"]
                            .as_str()
                            .is_some_and(|data| data.starts_with("data:application/pdf;")),
                        _ => false,
                    };
                    if !ok {
                        return Err(format!("message {i}: bad content part {part}"));
                    }
                }
            }
            (_, content) => return Err(format!("message {i}: bad content {content:?}")),
        }
        if let Some(calls) = obj.get("tool_calls") {
            let calls = calls
                .as_array()
                .filter(|c| !c.is_empty())
                .ok_or(format!("message {i}: empty tool_calls"))?;
            for call in calls {
                let arguments = call["function"]["arguments"].as_str().unwrap_or("-");
                let ok = call["id"].is_string()
                    && call["type"] == "function"
                    && call["function"]["name"].is_string()
                    && serde_json::from_str::<Value>(arguments).is_ok_and(|a| a.is_object());
                if !ok {
                    return Err(format!("message {i}: bad tool call {call}"));
                }
                awaiting.push(call["id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    if awaiting.is_empty() {
        Ok(())
    } else {
        Err(format!("calls {awaiting:?} never answered"))
    }
}

/// Checks a rendered Anthropic pack against the Messages API rules (docs/design.md, "Provider rules"): a
/// non-blank string `system` if any; at least one message, the first a user turn; strictly
/// alternating roles; no empty content, no blank text block; every `tool_use` (unique id,
/// object input) answered by `tool_result` blocks opening the next message, and no result
/// answering anything else; images only of the four accepted types; a final assistant message
/// that does not end in whitespace.
fn check_anthropic_format(rendered: &str) -> Result<(), String> {
    let pack: Value = serde_json::from_str(rendered).map_err(|e| e.to_string())?;
    if let Some(system) = pack.get("system") {
        let blocks = system.as_array().ok_or("system must be a list of text blocks")?;
        let texts = blocks
            .iter()
            .all(|b| b["type"] == "text" && b["text"].as_str().is_some_and(|t| !t.trim().is_empty()));
        if blocks.is_empty() || !texts {
            return Err("system must be non-blank text blocks".into());
        }
    }
    let marks = rendered
        .matches(r#""cache_control":{"type":"ephemeral"}"#)
        .count();
    if marks != rendered.matches("cache_control").count() || marks > 4 {
        return Err(format!(
            "{marks} cache breakpoints; at most 4, each {{\"type\":\"ephemeral\"}}"
        ));
    }
    let messages = pack["messages"].as_array().ok_or("messages must be an array")?;
    if messages.first().is_none_or(|m| m["role"] != "user") {
        return Err("the first message must be a user turn".into());
    }
    let mut previous_role = "";
    let mut awaiting: Vec<String> = Vec::new();
    let mut ids = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().ok_or(format!("message {i} has no role"))?;
        if role == previous_role || !matches!(role, "user" | "assistant") {
            return Err(format!("message {i}: role {role} after {previous_role}"));
        }
        previous_role = role;
        let blocks = m["content"]
            .as_array()
            .filter(|b| !b.is_empty())
            .ok_or(format!("message {i}: no content"))?;
        let mut results_open = true;
        for block in blocks {
            match block["type"].as_str().unwrap_or_default() {
                "tool_result" => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    let at = awaiting.iter().position(|a| a == id);
                    match (results_open && role == "user", at) {
                        (true, Some(at)) => drop(awaiting.remove(at)),
                        _ => return Err(format!("message {i}: misplaced tool_result {id}")),
                    }
                    if block
                        .get("content")
                        .is_some_and(|c| c.as_str().is_none_or(|c| c.trim().is_empty()))
                    {
                        return Err(format!("message {i}: blank tool_result content"));
                    }
                }
                "text" => {
                    results_open = false;
                    if block["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                        return Err(format!("message {i}: blank text block"));
                    }
                }
                "tool_use" if role == "assistant" => {
                    if !block["input"].is_object() || !block["name"].is_string() {
                        return Err(format!("message {i}: bad tool_use {block}"));
                    }
                    let id = block["id"]
                        .as_str()
                        .ok_or(format!("message {i}: tool_use without id"))?;
                    if !ids.insert(id.to_owned()) {
                        return Err(format!("message {i}: tool_use id {id} used twice"));
                    }
                }
                "image" if role == "user" => {
                    results_open = false;
                    let source = &block["source"];
                    let accepted = ["image/jpeg", "image/png", "image/gif", "image/webp"];
                    if source["type"] == "base64" && !accepted.iter().any(|t| source["media_type"] == *t) {
                        return Err(format!("message {i}: image of type {}", source["media_type"]));
                    }
                }
                "document" if role == "user" => results_open = false,
                other => return Err(format!("message {i}: block type {other} on {role}")),
            }
        }
        if !awaiting.is_empty() {
            return Err(format!(
                "message {i}: tool_use {awaiting:?} not answered by the next message"
            ));
        }
        awaiting = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap_or_default().to_owned())
            .collect();
    }
    if let Some(last) = messages.last().filter(|m| m["role"] == "assistant")
        && let Some(text) = last["content"]
            .as_array()
            .and_then(|b| b.last())
            .and_then(|b| b["text"].as_str())
        && text.trim_end() != text
    {
        return Err("the final assistant message ends in whitespace".into());
    }
    if awaiting.is_empty() {
        Ok(())
    } else {
        Err(format!("tool_use {awaiting:?} never answered"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn packs_keep_every_invariant(case in case()) {
        let pack = pack(&case, case.max_tokens, Format::OpenAiChat);
        check_invariants(&case, &pack)?;
    }

    #[test]
    fn openai_packs_follow_the_chat_completions_format(case in case()) {
        let pack = pack(&case, case.max_tokens, Format::OpenAiChat);
        let rendered = render(&pack.messages, Format::OpenAiChat);
        prop_assert!(check_openai_format(&rendered).is_ok(), "{:?}\n{rendered}", check_openai_format(&rendered));
    }

    #[test]
    fn anthropic_packs_alternate_roles_and_pair_tool_use_with_results(case in case()) {
        let pack = pack(&case, case.max_tokens, Format::AnthropicMessages);
        let rendered = render(&pack.messages, Format::AnthropicMessages);
        prop_assert!(check_anthropic_format(&rendered).is_ok(), "{:?}\n{rendered}", check_anthropic_format(&rendered));
        // Claude 4.6 and later refuse a pack that ends on the assistant, unless the caller
        // chose that ending (a pending prefill, a pinned message, or the option).
        let ends_on_assistant = serde_json::from_str::<Value>(&rendered).unwrap()["messages"]
            .as_array().and_then(|m| m.last()).is_some_and(|m| m["role"] == "assistant");
        let chosen = matches!(case.pending, Pending::Assistant(_)) || case.final_assistant == FinalAssistant::Keep;
        prop_assert!(!ends_on_assistant || chosen, "{rendered}");
    }

    /// Leaving out the final assistant reply removes exactly the log's replies that end the
    /// pack kept whole, before the budget is shared out: where the kept pack fits whole, the
    /// rest is the same (a placeholder turn may open or close what is left).
    #[test]
    fn leaving_out_the_final_assistant_removes_only_the_replies_that_end_the_pack(case in case()) {
        // Compares two packs message for message; clearing may clear one of them differently.
        let case = Case { clear: None, ..case };
        for format in [Format::OpenAiChat, Format::AnthropicMessages, Format::Gemini] {
            let kept = pack(&Case { final_assistant: FinalAssistant::Keep, ..case.clone() }, case.max_tokens, format);
            let left = pack(&Case { final_assistant: FinalAssistant::Omit, ..case.clone() }, case.max_tokens, format);
            let without_placeholder = |p: &ContextPack| -> Vec<ContextMessage> {
                p.messages.iter().filter(|m| m.source != Source::Placeholder).cloned().collect()
            };
            let (kept_messages, left_messages) = (without_placeholder(&kept), without_placeholder(&left));
            // The replies that end the kept pack: back from its end, past what is no turn. The
            // blank messages among them (no turn either) go with them.
            let mut ending = Vec::new();
            let mut blank = Vec::new();
            for m in kept_messages.iter().rev() {
                let free = m.source == Source::History && m.message.tool_calls.is_empty() && !m.message.pinned;
                let reply = free && m.message.role == Role::Assistant;
                if reply {
                    ending.push(m.clone());
                } else if m.message.role != Role::System && renders_as_turn(format, &m.message) {
                    break;
                } else if free && m.message.role == Role::User {
                    blank.push(m.clone());
                }
            }
            // Where the kept pack had to leave some of them out for the budget, they still count.
            prop_assert!(left.stats.final_assistant_omitted >= ending.len() as u32);
            prop_assert!(ending.iter().all(|m| left.messages.iter().all(|l| l.sequence != m.sequence)));
            // (The test snapshot always has working memory: left out, it did not fit. A pinned
            // reply after the newest user message makes room for the closing turn.)
            let newest_user = case.log.iter().rev().find(|m| m.message.role == Role::User && !m.message.exclude_from_context);
            let closing_room = case.log.iter().any(|m| {
                m.message.pinned && m.message.role == Role::Assistant && newest_user.is_none_or(|u| m.sequence > u.sequence)
            });
            // Blank messages the left pack does not hold take no turn or message of its limits,
            // and a cache-stable window starts at a step counted from the newest message: with
            // them, the two packs may start apart.
            let same_newest = blank.is_empty()
                || (case.history != HistoryPolicy::CacheStable && case.max_turns == 0 && case.max_messages == 0);
            let fits_whole = !closing_room
                && same_newest
                && !kept.stats.over_budget
                && kept.stats.messages_dropped == 0
                && !kept.stats.summary_cut
                && kept.stats.working_memory_tokens > 0;
            if fits_whole {
                prop_assert_eq!(left.stats.final_assistant_omitted, ending.len() as u32);
                let expected: Vec<ContextMessage> =
                    kept_messages.iter().filter(|m| !ending.contains(m) && !blank.contains(m)).cloned().collect();
                let outline = |ms: &[ContextMessage]| -> Vec<(Source, Option<Sequence>, u32)> {
                    ms.iter().map(|m| (m.source, m.sequence, m.tokens)).collect()
                };
                prop_assert_eq!(outline(&left_messages), outline(&expected), "{:?}: kept {:?}", format, outline(&kept.messages));
                prop_assert_eq!(&left_messages, &expected);
                let removed_tokens: u32 = ending.iter().chain(&blank).map(|m| m.tokens).sum();
                let placeholder = |p: &ContextPack| -> u32 {
                    p.messages.iter().filter(|m| m.source == Source::Placeholder).map(|m| m.tokens).sum()
                };
                prop_assert_eq!(
                    left.stats.total_tokens + removed_tokens,
                    kept.stats.total_tokens + placeholder(&left) - placeholder(&kept)
                );
                prop_assert_eq!(left.stats.history_tokens + removed_tokens, kept.stats.history_tokens);
            }
            // A closing turn only where a stored assistant message would still end the pack.
            let closing = left.messages.last().is_some_and(|m| m.source == Source::Placeholder && m.message.content == CLOSING_TURN);
            // Left out before the budget is shared: never more over budget than the kept pack,
            // but for the closing turn's room when the mandatory parts alone leave none.
            // (Blank messages left out too: the newest turn the left pack ends on, always sent,
            // is an older one than the kept pack's blank.)
            prop_assert!(!left.stats.over_budget || kept.stats.over_budget || closing || !blank.is_empty());
            let last_turn = left_messages.iter().rev().find(|m| m.message.role != Role::System && renders_as_turn(format, &m.message));
            prop_assert_eq!(closing, last_turn.is_some_and(|m| m.source == Source::History && m.message.role == Role::Assistant));
        }
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

    /// Newest-that-fits: always. Cache-stable: between budgets whose history starts at
    /// anchors of the same step (or where one of them keeps all history).
    #[test]
    fn a_bigger_budget_never_yields_fewer_history_messages(case in case(), extra in 1u32..2000) {
        // Whole history: with clearing, a budget that fits no cleared start of its step keeps
        // what the walk reached, cleared as newest-that-fits does.
        let case = Case { clear: None, ..case };
        let small = pack(&case, case.max_tokens, Format::OpenAiChat);
        let big = pack(&case, case.max_tokens + extra, Format::OpenAiChat);
        let (small_step, big_step) = (small.stats.history_step_tokens, big.stats.history_step_tokens);
        if case.history == HistoryPolicy::Newest || small_step == big_step || small_step == 0 || big_step == 0 {
            prop_assert!(
                big.stats.messages_included >= small.stats.messages_included,
                "{} tokens: {} messages; {} tokens: {}",
                case.max_tokens, small.stats.messages_included, case.max_tokens + extra, big.stats.messages_included
            );
        }
    }

    /// A cache-stable history is the newest-that-fits history, cut at a turn anchor: never a
    /// message the newest-that-fits pack would not send.
    #[test]
    fn cache_stable_history_is_a_suffix_of_the_newest_history(case in case()) {
        // Clearing splits a cache-stable room in two; the property is about whole history.
        let case = Case { clear: None, ..case };
        let stable = pack(&Case { history: HistoryPolicy::CacheStable, ..case.clone() }, case.max_tokens, Format::OpenAiChat);
        let newest = pack(&Case { history: HistoryPolicy::Newest, ..case.clone() }, case.max_tokens, Format::OpenAiChat);
        let history = |p: &ContextPack| -> Vec<Sequence> {
            p.messages.iter().filter(|m| m.source == Source::History).filter_map(|m| m.sequence).collect()
        };
        let (stable_history, newest_history) = (history(&stable), history(&newest));
        prop_assert!(newest_history.ends_with(&stable_history) || stable_history.iter().all(|s| newest_history.contains(s)),
            "stable {stable_history:?}, newest {newest_history:?}");
        prop_assert!(stable.stats.total_tokens <= newest.stats.total_tokens.max(stable.stats.budget_tokens));
        if newest.stats.messages_dropped == 0 {
            prop_assert_eq!(&stable.messages, &newest.messages, "all history fits: the policies agree");
        }
    }

    /// With clearing, a cache-stable history (its start on a coarse grid, its cleared part up
    /// to a frontier on a finer one) is still within what newest-that-fits with clearing
    /// reaches: never a message that pack would not send, and never a result cleared that
    /// newest-that-fits sends whole (such as one of the `keep_recent` newest).
    #[test]
    fn cache_stable_clearing_stays_within_what_newest_clearing_reaches(
        case in case(),
        clear in (0u32..4, any::<bool>()),
    ) {
        let clear = ClearToolResults { keep_recent: clear.0, exclude_tools: vec![], clear_arguments: clear.1 };
        let case = Case { clear: Some(clear), ..case };
        let stable = pack(&Case { history: HistoryPolicy::CacheStable, ..case.clone() }, case.max_tokens, Format::OpenAiChat);
        let newest = pack(&Case { history: HistoryPolicy::Newest, ..case.clone() }, case.max_tokens, Format::OpenAiChat);
        prop_assume!(!stable.stats.over_budget && !newest.stats.over_budget);
        let history = |p: &ContextPack| -> Vec<Sequence> {
            p.messages.iter().filter(|m| m.source == Source::History).filter_map(|m| m.sequence).collect()
        };
        let (stable_history, newest_history) = (history(&stable), history(&newest));
        prop_assert!(stable_history.iter().all(|s| newest_history.contains(s)),
            "stable {stable_history:?}, newest {newest_history:?}");
        prop_assert!(stable.stats.total_tokens <= stable.stats.budget_tokens);
        let (stable_cleared, newest_cleared) = (cleared_results(&stable), cleared_results(&newest));
        prop_assert!(stable_cleared.is_subset(&newest_cleared),
            "stable {stable_cleared:?}, newest {newest_cleared:?}");
        if newest.stats.tool_results_cleared == 0 && newest.stats.messages_dropped == 0 {
            prop_assert_eq!(&stable.messages, &newest.messages, "all history fits whole: the policies agree");
        }
    }

    /// A cache-stable history gives up less than one step plus one turn of the history that
    /// newest-that-fits sends (counted in the approximation, which offsets are measured in):
    /// it starts at the oldest anchor of its step in the window, and the anchor before that
    /// one lies outside the window.
    #[test]
    fn cache_stable_history_gives_up_less_than_a_step_and_a_turn(case in case()) {
        let case = Case { tokenizer: Tokenizer::Approx, clear: None, ..case };
        let stable = pack(&Case { history: HistoryPolicy::CacheStable, ..case.clone() }, case.max_tokens, Format::OpenAiChat);
        let newest = pack(&Case { history: HistoryPolicy::Newest, ..case.clone() }, case.max_tokens, Format::OpenAiChat);
        let mut longest_turn = 0u32;
        let mut turn = 0u32;
        // An anchor inside a tool group (a later result answers an earlier call) is no place
        // to cut: the group is one unit, and the turn runs on through it.
        let splits = |i: usize| {
            let at = case.log[i].sequence;
            !case.log[i..].iter().any(|r| r.call_sequence.is_some_and(|c| c < at))
        };
        for (i, m) in case.log.iter().enumerate() {
            if m.turn_anchor.is_some() && splits(i) {
                longest_turn = longest_turn.max(turn);
                turn = 0;
            }
            turn += m.tokens.approx.max(1);
        }
        longest_turn = longest_turn.max(turn);
        let given_up = newest.stats.history_tokens - stable.stats.history_tokens;
        prop_assert!(
            given_up < stable.stats.history_step_tokens + longest_turn || given_up == 0,
            "gave up {given_up} tokens with a step of {} and turns of up to {longest_turn}",
            stable.stats.history_step_tokens
        );
    }

    /// As the log grows (a prefix of it, then the whole), a cache-stable history's start never
    /// moves back, and while it stays put the earlier pack is an exact prefix of the later one,
    /// rendered bytes included (but for the closing bracket).
    #[test]
    fn cache_stable_packs_repeat_their_beginning_as_the_log_grows(case in case(), cut in 0.0f64..1.0) {
        // Packs that keep the final reply; one that leaves it out is checked at the end.
        let case = Case { history: HistoryPolicy::CacheStable, pending: Pending::None, final_assistant: FinalAssistant::Keep, ..case };
        // Cut the log just before a turn start, so the shorter log has no group the longer
        // one completes.
        let starts: Vec<usize> = case.log.iter().enumerate()
            .filter(|(_, m)| m.message.role == Role::User && !m.message.exclude_from_context)
            .map(|(i, _)| i)
            .collect();
        prop_assume!(!starts.is_empty());
        let at = starts[((starts.len() as f64) * cut) as usize];
        let earlier_case = Case {
            log: case.log[..at].to_vec(),
            summary_through: case.summary_through.map(|s| s.min(at as u64)),
            ..case.clone()
        };
        let later_case = Case { summary_through: earlier_case.summary_through, ..case.clone() };
        let earlier = pack(&earlier_case, case.max_tokens, Format::OpenAiChat);
        let later = pack(&later_case, case.max_tokens, Format::OpenAiChat);
        prop_assume!(!earlier.stats.over_budget && !later.stats.over_budget);
        prop_assume!(earlier.stats.history_step_tokens == later.stats.history_step_tokens || earlier.stats.history_step_tokens == 0);
        let start = |p: &ContextPack| p.stats.oldest_included_sequence;
        // With clearing, older history may fit again where the later pack clears what the
        // earlier one did not (a result that aged out of the current turn, or fewer cleared
        // steps fitting); never otherwise.
        let (was, is) = (cleared_results(&earlier), cleared_results(&later));
        let aged = is.iter().any(|s| !was.contains(s) && (earlier_held(&earlier, *s) || s.get() < start(&earlier)));
        let back = start(&later) < start(&earlier) && start(&earlier) != 0;
        prop_assert!(!back || aged, "history went back from {} to {}", start(&earlier), start(&later));
        // Between jumps (the history and what is cleared of it stay put) the later pack
        // extends the earlier one.
        let clearing_stays = was.iter().all(|s| is.contains(s)) && !aged;
        if start(&later) == start(&earlier) && start(&earlier) != 0 && clearing_stays {
            prop_assert!(later.messages.starts_with(&earlier.messages),
                "earlier {:?}\nlater {:?}", earlier.messages, later.messages);
            let (a, b) = (render(&earlier.messages, Format::OpenAiChat), render(&later.messages, Format::OpenAiChat));
            prop_assert!(b.starts_with(&a[..a.len() - 1]), "{a}\n{b}");
            prop_assert_eq!(earlier.stats.stable_prefix_tokens, earlier.stats.total_tokens - REPLY_PRIMING as u32);
            // Left out, the final replies come back in the later pack where they were: the
            // earlier pack promises only what precedes them, or only what precedes history when
            // the room they left went to older history.
            let omitting = Case { final_assistant: FinalAssistant::Omit, ..earlier_case };
            let earlier = pack(&omitting, case.max_tokens, Format::OpenAiChat);
            prop_assume!(!earlier.stats.over_budget);
            // The promise holds while history starts where it did (a start that moves can move a
            // pinned message too, as for any pack).
            prop_assume!(start(&earlier) == start(&later));
            let mut promised = 0;
            let repeated: Vec<ContextMessage> = earlier.messages.iter()
                .take_while(|m| { promised += m.tokens; promised <= earlier.stats.stable_prefix_tokens })
                .cloned()
                .collect();
            prop_assert!(later.messages.starts_with(&repeated), "promised {:?}\nlater {:?}", repeated, later.messages);
            let whole: u32 = repeated.iter().map(|m| m.tokens).sum();
            prop_assert_eq!(whole, earlier.stats.stable_prefix_tokens);
        }
    }
}

/// The sequences of the tool results `pack` cleared.
fn cleared_results(pack: &ContextPack) -> HashSet<Sequence> {
    pack.messages
        .iter()
        .filter(|m| m.message.role == Role::Tool && m.message.content.starts_with("[tool result cleared"))
        .filter_map(|m| m.sequence)
        .collect()
}

#[test]
fn a_call_whose_arguments_were_already_empty_stays_verbatim_when_its_result_is_cleared() {
    let call = |arguments: &'static str| Event::Tools {
        calls: 1,
        answered: vec![true; 3],
        output: "18 degrees and sunny all week in the city. ".repeat(40),
        huge: false,
        arguments,
        interleave: None,
    };
    let events = [
        user("Weather?"),
        call("{}"),
        user("And tomorrow?"),
        call("{}"),
        user("And the weekend?"),
        call("{}"),
        user("Thanks"),
    ];
    let mut cleared_any = false;
    for max_tokens in (200..4_000).rev().step_by(50) {
        let mut case = simple_case(&events, max_tokens, Pending::None);
        case.clear = Some(ClearToolResults {
            keep_recent: 0,
            exclude_tools: vec![],
            clear_arguments: true,
        });
        let pack = pack(&case, max_tokens, Format::OpenAiChat);
        if pack.stats.tool_results_cleared == 0 || pack.stats.over_budget {
            continue;
        }
        cleared_any = true;
        let calls: Vec<Sequence> = pack
            .messages
            .iter()
            .filter(|m| !m.message.tool_calls.is_empty())
            .filter_map(|m| m.sequence)
            .collect();
        for call in calls {
            assert!(
                !pack.abridged.contains(&call),
                "budget {max_tokens}: call {call} (arguments `{{}}`, unchanged) called abridged"
            );
        }
    }
    assert!(cleared_any, "some budget clears results");
}

/// Whether `pack` holds the message at `sequence`.
fn earlier_held(pack: &ContextPack, sequence: Sequence) -> bool {
    pack.messages.iter().any(|m| m.sequence == Some(sequence))
}

#[test]
fn the_format_checkers_reject_broken_packs() {
    let orphan = r#"[{"role":"tool","tool_call_id":"x","content":"y"}]"#;
    assert!(check_openai_format(orphan).is_err());
    let unanswered = r#"[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",
        "function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"hi"}]"#;
    assert!(check_openai_format(unanswered).is_err());
    let same_role = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},
        {"role":"user","content":[{"type":"text","text":"b"}]}]}"#;
    assert!(check_anthropic_format(same_role).is_err());
    let assistant_first = r#"{"messages":[{"role":"assistant","content":[{"type":"text","text":"hi"}]}]}"#;
    assert!(check_anthropic_format(assistant_first).is_err());
    assert!(check_anthropic_format(r#"{"messages":[]}"#).is_err());
    let blank = r#"{"messages":[{"role":"user","content":[{"type":"text","text":" "}]}]}"#;
    assert!(check_anthropic_format(blank).is_err());
    let prefill = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},
        {"role":"assistant","content":[{"type":"text","text":"a "}]}]}"#;
    assert!(check_anthropic_format(prefill).is_err());
    let svg = r#"{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64",
        "media_type":"image/svg+xml","data":"AA=="}}]}]}"#;
    assert!(check_anthropic_format(svg).is_err());
    let array_arguments = r#"[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",
        "function":{"name":"f","arguments":"[1]"}}]},{"role":"tool","tool_call_id":"a","content":"y"}]"#;
    assert!(check_openai_format(array_arguments).is_err());
    let late_result = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},
        {"role":"user","content":[{"type":"text","text":"b"},{"type":"tool_result","tool_use_id":"a","content":"x"}]}]}"#;
    assert!(check_anthropic_format(late_result).is_err());
}

#[test]
fn pending_tool_results_keep_their_stored_call_in_the_pack() {
    let events = [
        Event::User {
            text: "look it up".into(),
            pinned: false,
            excluded: false,
            attach: false,
        },
        Event::Tools {
            calls: 1,
            answered: vec![false; 3],
            output: String::new(),
            huge: false,
            arguments: ARGUMENTS[0],
            interleave: None,
        },
    ];
    let log = build_log(&events);
    let case = Case {
        log,
        max_tokens: 10_000,
        reserve: 0,
        max_messages: 0,
        max_turns: 0,
        tool_output_max_tokens: 0,
        summary_through: None,
        pending: Pending::None,
        tokenizer: Tokenizer::Approx,
        history: HistoryPolicy::CacheStable,
        final_assistant: FinalAssistant::FormatDefault,
        clear: None,
    };
    let mut request = request(&case, 10_000, Format::OpenAiChat);
    request.pending = vec![Message {
        tool_call_id: Some("call-2-0".into()),
        ..plain(Role::Tool, "42".into())
    }];
    let mut snapshot = snapshot(&case);
    snapshot.pending_calls = HashMap::from([("call-2-0".to_string(), Sequence::parse(2).unwrap())]);
    let mut packer = ContextPacker::new(request, snapshot);
    while let Some(page) = packer.next_page() {
        let rows = case
            .log
            .iter()
            .rev()
            .filter(|m| m.sequence < page.before)
            .cloned()
            .collect();
        packer.feed(rows, page);
    }
    let pack = packer.finish();
    let rendered = render(&pack.messages, Format::OpenAiChat);
    assert!(check_openai_format(&rendered).is_ok(), "{rendered}");
    assert_eq!(pack.stats.incomplete_tool_groups, 0);
    assert!(
        pack.messages
            .iter()
            .any(|m| m.sequence == Some(Sequence::parse(2).unwrap()))
    );
}

fn user(text: &str) -> Event {
    Event::User {
        text: text.into(),
        pinned: false,
        excluded: false,
        attach: false,
    }
}

fn assistant(text: &str, pinned: bool) -> Event {
    Event::Assistant {
        text: text.into(),
        pinned,
        failed: false,
    }
}

fn tools(calls: usize, interleave: Option<(usize, Role)>) -> Event {
    Event::Tools {
        calls,
        answered: vec![true; 3],
        output: "18 degrees".into(),
        huge: false,
        arguments: ARGUMENTS[0],
        interleave,
    }
}

fn simple_case(events: &[Event], max_tokens: u32, pending: Pending) -> Case {
    Case {
        log: build_log(events),
        max_tokens,
        reserve: 0,
        max_messages: 0,
        max_turns: 0,
        tool_output_max_tokens: 0,
        summary_through: None,
        pending,
        tokenizer: Tokenizer::Approx,
        history: HistoryPolicy::Newest,
        final_assistant: FinalAssistant::FormatDefault,
        clear: None,
    }
}

/// Roles of a rendered OpenAI pack, system messages aside.
fn roles(openai: &Value) -> Vec<&str> {
    openai
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .filter(|role| *role != "system")
        .collect()
}

/// Both renderings of `case`'s pack, checked against the format rules.
fn rendered_valid(case: &Case, max_tokens: u32) -> (ContextPack, Value, ContextPack, Value) {
    let openai = pack(case, max_tokens, Format::OpenAiChat);
    let openai_json = render(&openai.messages, Format::OpenAiChat);
    assert_eq!(check_openai_format(&openai_json), Ok(()), "{openai_json}");
    let anthropic = pack(case, max_tokens, Format::AnthropicMessages);
    let anthropic_json = render(&anthropic.messages, Format::AnthropicMessages);
    assert_eq!(
        check_anthropic_format(&anthropic_json),
        Ok(()),
        "{anthropic_json}"
    );
    (
        openai,
        serde_json::from_str(&openai_json).unwrap(),
        anthropic,
        serde_json::from_str(&anthropic_json).unwrap(),
    )
}

#[test]
fn a_message_typed_while_tools_run_follows_the_groups_results() {
    // user, call(2 parallel), [result], "hurry up", [result]
    let case = simple_case(
        &[user("weather?"), tools(2, Some((1, Role::User)))],
        10_000,
        Pending::None,
    );
    let (_, openai, _, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(roles(&openai), ["user", "assistant", "tool", "tool", "user"]);
    let turns = anthropic["messages"].as_array().unwrap();
    let last: Vec<&str> = turns[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(last, ["tool_result", "tool_result", "text"], "{anthropic}");
}

#[test]
fn an_assistant_note_between_parallel_results_follows_them() {
    let case = simple_case(
        &[user("go"), tools(3, Some((2, Role::Assistant)))],
        10_000,
        Pending::None,
    );
    let (_, openai, _, _) = rendered_valid(&case, 10_000);
    assert_eq!(
        roles(&openai),
        ["user", "assistant", "tool", "tool", "tool", "assistant"]
    );
}

#[test]
fn a_pinned_assistant_opener_is_preceded_by_the_placeholder_turn() {
    let case = simple_case(
        &[
            assistant("Welcome! How can I help?", true),
            user("hi"),
            assistant("Hello.", false),
        ],
        10_000,
        Pending::None,
    );
    let (openai_pack, openai, anthropic_pack, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(
        roles(&openai)[0],
        "assistant",
        "OpenAI accepts an assistant opener as is"
    );
    assert!(
        openai_pack
            .messages
            .iter()
            .all(|m| m.source != Source::Placeholder)
    );
    assert_eq!(anthropic["messages"][0]["content"][0]["text"], PLACEHOLDER_TURN);
    assert_eq!(
        anthropic["messages"][1]["content"][0]["text"],
        "Welcome! How can I help?"
    );
    let placeholder = anthropic_pack
        .messages
        .iter()
        .find(|m| m.source == Source::Placeholder)
        .unwrap();
    assert_eq!(anthropic_pack.stats.truncation_notice_tokens, placeholder.tokens);
}

#[test]
fn a_pending_assistant_message_alone_still_makes_a_valid_anthropic_pack() {
    let case = simple_case(&[], 10_000, Pending::Assistant("Sure, ".into()));
    let (_, _, _, anthropic) = rendered_valid(&case, 10_000);
    let turns = anthropic["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(
        turns[1]["content"][0]["text"], "Sure,",
        "the prefill loses its trailing space"
    );
}

/// Roles of the turns of a rendered Anthropic pack.
fn anthropic_roles(anthropic: &Value) -> Vec<&str> {
    anthropic["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

#[test]
fn anthropic_and_gemini_packs_leave_out_a_final_reply_unless_asked_to_keep_it() {
    let failed = Event::Assistant {
        text: "The answer is".into(),
        pinned: false,
        failed: true,
    };
    let events = [user("q1"), assistant("a1", false), user("q2"), failed];
    let case = simple_case(&events, 10_000, Pending::None);
    let (openai_pack, openai, anthropic_pack, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(roles(&openai), ["user", "assistant", "user", "assistant"]);
    assert_eq!(openai_pack.stats.final_assistant_omitted, 0);
    assert_eq!(anthropic_roles(&anthropic), ["user", "assistant", "user"]);
    assert_eq!(anthropic_pack.stats.final_assistant_omitted, 1);
    assert_eq!(
        anthropic_pack.stats.messages_dropped, 0,
        "older history is all there"
    );
    assert_eq!(
        anthropic_pack.stats.total_tokens + openai_pack.messages.last().unwrap().tokens,
        openai_pack.stats.total_tokens
    );
    let gemini = pack(&case, 10_000, Format::Gemini);
    let contents: Value = serde_json::from_str(&render(&gemini.messages, Format::Gemini)).unwrap();
    let last = contents["contents"].as_array().unwrap().last().unwrap();
    assert_eq!(
        (last["role"].as_str(), gemini.stats.final_assistant_omitted),
        (Some("user"), 1)
    );

    let keep = Case {
        final_assistant: FinalAssistant::Keep,
        ..case.clone()
    };
    let (_, _, anthropic_pack, anthropic) = rendered_valid(&keep, 10_000);
    assert_eq!(
        anthropic_roles(&anthropic),
        ["user", "assistant", "user", "assistant"]
    );
    assert_eq!(anthropic_pack.stats.final_assistant_omitted, 0);
    let omit = Case {
        final_assistant: FinalAssistant::Omit,
        ..case
    };
    let (openai_pack, openai, _, _) = rendered_valid(&omit, 10_000);
    assert_eq!(roles(&openai), ["user", "assistant", "user"]);
    assert_eq!(openai_pack.stats.final_assistant_omitted, 1);
}

#[test]
fn a_final_reply_left_out_costs_no_budget() {
    // A long answer that timed out: its partial output alone is over the budget.
    let long = Event::Assistant {
        text: "lorem ipsum dolor ".repeat(400),
        pinned: false,
        failed: true,
    };
    let events = [user("q1"), assistant("a1", false), user("q2"), long];
    let case = simple_case(&events, 600, Pending::None);
    let kept = pack(
        &Case {
            final_assistant: FinalAssistant::Keep,
            ..case.clone()
        },
        600,
        Format::AnthropicMessages,
    );
    assert!(kept.stats.over_budget, "kept, the reply does not fit");
    assert!(kept.messages.iter().all(|m| m.source != Source::WorkingMemory));
    let left = pack(&case, 600, Format::AnthropicMessages);
    assert!(!left.stats.over_budget, "{:?}", left.stats);
    assert_eq!(left.stats.final_assistant_omitted, 1);
    let history: Vec<u64> = left
        .messages
        .iter()
        .filter_map(|m| m.sequence)
        .map(Sequence::get)
        .collect();
    assert_eq!(history, [1, 2, 3], "the earlier turn fits again");
    assert!(left.messages.iter().any(|m| m.source == Source::WorkingMemory));
}

#[test]
fn a_reply_left_out_inside_a_dropped_group_is_not_counted_twice() {
    // A call, a note typed while it ran, and a result too large for the budget: the note is
    // left out as a final reply, and the group as history that does not fit.
    let events = [Event::Tools {
        calls: 1,
        answered: vec![true],
        output: "lorem ipsum ".repeat(300),
        huge: false,
        arguments: ARGUMENTS[0],
        interleave: Some((0, Role::Assistant)),
    }];
    let case = simple_case(&events, 200, Pending::None);
    let pack = pack(&case, 200, Format::AnthropicMessages);
    assert_eq!(pack.stats.final_assistant_omitted, 1);
    assert_eq!(pack.stats.messages_dropped, 2, "the call and its result");
    let notice = pack
        .messages
        .iter()
        .find(|m| m.source == Source::TruncationNotice)
        .unwrap();
    assert!(
        notice.message.content.contains("[2 earlier messages"),
        "{}",
        notice.message.content
    );
    assert!(
        notice.message.content.contains("sequences 1 to 3"),
        "{}",
        notice.message.content
    );
}

#[test]
fn a_note_that_would_end_the_pack_after_pending_results_is_left_out() {
    // The log: q, a call, a note typed while it ran; the result comes pending. Rendered, the
    // result moves up to its call, and the note would end the pack.
    let events = [user("q"), tools(1, Some((0, Role::Assistant)))];
    let mut case = simple_case(&events, 10_000, Pending::Results);
    case.log.retain(|m| m.message.role != Role::Tool);
    let (_, _, anthropic_pack, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(anthropic_roles(&anthropic), ["user", "assistant", "user"]);
    assert_eq!(anthropic_pack.stats.final_assistant_omitted, 1);
    let last = anthropic_pack.messages.last().unwrap();
    assert_eq!((last.source, last.message.role), (Source::Pending, Role::Tool));
}

#[test]
fn a_pinned_final_assistant_message_is_closed_by_a_user_turn_and_a_pending_one_stays() {
    let case = simple_case(&[assistant("Welcome!", true)], 10_000, Pending::None);
    let (openai_pack, _, anthropic_pack, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(
        anthropic_roles(&anthropic),
        ["user", "assistant", "user"],
        "pinned: always kept"
    );
    let closing = anthropic_pack.messages.last().unwrap();
    assert_eq!(
        (closing.source, closing.message.content.as_str()),
        (Source::Placeholder, CLOSING_TURN)
    );
    let placeholders: u32 = anthropic_pack
        .messages
        .iter()
        .filter(|m| m.source == Source::Placeholder)
        .map(|m| m.tokens)
        .sum();
    assert_eq!(anthropic_pack.stats.truncation_notice_tokens, placeholders);
    assert_eq!(anthropic_pack.stats.final_assistant_omitted, 0);
    assert!(
        anthropic_pack.stats.stable_prefix_tokens
            <= anthropic_pack.stats.total_tokens - closing.tokens - REPLY_PRIMING as u32,
        "the next pack has no closing turn"
    );
    assert!(
        openai_pack
            .messages
            .iter()
            .all(|m| m.source != Source::Placeholder),
        "OpenAI keeps it last"
    );
    let events = [user("q"), assistant("a", false)];
    let case = simple_case(&events, 10_000, Pending::Assistant("Sure, ".into()));
    let (_, _, anthropic_pack, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(
        anthropic["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "the stored reply and the caller's prefill make one assistant turn"
    );
    assert_eq!(anthropic_pack.stats.final_assistant_omitted, 0);
}

#[test]
fn a_log_with_no_visible_turn_still_makes_a_valid_anthropic_pack() {
    let events = [
        Event::System("Note: free plan.".into()),
        Event::User {
            text: "draft".into(),
            pinned: false,
            excluded: true,
            attach: false,
        },
    ];
    let case = simple_case(&events, 10_000, Pending::None);
    let (_, _, _, anthropic) = rendered_valid(&case, 10_000);
    assert_eq!(anthropic["messages"].as_array().unwrap().len(), 1);
    assert!(
        anthropic["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains("free plan")
    );
}

#[test]
fn history_starts_at_a_turn_boundary_when_one_is_in_the_window() {
    // Turn 1: u1 a2. Turn 2: u3, call a4 + r5, call a6 + r7, a8. Turn 3 (current): u9.
    let events = [
        user("first question"),
        assistant("first answer", false),
        user("second question"),
        tools(1, None),
        tools(1, None),
        assistant("second answer", false),
        user("third question"),
    ];
    let case = simple_case(&events, 10_000, Pending::None);
    let full = pack(&case, 10_000, Format::OpenAiChat);
    assert_eq!(full.stats.oldest_included_sequence, 1);
    // Find budgets where the walk stops inside turn 2: history is then turn 3 alone.
    for budget in 40..400 {
        let pack = pack(&case, budget, Format::OpenAiChat);
        let oldest = pack.stats.oldest_included_sequence;
        if oldest == 0 {
            continue;
        }
        let first = case.log[oldest as usize - 1].message.role;
        assert_eq!(first, Role::User, "budget {budget}: history starts at {oldest}");
    }
}

#[test]
fn the_newest_turn_is_kept_in_part_when_the_current_turn_is_pending() {
    let events = [
        user("question"),
        tools(1, None),
        tools(1, None),
        assistant("answer", false),
    ];
    let case = simple_case(&events, 10_000, Pending::User("next".into()));
    let whole = pack(&case, 10_000, Format::OpenAiChat);
    assert_eq!(whole.stats.messages_included, 6);
    let mut partial_seen = false;
    for budget in 40..whole.stats.total_tokens {
        let (_, _, anthropic_pack, anthropic) = rendered_valid(&case, budget);
        let stats = anthropic_pack.stats;
        if stats.messages_included > 0 && stats.oldest_included_sequence > 1 {
            partial_seen = true;
            assert_eq!(anthropic["messages"][0]["content"][0]["text"], PLACEHOLDER_TURN);
            assert!(stats.total_tokens <= budget || stats.over_budget);
        }
    }
    assert!(partial_seen, "some budget keeps part of the newest turn");
}

/// A long tool-using conversation replayed one turn at a time: for each call, the share of its
/// rendered pack that repeats the previous call's pack as an exact prefix, and its budget use.
fn replay(history: HistoryPolicy, summary_through: Option<u64>) -> (Vec<f64>, Vec<f64>) {
    let mut seed = 0x5eed_u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut events = Vec::new();
    for turn in 0..160 {
        events.push(user(&format!(
            "step {turn}: {}",
            "please check ".repeat(next(30) as usize + 2)
        )));
        events.push(Event::Tools {
            calls: next(2) as usize + 1,
            answered: vec![true; 3],
            output: "result line ".repeat(next(80) as usize + 1),
            huge: false,
            arguments: ARGUMENTS[0],
            interleave: None,
        });
        events.push(assistant(
            &"done and noted. ".repeat(next(20) as usize + 1),
            false,
        ));
    }
    let log = build_log(&events);
    let starts: Vec<usize> = (0..log.len())
        .filter(|&i| log[i].message.role == Role::User)
        .collect();
    let (mut reuse, mut used) = (Vec::new(), Vec::new());
    let mut previous = String::new();
    for &at in &starts[20..] {
        let case = Case {
            summary_through,
            history,
            ..simple_case(&[], 3000, Pending::None)
        };
        let case = Case {
            log: log[..=at].to_vec(),
            ..case
        };
        let pack = pack(&case, 3000, Format::OpenAiChat);
        assert!(!pack.stats.over_budget);
        let rendered = render(&pack.messages, Format::OpenAiChat);
        let common = rendered
            .bytes()
            .zip(previous.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        reuse.push(common as f64 / rendered.len() as f64);
        used.push(f64::from(pack.stats.total_tokens) / f64::from(pack.stats.budget_tokens));
        previous = rendered;
    }
    (reuse, used)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn cache_stable_packs_repeat_most_of_the_previous_pack_and_still_fill_the_budget() {
    for summary in [None, Some(40)] {
        let (reuse, used) = replay(HistoryPolicy::CacheStable, summary);
        let (newest_reuse, newest_used) = replay(HistoryPolicy::Newest, summary);
        assert!(median(&reuse) >= 0.8, "median reuse {}", median(&reuse));
        assert!(mean(&used) >= 0.6, "mean budget use {}", mean(&used));
        assert!(
            median(&newest_reuse) < 0.3,
            "newest-that-fits slides: {}",
            median(&newest_reuse)
        );
        assert!(
            mean(&newest_used) > mean(&used),
            "{} vs {}",
            mean(&newest_used),
            mean(&used)
        );
    }
}

#[test]
fn blank_messages_among_the_replies_that_would_end_the_pack_go_with_them() {
    // A failed reply, a whitespace-only user message, a reply, a blank one (issue 60, case
    // 6b): Anthropic and Gemini send no blank text, so the replies would end the pack and are
    // left out; the blank messages between them go too, leaving no gap in what the pack holds.
    let failed = Event::Assistant {
        text: String::new(),
        pinned: false,
        failed: true,
    };
    let events = [
        user("q1"),
        assistant("a1", false),
        user("q2"),
        failed,
        user(" "),
        assistant("a3", false),
        user("\n\t"),
    ];
    for (pending, held) in [(Pending::None, 3), (Pending::User("next?".into()), 7)] {
        let case = simple_case(&events, 4000, pending);
        for format in [Format::AnthropicMessages, Format::Gemini] {
            let pack = pack(&case, 4000, format);
            let sequences: Vec<u64> = pack
                .messages
                .iter()
                .filter_map(|m| m.sequence.map(Sequence::get))
                .collect();
            assert_eq!(sequences, (1..=held).collect::<Vec<u64>>(), "{format:?}");
            let omitted = if held == 3 { 2 } else { 0 };
            assert_eq!(pack.stats.final_assistant_omitted, omitted, "{format:?}");
            assert_eq!(pack.stats.messages_dropped, 0, "{format:?}");
        }
    }
}
