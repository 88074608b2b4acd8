//! AppendMessage, ListMessages and DeleteConversation on the wire; messages both ways.

use std::collections::HashMap;

use super::{
    fields::{conversation_id, format_of, role_at, sequence},
    message_out::stored_message,
};
use crate::{
    domain::{
        AppendLimits, AppendOutcome, Attachment, AttachmentSource, ConversationId, IdempotencyKey, LlmError,
        Message, ParsedBatch, ParsedMessage, Provider, Reasoning, Role, Sequence, ToolCall, Violations,
        append::{check_batch_size, check_message, check_times},
        context::Format,
        native::Parsed,
    },
    proto,
    runtime::response_budget::Reservation,
    service::{JsonMemory, MessagesOutcome, ServiceError},
};

/// Parses an AppendMessage request into a batch, with every violation found; the memory its
/// provider JSON takes to parse is reserved in `memory` first.
pub(crate) fn append_batch(
    request: proto::AppendMessageRequest,
    limits: &AppendLimits,
    memory: &mut JsonMemory,
) -> Result<ParsedBatch, ServiceError> {
    if let Some(native) = &request.native {
        memory.reserve_for(&native.json)?;
    }
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
        (Some(conversation_id), Some(idempotency_key), true) => Ok(ParsedBatch {
            conversation_id,
            messages: parsed_messages(parsed),
            idempotency_key,
            expected_last_sequence,
        }),
        _ => Err(v.into()),
    }
}

/// The parser's messages, each with its JSON path and, for a result that names its call by
/// function name only, that name.
fn parsed_messages(parsed: Parsed) -> Vec<ParsedMessage> {
    let Parsed {
        messages,
        origins,
        unbound,
    } = parsed;
    let mut unbound: HashMap<usize, String> = unbound.into_iter().collect();
    messages
        .into_iter()
        .enumerate()
        .map(|(i, message)| ParsedMessage {
            message,
            origin: origins.get(i).cloned(),
            unbound_call: unbound.remove(&i),
        })
        .collect()
}

/// What AppendMessage answers.
pub(crate) fn append_response(outcome: AppendOutcome) -> proto::AppendMessageResponse {
    let AppendOutcome {
        first_sequence,
        last_sequence,
        conversation_last_sequence,
        replayed,
    } = outcome;
    proto::AppendMessageResponse {
        first_sequence: first_sequence.get(),
        last_sequence: last_sequence.get(),
        conversation_last_sequence: conversation_last_sequence.get(),
        replayed,
    }
}

/// What ListMessages answers, and the memory it holds until the client has read it.
pub(crate) fn list_response(outcome: MessagesOutcome) -> (proto::ListMessagesResponse, Reservation) {
    let MessagesOutcome {
        page,
        rendered,
        reservation,
    } = outcome;
    let next_after_sequence = match (page.has_more, page.messages.last()) {
        (true, Some(last)) => last.sequence.get(),
        _ => 0,
    };
    let response = proto::ListMessagesResponse {
        messages: page.messages.into_iter().map(stored_message).collect(),
        next_after_sequence,
        rendered: rendered.unwrap_or_default(),
    };
    (response, reservation)
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
    if messages.len() == count {
        v.extend(check_times(&messages, field, std::time::SystemTime::now()));
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
        occurred_at,
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
    let occurred_at = occurred_at.and_then(|t| time_at(t, &format!("{path}.occurred_at"), &mut v));
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
        occurred_at,
    });
    match message {
        Some(m) if v.is_empty() => Ok(m),
        _ => Err(v),
    }
}

/// `raw` as a time; a violation of `field` when it is none.
fn time_at(raw: prost_types::Timestamp, field: &str, v: &mut Violations) -> Option<std::time::SystemTime> {
    std::time::SystemTime::try_from(raw)
        .map_err(|_| v.add(field, "is not a valid time"))
        .ok()
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
