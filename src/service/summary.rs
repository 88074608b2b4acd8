//! Summarize in its three modes (server, prepare, provided) and background summarization.

use super::{Service, ServiceError, late_counts::LateCounts};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        ConversationId, Sequence, StoredMessage, TenantId, Violations,
        message::Message,
        summary::{Summary, is_boundary, messages_to_fold},
    },
    models::summarize::{Caller, ModelError, ModelRole, prompts::render_chat, summary_chunk},
    runtime::deadline::Deadline,
    runtime::response_budget::Reservation,
    store::{NewSummary, StoreError, SummaryState},
};

/// SERVER summaries retry this many times when a concurrent summary moved the watermark.
const SERVER_ATTEMPTS: usize = 3;

/// A parsed Summarize request.
#[derive(Debug)]
pub struct SummarizeRequest {
    /// The conversation.
    pub conversation: ConversationId,
    /// Tokens of recent history left verbatim.
    pub keep_recent_tokens: usize,
    /// Tokenizer of the verbatim window and the summary's size.
    pub tokenizer: Tokenizer,
    /// What to do.
    pub mode: SummarizeMode,
    /// The watermark the caller based its request on (ABORTED when it moved).
    pub expected_through: Option<Sequence>,
    /// PROVIDED: the redactions and rewinds of the PREPARE the summary came from (ABORTED
    /// when they changed; see [`check_log_changes`]).
    pub expected_log_changes: Option<u64>,
    /// Size of the summary to ask for.
    pub max_summary_tokens: usize,
}

/// How a summary is produced. Its `Debug` never shows the summary text.
pub enum SummarizeMode {
    /// The configured summarizer.
    Server,
    /// Nothing stored: return the request for the caller's model.
    Prepare,
    /// The caller's own summary, covering 1..=`through`.
    Provided {
        /// The summary text.
        text: String,
        /// The last sequence it covers.
        through: Sequence,
    },
}

impl std::fmt::Debug for SummarizeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SummarizeMode::Provided { text, through } => f
                .debug_struct("Provided")
                .field("text_bytes", &text.len())
                .field("through", through)
                .finish(),
            other => f.write_str(other.name()),
        }
    }
}

impl SummarizeMode {
    /// The mode's name, for logs (never the summary text).
    pub fn name(&self) -> &'static str {
        match self {
            SummarizeMode::Server => "server",
            SummarizeMode::Prepare => "prepare",
            SummarizeMode::Provided { .. } => "provided",
        }
    }
}

/// An LLM request ready to run on the caller's model (bring-your-own-LLM).
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    /// The request messages.
    pub messages: Vec<Message>,
    /// The same as OpenAI chat JSON text.
    pub rendered: String,
    /// The watermark it starts from.
    pub base_through_sequence: Sequence,
    /// The watermark it reaches.
    pub through_sequence: Sequence,
    /// The structured output to ask for (extraction), as an OpenAI `response_format`.
    pub response_format: Option<serde_json::Value>,
    /// The answer's size limit (`max_tokens`).
    pub max_output_tokens: usize,
    /// The conversation's redactions and rewinds when it was prepared: the caller sends them
    /// back with the result.
    pub log_changes: u64,
}

impl PreparedRequest {
    pub(super) fn new(
        messages: Vec<Message>,
        (base, through): (Sequence, Sequence),
        max_output_tokens: usize,
        log_changes: u64,
    ) -> Self {
        Self {
            rendered: render_chat(&messages),
            messages,
            base_through_sequence: base,
            through_sequence: through,
            response_format: None,
            max_output_tokens,
            log_changes,
        }
    }
}

/// What Summarize answers.
#[derive(Debug)]
pub struct SummarizeOutcome {
    /// The current summary (after the change, if any).
    pub summary: Option<Summary>,
    /// Whether a new version was stored.
    pub changed: bool,
    /// PREPARE's request, when there is something to fold in.
    pub prepared: Option<PreparedRequest>,
    /// The memory the response holds until the client has read it.
    pub reservation: Reservation,
}

impl Service {
    /// Advances (or prepares) the rolling summary. SERVER retries when a concurrent summary
    /// moved the watermark, unless the caller pinned it with `expected_through`.
    #[tracing::instrument(name = "summarize", skip_all, fields(%tenant, conversation_id = %request.conversation, mode = request.mode.name()))]
    pub async fn summarize(
        &self,
        tenant: &TenantId,
        request: SummarizeRequest,
        deadline: Option<&Deadline>,
    ) -> Result<SummarizeOutcome, ServiceError> {
        let mut attempt = 1;
        loop {
            // A provided summary is stored as given: nothing is counted for it.
            let counted = match request.mode {
                SummarizeMode::Provided { .. } => None,
                _ => Some(request.tokenizer),
            };
            let (state, reservation) = self
                .read_summary_state(tenant, &request.conversation, counted)
                .await?;
            if let Some(expected) = request.expected_through
                && expected != state.watermark()
            {
                let current = state.watermark();
                return Err(StoreError::SummaryMoved { current }.into());
            }
            match self
                .summarize_once(tenant, &request, &state, reservation, deadline)
                .await
            {
                Err(ServiceError::Store(StoreError::SummaryMoved { .. }))
                    if attempt < SERVER_ATTEMPTS
                        && request.expected_through.is_none()
                        && matches!(request.mode, SummarizeMode::Server) =>
                {
                    tracing::info!(attempt, "summary watermark moved concurrently; recomputing");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The summary state with at most a read's worth of the messages after the watermark,
    /// reserved and counted under `tokenizer` (if any): a summary over a long backlog advances
    /// through it in steps.
    pub(super) async fn read_summary_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        tokenizer: Option<Tokenizer>,
    ) -> Result<(SummaryState, Reservation), ServiceError> {
        let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
        let read = reservation.begin_read()?;
        let mut state = self.store.summary_state(tenant, conversation, read.limit).await?;
        reservation.end_read(read, super::packing::loaded_bytes(&state.messages))?;
        if let Some(tokenizer) = tokenizer {
            let mut late = LateCounts::under(tokenizer);
            late.count(tenant.as_str(), &mut state.messages).await;
            late.store(&*self.store, tenant, conversation).await;
        }
        Ok((state, reservation))
    }

    /// One attempt: the new summary (the caller's, or the server summarizer's over the messages
    /// to fold) stored if the watermark is still `state`'s, or the prepared request.
    async fn summarize_once(
        &self,
        tenant: &TenantId,
        request: &SummarizeRequest,
        state: &SummaryState,
        reservation: Reservation,
        deadline: Option<&Deadline>,
    ) -> Result<SummarizeOutcome, ServiceError> {
        let summary = match &request.mode {
            SummarizeMode::Provided { text, through } => {
                check_provided_through(state, *through)?;
                // Without expected_log_changes, the request was prepared before any removal:
                // the store holds the summary to that under the removals' lock.
                let prepared = request.expected_log_changes.unwrap_or(0);
                check_log_changes(Some(prepared), state.log_changes())?;
                NewSummary {
                    text: text.clone(),
                    through_sequence: *through,
                    summarizer: "provided".to_owned(),
                    redactions: state.redactions,
                    tombstones: state.tombstones_through(*through),
                    rewinds: state.rewinds,
                    prepared_log_changes: Some(prepared),
                }
            }
            SummarizeMode::Prepare | SummarizeMode::Server => {
                // Only the first step of a long backlog was read: all of it is folded, and the
                // recent window is kept by the steps after it.
                let keep = match state.complete {
                    true => request.keep_recent_tokens,
                    false => 0,
                };
                let Some((through, folded)) = messages_to_fold(&state.messages, keep, request.tokenizer)
                else {
                    return unchanged(state, None, reservation);
                };
                if matches!(request.mode, SummarizeMode::Prepare) {
                    let prepared = self.prepare_summary(request, state, folded)?;
                    return unchanged(state, Some(prepared), reservation);
                }
                let (max, tokenizer) = (request.max_summary_tokens, request.tokenizer);
                let caller = Caller {
                    owner: tenant.as_str(),
                    deadline,
                };
                self.server_summary(state, folded, through, max, tokenizer, caller)
                    .await?
            }
        };
        self.store_new_summary(
            tenant,
            &request.conversation,
            state,
            summary,
            reservation,
            deadline,
        )
        .await
    }

    /// The summarization request over the first chunk of `folded` that fits the configured
    /// model context; its `through_sequence` says how far it goes, and the next PREPARE goes on
    /// from there.
    fn prepare_summary(
        &self,
        request: &SummarizeRequest,
        state: &SummaryState,
        folded: &[StoredMessage],
    ) -> Result<PreparedRequest, ServiceError> {
        let max = request.max_summary_tokens;
        let previous = state
            .summary
            .as_ref()
            .map(|s| (s.text.as_str(), s.through_sequence));
        let (messages, len) =
            summary_chunk(previous, folded, max, self.ai.context_tokens).map_err(|source| ModelError {
                role: ModelRole::Summarizer,
                source,
            })?;
        Ok(PreparedRequest::new(
            messages,
            (state.watermark(), folded[len - 1].sequence),
            max,
            state.log_changes(),
        ))
    }

    /// Stores `summary`, made from `state`, if the watermark is still `state`'s and no message
    /// it covers was redacted since (see [`NewSummary::redactions`]).
    async fn store_new_summary(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        state: &SummaryState,
        summary: NewSummary,
        mut reservation: Reservation,
        deadline: Option<&Deadline>,
    ) -> Result<SummarizeOutcome, ServiceError> {
        let (base, through) = (state.watermark(), summary.through_sequence);
        let stored = self
            .store
            .store_summary(tenant, conversation, base, summary, deadline)
            .await?;
        tracing::info!(
            base = base.get(),
            through = through.get(),
            version = stored.version,
            "summary advanced"
        );
        reservation.shrink_to(0);
        Ok(SummarizeOutcome {
            summary: Some(stored),
            changed: true,
            prepared: None,
            reservation,
        })
    }

    /// Runs the configured summarizer over `folded` (the messages up to `through`).
    pub(super) async fn server_summary(
        &self,
        state: &SummaryState,
        folded: &[StoredMessage],
        through: Sequence,
        max_summary_tokens: usize,
        tokenizer: Tokenizer,
        caller: Caller<'_>,
    ) -> Result<NewSummary, ServiceError> {
        let summarizer = &self.ai.summarizer;
        let text = summarizer
            .summarize(
                state.summary.as_ref(),
                folded,
                max_summary_tokens,
                tokenizer,
                caller,
            )
            .await;
        self.metrics.count_model_call(summarizer.name(), text.is_ok());
        let text = text?;
        Ok(NewSummary {
            text,
            through_sequence: through,
            summarizer: summarizer.name().to_owned(),
            redactions: state.redactions,
            tombstones: state.tombstones_through(through),
            rewinds: state.rewinds,
            prepared_log_changes: None,
        })
    }
}

/// A provided summary must move the watermark forward, stay within the log, and end at a
/// boundary (never inside a tool-call group).
fn check_provided_through(state: &SummaryState, through: Sequence) -> Result<(), Violations> {
    let base = state.watermark();
    let read_to = state.messages.last().map_or(base, |m| m.sequence);
    if !state.complete && through > read_to {
        return Err(Violations::single(
            "through_sequence",
            format!(
                "lies past the first {} messages after the watermark, the most one summary step \
                 covers: summarize in steps (PREPARE gives each step's through_sequence)",
                state.messages.len()
            ),
        ));
    }
    if through <= base || through > state.last_sequence || !is_boundary(&state.messages, through) {
        return Err(Violations::single(
            "through_sequence",
            format!(
                "must be after the current watermark ({base}), at most the last sequence ({}), \
                 and not inside a tool-call group",
                state.last_sequence
            ),
        ));
    }
    Ok(())
}

/// The stored summary unchanged, with the prepared request when there is one.
fn unchanged(
    state: &SummaryState,
    prepared: Option<PreparedRequest>,
    mut reservation: Reservation,
) -> Result<SummarizeOutcome, ServiceError> {
    if let Some(prepared) = &prepared {
        // The request as messages and rendered, then encoded.
        reservation.settle_at(3 * prepared.rendered.len())?;
    }
    Ok(SummarizeOutcome {
        summary: state.summary.clone(),
        changed: false,
        prepared,
        reservation,
    })
}

/// Whether a caller's summary or memory, made from a request prepared when the conversation
/// had `expected` redactions and rewinds, may be stored now that it has `current`. `None`
/// (not said) counts as 0: prepared before any removal. Any difference refuses it (ABORTED,
/// LOG_CHANGED, with the count now): text a removal took out must not come back through it.
pub(super) fn check_log_changes(expected: Option<u64>, current: u64) -> Result<(), StoreError> {
    match expected.unwrap_or(0) == current {
        true => Ok(()),
        false => Err(StoreError::LogChanged { current }),
    }
}
