//! Logging set-up. Logs carry ids, counts and timings, never message content.

use std::io::IsTerminal as _;

use tracing_subscriber::{EnvFilter, fmt};

use crate::config::LogFormat;

/// Directive silencing tokio-postgres' query log, which prints statement parameters.
const QUIET_QUERY_LOG: &str = "tokio_postgres::query=off";

/// Installs the global subscriber. Returns an error if one is already installed.
pub fn init(format: LogFormat, filter: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // tokio-postgres logs every query's parameters (message content) at debug: that target is
    // always off, whatever the configured filter says.
    let filter = EnvFilter::try_new(filter)?.add_directive(QUIET_QUERY_LOG.parse()?);
    // Colour codes only on a terminal: in files and container logs they are noise.
    let ansi = std::io::stdout().is_terminal();
    let builder = fmt().with_env_filter(filter).with_target(true).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    }
}

/// Displays an error with all its sources (`outer: cause: root cause`), for logs: errors are
/// logged once, where they end (the RPC's edge or a background task), with their whole chain.
#[derive(Debug)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

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
