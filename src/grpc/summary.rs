//! Summarize.

use super::{ContextApi, Reply, convert};
use crate::{domain::TenantId, proto, runtime::deadline::Deadline, service::ServiceError};

impl ContextApi {
    pub(super) async fn summarize(
        &self,
        tenant: TenantId,
        request: proto::SummarizeRequest,
        deadline: Option<Deadline>,
    ) -> Result<Reply<proto::SummarizeResponse>, ServiceError> {
        let limits = self.service.limits();
        let request = convert::summarize_request(request, limits, self.service.default_summary_tokens())?;
        let tokenizer = request.tokenizer;
        let outcome = self
            .service
            .summarize(&tenant, request, deadline.as_ref())
            .await?;
        let response = proto::SummarizeResponse {
            summary: outcome.summary.map(|s| convert::summary(&s, tokenizer)),
            changed: outcome.changed,
            prepared: outcome.prepared.map(convert::prepared_request),
        };
        Ok(Reply::holding(response, outcome.reservation))
    }
}
