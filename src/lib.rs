//! ctxd: keeps LLM conversations and assembles the context for the next LLM call.
//!
//! Data flows one way: [`grpc`] parses requests into [`domain`] types and calls one [`service`]
//! use case, which runs the domain's rules over the [`store`]; the answers travel back the same
//! way. See docs/design.md, "Architecture".

pub mod config;
pub mod domain;
#[doc(hidden)]
pub mod fuzzing;
pub mod grpc;
pub mod models;
pub mod proto;
pub mod runtime;
pub mod service;
pub mod startup;
pub mod store;

/// Completes on SIGTERM or SIGINT (Ctrl-C): the production shutdown trigger.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
}
