//! AppendMessage, ListMessages and DeleteConversation on the wire; messages both ways.

use super::fields::{conversation_id, format_of, format_to_proto, role_at, role_to_proto, sequence};
use crate::{
    domain::{
        AppendBatch, AppendLimits, Attachment, AttachmentSource, ConversationId, IdempotencyKey, LlmError,
        Message, Provider, Reasoning, Role, Sequence, StoredMessage, ToolCall, Violations,
        append::{check_batch_size, check_message},
        context::{Format, TokenCounts},
        native::Parsed,
    },
    proto,
};

/// Parses an AppendMessage request into a batch, with every violation found.
pub(crate) fn append_batch(
    request: proto::AppendMessageRequest,
    limits: &AppendLimits,
) -> Result<AppendBatch, Violations> {
    let proto::AppendMessageRequest {
        conversation_id: raw_id,
        messages: raw_messages,
        idempotency_key,
        expected_last_sequence,
        native,
    } = request;
    let mut v = Violations::default();
    let conversation_id = conversation_id(raw_id, "conversation_id", &mut v);
    let idempotency_key = IdempotencyKey::parse_optional(idempotency_key)
        .map_err(|e| v.add("idempotency_key", e))
        .ok();
    let expected_last_sequence = match expected_last_sequence.map(Sequence::parse).transpose() {
        Ok(expected) => expected,
        Err(e) => {
            v.add("expected_last_sequence", e);
            None
        }
    };
    let parsed = match native {
        Some(_) if !raw_messages.is_empty() => {
            v.add("native", "give `messages` or `native`, not both");
            Parsed::default()
        }
        Some(native) => {
            let salt = match &idempotency_key {
                Some(Some(key)) => key.as_str().to_owned(),
                _ => super::provider_json::unique_salt(),
            };
            super::provider_json::native_messages(native, &salt, limits, &mut v)
        }
        None => {
            v.extend(check_batch_size(raw_messages.len(), limits));
            Parsed {
                messages: messages(raw_messages, "messages", limits, &mut v),
                ..Parsed::default()
            }
        }
    };
    match (conversation_id, idempotency_key, v.is_empty()) {
        (Some(conversation_id), Some(idempotency_key), true) => Ok(AppendBatch {
            conversation_id,
            messages: parsed.messages,
            idempotency_key,
            expected_last_sequence,
            tokens: Vec::new(),
            reasoning_tokens: Vec::new(),
            native_tokens: Vec::new(),
            origins: parsed.origins,
            unbound: parsed.unbound,
            sent_hash: None,
            search_language: Default::default(),
            search: Vec::new(),
        }),
        _ => Err(v),
    }
}

/// Parses and checks up to the per-request limit of `raw` messages of the list `field`.
pub(super) fn messages(
    raw: Vec<proto::Message>,
    field: &str,
    limits: &AppendLimits,
    v: &mut Violations,
) -> Vec<Message> {
    let count = raw.len().min(limits.max_messages_per_request);
    let mut messages = Vec::with_capacity(count);
    for (i, raw) in raw.into_iter().take(count).enumerate() {
        let path = format!("{field}[{i}]");
        match message(raw, &path) {
            Ok(m) => {
                v.extend(check_message(&m, &path, limits));
                messages.push(m);
            }
            Err(errors) => v.extend(errors),
        }
    }
    messages
}

/// Parses one message; `path` prefixes the field names of violations.
fn message(raw: proto::Message, path: &str) -> Result<Message, Violations> {
    let proto::Message {
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
        // Server-set fields are ignored on input, as the contract says.
        sequence: _,
        created_at: _,
        tokens: _,
        reasoning_tokens: _,
    } = raw;
    let mut v = Violations::default();
    if native.is_some() {
        v.add(
            format!("{path}.native"),
            "is set by the server: append provider JSON through AppendMessageRequest.native",
        );
    }
    let role = role_of(role, path, &mut v);
    let attachments = attachments
        .into_iter()
        .enumerate()
        .filter_map(|(j, a)| {
            attachment(a)
                .map_err(|e| v.add(format!("{path}.attachments[{j}]"), e))
                .ok()
        })
        .collect();
    let tool_calls = tool_calls.into_iter().map(tool_call).collect();
    let reasoning = reasoning
        .into_iter()
        .enumerate()
        .filter_map(|(j, r)| {
            reasoning_block(r)
                .map_err(|e| v.add(format!("{path}.reasoning[{j}].provider"), e))
                .ok()
        })
        .collect();
    let error = error.map(llm_error);
    let message = role.map(|role| Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id: Some(tool_call_id).filter(|id| !id.is_empty()),
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
        native: None,
        usage: usage.map(super::provider_json::usage_of).unwrap_or_default(),
    });
    match message {
        Some(m) if v.is_empty() => Ok(m),
        _ => Err(v),
    }
}

/// A message's role, which is required.
fn role_of(role: i32, path: &str, v: &mut Violations) -> Option<Role> {
    role_at(role, &format!("{path}.role"), v)
}

fn llm_error(raw: proto::LlmError) -> LlmError {
    let proto::LlmError {
        code,
        message,
        partial_output,
    } = raw;
    LlmError {
        code,
        message,
        partial_output,
    }
}

fn tool_call(raw: proto::ToolCall) -> ToolCall {
    let proto::ToolCall {
        id,
        name,
        arguments,
        signature,
        item_id,
    } = raw;
    ToolCall {
        id,
        name,
        arguments,
        signature,
        item_id,
    }
}

fn reasoning_block(raw: proto::Reasoning) -> Result<Reasoning, String> {
    let proto::Reasoning {
        provider,
        r#type,
        text,
        signature,
        data,
        id,
        summary,
        position,
    } = raw;
    let provider = match proto::Provider::try_from(provider) {
        Ok(proto::Provider::Anthropic) => Provider::Anthropic,
        Ok(proto::Provider::Openai) => Provider::OpenAi,
        Ok(proto::Provider::Gemini) => Provider::Gemini,
        Ok(proto::Provider::Unspecified) => return Err("provider is required".into()),
        Err(_) => return Err(format!("unknown provider value {provider}")),
    };
    Ok(Reasoning {
        provider,
        kind: r#type,
        text,
        signature,
        data,
        id,
        summary,
        position,
    })
}

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
        o200k_base: tokens.o200k_base,
        cl100k_base: tokens.cl100k_base,
        approx: tokens.approx,
    }
}

fn attachment(raw: proto::Attachment) -> Result<Attachment, &'static str> {
    let proto::Attachment {
        mime_type,
        filename,
        source,
        width,
        height,
    } = raw;
    let source = match source {
        Some(proto::attachment::Source::Data(data)) => AttachmentSource::Data(data),
        Some(proto::attachment::Source::Uri(uri)) => AttachmentSource::Uri(uri),
        None => return Err("an attachment needs data or uri"),
    };
    Ok(Attachment {
        mime_type,
        filename,
        source,
        width,
        height,
    })
}

/// Parses a ListMessages request into (conversation, after, page size).
pub(crate) fn list_request(request: proto::ListMessagesRequest) -> Result<ListRequest, Violations> {
    let proto::ListMessagesRequest {
        conversation_id: raw_id,
        after_sequence,
        page_size,
        format,
    } = request;
    let mut v = Violations::default();
    let conversation = conversation_id(raw_id, "conversation_id", &mut v);
    let after = sequence(after_sequence, "after_sequence", &mut v);
    let format = format.map(|f| format_of(f, "format", &mut v));
    match (conversation, after) {
        (Some(conversation), Some(after)) if v.is_empty() => Ok(ListRequest {
            conversation,
            after,
            page_size: page_size as usize,
            format,
        }),
        _ => Err(v),
    }
}

/// A parsed ListMessages request.
#[derive(Debug)]
pub(crate) struct ListRequest {
    pub(crate) conversation: ConversationId,
    pub(crate) after: Sequence,
    pub(crate) page_size: usize,
    /// The format to render the page in, if asked.
    pub(crate) format: Option<Format>,
}

/// The wire form of a stored message.
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
    proto::Message {
        sequence: sequence.get(),
        created_at: Some(created_at.into()),
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
