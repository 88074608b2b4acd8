//! Working memory: read, refresh with the configured extractor, prepare the extraction request
//! for the caller's model, and merge the caller's update.

use super::{PreparedRequest, Service, ServiceError};
use crate::{
    domain::{
        ConversationId, TenantId, Violations, conversation, message::StoredMessage,
        working_memory::WorkingMemory,
    },
    models::summarize::{
        Caller, ModelError, ModelRole, extraction_chunk, prompts::extraction_response_format,
    },
    runtime::deadline::Deadline,
    runtime::response_budget::Reservation,
    store::{MemoryBase, MemoryState, StoreError},
};

/// Refreshes retry this many times when a concurrent update bumped the version.
const REFRESH_ATTEMPTS: usize = 3;

/// How many times a refresh is stored again after redactions of messages it did not read.
const REBASES: usize = 8;

/// What a refresh was extracted from.
#[derive(Debug, Clone, Copy)]
struct Read<'a> {
    memory: &'a WorkingMemory,
    base: MemoryBase,
    messages: &'a [StoredMessage],
}

/// What GetWorkingMemory answers.
#[derive(Debug)]
pub struct MemoryOutcome {
    /// The current memory (version 0 when none was stored).
    pub memory: WorkingMemory,
    /// With `prepare`: the extraction request over the messages after the memory's
    /// watermark, when there are any (at most a read's worth of them: the request's
    /// `through_sequence` says how far it goes).
    pub prepared: Option<PreparedRequest>,
    /// The memory the response holds until the client has read it.
    pub reservation: Reservation,
}

impl MemoryOutcome {
    /// The memory alone, nothing prepared.
    fn plain(memory: WorkingMemory, reservation: Reservation) -> Self {
        Self {
            memory,
            prepared: None,
            reservation,
        }
    }
}

/// What GetWorkingMemory does besides reading the stored memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryMode {
    /// The stored memory as it is.
    Read,
    /// The configured extractor folds in the messages after the watermark first.
    Refresh,
    /// Nothing is stored: the extraction request for the caller's model comes back with the
    /// memory.
    Prepare,
}

impl MemoryMode {
    fn label(self) -> &'static str {
        match self {
            MemoryMode::Read => "read",
            MemoryMode::Refresh => "refresh",
            MemoryMode::Prepare => "prepare",
        }
    }
}

impl Service {
    /// The working memory, refreshed or with the extraction request prepared as `mode` says.
    /// A refresh that lost a race with a concurrent update starts over, up to
    /// [`REFRESH_ATTEMPTS`] times.
    #[tracing::instrument(name = "get_working_memory", skip_all, fields(%tenant, conversation_id = %conversation, mode = mode.label()))]
    pub async fn get_working_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        mode: MemoryMode,
        deadline: Option<&Deadline>,
    ) -> Result<MemoryOutcome, ServiceError> {
        let mut attempt = 1;
        loop {
            // The messages after the watermark come at most a read's worth at a time: a refresh
            // or a prepared request over a long backlog advances through it in steps.
            let (state, reservation) = self
                .read_memory_state(tenant, conversation, mode != MemoryMode::Read)
                .await?;
            let base = state.base();
            let log_changes = state.log_changes();
            let MemoryState { memory, messages, .. } = state;
            match mode {
                MemoryMode::Prepare => {
                    return self.prepare_extraction(memory, &messages, log_changes, reservation);
                }
                MemoryMode::Read => return Ok(MemoryOutcome::plain(memory, reservation)),
                MemoryMode::Refresh if messages.is_empty() => {
                    return Ok(MemoryOutcome::plain(memory, reservation));
                }
                MemoryMode::Refresh => {}
            }
            match self
                .refresh(tenant, conversation, &memory, base, messages, deadline)
                .await
            {
                Ok(stored) => return Ok(MemoryOutcome::plain(stored, reservation)),
                Err(ServiceError::Store(StoreError::MemoryVersionMismatch { .. }))
                    if attempt < REFRESH_ATTEMPTS =>
                {
                    tracing::info!(attempt, "working memory changed concurrently; refreshing again");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The memory state, with at most a read's worth of the messages after its watermark when
    /// `with_messages`, reserved.
    async fn read_memory_state(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        with_messages: bool,
    ) -> Result<(MemoryState, Reservation), ServiceError> {
        let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
        let read = reservation.begin_read()?;
        let limit = with_messages.then_some(read.limit);
        let state = self.store.memory_state(tenant, conversation, limit).await?;
        reservation.end_read(read, super::packing::loaded_bytes(&state.messages))?;
        Ok((state, reservation))
    }

    /// The memory with the extraction request over the first chunk of `messages` that fits
    /// the configured model context, when there are any.
    fn prepare_extraction(
        &self,
        memory: WorkingMemory,
        messages: &[StoredMessage],
        log_changes: u64,
        mut reservation: Reservation,
    ) -> Result<MemoryOutcome, ServiceError> {
        if messages.is_empty() {
            return Ok(MemoryOutcome::plain(memory, reservation));
        }
        let (request, len, max_tokens) = extraction_chunk(&memory, messages, self.ai.context_tokens)
            .map_err(|source| ModelError {
                role: ModelRole::Extractor,
                source,
            })?;
        let last = messages[len - 1].sequence;
        let mut prepared =
            PreparedRequest::new(request, (memory.through_sequence, last), max_tokens, log_changes);
        prepared.response_format = Some(extraction_response_format());
        // The request as messages and rendered, then encoded.
        reservation.settle_at(3 * prepared.rendered.len())?;
        Ok(MemoryOutcome {
            memory,
            prepared: Some(prepared),
            reservation,
        })
    }

    /// Runs the configured extractor over `messages` and stores the result as the version
    /// after `memory`'s, if nothing changed or was redacted since `base` was read.
    async fn refresh(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        memory: &WorkingMemory,
        base: MemoryBase,
        messages: Vec<StoredMessage>,
        deadline: Option<&Deadline>,
    ) -> Result<WorkingMemory, ServiceError> {
        let mut refreshed = memory.clone();
        let messages: std::sync::Arc<[_]> = messages.into();
        let extractor = &self.ai.extractor;
        let extracted = extractor
            .extract(
                &mut refreshed,
                &messages,
                self.limits.append.max_content_bytes,
                Caller {
                    owner: tenant.as_str(),
                    deadline,
                },
            )
            .await;
        self.metrics.count_model_call(extractor.name(), extracted.is_ok());
        extracted?;
        let dropped = refreshed.fit_dropping_oldest();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "working memory full: the oldest extracted items were dropped"
            );
        }
        let read = Read {
            memory,
            base,
            messages: &messages,
        };
        let stored = self
            .store_memory_rebased(tenant, conversation, read, &refreshed, deadline)
            .await?;
        tracing::info!(
            version = stored.version,
            through = stored.through_sequence.get(),
            "memory refreshed"
        );
        Ok(stored)
    }

    /// Stores `refreshed`, extracted from `read`; when only a redaction of a message it did not
    /// read refused it (the memory is the same but for its version, and every message it was
    /// extracted from is unchanged), stores it again on the fresh version, up to [`REBASES`]
    /// times, so that a storm of redactions elsewhere does not starve refreshes.
    async fn store_memory_rebased(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        read: Read<'_>,
        refreshed: &WorkingMemory,
        deadline: Option<&Deadline>,
    ) -> Result<WorkingMemory, ServiceError> {
        let mut base = read.base;
        let mut rebases = 0;
        loop {
            let attempt = self
                .store
                .store_memory(tenant, conversation, base, refreshed, deadline)
                .await;
            match attempt {
                Err(StoreError::MemoryVersionMismatch { .. }) if rebases < REBASES => {
                    let (fresh, _reservation) = self.read_memory_state(tenant, conversation, true).await?;
                    let redacted_elsewhere = conversation::same_memory(&fresh.memory, read.memory)
                        && fresh.redactions != base.redactions
                        && conversation::unchanged_since(read.messages, &fresh.messages);
                    if !redacted_elsewhere {
                        let current = fresh.memory.version;
                        return Err(StoreError::MemoryVersionMismatch { current }.into());
                    }
                    base = fresh.base();
                    rebases += 1;
                }
                other => return Ok(other?),
            }
        }
    }

    /// Merges the caller's extracted facts into the stored memory, if its version is still
    /// `expected_version` (when given).
    #[tracing::instrument(name = "update_working_memory", skip_all, fields(%tenant, conversation_id = %conversation))]
    pub async fn update_working_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        update: WorkingMemory,
        (expected_version, expected_log_changes): (Option<u64>, Option<u64>),
        deadline: Option<&Deadline>,
    ) -> Result<WorkingMemory, ServiceError> {
        let state = self.store.memory_state(tenant, conversation, None).await?;
        let base = state.base();
        // Items from an extraction that read messages removed since are refused: their text
        // would come back through the memory (see `check_log_changes`).
        super::summary::check_log_changes(expected_log_changes, state.log_changes())?;
        let MemoryState {
            memory: current,
            last_sequence: log,
            ..
        } = state;
        if let Some(expected) = expected_version
            && expected != current.version
        {
            let current = current.version;
            return Err(StoreError::MemoryVersionMismatch { current }.into());
        }
        if update.through_sequence > log {
            let problem = format!("the conversation's last sequence is {log}");
            return Err(Violations::single("memory.through_sequence", problem).into());
        }
        let mut merged = current.clone();
        merged.merge(update);
        merged.fit().map_err(|e| Violations::single("memory", e))?;
        let stored = self
            .store
            .store_memory(tenant, conversation, base, &merged, deadline)
            .await?;
        tracing::info!(version = stored.version, "memory updated");
        Ok(stored)
    }
}
