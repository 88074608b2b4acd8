//! What can be wrong with a configuration, one typed problem per mistake, so start-up lists
//! them all at once instead of stopping at the first.

use std::path::PathBuf;

/// Every problem a configuration has; start-up refuses to serve with any.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration ({} problems)", problems.len())]
pub struct ConfigError {
    /// The problems, in the order the groups were checked.
    pub problems: Vec<ConfigProblem>,
}

/// One setting, or one combination of settings, that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// A count, size or duration that must not be 0 is.
    #[error("{setting} must be greater than 0")]
    NotPositive {
        /// The environment variable.
        setting: &'static str,
    },
    /// A per-field size limit above the whole request's limit could never be reached.
    #[error("{setting} cannot exceed CTXD_MAX_REQUEST_BYTES")]
    AboveRequestLimit {
        /// The environment variable.
        setting: &'static str,
    },
    /// DATABASE_URL does not parse.
    #[error("DATABASE_URL is not a valid PostgreSQL URL")]
    DatabaseUrl {
        /// What the PostgreSQL client objects to.
        #[source]
        source: tokio_postgres::Error,
    },
    /// CTXD_SEARCH_LANGUAGE names no language search knows.
    #[error("CTXD_SEARCH_LANGUAGE: {reason}")]
    SearchLanguage {
        /// The languages there are.
        reason: String,
    },
    /// CTXD_DEFAULT_TENANT is not a tenant id.
    #[error("CTXD_DEFAULT_TENANT: {reason}")]
    DefaultTenant {
        /// What a tenant id must look like.
        reason: String,
    },
    /// An API key entry does not parse.
    #[error("{origin}")]
    ApiKey {
        /// Where the entry came from.
        origin: KeyOrigin,
        /// What is wrong with it.
        #[source]
        source: KeyEntryError,
    },
    /// A CTXD_CORS_ORIGINS entry is not an origin.
    #[error("CTXD_CORS_ORIGINS: `{origin}` is not an origin (`https://host[:port]`) or `*`")]
    CorsOrigin {
        /// The entry.
        origin: String,
    },
    /// A file named by a setting cannot be read.
    #[error("{setting} {}", path.display())]
    Unreadable {
        /// The environment variable.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// Only one of the certificate and its key is set.
    #[error("CTXD_TLS_CERT and CTXD_TLS_KEY go together")]
    TlsHalfConfigured,
    /// Client certificates are asked for on a server without TLS.
    #[error("CTXD_TLS_CLIENT_CA needs CTXD_TLS_CERT and CTXD_TLS_KEY")]
    ClientCaWithoutTls,
    /// CTXD_EMBEDDINGS_URL is not an HTTP(S) URL.
    #[error("CTXD_EMBEDDINGS_URL `{url}` is not an http:// or https:// URL")]
    EmbeddingsUrl {
        /// The configured value.
        url: String,
    },
    /// CTXD_EMBEDDINGS_DIMENSIONS is larger than search keeps.
    #[error("CTXD_EMBEDDINGS_DIMENSIONS {dimensions} is above {max}")]
    EmbeddingDimensions {
        /// The configured value.
        dimensions: usize,
        /// The most there may be.
        max: usize,
    },
    /// The OpenAI-compatible endpoint is not an HTTP(S) URL.
    #[error("CTXD_OPENAI_BASE_URL must be an http(s) URL, got {url:?}")]
    OpenAiBaseUrl {
        /// The configured value.
        url: String,
    },
    /// An engine uses the endpoint, but no model is named.
    #[error("CTXD_OPENAI_MODEL is required with the openai summarizer or extractor")]
    OpenAiModelMissing,
    /// The model's context is too small to summarize a transcript in chunks.
    #[error(
        "CTXD_OPENAI_CONTEXT_TOKENS is {tokens}; a model needs at least 2048 tokens of context to \
         summarize in chunks"
    )]
    OpenAiContextTooSmall {
        /// The configured value.
        tokens: usize,
    },
    /// CTXD_LOG is not a tracing filter.
    #[error("CTXD_LOG is not a valid filter")]
    LogFilter {
        /// What the filter parser objects to.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// An OpenTelemetry setting ctxd cannot follow.
    #[error("{setting}: {reason}")]
    Traces {
        /// The environment variable.
        setting: &'static str,
        /// What it may be.
        reason: &'static str,
    },
}

/// Where an API key entry was configured, so an operator finds the bad one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOrigin {
    /// The CTXD_API_KEYS list.
    List,
    /// A line of the CTXD_API_KEYS_FILE file.
    File(PathBuf),
}

impl std::fmt::Display for KeyOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyOrigin::List => f.write_str("CTXD_API_KEYS"),
            KeyOrigin::File(path) => write!(f, "CTXD_API_KEYS_FILE ({})", path.display()),
        }
    }
}

/// Why an API key entry (`sha256hex=tenant`) does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyEntryError {
    /// No separator between hash and tenant.
    #[error("API key entry {entry:?} is not `sha256hex=tenant`")]
    NotAPair {
        /// The entry as configured (a hash, never a key).
        entry: String,
    },
    /// The hash is not a SHA-256 in hex.
    #[error("an API key hash must be 64 hex characters (SHA-256)")]
    NotSha256,
    /// The tenant is not a tenant id.
    #[error("{reason}")]
    Tenant {
        /// What a tenant id must look like.
        reason: String,
    },
}

/// The problems one group found; a group checks every field before giving up, so an operator
/// fixes them all in one go.
#[derive(Debug, Default)]
pub(super) struct Problems(Vec<ConfigProblem>);

impl Problems {
    pub(super) fn push(&mut self, problem: ConfigProblem) {
        self.0.push(problem);
    }

    /// Records `setting` when it is 0.
    pub(super) fn positive(&mut self, setting: &'static str, value: u64) {
        if value == 0 {
            self.push(ConfigProblem::NotPositive { setting });
        }
    }

    /// The group's options when it found nothing wrong, else its problems.
    pub(super) fn finish<T>(self, options: T) -> Result<T, Vec<ConfigProblem>> {
        match self.0.is_empty() {
            true => Ok(options),
            false => Err(self.0),
        }
    }

    /// The problems, for a group that cannot build its options.
    pub(super) fn into_problems(self) -> Vec<ConfigProblem> {
        self.0
    }

    /// Keeps one group's problems beside the others'; its options when it had none.
    pub(super) fn take<T>(&mut self, group: Result<T, Vec<ConfigProblem>>) -> Option<T> {
        group.map_err(|problems| self.0.extend(problems)).ok()
    }

    /// Every problem found, when there is one.
    pub(super) fn into_error(self) -> ConfigError {
        ConfigError { problems: self.0 }
    }
}
