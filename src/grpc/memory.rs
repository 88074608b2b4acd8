//! GetWorkingMemory and UpdateWorkingMemory.

use super::{ApiError, ContextApi, convert};
use crate::{
    domain::{
        TenantId, Violations,
        memory::{WorkingMemory, extraction_request},
        summary::render_chat,
    },
    proto,
    store::{MemoryState, StoreError},
};

/// Refreshes retry this many times when a concurrent update bumped the version.
const REFRESH_ATTEMPTS: usize = 3;

impl ContextApi {
    #[tracing::instrument(name = "GetWorkingMemory", skip_all, fields(%tenant, conversation_id, refresh, prepare))]
    pub(super) async fn get_memory(
        &self,
        tenant: TenantId,
        request: proto::GetWorkingMemoryRequest,
    ) -> Result<proto::GetWorkingMemoryResponse, ApiError> {
        let proto::GetWorkingMemoryRequest {
            conversation_id,
            refresh,
            prepare,
        } = request;
        let mut v = Violations::default();
        let Some(conversation) = convert::conversation_id(conversation_id, "conversation_id", &mut v) else {
            return Err(v.into());
        };
        let span = tracing::Span::current();
        span.record("conversation_id", tracing::field::display(&conversation));
        span.record("refresh", refresh);
        span.record("prepare", prepare);
        for attempt in 1..=REFRESH_ATTEMPTS {
            let MemoryState { memory, messages, .. } = self
                .store
                .memory_state(&tenant, &conversation, refresh || prepare)
                .await?;
            if prepare {
                let prepared = (!messages.is_empty()).then(|| {
                    let request = extraction_request(&memory, &messages);
                    proto::PreparedRequest {
                        rendered: render_chat(&request),
                        messages: request.into_iter().map(convert::plain_message).collect(),
                        base_through_sequence: memory.through_sequence.get(),
                        through_sequence: messages.last().map_or(0, |m| m.sequence.get()),
                    }
                });
                return Ok(proto::GetWorkingMemoryResponse {
                    memory: Some(convert::memory_to_proto(&memory)),
                    prepared,
                });
            }
            if !refresh || messages.is_empty() {
                return Ok(proto::GetWorkingMemoryResponse {
                    memory: Some(convert::memory_to_proto(&memory)),
                    prepared: None,
                });
            }
            let mut refreshed = memory.clone();
            self.ai.extractor.extract(&mut refreshed, &messages).await?;
            match self
                .store
                .store_memory(&tenant, &conversation, memory.version, &refreshed)
                .await
            {
                Ok(stored) => {
                    tracing::info!(
                        version = stored.version,
                        through = stored.through_sequence.get(),
                        "memory refreshed"
                    );
                    return Ok(proto::GetWorkingMemoryResponse {
                        memory: Some(convert::memory_to_proto(&stored)),
                        prepared: None,
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

    #[tracing::instrument(name = "UpdateWorkingMemory", skip_all, fields(%tenant, conversation_id))]
    pub(super) async fn update_memory(
        &self,
        tenant: TenantId,
        request: proto::UpdateWorkingMemoryRequest,
    ) -> Result<proto::UpdateWorkingMemoryResponse, ApiError> {
        let proto::UpdateWorkingMemoryRequest {
            conversation_id,
            memory,
            expected_version,
        } = request;
        let mut v = Violations::default();
        let conversation = convert::conversation_id(conversation_id, "conversation_id", &mut v);
        let update = match memory {
            Some(memory) => convert::memory_from_proto(memory, &self.settings.append, &mut v),
            None => {
                v.add("memory", "required: the facts to merge");
                WorkingMemory::default()
            }
        };
        let Some(conversation) = conversation.filter(|_| v.is_empty()) else {
            return Err(v.into());
        };
        tracing::Span::current().record("conversation_id", tracing::field::display(&conversation));
        let MemoryState {
            memory: current,
            last_sequence: log,
            ..
        } = self.store.memory_state(&tenant, &conversation, false).await?;
        if let Some(expected) = expected_version
            && expected != current.version
        {
            return Err(StoreError::MemoryVersionMismatch {
                current: current.version,
            }
            .into());
        }
        if update.through_sequence > log {
            return Err(Violations::single(
                "memory.through_sequence",
                format!("the conversation's last sequence is {log}"),
            )
            .into());
        }
        let mut merged: WorkingMemory = current.clone();
        merged.merge(update);
        let stored = self
            .store
            .store_memory(&tenant, &conversation, current.version, &merged)
            .await?;
        tracing::info!(version = stored.version, "memory updated");
        Ok(proto::UpdateWorkingMemoryResponse {
            memory: Some(convert::memory_to_proto(&stored)),
        })
    }
}
