//! Checks of the provider-native data an assistant message carries (docs/design.md, "Reasoning and provider-native data"):
//! reasoning blocks, signatures and item ids, stored verbatim and sent back only to the
//! provider that produced them.

use super::{AppendLimits, MAX_SHORT_FIELD_BYTES};
use crate::domain::{
    context::render::openai_chat_message,
    format::Format,
    message::{Message, Provider, Reasoning, ReasoningKind, Role},
    native::{self, Parsed, request_form},
    violation::{Violations, check_no_nul},
};

/// The messages of provider JSON as append stores them ([`native::parse`]): a Chat Completions
/// message keeps its JSON only where ctxd's own rendering of the modeled fields would not give
/// it back, so plain messages are stored as plain messages.
pub fn parse_native(format: Format, text: &str, salt: &str, v: &mut Violations) -> Parsed {
    let mut parsed = native::parse(format, text, salt, v);
    for message in &mut parsed.messages {
        let Some(json) = message.native.take() else {
            continue;
        };
        if json.format != Format::OpenAiChat || openai_chat_message(message) != request_form(&json.json) {
            message.native = Some(json);
        }
    }
    parsed
}

/// Most reasoning blocks on one message.
pub const MAX_REASONING_BLOCKS: usize = 64;

/// Checks `message`'s native data; `path` is the message's field path.
pub(super) fn check_native(message: &Message, path: &str, limits: &AppendLimits, v: &mut Violations) {
    check_phase(message, path, v);
    if message.native_provider().is_none() {
        return;
    }
    if message.role != Role::Assistant {
        v.add(
            format!("{path}.reasoning"),
            "only assistant messages carry reasoning, signatures or item ids",
        );
        return;
    }
    if message.reasoning.len() > MAX_REASONING_BLOCKS {
        v.add(
            format!("{path}.reasoning"),
            format!(
                "{} blocks; the limit is {MAX_REASONING_BLOCKS}",
                message.reasoning.len()
            ),
        );
    }
    let bytes = message.native_bytes();
    if bytes > limits.max_content_bytes {
        v.add(
            format!("{path}.reasoning"),
            format!(
                "reasoning, signatures and item ids are {bytes} bytes; the limit is {}",
                limits.max_content_bytes
            ),
        );
    }
    let others = usize::from(message.has_text_block()) + message.tool_calls.len();
    let mut previous = 0;
    for (j, block) in message.reasoning.iter().enumerate() {
        let block_path = format!("{path}.reasoning[{j}]");
        check_block(block, &block_path, v);
        let position = block.position as usize;
        // Blocks parsed from provider JSON are placed by it, not by their position.
        if message.native.is_some() {
            continue;
        }
        if position < previous || position > others {
            v.add(
                format!("{block_path}.position"),
                format!(
                    "{position} must be at least the previous block's ({previous}) and at most \
                     the number of the message's text and tool-call blocks ({others})"
                ),
            );
        }
        // Claude never ends a reply with thinking, and the API refuses such a message.
        if block.provider == Provider::Anthropic && others > 0 && position == others {
            v.add(
                format!("{block_path}.position"),
                "an Anthropic thinking block cannot come after all of the message's text and tool calls",
            );
        }
        previous = position;
    }
    check_one_provider(message, path, v);
    check_ids(message, path, v);
    if message.native_provider() == Some(Provider::Gemini) {
        check_gemini_signatures(message, path, v);
    }
}

/// The phases OpenAI labels an assistant `message` item with.
const PHASES: [&str; 2] = ["commentary", "final_answer"];

/// An OpenAI Responses `phase`: on an assistant text, one of [`PHASES`] (the API refuses
/// another), and not on a reply whose other native data is another provider's.
fn check_phase(message: &Message, path: &str, v: &mut Violations) {
    if message.content_phase.is_empty() {
        return;
    }
    let field = format!("{path}.content_phase");
    if message.role != Role::Assistant {
        v.add(field, "only assistant messages carry a phase");
    } else if !PHASES.contains(&message.content_phase.as_str()) {
        v.add(
            field,
            "`commentary` or `final_answer`, as OpenAI labels a message item",
        );
    } else if message.content.is_empty() {
        v.add(field, "labels the item that carried `content`, which is empty");
    } else if message.native_provider().is_some_and(|p| p != Provider::OpenAi) {
        v.add(
            field,
            "a phase is OpenAI Responses'; this message's other native data is another provider's",
        );
    }
}

/// Gemini's `thoughtSignature` is a bytes field: the API decodes it as base64 and refuses a
/// request whose signature does not decode. Checked here, where the caller learns which field
/// it is, instead of by the provider on every later call.
fn check_gemini_signatures(message: &Message, path: &str, v: &mut Violations) {
    let signatures = std::iter::once((format!("{path}.content_signature"), &message.content_signature))
        .chain(
            message
                .tool_calls
                .iter()
                .enumerate()
                .map(|(j, call)| (format!("{path}.tool_calls[{j}].signature"), &call.signature)),
        )
        .chain(
            message
                .reasoning
                .iter()
                .enumerate()
                .map(|(j, block)| (format!("{path}.reasoning[{j}].signature"), &block.signature)),
        );
    for (field, signature) in signatures {
        if !signature.is_empty() && !is_base64(signature) {
            v.add(
                field,
                "a Gemini thoughtSignature is base64 (standard or URL-safe), as the REST API \
                 returns it; the SDKs give it as bytes, which must be base64-encoded",
            );
        }
    }
}

/// Whether `text` decodes the way protobuf's JSON mapping decodes a bytes field: standard or
/// URL-safe alphabet, padding optional.
fn is_base64(text: &str) -> bool {
    use base64::{
        Engine, alphabet,
        engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig},
    };
    let config = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    [alphabet::STANDARD, alphabet::URL_SAFE]
        .iter()
        .any(|alphabet| GeneralPurpose::new(alphabet, config).decode(text).is_ok())
}

/// What each kind requires and forbids.
fn check_block(block: &Reasoning, path: &str, v: &mut Violations) {
    let Some(kind) = block.known_kind() else {
        v.add(
            format!("{path}.type"),
            format!(
                "unknown type for this provider; expected {}",
                ReasoningKind::names(block.provider)
            ),
        );
        return;
    };
    let fields = [
        ("text", !block.text.is_empty()),
        ("signature", !block.signature.is_empty()),
        ("data", !block.data.is_empty()),
        ("id", !block.id.is_empty()),
        ("summary", !block.summary.is_empty()),
    ];
    let (required, allowed): (&[&str], &[&str]) = match kind {
        ReasoningKind::AnthropicThinking => (&["signature"], &["text", "signature"]),
        ReasoningKind::AnthropicRedacted => (&["data"], &["data"]),
        ReasoningKind::OpenAiReasoning => (&["id"], &["id", "summary", "data", "text"]),
        ReasoningKind::GeminiThought => (&["text"], &["text", "signature"]),
    };
    for (field, set) in fields {
        if !set && required.contains(&field) {
            v.add(
                format!("{path}.{field}"),
                format!("required for a `{}` block", block.kind),
            );
        }
        if set && !allowed.contains(&field) {
            v.add(
                format!("{path}.{field}"),
                format!("not part of a `{}` block", block.kind),
            );
        }
    }
    if block.id.len() > MAX_SHORT_FIELD_BYTES {
        v.add(
            format!("{path}.id"),
            format!("at most {MAX_SHORT_FIELD_BYTES} bytes"),
        );
    }
    check_no_nul(v, &block.kind, || format!("{path}.type"));
    check_no_nul(v, &block.text, || format!("{path}.text"));
    check_no_nul(v, &block.signature, || format!("{path}.signature"));
    check_no_nul(v, &block.data, || format!("{path}.data"));
    check_no_nul(v, &block.id, || format!("{path}.id"));
    for (k, part) in block.summary.iter().enumerate() {
        check_no_nul(v, part, || format!("{path}.summary[{k}]"));
    }
}

/// One message is one model reply: its native data comes from one provider, so that a pack
/// for another provider can leave all of it out.
fn check_one_provider(message: &Message, path: &str, v: &mut Violations) {
    let Some(provider) = message.native_provider() else {
        return;
    };
    if let Some(j) = message.reasoning.iter().position(|r| r.provider != provider) {
        v.add(
            format!("{path}.reasoning[{j}].provider"),
            "all reasoning of one message comes from one provider",
        );
    }
    let signed =
        !message.content_signature.is_empty() || message.tool_calls.iter().any(|c| !c.signature.is_empty());
    if signed && provider != Provider::Gemini {
        v.add(
            format!("{path}.content_signature"),
            "signatures on text and tool calls are Gemini's; this message's reasoning is another provider's",
        );
    }
    let itemized =
        !message.content_item_id.is_empty() || message.tool_calls.iter().any(|c| !c.item_id.is_empty());
    if itemized && provider != Provider::OpenAi {
        v.add(
            format!("{path}.content_item_id"),
            "item ids are OpenAI Responses'; this message's other native data is another provider's",
        );
    }
}

fn check_ids(message: &Message, path: &str, v: &mut Violations) {
    if message.content_item_id.len() > MAX_SHORT_FIELD_BYTES {
        v.add(
            format!("{path}.content_item_id"),
            format!("at most {MAX_SHORT_FIELD_BYTES} bytes"),
        );
    }
    if !message.content_item_id.is_empty() && message.content.is_empty() {
        v.add(
            format!("{path}.content_item_id"),
            "names the item that carried `content`, which is empty",
        );
    }
    check_no_nul(v, &message.content_item_id, || format!("{path}.content_item_id"));
    check_no_nul(v, &message.content_signature, || {
        format!("{path}.content_signature")
    });
    for (j, call) in message.tool_calls.iter().enumerate() {
        if call.item_id.len() > MAX_SHORT_FIELD_BYTES {
            v.add(
                format!("{path}.tool_calls[{j}].item_id"),
                format!("at most {MAX_SHORT_FIELD_BYTES} bytes"),
            );
        }
        check_no_nul(v, &call.item_id, || format!("{path}.tool_calls[{j}].item_id"));
        check_no_nul(v, &call.signature, || format!("{path}.tool_calls[{j}].signature"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::ToolCall;

    fn block(provider: Provider, kind: &str) -> Reasoning {
        Reasoning::new(provider, kind)
    }

    fn violations(message: &Message) -> Vec<String> {
        let mut v = Violations::default();
        check_native(message, "m", &AppendLimits::default(), &mut v);
        v.iter().map(|f| f.field.clone()).collect()
    }

    fn assistant(reasoning: Vec<Reasoning>) -> Message {
        Message {
            reasoning,
            tool_calls: vec![ToolCall::new("c1", "f", "{}")],
            ..Message::text(Role::Assistant, "text".into())
        }
    }

    #[test]
    fn each_kind_has_its_required_and_allowed_fields() {
        let thinking = Reasoning {
            text: "hmm".into(),
            signature: "sig".into(),
            ..block(Provider::Anthropic, "thinking")
        };
        assert!(violations(&assistant(vec![thinking.clone()])).is_empty());
        let unsigned = Reasoning {
            signature: String::new(),
            ..thinking.clone()
        };
        assert_eq!(
            violations(&assistant(vec![unsigned])),
            ["m.reasoning[0].signature"]
        );
        let stray_id = Reasoning {
            id: "rs_1".into(),
            ..thinking
        };
        assert_eq!(violations(&assistant(vec![stray_id])), ["m.reasoning[0].id"]);
        let openai = Reasoning {
            signature: "sig".into(),
            ..block(Provider::OpenAi, "reasoning")
        };
        assert_eq!(
            violations(&assistant(vec![openai])),
            ["m.reasoning[0].signature", "m.reasoning[0].id"]
        );
        assert_eq!(
            violations(&assistant(vec![block(Provider::Gemini, "thinking")])),
            ["m.reasoning[0].type"]
        );
    }

    #[test]
    fn positions_stay_in_range_and_in_order() {
        let at = |position| Reasoning {
            data: "x".into(),
            position,
            ..block(Provider::Anthropic, "redacted_thinking")
        };
        assert!(violations(&assistant(vec![at(0), at(1)])).is_empty());
        assert_eq!(violations(&assistant(vec![at(3)])), ["m.reasoning[0].position"]);
        assert_eq!(
            violations(&assistant(vec![at(2)])),
            ["m.reasoning[0].position"],
            "Anthropic thinking never ends a reply"
        );
        assert_eq!(
            violations(&assistant(vec![at(1), at(0)])),
            ["m.reasoning[1].position"]
        );
    }

    #[test]
    fn one_message_carries_one_providers_native_data() {
        let mut message = assistant(vec![Reasoning {
            data: "x".into(),
            ..block(Provider::Anthropic, "redacted_thinking")
        }]);
        message.tool_calls[0].signature = "Z2VtaW5p".into();
        message.content_item_id = "msg_1".into();
        assert_eq!(violations(&message), ["m.content_signature", "m.content_item_id"]);
        let mut user = Message::text(Role::User, "hi".into());
        user.content_signature = "sig".into();
        assert_eq!(violations(&user), ["m.reasoning"]);
    }

    #[test]
    fn gemini_signatures_are_base64_in_either_alphabet() {
        let thought = |signature: &str| Reasoning {
            text: "t".into(),
            signature: signature.into(),
            ..block(Provider::Gemini, "thought")
        };
        let mut message = assistant(vec![thought("CiQB0e2K+/8=")]);
        message.tool_calls[0].signature = "CiQB0e2K-_8".into();
        message.content_signature = "skip_thought_signature_validator".into();
        assert!(violations(&message).is_empty(), "{:?}", violations(&message));
        let mut message = assistant(vec![thought("b'\\x0a\\x24'")]);
        message.tool_calls[0].signature = "CiQB0e2K+_8=".into();
        message.content_signature = "abcde".into();
        assert_eq!(
            violations(&message),
            [
                "m.content_signature",
                "m.tool_calls[0].signature",
                "m.reasoning[0].signature"
            ],
            "not base64, two alphabets mixed, an impossible length"
        );
    }

    #[test]
    fn a_phase_is_an_openai_label_of_assistant_text() {
        let with_phase = |role, phase: &str| Message {
            content_phase: phase.into(),
            ..Message::text(role, "text".into())
        };
        assert!(violations(&with_phase(Role::Assistant, "commentary")).is_empty());
        assert!(violations(&with_phase(Role::Assistant, "final_answer")).is_empty());
        assert_eq!(
            violations(&with_phase(Role::Assistant, "final")),
            ["m.content_phase"]
        );
        assert_eq!(
            violations(&with_phase(Role::User, "commentary")),
            ["m.content_phase"]
        );
        let mut gemini = with_phase(Role::Assistant, "commentary");
        gemini.content_signature = "Z2VtaW5p".into();
        assert_eq!(violations(&gemini), ["m.content_phase"]);
        let mut silent = with_phase(Role::Assistant, "commentary");
        silent.content.clear();
        silent.tool_calls.push(ToolCall::new("c1", "f", "{}"));
        assert_eq!(violations(&silent), ["m.content_phase"]);
    }
}
