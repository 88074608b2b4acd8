//! PostgreSQL's failures sorted into what the caller can do: retry (the connection or the server
//! is in trouble), give up on the deadline, or report a bug.

use deadpool_postgres::PoolError;

use crate::store::StoreError;

/// Sorts a Postgres failure into retryable (connection trouble) and internal.
impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        let retryable = match error.code() {
            // No server verdict: retryable only if the connection itself failed.
            None => {
                error.is_closed()
                    || std::error::Error::source(&error)
                        .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
            }
            // statement_timeout (as set for the call, or the backstop), and a lock_timeout
            // should a deployment set one.
            Some(state) if matches!(state.code(), "57014" | "55P03") => {
                return StoreError::DeadlineExceeded;
            }
            Some(state) => {
                let code = state.code();
                code.starts_with("08")
                    || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
            }
        };
        if retryable {
            StoreError::Unavailable {
                source: Box::new(error),
            }
        } else {
            StoreError::Internal {
                source: Box::new(error),
            }
        }
    }
}

/// A connection that cannot be had is retryable, unless the server gave a verdict.
impl From<PoolError> for StoreError {
    fn from(error: PoolError) -> Self {
        match error {
            PoolError::Backend(e) => e.into(),
            other => StoreError::Unavailable {
                source: Box::new(other),
            },
        }
    }
}

/// Stored data that cannot be decoded: a bug or a hand-edited row.
pub(super) fn corrupt(what: &str) -> StoreError {
    StoreError::internal(format!("corrupt stored data: {what}"))
}
