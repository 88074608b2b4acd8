//! BuildContext and CountTokens.

use super::{ContextApi, Reply, convert};
use crate::{
    domain::{TenantId, Violations},
    proto,
    runtime::deadline::Deadline,
    service::ServiceError,
};

impl ContextApi {
    pub(super) async fn build_context(
        &self,
        tenant: TenantId,
        request: proto::BuildContextRequest,
        deadline: Option<Deadline>,
    ) -> Result<Reply<proto::BuildContextResponse>, ServiceError> {
        let with_messages = !request.omit_messages;
        let request = convert::context_request(request, self.service.limits())?;
        let outcome = self
            .service
            .build_context(&tenant, request, deadline.as_ref())
            .await?;
        let response = convert::context_response(outcome.pack, outcome.rendered, with_messages);
        Ok(Reply::holding(response, outcome.reservation))
    }

    pub(super) async fn count_tokens(
        &self,
        request: proto::CountTokensRequest,
    ) -> Result<proto::CountTokensResponse, ServiceError> {
        let proto::CountTokensRequest { text, tokenizer } = request;
        let mut v = Violations::default();
        let default = self.service.limits().default_tokenizer;
        let tokenizer = convert::tokenizer(tokenizer, "tokenizer", default, &mut v);
        v.into_result(())?;
        let tokens = self.service.count_tokens(text, tokenizer).await?;
        Ok(proto::CountTokensResponse {
            tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
            tokenizer: convert::tokenizer_to_proto(tokenizer) as i32,
        })
    }
}
