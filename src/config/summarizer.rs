//! Which engines summarize and extract working memory, and when summaries run on their own.

use clap::ValueEnum;

use super::{
    openai::{OpenAiArgs, OpenAiEndpoint},
    problem::{ConfigProblem, Problems},
};

/// Summarizer, extractor and background summarization settings.
#[derive(Debug, Clone, clap::Args)]
pub struct SummarizerArgs {
    /// Summarizer of SUMMARIZE_MODE_SERVER: `extractive` (embedded, no network) or `openai`.
    #[arg(
        long,
        env = "CTXD_SUMMARIZER",
        value_enum,
        default_value_t = Engine::Embedded,
        display_order = 30
    )]
    pub summarizer: Engine,

    /// Working memory extractor: `rules` (embedded, no network) or `openai`.
    #[arg(
        long,
        env = "CTXD_EXTRACTOR",
        value_enum,
        default_value_t = Engine::Embedded,
        display_order = 31
    )]
    pub extractor: Engine,

    /// Default `max_summary_tokens` of Summarize.
    #[arg(
        long,
        env = "CTXD_SUMMARY_MAX_TOKENS",
        default_value_t = 1_000,
        display_order = 32
    )]
    pub summary_max_tokens: usize,

    /// Background summarization: fold a conversation's history in once its unsummarized part
    /// passes this many tokens (0 = off). One replica at a time per conversation.
    #[arg(
        long,
        env = "CTXD_AUTO_SUMMARIZE_TOKENS",
        default_value_t = 0,
        display_order = 33
    )]
    pub auto_summarize_tokens: usize,

    /// Tokens background summarization leaves verbatim (0 = half of CTXD_AUTO_SUMMARIZE_TOKENS).
    #[arg(
        long,
        env = "CTXD_AUTO_SUMMARIZE_KEEP_TOKENS",
        default_value_t = 0,
        display_order = 34
    )]
    pub auto_summarize_keep_tokens: usize,

    /// Background summaries one replica runs at once. A check point reached while that many
    /// run is skipped; the conversation's next check point tries again.
    #[arg(
        long,
        env = "CTXD_AUTO_SUMMARIZE_CONCURRENCY",
        default_value_t = 16,
        display_order = 35
    )]
    pub auto_summarize_concurrency: usize,

    /// The endpoint an `openai` engine calls.
    #[command(flatten)]
    pub openai: OpenAiArgs,
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

/// The validated summarizer and extractor settings.
#[derive(Debug, Clone)]
pub struct SummarizerOptions {
    /// Summarizer engine.
    pub summarizer: Engine,
    /// Extractor engine.
    pub extractor: Engine,
    /// Default summary size.
    pub max_summary_tokens: usize,
    /// Background summarization, when enabled.
    pub auto_summarize: Option<AutoSummarizeOptions>,
    /// The endpoint, used by whichever engine is `openai`.
    pub openai: OpenAiEndpoint,
}

impl SummarizerOptions {
    /// Whether either engine calls the endpoint.
    pub fn uses_openai(&self) -> bool {
        self.summarizer == Engine::OpenAi || self.extractor == Engine::OpenAi
    }
}

/// When background summaries run and how many at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoSummarizeOptions {
    /// Unsummarized tokens that trigger a summary.
    pub threshold: usize,
    /// Tokens left verbatim.
    pub keep_recent_tokens: usize,
    /// Background summaries one replica runs at once.
    pub concurrency: usize,
}

impl SummarizerArgs {
    /// Checks the engines' settings; the endpoint only when an engine uses it, so the embedded
    /// defaults never trip over an endpoint nobody calls.
    pub fn validate(&self) -> Result<SummarizerOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        problems.positive("CTXD_SUMMARY_MAX_TOKENS", self.summary_max_tokens as u64);
        if self.auto_summarize_tokens > 0 {
            problems.positive(
                "CTXD_AUTO_SUMMARIZE_CONCURRENCY",
                self.auto_summarize_concurrency as u64,
            );
        }
        if self.summarizer == Engine::OpenAi || self.extractor == Engine::OpenAi {
            self.openai.check(&mut problems);
        }
        problems.finish(SummarizerOptions {
            summarizer: self.summarizer,
            extractor: self.extractor,
            max_summary_tokens: self.summary_max_tokens,
            auto_summarize: (self.auto_summarize_tokens > 0).then_some(AutoSummarizeOptions {
                threshold: self.auto_summarize_tokens,
                keep_recent_tokens: match self.auto_summarize_keep_tokens {
                    0 => self.auto_summarize_tokens / 2,
                    n => n,
                },
                concurrency: self.auto_summarize_concurrency,
            }),
            openai: self.openai.endpoint(),
        })
    }
}
