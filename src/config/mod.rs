//! Configuration from flags and environment. Each group of settings checks its own fields and
//! yields a plain options type; start-up ([`crate::startup`]) turns those into the layers'
//! types, so configuration depends on no layer. Every problem is listed at once.
//!
//! The groups' `display_order`s keep `ctxd --help` listing the settings in the order operators
//! know, which interleaves the groups.

use std::net::SocketAddr;

use clap::{Parser, Subcommand};

mod auth;
mod changes;
mod database;
mod embeddings;
mod limits;
mod openai;
mod problem;
mod retention;
mod server;
mod summarizer;
mod telemetry;

pub use auth::{ApiKey, AuthArgs, AuthOptions, KeyError};
pub use changes::{ChangeArgs, ChangeOptions};
pub use database::{DatabaseArgs, DatabaseOptions};
pub use embeddings::{EmbeddingArgs, EmbeddingEndpoint};
pub use limits::{LimitArgs, LimitOptions, TokenizerName};
pub use openai::{OpenAiArgs, OpenAiEndpoint};
pub use problem::{ConfigError, ConfigProblem, KeyEntryError, KeyOrigin};
pub use retention::{RetentionArgs, RetentionOptions};
pub use server::{ServerArgs, ServerOptions, TlsFiles};
pub use summarizer::{AutoSummarizeOptions, Engine, SummarizerArgs, SummarizerOptions};
pub use telemetry::{
    LogFormatName, ParentlessSampler, TelemetryArgs, TelemetryOptions, TraceExport, TraceProtocol,
    TraceSampler,
};

use problem::Problems;

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

/// Every setting, with its flag, environment variable and default, by group.
#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// Listener, TLS, connections, deadlines.
    #[command(flatten)]
    pub server: ServerArgs,
    /// PostgreSQL, or memory.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Request and response sizes.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Deleting expired conversations.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// The change feed.
    #[command(flatten)]
    pub changes: ChangeArgs,
    /// Summarizer, extractor and their endpoint.
    #[command(flatten)]
    pub summarizer: SummarizerArgs,
    /// Semantic search's embeddings endpoint.
    #[command(flatten)]
    pub embeddings: EmbeddingArgs,
    /// API keys and the default tenant.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Logs and metrics.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
}

/// A configuration that passed validation, one options value per group.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Listener, TLS, connections, deadlines.
    pub server: ServerOptions,
    /// PostgreSQL, or memory.
    pub database: DatabaseOptions,
    /// Request and response sizes.
    pub limits: LimitOptions,
    /// Deleting expired conversations.
    pub retention: RetentionOptions,
    /// The change feed.
    pub changes: ChangeOptions,
    /// Summarizer, extractor and their endpoint.
    pub summarizer: SummarizerOptions,
    /// Semantic search's embeddings endpoint, when configured.
    pub embeddings: Option<EmbeddingEndpoint>,
    /// API keys and the default tenant.
    pub auth: AuthOptions,
    /// Logs and metrics.
    pub telemetry: TelemetryOptions,
}

impl Config {
    /// Checks every group; on failure returns every problem of every group.
    pub fn validate(&self) -> Result<Settings, ConfigError> {
        let mut problems = Problems::default();
        let server = problems.take(self.server.validate());
        let database = problems.take(self.database.validate());
        let limits = problems.take(self.limits.validate());
        let retention = problems.take(self.retention.validate());
        let changes = problems.take(self.changes.validate());
        let summarizer = problems.take(self.summarizer.validate());
        let embeddings = problems.take(self.embeddings.validate());
        let auth = problems.take(self.auth.validate());
        let telemetry = problems.take(self.telemetry.validate());
        let (
            Some(server),
            Some(database),
            Some(limits),
            Some(retention),
            Some(changes),
            Some(summarizer),
            Some(embeddings),
            Some(auth),
            Some(telemetry),
        ) = (
            server, database, limits, retention, changes, summarizer, embeddings, auth, telemetry,
        )
        else {
            return Err(problems.into_error());
        };
        Ok(Settings {
            server,
            database,
            limits,
            retention,
            changes,
            summarizer,
            embeddings,
            auth,
            telemetry,
        })
    }
}

impl Settings {
    /// Whether `/inspect` is served: CTXD_INSPECTOR when set, else only in the development
    /// default (the in-memory store without API keys), so a deployment opts in.
    pub fn inspector(&self) -> bool {
        self.server
            .inspector
            .unwrap_or(self.database.url.is_none() && self.auth.api_keys.is_empty())
    }
}

#[cfg(test)]
mod tests;
