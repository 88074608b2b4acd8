//! The gRPC transport: `ctxd.v1.ContextService` handlers, one file per RPC group, on top of the
//! domain and the store.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::{
    domain::AppendLimits,
    proto::{self, context_service_server::ContextService},
    store::Store,
    summarize::{Extractor, Summarizer},
    tokenize::Tokenizer,
};

mod context;
pub mod convert;
mod memory;
mod messages;
pub mod status;
mod summary;
pub mod tenant;

pub use status::ApiError;
pub use tenant::{TENANT_HEADER, TenantInterceptor};

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
fn respond<T>(result: Result<T, ApiError>) -> RpcResult<T> {
    match result {
        Ok(value) => Ok(Response::new(value)),
        Err(error) => {
            let status = Status::from(error);
            match status.code() {
                tonic::Code::Internal | tonic::Code::Unavailable | tonic::Code::Unknown => {
                    tracing::error!(code = ?status.code(), "request failed")
                }
                code => tracing::info!(?code, message = status.message(), "request rejected"),
            }
            Err(status)
        }
    }
}

#[tonic::async_trait]
impl ContextService for ContextApi {
    async fn append_message(
        &self,
        request: Request<proto::AppendMessageRequest>,
    ) -> RpcResult<proto::AppendMessageResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(self.append(tenant, request.into_inner()).await)
    }

    async fn build_context(
        &self,
        request: Request<proto::BuildContextRequest>,
    ) -> RpcResult<proto::BuildContextResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(self.build(tenant, request.into_inner()).await)
    }

    async fn summarize(
        &self,
        request: Request<proto::SummarizeRequest>,
    ) -> RpcResult<proto::SummarizeResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(ContextApi::summarize(self, tenant, request.into_inner()).await)
    }

    async fn get_working_memory(
        &self,
        request: Request<proto::GetWorkingMemoryRequest>,
    ) -> RpcResult<proto::GetWorkingMemoryResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(self.get_memory(tenant, request.into_inner()).await)
    }

    async fn update_working_memory(
        &self,
        request: Request<proto::UpdateWorkingMemoryRequest>,
    ) -> RpcResult<proto::UpdateWorkingMemoryResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(self.update_memory(tenant, request.into_inner()).await)
    }

    async fn list_messages(
        &self,
        request: Request<proto::ListMessagesRequest>,
    ) -> RpcResult<proto::ListMessagesResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(self.list(tenant, request.into_inner()).await)
    }

    async fn delete_conversation(
        &self,
        request: Request<proto::DeleteConversationRequest>,
    ) -> RpcResult<proto::DeleteConversationResponse> {
        let tenant = tenant::tenant_of(&request)?;
        respond(self.delete(tenant, request.into_inner()).await)
    }

    async fn count_tokens(
        &self,
        request: Request<proto::CountTokensRequest>,
    ) -> RpcResult<proto::CountTokensResponse> {
        respond(self.count(request.into_inner()).await)
    }
}
