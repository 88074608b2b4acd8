//! Messages on their way out: a stored message, and the caller's fields of a message, as the API
//! returns them.

use super::fields::{format_to_proto, role_to_proto};
use crate::{
    domain::{
        Attachment, AttachmentSource, LlmError, Message, Provider, Reasoning, StoredMessage, ToolCall,
        context::TokenCounts, tokenize::Tokenizer,
    },
    proto,
};

/// The wire form of a reasoning block.
pub(super) fn reasoning_to_proto(reasoning: Reasoning) -> proto::Reasoning {
    let Reasoning {
        provider,
        kind,
        text,
        signature,
        data,
        id,
        summary,
        position,
    } = reasoning;
    let provider = match provider {
        Provider::Anthropic => proto::Provider::Anthropic,
        Provider::OpenAi => proto::Provider::Openai,
        Provider::Gemini => proto::Provider::Gemini,
    };
    proto::Reasoning {
        provider: provider as i32,
        r#type: kind,
        text,
        signature,
        data,
        id,
        summary,
        position,
    }
}

/// The wire form of a tool call.
pub(super) fn tool_call_to_proto(call: ToolCall) -> proto::ToolCall {
    let ToolCall {
        id,
        name,
        arguments,
        signature,
        item_id,
    } = call;
    proto::ToolCall {
        id,
        name,
        arguments,
        signature,
        item_id,
    }
}

/// The wire form of token counts.
pub(super) fn tokens_to_proto(tokens: TokenCounts) -> proto::TokenCounts {
    proto::TokenCounts {
        o200k_base: tokens.counted(Tokenizer::O200kBase),
        cl100k_base: tokens.counted(Tokenizer::Cl100kBase),
        approx: tokens.approx,
    }
}

/// A stored message as the API returns it: the caller's fields ([`message_fields`]) and the
/// server-set ones (sequence, time, token counts).
pub(crate) fn stored_message(stored: StoredMessage) -> proto::Message {
    let StoredMessage {
        sequence,
        created_at,
        message,
        tokens,
        reasoning_tokens,
        native_tokens: _,
        call_sequence: _,
        turn_anchor: _,
    } = stored;
    let occurred_at = message.occurred_at.unwrap_or(created_at);
    proto::Message {
        sequence: sequence.get(),
        created_at: Some(created_at.into()),
        occurred_at: Some(occurred_at.into()),
        tokens: Some(tokens_to_proto(tokens)),
        // Unset for a message without native data (not an empty `{}`).
        reasoning_tokens: (reasoning_tokens != TokenCounts::default())
            .then(|| tokens_to_proto(reasoning_tokens)),
        ..message_fields(message)
    }
}

/// The fields of a message that the caller sets, as the API returns them: shared by the log's
/// reads ([`stored_message`]) and the pack's messages, which carry no server-set fields of
/// their own. The server-set fields are left at their defaults.
pub(crate) fn message_fields(message: Message) -> proto::Message {
    let Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        metadata,
        exclude_from_context,
        pinned,
        error,
        response_id,
        reasoning,
        content_item_id,
        content_signature,
        content_phase,
        native,
        usage,
        occurred_at,
    } = message;
    proto::Message {
        role: role_to_proto(role) as i32,
        content,
        name,
        tool_calls: tool_calls.into_iter().map(tool_call_to_proto).collect(),
        tool_call_id: tool_call_id.unwrap_or_default(),
        attachments: attachments.into_iter().map(attachment_to_proto).collect(),
        metadata,
        exclude_from_context,
        pinned,
        error: error.map(
            |LlmError {
                 code,
                 message,
                 partial_output,
             }| proto::LlmError {
                code,
                message,
                partial_output,
            },
        ),
        response_id,
        reasoning: reasoning.into_iter().map(reasoning_to_proto).collect(),
        content_item_id,
        content_signature,
        content_phase,
        native: native.map(|n| proto::NativeItems {
            format: format_to_proto(n.format) as i32,
            json: n.json.to_string(),
        }),
        usage: super::provider_json::usage_to_proto(usage),
        occurred_at: occurred_at.map(Into::into),
        sequence: 0,
        created_at: None,
        tokens: None,
        reasoning_tokens: None,
    }
}

fn attachment_to_proto(attachment: Attachment) -> proto::Attachment {
    let Attachment {
        mime_type,
        filename,
        source,
        width,
        height,
    } = attachment;
    let source = match source {
        AttachmentSource::Data(data) => proto::attachment::Source::Data(data),
        AttachmentSource::Uri(uri) => proto::attachment::Source::Uri(uri),
    };
    proto::Attachment {
        mime_type,
        filename,
        source: Some(source),
        width,
        height,
    }
}
