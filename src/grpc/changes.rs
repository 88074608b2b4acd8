//! WatchChanges: the service's watch as a server stream.

use std::pin::Pin;

use futures_util::{Stream, StreamExt as _};
use tonic::Status;

use super::{ContextApi, convert};
use crate::{domain::TenantId, proto, service::ServiceError};

/// The stream WatchChanges answers with.
pub(super) type WatchStream = Pin<Box<dyn Stream<Item = Result<proto::WatchChangesResponse, Status>> + Send>>;

impl ContextApi {
    pub(super) async fn watch_changes(
        &self,
        tenant: TenantId,
        request: proto::WatchChangesRequest,
    ) -> Result<WatchStream, ServiceError> {
        let request = convert::watch_request(request)?;
        let mut watch = self.service.watch_changes(&tenant, request).await?;
        let stream = futures_util::stream::poll_fn(move |cx| watch.events.poll_recv(cx)).map(|event| {
            event.map(convert::watch_response).map_err(|error| {
                let chain = crate::runtime::telemetry::ErrorChain(&error).to_string();
                tracing::warn!(error = chain, "change stream ended");
                Status::from(error)
            })
        });
        Ok(Box::pin(stream))
    }
}
