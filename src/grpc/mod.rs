//! The gRPC transport: `ctxd.v1.ContextService` handlers, one file per RPC group. Each handler
//! parses the request into domain types ([`convert`]), calls one [`Service`] use case, and
//! converts the answer; failures map to statuses in [`status`] and are logged once, here.

use std::time::Instant;

use tonic::{Request, Response, Status};

use crate::{
    proto::{self, context_service_server::ContextService},
    response_budget::Reservation,
    service::Service,
    telemetry::ErrorChain,
};

pub mod codec;
mod context;
mod conversations;
pub(crate) mod convert;
pub mod deadline;
mod messages;
pub mod metered;
pub mod request_id;
pub mod status;
mod summary;
pub mod tenant;
mod working_memory;

pub use crate::auth::ApiKey;
pub use status::ApiError;
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
/// they hold ([`crate::response_budget`]) until the client has read them.
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

/// A response's [`Reservation`], carried in the response's extensions to [`metered`], which
/// keeps it with the body.
#[derive(Debug, Clone)]
pub(crate) struct HeldMemory {
    _reservation: std::sync::Arc<Reservation>,
}

/// Turns a handler's outcome into the RPC answer, logging failures once, by who caused them:
/// client errors at info, server errors at error with their cause chain. Metrics are counted
/// outside, by [`metered`], which also sees calls that never reach a handler.
fn respond<T>(
    method: &'static str,
    started: Instant,
    result: Result<impl Into<Reply<T>>, ApiError>,
) -> RpcResult<T> {
    let (code, response) = match result {
        Ok(reply) => {
            let Reply { value, reservation } = reply.into();
            let mut response = Response::new(value);
            if let Some(reservation) = reservation {
                response.extensions_mut().insert(HeldMemory {
                    _reservation: std::sync::Arc::new(reservation),
                });
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
fn code_name(code: tonic::Code) -> &'static str {
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

/// Declares each RPC: resolve the tenant (where the RPC has one), run the handler, respond.
macro_rules! rpcs {
    ($($rpc:ident($request:ident) -> $response:ident = $name:literal, $handler:ident, $tenant:tt;)*) => {
        /// The RPC names, as metrics label them.
        const METHODS: &[&str] = &[$($name),*];

        #[tonic::async_trait]
        impl ContextService for ContextApi {
            $(
                async fn $rpc(&self, request: Request<proto::$request>) -> RpcResult<proto::$response> {
                    let started = Instant::now();
                    let result = rpcs!(@call self, request, $handler, $tenant);
                    respond($name, started, result)
                }
            )*
        }
    };
    (@call $self:ident, $request:ident, $handler:ident, tenant) => {{
        let tenant = tenant::tenant_of(&$request)?;
        $self.$handler(tenant, $request.into_inner()).await
    }};
    (@call $self:ident, $request:ident, $handler:ident, none) => {
        $self.$handler($request.into_inner()).await
    };
}

rpcs! {
    append_message(AppendMessageRequest) -> AppendMessageResponse = "AppendMessage", append, tenant;
    build_context(BuildContextRequest) -> BuildContextResponse = "BuildContext", build, tenant;
    summarize(SummarizeRequest) -> SummarizeResponse = "Summarize", advance_summary, tenant;
    get_working_memory(GetWorkingMemoryRequest) -> GetWorkingMemoryResponse = "GetWorkingMemory", get_memory, tenant;
    update_working_memory(UpdateWorkingMemoryRequest) -> UpdateWorkingMemoryResponse = "UpdateWorkingMemory", update_memory, tenant;
    list_messages(ListMessagesRequest) -> ListMessagesResponse = "ListMessages", list, tenant;
    delete_conversation(DeleteConversationRequest) -> DeleteConversationResponse = "DeleteConversation", delete, tenant;
    count_tokens(CountTokensRequest) -> CountTokensResponse = "CountTokens", count, none;
    list_conversations(ListConversationsRequest) -> ListConversationsResponse = "ListConversations", list_conversations, tenant;
    get_conversation(GetConversationRequest) -> GetConversationResponse = "GetConversation", get_conversation, tenant;
    update_conversation(UpdateConversationRequest) -> UpdateConversationResponse = "UpdateConversation", update_conversation, tenant;
    fork_conversation(ForkConversationRequest) -> ForkConversationResponse = "ForkConversation", fork_conversation, tenant;
    redact_message(RedactMessageRequest) -> RedactMessageResponse = "RedactMessage", redact_message, tenant;
}
