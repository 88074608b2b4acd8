//! Chunking transcripts to the model's context window: a summary or an extraction over more
//! messages than the configured context holds is made in turn-aligned chunks, each request
//! fitting the window (instructions, the running summary or known facts, the chunk, and room
//! for the answer).
//!
//! ctxd does not know the endpoint model's tokenizer. It estimates one token per three bytes
//! of text, more than common tokenizers give for English prose and code.

use crate::domain::message::{Message, Role, StoredMessage};

use super::{OpenAiError, prompts::transcript};

/// Tokens kept free in every request beyond the estimate: the chat template's framing.
const FRAMING_TOKENS: usize = 64;

/// Below this much room for messages, chunking cannot make progress.
const MIN_CHUNK_TOKENS: usize = 256;

/// The estimated tokens of `text` for a model whose tokenizer is unknown.
pub fn estimate(text: &str) -> usize {
    text.len().div_ceil(3)
}

/// The estimated tokens of a chat request.
pub fn request_tokens(messages: &[Message]) -> usize {
    messages.iter().map(|m| estimate(&m.content) + 8).sum::<usize>() + FRAMING_TOKENS
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
/// context of `context_tokens`. The chunk ends before a user message outside a tool group
/// when it can (turn-aligned), else at a message boundary; a single message too large for
/// the room is returned alone, and [`fit_message`] cuts it. Errors when no room is left.
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
    let mut used = 0;
    let mut open_calls = 0usize;
    let mut turn_boundary = None;
    for (i, m) in messages.iter().enumerate() {
        if i > 0 && m.message.role == Role::User && open_calls == 0 {
            turn_boundary = Some(i);
        }
        let cost = estimate(&transcript(std::slice::from_ref(m))) + 8;
        if used + cost > room {
            let len = match (i, turn_boundary) {
                (0, _) => 1,
                (_, Some(boundary)) => boundary,
                (i, None) => i,
            };
            return Ok(Chunk { len, room });
        }
        used += cost;
        open_calls += m.message.tool_calls.len();
        if m.message.role == Role::Tool {
            open_calls = open_calls.saturating_sub(1);
        }
    }
    Ok(Chunk {
        len: messages.len(),
        room,
    })
}

/// A chunk ready for the request: a single message larger than `room` tokens keeps the
/// beginning and end of its text, with a marker between.
pub fn fit_message(chunk: &[StoredMessage], room: usize) -> std::borrow::Cow<'_, [StoredMessage]> {
    match chunk {
        [only] if estimate(&transcript(chunk)) > room => {
            let mut cut = only.clone();
            let keep = room.saturating_mul(3) / 2;
            let text = &only.message.content;
            let head_end = floor_boundary(text, keep);
            let tail_start = ceil_boundary(text, text.len().saturating_sub(keep / 2).max(head_end));
            cut.message.content = format!(
                "{}\n[... {} bytes of this message cut to fit the model's context ...]\n{}",
                &text[..head_end],
                tail_start - head_end,
                &text[tail_start..]
            );
            std::borrow::Cow::Owned(vec![cut])
        }
        _ => std::borrow::Cow::Borrowed(chunk),
    }
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::domain::{context::TokenCounts, ids::Sequence, message::ToolCall};

    fn stored(sequence: u64, message: Message) -> StoredMessage {
        StoredMessage {
            sequence: Sequence::parse(sequence).unwrap(),
            created_at: SystemTime::UNIX_EPOCH,
            tokens: TokenCounts::default(),
            reasoning_tokens: TokenCounts::default(),
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
        let fitted = fit_message(&huge, 900);
        assert!(estimate(&transcript(&fitted)) < 1_000);
        assert!(fitted[0].message.content.contains("cut to fit"));
    }
}
