//! Logging set-up. Logs carry ids, counts and timings, never message content.

use std::io::IsTerminal as _;

use tracing_subscriber::{
    EnvFilter, Layer as _, filter::filter_fn, fmt, layer::SubscriberExt as _, util::SubscriberInitExt as _,
};

use super::traces::{self, Exporter};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines, for a terminal.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Directive silencing tokio-postgres' query log, which prints statement parameters.
const QUIET_QUERY_LOG: &str = "tokio_postgres::query=off";

/// The trace spans ([`super::traces::SPAN_TARGET`]) are for the exporter: log lines keep their
/// own spans (the call's method and request id, the handler's ids), not the exported ones.
const SPANS_NOT_LOGGED: &str = "ctxd::otel=off";

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter does not parse.
    #[error("invalid log filter")]
    Filter {
        /// What the parser objects to.
        #[from]
        source: tracing_subscriber::filter::ParseError,
    },
    /// The trace exporter cannot be built.
    #[error(transparent)]
    Traces(#[from] super::traces::ExporterError),
    /// Another subscriber was installed first (logging is process-wide).
    #[error("cannot install the log subscriber")]
    Install {
        /// Why tracing refused it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Installs the global subscriber: log lines, and spans for `exporter` when traces are on.
/// Fails if a subscriber is already installed.
pub fn init(format: LogFormat, filter: &str, exporter: Option<&Exporter>) -> Result<(), TelemetryError> {
    // tokio-postgres logs every query's parameters (message content) at debug: that target is
    // always off, whatever the configured filter says.
    let filter = EnvFilter::try_new(filter)?
        .add_directive(QUIET_QUERY_LOG.parse()?)
        .add_directive(SPANS_NOT_LOGGED.parse()?);
    // Colour codes only on a terminal: in files and container logs they are noise.
    let ansi = std::io::stdout().is_terminal();
    let lines = fmt::layer().with_target(true).with_ansi(ansi);
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().flatten_event(true).with_current_span(true).boxed(),
    };
    // Only ctxd's own trace spans are exported, never an event (a log line's text stays local),
    // whatever the log filter says.
    let spans = exporter.map(|exporter| {
        tracing_opentelemetry::layer()
            .with_tracer(exporter.tracer())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(filter_fn(|meta| {
                meta.is_span() && meta.target() == traces::SPAN_TARGET
            }))
    });
    tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        .with(spans)
        .try_init()
        .map_err(|source| TelemetryError::Install {
            source: Box::new(source),
        })
}

/// Displays an error with all its sources (`outer: cause: root cause`), for logs: errors are
/// logged once, where they end (the RPC's edge or a background task), with their whole chain.
/// A cause whose text its outer error already ends with is not repeated (some libraries put
/// their source in their own message too).
#[derive(Debug)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !shown.ends_with(&text) {
                write!(f, ": {text}")?;
            }
            shown = text;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Layer {
        message: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(message: &'static str, source: Option<Layer>) -> Layer {
        Layer {
            message,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn the_chain_shows_every_cause_once() {
        let root = layer("disk full", None);
        let repeats = layer("write failed: disk full", Some(root));
        let outer = layer("cannot save", Some(repeats));
        assert_eq!(
            ErrorChain(&outer).to_string(),
            "cannot save: write failed: disk full"
        );
    }
}
