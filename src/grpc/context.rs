//! BuildContext and CountTokens.

use std::collections::HashSet;

use super::{ApiError, ContextApi, convert};
use crate::metrics::METRICS;
use crate::{
    domain::{
        Role, TenantId, Violations,
        context::{ContextPacker, ContextRequest, ContextSnapshot, initial_page_limit, render::render},
    },
    proto,
};

impl ContextApi {
    #[tracing::instrument(name = "BuildContext", skip_all, fields(%tenant, conversation_id))]
    pub(super) async fn build(
        &self,
        tenant: TenantId,
        request: proto::BuildContextRequest,
    ) -> Result<proto::BuildContextResponse, ApiError> {
        let request = convert::context_request(request, &self.settings)?;
        let conversation = request.conversation_id.clone();
        tracing::Span::current().record("conversation_id", tracing::field::display(&conversation));
        let first_page = initial_page_limit(&request);
        let (mut snapshot, newest) = self
            .store
            .open_context(&tenant, &conversation, first_page)
            .await?;
        self.resolve_pending_results(&tenant, &request, &mut snapshot)
            .await?;

        let format = request.format;
        let mut packer = ContextPacker::new(request, snapshot);
        packer.feed_first(newest, first_page);
        let mut pages = 1;
        while let Some(page) = packer.next_page() {
            let messages = self.store.tail(&tenant, &conversation, page).await?;
            packer.feed(messages, page);
            pages += 1;
        }
        let pack = packer.finish();
        let rendered = render(&pack.messages, format);
        let s = &pack.stats;
        METRICS.context_tokens.observe(f64::from(s.total_tokens));
        METRICS.messages_dropped.inc_by(u64::from(s.messages_dropped));
        tracing::info!(
            pages,
            total_tokens = s.total_tokens,
            budget_tokens = s.budget_tokens,
            messages_included = s.messages_included,
            messages_dropped = s.messages_dropped,
            tool_groups_dropped = s.tool_groups_dropped,
            incomplete_tool_groups = s.incomplete_tool_groups,
            truncated = s.truncated,
            over_budget = s.over_budget,
            needs_summary = pack.needs_summary,
            "context built"
        );
        Ok(convert::context_response(pack, rendered))
    }

    /// Pending tool results must answer open calls of the log (or calls made by earlier pending
    /// messages); the packer needs those calls' sequences to keep each group whole.
    async fn resolve_pending_results(
        &self,
        tenant: &TenantId,
        request: &ContextRequest,
        snapshot: &mut ContextSnapshot,
    ) -> Result<(), ApiError> {
        let mut called_in_pending = HashSet::new();
        let mut wanted = Vec::new();
        for (i, m) in request.pending.iter().enumerate() {
            called_in_pending.extend(m.tool_calls.iter().map(|c| c.id.as_str()));
            match m.tool_call_id.as_deref() {
                Some(id) if m.role == Role::Tool && !called_in_pending.contains(id) => {
                    wanted.push((i, id.to_owned()))
                }
                _ => {}
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = wanted.iter().map(|(_, id)| id.clone()).collect();
        let open = self
            .store
            .open_calls(tenant, &request.conversation_id, &ids)
            .await?;
        let mut v = Violations::default();
        for (i, id) in &wanted {
            if !open.contains_key(id) {
                v.add(
                    format!("pending_messages[{i}].tool_call_id"),
                    format!("{id:?} does not answer an open tool call of this conversation"),
                );
            }
        }
        snapshot.pending_calls = open;
        v.into_result(()).map_err(ApiError::from)
    }

    pub(super) async fn count(
        &self,
        request: proto::CountTokensRequest,
    ) -> Result<proto::CountTokensResponse, ApiError> {
        let proto::CountTokensRequest { text, tokenizer } = request;
        let mut v = Violations::default();
        let tokenizer = convert::tokenizer(tokenizer, "tokenizer", self.settings.default_tokenizer, &mut v);
        if text.len() > self.settings.append.max_content_bytes {
            v.add(
                "text",
                format!(
                    "{} bytes; the limit is {}",
                    text.len(),
                    self.settings.append.max_content_bytes
                ),
            );
        }
        v.into_result(())?;
        let tokens = if text.len() > OFFLOAD_BYTES {
            tokio::task::spawn_blocking(move || tokenizer.count(&text))
                .await
                .map_err(|e| ApiError::Internal {
                    message: format!("token counting task failed: {e}"),
                })?
        } else {
            tokenizer.count(&text)
        };
        Ok(proto::CountTokensResponse {
            tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
            tokenizer: convert::tokenizer_to_proto(tokenizer) as i32,
        })
    }
}

/// Texts longer than this are tokenized on the blocking pool, off the async workers.
pub(super) const OFFLOAD_BYTES: usize = 64 * 1024;
