//! What ctxd tells operators: logs (format and filter) and the Prometheus metrics listener.

use std::net::SocketAddr;

use clap::ValueEnum;

use super::problem::{ConfigProblem, Problems};

/// Log and metrics settings.
#[derive(Debug, Clone, clap::Args)]
pub struct TelemetryArgs {
    /// Address of the Prometheus metrics endpoint (`/metrics`); unset = no metrics listener.
    #[arg(long, env = "CTXD_METRICS_LISTEN", display_order = 16)]
    pub metrics_listen: Option<SocketAddr>,

    /// Log format.
    #[arg(
        long,
        env = "CTXD_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormatName::Text,
        display_order = 42
    )]
    pub log_format: LogFormatName,

    /// Log filter in tracing's EnvFilter syntax (e.g. `info`, `ctxd=debug`).
    #[arg(long, env = "CTXD_LOG", default_value = "info", display_order = 43)]
    pub log: String,
}

/// Log formats accepted in configuration.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormatName {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The validated log and metrics settings.
#[derive(Debug, Clone)]
pub struct TelemetryOptions {
    /// Log format.
    pub log_format: LogFormatName,
    /// Log filter, in tracing's EnvFilter syntax (checked to parse).
    pub log_filter: String,
    /// Address of the metrics endpoint; `None`: no metrics listener.
    pub metrics_listen: Option<SocketAddr>,
}

impl TelemetryArgs {
    /// Checks that the log filter parses, so a typo fails start-up instead of silencing logs.
    pub fn validate(&self) -> Result<TelemetryOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        if let Err(source) = tracing_subscriber::EnvFilter::try_new(&self.log) {
            problems.push(ConfigProblem::LogFilter { source });
        }
        problems.finish(TelemetryOptions {
            log_format: self.log_format,
            log_filter: self.log.clone(),
            metrics_listen: self.metrics_listen,
        })
    }
}
