//! The one mapping from the service's errors to gRPC statuses (docs/design.md, "Errors"). Pure: the
//! edge ([`super::respond`]) logs server-side failures once, with their cause chain; the caller
//! gets a generic message for those.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::{
    domain::{Violations, tool_protocol::ProtocolViolation, violation::clip},
    models::summarize::{ModelError, OpenAiError},
    runtime::response_budget::Refusal,
    runtime::telemetry::ErrorChain,
    service::ServiceError,
    store::StoreError,
};

/// The most of a model endpoint's error (with its causes) that a status message carries.
const MODEL_ERROR_BYTES: usize = 600;

/// Error domain reported in google.rpc.ErrorInfo details.
const ERROR_DOMAIN: &str = "ctxd.v1";

impl From<ServiceError> for Status {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::InvalidArgument { violations } => invalid_argument(&violations),
            ServiceError::Model(error) => model_status(&error),
            ServiceError::Store(store) => store_status(store),
            ServiceError::ResponseBudget { refusal } => budget_status(refusal),
            ServiceError::PackTooLarge { bytes, limit } => Status::resource_exhausted(format!(
                "the pack and its rendering would be {bytes} bytes; the limit is {limit} \
                 (CTXD_MAX_RESPONSE_BYTES): ask for a smaller budget"
            )),
            ServiceError::CursorExpired { retention, oldest } => cursor_expired(retention, oldest),
            ServiceError::ShuttingDown => Status::unavailable(
                "the replica is shutting down: resume from your last cursor (on another replica)",
            ),
            ServiceError::TenantBusy { what, limit } => Status::resource_exhausted(format!(
                "this tenant already runs {limit} {what} at once on this replica: retry when they \
                 have finished"
            )),
        }
    }
}

/// A change feed cursor past retention: OUT_OF_RANGE, with the oldest cursor still held in an
/// `ErrorInfo` (`oldest_cursor`) for a consumer that resyncs and goes on from there.
fn cursor_expired(retention: std::time::Duration, oldest: Option<String>) -> Status {
    let hours = retention.as_secs() / 3600;
    let message = format!(
        "after_cursor is older than the changes kept ({hours} h, CTXD_CHANGES_RETENTION): resync \
         the consumer from the current state (ListConversations, ListMessages), then watch from \
         now or from the oldest cursor held"
    );
    let mut metadata = std::collections::HashMap::new();
    if let Some(oldest) = oldest {
        metadata.insert("oldest_cursor".to_owned(), oldest);
    }
    let details = ErrorDetails::with_error_info("CURSOR_EXPIRED", "ctxd.v1", metadata);
    Status::with_error_details(tonic::Code::OutOfRange, message, details)
}

/// A call the response budget refused: what the caller can do about it.
fn budget_status(refusal: Refusal) -> Status {
    Status::resource_exhausted(match refusal {
        Refusal::TooLarge { limit } => format!(
            "the call would load more than {limit} bytes of messages and response, its limit \
             (twice CTXD_MAX_RESPONSE_BYTES): ask for less (a smaller budget or page)"
        ),
        Refusal::Busy { total } => format!(
            "the replica's memory for large calls ({total} bytes, CTXD_RESPONSE_MEMORY_MIB) is \
             in use by other calls: retry with backoff"
        ),
        Refusal::TenantBusy { share } => format!(
            "this tenant's calls hold its share of the replica's memory ({share} bytes, \
             CTXD_TENANT_MEMORY_PERCENT): read the responses already asked for, or retry with \
             backoff"
        ),
    })
}

/// A summarizer or extractor failure (docs/design.md, "Summaries"): UNAVAILABLE only when
/// trying again can help; the endpoint's own error text (clipped) is in the message.
fn model_status(error: &ModelError) -> Status {
    let ModelError { role, source: error } = error;
    // The endpoint's error with its causes (a transport error's own text rarely names them).
    let text = ErrorChain(error).to_string();
    let source = clip(&text, MODEL_ERROR_BYTES);
    let source = &source;
    if error.retryable() {
        return Status::unavailable(format!(
            "the {role} endpoint failed: {source}; nothing was changed, retry later"
        ));
    }
    match error {
        OpenAiError::Status {
            status: 401 | 403, ..
        } => Status::failed_precondition(format!(
            "the {role} endpoint refused the credentials: {source}; check CTXD_OPENAI_API_KEY; nothing was changed"
        )),
        OpenAiError::Status { .. } => Status::failed_precondition(format!(
            "the {role} endpoint refused the request: {source}; nothing was changed"
        )),
        OpenAiError::BadAnswer(_) => Status::failed_precondition(format!(
            "the {role}'s model gave an {source}; nothing was changed"
        )),
        // Unreachable and TimedOut are always retryable (answered above); TooLong never is.
        OpenAiError::TooLong(_) | OpenAiError::Unreachable(_) | OpenAiError::TimedOut { .. } => {
            Status::failed_precondition(format!("the {role} failed: {source}; nothing was changed"))
        }
    }
}

fn store_status(error: StoreError) -> Status {
    match error {
        StoreError::Invalid { violations } => invalid_argument(&violations),
        // The service names the messages as the request did; this is the plain naming.
        StoreError::ToolProtocol { violations } => {
            invalid_argument(&ProtocolViolation::into_violations(&violations, |i| {
                format!("messages[{i}]")
            }))
        }
        StoreError::NotFound => Status::not_found("conversation not found"),
        StoreError::MessageNotFound => {
            Status::not_found("the conversation has no message with that sequence")
        }
        StoreError::AlreadyExists => {
            Status::already_exists("a conversation with new_conversation_id exists already")
        }
        StoreError::SequenceMismatch { current } => aborted(
            format!("expected_last_sequence does not match: the conversation's last sequence is {current}"),
            "SEQUENCE_MISMATCH",
            ("current_last_sequence", current.to_string()),
        ),
        StoreError::SummaryMoved { current } => aborted(
            format!("the summary watermark moved: it is now {current}"),
            "SUMMARY_MOVED",
            ("current_through_sequence", current.to_string()),
        ),
        StoreError::MemoryVersionMismatch { current } => aborted(
            format!("expected_version does not match: the working memory version is {current}"),
            "MEMORY_VERSION_MISMATCH",
            ("current_version", current.to_string()),
        ),
        StoreError::LogChanged { current } => aborted(
            format!(
                "messages were redacted or rewound since the request was prepared ({current} \
                 redactions and rewinds now): prepare again and send its log_changes as \
                 expected_log_changes"
            ),
            "LOG_CHANGED",
            ("current_log_changes", current.to_string()),
        ),
        StoreError::Expired => Status::with_error_details(
            Code::FailedPrecondition,
            "the conversation is past its expire_time and takes no more messages: the retention \
             sweep deletes it; UpdateConversation can clear or move expire_time to keep it",
            ErrorDetails::with_error_info("CONVERSATION_EXPIRED", ERROR_DOMAIN, HashMap::new()),
        ),
        StoreError::IdempotencyKeyReused => Status::with_error_details(
            Code::FailedPrecondition,
            "idempotency_key was already used for a different payload",
            ErrorDetails::with_error_info("IDEMPOTENCY_KEY_REUSED", ERROR_DOMAIN, HashMap::new()),
        ),
        StoreError::DeadlineExceeded => Status::deadline_exceeded(
            "the call's deadline passed while the conversation was busy or the database slow; \
             nothing was written",
        ),
        StoreError::Unavailable { .. } => Status::unavailable("storage is unavailable; retry"),
        StoreError::Internal { .. } => Status::internal("internal error"),
    }
}

/// ABORTED with the current value in google.rpc.ErrorInfo metadata.
fn aborted(message: String, reason: &str, (key, value): (&str, String)) -> Status {
    Status::with_error_details(
        Code::Aborted,
        message,
        ErrorDetails::with_error_info(reason, ERROR_DOMAIN, HashMap::from([(key.to_owned(), value)])),
    )
}

/// Violations reported in one status. Statuses travel in HTTP/2 headers, which peers cap
/// (often at 16 KiB): a batch with hundreds of bad fields must not turn INVALID_ARGUMENT into a
/// connection-level protocol error.
/// Each field path and description is clipped too, so that no caller value they echo (an id,
/// a name) can outgrow the header: at most 10 x (256 + 512) bytes in the message and as much in
/// the details.
const MAX_REPORTED_VIOLATIONS: usize = 10;
const MAX_FIELD_BYTES: usize = 256;
const MAX_DESCRIPTION_BYTES: usize = 512;

pub(crate) fn invalid_argument(violations: &Violations) -> Status {
    let mut details = ErrorDetails::new();
    let mut message = String::from("invalid request: ");
    for (i, v) in violations.iter().take(MAX_REPORTED_VIOLATIONS).enumerate() {
        let field = clip(&v.field, MAX_FIELD_BYTES);
        let description = clip(&v.description, MAX_DESCRIPTION_BYTES);
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(&format!("{field}: {description}"));
        details.add_bad_request_violation(field, description);
    }
    let total = violations.iter().count();
    if total > MAX_REPORTED_VIOLATIONS {
        message.push_str(&format!(" (and {} more)", total - MAX_REPORTED_VIOLATIONS));
    }
    Status::with_error_details(Code::InvalidArgument, message, details)
}
