//! Malformed and hostile requests against a live replica: each gets its documented status,
//! nothing is stored, and the process survives. The table printed here is docs/reliability.md's.

use ctxd::proto::{self, Role};
use prost::Message as _;
use prost::bytes::{Buf, BufMut, Bytes};
use tonic::{
    Code, Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    codegen::http::uri::PathAndQuery,
    transport::Channel,
};

use crate::{
    Report,
    appenders::{all_messages, user},
    raw,
    replica::Replica,
};

/// Conversation the append cases target: must still not exist after each case.
const NEW: &str = "hostile-new";
/// Conversation the other cases target: must keep exactly its seeded messages and no summary.
const SEEDED: &str = "hostile-seeded";

enum Call {
    Append(proto::AppendMessageRequest),
    Build(proto::BuildContextRequest),
    Summarize(proto::SummarizeRequest),
    Memory(proto::UpdateWorkingMemoryRequest),
    Count(proto::CountTokensRequest),
    List(proto::ListMessagesRequest),
    /// Bytes sent as-is to a method path: what a broken or malicious client can send.
    Raw(&'static str, Vec<u8>),
    /// A whole request body sent as-is (gRPC framing included) to a path.
    Framed(&'static str, Vec<u8>),
}

pub(crate) async fn table(replicas: &mut [Replica]) -> anyhow::Result<Report> {
    let mut report = Report::new("malformed and hostile requests");
    let replica = &mut replicas[2];
    let mut client = replica.client().await?;
    client
        .append_message(append(
            SEEDED,
            vec![
                user("hello".into()),
                calling("c1"),
                result("c1"),
                assistant("done"),
            ],
        ))
        .await?;
    let channel = replica.channel().await?;
    let cases = cases();
    let count = cases.len();
    let mut failures = 0;
    println!("\n| # | request | expected | got | stored |");
    println!("|---|---|---|---|---|");
    for (i, (name, call, expected)) in cases.into_iter().enumerate() {
        let got = send(&mut client, &channel, replica.addr, call).await;
        let stored = stored_anything(&mut client).await?;
        let alive = replica.is_running();
        let ok = got == expected && !stored && alive;
        failures += usize::from(!ok);
        println!(
            "| {} | {name} | {expected:?} | {got:?}{} | {} |",
            i + 1,
            if alive { "" } else { " (replica died)" },
            if stored { "STORED" } else { "nothing" }
        );
        report.expect(
            ok,
            format!("{name}: expected {expected:?}, got {got:?}, stored={stored}, alive={alive}"),
        );
    }
    report.figure("cases", count);
    report.figure("cases with the wrong status, a write, or a crash", failures);
    Ok(report)
}

async fn send(
    client: &mut proto::context_service_client::ContextServiceClient<Channel>,
    channel: &Channel,
    addr: std::net::SocketAddr,
    call: Call,
) -> Code {
    let code = |r: Result<(), Status>| r.err().map_or(Code::Ok, |s| s.code());
    match call {
        Call::Append(r) => code(client.append_message(r).await.map(drop)),
        Call::Build(r) => code(client.build_context(r).await.map(drop)),
        Call::Summarize(r) => code(client.summarize(r).await.map(drop)),
        Call::Memory(r) => code(client.update_working_memory(r).await.map(drop)),
        Call::Count(r) => code(client.count_tokens(r).await.map(drop)),
        Call::List(r) => code(client.list_messages(r).await.map(drop)),
        Call::Framed(path, body) => {
            let sent = async {
                let send = raw::connect(addr).await?;
                raw::unary(&send, &addr.to_string(), path, &[], body).await
            };
            match sent.await {
                Ok(code) => Code::from_i32(code as i32),
                Err(_) => Code::Unknown,
            }
        }
        Call::Raw(method, bytes) => {
            let mut grpc = tonic::client::Grpc::new(channel.clone());
            if let Err(e) = grpc.ready().await {
                return Status::from_error(e.into()).code();
            }
            let path = PathAndQuery::try_from(format!("/ctxd.v1.ContextService/{method}")).expect("path");
            code(
                grpc.unary(tonic::Request::new(bytes), path, RawCodec)
                    .await
                    .map(drop),
            )
        }
    }
}

/// True if any case left a trace: the new conversation exists, or the seeded one changed.
async fn stored_anything(
    client: &mut proto::context_service_client::ContextServiceClient<Channel>,
) -> anyhow::Result<bool> {
    let created = !all_messages(client, NEW).await?.is_empty();
    let seeded = all_messages(client, SEEDED).await?.len();
    let pack = client
        .build_context(proto::BuildContextRequest {
            conversation_id: SEEDED.into(),
            budget: Some(proto::Budget {
                max_tokens: 10_000,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await?
        .into_inner();
    let summarized = pack.stats.is_some_and(|s| s.summary_through_sequence > 0);
    let memory = client
        .get_working_memory(proto::GetWorkingMemoryRequest {
            conversation_id: SEEDED.into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .memory;
    let remembered = memory.is_some_and(|m| m.version > 0);
    Ok(created || seeded != 4 || summarized || remembered)
}

fn append(conversation: &str, messages: Vec<proto::Message>) -> proto::AppendMessageRequest {
    proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        messages,
        ..Default::default()
    }
}

fn message(role: Role, content: &str) -> proto::Message {
    proto::Message {
        role: role as i32,
        content: content.into(),
        ..Default::default()
    }
}

fn assistant(content: &str) -> proto::Message {
    message(Role::Assistant, content)
}

fn calling(id: &str) -> proto::Message {
    proto::Message {
        tool_calls: vec![proto::ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: "{}".into(),
            ..Default::default()
        }],
        ..message(Role::Assistant, "")
    }
}

fn result(id: &str) -> proto::Message {
    proto::Message {
        tool_call_id: id.into(),
        ..message(Role::Tool, "42")
    }
}

fn budget(max_tokens: u32, reserve: u32) -> Option<proto::Budget> {
    Some(proto::Budget {
        max_tokens,
        reserve_output_tokens: reserve,
        ..Default::default()
    })
}

fn build(request: proto::BuildContextRequest) -> Call {
    Call::Build(proto::BuildContextRequest {
        conversation_id: if request.conversation_id.is_empty() {
            SEEDED.into()
        } else {
            request.conversation_id
        },
        ..request
    })
}

fn summarize(request: proto::SummarizeRequest) -> Call {
    Call::Summarize(proto::SummarizeRequest {
        conversation_id: SEEDED.into(),
        ..request
    })
}

/// A protobuf field: tag `field`, wire type 2 (length-delimited), `bytes`.
fn field(field: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(field << 3) | 2, bytes.len() as u8];
    out.extend_from_slice(bytes);
    out
}

fn cases() -> Vec<(&'static str, Call, Code)> {
    use Code::{Aborted, InvalidArgument, NotFound, ResourceExhausted, Unimplemented};
    let one = |m: proto::Message| Call::Append(append(NEW, vec![m]));
    let big = |n: usize| "x".repeat(n);
    vec![
        (
            "role unspecified",
            one(proto::Message {
                role: 0,
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "role value 99 (not in the enum)",
            one(proto::Message {
                role: 99,
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "empty conversation id",
            Call::Append(append("", vec![user("x".into())])),
            InvalidArgument,
        ),
        (
            "conversation id of 10 KB",
            Call::Append(append(&big(10_000), vec![user("x".into())])),
            InvalidArgument,
        ),
        (
            "conversation id with a NUL byte",
            Call::Append(append("a\0b", vec![user("x".into())])),
            InvalidArgument,
        ),
        ("no messages", Call::Append(append(NEW, vec![])), InvalidArgument),
        (
            "101 messages (limit 100)",
            Call::Append(append(NEW, (0..101).map(|_| user("x".into())).collect())),
            InvalidArgument,
        ),
        (
            "100,000 messages in one request",
            Call::Append(append(NEW, (0..100_000).map(|_| user("x".into())).collect())),
            InvalidArgument,
        ),
        (
            "tool result answering no call",
            one(result("ghost")),
            InvalidArgument,
        ),
        (
            "100 tool results answering no call (100 violations)",
            Call::Append(append(
                NEW,
                (0..100).map(|i| result(&format!("ghost-{i}"))).collect(),
            )),
            InvalidArgument,
        ),
        (
            "tool message without tool_call_id",
            one(message(Role::Tool, "out")),
            InvalidArgument,
        ),
        (
            "user message with tool_call_id",
            one(proto::Message {
                tool_call_id: "c".into(),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "user message with tool calls",
            one(proto::Message {
                tool_calls: calling("c").tool_calls,
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "100,000 tool calls on one message",
            one(proto::Message {
                tool_calls: (0..100_000)
                    .map(|i| proto::ToolCall {
                        id: format!("c{i}"),
                        name: "f".into(),
                        arguments: "{}".into(),
                        ..Default::default()
                    })
                    .collect(),
                ..message(Role::Assistant, "")
            }),
            InvalidArgument,
        ),
        (
            "two tool calls with one id",
            one(proto::Message {
                tool_calls: [calling("d").tool_calls, calling("d").tool_calls].concat(),
                ..message(Role::Assistant, "")
            }),
            InvalidArgument,
        ),
        (
            "tool call and its result, result first",
            Call::Append(append(NEW, vec![result("r1"), calling("r1")])),
            InvalidArgument,
        ),
        (
            "two results for one call",
            Call::Append(append(NEW, vec![calling("t1"), result("t1"), result("t1")])),
            InvalidArgument,
        ),
        (
            "content of 1 MiB + 1 byte",
            one(user(big((1 << 20) + 1))),
            InvalidArgument,
        ),
        (
            "request of 20 MiB (limit 16 MiB)",
            one(user(big(20 << 20))),
            ResourceExhausted,
        ),
        (
            "10,000 metadata entries",
            one(proto::Message {
                metadata: (0..10_000).map(|i| (format!("k{i}"), "v".to_string())).collect(),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "metadata key of 10 KB",
            one(proto::Message {
                metadata: [(big(10_000), "v".to_string())].into(),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "metadata key of 1 MiB (never echoed in the status)",
            one(proto::Message {
                metadata: [(big(1 << 20), big(2 << 20))].into(),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        ("NUL in content", one(user("a\0b".into())), InvalidArgument),
        (
            "NUL in the author name",
            one(proto::Message {
                name: "a\0b".into(),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "NUL in tool call arguments",
            one(proto::Message {
                tool_calls: vec![proto::ToolCall {
                    id: "n1".into(),
                    name: "lookup".into(),
                    arguments: "{\"q\":\"\0\"}".into(),
                    ..Default::default()
                }],
                ..message(Role::Assistant, "")
            }),
            InvalidArgument,
        ),
        (
            "NUL in a metadata key and value",
            one(proto::Message {
                metadata: [("k\0".to_string(), "v\0".to_string())].into(),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "NUL in an LLM error's partial output",
            one(proto::Message {
                error: Some(proto::LlmError {
                    code: "timeout".into(),
                    partial_output: "half\0".into(),
                    ..Default::default()
                }),
                ..assistant("")
            }),
            InvalidArgument,
        ),
        (
            "NUL in the idempotency key",
            Call::Append(proto::AppendMessageRequest {
                idempotency_key: "k\0".into(),
                ..append(NEW, vec![user("x".into())])
            }),
            InvalidArgument,
        ),
        (
            "author name of 10 KB",
            one(proto::Message {
                name: big(10_000),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "attachment with no data or URI",
            one(proto::Message {
                attachments: vec![proto::Attachment {
                    mime_type: "image/png".into(),
                    ..Default::default()
                }],
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "attachment of 9 MiB (limit 8 MiB)",
            one(proto::Message {
                attachments: vec![proto::Attachment {
                    mime_type: "image/png".into(),
                    source: Some(proto::attachment::Source::Data(vec![0; 9 << 20])),
                    ..Default::default()
                }],
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "LLM error on a user message",
            one(proto::Message {
                error: Some(proto::LlmError::default()),
                ..user("x".into())
            }),
            InvalidArgument,
        ),
        (
            "system message without content",
            one(message(Role::System, "")),
            InvalidArgument,
        ),
        (
            "idempotency key of 10 KB",
            Call::Append(proto::AppendMessageRequest {
                idempotency_key: big(10_000),
                ..append(NEW, vec![user("x".into())])
            }),
            InvalidArgument,
        ),
        (
            "expected_last_sequence 7 on a new conversation",
            Call::Append(proto::AppendMessageRequest {
                expected_last_sequence: Some(7),
                ..append(NEW, vec![user("x".into())])
            }),
            Aborted,
        ),
        (
            "expected_last_sequence u64::MAX",
            Call::Append(proto::AppendMessageRequest {
                expected_last_sequence: Some(u64::MAX),
                ..append(NEW, vec![user("x".into())])
            }),
            InvalidArgument,
        ),
        (
            "BuildContext without a budget",
            build(proto::BuildContextRequest::default()),
            InvalidArgument,
        ),
        (
            "BuildContext budget of 0 tokens",
            build(proto::BuildContextRequest {
                budget: budget(0, 0),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "BuildContext budget of u32::MAX tokens",
            build(proto::BuildContextRequest {
                budget: budget(u32::MAX, 0),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "BuildContext reserve larger than the budget",
            build(proto::BuildContextRequest {
                budget: budget(100, 200),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "BuildContext tokenizer value 42",
            build(proto::BuildContextRequest {
                budget: budget(1000, 0),
                tokenizer: 42,
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "BuildContext format value 42",
            build(proto::BuildContextRequest {
                budget: budget(1000, 0),
                format: 42,
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "BuildContext of an unknown conversation",
            build(proto::BuildContextRequest {
                conversation_id: "nobody".into(),
                budget: budget(1000, 0),
                ..Default::default()
            }),
            NotFound,
        ),
        (
            "BuildContext pending result for an unknown call",
            build(proto::BuildContextRequest {
                budget: budget(1000, 0),
                pending_messages: vec![result("ghost")],
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "BuildContext with 100,000 pending messages",
            build(proto::BuildContextRequest {
                budget: budget(1000, 0),
                pending_messages: (0..100_000).map(|_| user("x".into())).collect(),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "Summarize mode value 42",
            summarize(proto::SummarizeRequest {
                mode: 42,
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "Summarize PROVIDED past the log's end",
            summarize(proto::SummarizeRequest {
                mode: proto::SummarizeMode::Provided as i32,
                summary_text: "s".into(),
                through_sequence: 1_000,
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "Summarize PROVIDED without text",
            summarize(proto::SummarizeRequest {
                mode: proto::SummarizeMode::Provided as i32,
                through_sequence: 2,
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "Summarize PROVIDED on a stale watermark",
            summarize(proto::SummarizeRequest {
                mode: proto::SummarizeMode::Provided as i32,
                summary_text: "s".into(),
                through_sequence: 2,
                expected_through_sequence: Some(1),
                ..Default::default()
            }),
            Aborted,
        ),
        (
            "Summarize PROVIDED with NUL in the text",
            summarize(proto::SummarizeRequest {
                mode: proto::SummarizeMode::Provided as i32,
                summary_text: "s\0".into(),
                through_sequence: 2,
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "UpdateWorkingMemory with NUL in an item, a term and the summary",
            Call::Memory(proto::UpdateWorkingMemoryRequest {
                conversation_id: SEEDED.into(),
                memory: Some(proto::WorkingMemory {
                    summary: "s\0".into(),
                    goals: vec![proto::MemoryItem {
                        text: "ship\0".into(),
                        ..Default::default()
                    }],
                    glossary: vec![proto::GlossaryEntry {
                        term: "t\0".into(),
                        definition: "d".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "UpdateWorkingMemory without a memory",
            Call::Memory(proto::UpdateWorkingMemoryRequest {
                conversation_id: SEEDED.into(),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "UpdateWorkingMemory with 100,000 goals",
            Call::Memory(proto::UpdateWorkingMemoryRequest {
                conversation_id: SEEDED.into(),
                memory: Some(proto::WorkingMemory {
                    goals: (0..100_000)
                        .map(|i| proto::MemoryItem {
                            text: format!("goal {i}"),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "CountTokens tokenizer value 42",
            Call::Count(proto::CountTokensRequest {
                text: "x".into(),
                tokenizer: 42,
            }),
            InvalidArgument,
        ),
        (
            "CountTokens text of 2 MiB",
            Call::Count(proto::CountTokensRequest {
                text: big(2 << 20),
                ..Default::default()
            }),
            InvalidArgument,
        ),
        (
            "ListMessages without a conversation id",
            Call::List(proto::ListMessagesRequest::default()),
            InvalidArgument,
        ),
        (
            "bytes that are not protobuf",
            Call::Raw("AppendMessage", vec![0xff; 64]),
            InvalidArgument,
        ),
        (
            "conversation id that is not UTF-8",
            Call::Raw("AppendMessage", field(1, &[0xc3, 0x28, 0xff])),
            InvalidArgument,
        ),
        (
            "message truncated mid-field",
            Call::Raw("AppendMessage", vec![0x0a, 0x7f, b'a']),
            InvalidArgument,
        ),
        (
            "unknown method",
            Call::Raw("DropAllTables", field(1, b"x")),
            Unimplemented,
        ),
    ]
    .into_iter()
    .chain(framing_cases())
    .collect()
}

/// Bodies whose gRPC framing is malformed: INVALID_ARGUMENT, never INTERNAL, and never half
/// accepted.
fn framing_cases() -> Vec<(&'static str, Call, Code)> {
    const APPEND: &str = "/ctxd.v1.ContextService/AppendMessage";
    const HEALTH: &str = "/grpc.health.v1.Health/Check";
    let message = append(NEW, vec![user("x".into())]).encode_to_vec();
    let whole = raw::framed(0, &message);
    let cases = [
        (
            "framing: compressed flag without grpc-encoding",
            APPEND,
            raw::framed(1, &message),
        ),
        ("framing: compressed flag 7", APPEND, raw::framed(7, &message)),
        (
            "framing: body ends inside the message",
            APPEND,
            whole[..whole.len() - 2].to_vec(),
        ),
        ("framing: body ends inside the prefix", APPEND, vec![0, 0, 0]),
        ("framing: empty body", APPEND, Vec::new()),
        (
            "framing: two messages in a unary call",
            APPEND,
            [whole.clone(), whole].concat(),
        ),
        (
            "health check: garbage body",
            HEALTH,
            vec![0xde, 0xad, 0xbe, 0xef, 0x01, 0x02],
        ),
        (
            "health check: a frame that is not protobuf",
            HEALTH,
            raw::framed(0, &[0xff; 8]),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, path, body)| (name, Call::Framed(path, body), Code::InvalidArgument))
        .collect()
}

/// Sends and receives raw bytes, for the requests a generated client cannot produce.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
