//! What ctxd tells operators: logs (format and filter), the Prometheus metrics listener, and
//! OpenTelemetry traces (the standard OTEL_* variables).

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

    /// OTLP endpoint traces are exported to (`http://collector:4318` for http/protobuf,
    /// `http://collector:4317` for grpc); unset = no traces.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", display_order = 52)]
    pub otel_endpoint: Option<String>,

    /// Trace-only OTLP endpoint, used as given (for http/protobuf, the whole URL with
    /// `/v1/traces`); wins over OTEL_EXPORTER_OTLP_ENDPOINT.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", display_order = 53)]
    pub otel_traces_endpoint: Option<String>,

    /// OTLP transport: `http/protobuf` or `grpc`.
    #[arg(
        long,
        env = "OTEL_EXPORTER_OTLP_PROTOCOL",
        default_value = "http/protobuf",
        display_order = 54
    )]
    pub otel_protocol: String,

    /// Trace-only OTLP transport; wins over OTEL_EXPORTER_OTLP_PROTOCOL.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", display_order = 55)]
    pub otel_traces_protocol: Option<String>,

    /// Which traces are kept: `parentbased_always_on` (every trace a caller samples, and every
    /// new one), `always_on`, `always_off`, `traceidratio`, `parentbased_traceidratio`,
    /// `parentbased_always_off`; the ratio is OTEL_TRACES_SAMPLER_ARG.
    #[arg(
        long,
        env = "OTEL_TRACES_SAMPLER",
        default_value = "parentbased_always_on",
        display_order = 56
    )]
    pub otel_sampler: String,

    /// The service name traces carry (default `ctxd`, or a `service.name` in
    /// OTEL_RESOURCE_ATTRIBUTES).
    #[arg(long, env = "OTEL_SERVICE_NAME", display_order = 57)]
    pub otel_service_name: Option<String>,

    /// The sampler's ratio, 0 to 1, for the `traceidratio` samplers.
    #[arg(long, env = "OTEL_TRACES_SAMPLER_ARG", display_order = 58)]
    pub otel_sampler_arg: Option<f64>,
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
    /// Where traces go; `None`: no traces.
    pub traces: Option<TraceExport>,
}

/// Where and how traces are exported (OpenTelemetry, OTLP).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceExport {
    /// The collector's URL, as the exporter wants it (the trace path included for HTTP).
    pub endpoint: String,
    /// The transport.
    pub protocol: TraceProtocol,
    /// Which traces are kept.
    pub sampler: TraceSampler,
    /// OTEL_SERVICE_NAME, when set.
    pub service_name: Option<String>,
}

/// The OTLP transports ctxd speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceProtocol {
    /// Protobuf over HTTP (`/v1/traces`).
    HttpProtobuf,
    /// OTLP over gRPC.
    Grpc,
}

/// The standard samplers (OTEL_TRACES_SAMPLER).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TraceSampler {
    /// Every trace.
    AlwaysOn,
    /// None.
    AlwaysOff,
    /// This share of trace ids.
    Ratio(f64),
    /// The caller's decision when there is one, else the inner sampler's.
    ParentBased(ParentlessSampler),
}

/// What a parent-based sampler does with a call that has no parent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParentlessSampler {
    /// Keep it.
    AlwaysOn,
    /// Drop it.
    AlwaysOff,
    /// Keep this share.
    Ratio(f64),
}

impl TelemetryArgs {
    /// Checks that the log filter parses, so a typo fails start-up instead of silencing logs.
    pub fn validate(&self) -> Result<TelemetryOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        if let Err(source) = tracing_subscriber::EnvFilter::try_new(&self.log) {
            problems.push(ConfigProblem::LogFilter { source });
        }
        let traces = self.traces(&mut problems);
        problems.finish(TelemetryOptions {
            log_format: self.log_format,
            log_filter: self.log.clone(),
            metrics_listen: self.metrics_listen,
            traces,
        })
    }

    /// The trace export, when an endpoint is set and the OTEL_* settings are ones ctxd follows.
    fn traces(&self, problems: &mut Problems) -> Option<TraceExport> {
        let (setting, protocol) = match &self.otel_traces_protocol {
            Some(p) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", p.as_str()),
            None => ("OTEL_EXPORTER_OTLP_PROTOCOL", self.otel_protocol.as_str()),
        };
        let protocol = match protocol.trim().to_ascii_lowercase().as_str() {
            "http/protobuf" => Some(TraceProtocol::HttpProtobuf),
            "grpc" => Some(TraceProtocol::Grpc),
            _ => {
                let reason = "must be `http/protobuf` or `grpc`";
                problems.push(ConfigProblem::Traces { setting, reason });
                None
            }
        };
        let sampler = self.sampler(problems);
        let endpoint = match (&self.otel_traces_endpoint, &self.otel_endpoint, protocol) {
            (Some(url), _, _) => url.trim().to_owned(),
            (None, Some(url), Some(TraceProtocol::HttpProtobuf)) => {
                format!("{}/v1/traces", url.trim().trim_end_matches('/'))
            }
            (None, Some(url), _) => url.trim().to_owned(),
            (None, None, _) => return None,
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            let setting = match self.otel_traces_endpoint.is_some() {
                true => "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                false => "OTEL_EXPORTER_OTLP_ENDPOINT",
            };
            let reason = "must be an http:// or https:// URL";
            problems.push(ConfigProblem::Traces { setting, reason });
        }
        Some(TraceExport {
            endpoint,
            protocol: protocol?,
            sampler: sampler?,
            service_name: self.otel_service_name.clone(),
        })
    }

    /// OTEL_TRACES_SAMPLER and its argument, checked.
    fn sampler(&self, problems: &mut Problems) -> Option<TraceSampler> {
        let ratio = match self.otel_sampler_arg {
            None => 1.0,
            Some(r) if (0.0..=1.0).contains(&r) => r,
            Some(_) => {
                let reason = "must be a ratio from 0 to 1";
                problems.push(ConfigProblem::Traces {
                    setting: "OTEL_TRACES_SAMPLER_ARG",
                    reason,
                });
                return None;
            }
        };
        let sampler = match self.otel_sampler.trim().to_ascii_lowercase().as_str() {
            "always_on" => TraceSampler::AlwaysOn,
            "always_off" => TraceSampler::AlwaysOff,
            "traceidratio" => TraceSampler::Ratio(ratio),
            "parentbased_always_on" => TraceSampler::ParentBased(ParentlessSampler::AlwaysOn),
            "parentbased_always_off" => TraceSampler::ParentBased(ParentlessSampler::AlwaysOff),
            "parentbased_traceidratio" => TraceSampler::ParentBased(ParentlessSampler::Ratio(ratio)),
            _ => {
                let reason = "must be always_on, always_off, traceidratio, parentbased_always_on, \
                              parentbased_always_off or parentbased_traceidratio";
                problems.push(ConfigProblem::Traces {
                    setting: "OTEL_TRACES_SAMPLER",
                    reason,
                });
                return None;
            }
        };
        Some(sampler)
    }
}
