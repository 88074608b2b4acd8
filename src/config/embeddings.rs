//! The OpenAI-compatible `/embeddings` endpoint that semantic search calls (docs/design.md,
//! "Recall"). Off unless CTXD_EMBEDDINGS_URL is set: search is then lexical alone.

use std::time::Duration;

use super::problem::{ConfigProblem, Problems};

/// The most dimensions a configured vector may have.
const MAX_DIMENSIONS: usize = 4_096;

/// Endpoint, model and prefixes of semantic search.
#[derive(Debug, Clone, clap::Args)]
pub struct EmbeddingArgs {
    /// Base URL of an OpenAI-compatible embeddings endpoint up to `/v1` (OpenAI, llama.cpp
    /// `--embedding`, Ollama, vLLM, TEI). Set, messages are embedded after append and search
    /// fuses lexical and semantic results; unset (the default), search is lexical.
    #[arg(long, env = "CTXD_EMBEDDINGS_URL", display_order = 44)]
    pub embeddings_url: Option<String>,

    /// Embedding model of that endpoint.
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_MODEL",
        default_value = "text-embedding-3-small",
        display_order = 45
    )]
    pub embeddings_model: String,

    /// API key of the embeddings endpoint (sent as a bearer token), if it needs one.
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_API_KEY",
        hide_env_values = true,
        display_order = 46
    )]
    pub embeddings_api_key: Option<String>,

    /// Dimensions to ask for (`dimensions`; 0 = the model's own). Vectors of another size are
    /// refused.
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_DIMENSIONS",
        default_value_t = 0,
        display_order = 47
    )]
    pub embeddings_dimensions: usize,

    /// Text put before a query (e5 models: `query: `).
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_QUERY_PREFIX",
        default_value = "",
        display_order = 48
    )]
    pub embeddings_query_prefix: String,

    /// Text put before a message's text (e5 models: `passage: `).
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_PASSAGE_PREFIX",
        default_value = "",
        display_order = 49
    )]
    pub embeddings_passage_prefix: String,

    /// Seconds one request to the embeddings endpoint may take. A search whose query is not
    /// embedded in time is answered lexically.
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_TIMEOUT_SECS",
        default_value_t = 10,
        display_order = 50
    )]
    pub embeddings_timeout_secs: u64,

    /// Milliseconds a search (SearchMessages, BuildContext's recall) waits for its query's
    /// vector. Past it, or when the call's deadline leaves less, the search answers lexically
    /// (counted in `ctxd_search_lexical_fallback_total`): a slow or hanging endpoint never
    /// holds a search up for longer.
    #[arg(
        long,
        env = "CTXD_EMBEDDINGS_QUERY_TIMEOUT_MS",
        default_value_t = 250,
        display_order = 50
    )]
    pub embeddings_query_timeout_ms: u64,
}

/// The validated settings: `None` when semantic search is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingEndpoint {
    /// Base URL up to the API version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token, if the endpoint needs one.
    pub api_key: Option<String>,
    /// Dimensions asked for (`dimensions`), when set; the model's own otherwise.
    pub dimensions: Option<usize>,
    /// Put before a query's text (e5: `query: `).
    pub query_prefix: String,
    /// Put before a message chunk's text (e5: `passage: `).
    pub passage_prefix: String,
    /// Timeout of one request.
    pub timeout: Duration,
    /// How long a search waits for its query's vector before answering lexically.
    pub query_timeout: Duration,
}

impl EmbeddingArgs {
    /// Checks the endpoint when one is set.
    pub fn validate(&self) -> Result<Option<EmbeddingEndpoint>, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        let Some(url) = self.embeddings_url.clone().filter(|u| !u.trim().is_empty()) else {
            return problems.finish(None);
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            problems.push(ConfigProblem::EmbeddingsUrl { url: url.clone() });
        }
        if self.embeddings_model.trim().is_empty() {
            problems.push(ConfigProblem::NotPositive {
                setting: "CTXD_EMBEDDINGS_MODEL (length)",
            });
        }
        if self.embeddings_dimensions > MAX_DIMENSIONS {
            problems.push(ConfigProblem::EmbeddingDimensions {
                dimensions: self.embeddings_dimensions,
                max: MAX_DIMENSIONS,
            });
        }
        problems.positive("CTXD_EMBEDDINGS_TIMEOUT_SECS", self.embeddings_timeout_secs);
        problems.positive(
            "CTXD_EMBEDDINGS_QUERY_TIMEOUT_MS",
            self.embeddings_query_timeout_ms,
        );
        problems.finish(Some(EmbeddingEndpoint {
            base_url: url,
            model: self.embeddings_model.clone(),
            api_key: self.embeddings_api_key.clone().filter(|k| !k.is_empty()),
            dimensions: (self.embeddings_dimensions > 0).then_some(self.embeddings_dimensions),
            query_prefix: self.embeddings_query_prefix.clone(),
            passage_prefix: self.embeddings_passage_prefix.clone(),
            timeout: Duration::from_secs(self.embeddings_timeout_secs),
            query_timeout: Duration::from_millis(self.embeddings_query_timeout_ms),
        }))
    }
}
