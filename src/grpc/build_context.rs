//! BuildContext and CountTokens.

use opentelemetry::KeyValue;

use super::{ContextApi, Reply, convert};
use crate::{
    domain::{TenantId, Violations, format::Format},
    proto,
    runtime::{deadline::Deadline, traces},
    service::ServiceError,
};

/// The pack, explained on BuildContext's span (docs/operations.md, "Traces"): where the budget
/// went and what was kept, left out, cleared and recalled. Counts only, never content.
fn pack_attributes(stats: &proto::ContextStats) -> [KeyValue; 24] {
    let n = |key: &'static str, value: u32| KeyValue::new(key, i64::from(value));
    let seq = |key: &'static str, value: u64| KeyValue::new(key, i64::try_from(value).unwrap_or(i64::MAX));
    [
        n("ctxd.pack.budget_tokens", stats.budget_tokens),
        n("ctxd.pack.total_tokens", stats.total_tokens),
        n("ctxd.pack.tokens.system_prompt", stats.system_prompt_tokens),
        n("ctxd.pack.tokens.summary", stats.summary_tokens),
        n("ctxd.pack.tokens.working_memory", stats.working_memory_tokens),
        n(
            "ctxd.pack.tokens.truncation_notice",
            stats.truncation_notice_tokens,
        ),
        n("ctxd.pack.tokens.history", stats.history_tokens),
        n("ctxd.pack.tokens.pending", stats.pending_tokens),
        n("ctxd.pack.tokens.recall", stats.recall_tokens),
        n("ctxd.pack.tokens.reasoning", stats.reasoning_tokens),
        n("ctxd.pack.messages.considered", stats.messages_considered),
        n("ctxd.pack.messages.kept", stats.messages_included),
        n("ctxd.pack.messages.left_out", stats.messages_dropped),
        n(
            "ctxd.pack.messages.final_assistant_left_out",
            stats.final_assistant_omitted,
        ),
        n(
            "ctxd.pack.tool_groups.cut",
            stats.tool_groups_dropped + stats.incomplete_tool_groups,
        ),
        n("ctxd.pack.tool_results.cleared", stats.tool_results_cleared),
        n("ctxd.pack.messages.recalled", stats.messages_recalled),
        KeyValue::new("ctxd.pack.truncated", stats.truncated),
        KeyValue::new("ctxd.pack.over_budget", stats.over_budget),
        n("ctxd.pack.stable_prefix_tokens", stats.stable_prefix_tokens),
        seq("ctxd.pack.oldest_kept_sequence", stats.oldest_included_sequence),
        seq(
            "ctxd.pack.summary_through_sequence",
            stats.summary_through_sequence,
        ),
        seq("ctxd.pack.log_last_sequence", stats.log_last_sequence),
        seq("ctxd.pack.compaction_sequence", stats.compaction_sequence),
    ]
}

/// The format's name on a span, as the API spells it.
fn format_name(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "openai_chat",
        Format::AnthropicMessages => "anthropic_messages",
        Format::OpenAiResponses => "openai_responses",
        Format::Gemini => "gemini",
    }
}

impl ContextApi {
    pub(super) async fn build_context(
        &self,
        tenant: TenantId,
        request: proto::BuildContextRequest,
        deadline: Option<Deadline>,
    ) -> Result<Reply<proto::BuildContextResponse>, ServiceError> {
        let with_messages = !request.omit_messages;
        let request = convert::context_request(request, self.service.limits())?;
        let span = tracing::Span::current();
        traces::attributes(&span, || {
            [
                KeyValue::new(
                    "gen_ai.conversation.id",
                    request.conversation_id.as_str().to_owned(),
                ),
                KeyValue::new("ctxd.pack.format", format_name(request.format)),
                KeyValue::new("ctxd.pack.tokenizer", request.tokenizer.name()),
            ]
        });
        let outcome = self
            .service
            .build_context(&tenant, request, deadline.as_ref())
            .await?;
        let response = convert::context_response(outcome.pack, outcome.rendered, with_messages);
        if let Some(stats) = &response.stats {
            traces::attributes(&span, || pack_attributes(stats));
        }
        Ok(Reply::holding(response, outcome.reservation))
    }

    pub(super) async fn count_tokens(
        &self,
        request: proto::CountTokensRequest,
    ) -> Result<proto::CountTokensResponse, ServiceError> {
        let proto::CountTokensRequest { text, tokenizer } = request;
        let mut v = Violations::default();
        let default = self.service.limits().default_tokenizer;
        let tokenizer = convert::tokenizer(tokenizer, "tokenizer", default, &mut v);
        v.into_result(())?;
        let tokens = self.service.count_tokens(text, tokenizer).await?;
        Ok(proto::CountTokensResponse {
            tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
            tokenizer: convert::tokenizer_to_proto(tokenizer) as i32,
        })
    }
}
