//! GetWorkingMemory and UpdateWorkingMemory.

use opentelemetry::KeyValue;

use super::{ContextApi, Reply, convert};
use crate::{
    domain::{ConversationId, TenantId, Violations},
    proto,
    runtime::{deadline::Deadline, traces},
    service::{MemoryMode, ServiceError},
};

impl ContextApi {
    pub(super) async fn get_working_memory(
        &self,
        tenant: TenantId,
        request: proto::GetWorkingMemoryRequest,
        deadline: Option<Deadline>,
    ) -> Result<Reply<proto::GetWorkingMemoryResponse>, ServiceError> {
        let proto::GetWorkingMemoryRequest {
            conversation_id,
            refresh,
            prepare,
        } = request;
        let mut v = Violations::default();
        let conversation = convert::conversation_id(conversation_id, "conversation_id", &mut v);
        let conversation = conversation.ok_or(v)?;
        // Preparing stores nothing, so it wins over refreshing.
        let mode = match (prepare, refresh) {
            (true, _) => MemoryMode::Prepare,
            (false, true) => MemoryMode::Refresh,
            (false, false) => MemoryMode::Read,
        };
        let outcome = self
            .service
            .get_working_memory(&tenant, &conversation, mode, deadline.as_ref())
            .await?;
        let memory = convert::memory_to_proto(&outcome.memory);
        watermarks(&conversation, &memory);
        let response = proto::GetWorkingMemoryResponse {
            memory: Some(memory),
            prepared: outcome.prepared.map(convert::prepared_request),
        };
        Ok(Reply::holding(response, outcome.reservation))
    }

    pub(super) async fn update_working_memory(
        &self,
        tenant: TenantId,
        request: proto::UpdateWorkingMemoryRequest,
        deadline: Option<Deadline>,
    ) -> Result<proto::UpdateWorkingMemoryResponse, ServiceError> {
        let proto::UpdateWorkingMemoryRequest {
            conversation_id,
            memory,
            expected_version,
            expected_log_changes,
        } = request;
        let mut v = Violations::default();
        let conversation = convert::conversation_id(conversation_id, "conversation_id", &mut v);
        let update = match memory {
            Some(memory) => Some(convert::memory_from_proto(
                memory,
                &self.service.limits().append,
                &mut v,
            )),
            None => {
                v.add("memory", "required: the facts to merge");
                None
            }
        };
        let (Some(conversation), Some(update)) = (conversation, update) else {
            return Err(v.into());
        };
        v.into_result(())?;
        let stored = self
            .service
            .update_working_memory(
                &tenant,
                &conversation,
                update,
                (expected_version, expected_log_changes),
                deadline.as_ref(),
            )
            .await?;
        let memory = convert::memory_to_proto(&stored);
        watermarks(&conversation, &memory);
        Ok(proto::UpdateWorkingMemoryResponse { memory: Some(memory) })
    }
}

/// The memory's watermark and version on the call's span.
fn watermarks(conversation: &ConversationId, memory: &proto::WorkingMemory) {
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    traces::attributes(&tracing::Span::current(), || {
        [
            KeyValue::new("gen_ai.conversation.id", conversation.as_str().to_owned()),
            KeyValue::new("ctxd.memory.through_sequence", as_i64(memory.through_sequence)),
            KeyValue::new("ctxd.memory.version", as_i64(memory.version)),
        ]
    });
}
