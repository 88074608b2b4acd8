//! Summarize.

use opentelemetry::KeyValue;

use super::{ContextApi, Reply, convert};
use crate::{
    domain::TenantId,
    proto,
    runtime::{deadline::Deadline, traces},
    service::ServiceError,
};

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
        let span = tracing::Span::current();
        if !span.is_disabled() {
            let conversation = request.conversation.as_str().to_owned();
            traces::attribute(&span, "gen_ai.conversation.id", conversation);
        }
        let outcome = self
            .service
            .summarize(&tenant, request, deadline.as_ref())
            .await?;
        if let Some(summary) = &outcome.summary {
            let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            traces::attributes(&span, || {
                [
                    KeyValue::new(
                        "ctxd.summary.through_sequence",
                        as_i64(summary.through_sequence.get()),
                    ),
                    KeyValue::new("ctxd.summary.version", as_i64(summary.version)),
                    KeyValue::new("ctxd.summary.changed", outcome.changed),
                ]
            });
        }
        let response = proto::SummarizeResponse {
            summary: outcome.summary.map(|s| convert::summary(&s, tokenizer)),
            changed: outcome.changed,
            prepared: outcome.prepared.map(convert::prepared_request),
        };
        Ok(Reply::holding(response, outcome.reservation))
    }
}
