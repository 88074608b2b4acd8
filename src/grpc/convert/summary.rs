//! Summarize on the wire, and the prepared LLM requests of the bring-your-own-LLM paths.

use super::fields::{conversation_id, role_to_proto, sequence, tokenizer};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{Sequence, Violations, message::Message, summary::Summary, violation::check_no_nul},
    proto,
    service::{Limits, PreparedRequest, SummarizeMode, SummarizeRequest},
};

/// The wire form of a summary, its tokens counted with `tokenizer`.
pub(crate) fn summary(summary: &Summary, tokenizer: Tokenizer) -> proto::Summary {
    proto::Summary {
        text: summary.text.clone(),
        through_sequence: summary.through_sequence.get(),
        tokens: u32::try_from(tokenizer.count(&summary.text)).unwrap_or(u32::MAX),
        summarizer: summary.summarizer.clone(),
        version: summary.version,
        updated_at: Some(summary.updated_at.into()),
    }
}

/// A plain role + content message (prepared LLM requests).
pub(crate) fn plain_message(message: Message) -> proto::Message {
    proto::Message {
        role: role_to_proto(message.role) as i32,
        content: message.content,
        ..Default::default()
    }
}

/// The wire form of a prepared LLM request.
pub(crate) fn prepared_request(prepared: PreparedRequest) -> proto::PreparedRequest {
    let PreparedRequest {
        messages,
        rendered,
        base_through_sequence,
        through_sequence,
        response_format,
        max_output_tokens,
        log_changes,
    } = prepared;
    proto::PreparedRequest {
        rendered,
        messages: messages.into_iter().map(plain_message).collect(),
        base_through_sequence: base_through_sequence.get(),
        through_sequence: through_sequence.get(),
        response_format: response_format.map(|f| f.to_string()).unwrap_or_default(),
        max_output_tokens: u32::try_from(max_output_tokens).unwrap_or(u32::MAX),
        log_changes,
    }
}

/// Parses a Summarize request; `default_summary_tokens` stands in for 0.
pub(crate) fn summarize_request(
    request: proto::SummarizeRequest,
    limits: &Limits,
    default_summary_tokens: usize,
) -> Result<SummarizeRequest, Violations> {
    let proto::SummarizeRequest {
        conversation_id: raw_id,
        keep_recent_tokens,
        tokenizer: raw_tokenizer,
        mode,
        summary_text,
        through_sequence,
        expected_through_sequence,
        max_summary_tokens,
        expected_log_changes,
    } = request;
    let mut v = Violations::default();
    let conversation = conversation_id(raw_id, "conversation_id", &mut v);
    let tokenizer = tokenizer(raw_tokenizer, "tokenizer", limits.default_tokenizer, &mut v);
    let expected_through =
        expected_through_sequence.and_then(|raw| sequence(raw, "expected_through_sequence", &mut v));
    let mode = match proto::SummarizeMode::try_from(mode) {
        Ok(proto::SummarizeMode::Unspecified | proto::SummarizeMode::Server) => SummarizeMode::Server,
        Ok(proto::SummarizeMode::Prepare) => SummarizeMode::Prepare,
        Ok(proto::SummarizeMode::Provided) => provided(summary_text, through_sequence, limits, &mut v),
        Err(_) => {
            v.add("mode", format!("unknown summarize mode {mode}"));
            SummarizeMode::Server
        }
    };
    let max_summary_tokens = match max_summary_tokens {
        0 => default_summary_tokens,
        n => n as usize,
    };
    match conversation {
        Some(conversation) if v.is_empty() => Ok(SummarizeRequest {
            conversation,
            keep_recent_tokens: keep_recent_tokens as usize,
            tokenizer,
            mode,
            expected_through,
            expected_log_changes,
            max_summary_tokens,
        }),
        _ => Err(v),
    }
}

/// SUMMARIZE_MODE_PROVIDED's text and watermark.
fn provided(text: String, through_sequence: u64, limits: &Limits, v: &mut Violations) -> SummarizeMode {
    if text.trim().is_empty() {
        v.add("summary_text", "SUMMARIZE_MODE_PROVIDED needs the summary text");
    }
    let limit = limits.append.max_content_bytes;
    if text.len() > limit {
        v.add(
            "summary_text",
            format!("{} bytes; the limit is {limit}", text.len()),
        );
    }
    check_no_nul(v, &text, || "summary_text".into());
    let through = sequence(through_sequence, "through_sequence", v);
    if through_sequence == 0 {
        v.add(
            "through_sequence",
            "SUMMARIZE_MODE_PROVIDED needs the last sequence the summary covers",
        );
    }
    SummarizeMode::Provided {
        text,
        through: through.unwrap_or(Sequence::ZERO),
    }
}
