//! The gRPC transport: `ctxd.v1.ContextService` handlers, one file per RPC group, on top of the
//! domain and the store.

use std::sync::Arc;

use std::time::Instant;

use tonic::{Request, Response, Status};

use crate::{
    domain::AppendLimits,
    metrics::METRICS,
    proto::{self, context_service_server::ContextService},
    store::Store,
    summarize::{Extractor, Summarizer},
    tokenize::Tokenizer,
};

pub mod codec;
mod context;
pub mod convert;
mod memory;
mod messages;
pub mod request_id;
pub mod status;
mod summary;
pub mod tenant;

pub use status::ApiError;
pub use tenant::{API_KEY_HEADER, ApiKey, TENANT_HEADER, TenantInterceptor};

/// Limits and defaults applied while parsing requests.
#[derive(Debug, Clone, Copy)]
pub struct ApiSettings {
    /// Size limits of AppendMessage (also applied to BuildContext's pending messages).
    pub append: AppendLimits,
    /// Tokenizer used when a request leaves it unspecified.
    pub default_tokenizer: Tokenizer,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            append: AppendLimits::default(),
            default_tokenizer: Tokenizer::O200kBase,
        }
    }
}

/// The summarizer and extractor the service runs, and the default summary size.
#[derive(Debug, Clone)]
pub struct AiSettings {
    /// Runs SUMMARIZE_MODE_SERVER.
    pub summarizer: Summarizer,
    /// Refreshes working memory.
    pub extractor: Extractor,
    /// `max_summary_tokens` when a request leaves it at 0.
    pub max_summary_tokens: usize,
    /// Background summarization, when enabled.
    pub auto_summarize: Option<AutoSummarize>,
}

/// Background summarization: when a conversation's unsummarized history passes `threshold`
/// tokens, one replica folds it in, keeping `keep_recent_tokens` verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoSummarize {
    /// Unsummarized tokens that trigger a summary.
    pub threshold: usize,
    /// Tokens left verbatim.
    pub keep_recent_tokens: usize,
}

impl Default for AiSettings {
    fn default() -> Self {
        Self {
            summarizer: Summarizer::Extractive,
            extractor: Extractor::Rules,
            max_summary_tokens: 1_000,
            auto_summarize: None,
        }
    }
}

/// The `ContextService` implementation: parses requests, calls the store, shapes answers.
#[derive(Debug, Clone)]
pub struct ContextApi {
    store: Arc<dyn Store>,
    settings: ApiSettings,
    ai: AiSettings,
}

impl ContextApi {
    /// A service over `store`.
    pub fn new(store: Arc<dyn Store>, settings: ApiSettings, ai: AiSettings) -> Self {
        Self { store, settings, ai }
    }
}

type RpcResult<T> = Result<Response<T>, Status>;

/// Turns a handler's outcome into the RPC answer, logging failures by who caused them:
/// client errors at info, server errors at error (with their cause, in [`status`]).
fn respond<T>(method: &'static str, started: Instant, result: Result<T, ApiError>) -> RpcResult<T> {
    let (code, response) = match result {
        Ok(value) => (tonic::Code::Ok, Ok(Response::new(value))),
        Err(error) => {
            let status = Status::from(error);
            match status.code() {
                tonic::Code::Internal | tonic::Code::Unavailable | tonic::Code::Unknown => {
                    tracing::error!(code = ?status.code(), "request failed")
                }
                code => tracing::info!(?code, message = status.message(), "request rejected"),
            }
            (status.code(), Err(status))
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    METRICS
        .rpc_duration
        .with_label_values(&[method, code_name(code)])
        .observe(elapsed);
    tracing::info!(
        method,
        code = code_name(code),
        latency_ms = elapsed * 1e3,
        "rpc finished"
    );
    response
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

#[tonic::async_trait]
impl ContextService for ContextApi {
    async fn append_message(
        &self,
        request: Request<proto::AppendMessageRequest>,
    ) -> RpcResult<proto::AppendMessageResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "AppendMessage",
            started,
            self.append(tenant, request.into_inner()).await,
        )
    }

    async fn build_context(
        &self,
        request: Request<proto::BuildContextRequest>,
    ) -> RpcResult<proto::BuildContextResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "BuildContext",
            started,
            self.build(tenant, request.into_inner()).await,
        )
    }

    async fn summarize(
        &self,
        request: Request<proto::SummarizeRequest>,
    ) -> RpcResult<proto::SummarizeResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "Summarize",
            started,
            ContextApi::summarize(self, tenant, request.into_inner()).await,
        )
    }

    async fn get_working_memory(
        &self,
        request: Request<proto::GetWorkingMemoryRequest>,
    ) -> RpcResult<proto::GetWorkingMemoryResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "GetWorkingMemory",
            started,
            self.get_memory(tenant, request.into_inner()).await,
        )
    }

    async fn update_working_memory(
        &self,
        request: Request<proto::UpdateWorkingMemoryRequest>,
    ) -> RpcResult<proto::UpdateWorkingMemoryResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "UpdateWorkingMemory",
            started,
            self.update_memory(tenant, request.into_inner()).await,
        )
    }

    async fn list_messages(
        &self,
        request: Request<proto::ListMessagesRequest>,
    ) -> RpcResult<proto::ListMessagesResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "ListMessages",
            started,
            self.list(tenant, request.into_inner()).await,
        )
    }

    async fn delete_conversation(
        &self,
        request: Request<proto::DeleteConversationRequest>,
    ) -> RpcResult<proto::DeleteConversationResponse> {
        let started = Instant::now();
        let tenant = tenant::tenant_of(&request)?;
        respond(
            "DeleteConversation",
            started,
            self.delete(tenant, request.into_inner()).await,
        )
    }

    async fn count_tokens(
        &self,
        request: Request<proto::CountTokensRequest>,
    ) -> RpcResult<proto::CountTokensResponse> {
        let started = Instant::now();
        respond("CountTokens", started, self.count(request.into_inner()).await)
    }
}
