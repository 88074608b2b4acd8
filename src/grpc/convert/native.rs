//! Provider JSON on the wire: `AppendMessageRequest.native`, `Message.native` and usage.

use crate::{
    domain::{self, AppendLimits, Message, Usage, Violations, append::check_message, context::Format},
    proto,
};

/// The messages of provider JSON (docs/native.md), each checked as `messages` are, under the
/// JSON path it came from.
pub(super) fn native_messages(
    native: proto::NativeItems,
    limits: &AppendLimits,
    v: &mut Violations,
) -> (Vec<Message>, Vec<String>) {
    let proto::NativeItems { format, json } = native;
    let format = super::context::format_of(format, "native.format", v);
    if !v.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let parsed = domain::native::parse(format, &json, v);
    let count = parsed.messages.len();
    if count > limits.max_messages_per_request {
        v.add(
            "native.json",
            format!(
                "makes {count} messages; the limit per request is {}",
                limits.max_messages_per_request
            ),
        );
        return (Vec::new(), Vec::new());
    }
    for (message, origin) in parsed.messages.iter().zip(&parsed.origins) {
        v.extend(check_message(message, origin, limits));
    }
    (parsed.messages, parsed.origins)
}

pub(super) fn usage_of(usage: proto::Usage) -> Usage {
    let proto::Usage {
        input_tokens,
        output_tokens,
        cached_input_tokens,
        reasoning_tokens,
    } = usage;
    Usage {
        input_tokens,
        output_tokens,
        cached_input_tokens,
        reasoning_tokens,
    }
}

/// The wire form of a usage block (unset when nothing was reported).
pub(crate) fn usage_to_proto(usage: Usage) -> Option<proto::Usage> {
    let Usage {
        input_tokens,
        output_tokens,
        cached_input_tokens,
        reasoning_tokens,
    } = usage;
    (!usage.is_zero()).then_some(proto::Usage {
        input_tokens,
        output_tokens,
        cached_input_tokens,
        reasoning_tokens,
    })
}

/// The wire form of a format.
pub(super) fn format_to_proto(format: Format) -> proto::Format {
    match format {
        Format::OpenAiChat => proto::Format::OpenaiChat,
        Format::AnthropicMessages => proto::Format::AnthropicMessages,
        Format::OpenAiResponses => proto::Format::OpenaiResponses,
        Format::Gemini => proto::Format::Gemini,
    }
}
