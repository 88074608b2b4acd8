//! Background summarization: when an append passes a check point, one replica folds the
//! conversation's unsummarized history past the threshold into its summary.

use super::{Service, ServiceError, settings::AutoSummarize};
use crate::{
    domain::{AppendOutcome, ConversationId, TenantId, summary::messages_to_fold},
    models::summarize::Caller,
    store::StoreError,
};
use tracing::Instrument as _;

/// Background summarization is considered each time a conversation passes a multiple of this
/// many messages, so the check's read stays rare.
const AUTO_CHECK_EVERY: u64 = 16;

impl Service {
    /// Starts a background summarization check when the append crossed a check point.
    pub(super) fn after_append(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        outcome: AppendOutcome,
    ) {
        let Some(auto) = self.ai.auto_summarize else {
            return;
        };
        let (first, last) = (outcome.first_sequence.get(), outcome.last_sequence.get());
        if (first - 1) / AUTO_CHECK_EVERY == last / AUTO_CHECK_EVERY {
            return;
        }
        let (service, tenant, conversation) = (self.clone(), tenant.clone(), conversation.clone());
        // One check per conversation at a time on this replica; the lease makes it one across
        // replicas. The key is unambiguous: a tenant id never holds a NUL.
        let key = format!("{tenant}\u{0}{conversation}");
        let span = tracing::info_span!(
            target: crate::runtime::traces::SPAN_TARGET,
            parent: None,
            "auto_summarize",
            ctxd.tenant = %tenant,
            gen_ai.conversation.id = %conversation,
        );
        let span = crate::runtime::traces::linked(span, crate::runtime::traces::current_link());
        let work = async move {
            if let Err(error) = service.auto_summarize(&tenant, &conversation, auto).await {
                let error = crate::runtime::telemetry::ErrorChain(&error);
                tracing::warn!(%tenant, %conversation, %error, "background summarization failed");
            }
        };
        let started = self.tasks.try_spawn(key, auto.concurrency, work.instrument(span));
        if let Err(reason) = started {
            self.metrics
                .background_skipped
                .with_label_values(&[reason.label()])
                .inc();
            tracing::debug!(reason = reason.label(), "background summary check skipped");
        }
    }

    /// Folds unsummarized history past the threshold, single-flight per conversation across
    /// replicas (the store's lease); a concurrent manual summary wins the compare-and-set.
    async fn auto_summarize(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        auto: AutoSummarize,
    ) -> Result<(), ServiceError> {
        let Some(lease) = self.store.try_summarizer_lease(tenant, conversation).await? else {
            return Ok(());
        };
        let result = self.auto_summarize_held(tenant, conversation, auto).await;
        lease.release().await;
        result
    }

    async fn auto_summarize_held(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        auto: AutoSummarize,
    ) -> Result<(), ServiceError> {
        let tokenizer = self.limits.default_tokenizer;
        let (state, _reservation) = self
            .read_summary_state(tenant, conversation, Some(tokenizer))
            .await?;
        let unsummarized: usize = state
            .messages
            .iter()
            .filter(|m| !m.message.exclude_from_context)
            .map(|m| m.tokens.get(tokenizer) as usize)
            .sum();
        if unsummarized <= auto.threshold {
            return Ok(());
        }
        let keep = match state.complete {
            true => auto.keep_recent_tokens,
            false => 0,
        };
        let Some((through, folded)) = messages_to_fold(&state.messages, keep, tokenizer) else {
            return Ok(());
        };
        let summary = self
            .server_summary(
                &state,
                folded,
                through,
                self.ai.max_summary_tokens,
                tokenizer,
                Caller {
                    owner: tenant.as_str(),
                    deadline: None,
                },
            )
            .await?;
        match self
            .store
            .store_summary(tenant, conversation, state.watermark(), summary, None)
            .await
        {
            Ok(stored) => {
                tracing::info!(%tenant, %conversation, through = through.get(), version = stored.version, unsummarized, "background summary stored");
                Ok(())
            }
            Err(StoreError::SummaryMoved { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
