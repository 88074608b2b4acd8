//! The gRPC transport: `ctxd.v1.ContextService` handlers, one file per RPC group. Each handler
//! parses the request into domain types ([`convert`]), calls one [`Service`] use case, and
//! converts the answer; failures map to statuses in [`status`] and are logged once, here.

use std::time::Instant;

use tonic::{Request, Response, Status};

use crate::{
    proto::{self, context_service_server::ContextService},
    runtime::response_budget::Reservation,
    runtime::telemetry::ErrorChain,
    service::{Service, ServiceError},
};

mod build_context;
mod changes;
pub mod codec;
pub mod connect;
mod conversations;
pub(crate) mod convert;
pub mod deadline_layer;
mod descriptors;
mod entries;
mod messages;
pub mod metered;
pub mod request_body;
pub mod request_id;
pub mod status;
mod summary;
pub mod tenant;
pub(crate) mod unread;
mod working_memory;

pub use crate::config::ApiKey;
pub use tenant::{API_KEY_HEADER, TENANT_HEADER, TenantInterceptor};

/// The `ContextService` implementation over the use cases.
#[derive(Debug, Clone)]
pub struct ContextApi {
    service: Service,
}

impl ContextApi {
    /// The gRPC face of `service`.
    pub fn new(service: Service) -> Self {
        Self { service }
    }
}

type RpcResult<T> = Result<Response<T>, Status>;

/// A handler's answer: the response message and, for responses that load messages, the memory
/// they hold ([`crate::runtime::response_budget`]) until the client has read them.
#[derive(Debug)]
pub(crate) struct Reply<T> {
    value: T,
    reservation: Option<Reservation>,
}

impl<T> Reply<T> {
    /// `value`, holding `reservation` until its body has been sent.
    pub(crate) fn holding(value: T, reservation: Reservation) -> Self {
        Self {
            value,
            reservation: Some(reservation),
        }
    }
}

impl<T> From<T> for Reply<T> {
    fn from(value: T) -> Self {
        Self {
            value,
            reservation: None,
        }
    }
}

/// What an append's "rpc finished" line says beyond the call: the one line an append logs
/// (a second line cost every append a tenth of ctxd's CPU, issue 62).
#[derive(Debug, Default)]
struct Appended {
    conversation_id: Option<String>,
    first_sequence: Option<u64>,
    last_sequence: Option<u64>,
    replayed: Option<bool>,
}

/// Turns a handler's outcome into the RPC answer, logging failures once, by who caused them:
/// client errors at info, server errors at error with their cause chain. Metrics are counted
/// outside, by [`metered`], which also sees calls that never reach a handler.
fn respond<T>(
    method: &'static str,
    started: Instant,
    result: Result<impl Into<Reply<T>>, ServiceError>,
) -> RpcResult<T> {
    respond_logging(method, started, result, Appended::default())
}

/// [`respond`], with what an append adds to its one log line.
fn respond_logging<T>(
    method: &'static str,
    started: Instant,
    result: Result<impl Into<Reply<T>>, ServiceError>,
    appended: Appended,
) -> RpcResult<T> {
    let (code, response) = match result {
        Ok(reply) => {
            let Reply { value, reservation } = reply.into();
            let mut response = Response::new(value);
            if let Some(reservation) = reservation {
                // In the response's extensions, [`metered`] keeps it with the body.
                response.extensions_mut().insert(std::sync::Arc::new(reservation));
            }
            (tonic::Code::Ok, Ok(response))
        }
        Err(error) => {
            let chain = ErrorChain(&error).to_string();
            let status = Status::from(error);
            match status.code() {
                tonic::Code::Internal | tonic::Code::Unavailable | tonic::Code::Unknown => {
                    tracing::error!(code = ?status.code(), error = %chain, "request failed")
                }
                // The status message may echo caller values (ids, names): only the fields that
                // were rejected are logged.
                code => tracing::info!(
                    code = code_name(code),
                    fields = %rejected_fields(&status),
                    "request rejected"
                ),
            }
            (status.code(), Err(status))
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    tracing::info!(
        method,
        code = code_name(code),
        latency_ms = elapsed * 1e3,
        conversation_id = appended.conversation_id,
        first_sequence = appended.first_sequence,
        last_sequence = appended.last_sequence,
        replayed = appended.replayed,
        "rpc finished"
    );
    response
}

/// The field paths of an INVALID_ARGUMENT's violations (clipped, as the status carries them),
/// or nothing for other codes.
fn rejected_fields(status: &Status) -> String {
    use tonic_types::StatusExt;
    status
        .get_details_bad_request()
        .map(|bad| {
            bad.field_violations
                .iter()
                .map(|v| v.field.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The gRPC code's canonical name, as metrics label it.
pub(crate) fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The RPC names, as metrics label them.
pub(crate) const METHODS: &[&str] = &[
    "AppendMessage",
    "BuildContext",
    "Summarize",
    "GetWorkingMemory",
    "UpdateWorkingMemory",
    "ListMessages",
    "DeleteConversation",
    "CountTokens",
    "ListConversations",
    "GetConversation",
    "UpdateConversation",
    "ForkConversation",
    "RedactMessage",
    "RewindConversation",
    "SearchMessages",
    "WatchChanges",
];

/// Each RPC resolves the caller's tenant (every RPC but CountTokens has one), runs its handler
/// (`src/grpc/<group>.rs`, named after the RPC) with the call's [`deadline`] when it writes or
/// calls a model, and answers through [`respond`].
#[tonic::async_trait]
impl ContextService for ContextApi {
    type WatchChangesStream = changes::WatchStream;

    async fn watch_changes(
        &self,
        request: Request<proto::WatchChangesRequest>,
    ) -> RpcResult<Self::WatchChangesStream> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let result = self.watch_changes(tenant, request.into_inner()).await;
        respond("WatchChanges", started, result)
    }

    async fn append_message(
        &self,
        request: Request<proto::AppendMessageRequest>,
    ) -> RpcResult<proto::AppendMessageResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let request = request.into_inner();
        let mut appended = Appended {
            conversation_id: Some(request.conversation_id.clone()),
            ..Appended::default()
        };
        let result = self.append_message(tenant, request, deadline).await;
        if let Ok(response) = &result {
            appended.first_sequence = Some(response.first_sequence);
            appended.last_sequence = Some(response.last_sequence);
            appended.replayed = Some(response.replayed);
        }
        respond_logging("AppendMessage", started, result, appended)
    }

    async fn build_context(
        &self,
        request: Request<proto::BuildContextRequest>,
    ) -> RpcResult<proto::BuildContextResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self.build_context(tenant, request.into_inner(), deadline).await;
        respond("BuildContext", started, result)
    }

    async fn summarize(
        &self,
        request: Request<proto::SummarizeRequest>,
    ) -> RpcResult<proto::SummarizeResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self.summarize(tenant, request.into_inner(), deadline).await;
        respond("Summarize", started, result)
    }

    async fn get_working_memory(
        &self,
        request: Request<proto::GetWorkingMemoryRequest>,
    ) -> RpcResult<proto::GetWorkingMemoryResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self
            .get_working_memory(tenant, request.into_inner(), deadline)
            .await;
        respond("GetWorkingMemory", started, result)
    }

    async fn update_working_memory(
        &self,
        request: Request<proto::UpdateWorkingMemoryRequest>,
    ) -> RpcResult<proto::UpdateWorkingMemoryResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self
            .update_working_memory(tenant, request.into_inner(), deadline)
            .await;
        respond("UpdateWorkingMemory", started, result)
    }

    async fn list_messages(
        &self,
        request: Request<proto::ListMessagesRequest>,
    ) -> RpcResult<proto::ListMessagesResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let result = self.list_messages(tenant, request.into_inner()).await;
        respond("ListMessages", started, result)
    }

    async fn delete_conversation(
        &self,
        request: Request<proto::DeleteConversationRequest>,
    ) -> RpcResult<proto::DeleteConversationResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self
            .delete_conversation(tenant, request.into_inner(), deadline)
            .await;
        respond("DeleteConversation", started, result)
    }

    async fn count_tokens(
        &self,
        request: Request<proto::CountTokensRequest>,
    ) -> RpcResult<proto::CountTokensResponse> {
        let started = Instant::now();
        let result = self.count_tokens(request.into_inner()).await;
        respond("CountTokens", started, result)
    }

    async fn list_conversations(
        &self,
        request: Request<proto::ListConversationsRequest>,
    ) -> RpcResult<proto::ListConversationsResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let result = self.list_conversations(tenant, request.into_inner()).await;
        respond("ListConversations", started, result)
    }

    async fn get_conversation(
        &self,
        request: Request<proto::GetConversationRequest>,
    ) -> RpcResult<proto::GetConversationResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let result = self.get_conversation(tenant, request.into_inner()).await;
        respond("GetConversation", started, result)
    }

    async fn update_conversation(
        &self,
        request: Request<proto::UpdateConversationRequest>,
    ) -> RpcResult<proto::UpdateConversationResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self
            .update_conversation(tenant, request.into_inner(), deadline)
            .await;
        respond("UpdateConversation", started, result)
    }

    async fn fork_conversation(
        &self,
        request: Request<proto::ForkConversationRequest>,
    ) -> RpcResult<proto::ForkConversationResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self
            .fork_conversation(tenant, request.into_inner(), deadline)
            .await;
        respond("ForkConversation", started, result)
    }

    async fn redact_message(
        &self,
        request: Request<proto::RedactMessageRequest>,
    ) -> RpcResult<proto::RedactMessageResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self.redact_message(tenant, request.into_inner(), deadline).await;
        respond("RedactMessage", started, result)
    }

    async fn rewind_conversation(
        &self,
        request: Request<proto::RewindConversationRequest>,
    ) -> RpcResult<proto::RewindConversationResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self
            .rewind_conversation(tenant, request.into_inner(), deadline)
            .await;
        respond("RewindConversation", started, result)
    }

    async fn search_messages(
        &self,
        request: Request<proto::SearchMessagesRequest>,
    ) -> RpcResult<proto::SearchMessagesResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        let deadline = deadline_layer::of(&request);
        let result = self.search_messages(tenant, request.into_inner(), deadline).await;
        respond("SearchMessages", started, result)
    }
}
