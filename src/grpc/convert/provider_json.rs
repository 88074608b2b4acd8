//! Provider JSON on the wire: `AppendMessageRequest.native`, `Message.native` and usage.

use crate::{
    domain::{
        AppendLimits, Usage, Violations,
        append::{check_message, parse_native},
        native::Parsed,
    },
    proto,
};

/// The messages of provider JSON (docs/native.md), each checked as `messages` are, under the
/// JSON path it came from.
pub(super) fn native_messages(
    native: proto::NativeItems,
    salt: &str,
    limits: &AppendLimits,
    v: &mut Violations,
) -> Parsed {
    let proto::NativeItems { format, json } = native;
    let format = super::fields::format_of(format, "native.format", v);
    if !v.is_empty() {
        return Parsed::default();
    }
    let parsed = parse_native(format, &json, salt, v);
    let count = parsed.messages.len();
    if count > limits.max_messages_per_request {
        v.add(
            "native.json",
            format!(
                "makes {count} messages; the limit per request is {}",
                limits.max_messages_per_request
            ),
        );
        return Parsed::default();
    }
    for (i, (message, origin)) in parsed.messages.iter().zip(&parsed.origins).enumerate() {
        let unbound = parsed.unbound.iter().any(|(index, _)| *index == i);
        for violation in check_message(message, origin, limits).iter() {
            // A result bound to its call on append has no id yet.
            if !(unbound && violation.field == format!("{origin}.tool_call_id")) {
                v.add(violation.field.clone(), violation.description.clone());
            }
        }
    }
    parsed
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

/// A value no other append gets (for ids ctxd generates in JSON appended without a key).
pub(super) fn unique_salt() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{nanos}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}
