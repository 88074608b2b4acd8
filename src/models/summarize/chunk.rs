//! Chunking transcripts to the model's context window: a summary or an extraction over more
//! messages than the configured context holds is made in turn-aligned chunks, each request
//! fitting the window (instructions, the running summary or known facts, the chunk, and room
//! for the answer).
//!
//! ctxd does not know the endpoint model's tokenizer. It estimates one token per three letters
//! or digits of a word plus one where the word changes case or between letters and digits, one
//! per three characters of a run of ASCII punctuation, one per four characters of a run
//! of whitespace (a single space joins the next word), and per other character one token for
//! two UTF-8 bytes, two for three (CJK) and three for four (emoji). That is more than common
//! tokenizers give for English prose, dense code, JSON, base64, and Chinese, Japanese or Korean
//! text (tested against o200k_base and cl100k_base). ctxd's own instructions count one token
//! per three bytes, which is enough for them.

use crate::domain::{
    message::{Message, Role, StoredMessage},
    summary::group_boundaries,
};

use super::{OpenAiError, prompts::transcript};

/// Tokens kept free in every request beyond the estimate: the chat template's framing.
const FRAMING_TOKENS: usize = 64;

/// Below this much room for messages, chunking cannot make progress.
const MIN_CHUNK_TOKENS: usize = 256;

/// The estimated tokens of `text` for a model whose tokenizer is unknown.
pub fn estimate(text: &str) -> usize {
    /// The run of characters being counted.
    #[derive(Clone, Copy, PartialEq)]
    enum Run {
        Word,
        Space,
        Punctuation,
        Other,
    }
    /// What a letter or digit is, for spotting where a word changes kind.
    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Lower,
        Upper,
        Digit,
    }
    let run_tokens = |run: Run, len: usize| match run {
        Run::Word => len.div_ceil(3),
        Run::Space if len > 1 => len.div_ceil(4),
        Run::Punctuation => len.div_ceil(3),
        Run::Space | Run::Other => 0,
    };
    let (mut tokens, mut run, mut len) = (0usize, Run::Other, 0usize);
    let mut last_kind = None;
    for c in text.chars() {
        let now = match c {
            c if c.is_ascii_alphanumeric() => Run::Word,
            c if c.is_ascii_whitespace() => Run::Space,
            c if c.is_ascii() => Run::Punctuation,
            _ => Run::Other,
        };
        if now != run {
            tokens += run_tokens(run, len);
            (run, len, last_kind) = (now, 0, None);
        }
        len += 1;
        match now {
            Run::Word => {
                let kind = match c {
                    'a'..='z' => Kind::Lower,
                    'A'..='Z' => Kind::Upper,
                    _ => Kind::Digit,
                };
                // Tokenizers split words where case or digits change (identifiers, hex,
                // base64); a capital before lower case starts an ordinary word.
                if last_kind
                    .is_some_and(|before| before != kind && !(before == Kind::Upper && kind == Kind::Lower))
                {
                    tokens += 1;
                }
                last_kind = Some(kind);
            }
            Run::Other => tokens += c.len_utf8() - 1,
            Run::Space | Run::Punctuation => {}
        }
    }
    tokens + run_tokens(run, len)
}

/// The estimated tokens of ctxd's own instructions (the system message): English prose and a
/// JSON schema, at one token per three bytes. That is above what common tokenizers give for
/// them with a quarter to spare (tested), and well below [`estimate`], which has to hold for
/// any text a conversation brings.
fn instruction_tokens(text: &str) -> usize {
    text.len().div_ceil(3)
}

/// The estimated tokens of a chat request.
pub fn request_tokens(messages: &[Message]) -> usize {
    let tokens = |m: &Message| match m.role {
        Role::System => instruction_tokens(&m.content),
        _ => estimate(&m.content),
    };
    messages.iter().map(|m| tokens(m) + 8).sum::<usize>() + FRAMING_TOKENS
}

/// The next chunk: how many messages it holds, and the tokens of room it had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Messages, from the first.
    pub len: usize,
    /// Estimated tokens the chunk's transcript may take.
    pub room: usize,
}

/// How many of `messages` (from the first) the next chunk holds when `fixed` tokens of the
/// request (instructions, running summary or facts, the answer's `max_tokens`) are taken in a
/// context of `context_tokens`. A chunk never ends inside a tool-call group, so its last
/// sequence is a watermark a summary may take (PREPARE hands it out as `through_sequence`). It
/// ends before a user message outside a tool group when it can (turn-aligned), else after a
/// whole tool group; when the first turn or group alone is larger than the room, the chunk is
/// that group, and [`fit_chunk`] cuts its texts. Errors when no room is left.
pub fn next_chunk(
    messages: &[StoredMessage],
    fixed: usize,
    context_tokens: usize,
) -> Result<Chunk, OpenAiError> {
    let room = context_tokens.saturating_sub(fixed + FRAMING_TOKENS);
    if room < MIN_CHUNK_TOKENS {
        return Err(OpenAiError::TooLong(format!(
            "the model's context ({context_tokens} tokens, CTXD_OPENAI_CONTEXT_TOKENS) leaves {room} tokens \
             for messages after the instructions, the summary or facts so far, and the answer's limit; \
             raise the context or lower max_summary_tokens"
        )));
    }
    let boundaries = group_boundaries(messages);
    let (mut used, mut turn_end, mut group_end) = (0, None, None);
    for (i, m) in messages.iter().enumerate() {
        if i > 0 && boundaries[i] {
            group_end = Some(i);
            if m.message.role == Role::User {
                turn_end = Some(i);
            }
        }
        used += message_tokens(m);
        if used > room {
            let len = turn_end.or(group_end).unwrap_or_else(|| {
                (i + 1..=messages.len())
                    .find(|&end| boundaries[end])
                    .unwrap_or(messages.len())
            });
            return Ok(Chunk { len, room });
        }
    }
    Ok(Chunk {
        len: messages.len(),
        room,
    })
}

/// Estimated tokens of one message in a transcript.
pub(super) fn message_tokens(message: &StoredMessage) -> usize {
    estimate(&transcript(std::slice::from_ref(message))) + 8
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::domain::{ids::Sequence, message::ToolCall, token_counts::TokenCounts};
    use crate::models::summarize::cut::fit_chunk;

    fn stored(sequence: u64, message: Message) -> StoredMessage {
        StoredMessage {
            sequence: Sequence::parse(sequence).unwrap(),
            created_at: SystemTime::UNIX_EPOCH,
            tokens: TokenCounts::default(),
            reasoning_tokens: TokenCounts::default(),
            native_tokens: TokenCounts::default(),
            call_sequence: None,
            turn_anchor: None,
            message,
        }
    }

    fn log(turns: usize) -> Vec<StoredMessage> {
        let mut out = Vec::new();
        for t in 0..turns {
            let n = out.len() as u64;
            out.push(stored(n + 1, Message::text(Role::User, "x".repeat(300))));
            let mut calling = Message::text(Role::Assistant, String::new());
            calling.tool_calls = vec![ToolCall {
                id: format!("c{t}"),
                name: "lookup".into(),
                arguments: "{}".into(),
                signature: String::new(),
                item_id: String::new(),
            }];
            out.push(stored(n + 2, calling));
            let mut result = Message::text(Role::Tool, "y".repeat(300));
            result.tool_call_id = Some(format!("c{t}"));
            out.push(stored(n + 3, result));
        }
        out
    }

    #[test]
    fn chunks_end_at_turns_and_cover_everything_in_order() {
        let messages = log(40);
        let (mut at, mut chunks) = (0, 0);
        while at < messages.len() {
            let n = next_chunk(&messages[at..], 1_000, 2_048).unwrap().len;
            assert!(n > 0);
            at += n;
            chunks += 1;
            if at < messages.len() {
                assert_eq!(messages[at].message.role, Role::User, "chunk ends before a turn");
            }
        }
        assert!(chunks > 5, "{chunks} chunks");
    }

    #[test]
    fn no_room_is_a_permanent_error_and_a_huge_message_is_cut() {
        let messages = log(1);
        assert!(matches!(
            next_chunk(&messages, 2_000, 2_048),
            Err(OpenAiError::TooLong(_))
        ));
        let huge = vec![stored(1, Message::text(Role::User, "é".repeat(100_000)))];
        assert_eq!(next_chunk(&huge, 1_000, 2_048).unwrap().len, 1);
        let fitted = fit_chunk(&huge, 900);
        assert!(estimate(&transcript(&fitted)) < 1_000);
        assert!(fitted[0].message.content.contains("cut to fit"));
    }

    /// An assistant message calling `calls` tools with `arguments`, then their results of
    /// `result` each.
    fn group(first: u64, calls: usize, arguments: &str, result: &str) -> Vec<StoredMessage> {
        let mut calling = Message::text(Role::Assistant, "Checking.".to_owned());
        calling.tool_calls = (0..calls)
            .map(|c| ToolCall {
                id: format!("g{first}c{c}"),
                name: "read_file".into(),
                arguments: arguments.to_owned(),
                signature: String::new(),
                item_id: String::new(),
            })
            .collect();
        let mut out = vec![stored(first, calling)];
        for c in 0..calls {
            let mut answer = Message::text(Role::Tool, result.to_owned());
            answer.tool_call_id = Some(format!("g{first}c{c}"));
            out.push(stored(first + 1 + c as u64, answer));
        }
        out
    }

    #[test]
    fn the_estimate_is_above_the_openai_counts_in_every_script() {
        let samples = [
            "The migration adds an index on updated_at; run it before the deploy.",
            "fn main() { let total: u64 = (1..=10).map(|n| n * n).sum(); println!(\"{total}\"); }",
            "Мы решили перенести запуск на март, бюджет не должен превышать десять тысяч евро.",
            "我们决定把发布推迟到三月，预算不能超过一万欧元。请确认数据库迁移已经完成。",
            "私たちはリリースを三月に延期することに決めました。予算は一万ユーロを超えてはいけません。",
            "우리는 출시를 3월로 미루기로 결정했습니다. 예산은 만 유로를 넘으면 안 됩니다.",
            "🎉🚀✅🔥 ship it 👍🏽 🇫🇷",
            r#"{"id":"call_8f3a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"src/main.rs\",\"lines\":[1,200]}"}}"#,
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
            "a3f9c2e17b4d08e5f6a1b2c3d4e5f60718293a4b5c6d7e8f9012345678abcdef 0x7fff5fbff8a8 550e8400-e29b-41d4-a716-446655440000",
            "    if x {\n        return Err(e);\n    }\n\n\t\tdone();\n",
        ];
        for text in samples {
            for tokenizer in [
                crate::domain::tokenize::Tokenizer::O200kBase,
                crate::domain::tokenize::Tokenizer::Cl100kBase,
            ] {
                let counted = tokenizer.count(text);
                assert!(
                    estimate(text) >= counted,
                    "{tokenizer:?} counts {counted} tokens in {text:?}, estimated {}",
                    estimate(text)
                );
            }
        }
    }

    #[test]
    fn the_instructions_estimate_is_a_quarter_above_the_openai_counts() {
        let instructions = [
            super::super::prompts::summary_request(None, &[], 1_000),
            super::super::prompts::extraction_request(&Default::default(), &[]),
        ];
        for request in instructions {
            let system = &request[0];
            assert_eq!(system.role, Role::System);
            for tokenizer in [
                crate::domain::tokenize::Tokenizer::O200kBase,
                crate::domain::tokenize::Tokenizer::Cl100kBase,
            ] {
                let counted = tokenizer.count(&system.content);
                assert!(
                    instruction_tokens(&system.content) * 4 >= counted * 5,
                    "{tokenizer:?} counts {counted} tokens in the instructions, estimated {}",
                    instruction_tokens(&system.content)
                );
            }
        }
    }

    #[test]
    fn a_tool_group_larger_than_the_room_is_one_chunk_cut_to_fit() {
        let mut messages = vec![stored(1, Message::text(Role::User, "Read the repo.".into()))];
        messages.extend(group(
            2,
            4,
            "{\"path\": \"src/lib.rs\"}",
            &"fn main() {}\n".repeat(2_000),
        ));
        messages.push(stored(7, Message::text(Role::Assistant, "Done.".into())));
        let chunk = next_chunk(&messages[1..], 1_000, 4_096).unwrap();
        assert_eq!(chunk.len, 5, "the whole group, never part of it");
        let fitted = fit_chunk(&messages[1..6], chunk.room);
        let tokens: usize = fitted.iter().map(message_tokens).sum();
        assert!(
            tokens <= chunk.room + 32,
            "{tokens} tokens in a room of {}",
            chunk.room
        );
        assert_eq!(fitted.len(), 5, "every message of the group is in the transcript");
        assert!(
            fitted[1..]
                .iter()
                .all(|m| m.message.content.contains("cut to fit"))
        );
        assert_eq!(
            fitted[0].message.content, "Checking.",
            "small messages stay whole"
        );

        // Arguments as large as a file are cut too.
        let writes = group(1, 2, &"x".repeat(40_000), "ok");
        let chunk = next_chunk(&writes, 1_000, 4_096).unwrap();
        assert_eq!(chunk.len, 3);
        let fitted = fit_chunk(&writes, chunk.room);
        let tokens: usize = fitted.iter().map(message_tokens).sum();
        assert!(
            tokens <= chunk.room + 32,
            "{tokens} tokens in a room of {}",
            chunk.room
        );
    }

    #[test]
    fn every_chunk_ends_where_a_summary_may_end() {
        // Turns of varied size: text, one call, parallel calls, large results.
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut messages = Vec::new();
        for _ in 0..200 {
            let at = messages.len() as u64 + 1;
            let size = 1 + next(4_000) as usize;
            match next(3) {
                0 => messages.push(stored(at, Message::text(Role::User, "u".repeat(size)))),
                1 => messages.extend(group(at, 1 + next(4) as usize, "{}", &"r".repeat(size))),
                _ => messages.push(stored(at, Message::text(Role::Assistant, "a".repeat(size)))),
            }
        }
        let mut at = 0;
        while at < messages.len() {
            let chunk = next_chunk(&messages[at..], 1_000, 2_048).unwrap();
            assert!(chunk.len > 0);
            at += chunk.len;
            let through = messages[at - 1].sequence;
            assert!(
                crate::domain::summary::is_boundary(&messages, through),
                "a chunk ended inside a tool group at {through}"
            );
            let fitted = fit_chunk(&messages[at - chunk.len..at], chunk.room);
            let tokens: usize = fitted.iter().map(message_tokens).sum();
            assert!(
                tokens <= chunk.room + 64,
                "{tokens} tokens in a room of {}",
                chunk.room
            );
        }
    }
}
