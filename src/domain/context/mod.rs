//! Context assembly: what goes into the next LLM call, within a token budget, never splitting a
//! tool call from its results. Pure: the store feeds the log's tail page by page (newest first)
//! into a [`ContextPacker`], which says when it has seen enough.

pub mod anchor;
#[cfg(test)]
mod band_tests;
pub mod cost;
mod pack;
pub mod pending;
pub mod recall;
pub mod render;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

pub use super::{format::Format, token_counts::TokenCounts};
pub use pack::{CLOSING_TURN, ContextPacker, PLACEHOLDER_TURN, PageRequest, initial_page_limit};

use super::{
    ids::{ConversationId, Sequence},
    message::{Message, Role, StoredMessage},
    violation::Violations,
    working_memory::WorkingMemory,
};
use crate::domain::tokenize::Tokenizer;

/// Largest accepted `max_tokens`: above every model's context window, and a bound on how much
/// of a log one BuildContext reads.
pub const MAX_BUDGET_TOKENS: u32 = 10_000_000;

/// A token budget: the whole pack must fit in `max_tokens - reserve_output_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBudget {
    max_tokens: u32,
    reserve_output_tokens: u32,
    /// Cap on history messages, if any.
    pub max_messages: Option<u32>,
    /// Cap on history turns (a user message and what answers it), if any.
    pub max_turns: Option<u32>,
}

impl TokenBudget {
    /// Checks the budget fields; `field` prefixes violations (e.g. `budget`).
    pub fn parse(
        max_tokens: u32,
        reserve_output_tokens: u32,
        max_messages: u32,
        max_turns: u32,
    ) -> Result<Self, Violations> {
        let mut v = Violations::default();
        if max_tokens == 0 {
            v.add(
                "budget.max_tokens",
                "max_tokens is required and must be greater than 0",
            );
        } else if max_tokens > MAX_BUDGET_TOKENS {
            v.add(
                "budget.max_tokens",
                format!("{max_tokens} is more than any model's context; the limit is {MAX_BUDGET_TOKENS}"),
            );
        } else if reserve_output_tokens >= max_tokens {
            v.add(
                "budget.reserve_output_tokens",
                format!("reserve_output_tokens ({reserve_output_tokens}) must be less than max_tokens ({max_tokens})"),
            );
        }
        let optional = |n: u32| (n > 0).then_some(n);
        v.into_result(Self {
            max_tokens,
            reserve_output_tokens,
            max_messages: optional(max_messages),
            max_turns: optional(max_turns),
        })
    }

    /// Tokens available to the pack.
    pub fn available(&self) -> usize {
        (self.max_tokens - self.reserve_output_tokens) as usize
    }

    /// This budget with `tokens` more kept out of the pack (less than what is available).
    pub fn keeping(&self, tokens: usize) -> Self {
        let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        Self {
            reserve_output_tokens: (self.reserve_output_tokens.saturating_add(tokens))
                .min(self.max_tokens - 1),
            ..*self
        }
    }
}

/// Which stored reasoning of the format's provider goes into a pack (docs/design.md, "Reasoning and provider-native data").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReasoningPolicy {
    /// Only the current turn's: messages after the newest user message (the default).
    #[default]
    CurrentTurn,
    /// All of it.
    All,
}

/// Where history begins when not all of it fits (docs/design.md, "Cache-stable packs").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HistoryPolicy {
    /// At a turn anchor that stays put from call to call until the pack no longer fits, so
    /// the pack's beginning repeats and provider prompt caches hit (the default).
    #[default]
    CacheStable,
    /// The newest history that fits, however far back that starts.
    Newest,
}

/// Whether a pack may end on an assistant reply of the log (docs/design.md, "Provider rules"). Claude 4.6 and
/// later refuse a request that ends on an assistant message ("This model does not support
/// assistant message prefill"), and Gemini 3 one that ends on a model turn; older models take it
/// as a prefill to continue, and the OpenAI APIs as a turn like any other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FinalAssistant {
    /// The format's rule (the default): left out for Anthropic Messages and Gemini, kept for
    /// the OpenAI formats.
    #[default]
    FormatDefault,
    /// Kept: the pack may end on it.
    Keep,
    /// Left out, whatever the format: the pack ends on the turn before it.
    Omit,
}

impl FinalAssistant {
    /// Whether a pack in `format` leaves out the assistant messages that would end it.
    pub fn omits(self, format: Format) -> bool {
        match self {
            FinalAssistant::FormatDefault => format.refuses_final_assistant(),
            FinalAssistant::Keep => false,
            FinalAssistant::Omit => true,
        }
    }
}

/// A parsed BuildContext request.
#[derive(Debug, Clone)]
pub struct ContextRequest {
    /// Conversation to build from.
    pub conversation_id: ConversationId,
    /// Token budget and caps.
    pub budget: TokenBudget,
    /// Tokenizer of the target model.
    pub tokenizer: Tokenizer,
    /// The caller's system prompt; empty = none.
    pub system_prompt: String,
    /// Messages not yet appended, placed last.
    pub pending: Vec<Message>,
    /// Whether to include the rolling summary.
    pub include_summary: bool,
    /// Whether to include the working memory.
    pub include_memory: bool,
    /// Cut tool outputs longer than this many tokens to head + tail.
    pub tool_output_max_tokens: Option<u32>,
    /// Rendering format.
    pub format: Format,
    /// Where history begins when not all of it fits.
    pub history: HistoryPolicy,
    /// Which reasoning goes into the pack.
    pub reasoning: ReasoningPolicy,
    /// Whether the pack may end on an assistant reply of the log.
    pub final_assistant: FinalAssistant,
    /// Which older tool results are cleared, if any.
    pub clear_tool_results: Option<ClearToolResults>,
    /// What recall adds, if anything.
    pub recall: Option<Recall>,
}

/// Recall (docs/design.md, "Recall"): the earlier messages most relevant to the current
/// question that the pack does not hold verbatim, quoted in one user turn placed last. Its
/// room ([`Recall::room`]) is kept out of the budget before history is packed, so the history
/// does not depend on the question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    /// What to look for; empty = the newest user message's text.
    pub query: String,
    /// Tokens the recalled turn may cost.
    pub max_tokens: u32,
    /// Messages it may quote.
    pub max_items: u32,
}

impl Recall {
    /// The room kept for the recalled turn: `max_tokens`, at most half of what the budget
    /// makes available.
    pub fn room(&self, budget: &TokenBudget) -> usize {
        (self.max_tokens as usize).min(budget.available() / 2)
    }
}

/// Context editing (docs/design.md, "Context editing"): older tool results replaced by a
/// placeholder when not all history fits whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClearToolResults {
    /// The newest results never cleared.
    pub keep_recent: u32,
    /// Tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// Also empty the arguments of the calls whose results are cleared.
    pub clear_arguments: bool,
}

/// The rolling summary as context assembly needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarySection {
    /// Summary text.
    pub text: String,
    /// It covers sequences 1..=through_sequence.
    pub through_sequence: Sequence,
}

/// Conversation state read before walking the log.
#[derive(Debug, Clone, Default)]
pub struct ContextSnapshot {
    /// Last sequence of the log.
    pub last_sequence: Sequence,
    /// Sequence of the newest user message not excluded from context, if any.
    pub last_user_sequence: Option<Sequence>,
    /// Newest assistant `response_id`, if any.
    pub last_response_id: Option<String>,
    /// The rolling summary, if any.
    pub summary: Option<SummarySection>,
    /// The working memory, if any (the packer renders it).
    pub memory: Option<WorkingMemory>,
    /// Every pinned message of the log (never excluded ones), oldest first.
    pub pinned: Vec<StoredMessage>,
    /// Sequences of the stored calls that pending tool results answer, by call id.
    pub pending_calls: HashMap<String, Sequence>,
}

impl ContextSnapshot {
    /// The snapshot of a whole log held in memory, without summary or memory: what a store
    /// reads for it (property tests and fuzz targets pack such logs).
    pub fn of_log(log: &[StoredMessage]) -> Self {
        let visible = |m: &&StoredMessage| !m.message.exclude_from_context;
        ContextSnapshot {
            last_sequence: log.last().map_or(Sequence::ZERO, |m| m.sequence),
            last_user_sequence: log
                .iter()
                .rev()
                .filter(visible)
                .find(|m| m.message.role == Role::User)
                .map(|m| m.sequence),
            pinned: log
                .iter()
                .filter(visible)
                .filter(|m| m.message.pinned)
                .cloned()
                .collect(),
            ..ContextSnapshot::default()
        }
    }
}

/// Where a message of a pack comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The caller's system prompt.
    SystemPrompt,
    /// The rolling summary.
    Summary,
    /// The working memory.
    WorkingMemory,
    /// The note that older history was left out.
    TruncationNotice,
    /// A message of the log.
    History,
    /// A pending message of the request.
    Pending,
    /// The user turn that opens an Anthropic or Gemini pack whose history does not start with
    /// one, or closes a pack that may not end on a (pinned) assistant message.
    Placeholder,
    /// Earlier messages quoted for the current question ([`Recall`]).
    Recall,
}

/// One message of a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextMessage {
    /// Which part of the pack it is.
    pub source: Source,
    /// Sequence in the log, for history.
    pub sequence: Option<Sequence>,
    /// Tokens it costs, framing included.
    pub tokens: u32,
    /// The message, with its text as it goes into the pack (possibly cut).
    pub message: Message,
}

/// Accounting of a pack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextStats {
    /// Tokens of the whole pack, reply priming included.
    pub total_tokens: u32,
    /// System prompt tokens.
    pub system_prompt_tokens: u32,
    /// Summary tokens.
    pub summary_tokens: u32,
    /// Working memory tokens.
    pub working_memory_tokens: u32,
    /// Truncation notice tokens, and the placeholder turn's (Anthropic).
    pub truncation_notice_tokens: u32,
    /// History tokens.
    pub history_tokens: u32,
    /// Pending message tokens.
    pub pending_tokens: u32,
    /// Tokens available: max_tokens - reserve_output_tokens.
    pub budget_tokens: u32,
    /// History messages read.
    pub messages_considered: u32,
    /// History messages included.
    pub messages_included: u32,
    /// Log positions after the summary watermark left out of the pack.
    pub messages_dropped: u32,
    /// Complete tool-call groups read and left out whole.
    pub tool_groups_dropped: u32,
    /// Incomplete tool-call groups left out.
    pub incomplete_tool_groups: u32,
    /// Oldest sequence of the verbatim history window (0 = none).
    pub oldest_included_sequence: u64,
    /// Watermark of the included summary (0 = none included).
    pub summary_through_sequence: u64,
    /// Last sequence of the log.
    pub log_last_sequence: u64,
    /// Some tool output was cut.
    pub truncated: bool,
    /// The mandatory parts alone exceed the budget, or the summary that covers left-out
    /// history does not fit even cut (the pack then holds no optional history).
    pub over_budget: bool,
    /// Tokens of the pack's beginning that the next call's pack repeats byte for byte if the
    /// log only grows and the request stays the same: everything before the pending messages,
    /// unless the next pack's history has to start later.
    pub stable_prefix_tokens: u32,
    /// The step, in approximate tokens, between the turn anchors history may start at (0 when
    /// the history policy is newest-that-fits or all of it fits).
    pub history_step_tokens: u32,
    /// Tokens of the native data (reasoning, signatures, item ids) the pack carries.
    pub reasoning_tokens: u32,
    /// Tokens of the format provider's native data left out of the pack's history messages.
    pub reasoning_tokens_omitted: u32,
    /// The summary did not fit whole: its beginning and end are in the pack, with
    /// [`SUMMARY_CUT_MARKER`] between them.
    pub summary_cut: bool,
    /// Assistant messages of the log that would have ended the pack, left out under
    /// [`FinalAssistant`].
    pub final_assistant_omitted: u32,
    /// Tool results replaced by a placeholder ([`ClearToolResults`]).
    pub tool_results_cleared: u32,
    /// Tokens the clearing saved.
    pub tool_result_tokens_cleared: u32,
    /// Tokens of the recalled turn.
    pub recall_tokens: u32,
    /// Messages the recalled turn quotes.
    pub messages_recalled: u32,
    /// The sequence of the message holding the provider's compaction the pack starts from (0:
    /// none). Like a summary, it stands for everything before it.
    pub compaction_sequence: u64,
}

/// What stands where a summary that did not fit the budget was cut.
pub const SUMMARY_CUT_MARKER: &str = "\n[... part of the summary was cut to fit the context budget ...]\n";

/// The assembled context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextPack {
    /// Messages in pack order.
    pub messages: Vec<ContextMessage>,
    /// History messages the pack holds cut (`tool_output_max_tokens`) or cleared
    /// (`clear_tool_results`) rather than verbatim, in pack order.
    pub abridged: Vec<Sequence>,
    /// Accounting.
    pub stats: ContextStats,
    /// Dropped history exists that no summary covers.
    pub needs_summary: bool,
    /// Newest assistant response id of the log.
    pub previous_response_id: Option<String>,
}
