//! Context assembly over arbitrary conversations and requests. The input is structured (roles,
//! tool calls and results drawn from a small id space, budgets, pending messages) so the fuzzer
//! spends its time in the packer rather than on bytes that fail to decode.
#![no_main]

use ctxd::proto;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Event {
    User(String),
    Assistant(String),
    System(String),
    Calls(Vec<u8>),
    Result(u8, String),
    Pinned(String),
    Excluded(String),
    Failed(String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    log: Vec<Event>,
    pending: Vec<Event>,
    max_tokens: u16,
    reserve: u16,
    max_messages: u8,
    max_turns: u8,
    tool_output_max_tokens: u8,
    tokenizer: u8,
    format: u8,
    final_assistant: u8,
    system_prompt: String,
}

fn message(event: &Event) -> proto::Message {
    let text = |role: proto::Role, content: &str| proto::Message {
        role: role as i32,
        content: content.into(),
        ..Default::default()
    };
    match event {
        Event::User(t) => text(proto::Role::User, t),
        Event::Assistant(t) => text(proto::Role::Assistant, t),
        Event::System(t) => text(proto::Role::System, t),
        Event::Calls(ids) => proto::Message {
            tool_calls: ids
                .iter()
                .map(|id| proto::ToolCall {
                    id: format!("c{}", id % 16),
                    name: "lookup".into(),
                    arguments: "{}".into(),
                    ..Default::default()
                })
                .collect(),
            ..text(proto::Role::Assistant, "")
        },
        Event::Result(id, t) => proto::Message {
            tool_call_id: format!("c{}", id % 16),
            ..text(proto::Role::Tool, t)
        },
        Event::Pinned(t) => proto::Message { pinned: true, ..text(proto::Role::User, t) },
        Event::Excluded(t) => proto::Message { exclude_from_context: true, ..text(proto::Role::User, t) },
        Event::Failed(t) => proto::Message {
            error: Some(proto::LlmError { code: "timeout".into(), message: "slow".into(), partial_output: t.clone() }),
            ..text(proto::Role::Assistant, "")
        },
    }
}

fuzz_target!(|input: Input| {
    let log = proto::AppendMessageRequest {
        conversation_id: "fuzz".into(),
        messages: input.log.iter().map(message).collect(),
        ..Default::default()
    };
    let request = proto::BuildContextRequest {
        budget: Some(proto::Budget {
            max_tokens: u32::from(input.max_tokens),
            reserve_output_tokens: u32::from(input.reserve),
            max_messages: u32::from(input.max_messages),
            max_turns: u32::from(input.max_turns),
        }),
        tokenizer: i32::from(input.tokenizer % 4),
        format: i32::from(input.format % 6),
        final_assistant: i32::from(input.final_assistant % 4),
        system_prompt: input.system_prompt,
        pending_messages: input.pending.iter().map(message).collect(),
        tool_output_max_tokens: u32::from(input.tool_output_max_tokens),
        ..Default::default()
    };
    ctxd::fuzzing::build_context(log, request);
});
