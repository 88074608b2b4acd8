//! Logging set-up. Logs carry ids, counts and timings, never message content.

use tracing_subscriber::{EnvFilter, fmt};

use crate::config::LogFormat;

/// Installs the global subscriber. Returns an error if one is already installed.
pub fn init(format: LogFormat, filter: &str) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let filter = EnvFilter::try_new(filter)?;
    let builder = fmt().with_env_filter(filter).with_target(true);
    match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    }
}
