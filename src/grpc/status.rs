//! The transport's error type and its one mapping to gRPC statuses (DESIGN.md section 3).

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::{domain::Violations, store::StoreError, summarize::OpenAiError};

/// Error domain reported in google.rpc.ErrorInfo details.
const ERROR_DOMAIN: &str = "ctxd.v1";

/// Why an RPC failed, before it becomes a gRPC status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed; nothing was stored.
    #[error("invalid request: {violations}")]
    InvalidArgument {
        /// What is wrong, by field.
        violations: Violations,
    },
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A bug: a task failed or an invariant broke. The message is logged, never returned.
    #[error("internal error: {message}")]
    Internal {
        /// What went wrong, for logs.
        message: String,
    },
    /// A dependency (the summarizer endpoint) failed; the stored state is unchanged.
    #[error("unavailable: {message}")]
    Unavailable {
        /// What failed, for the caller and logs.
        message: String,
    },
}

impl From<Violations> for ApiError {
    fn from(violations: Violations) -> Self {
        ApiError::InvalidArgument { violations }
    }
}

impl From<OpenAiError> for ApiError {
    fn from(error: OpenAiError) -> Self {
        ApiError::Unavailable {
            message: error.to_string(),
        }
    }
}

impl From<ApiError> for Status {
    fn from(error: ApiError) -> Self {
        match error {
            ApiError::InvalidArgument { violations } => invalid_argument(&violations),
            ApiError::Internal { message } => {
                tracing::error!(%message, "internal error");
                Status::internal("internal error")
            }
            ApiError::Unavailable { message } => {
                tracing::error!(%message, "dependency unavailable");
                Status::unavailable(format!("{message}; nothing was changed, retry later"))
            }
            ApiError::Store(store) => match store {
                StoreError::Invalid { violations } => invalid_argument(&violations),
                StoreError::NotFound => Status::not_found("conversation not found"),
                StoreError::SequenceMismatch { current } => Status::with_error_details(
                    Code::Aborted,
                    format!(
                        "expected_last_sequence does not match: the conversation's last sequence is {current}"
                    ),
                    ErrorDetails::with_error_info(
                        "SEQUENCE_MISMATCH",
                        ERROR_DOMAIN,
                        HashMap::from([("current_last_sequence".to_string(), current.to_string())]),
                    ),
                ),
                StoreError::SummaryMoved { current } => Status::with_error_details(
                    Code::Aborted,
                    format!("the summary watermark moved: it is now {current}"),
                    ErrorDetails::with_error_info(
                        "SUMMARY_MOVED",
                        ERROR_DOMAIN,
                        HashMap::from([("current_through_sequence".to_string(), current.to_string())]),
                    ),
                ),
                StoreError::MemoryVersionMismatch { current } => Status::with_error_details(
                    Code::Aborted,
                    format!("expected_version does not match: the working memory version is {current}"),
                    ErrorDetails::with_error_info(
                        "MEMORY_VERSION_MISMATCH",
                        ERROR_DOMAIN,
                        HashMap::from([("current_version".to_string(), current.to_string())]),
                    ),
                ),
                StoreError::IdempotencyKeyReused => Status::with_error_details(
                    Code::FailedPrecondition,
                    "idempotency_key was already used for a different payload",
                    ErrorDetails::with_error_info("IDEMPOTENCY_KEY_REUSED", ERROR_DOMAIN, HashMap::new()),
                ),
                StoreError::Unavailable { source } => {
                    tracing::error!(error = %source, "store unavailable");
                    Status::unavailable("storage is unavailable; retry")
                }
                StoreError::Internal { source } => {
                    tracing::error!(error = %ErrorChain(&*source), "internal store failure");
                    Status::internal("internal error")
                }
            },
        }
    }
}

/// Violations reported in one status. Statuses travel in HTTP/2 headers, which peers cap
/// (often at 16 KiB): a batch with hundreds of bad fields must not turn INVALID_ARGUMENT into a
/// connection-level protocol error.
const MAX_REPORTED_VIOLATIONS: usize = 10;

fn invalid_argument(violations: &Violations) -> Status {
    let mut details = ErrorDetails::new();
    let mut message = String::from("invalid request: ");
    for (i, v) in violations.iter().take(MAX_REPORTED_VIOLATIONS).enumerate() {
        details.add_bad_request_violation(v.field.clone(), v.description.clone());
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(&format!("{}: {}", v.field, v.description));
    }
    let total = violations.iter().count();
    if total > MAX_REPORTED_VIOLATIONS {
        message.push_str(&format!(" (and {} more)", total - MAX_REPORTED_VIOLATIONS));
    }
    Status::with_error_details(Code::InvalidArgument, message, details)
}

/// Displays an error with all its sources, for logs.
struct ErrorChain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}
