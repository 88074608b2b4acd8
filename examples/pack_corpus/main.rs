//! Generates adversarial conversations, stores them through ctxd's service layer (in-memory
//! store), builds packs for every format from each, each pack twice, and writes them as JSON
//! lines for `scripts/conformance.py`, which checks them against the providers' SDK types and
//! API rules (docs/design.md, "Provider rules"):
//!
//!     cargo run --release --example pack_corpus -- --seed 7 --packs 5000 > packs.jsonl
//!     python scripts/conformance.py packs.jsonl
//!
//! The conversations carry what breaks packs: parallel calls answered out of order, messages
//! typed between a call and its results, unanswered calls, failed LLM calls with partial
//! output, pinned openers and excluded drafts, attachments of every kind, non-object tool
//! arguments, blank and whitespace-ended text, unicode, huge tool outputs, summaries, tiny to
//! large budgets, and pending messages and results; and reasoning models' native data
//! (Anthropic thinking and redacted thinking, OpenAI reasoning items and item ids, Gemini
//! thought parts and signatures), from one provider per conversation or switching providers
//! mid-conversation, rendered to all four formats: its opaque strings carry a marker naming
//! their provider, so the checker can tell that no format carries another's. Everything is
//! derived from the seed: a
//! failure names its case (`seed:conversation:request`), and the same command reproduces it.
//! Exits 1 when a build fails or two builds of one request differ.

use std::{collections::BTreeMap, process::ExitCode, sync::Arc};

mod checks;
mod native;

use native::{compact_result, native_output, native_reply};

use ctxd::{
    domain::tokenize::Tokenizer,
    domain::{
        Attachment, AttachmentSource, ConversationId, LlmError, Message, Provider, Reasoning, Role, Sequence,
        TenantId, ToolCall,
        append::{AppendLimits, ParsedBatch, check_message},
        context::{
            ClearToolResults, ContextPack, ContextRequest, FinalAssistant, Format, HistoryPolicy,
            PLACEHOLDER_TURN, ReasoningPolicy, Recall, Source, TokenBudget, render::anthropic_renders,
        },
    },
    service::{AiSettings, Limits, Service, SummarizeMode, SummarizeRequest},
    store::InMemoryStore,
};

/// splitmix64: small, seedable, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const TEXTS: [&str; 9] = [
    "What is the weather in Paris tomorrow?",
    "日本語のテキスト 🎉 émoji ✓ — ünïcödé",
    " ",
    "ends with whitespace  \n",
    "\n\n\t",
    "fn main() { println!(\"hi\"); }\n    // code",
    "Sure, here is the plan: 1) check 2) act.",
    "a",
    "line one\r\nline two\u{2028}three",
];

const ARGUMENTS: [&str; 8] = [
    r#"{"city":"Paris","days":2}"#,
    "",
    "   ",
    "not json at all",
    "[1, 2, 3]",
    r#""just a string""#,
    r#"  {"nested": {"a": [1, {"b": null}]}}  "#,
    r#"{"truncated": "#,
];

const OUTPUTS: [&str; 5] = ["18°C, sunny", "", " ", "{\"rows\": []}", "エラー: not found"];

/// A 2x1 PNG as a data URI (its header gives its dimensions).
const PNG_DATA_URI: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAYAAAD0eNT6AAAAEUlEQVR4nGP4z8DwHwyBDAQAXwIH+TAjW+oAAAAASUVORK5CYII=";

fn attachment(rng: &mut Rng) -> Attachment {
    let data = |bytes: &[u8]| AttachmentSource::Data(bytes.to_vec());
    let uri = |u: &str| AttachmentSource::Uri(u.to_owned());
    let (mime, filename, source) = match rng.below(20) {
        // Narrow and panorama images, and headers of every type a provider takes, as inline
        // data and as data URIs (their dimensions come from the header).
        16 => ("image/png", "tall.png", data(&png_header(100, 2500))),
        17 => ("image/png", "pano.png", uri(&png_data_uri(2500, 100))),
        18 => ("image/gif", "wide.gif", data(&gif_header(3000, 40))),
        19 => (
            "application/pdf",
            "paper.pdf",
            uri(
                "data:application/pdf;base64,JVBERi0xLjcKJeLjz9MKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK",
            ),
        ),
        // data: URIs as OpenAI clients send them, an http URL providers will not fetch.
        13 => ("image/png", "shot.png", uri(PNG_DATA_URI)),
        14 => ("image/jpeg", "cam.jpg", uri("http://example.com/cam.jpg")),
        15 => (
            "application/pdf",
            "doc.pdf",
            uri("data:application/pdf;base64,JVBERi0xLjQK"),
        ),
        0 => ("image/png", "chart.png", data(&[137, 80, 78, 71])),
        1 => ("image/jpeg", "photo.jpg", uri("https://example.com/photo.jpg")),
        2 => ("image/svg+xml", "logo.svg", data(b"<svg/>")),
        3 => ("image/gif", "anim.gif", data(b"GIF89a")),
        4 => ("image/webp", "pic.webp", uri("https://example.com/pic.webp")),
        5 => ("image/bmp", "old.bmp", data(b"BM")),
        6 => ("application/pdf", "spec.pdf", uri("https://example.com/spec.pdf")),
        7 => ("application/pdf", "inline.pdf", data(b"%PDF-1.4")),
        8 => ("audio/mpeg", "voice.mp3", data(b"ID3")),
        9 => ("application/zip", "code.zip", data(b"PK")),
        10 => ("text/markdown", "README", data(b"# Notes")),
        11 => ("text/plain; charset=utf-8", "v1.2/notes", data(b"hello")),
        _ => ("text/plain", "notes.txt", data(b"hello")),
    };
    Attachment {
        mime_type: mime.into(),
        filename: filename.into(),
        source,
        width: 0,
        height: 0,
    }
}

/// The header of a `width` x `height` PNG (all a header reader needs).
fn png_header(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = vec![0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 13];
    bytes.extend_from_slice(b"IHDR");
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&height.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    bytes
}

/// That PNG header as a data URI.
fn png_data_uri(width: u32, height: u32) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(png_header(width, height));
    format!("data:image/png;base64,{encoded}")
}

/// The header of a `width` x `height` GIF.
fn gif_header(width: u16, height: u16) -> Vec<u8> {
    let mut bytes = b"GIF89a".to_vec();
    bytes.extend_from_slice(&width.to_le_bytes());
    bytes.extend_from_slice(&height.to_le_bytes());
    bytes.extend_from_slice(&[0, 0, 0]);
    bytes
}

/// Which model wrote a conversation's assistant messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// No reasoning model.
    Plain,
    /// One provider's reasoning model throughout.
    Reasoning(Provider),
    /// A different provider (or none) for each reply.
    Switching,
}

const PROVIDERS: [Provider; 3] = [Provider::Anthropic, Provider::OpenAi, Provider::Gemini];

fn model(rng: &mut Rng) -> Model {
    match rng.below(10) {
        0..=3 => Model::Plain,
        4..=8 => Model::Reasoning(*rng.pick(&PROVIDERS)),
        _ => Model::Switching,
    }
}

fn block(provider: Provider, kind: &str) -> Reasoning {
    Reasoning::new(provider, kind)
}

/// Gives an assistant reply the native data `model`'s provider returns with it. Opaque strings
/// carry `<PROVIDER>-NATIVE` so that the checker finds any that reach another provider.
fn add_reasoning(rng: &mut Rng, model: Model, message: &mut Message, tag: &str) {
    let provider = match model {
        Model::Plain => return,
        Model::Reasoning(provider) => provider,
        Model::Switching if rng.chance(25) => return,
        Model::Switching => *rng.pick(&PROVIDERS),
    };
    let thought = *rng.pick(&[
        "Let me check the weather first.",
        "",
        "思考: ünïcödé \"quoted\"\n",
    ]);
    let others = usize::from(message.has_text_block()) + message.tool_calls.len();
    match provider {
        Provider::Anthropic => {
            message.reasoning.push(Reasoning {
                text: thought.into(),
                signature: format!("ANTHROPIC-NATIVE-sig-{tag}"),
                ..block(provider, "thinking")
            });
            if rng.chance(30) {
                message.reasoning.push(Reasoning {
                    data: format!("ANTHROPIC-NATIVE-redacted-{tag}"),
                    ..block(provider, "redacted_thinking")
                });
            }
            if others > 1 && rng.chance(20) {
                // Interleaved thinking between tool calls (never after the last block).
                message.reasoning.push(Reasoning {
                    text: "Now the second tool.".into(),
                    signature: format!("ANTHROPIC-NATIVE-sig2-{tag}"),
                    position: (1 + rng.below(others - 1)) as u32,
                    ..block(provider, "thinking")
                });
            }
        }
        Provider::OpenAi => {
            let summary = (0..rng.below(3))
                .map(|k| format!("Summary part {k}: {thought}"))
                .collect();
            message.reasoning.push(Reasoning {
                id: format!("rs_OPENAI-NATIVE-{tag}"),
                data: if rng.chance(80) {
                    format!("OPENAI-NATIVE-enc-{tag}")
                } else {
                    String::new()
                },
                summary,
                ..block(provider, "reasoning")
            });
            if !message.content.is_empty() && rng.chance(80) {
                message.content_item_id = format!("msg_OPENAI-NATIVE-{tag}");
            }
            for (k, call) in message.tool_calls.iter_mut().enumerate() {
                call.item_id = format!("fc_OPENAI-NATIVE-{tag}-{k}");
            }
            if !message.content.is_empty() && rng.chance(60) {
                message.content_phase = match message.tool_calls.is_empty() {
                    true => "final_answer".into(),
                    false => "commentary".into(),
                };
            }
        }
        Provider::Gemini => {
            if rng.chance(40) && !thought.is_empty() {
                message.reasoning.push(Reasoning {
                    text: thought.into(),
                    signature: if rng.chance(50) {
                        gemini_signature("thought", tag)
                    } else {
                        String::new()
                    },
                    ..block(provider, "thought")
                });
            }
            match message.tool_calls.first_mut() {
                Some(call) => call.signature = gemini_signature("call", tag),
                None if !message.content.is_empty() => {
                    message.content_signature = gemini_signature("text", tag)
                }
                None => {}
            }
        }
    }
}

/// A Gemini signature with the marker: base64 (the REST API's form of its bytes), as the API
/// returns them.
fn gemini_signature(kind: &str, tag: &str) -> String {
    let mut signature = format!("GEMINI-NATIVE-{kind}-{tag}");
    while signature.len() % 4 != 0 {
        signature.push('A');
    }
    signature
}

/// A stored call message whose calls are not all answered.
struct OpenGroup {
    ids: Vec<String>,
}

/// What the generator stored: the messages in log order, and the open calls by message.
struct Conversation {
    messages: Vec<Message>,
    open: BTreeMap<usize, OpenGroup>,
    model: Model,
}

fn text(rng: &mut Rng) -> String {
    rng.pick(&TEXTS).to_string()
}

fn user(rng: &mut Rng) -> Message {
    let mut m = Message::text(Role::User, text(rng));
    if rng.chance(15) {
        m.attachments = (0..1 + rng.below(2)).map(|_| attachment(rng)).collect();
        if rng.chance(30) {
            m.content.clear();
        }
    }
    m.pinned = rng.chance(6);
    m.exclude_from_context = !m.pinned && rng.chance(8);
    // Author names as multi-user chats record them; OpenAI takes ^[a-zA-Z0-9_-]+$ only.
    m.name = rng.pick(&["", "", "", "ann", "Ann Lee", "josé"]).to_string();
    m
}

fn assistant(rng: &mut Rng) -> Message {
    let mut m = Message::text(Role::Assistant, text(rng));
    if rng.chance(8) {
        m.error = Some(LlmError {
            code: "timeout".into(),
            message: "deadline exceeded".into(),
            partial_output: rng.pick(&["half an answ", "", "trailing "]).to_string(),
        });
        if rng.chance(50) {
            m.content.clear();
        }
    }
    m.pinned = rng.chance(6);
    m.exclude_from_context = !m.pinned && rng.chance(5);
    m
}

fn calls(rng: &mut Rng, prefix: &str) -> Message {
    let n = 1 + rng.below(4);
    // Ids as providers make them: OpenAI's and Anthropic's, Kimi's and DeepSeek's
    // `functions.name:k` (not an Anthropic id), and Responses item ids over 40 characters (not a
    // Chat Completions id); the prefix keeps them unique.
    let style = rng.below(4);
    let tool_calls = (0..n)
        .map(|k| {
            let id = match style {
                0 => format!("functions.{prefix}:{k}"),
                1 => format!("fc_0f0e50a1476a6c35006912c58dc9f8819192c25864eb16f07f-{prefix}-{k}"),
                _ => format!("{prefix}-{k}"),
            };
            ToolCall::new(
                id,
                rng.pick(&["weather", "search", "run_sql", "mcp.github/search"])
                    .to_string(),
                rng.pick(&ARGUMENTS).to_string(),
            )
        })
        .collect();
    let content = if rng.chance(30) { text(rng) } else { String::new() };
    Message {
        tool_calls,
        ..Message::text(Role::Assistant, content)
    }
}

fn result(rng: &mut Rng, id: &str) -> Message {
    let mut content = rng.pick(&OUTPUTS).to_string();
    if rng.chance(10) {
        content = format!("{content} {}", "row ".repeat(800));
    }
    Message {
        tool_call_id: Some(id.to_owned()),
        ..Message::text(Role::Tool, content)
    }
}

fn conversation(rng: &mut Rng) -> Conversation {
    let model = model(rng);
    let mut messages = Vec::new();
    let mut open = BTreeMap::new();
    if rng.chance(15) {
        messages.push(Message {
            pinned: rng.chance(70),
            ..Message::text(Role::Assistant, "Welcome! How can I help? ".into())
        });
    }
    let longest = if rng.chance(10) { 4 } else { 30 };
    let events = rng.below(longest);
    for _ in 0..events {
        match rng.below(12) {
            0..=3 => messages.push(user(rng)),
            4..=6 => {
                let mut reply = assistant(rng);
                if !reply.pinned {
                    add_reasoning(rng, model, &mut reply, &messages.len().to_string());
                }
                let plain = !reply.pinned && !reply.exclude_from_context && reply.error.is_none();
                if plain && rng.chance(30) {
                    reply = native_reply(rng, &reply, &messages.len().to_string());
                }
                messages.push(reply);
            }
            // A `/responses/compact` window, where no call waits for its result.
            7 if open.is_empty() && rng.chance(25) => {
                let users: Vec<&str> = messages
                    .iter()
                    .filter(|m| m.role == Role::User && m.native.is_none() && !m.content.trim().is_empty())
                    .map(|m| m.content.as_str())
                    .collect();
                let users = &users[users.len().saturating_sub(3)..];
                let window = compact_result(users, &messages.len().to_string());
                messages.push(window);
            }
            7 => messages.push(Message::text(Role::System, text(rng))),
            _ => {
                let call_index = messages.len();
                let mut call = calls(rng, &format!("call{call_index}"));
                add_reasoning(rng, model, &mut call, &call_index.to_string());
                if rng.chance(30) {
                    call = native_reply(rng, &call, &call_index.to_string());
                }
                let ids: Vec<String> = call.tool_calls.iter().map(|c| c.id.clone()).collect();
                let call_made = call.tool_calls.clone();
                messages.push(call);
                // Answered in a random order, some never; others' messages typed in between.
                let mut order: Vec<&String> = ids.iter().filter(|_| rng.chance(85)).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.below(i + 1));
                }
                let answered = order.len();
                for id in order {
                    if rng.chance(20) {
                        let interleaved = if rng.chance(60) {
                            Message::text(Role::User, "hurry up".into())
                        } else {
                            Message::text(Role::Assistant, "Still waiting on the other tools.".into())
                        };
                        messages.push(interleaved);
                    }
                    let tag = format!("{call_index}-{}", messages.len());
                    let typed = call_made.iter().find(|c| &c.id == id);
                    match typed.and_then(|c| native_output(rng, c, &tag)) {
                        Some(output) => messages.push(output),
                        None => messages.push(result(rng, id)),
                    }
                }
                if answered < ids.len() {
                    let unanswered = ids.into_iter().filter(|id| {
                        !messages
                            .iter()
                            .any(|m| m.tool_call_id.as_deref() == Some(id.as_str()))
                    });
                    open.insert(
                        call_index,
                        OpenGroup {
                            ids: unanswered.collect(),
                        },
                    );
                }
            }
        }
    }
    if messages.is_empty() {
        // Nothing the provider sees as a turn: a stored note and a draft kept from context.
        messages.push(Message::text(
            Role::System,
            "Note: the user is on the free plan.".into(),
        ));
        messages.push(Message {
            exclude_from_context: true,
            ..Message::text(Role::User, "draft, not sent".into())
        });
    }
    Conversation {
        messages,
        open,
        model,
    }
}

/// Pending messages for one request, valid against the stored log by construction.
fn pending(rng: &mut Rng, conversation: &Conversation, tag: &str) -> Vec<Message> {
    match rng.below(7) {
        0 | 1 => vec![],
        // The current user turn, where images usually arrive.
        2 => {
            let mut m = Message::text(Role::User, text(rng));
            if rng.chance(50) {
                m.attachments = (0..1 + rng.below(2)).map(|_| attachment(rng)).collect();
            }
            vec![m]
        }
        3 => vec![Message::text(Role::Assistant, "Sure, ".into())],
        4 => match conversation.open.values().next_back() {
            // Results completing the newest open group, sometimes with the next user message.
            Some(group) => {
                let mut out: Vec<Message> = group.ids.iter().map(|id| result(rng, id)).collect();
                if rng.chance(50) {
                    out.push(Message::text(Role::User, "and then?".into()));
                }
                out
            }
            None => vec![Message::text(Role::User, text(rng))],
        },
        5 => {
            let call = calls(rng, &format!("pending-{tag}"));
            let results = call
                .tool_calls
                .iter()
                .map(|c| result(rng, &c.id))
                .collect::<Vec<_>>();
            std::iter::once(call).chain(results).collect()
        }
        _ => vec![
            Message::text(Role::User, text(rng)),
            Message::text(Role::Assistant, "Let me think ".into()),
        ],
    }
}

fn request(rng: &mut Rng, id: &ConversationId, pending: Vec<Message>, format: Format) -> ContextRequest {
    let max_tokens = match rng.below(4) {
        0 => 1 + rng.below(120),
        1 => 120 + rng.below(1000),
        2 => 1000 + rng.below(8000),
        _ => 8000 + rng.below(200_000),
    } as u32;
    let reserve = if rng.chance(30) {
        rng.below(max_tokens as usize / 2) as u32
    } else {
        0
    };
    let max_messages = if rng.chance(10) {
        1 + rng.below(12) as u32
    } else {
        0
    };
    let max_turns = if rng.chance(10) {
        1 + rng.below(5) as u32
    } else {
        0
    };
    ContextRequest {
        conversation_id: id.clone(),
        budget: TokenBudget::parse(max_tokens, reserve, max_messages, max_turns).expect("valid budget"),
        tokenizer: *rng.pick(&[
            Tokenizer::Approx,
            Tokenizer::Approx,
            Tokenizer::O200kBase,
            Tokenizer::Cl100kBase,
        ]),
        system_prompt: rng.pick(&["You are a careful assistant.", "", " "]).to_string(),
        pending,
        include_summary: !rng.chance(10),
        include_memory: true,
        tool_output_max_tokens: rng.chance(25).then(|| 20 + rng.below(200) as u32),
        format,
        history: match rng.chance(50) {
            true => HistoryPolicy::CacheStable,
            false => HistoryPolicy::Newest,
        },
        reasoning: match rng.chance(70) {
            true => ReasoningPolicy::CurrentTurn,
            false => ReasoningPolicy::All,
        },
        final_assistant: *rng.pick(&[
            FinalAssistant::FormatDefault,
            FinalAssistant::FormatDefault,
            FinalAssistant::Keep,
            FinalAssistant::Omit,
        ]),
        clear_tool_results: rng.chance(50).then(|| ClearToolResults {
            keep_recent: rng.below(4) as u32,
            exclude_tools: match rng.chance(30) {
                true => vec!["search".into()],
                false => vec![],
            },
            clear_arguments: rng.chance(50),
        }),
        // Recall: the newest user message or a query of its own.
        recall: rng.chance(40).then(|| Recall {
            query: match rng.chance(50) {
                true => String::new(),
                false => text(rng),
            },
            max_tokens: 1 + rng.below(1500) as u32,
            max_items: 1 + rng.below(8) as u32,
        }),
    }
}

/// Whether the pack's last turn is one the caller chose to end on: a pending assistant message
/// (a prefill).
fn ends_on_callers_choice(pack: &ContextPack, format: Format) -> bool {
    let last_turn = pack
        .messages
        .iter()
        .rev()
        .find(|m| m.message.role != Role::System && anthropic_renders(format, &m.message));
    last_turn.is_some_and(|m| m.message.role == Role::Assistant && m.source == Source::Pending)
}

#[derive(Default)]
struct Coverage {
    interleaved: usize,
    placeholder: usize,
    pending_results: usize,
    unsupported_images: usize,
    non_object_arguments: usize,
    cut_outputs: usize,
    cleared_results: usize,
    recalled: usize,
    no_history: usize,
    with_reasoning: usize,
    reasoning_omitted: usize,
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut seed, mut packs) = (1u64, 5000usize);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok());
        match (flag.as_str(), value) {
            ("--seed", Some(v)) => seed = v,
            ("--packs", Some(v)) => packs = v as usize,
            _ => {
                eprintln!("usage: pack_corpus [--seed N] [--packs N_PER_FORMAT]");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run(seed, packs))
}

async fn run(seed: u64, packs: usize) -> ExitCode {
    let service = Service::new(
        Arc::new(InMemoryStore::new()),
        Limits::default(),
        AiSettings::default(),
    );
    let tenant = TenantId::parse("conformance").expect("tenant id");
    let limits = AppendLimits::default();
    let mut rng = Rng(seed);
    let mut coverage = Coverage::default();
    let mut failures = 0usize;
    let mut written = 0usize;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut n = 0usize;
    while written < packs {
        n += 1;
        let conversation = conversation(&mut rng);
        let id = ConversationId::parse(format!("c{n}")).expect("conversation id");
        for (i, m) in conversation.messages.iter().enumerate() {
            let v = check_message(m, &format!("messages[{i}]"), &limits);
            assert!(v.is_empty(), "generated an invalid message: {v}");
        }
        // One message per append, as a backend appends turn by turn.
        for message in &conversation.messages {
            let batch = ParsedBatch::new(id.clone(), vec![message.clone()]);
            if let Err(e) = service.append_message(&tenant, batch, None).await {
                eprintln!("{seed}:{n}: append failed: {e}");
                return ExitCode::FAILURE;
            }
        }
        if !conversation.messages.is_empty() && rng.chance(25) {
            let through = 1 + rng.below(conversation.messages.len());
            let summary = SummarizeRequest {
                conversation: id.clone(),
                keep_recent_tokens: 0,
                tokenizer: Tokenizer::Approx,
                mode: SummarizeMode::Provided {
                    text: "Earlier, the user planned a trip.".into(),
                    through: Sequence::parse(through as u64).expect("sequence"),
                },
                expected_through: None,
                expected_log_changes: None,
                max_summary_tokens: 500,
            };
            // A watermark inside a tool group is refused; the conversation then has none.
            let _ = service.summarize(&tenant, summary, None).await;
        }
        let interleaved = conversation
            .messages
            .windows(2)
            .any(|w| !w[0].tool_calls.is_empty() && w[1].role != Role::Tool)
            || conversation
                .messages
                .windows(3)
                .any(|w| w[0].role == Role::Tool && w[1].role != Role::Tool && w[2].role == Role::Tool);
        for r in 0..4 {
            let tag = format!("{n}-{r}");
            let pending = pending(&mut rng, &conversation, &tag);
            let pending_results = pending.iter().any(|m| m.role == Role::Tool);
            // Anthropic's rule that the tool loop under way keeps its thinking can be checked
            // only where every reply came from a thinking Claude model.
            let expect_thinking = conversation.model == Model::Reasoning(Provider::Anthropic)
                && !pending.iter().any(|m| m.role == Role::Assistant);
            for format in [
                Format::OpenAiChat,
                Format::AnthropicMessages,
                Format::OpenAiResponses,
                Format::Gemini,
            ] {
                let request = request(&mut rng, &id, pending.clone(), format);
                let keeps_final_reply = !request.final_assistant.omits(format);
                let clears_arguments = request
                    .clear_tool_results
                    .as_ref()
                    .is_some_and(|c| c.clear_arguments);
                let case = format!("{seed}:{n}:{r}");
                let (first, second) = (
                    service.build_context(&tenant, request.clone(), None).await,
                    service.build_context(&tenant, request, None).await,
                );
                let (first, second) = match (first, second) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => {
                        eprintln!("{case}: BuildContext failed: {e}");
                        failures += 1;
                        continue;
                    }
                };
                if first.rendered != second.rendered || first.pack != second.pack {
                    eprintln!("{case}: two builds of one request differ");
                    failures += 1;
                }
                let pack = &first.pack;
                coverage.interleaved += usize::from(interleaved);
                coverage.pending_results += usize::from(pending_results);
                coverage.placeholder += usize::from(
                    pack.messages
                        .iter()
                        .any(|m| m.message.content == PLACEHOLDER_TURN),
                );
                coverage.unsupported_images += usize::from(pack.messages.iter().any(|m| {
                    m.message
                        .attachments
                        .iter()
                        .any(|a| matches!(a.mime_type.as_str(), "image/svg+xml" | "image/bmp"))
                }));
                coverage.non_object_arguments += usize::from(pack.messages.iter().any(|m| {
                    m.message
                        .tool_calls
                        .iter()
                        .any(|c| !c.arguments.trim_start().starts_with('{'))
                }));
                coverage.cut_outputs += usize::from(pack.stats.truncated);
                coverage.cleared_results += usize::from(pack.stats.tool_results_cleared > 0);
                coverage.recalled += usize::from(pack.stats.messages_recalled > 0);
                // The recalled turn stays within the budget: an over-budget pack only holds
                // the mandatory parts, never recall.
                if pack.stats.messages_recalled > 0
                    && (pack.stats.total_tokens > pack.stats.budget_tokens
                        || pack.messages.last().map(|m| m.source) != Some(Source::Recall))
                {
                    eprintln!("{case}: the recalled turn is over the budget or not last");
                    failures += 1;
                }
                if std::env::var("CORPUS_DUMP").is_ok_and(|c| c == case) {
                    checks::dump(pack);
                }
                for problem in checks::pack_problems(pack, clears_arguments) {
                    eprintln!("{case}: {problem}");
                    failures += 1;
                }
                coverage.no_history += usize::from(pack.stats.messages_included == 0);
                coverage.with_reasoning += usize::from(pack.stats.reasoning_tokens > 0);
                coverage.reasoning_omitted += usize::from(pack.stats.reasoning_tokens_omitted > 0);
                let format_name = match format {
                    Format::OpenAiChat => "openai_chat",
                    Format::AnthropicMessages => "anthropic_messages",
                    Format::OpenAiResponses => "openai_responses",
                    Format::Gemini => "gemini",
                };
                let line = serde_json::json!({
                    "case": case,
                    "format": format_name,
                    "rendered": first.rendered,
                    "expect_thinking": expect_thinking && format == Format::AnthropicMessages,
                    // Every call step of a Gemini pack's current turn is signed (its own
                    // signature, or the documented placeholder).
                    "expect_signatures": format == Format::Gemini,
                    // The pack may end on an assistant message: the request keeps a final
                    // reply, or the caller's own prefill ends it.
                    "final_assistant_allowed": keeps_final_reply || ends_on_callers_choice(pack, format),
                });
                use std::io::Write;
                writeln!(out, "{line}").expect("writing the corpus");
            }
            written += 1;
        }
    }
    let c = &coverage;
    eprintln!(
        "seed {seed}: {written} packs per format from {n} conversations, each built twice; packs with \
         interleaved messages in the log {}, a placeholder turn {}, pending results {}, unsupported \
         image types {}, non-object tool arguments {}, cut tool output {}, tool results cleared {}, \
         recalled messages {}, no history {}, carrying \
         reasoning {}, leaving completed turns' reasoning out {}; {failures} failures",
        c.interleaved,
        c.placeholder,
        c.pending_results,
        c.unsupported_images,
        c.non_object_arguments,
        c.cut_outputs,
        c.cleared_results,
        c.recalled,
        c.no_history,
        c.with_reasoning,
        c.reasoning_omitted
    );
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
