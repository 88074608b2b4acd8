//! GetWorkingMemory and UpdateWorkingMemory.

use super::{ContextApi, Reply, convert};
use crate::{
    domain::{TenantId, Violations},
    proto,
    runtime::deadline::Deadline,
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
        let response = proto::GetWorkingMemoryResponse {
            memory: Some(convert::memory_to_proto(&outcome.memory)),
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
        Ok(proto::UpdateWorkingMemoryResponse {
            memory: Some(convert::memory_to_proto(&stored)),
        })
    }
}
