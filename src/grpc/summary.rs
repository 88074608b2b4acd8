//! Summarize: server-side, prepare-only and caller-provided rolling summaries.

use super::{ApiError, AutoSummarize, ContextApi, convert};
use crate::{
    domain::{
        ConversationId, Sequence, StoredMessage, TenantId, Violations,
        summary::{is_boundary, messages_to_fold, render_chat, summary_request},
    },
    proto,
    store::{NewSummary, StoreError, SummaryState},
    tokenize::Tokenizer,
};

/// SERVER summaries retry this many times when a concurrent summary moved the watermark.
const SERVER_ATTEMPTS: usize = 3;

/// A parsed Summarize request.
#[derive(Debug)]
struct SummarizeRequest {
    conversation: ConversationId,
    keep_recent_tokens: usize,
    tokenizer: Tokenizer,
    mode: Mode,
    expected_through: Option<Sequence>,
    max_summary_tokens: usize,
}

#[derive(Debug)]
enum Mode {
    Server,
    Prepare,
    Provided { text: String, through: Sequence },
}

impl ContextApi {
    #[tracing::instrument(name = "Summarize", skip_all, fields(%tenant, conversation_id, mode))]
    pub(super) async fn summarize(
        &self,
        tenant: TenantId,
        request: proto::SummarizeRequest,
    ) -> Result<proto::SummarizeResponse, ApiError> {
        let request = self.parse_summarize(request)?;
        let span = tracing::Span::current();
        span.record("conversation_id", tracing::field::display(&request.conversation));
        span.record("mode", tracing::field::debug(&request.mode));
        for attempt in 1..=SERVER_ATTEMPTS {
            let state = self.store.summary_state(&tenant, &request.conversation).await?;
            if let Some(expected) = request.expected_through
                && expected != state.watermark()
            {
                return Err(StoreError::SummaryMoved {
                    current: state.watermark(),
                }
                .into());
            }
            match self.summarize_once(&tenant, &request, &state).await {
                Err(ApiError::Store(StoreError::SummaryMoved { .. }))
                    if attempt < SERVER_ATTEMPTS
                        && request.expected_through.is_none()
                        && matches!(request.mode, Mode::Server) =>
                {
                    tracing::info!(attempt, "summary watermark moved concurrently; recomputing");
                }
                other => return other,
            }
        }
        unreachable!("the last attempt returns")
    }

    async fn summarize_once(
        &self,
        tenant: &TenantId,
        request: &SummarizeRequest,
        state: &SummaryState,
    ) -> Result<proto::SummarizeResponse, ApiError> {
        let base = state.watermark();
        let unchanged = |prepared| proto::SummarizeResponse {
            summary: state
                .summary
                .as_ref()
                .map(|s| convert::summary(s, request.tokenizer)),
            changed: false,
            prepared,
        };
        let summary = match &request.mode {
            Mode::Provided { text, through } => {
                if *through <= base
                    || *through > state.last_sequence
                    || !is_boundary(&state.messages, *through)
                {
                    return Err(Violations::single(
                        "through_sequence",
                        format!(
                            "must be after the current watermark ({base}), at most the last sequence ({}), \
                             and not inside a tool-call group",
                            state.last_sequence
                        ),
                    )
                    .into());
                }
                NewSummary {
                    text: text.clone(),
                    through_sequence: *through,
                    summarizer: "provided".to_owned(),
                }
            }
            Mode::Prepare | Mode::Server => {
                let Some((through, folded)) =
                    messages_to_fold(&state.messages, request.keep_recent_tokens, request.tokenizer)
                else {
                    return Ok(unchanged(None));
                };
                if matches!(request.mode, Mode::Prepare) {
                    let messages =
                        summary_request(state.summary.as_ref(), folded, request.max_summary_tokens);
                    return Ok(unchanged(Some(proto::PreparedRequest {
                        rendered: render_chat(&messages),
                        messages: messages.into_iter().map(convert::plain_message).collect(),
                        base_through_sequence: base.get(),
                        through_sequence: through.get(),
                    })));
                }
                self.server_summary(
                    state,
                    folded,
                    through,
                    request.max_summary_tokens,
                    request.tokenizer,
                )
                .await?
            }
        };
        let through = summary.through_sequence;
        let stored = self
            .store
            .store_summary(tenant, &request.conversation, base, summary)
            .await?;
        tracing::info!(
            base = base.get(),
            through = through.get(),
            version = stored.version,
            "summary advanced"
        );
        Ok(proto::SummarizeResponse {
            summary: Some(convert::summary(&stored, request.tokenizer)),
            changed: true,
            prepared: None,
        })
    }

    fn parse_summarize(&self, request: proto::SummarizeRequest) -> Result<SummarizeRequest, ApiError> {
        let proto::SummarizeRequest {
            conversation_id,
            keep_recent_tokens,
            tokenizer,
            mode,
            summary_text,
            through_sequence,
            expected_through_sequence,
            max_summary_tokens,
        } = request;
        let mut v = Violations::default();
        let conversation = convert::conversation_id(conversation_id, "conversation_id", &mut v);
        let tokenizer = convert::tokenizer(tokenizer, "tokenizer", self.settings.default_tokenizer, &mut v);
        let expected_through = expected_through_sequence
            .map(Sequence::parse)
            .transpose()
            .map_err(|e| v.add("expected_through_sequence", e))
            .ok()
            .flatten();
        let mode = match proto::SummarizeMode::try_from(mode) {
            Ok(proto::SummarizeMode::Unspecified | proto::SummarizeMode::Server) => Mode::Server,
            Ok(proto::SummarizeMode::Prepare) => Mode::Prepare,
            Ok(proto::SummarizeMode::Provided) => {
                if summary_text.trim().is_empty() {
                    v.add("summary_text", "SUMMARIZE_MODE_PROVIDED needs the summary text");
                }
                if summary_text.len() > self.settings.append.max_content_bytes {
                    v.add(
                        "summary_text",
                        format!(
                            "{} bytes; the limit is {}",
                            summary_text.len(),
                            self.settings.append.max_content_bytes
                        ),
                    );
                }
                let through = Sequence::parse(through_sequence)
                    .map_err(|e| v.add("through_sequence", e))
                    .ok();
                if through_sequence == 0 {
                    v.add(
                        "through_sequence",
                        "SUMMARIZE_MODE_PROVIDED needs the last sequence the summary covers",
                    );
                }
                Mode::Provided {
                    text: summary_text,
                    through: through.unwrap_or(Sequence::ZERO),
                }
            }
            Err(_) => {
                v.add("mode", format!("unknown summarize mode {mode}"));
                Mode::Server
            }
        };
        let max_summary_tokens = match max_summary_tokens {
            0 => self.ai.max_summary_tokens,
            n => n as usize,
        };
        match (conversation, v.is_empty()) {
            (Some(conversation), true) => Ok(SummarizeRequest {
                conversation,
                keep_recent_tokens: keep_recent_tokens as usize,
                tokenizer,
                mode,
                expected_through,
                max_summary_tokens,
            }),
            _ => Err(v.into()),
        }
    }
}

/// Background summarization is considered each time a conversation passes a multiple of this
/// many messages, so the check's read stays rare.
const AUTO_CHECK_EVERY: u64 = 16;

impl ContextApi {
    /// Starts a background summarization check when the append crossed a check point.
    pub(super) fn after_append(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        first: Sequence,
        last: Sequence,
    ) {
        let Some(auto) = self.ai.auto_summarize else {
            return;
        };
        if (first.get() - 1) / AUTO_CHECK_EVERY == last.get() / AUTO_CHECK_EVERY {
            return;
        }
        let (api, tenant, conversation) = (self.clone(), tenant.clone(), conversation.clone());
        tokio::spawn(async move {
            if let Err(error) = api.auto_summarize(&tenant, &conversation, auto).await {
                tracing::warn!(%tenant, %conversation, %error, "background summarization failed");
            }
        });
    }

    /// Folds unsummarized history past the threshold, single-flight per conversation across
    /// replicas (the store's lease); a concurrent manual summary wins the compare-and-set.
    async fn auto_summarize(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        auto: AutoSummarize,
    ) -> Result<(), ApiError> {
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
    ) -> Result<(), ApiError> {
        let tokenizer = self.settings.default_tokenizer;
        let state = self.store.summary_state(tenant, conversation).await?;
        let unsummarized: usize = state
            .messages
            .iter()
            .filter(|m| !m.message.exclude_from_context)
            .map(|m| m.tokens.get(tokenizer) as usize)
            .sum();
        if unsummarized <= auto.threshold {
            return Ok(());
        }
        let Some((through, folded)) = messages_to_fold(&state.messages, auto.keep_recent_tokens, tokenizer)
        else {
            return Ok(());
        };
        let summary = self
            .server_summary(&state, folded, through, self.ai.max_summary_tokens, tokenizer)
            .await?;
        match self
            .store
            .store_summary(tenant, conversation, state.watermark(), summary)
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

impl ContextApi {
    /// Runs the configured summarizer over `folded` (the messages up to `through`).
    async fn server_summary(
        &self,
        state: &SummaryState,
        folded: &[StoredMessage],
        through: Sequence,
        max_summary_tokens: usize,
        tokenizer: Tokenizer,
    ) -> Result<NewSummary, ApiError> {
        let summarizer = &self.ai.summarizer;
        let text = summarizer
            .summarize(state.summary.as_ref(), folded, max_summary_tokens, tokenizer)
            .await?;
        Ok(NewSummary {
            text,
            through_sequence: through,
            summarizer: summarizer.name().to_owned(),
        })
    }
}
