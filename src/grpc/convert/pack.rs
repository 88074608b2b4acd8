//! BuildContext on the wire.

use super::{
    fields::{conversation_id, format_of, tokenizer},
    message_out::message_fields,
    messages::messages,
};
use crate::{
    domain::{
        AppendLimits, Sequence, Violations,
        context::{
            ClearToolResults, ContextMessage, ContextPack, ContextRequest, ContextStats, FinalAssistant,
            HistoryPolicy, ReasoningPolicy, Source, TokenBudget,
        },
    },
    proto,
    service::Limits,
};

/// `$value` of type `$from` as a `$to` with the same fields, each listed once: the destructuring
/// makes a field added to `$from` a compile error, the literal one added to `$to`.
macro_rules! same_fields {
    ($value:ident: $from:path => $to:path { $($field:ident),* $(,)? }) => {{
        let $from { $($field),* } = $value;
        $to { $($field),* }
    }};
}

/// Parses a BuildContext request, with every violation found.
pub(crate) fn context_request(
    request: proto::BuildContextRequest,
    settings: &Limits,
) -> Result<ContextRequest, Violations> {
    let proto::BuildContextRequest {
        conversation_id: raw_id,
        budget,
        tokenizer: raw_tokenizer,
        system_prompt,
        pending_messages,
        omit_summary,
        omit_working_memory,
        tool_output_max_tokens,
        format,
        history_policy,
        reasoning,
        final_assistant,
        omit_messages: _,
        clear_tool_results,
        recall,
    } = request;
    let mut v = Violations::default();
    let conversation_id = conversation_id(raw_id, "conversation_id", &mut v);
    let proto::Budget {
        max_tokens,
        reserve_output_tokens,
        max_messages,
        max_turns,
    } = budget.unwrap_or_default();
    let budget = TokenBudget::parse(max_tokens, reserve_output_tokens, max_messages, max_turns)
        .map_err(|e| v.extend(e))
        .ok();
    let tokenizer = tokenizer(raw_tokenizer, "tokenizer", settings.default_tokenizer, &mut v);
    let limits = &settings.append;
    check_pending_sizes(&system_prompt, pending_messages.len(), limits, &mut v);
    let pending = messages(pending_messages, "pending_messages", limits, &mut v);
    let format = format_of(format, "format", &mut v);
    let history = history_policy_of(history_policy, &mut v);
    let reasoning = reasoning_policy_of(reasoning, &mut v);
    let final_assistant = final_assistant_of(final_assistant, &mut v);
    let clear_tool_results = clear_tool_results.map(|c| clearing(c, &mut v));
    let recall = recall.map(|r| super::search::recall(r, &mut v));
    match (conversation_id, budget, v.is_empty()) {
        (Some(conversation_id), Some(budget), true) => Ok(ContextRequest {
            conversation_id,
            budget,
            tokenizer,
            system_prompt,
            pending,
            include_summary: !omit_summary,
            include_memory: !omit_working_memory,
            tool_output_max_tokens: (tool_output_max_tokens > 0).then_some(tool_output_max_tokens),
            format,
            history,
            reasoning,
            final_assistant,
            clear_tool_results,
            recall,
        }),
        _ => Err(v),
    }
}

/// Names in `exclude_tools`, and the bytes of one.
const MAX_EXCLUDED_TOOLS: usize = 64;
const MAX_TOOL_NAME_BYTES: usize = 256;

/// `clear_tool_results`, with its names checked.
fn clearing(clear: proto::ClearToolResults, v: &mut Violations) -> ClearToolResults {
    let field = "clear_tool_results.exclude_tools";
    if clear.exclude_tools.len() > MAX_EXCLUDED_TOOLS {
        let n = clear.exclude_tools.len();
        v.add(field, format!("{n} names; the limit is {MAX_EXCLUDED_TOOLS}"));
    }
    for (i, name) in clear.exclude_tools.iter().enumerate().take(MAX_EXCLUDED_TOOLS) {
        if name.len() > MAX_TOOL_NAME_BYTES {
            let problem = format!("{} bytes; the limit is {MAX_TOOL_NAME_BYTES}", name.len());
            v.add(format!("{field}[{i}]"), problem);
        }
    }
    ClearToolResults {
        keep_recent: clear.keep_recent,
        exclude_tools: clear.exclude_tools,
        clear_arguments: clear.clear_arguments,
    }
}

/// The caller-sent text of a BuildContext request within the append limits.
fn check_pending_sizes(system_prompt: &str, pending: usize, limits: &AppendLimits, v: &mut Violations) {
    if system_prompt.len() > limits.max_content_bytes {
        v.add(
            "system_prompt",
            format!(
                "{} bytes; the limit is {}",
                system_prompt.len(),
                limits.max_content_bytes
            ),
        );
    }
    if pending > limits.max_messages_per_request {
        v.add(
            "pending_messages",
            format!(
                "{pending} pending messages; the limit is {}",
                limits.max_messages_per_request
            ),
        );
    }
}

/// Where history starts (cache-stable when unspecified).
fn history_policy_of(history_policy: i32, v: &mut Violations) -> HistoryPolicy {
    match proto::HistoryPolicy::try_from(history_policy) {
        Ok(proto::HistoryPolicy::Unspecified | proto::HistoryPolicy::CacheStable) => {
            HistoryPolicy::CacheStable
        }
        Ok(proto::HistoryPolicy::Newest) => HistoryPolicy::Newest,
        Err(_) => {
            v.add(
                "history_policy",
                format!("unknown history policy value {history_policy}"),
            );
            HistoryPolicy::CacheStable
        }
    }
}

/// Which reasoning the pack carries (the current turn's when unspecified).
fn reasoning_policy_of(reasoning: i32, v: &mut Violations) -> ReasoningPolicy {
    match proto::ReasoningPolicy::try_from(reasoning) {
        Ok(proto::ReasoningPolicy::Unspecified | proto::ReasoningPolicy::CurrentTurn) => {
            ReasoningPolicy::CurrentTurn
        }
        Ok(proto::ReasoningPolicy::All) => ReasoningPolicy::All,
        Err(_) => {
            v.add("reasoning", format!("unknown reasoning policy value {reasoning}"));
            ReasoningPolicy::CurrentTurn
        }
    }
}

/// Whether the log's final assistant replies stay (the format's default when unspecified).
fn final_assistant_of(final_assistant: i32, v: &mut Violations) -> FinalAssistant {
    match proto::FinalAssistant::try_from(final_assistant) {
        Ok(proto::FinalAssistant::Unspecified) => FinalAssistant::FormatDefault,
        Ok(proto::FinalAssistant::Keep) => FinalAssistant::Keep,
        Ok(proto::FinalAssistant::Omit) => FinalAssistant::Omit,
        Err(_) => {
            v.add(
                "final_assistant",
                format!("unknown final assistant value {final_assistant}"),
            );
            FinalAssistant::FormatDefault
        }
    }
}

/// The wire form of a pack; `with_messages` false leaves the typed messages out
/// (`BuildContextRequest.omit_messages`).
pub(crate) fn context_response(
    pack: ContextPack,
    rendered: String,
    with_messages: bool,
) -> proto::BuildContextResponse {
    let ContextPack {
        messages,
        abridged: _,
        stats,
        needs_summary,
        previous_response_id,
    } = pack;
    proto::BuildContextResponse {
        messages: match with_messages {
            true => messages.into_iter().map(context_message).collect(),
            false => Vec::new(),
        },
        rendered,
        stats: Some(context_stats(stats)),
        needs_summary,
        previous_response_id: previous_response_id.unwrap_or_default(),
    }
}

fn context_message(context: ContextMessage) -> proto::ContextMessage {
    let ContextMessage {
        source,
        sequence,
        tokens,
        message,
    } = context;
    let proto::Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        error,
        response_id,
        reasoning,
        content_item_id,
        content_signature,
        content_phase,
        ..
    } = message_fields(message);
    let source = match source {
        Source::SystemPrompt => proto::ContextSource::SystemPrompt,
        Source::Summary => proto::ContextSource::Summary,
        Source::WorkingMemory => proto::ContextSource::WorkingMemory,
        Source::TruncationNotice => proto::ContextSource::TruncationNotice,
        Source::History => proto::ContextSource::History,
        Source::Pending => proto::ContextSource::Pending,
        Source::Placeholder => proto::ContextSource::Placeholder,
        Source::Recall => proto::ContextSource::Recall,
    };
    proto::ContextMessage {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        attachments,
        error,
        response_id,
        source: source as i32,
        sequence: sequence.map_or(0, Sequence::get),
        tokens,
        reasoning,
        content_item_id,
        content_signature,
        content_phase,
    }
}

/// The pack's figures on the wire: the same fields, each named once (a field added to either
/// side is a compile error here until it is mapped).
fn context_stats(stats: ContextStats) -> proto::ContextStats {
    same_fields!(stats: ContextStats => proto::ContextStats {
        total_tokens,
        system_prompt_tokens,
        summary_tokens,
        working_memory_tokens,
        truncation_notice_tokens,
        history_tokens,
        pending_tokens,
        budget_tokens,
        messages_considered,
        messages_included,
        messages_dropped,
        tool_groups_dropped,
        incomplete_tool_groups,
        oldest_included_sequence,
        summary_through_sequence,
        log_last_sequence,
        truncated,
        over_budget,
        stable_prefix_tokens,
        history_step_tokens,
        reasoning_tokens,
        reasoning_tokens_omitted,
        summary_cut,
        final_assistant_omitted,
        tool_results_cleared,
        tool_result_tokens_cleared,
        recall_tokens,
        messages_recalled,
        compaction_sequence,
    })
}
