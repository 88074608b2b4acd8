//! Why the server did not start, or stopped.

use std::net::SocketAddr;

use crate::{models::summarize::OpenAiError, store::StoreError};

/// Failures that stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened or migrated.
    #[error("database set-up failed")]
    Store {
        /// Why.
        #[from]
        source: StoreError,
    },
    /// The summarizer endpoint's client could not be built.
    #[error("summarizer set-up failed")]
    Summarizer {
        /// Why.
        #[source]
        source: OpenAiError,
    },
    /// The embeddings endpoint's client could not be built.
    #[error("embeddings set-up failed")]
    Embeddings {
        /// Why.
        #[source]
        source: crate::models::embeddings::EmbedError,
    },
    /// The TLS certificate, key or client CA was refused.
    #[error("TLS set-up failed")]
    Tls {
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// Reflection could not be built from the descriptor sets.
    #[error("reflection set-up failed")]
    Reflection {
        /// Why.
        #[from]
        source: tonic_reflection::server::Error,
    },
    /// The gRPC server failed.
    #[error("gRPC server failed")]
    Serve {
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// A task that runs as long as the server (the server itself, the health probe, the
    /// retention sweeper, the metrics endpoint) panicked or returned.
    #[error("{task} stopped unexpectedly")]
    TaskEnded {
        /// Which task.
        task: &'static str,
        /// The panic, if it panicked.
        #[source]
        source: Option<tokio::task::JoinError>,
    },
}
