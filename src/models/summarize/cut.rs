//! Cutting a chunk to the room it has: when one turn's messages alone are larger than a request
//! can hold, the largest are cut to an equal share, keeping their beginning and end.

use std::borrow::Cow;

use super::chunk::message_tokens;
use crate::domain::message::StoredMessage;

/// Bytes the cut marker takes, with room to spare.
const MARKER_BYTES: usize = 80;

/// A chunk ready for the request: when its transcript is larger than `room` tokens, the
/// largest messages are cut to an equal share (their text, partial output and call arguments
/// keep their beginning and end, with a marker between) until it fits.
pub fn fit_chunk(chunk: &[StoredMessage], room: usize) -> Cow<'_, [StoredMessage]> {
    let costs: Vec<usize> = chunk.iter().map(message_tokens).collect();
    if costs.iter().sum::<usize>() <= room {
        return Cow::Borrowed(chunk);
    }
    let share = water_level(&costs, room);
    let fitted = chunk
        .iter()
        .zip(&costs)
        .map(|(m, &cost)| match cost > share {
            true => cut_message(m, share),
            false => m.clone(),
        })
        .collect();
    Cow::Owned(fitted)
}

/// The largest per-message share such that the messages, each capped at it, fit `room`.
fn water_level(costs: &[usize], room: usize) -> usize {
    let mut sorted = costs.to_vec();
    sorted.sort_unstable();
    let mut below = 0;
    for (k, &cost) in sorted.iter().enumerate() {
        let rest = sorted.len() - k;
        if below + cost * rest > room {
            return room.saturating_sub(below) / rest;
        }
        below += cost;
    }
    usize::MAX
}

/// `message` with its largest texts cut until its transcript takes about `share` tokens.
fn cut_message(message: &StoredMessage, share: usize) -> StoredMessage {
    let mut cut = message.clone();
    // Each round cuts the largest text; a handful of rounds reaches the share or runs out of
    // text worth cutting.
    for _ in 0..8 {
        let excess = message_tokens(&cut).saturating_sub(share);
        if excess == 0 {
            break;
        }
        let msg = &mut cut.message;
        let mut texts: Vec<&mut String> = vec![&mut msg.content];
        if let Some(error) = msg.error.as_mut() {
            texts.push(&mut error.partial_output);
        }
        texts.extend(msg.tool_calls.iter_mut().map(|call| &mut call.arguments));
        let Some(largest) = texts.into_iter().max_by_key(|text| text.len()) else {
            break;
        };
        if largest.len() <= MARKER_BYTES {
            break;
        }
        let keep = largest.len().saturating_sub(excess * 3 + MARKER_BYTES);
        *largest = cut_text(largest, keep);
    }
    cut
}

/// `text` cut to about `keep` bytes: two thirds from its beginning and one from its end, with
/// a marker saying how much was left out.
fn cut_text(text: &str, keep: usize) -> String {
    let head_end = floor_boundary(text, keep * 2 / 3);
    let tail_start = ceil_boundary(text, text.len().saturating_sub(keep / 3).max(head_end));
    format!(
        "{}\n[... {} bytes cut to fit the model's context ...]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
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
