//! Turns the configuration's plain options into the layers' own types. Configuration knows no
//! layer and no layer knows configuration; this is the one place that knows both.

use std::{sync::Arc, time::Duration};

use crate::{
    config::{
        AuthOptions, DatabaseOptions, EmbeddingEndpoint, Engine, LimitOptions, LogFormatName,
        ParentlessSampler, SummarizerOptions, TelemetryOptions, TokenizerName, TraceExport, TraceProtocol,
        TraceSampler,
    },
    domain::AppendLimits,
    domain::tokenize::Tokenizer,
    grpc::TenantInterceptor,
    models::embeddings::{EmbedError, Embedder},
    models::summarize::{Extractor, OpenAiClient, OpenAiError, Summarizer},
    runtime::telemetry::{self, LogFormat, TelemetryError},
    runtime::traces::{ExportOptions, Exporter, Sampler},
    service::{AiSettings, AutoSummarize, Limits},
    store::PostgresOptions,
};

/// Installs logging, and traces when an OTLP endpoint is configured; the exporter returned
/// must be shut down last, so the final spans leave.
pub fn init_telemetry(options: &TelemetryOptions) -> Result<Option<Exporter>, TelemetryError> {
    let format = match options.log_format {
        LogFormatName::Text => LogFormat::Text,
        LogFormatName::Json => LogFormat::Json,
    };
    let exporter = match &options.traces {
        Some(export) => Some(Exporter::start(export_options(export))?),
        None => None,
    };
    telemetry::init(format, &options.log_filter, exporter.as_ref())?;
    if let Some(export) = &options.traces {
        tracing::info!(endpoint = %export.endpoint, grpc = export.protocol == TraceProtocol::Grpc, "exporting traces (OTLP)");
    }
    Ok(exporter)
}

/// The exporter's options for the configured export.
fn export_options(export: &TraceExport) -> ExportOptions {
    ExportOptions {
        endpoint: export.endpoint.clone(),
        grpc: export.protocol == TraceProtocol::Grpc,
        sampler: sampler(export.sampler),
        service_name: export.service_name.clone(),
    }
}

/// The SDK sampler for the configured one.
fn sampler(sampler: TraceSampler) -> Sampler {
    match sampler {
        TraceSampler::AlwaysOn => Sampler::AlwaysOn,
        TraceSampler::AlwaysOff => Sampler::AlwaysOff,
        TraceSampler::Ratio(r) => Sampler::TraceIdRatioBased(r),
        TraceSampler::ParentBased(root) => Sampler::ParentBased(Box::new(match root {
            ParentlessSampler::AlwaysOn => Sampler::AlwaysOn,
            ParentlessSampler::AlwaysOff => Sampler::AlwaysOff,
            ParentlessSampler::Ratio(r) => Sampler::TraceIdRatioBased(r),
        })),
    }
}

/// The Postgres store's settings (`None`: the in-memory store). A statement may run as long as
/// the call it serves, and no longer.
pub fn postgres_options(database: &DatabaseOptions, request_timeout: Duration) -> Option<PostgresOptions> {
    Some(PostgresOptions {
        url: database.url.clone()?,
        pool_size: database.pool_size,
        connect_timeout: database.connect_timeout,
        statement_timeout: request_timeout,
        message_cache_bytes: database.message_cache_bytes,
        group_commit: database.group_commit,
    })
}

/// The service's request limits and defaults.
pub(super) fn limits(options: &LimitOptions) -> Limits {
    Limits {
        append: AppendLimits {
            max_messages_per_request: options.max_messages_per_request,
            max_content_bytes: options.max_content_bytes,
            max_attachment_bytes: options.max_attachment_bytes,
            max_read_bytes: options.max_response_bytes,
            ..AppendLimits::default()
        },
        default_tokenizer: tokenizer(options.default_tokenizer),
        counted_tokenizers: options
            .tokenizers
            .iter()
            .map(|name| tokenizer(*name))
            .chain([tokenizer(options.default_tokenizer)])
            .collect(),
        max_response_bytes: options.max_response_bytes,
        response_budget_bytes: options.response_memory_bytes,
        tenant_memory_percent: options.tenant_memory_percent,
        max_fork_messages: options.max_fork_messages,
        search_language: options.search_language,
    }
}

/// Builds the configured summarizer and extractor (one shared endpoint client).
pub(super) fn ai_settings(options: &SummarizerOptions) -> Result<AiSettings, OpenAiError> {
    let client = match options.uses_openai() {
        true => Some(Arc::new(OpenAiClient::new(options.openai.clone())?)),
        false => None,
    };
    let summarizer = match (&client, options.summarizer) {
        (Some(c), Engine::OpenAi) => Summarizer::OpenAi(c.clone()),
        _ => Summarizer::Extractive,
    };
    let extractor = match (&client, options.extractor) {
        (Some(c), Engine::OpenAi) => Extractor::OpenAi(c.clone()),
        _ => Extractor::Rules,
    };
    tracing::info!(summarizer = summarizer.name(), extractor = ?options.extractor, "summarization configured");
    Ok(AiSettings {
        summarizer,
        extractor,
        max_summary_tokens: options.max_summary_tokens,
        auto_summarize: options.auto_summarize.map(|auto| AutoSummarize {
            threshold: auto.threshold,
            keep_recent_tokens: auto.keep_recent_tokens,
            concurrency: auto.concurrency,
        }),
        context_tokens: options.openai.context_tokens,
        embedder: None,
    })
}

/// The embeddings client of semantic search, when an endpoint is configured.
pub(super) fn embedder(endpoint: Option<&EmbeddingEndpoint>) -> Result<Option<Arc<Embedder>>, EmbedError> {
    let Some(endpoint) = endpoint else {
        return Ok(None);
    };
    tracing::info!(model = %endpoint.model, "semantic search configured");
    Ok(Some(Arc::new(Embedder::new(endpoint.clone())?)))
}

/// Who may call: API keys when configured, else the trusted `x-tenant-id` header.
pub(super) fn interceptor(auth: &AuthOptions) -> TenantInterceptor {
    if auth.api_keys.is_empty() {
        tracing::warn!(
            "AUTH DISABLED: no API keys configured; the x-tenant-id header is trusted. \
             Only run this way in development or behind a trusted mesh."
        );
        return TenantInterceptor::trusting_header(auth.default_tenant.clone());
    }
    let keys = auth.api_keys.clone();
    tracing::info!(keys = keys.len(), "API key authentication enabled");
    TenantInterceptor::with_api_keys(keys)
}

/// The tokenizer `name` configures.
fn tokenizer(name: TokenizerName) -> Tokenizer {
    match name {
        TokenizerName::O200kBase => Tokenizer::O200kBase,
        TokenizerName::Cl100kBase => Tokenizer::Cl100kBase,
        TokenizerName::Approx => Tokenizer::Approx,
    }
}
