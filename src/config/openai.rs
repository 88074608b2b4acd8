//! The OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LiteLLM) an `openai` engine calls.

use std::time::Duration;

use super::problem::{ConfigProblem, Problems};

/// The smallest model context a transcript can be summarized in chunks with.
const MIN_CONTEXT_TOKENS: usize = 2_048;

/// Endpoint, model and retry settings.
#[derive(Debug, Clone, clap::Args)]
pub struct OpenAiArgs {
    /// Base URL of the OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LiteLLM), up to `/v1`.
    #[arg(
        long,
        env = "CTXD_OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1",
        display_order = 36
    )]
    pub openai_base_url: String,

    /// Model of the OpenAI-compatible endpoint.
    #[arg(
        long,
        env = "CTXD_OPENAI_MODEL",
        default_value = "gpt-4o-mini",
        display_order = 37
    )]
    pub openai_model: String,

    /// API key of the OpenAI-compatible endpoint (sent as a bearer token), if it needs one.
    #[arg(long, env = "CTXD_OPENAI_API_KEY", hide_env_values = true, display_order = 38)]
    pub openai_api_key: Option<String>,

    /// Seconds one attempt at the endpoint may take. All attempts of a call also end before
    /// the call's deadline (the caller's grpc-timeout or CTXD_REQUEST_TIMEOUT_SECS).
    #[arg(
        long,
        env = "CTXD_OPENAI_TIMEOUT_SECS",
        default_value_t = 60,
        display_order = 39
    )]
    pub openai_timeout_secs: u64,

    /// Context window of the endpoint's model, in tokens: longer transcripts are summarized
    /// and extracted in chunks that fit it.
    #[arg(
        long,
        env = "CTXD_OPENAI_CONTEXT_TOKENS",
        default_value_t = 128_000,
        display_order = 40
    )]
    pub openai_context_tokens: usize,

    /// Retries of a failed attempt when retrying can help (timeouts, unreachable, 408, 429,
    /// 5xx), with exponential backoff.
    #[arg(
        long,
        env = "CTXD_OPENAI_MAX_RETRIES",
        default_value_t = 2,
        display_order = 41
    )]
    pub openai_max_retries: u32,
}

/// The endpoint's settings.
#[derive(Debug, Clone)]
pub struct OpenAiEndpoint {
    /// Base URL up to the API version.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token, if the endpoint needs one (an empty one counts as none).
    pub api_key: Option<String>,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The model's context window in tokens.
    pub context_tokens: usize,
}

impl OpenAiArgs {
    /// Records what would stop an engine from calling the endpoint.
    pub(super) fn check(&self, problems: &mut Problems) {
        let url = &self.openai_base_url;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            problems.push(ConfigProblem::OpenAiBaseUrl { url: url.clone() });
        }
        if self.openai_model.trim().is_empty() {
            problems.push(ConfigProblem::OpenAiModelMissing);
        }
        problems.positive("CTXD_OPENAI_TIMEOUT_SECS", self.openai_timeout_secs);
        if self.openai_context_tokens < MIN_CONTEXT_TOKENS {
            problems.push(ConfigProblem::OpenAiContextTooSmall {
                tokens: self.openai_context_tokens,
            });
        }
    }

    /// The endpoint as configured (checked by [`Self::check`] when an engine uses it).
    pub(super) fn endpoint(&self) -> OpenAiEndpoint {
        OpenAiEndpoint {
            base_url: self.openai_base_url.clone(),
            model: self.openai_model.clone(),
            api_key: self.openai_api_key.clone().filter(|k| !k.is_empty()),
            timeout: Duration::from_secs(self.openai_timeout_secs),
            max_retries: self.openai_max_retries,
            context_tokens: self.openai_context_tokens,
        }
    }
}
