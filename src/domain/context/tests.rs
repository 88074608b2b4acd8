//! Properties of context assembly (DESIGN.md 2.2, invariants 1-5) over generated conversations:
//! parallel and dangling tool calls, pinned and excluded messages, failed LLM calls, huge tool
//! outputs, unicode, summaries at arbitrary watermarks.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::UNIX_EPOCH,
};

use proptest::prelude::*;
use serde_json::Value;

use super::{
    super::memory::WorkingMemory,
    ContextPack, ContextPacker, ContextRequest, ContextSnapshot, Format, Source, SummarySection, TokenBudget,
    TokenCounts,
    cost::{context_text, message_cost_with_text},
    initial_page_limit,
    render::render,
};
use crate::{
    domain::{
        ids::{ConversationId, Sequence},
        message::{Attachment, AttachmentSource, LlmError, Message, Role, StoredMessage, ToolCall},
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
        attach: bool,
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
                attach,
            } => {
                let attachments = if attach {
                    vec![
                        Attachment {
                            mime_type: "image/png".into(),
                            filename: "chart.png".into(),
                            source: AttachmentSource::Data(vec![137, 80, 78, 71]),
                        },
                        Attachment {
                            mime_type: "application/pdf".into(),
                            filename: "spec.pdf".into(),
                            source: AttachmentSource::Uri("https://example.com/spec.pdf".into()),
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
    ContextSnapshot {
        summary: case.summary_through.map(|through| SummarySection {
            text: "Earlier: the user asked about weather.".into(),
            through_sequence: Sequence::parse(through).unwrap(),
        }),
        memory: Some(WorkingMemory {
            summary: "Goals: plan a trip.".into(),
            ..WorkingMemory::default()
        }),
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
    if let (None, Some(user)) = (&case.pending_user, snap.last_user_sequence) {
        prop_assert!(included.contains(&user), "newest user message {user} missing");
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
    let cut_in_pack = pack
        .messages
        .iter()
        .any(|m| m.message.role == Role::Tool && m.message.content.contains("tool output omitted"));
    prop_assert_eq!(
        pack.stats.truncated,
        cut_in_pack,
        "truncated says whether a cut tool output is in the pack"
    );
    Ok(())
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
                        "image_url" => part["image_url"]["url"].is_string(),
                        "file" => part["file"]["file_data"].is_string(),
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
                let ok = call["id"].is_string()
                    && call["type"] == "function"
                    && call["function"]["name"].is_string()
                    && call["function"]["arguments"].is_string();
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

/// Checks a rendered Anthropic pack: optional string `system`, strictly alternating roles,
/// non-empty content blocks, and every `tool_use` answered by a `tool_result` opening the next
/// (user) message.
fn check_anthropic_format(rendered: &str) -> Result<(), String> {
    let pack: Value = serde_json::from_str(rendered).map_err(|e| e.to_string())?;
    if let Some(system) = pack.get("system") {
        system
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or("system must be a non-empty string")?;
    }
    let messages = pack["messages"].as_array().ok_or("messages must be an array")?;
    let mut previous_role = "";
    let mut awaiting: Vec<String> = Vec::new();
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
                }
                "text" => {
                    results_open = false;
                    if block["text"].as_str().is_none_or(str::is_empty) {
                        return Err(format!("message {i}: empty text block"));
                    }
                }
                "tool_use" if role == "assistant" => {
                    if !block["input"].is_object() || !block["id"].is_string() || !block["name"].is_string() {
                        return Err(format!("message {i}: bad tool_use {block}"));
                    }
                }
                "image" | "document" if role == "user" => results_open = false,
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
    let late_result = r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},
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
        pending_user: None,
        tokenizer: Tokenizer::Approx,
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
