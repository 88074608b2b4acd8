//! What the service is configured with: request limits and defaults, the summarizer and
//! extractor, background summarization. Plain values the composition root fills in.

use crate::{
    domain::tokenize::Tokenizer,
    domain::{AppendLimits, search::Language, token_counts::Tokenizers},
    models::summarize::{Extractor, Summarizer},
    runtime::response_budget::ResponseBudget,
};

/// Limits and defaults of requests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Size limits of AppendMessage (also applied to BuildContext's pending messages and
    /// other caller-sent text).
    pub append: AppendLimits,
    /// Tokenizer used when a request leaves it unspecified.
    pub default_tokenizer: Tokenizer,
    /// Tokenizers every append counts (`CTXD_TOKENIZERS`, with the default tokenizer and the
    /// approximation always in); a read counts the others when it first needs them.
    pub counted_tokenizers: Tokenizers,
    /// The largest response a call may answer with (BuildContext's pack and rendering,
    /// ListMessages' page, a prepared request).
    pub max_response_bytes: usize,
    /// The memory all calls' loaded messages and responses may hold at once.
    pub response_budget_bytes: usize,
    /// The percentage of it one tenant's calls may hold.
    pub tenant_memory_percent: usize,
    /// Messages one fork may copy.
    pub max_fork_messages: usize,
    /// How search stems words (`CTXD_SEARCH_LANGUAGE`).
    pub search_language: Language,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            append: AppendLimits::default(),
            default_tokenizer: Tokenizer::O200kBase,
            counted_tokenizers: Tokenizers::NONE.with(Tokenizer::O200kBase),
            max_response_bytes: 16 << 20,
            response_budget_bytes: 256 << 20,
            tenant_memory_percent: 50,
            max_fork_messages: 10_000,
            search_language: Language::default(),
        }
    }
}

impl Limits {
    /// The replica's [`ResponseBudget`]: the configured total, for one call twice its largest
    /// response (the messages it loads, then the response and its encoding), for one tenant
    /// its share.
    pub fn response_budget(&self) -> ResponseBudget {
        ResponseBudget::new(
            self.response_budget_bytes,
            self.max_response_bytes.saturating_mul(2),
        )
        .with_tenant_share(self.tenant_memory_percent)
    }
}

/// The summarizer and extractor the service runs, and the default summary size.
#[derive(Debug, Clone)]
pub struct AiSettings {
    /// Runs SUMMARIZE_MODE_SERVER.
    pub summarizer: Summarizer,
    /// Refreshes working memory.
    pub extractor: Extractor,
    /// `max_summary_tokens` when a request leaves it at 0.
    pub max_summary_tokens: usize,
    /// Background summarization, when enabled.
    pub auto_summarize: Option<AutoSummarize>,
    /// The model context PREPARE's requests fit (CTXD_OPENAI_CONTEXT_TOKENS).
    pub context_tokens: usize,
    /// Semantic search's embeddings endpoint, when configured.
    pub embedder: Option<std::sync::Arc<crate::models::embeddings::Embedder>>,
}

impl Default for AiSettings {
    fn default() -> Self {
        Self {
            summarizer: Summarizer::Extractive,
            extractor: Extractor::Rules,
            max_summary_tokens: 1_000,
            auto_summarize: None,
            context_tokens: 128_000,
            embedder: None,
        }
    }
}

/// Background summarization: when a conversation's unsummarized history passes `threshold`
/// tokens, one replica folds it in, keeping `keep_recent_tokens` verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoSummarize {
    /// Unsummarized tokens that trigger a summary.
    pub threshold: usize,
    /// Tokens left verbatim.
    pub keep_recent_tokens: usize,
    /// Background summaries this replica runs at once; a check point reached while that many
    /// run is skipped (the next one checks again).
    pub concurrency: usize,
}
