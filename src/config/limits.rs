//! How much one call may send and receive, and the defaults of what it leaves out.

use clap::ValueEnum;

use super::problem::{ConfigProblem, Problems};
use crate::domain::search::Language;

/// Request and response size limits, and the default tokenizer.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// The largest response one call may answer with: a BuildContext pack with its rendering,
    /// a ListMessages page (cut short with `next_after_sequence` instead), a prepared summary
    /// or extraction request (which then covers the history in steps). Larger packs are
    /// refused with RESOURCE_EXHAUSTED.
    #[arg(
        long,
        env = "CTXD_MAX_RESPONSE_BYTES",
        default_value_t = 16 * 1024 * 1024,
        display_order = 18
    )]
    pub max_response_bytes: usize,

    /// MiB that the messages loaded by all calls at once, their responses until the clients
    /// have read them (at most CTXD_REQUEST_TIMEOUT_SECS) and the request bodies being received
    /// may hold; one call may hold twice CTXD_MAX_RESPONSE_BYTES. A call that would pass either
    /// is refused with RESOURCE_EXHAUSTED. Keep it well under the container's memory limit.
    #[arg(
        long,
        env = "CTXD_RESPONSE_MEMORY_MIB",
        default_value_t = 256,
        display_order = 19
    )]
    pub response_memory_mib: usize,

    /// The percentage of CTXD_RESPONSE_MEMORY_MIB that one tenant's calls (their loaded
    /// messages, unread responses and request bodies) may hold, so that one tenant's clients
    /// cannot leave the others none. 100 for a single-tenant deployment.
    #[arg(
        long,
        env = "CTXD_TENANT_MEMORY_PERCENT",
        default_value_t = 50,
        value_parser = clap::value_parser!(u8).range(1..=100),
        display_order = 19
    )]
    pub tenant_memory_percent: u8,

    /// Messages accepted in one AppendMessage request.
    #[arg(
        long,
        env = "CTXD_MAX_MESSAGES_PER_REQUEST",
        default_value_t = 100,
        display_order = 24
    )]
    pub max_messages_per_request: usize,

    /// Bytes of one message's content (also tool-call arguments and metadata values).
    #[arg(
        long,
        env = "CTXD_MAX_CONTENT_BYTES",
        default_value_t = 1024 * 1024,
        display_order = 25
    )]
    pub max_content_bytes: usize,

    /// Bytes of one attachment's inline data or URI.
    #[arg(
        long,
        env = "CTXD_MAX_ATTACHMENT_BYTES",
        default_value_t = 8 * 1024 * 1024,
        display_order = 26
    )]
    pub max_attachment_bytes: usize,

    /// Bytes of one decoded gRPC request; larger requests get RESOURCE_EXHAUSTED.
    #[arg(
        long,
        env = "CTXD_MAX_REQUEST_BYTES",
        default_value_t = 16 * 1024 * 1024,
        display_order = 27
    )]
    pub max_request_bytes: usize,

    /// Messages one ForkConversation may copy (its `through_sequence`): a fork copies the
    /// prefix's rows, so this bounds what one request makes the database write.
    #[arg(
        long,
        env = "CTXD_MAX_FORK_MESSAGES",
        default_value_t = 10_000,
        display_order = 28
    )]
    pub max_fork_messages: usize,

    /// Tokenizer of requests that leave it unspecified.
    #[arg(
        long,
        env = "CTXD_DEFAULT_TOKENIZER",
        value_enum,
        default_value_t = TokenizerName::O200kBase,
        display_order = 29
    )]
    pub default_tokenizer: TokenizerName,

    /// Tokenizers every append counts, comma-separated (o200k_base, cl100k_base, approx). The
    /// default tokenizer and the approximation are always counted; a pack or summary that
    /// needs another counts it when it first reads a message, and stores the count
    /// (ListMessages shows a count not made yet as absent).
    /// Before this setting existed every append counted all three: during a rolling upgrade
    /// from such a version, set all three until no older replica runs.
    #[arg(
        long,
        env = "CTXD_TOKENIZERS",
        value_enum,
        value_delimiter = ',',
        display_order = 29
    )]
    pub tokenizers: Vec<TokenizerName>,

    /// Language SearchMessages and recall stem words in (PostgreSQL's text search
    /// configuration of that name; its stop words): simple (lower case only, for text in no
    /// single language), danish, dutch, english, french, german, hungarian, italian,
    /// norwegian, portuguese, russian, spanish, swedish or turkish. Applies to messages
    /// appended after it is set and to queries: change it only with a new database.
    #[arg(
        long,
        env = "CTXD_SEARCH_LANGUAGE",
        default_value = "english",
        display_order = 30
    )]
    pub search_language: String,
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

/// The validated limits.
#[derive(Debug, Clone)]
pub struct LimitOptions {
    /// Messages in one AppendMessage request.
    pub max_messages_per_request: usize,
    /// Bytes of one message's content.
    pub max_content_bytes: usize,
    /// Bytes of one attachment.
    pub max_attachment_bytes: usize,
    /// Bytes of one decoded request.
    pub max_request_bytes: usize,
    /// Messages one fork may copy.
    pub max_fork_messages: usize,
    /// Bytes of one response.
    pub max_response_bytes: usize,
    /// Bytes all calls' loaded messages and unread responses may hold at once.
    pub response_memory_bytes: usize,
    /// The percentage of it one tenant may hold.
    pub tenant_memory_percent: usize,
    /// Tokenizer of requests that leave it unspecified.
    pub default_tokenizer: TokenizerName,
    /// Tokenizers every append counts besides the default one.
    pub tokenizers: Vec<TokenizerName>,
    /// How search stems words.
    pub search_language: Language,
}

impl LimitArgs {
    /// Checks that every limit is positive and that no per-field limit exceeds the request's.
    pub fn validate(&self) -> Result<LimitOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        for (setting, value) in [
            ("CTXD_MAX_MESSAGES_PER_REQUEST", self.max_messages_per_request),
            ("CTXD_MAX_CONTENT_BYTES", self.max_content_bytes),
            ("CTXD_MAX_ATTACHMENT_BYTES", self.max_attachment_bytes),
            ("CTXD_MAX_REQUEST_BYTES", self.max_request_bytes),
            ("CTXD_MAX_RESPONSE_BYTES", self.max_response_bytes),
            ("CTXD_RESPONSE_MEMORY_MIB", self.response_memory_mib),
            ("CTXD_MAX_FORK_MESSAGES", self.max_fork_messages),
        ] {
            problems.positive(setting, value as u64);
        }
        for (setting, value) in [
            ("CTXD_MAX_CONTENT_BYTES", self.max_content_bytes),
            ("CTXD_MAX_ATTACHMENT_BYTES", self.max_attachment_bytes),
        ] {
            if value > self.max_request_bytes {
                problems.push(ConfigProblem::AboveRequestLimit { setting });
            }
        }
        let search_language = match self.search_language.parse::<Language>() {
            Ok(language) => language,
            Err(reason) => {
                problems.push(ConfigProblem::SearchLanguage { reason });
                Language::default()
            }
        };
        problems.finish(LimitOptions {
            max_messages_per_request: self.max_messages_per_request,
            max_content_bytes: self.max_content_bytes,
            max_attachment_bytes: self.max_attachment_bytes,
            max_request_bytes: self.max_request_bytes,
            max_fork_messages: self.max_fork_messages,
            max_response_bytes: self.max_response_bytes,
            response_memory_bytes: self.response_memory_mib.saturating_mul(1 << 20),
            tenant_memory_percent: usize::from(self.tenant_memory_percent),
            default_tokenizer: self.default_tokenizer,
            tokenizers: self.tokenizers.clone(),
            search_language,
        })
    }
}
