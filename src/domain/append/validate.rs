//! Per-message checks on append: what each role needs, and the size limits.

use std::time::{Duration, SystemTime};

use super::{AppendLimits, MAX_SHORT_FIELD_BYTES, provider_checks::check_native};
use crate::domain::{
    message::{AttachmentSource, Message, Role},
    violation::{NUL_DESCRIPTION, Violations, check_no_nul},
};

/// Checks the number of messages of a request against the limits.
pub fn check_batch_size(count: usize, limits: &AppendLimits) -> Violations {
    let mut violations = Violations::default();
    if count == 0 {
        violations.add("messages", "at least one message is required");
    } else if count > limits.max_messages_per_request {
        violations.add(
            "messages",
            format!(
                "{count} messages in one request; the limit is {}",
                limits.max_messages_per_request
            ),
        );
    }
    violations
}

/// How far in the future an `occurred_at` may be: clocks of caller and server differ.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The batch's `occurred_at` times (field `field`, appended at `now`): none in the future
/// (beyond [`MAX_CLOCK_SKEW`]) and none earlier than the message before it in the batch, whose
/// time is its own `occurred_at` or, without one, `now`. The log's last message is checked
/// when the append runs ([`super::plan`]).
pub fn check_times(messages: &[Message], field: &str, now: SystemTime) -> Violations {
    let mut v = Violations::default();
    let mut previous: Option<SystemTime> = None;
    for (i, message) in messages.iter().enumerate() {
        let at = message.occurred_at.unwrap_or(now);
        if let Some(t) = message.occurred_at {
            if t > now + MAX_CLOCK_SKEW {
                v.add(format!("{field}[{i}].occurred_at"), "is in the future");
            } else if previous.is_some_and(|p| t < p) {
                v.add(
                    format!("{field}[{i}].occurred_at"),
                    format!("is earlier than {field}[{}]'s time (its occurred_at, or the append time without one): a log's times never go back", i - 1),
                );
            }
        }
        previous = Some(at);
    }
    v
}

/// Checks one message against the role rules of docs/design.md, "Appending" and the size limits.
/// `path` is the message's field path, e.g. `messages[3]`.
pub fn check_message(message: &Message, path: &str, limits: &AppendLimits) -> Violations {
    let mut v = Violations::default();
    // Native JSON is content: a block ctxd keeps opaque (a server tool's result, an MCP
    // approval) may be all a message holds.
    let has_content = !message.content.is_empty() || message.native.is_some();
    let has_attachments = !message.attachments.is_empty();
    match message.role {
        Role::System => {
            if !has_content {
                v.add(format!("{path}.content"), "a system message needs content");
            }
        }
        Role::User => {
            if !has_content && !has_attachments {
                v.add(
                    format!("{path}.content"),
                    "a user message needs content or attachments",
                );
            }
        }
        Role::Assistant => {
            if !has_content && !has_attachments && message.tool_calls.is_empty() && message.error.is_none() {
                v.add(
                    format!("{path}.content"),
                    "an assistant message needs content, tool_calls, attachments or error",
                );
            }
        }
        Role::Tool => {
            if message.tool_call_id.is_none() {
                v.add(
                    format!("{path}.tool_call_id"),
                    "a tool message must name the call it answers",
                );
            }
        }
    }
    if message.role != Role::Assistant {
        if !message.tool_calls.is_empty() {
            v.add(
                format!("{path}.tool_calls"),
                "only assistant messages make tool calls",
            );
        }
        if message.error.is_some() {
            v.add(
                format!("{path}.error"),
                "only assistant messages record an LLM error",
            );
        }
    }
    if message.in_tool_group() {
        // A group is kept or dropped whole: one member cannot be pinned or hidden alone.
        if message.pinned {
            v.add(
                format!("{path}.pinned"),
                "tool calls and tool results cannot be pinned",
            );
        }
        if message.exclude_from_context {
            v.add(
                format!("{path}.exclude_from_context"),
                "tool calls and tool results cannot be excluded from context",
            );
        }
    }
    if message.role != Role::Tool && message.tool_call_id.is_some() {
        v.add(
            format!("{path}.tool_call_id"),
            "only tool messages answer a tool call",
        );
    }
    check_sizes(message, path, limits, &mut v);
    check_native(message, path, limits, &mut v);
    check_usage(message, path, &mut v);
    check_read_back(message, path, limits, &mut v);
    v
}

/// What is accepted must be readable: the message and its rendering within the largest response.
fn check_read_back(message: &Message, path: &str, limits: &AppendLimits, v: &mut Violations) {
    let read_back = read_back_bytes(message);
    if read_back > limits.max_read_bytes {
        v.add(
            path,
            format!(
                "a read would answer with {read_back} bytes for this message (it and its \
                 rendering); the largest response is {}: what is accepted must be readable",
                limits.max_read_bytes
            ),
        );
    }
}

/// The most a read answers with for `message`: the message as loaded, and its rendering in a
/// provider format (ListMessages with `format`, BuildContext), whose text fields JSON escapes
/// lengthen (a quote by one byte, a control character by five). Headroom for the response's
/// own framing is left by counting 256 more.
pub(crate) fn read_back_bytes(message: &Message) -> usize {
    let escapes = |text: &str| -> usize {
        text.bytes()
            .map(|b| match b {
                b'"' | b'\\' => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum()
    };
    let mut escaped = escapes(&message.content);
    escaped += message
        .error
        .as_ref()
        .map_or(0, |e| escapes(&e.partial_output) + escapes(&e.message));
    escaped += message
        .tool_calls
        .iter()
        .map(|c| escapes(&c.arguments))
        .sum::<usize>();
    escaped += message.reasoning.iter().map(|r| escapes(&r.text)).sum::<usize>();
    let loaded = message.loaded_bytes();
    loaded
        .saturating_mul(2)
        .saturating_add(escaped)
        .saturating_add(256)
}

/// The largest usage figure: what every store keeps and returns unchanged (PostgreSQL's
/// `bigint`); sums of usage saturate at it.
pub(crate) const MAX_USAGE: u64 = i64::MAX as u64;

/// Usage figures within [`MAX_USAGE`].
fn check_usage(message: &Message, path: &str, v: &mut Violations) {
    let u = &message.usage;
    for (field, value) in [
        ("input_tokens", u.input_tokens),
        ("output_tokens", u.output_tokens),
        ("cached_input_tokens", u.cached_input_tokens),
        ("reasoning_tokens", u.reasoning_tokens),
    ] {
        if value > MAX_USAGE {
            v.add(
                format!("{path}.usage.{field}"),
                format!("{value}; the most is {MAX_USAGE}"),
            );
        }
    }
}

fn check_sizes(message: &Message, path: &str, limits: &AppendLimits, v: &mut Violations) {
    let too_long = |len: usize, limit: usize| format!("{len} bytes; the limit is {limit}");
    if message.content.len() > limits.max_content_bytes {
        v.add(
            format!("{path}.content"),
            too_long(message.content.len(), limits.max_content_bytes),
        );
    }
    for (field, value) in [("name", &message.name), ("response_id", &message.response_id)] {
        if value.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{path}.{field}"),
                too_long(value.len(), MAX_SHORT_FIELD_BYTES),
            );
        }
    }
    if let Some(id) = message
        .tool_call_id
        .as_ref()
        .filter(|id| id.len() > MAX_SHORT_FIELD_BYTES)
    {
        v.add(
            format!("{path}.tool_call_id"),
            too_long(id.len(), MAX_SHORT_FIELD_BYTES),
        );
    }
    check_tool_calls(message, path, limits, v);
    check_attachments(message, path, limits, v);
    if message.metadata.len() > limits.max_metadata_entries {
        v.add(
            format!("{path}.metadata"),
            format!(
                "{} entries; the limit is {}",
                message.metadata.len(),
                limits.max_metadata_entries
            ),
        );
    }
    for (key, value) in &message.metadata {
        if key.is_empty() || key.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{path}.metadata"),
                format!("keys must be 1 to {MAX_SHORT_FIELD_BYTES} bytes"),
            );
        }
        // The key is the caller's text: never echoed (it may be huge or secret).
        if value.len() > limits.max_content_bytes {
            v.add(
                format!("{path}.metadata"),
                format!("a value is {}", too_long(value.len(), limits.max_content_bytes)),
            );
        }
    }
    check_nul(message, path, v);
    if let Some(error) = &message.error {
        if error.partial_output.len() > limits.max_content_bytes {
            v.add(
                format!("{path}.error.partial_output"),
                too_long(error.partial_output.len(), limits.max_content_bytes),
            );
        }
        if error.code.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{path}.error.code"),
                too_long(error.code.len(), MAX_SHORT_FIELD_BYTES),
            );
        }
        if error.message.len() > limits.max_content_bytes {
            v.add(
                format!("{path}.error.message"),
                too_long(error.message.len(), limits.max_content_bytes),
            );
        }
    }
}

/// No stored string may hold U+0000 (see [`check_no_nul`]).
fn check_nul(message: &Message, path: &str, v: &mut Violations) {
    check_no_nul(v, &message.content, || format!("{path}.content"));
    check_no_nul(v, &message.name, || format!("{path}.name"));
    check_no_nul(v, &message.response_id, || format!("{path}.response_id"));
    if let Some(id) = &message.tool_call_id {
        check_no_nul(v, id, || format!("{path}.tool_call_id"));
    }
    for (j, call) in message.tool_calls.iter().enumerate() {
        check_no_nul(v, &call.id, || format!("{path}.tool_calls[{j}].id"));
        check_no_nul(v, &call.name, || format!("{path}.tool_calls[{j}].name"));
        check_no_nul(v, &call.arguments, || format!("{path}.tool_calls[{j}].arguments"));
    }
    for (j, attachment) in message.attachments.iter().enumerate() {
        check_no_nul(v, &attachment.mime_type, || {
            format!("{path}.attachments[{j}].mime_type")
        });
        check_no_nul(v, &attachment.filename, || {
            format!("{path}.attachments[{j}].filename")
        });
        if let AttachmentSource::Uri(uri) = &attachment.source {
            check_no_nul(v, uri, || format!("{path}.attachments[{j}].uri"));
        }
    }
    if message
        .metadata
        .iter()
        .any(|(key, value)| key.contains('\0') || value.contains('\0'))
    {
        v.add(format!("{path}.metadata"), NUL_DESCRIPTION);
    }
    if let Some(error) = &message.error {
        check_no_nul(v, &error.code, || format!("{path}.error.code"));
        check_no_nul(v, &error.message, || format!("{path}.error.message"));
        check_no_nul(v, &error.partial_output, || {
            format!("{path}.error.partial_output")
        });
    }
}

fn check_tool_calls(message: &Message, path: &str, limits: &AppendLimits, v: &mut Violations) {
    if message.tool_calls.len() > limits.max_tool_calls_per_message {
        v.add(
            format!("{path}.tool_calls"),
            format!(
                "{} tool calls; the limit is {}",
                message.tool_calls.len(),
                limits.max_tool_calls_per_message
            ),
        );
    }
    for (j, call) in message.tool_calls.iter().enumerate() {
        let call_path = format!("{path}.tool_calls[{j}]");
        if call.id.is_empty() || call.id.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{call_path}.id"),
                format!("must be 1 to {MAX_SHORT_FIELD_BYTES} bytes"),
            );
        }
        if call.name.is_empty() || call.name.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{call_path}.name"),
                format!("must be 1 to {MAX_SHORT_FIELD_BYTES} bytes"),
            );
        }
        if call.arguments.len() > limits.max_content_bytes {
            v.add(
                format!("{call_path}.arguments"),
                format!(
                    "{} bytes; the limit is {}",
                    call.arguments.len(),
                    limits.max_content_bytes
                ),
            );
        }
    }
}

fn check_attachments(message: &Message, path: &str, limits: &AppendLimits, v: &mut Violations) {
    if message.attachments.len() > limits.max_attachments_per_message {
        v.add(
            format!("{path}.attachments"),
            format!(
                "{} attachments; the limit is {}",
                message.attachments.len(),
                limits.max_attachments_per_message
            ),
        );
    }
    for (j, attachment) in message.attachments.iter().enumerate() {
        let att_path = format!("{path}.attachments[{j}]");
        if attachment.mime_type.is_empty() || attachment.mime_type.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{att_path}.mime_type"),
                format!("must be 1 to {MAX_SHORT_FIELD_BYTES} bytes"),
            );
        }
        if attachment.filename.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{att_path}.filename"),
                format!("at most {MAX_SHORT_FIELD_BYTES} bytes"),
            );
        }
        let (field, len) = match &attachment.source {
            AttachmentSource::Data(data) => ("data", data.len()),
            AttachmentSource::Uri(uri) => ("uri", uri.len()),
        };
        if let AttachmentSource::Uri(uri) = &attachment.source {
            if let Some(Err(why)) = crate::domain::attachments::data_uri(uri) {
                v.add(format!("{att_path}.uri"), why);
            } else if uri.chars().any(char::is_control) {
                // A line break in a URI would split the lines a pack renders it into.
                v.add(
                    format!("{att_path}.uri"),
                    "a URI holds no control characters (CR, LF, tab)",
                );
            }
        }
        if len == 0 {
            v.add(format!("{att_path}.{field}"), "must not be empty");
        } else if len > limits.max_attachment_bytes {
            v.add(
                format!("{att_path}.{field}"),
                format!("{len} bytes; the limit is {}", limits.max_attachment_bytes),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::append::ParsedBatch;
    use crate::domain::message::{LlmError, ToolCall};

    fn message(role: Role, content: &str) -> Message {
        Message::text(role, content.into())
    }

    fn fields(v: &Violations) -> Vec<String> {
        v.iter().map(|f| f.field.clone()).collect()
    }

    #[test]
    fn a_user_message_needs_content_or_attachments() {
        let limits = AppendLimits::default();
        assert_eq!(
            fields(&check_message(&message(Role::User, ""), "messages[0]", &limits)),
            ["messages[0].content"]
        );
        assert!(check_message(&message(Role::User, "hi"), "messages[0]", &limits).is_empty());
    }

    #[test]
    fn an_assistant_message_may_carry_only_an_error() {
        let mut m = message(Role::Assistant, "");
        m.error = Some(LlmError {
            code: "timeout".into(),
            message: String::new(),
            partial_output: "par".into(),
        });
        assert!(check_message(&m, "m", &AppendLimits::default()).is_empty());
    }

    #[test]
    fn tool_calls_belong_to_assistants_only() {
        let mut m = message(Role::User, "hi");
        m.tool_calls.push(ToolCall::new("c1", "f", "{}"));
        assert_eq!(
            fields(&check_message(&m, "m", &AppendLimits::default())),
            ["m.tool_calls"]
        );
    }

    #[test]
    fn content_over_the_limit_is_rejected() {
        let limits = AppendLimits {
            max_content_bytes: 4,
            ..AppendLimits::default()
        };
        assert_eq!(
            fields(&check_message(&message(Role::User, "hello"), "m", &limits)),
            ["m.content"]
        );
    }

    #[test]
    fn the_payload_hash_depends_on_every_message_field() {
        let batch = |content: &str| {
            ParsedBatch::new(
                crate::domain::ConversationId::parse("c").unwrap(),
                vec![message(Role::User, content)],
            )
        };
        assert_eq!(batch("a").payload_hash(), batch("a").payload_hash());
        assert_ne!(batch("a").payload_hash(), batch("b").payload_hash());
    }
}
