//! Configuration from flags and environment, validated at start-up with every problem listed at
//! once.

use std::{net::SocketAddr, time::Duration};

use clap::{Parser, Subcommand, ValueEnum};

use crate::{
    auth::ApiKey,
    domain::{AppendLimits, TenantId},
    service::{AutoSummarize, Limits, retention::Retention},
    store::PostgresOptions,
    summarize::OpenAiOptions,
    tokenize::Tokenizer,
};

/// ctxd: keeps LLM conversations and assembles the context for the next LLM call.
///
/// Without DATABASE_URL, ctxd serves from memory (data is lost on restart).
#[derive(Debug, Parser)]
#[command(name = "ctxd", version)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Settings shared by every command.
    #[command(flatten)]
    pub config: Config,
}

/// Subcommands of the `ctxd` binary.
#[derive(Debug, Clone, Subcommand, PartialEq, Eq)]
pub enum Command {
    /// Serve gRPC (the default).
    Serve,
    /// Apply pending database migrations and exit (for a Kubernetes Job). Needs DATABASE_URL.
    Migrate,
    /// Ask a running server's gRPC health service; exit 0 only when it is SERVING (container
    /// health checks).
    Health {
        /// Address of the server.
        #[arg(long, default_value = "127.0.0.1:50051")]
        addr: SocketAddr,
        /// Service to ask about: "" (the default) is liveness, SERVING while the process runs;
        /// `ctxd.v1.ContextService` is readiness, NOT_SERVING while the database is unreachable.
        #[arg(long, default_value = "")]
        service: String,
    },
    /// Print the SHA-256 hex of an API key, the form CTXD_API_KEYS takes.
    HashKey {
        /// The API key: visible ASCII without spaces (anything else could never be presented).
        key: String,
    },
}

/// Log output format.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Tokenizer names accepted in configuration.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TokenizerName {
    /// OpenAI o200k_base.
    #[value(name = "o200k_base")]
    O200kBase,
    /// OpenAI cl100k_base.
    #[value(name = "cl100k_base")]
    Cl100kBase,
    /// UTF-8 bytes / 4.
    #[value(name = "approx")]
    Approx,
}

/// Which implementation runs a summarizer or extractor.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Engine {
    /// The embedded one (`extractive` summarizer, `rules` extractor).
    #[value(name = "embedded", alias = "extractive", alias = "rules")]
    Embedded,
    /// An OpenAI-compatible chat-completions endpoint.
    #[value(name = "openai")]
    OpenAi,
}

/// Every setting, with its flag, environment variable and default.
#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// Address the gRPC server listens on.
    #[arg(long, env = "CTXD_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,

    /// PostgreSQL URL (postgres://user:password@host:5432/db). Server settings in its
    /// `options` (`?options=-c%20search_path%3Dctxd`) apply to every connection. Unset:
    /// in-memory store.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Maximum pooled database connections.
    #[arg(long, env = "CTXD_DB_POOL_SIZE", default_value_t = 16)]
    pub db_pool_size: usize,

    /// Seconds to wait for a database connection before answering UNAVAILABLE.
    #[arg(long, env = "CTXD_DB_CONNECT_TIMEOUT_SECS", default_value_t = 5)]
    pub db_connect_timeout_secs: u64,

    /// Seconds to keep retrying the database at start-up before giving up.
    #[arg(long, env = "CTXD_DB_STARTUP_WAIT_SECS", default_value_t = 30)]
    pub db_startup_wait_secs: u64,

    /// Deadline of every RPC (a shorter `grpc-timeout` from the client wins; past it the call
    /// ends with DEADLINE_EXCEEDED). A write's statements and lock waits end before the call's
    /// deadline, so no write the caller saw fail commits later; this is also every database
    /// connection's `statement_timeout`.
    #[arg(long, env = "CTXD_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Milliseconds between database health probes (readiness is NOT_SERVING while they fail).
    #[arg(long, env = "CTXD_HEALTH_PROBE_INTERVAL_MS", default_value_t = 5_000)]
    pub health_probe_interval_ms: u64,

    /// Delete conversations without an `expire_time` once they have had no append or update for
    /// this many seconds (0 = never; conversations with an `expire_time` go at that time).
    #[arg(long, env = "CTXD_RETENTION_INACTIVE_SECS", default_value_t = 0)]
    pub retention_inactive_secs: u64,

    /// Milliseconds between retention sweeps. One replica at a time sweeps (a database lease);
    /// expired conversations are gone within about this long.
    #[arg(long, env = "CTXD_RETENTION_SWEEP_INTERVAL_MS", default_value_t = 60_000)]
    pub retention_sweep_interval_ms: u64,

    /// Conversations one retention batch deletes (each in its own transaction); a sweep runs
    /// batches until one comes back short.
    #[arg(long, env = "CTXD_RETENTION_BATCH", default_value_t = 200)]
    pub retention_batch: usize,

    /// Apply pending migrations at start-up (under an advisory lock; safe with many replicas).
    #[arg(long, env = "CTXD_MIGRATE_ON_START", default_value_t = true, action = clap::ArgAction::Set)]
    pub migrate_on_start: bool,

    /// API keys as comma-separated `sha256hex=tenant` pairs (`ctxd hash-key KEY` prints the
    /// hash). With any key configured, every call needs one; without, auth is off and the
    /// x-tenant-id header is trusted.
    #[arg(long, env = "CTXD_API_KEYS", hide_env_values = true, value_delimiter = ',')]
    pub api_keys: Vec<String>,

    /// File of API keys, one `sha256hex tenant` per line (`#` starts a comment).
    #[arg(long, env = "CTXD_API_KEYS_FILE")]
    pub api_keys_file: Option<std::path::PathBuf>,

    /// PEM certificate chain: serve gRPC over TLS (with --tls-key).
    #[arg(long, env = "CTXD_TLS_CERT")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "CTXD_TLS_KEY")]
    pub tls_key: Option<std::path::PathBuf>,

    /// PEM CA bundle: require client certificates signed by it (mutual TLS).
    #[arg(long, env = "CTXD_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<std::path::PathBuf>,

    /// Address of the Prometheus metrics endpoint (`/metrics`); unset = no metrics listener.
    #[arg(long, env = "CTXD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Seconds after which a client connection is closed (gracefully), so long-lived HTTP/2
    /// clients reconnect and spread over new replicas.
    #[arg(long, env = "CTXD_MAX_CONNECTION_AGE_SECS", default_value_t = 300)]
    pub max_connection_age_secs: u64,

    /// The largest response one call may answer with: a BuildContext pack with its rendering,
    /// a ListMessages page (cut short with `next_after_sequence` instead), a prepared summary
    /// or extraction request (which then covers the history in steps). Larger packs are
    /// refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "CTXD_MAX_RESPONSE_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_response_bytes: usize,

    /// MiB that the messages loaded by all calls at once, and their responses until the clients
    /// have read them, may hold; one call may hold twice CTXD_MAX_RESPONSE_BYTES. A call
    /// that would pass either is refused with RESOURCE_EXHAUSTED. Keep it well under the
    /// container's memory limit.
    #[arg(long, env = "CTXD_RESPONSE_MEMORY_MIB", default_value_t = 256)]
    pub response_memory_mib: usize,

    /// Client connections open at once (gRPC and metrics ports each); past it, new connections
    /// wait in the listen backlog until one closes.
    #[arg(long, env = "CTXD_MAX_CONNECTIONS", default_value_t = 2_048)]
    pub max_connections: usize,

    /// Seconds a new connection has to send its first bytes (the HTTP/2 preface; with TLS,
    /// also to finish the TLS handshake; on the metrics port, the request headers) before it
    /// is closed.
    #[arg(long, env = "CTXD_HANDSHAKE_TIMEOUT_SECS", default_value_t = 10)]
    pub handshake_timeout_secs: u64,

    /// Concurrent requests served per client connection.
    #[arg(long, env = "CTXD_CONCURRENCY_PER_CONNECTION", default_value_t = 256)]
    pub concurrency_per_connection: usize,

    /// Tenant of calls without an x-tenant-id header (auth off only).
    #[arg(long, env = "CTXD_DEFAULT_TENANT", default_value = "default")]
    pub default_tenant: String,

    /// Messages accepted in one AppendMessage request.
    #[arg(long, env = "CTXD_MAX_MESSAGES_PER_REQUEST", default_value_t = 100)]
    pub max_messages_per_request: usize,

    /// Bytes of one message's content (also tool-call arguments and metadata values).
    #[arg(long, env = "CTXD_MAX_CONTENT_BYTES", default_value_t = 1024 * 1024)]
    pub max_content_bytes: usize,

    /// Bytes of one attachment's inline data or URI.
    #[arg(long, env = "CTXD_MAX_ATTACHMENT_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_attachment_bytes: usize,

    /// Bytes of one decoded gRPC request; larger requests get RESOURCE_EXHAUSTED.
    #[arg(long, env = "CTXD_MAX_REQUEST_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_request_bytes: usize,

    /// Seconds in-flight calls get to finish after SIGTERM/SIGINT before the process exits.
    #[arg(long, env = "CTXD_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,

    /// Tokenizer of requests that leave it unspecified.
    #[arg(long, env = "CTXD_DEFAULT_TOKENIZER", value_enum, default_value_t = TokenizerName::O200kBase)]
    pub default_tokenizer: TokenizerName,

    /// Summarizer of SUMMARIZE_MODE_SERVER: `extractive` (embedded, no network) or `openai`.
    #[arg(long, env = "CTXD_SUMMARIZER", value_enum, default_value_t = Engine::Embedded)]
    pub summarizer: Engine,

    /// Working memory extractor: `rules` (embedded, no network) or `openai`.
    #[arg(long, env = "CTXD_EXTRACTOR", value_enum, default_value_t = Engine::Embedded)]
    pub extractor: Engine,

    /// Default `max_summary_tokens` of Summarize.
    #[arg(long, env = "CTXD_SUMMARY_MAX_TOKENS", default_value_t = 1_000)]
    pub summary_max_tokens: usize,

    /// Background summarization: fold a conversation's history in once its unsummarized part
    /// passes this many tokens (0 = off). One replica at a time per conversation.
    #[arg(long, env = "CTXD_AUTO_SUMMARIZE_TOKENS", default_value_t = 0)]
    pub auto_summarize_tokens: usize,

    /// Tokens background summarization leaves verbatim (0 = half of CTXD_AUTO_SUMMARIZE_TOKENS).
    #[arg(long, env = "CTXD_AUTO_SUMMARIZE_KEEP_TOKENS", default_value_t = 0)]
    pub auto_summarize_keep_tokens: usize,

    /// Background summaries one replica runs at once. A check point reached while that many
    /// run is skipped; the conversation's next check point tries again.
    #[arg(long, env = "CTXD_AUTO_SUMMARIZE_CONCURRENCY", default_value_t = 16)]
    pub auto_summarize_concurrency: usize,

    /// Base URL of the OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LiteLLM), up to `/v1`.
    #[arg(
        long,
        env = "CTXD_OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,

    /// Model of the OpenAI-compatible endpoint.
    #[arg(long, env = "CTXD_OPENAI_MODEL", default_value = "gpt-4o-mini")]
    pub openai_model: String,

    /// API key of the OpenAI-compatible endpoint (sent as a bearer token), if it needs one.
    #[arg(long, env = "CTXD_OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<String>,

    /// Seconds one attempt at the endpoint may take. All attempts of a call also end before
    /// the call's deadline (the caller's grpc-timeout or CTXD_REQUEST_TIMEOUT_SECS).
    #[arg(long, env = "CTXD_OPENAI_TIMEOUT_SECS", default_value_t = 60)]
    pub openai_timeout_secs: u64,

    /// Context window of the endpoint's model, in tokens: longer transcripts are summarized
    /// and extracted in chunks that fit it.
    #[arg(long, env = "CTXD_OPENAI_CONTEXT_TOKENS", default_value_t = 128_000)]
    pub openai_context_tokens: usize,

    /// Retries of a failed attempt when retrying can help (timeouts, unreachable, 408, 429,
    /// 5xx), with exponential backoff.
    #[arg(long, env = "CTXD_OPENAI_MAX_RETRIES", default_value_t = 2)]
    pub openai_max_retries: u32,

    /// Log format.
    #[arg(long, env = "CTXD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter in tracing's EnvFilter syntax (e.g. `info`, `ctxd=debug`).
    #[arg(long, env = "CTXD_LOG", default_value = "info")]
    pub log: String,
}

/// A configuration that passed validation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Postgres settings; `None` selects the in-memory store.
    pub postgres: Option<PostgresOptions>,
    /// How long to retry the database at start-up.
    pub db_startup_wait: Duration,
    /// Whether to migrate at start-up.
    pub migrate_on_start: bool,
    /// Tenant of calls without a tenant header.
    pub default_tenant: TenantId,
    /// Request limits and defaults.
    pub limits: Limits,
    /// Largest decoded request.
    pub max_request_bytes: usize,
    /// Drain period on shutdown.
    pub shutdown_grace: Duration,
    /// Summarizer and extractor.
    pub ai: AiConfig,
    /// API keys; `None` = auth off (x-tenant-id trusted).
    pub api_keys: Option<Vec<ApiKey>>,
    /// Metrics listener address.
    pub metrics_listen: Option<SocketAddr>,
    /// Maximum client connection age.
    pub max_connection_age: Duration,
    /// Concurrent requests per connection.
    pub concurrency_per_connection: usize,
    /// Open client connections per listener.
    pub max_connections: usize,
    /// Time a new connection has to send its first bytes.
    pub handshake_timeout: Duration,
    /// Deadline of every RPC.
    pub request_timeout: Duration,
    /// Interval of database health probes.
    pub health_probe_interval: Duration,
    /// The retention sweeper's settings.
    pub retention: Retention,
    /// TLS material, when serving over TLS.
    pub tls: Option<TlsFiles>,
}

/// TLS material read at start-up.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// PEM certificate chain.
    pub cert: Vec<u8>,
    /// PEM private key.
    pub key: Vec<u8>,
    /// PEM CA bundle for client certificates (mutual TLS), if required.
    pub client_ca: Option<Vec<u8>>,
}

/// Validated summarizer and extractor settings.
#[derive(Debug, Clone)]
pub struct AiConfig {
    /// Summarizer engine.
    pub summarizer: Engine,
    /// Extractor engine.
    pub extractor: Engine,
    /// Default summary size.
    pub max_summary_tokens: usize,
    /// Background summarization, when enabled.
    pub auto_summarize: Option<AutoSummarize>,
    /// The endpoint, used by whichever engine is `openai`.
    pub openai: OpenAiOptions,
}

impl Config {
    /// Checks every setting; on failure returns all problems, one per entry.
    pub fn validate(&self) -> Result<Settings, Vec<String>> {
        let mut problems = Vec::new();
        let postgres = self.postgres(&mut problems);
        let default_tenant = TenantId::parse(self.default_tenant.clone())
            .map_err(|e| problems.push(format!("CTXD_DEFAULT_TENANT: {e}")))
            .ok();
        let limits = self.limits(&mut problems);
        self.check_server(&mut problems);
        let ai = self.ai(&mut problems);
        let api_keys = self.api_keys(&mut problems);
        let tls = self.tls(&mut problems);
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log) {
            problems.push(format!("CTXD_LOG is not a valid filter: {e}"));
        }
        let Some(default_tenant) = default_tenant.filter(|_| problems.is_empty()) else {
            return Err(problems);
        };
        Ok(Settings {
            listen: self.listen,
            postgres,
            db_startup_wait: Duration::from_secs(self.db_startup_wait_secs),
            migrate_on_start: self.migrate_on_start,
            default_tenant,
            limits,
            max_request_bytes: self.max_request_bytes,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            api_keys,
            metrics_listen: self.metrics_listen,
            max_connection_age: Duration::from_secs(self.max_connection_age_secs),
            concurrency_per_connection: self.concurrency_per_connection,
            max_connections: self.max_connections,
            handshake_timeout: Duration::from_secs(self.handshake_timeout_secs),
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            health_probe_interval: Duration::from_millis(self.health_probe_interval_ms),
            retention: Retention {
                inactive: (self.retention_inactive_secs > 0)
                    .then(|| Duration::from_secs(self.retention_inactive_secs)),
                interval: Duration::from_millis(self.retention_sweep_interval_ms),
                batch: self.retention_batch,
            },
            tls,
            ai,
        })
    }

    /// The database settings (`None`: the in-memory store).
    fn postgres(&self, problems: &mut Vec<String>) -> Option<PostgresOptions> {
        positive(problems, "CTXD_DB_POOL_SIZE", self.db_pool_size as u64);
        positive(
            problems,
            "CTXD_DB_CONNECT_TIMEOUT_SECS",
            self.db_connect_timeout_secs,
        );
        let url = self.database_url.as_ref()?;
        if let Err(e) = url.parse::<tokio_postgres::Config>() {
            problems.push(format!("DATABASE_URL is not a valid PostgreSQL URL: {e}"));
        }
        Some(PostgresOptions {
            url: url.clone(),
            pool_size: self.db_pool_size,
            connect_timeout: Duration::from_secs(self.db_connect_timeout_secs),
            statement_timeout: Duration::from_secs(self.request_timeout_secs),
        })
    }

    /// Request size limits and defaults.
    fn limits(&self, problems: &mut Vec<String>) -> Limits {
        positive(
            problems,
            "CTXD_MAX_MESSAGES_PER_REQUEST",
            self.max_messages_per_request as u64,
        );
        positive(problems, "CTXD_MAX_CONTENT_BYTES", self.max_content_bytes as u64);
        positive(
            problems,
            "CTXD_MAX_ATTACHMENT_BYTES",
            self.max_attachment_bytes as u64,
        );
        positive(problems, "CTXD_MAX_REQUEST_BYTES", self.max_request_bytes as u64);
        positive(
            problems,
            "CTXD_MAX_RESPONSE_BYTES",
            self.max_response_bytes as u64,
        );
        positive(
            problems,
            "CTXD_RESPONSE_MEMORY_MIB",
            self.response_memory_mib as u64,
        );
        if self.max_content_bytes > self.max_request_bytes {
            problems.push("CTXD_MAX_CONTENT_BYTES cannot exceed CTXD_MAX_REQUEST_BYTES".into());
        }
        if self.max_attachment_bytes > self.max_request_bytes {
            problems.push("CTXD_MAX_ATTACHMENT_BYTES cannot exceed CTXD_MAX_REQUEST_BYTES".into());
        }
        Limits {
            append: AppendLimits {
                max_messages_per_request: self.max_messages_per_request,
                max_content_bytes: self.max_content_bytes,
                max_attachment_bytes: self.max_attachment_bytes,
                ..AppendLimits::default()
            },
            default_tokenizer: match self.default_tokenizer {
                TokenizerName::O200kBase => Tokenizer::O200kBase,
                TokenizerName::Cl100kBase => Tokenizer::Cl100kBase,
                TokenizerName::Approx => Tokenizer::Approx,
            },
            max_response_bytes: self.max_response_bytes,
            response_budget_bytes: self.response_memory_mib.saturating_mul(1 << 20),
        }
    }

    /// Connection handling, deadlines and probes.
    fn check_server(&self, problems: &mut Vec<String>) {
        positive(
            problems,
            "CTXD_MAX_CONNECTION_AGE_SECS",
            self.max_connection_age_secs,
        );
        positive(
            problems,
            "CTXD_CONCURRENCY_PER_CONNECTION",
            self.concurrency_per_connection as u64,
        );
        positive(problems, "CTXD_REQUEST_TIMEOUT_SECS", self.request_timeout_secs);
        positive(problems, "CTXD_MAX_CONNECTIONS", self.max_connections as u64);
        positive(
            problems,
            "CTXD_HANDSHAKE_TIMEOUT_SECS",
            self.handshake_timeout_secs,
        );
        positive(
            problems,
            "CTXD_HEALTH_PROBE_INTERVAL_MS",
            self.health_probe_interval_ms,
        );
        positive(
            problems,
            "CTXD_RETENTION_SWEEP_INTERVAL_MS",
            self.retention_sweep_interval_ms,
        );
        positive(problems, "CTXD_RETENTION_BATCH", self.retention_batch as u64);
    }

    /// Summarizer and extractor settings; the endpoint is checked only when an engine uses it.
    fn ai(&self, problems: &mut Vec<String>) -> AiConfig {
        positive(
            problems,
            "CTXD_SUMMARY_MAX_TOKENS",
            self.summary_max_tokens as u64,
        );
        if self.auto_summarize_tokens > 0 {
            positive(
                problems,
                "CTXD_AUTO_SUMMARIZE_CONCURRENCY",
                self.auto_summarize_concurrency as u64,
            );
        }
        let uses_openai = self.summarizer == Engine::OpenAi || self.extractor == Engine::OpenAi;
        if uses_openai {
            let url = &self.openai_base_url;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                problems.push(format!(
                    "CTXD_OPENAI_BASE_URL must be an http(s) URL, got {url:?}"
                ));
            }
            if self.openai_model.trim().is_empty() {
                problems.push("CTXD_OPENAI_MODEL is required with the openai summarizer or extractor".into());
            }
            positive(problems, "CTXD_OPENAI_TIMEOUT_SECS", self.openai_timeout_secs);
            if self.openai_context_tokens < 2_048 {
                problems.push(format!(
                    "CTXD_OPENAI_CONTEXT_TOKENS is {}; a model needs at least 2048 tokens of context \
                     to summarize in chunks",
                    self.openai_context_tokens
                ));
            }
        }
        AiConfig {
            summarizer: self.summarizer,
            extractor: self.extractor,
            max_summary_tokens: self.summary_max_tokens,
            auto_summarize: (self.auto_summarize_tokens > 0).then_some(AutoSummarize {
                threshold: self.auto_summarize_tokens,
                keep_recent_tokens: match self.auto_summarize_keep_tokens {
                    0 => self.auto_summarize_tokens / 2,
                    n => n,
                },
                concurrency: self.auto_summarize_concurrency,
            }),
            openai: OpenAiOptions {
                base_url: self.openai_base_url.clone(),
                model: self.openai_model.clone(),
                api_key: self.openai_api_key.clone().filter(|k| !k.is_empty()),
                timeout: Duration::from_secs(self.openai_timeout_secs),
                max_retries: self.openai_max_retries,
                context_tokens: self.openai_context_tokens,
            },
        }
    }
}

/// Records a problem when a setting that must be positive is 0.
fn positive(problems: &mut Vec<String>, name: &str, value: u64) {
    if value == 0 {
        problems.push(format!("{name} must be greater than 0"));
    }
}

impl Config {
    /// The TLS files, read (`None` without TLS).
    fn tls(&self, problems: &mut Vec<String>) -> Option<TlsFiles> {
        let mut read = |name: &str, path: &std::path::Path| {
            std::fs::read(path)
                .map_err(|e| problems.push(format!("{name} {}: {e}", path.display())))
                .ok()
        };
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let cert = read("CTXD_TLS_CERT", cert);
                let key = read("CTXD_TLS_KEY", key);
                let client_ca = match &self.tls_client_ca {
                    Some(ca) => Some(read("CTXD_TLS_CLIENT_CA", ca)?),
                    None => None,
                };
                Some(TlsFiles {
                    cert: cert?,
                    key: key?,
                    client_ca,
                })
            }
            (None, None) => {
                if self.tls_client_ca.is_some() {
                    problems.push("CTXD_TLS_CLIENT_CA needs CTXD_TLS_CERT and CTXD_TLS_KEY".into());
                }
                None
            }
            _ => {
                problems.push("CTXD_TLS_CERT and CTXD_TLS_KEY go together".into());
                None
            }
        }
    }

    /// The configured API keys (`None` when there are none: auth off).
    fn api_keys(&self, problems: &mut Vec<String>) -> Option<Vec<ApiKey>> {
        let mut entries: Vec<(String, String)> = self
            .api_keys
            .iter()
            .filter(|e| !e.trim().is_empty())
            .map(|e| ("CTXD_API_KEYS".into(), e.clone()))
            .collect();
        if let Some(path) = &self.api_keys_file {
            match std::fs::read_to_string(path) {
                Ok(text) => entries.extend(
                    text.lines()
                        .map(|l| l.split('#').next().unwrap_or_default().trim())
                        .filter(|l| !l.is_empty())
                        .map(|l| (format!("CTXD_API_KEYS_FILE ({})", path.display()), l.to_owned())),
                ),
                Err(e) => problems.push(format!("CTXD_API_KEYS_FILE {}: {e}", path.display())),
            }
        }
        let keys: Vec<ApiKey> = entries
            .into_iter()
            .filter_map(|(source, entry)| {
                ApiKey::parse(&entry)
                    .map_err(|e| problems.push(format!("{source}: {e}")))
                    .ok()
            })
            .collect();
        (!keys.is_empty()).then_some(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        Cli::try_parse_from(std::iter::once("ctxd").chain(args.iter().copied()))
            .unwrap()
            .config
    }

    #[test]
    fn defaults_validate_to_an_in_memory_server_on_50051() {
        let settings = parse(&[]).validate().unwrap();
        assert_eq!(settings.listen.port(), 50051);
        assert!(settings.postgres.is_none());
        assert_eq!(settings.default_tenant.as_str(), "default");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let config = parse(&[
            "--database-url",
            "not a url",
            "--default-tenant",
            "bad/tenant",
            "--max-content-bytes",
            "0",
        ]);
        let problems = config.validate().unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
    }
}
