//! Working memory: read, refresh with the configured extractor, prepare the extraction request
//! for the caller's model, and merge the caller's update.

use super::{PreparedRequest, Service, ServiceError};
use crate::{
    domain::{ConversationId, TenantId, Violations, working_memory::WorkingMemory},
    response_budget::Reservation,
    store::{MemoryState, StoreError},
    summarize::{ModelError, ModelRole, extraction_chunk, prompts::extraction_response_format},
};

/// Refreshes retry this many times when a concurrent update bumped the version.
const REFRESH_ATTEMPTS: usize = 3;

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

impl Service {
    /// The working memory; with `refresh`, the configured extractor folds in the messages
    /// after its watermark first; with `prepare`, nothing is stored and the extraction request
    /// for the caller's model comes back instead.
    #[tracing::instrument(name = "working_memory", skip_all, fields(%tenant, conversation_id = %conversation, refresh, prepare))]
    pub async fn working_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        refresh: bool,
        prepare: bool,
    ) -> Result<MemoryOutcome, ServiceError> {
        for attempt in 1..=REFRESH_ATTEMPTS {
            // The messages after the watermark come at most a read's worth at a time: a refresh
            // or a prepared request over a long backlog advances through it in steps.
            let mut reservation = self.response_budget.reserve();
            let read = reservation.begin_read()?;
            let MemoryState { memory, messages, .. } = self
                .store
                .memory_state(tenant, conversation, refresh || prepare, read.limit)
                .await?;
            reservation.end_read(read, super::context::loaded_bytes(&messages))?;
            if prepare {
                let prepared = match messages.is_empty() {
                    true => None,
                    // The first chunk that fits the configured model context.
                    false => {
                        let (request, len, max_tokens) =
                            extraction_chunk(&memory, &messages, self.ai.context_tokens).map_err(
                                |source| ModelError {
                                    role: ModelRole::Extractor,
                                    source,
                                },
                            )?;
                        let last = messages[len - 1].sequence;
                        let mut prepared =
                            PreparedRequest::new(request, memory.through_sequence, last, max_tokens);
                        prepared.response_format = Some(extraction_response_format());
                        Some(prepared)
                    }
                };
                if let Some(prepared) = &prepared {
                    // The request as messages and rendered, then encoded.
                    reservation.settle_at(3 * prepared.rendered.len())?;
                }
                return Ok(MemoryOutcome {
                    memory,
                    prepared,
                    reservation,
                });
            }
            if !refresh || messages.is_empty() {
                return Ok(MemoryOutcome {
                    memory,
                    prepared: None,
                    reservation,
                });
            }
            let mut refreshed = memory.clone();
            let messages: std::sync::Arc<[_]> = messages.into();
            self.ai
                .extractor
                .extract(&mut refreshed, &messages, self.limits.append.max_content_bytes)
                .await?;
            let dropped = refreshed.fit_dropping_oldest();
            if dropped > 0 {
                tracing::warn!(
                    dropped,
                    "working memory full: the oldest extracted items were dropped"
                );
            }
            match self
                .store
                .store_memory(tenant, conversation, memory.version, &refreshed)
                .await
            {
                Ok(stored) => {
                    tracing::info!(
                        version = stored.version,
                        through = stored.through_sequence.get(),
                        "memory refreshed"
                    );
                    return Ok(MemoryOutcome {
                        memory: stored,
                        prepared: None,
                        reservation,
                    });
                }
                Err(StoreError::MemoryVersionMismatch { .. }) if attempt < REFRESH_ATTEMPTS => {
                    tracing::info!(attempt, "working memory changed concurrently; refreshing again");
                }
                Err(e) => return Err(e.into()),
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Merges the caller's extracted facts into the stored memory, if its version is still
    /// `expected_version` (when given).
    #[tracing::instrument(name = "update_working_memory", skip_all, fields(%tenant, conversation_id = %conversation))]
    pub async fn update_working_memory(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        update: WorkingMemory,
        expected_version: Option<u64>,
    ) -> Result<WorkingMemory, ServiceError> {
        let MemoryState {
            memory: current,
            last_sequence: log,
            ..
        } = self.store.memory_state(tenant, conversation, false, 0).await?;
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
            .store_memory(tenant, conversation, current.version, &merged)
            .await?;
        tracing::info!(version = stored.version, "memory updated");
        Ok(stored)
    }
}
