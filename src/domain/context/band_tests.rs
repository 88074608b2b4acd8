//! The summary band (issue 39, class 3): whenever a pack holding the summary cut to its
//! smallest size would fit, the pack holds the summary and does not say `over_budget`.

use std::time::UNIX_EPOCH;

use proptest::prelude::*;

use super::{
    ContextPack, ContextPacker, ContextRequest, ContextSnapshot, FinalAssistant, Format, HistoryPolicy,
    ReasoningPolicy, SUMMARY_CUT_MARKER, Source, SummarySection, TokenBudget, TokenCounts, anchor::LogEnd,
    cost::text_message_cost, initial_page_limit,
};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        ids::{ConversationId, Sequence},
        message::{Message, Role, StoredMessage},
    },
};

/// The fewest summary tokens a cut summary carries (as the packer's MIN_CUT_SUMMARY_TOKENS).
const MIN_CUT: usize = 16;

fn log(texts: &[(Role, String)]) -> Vec<StoredMessage> {
    let mut end = LogEnd::default();
    texts
        .iter()
        .enumerate()
        .map(|(i, (role, text))| {
            let message = Message::text(*role, text.clone());
            let tokens = TokenCounts::of(&message, crate::domain::token_counts::Tokenizers::ALL);
            StoredMessage {
                sequence: Sequence::parse(i as u64 + 1).unwrap(),
                created_at: UNIX_EPOCH,
                tokens,
                reasoning_tokens: TokenCounts::default(),
                native_tokens: TokenCounts::default(),
                call_sequence: None,
                turn_anchor: end.place(&message, tokens.approx).anchor(&message),
                message,
            }
        })
        .collect()
}

fn pack(log: &[StoredMessage], summary: &SummarySection, max_tokens: u32, format: Format) -> ContextPack {
    let request = ContextRequest {
        conversation_id: ConversationId::parse("band").unwrap(),
        budget: TokenBudget::parse(max_tokens, 0, 0, 0).unwrap(),
        tokenizer: Tokenizer::O200kBase,
        system_prompt: "You are a careful assistant.".into(),
        pending: Vec::new(),
        include_summary: true,
        include_memory: false,
        tool_output_max_tokens: None,
        format,
        history: HistoryPolicy::default(),
        reasoning: ReasoningPolicy::CurrentTurn,
        final_assistant: FinalAssistant::Keep,
        clear_tool_results: None,
        recall: None,
    };
    let first = initial_page_limit(&request);
    let snapshot = ContextSnapshot {
        summary: Some(summary.clone()),
        ..ContextSnapshot::of_log(log)
    };
    let mut packer = ContextPacker::new(request, snapshot);
    let newest: Vec<StoredMessage> = log.iter().rev().take(first).cloned().collect();
    packer.feed_first(newest, first);
    while let Some(page) = packer.next_page() {
        let rows = log
            .iter()
            .rev()
            .filter(|m| m.sequence < page.before && m.sequence > page.floor)
            .take(page.limit)
            .cloned()
            .collect();
        packer.feed(rows, page);
    }
    packer.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Over every budget from nothing to the whole pack: the summary is in the pack, whole or
    /// cut, as soon as the mandatory part plus the smallest cut summary fit (plus the notice,
    /// when history between the summary and the last turn is left out), and from there on
    /// `over_budget` is false. No band where it fits but is dropped for a notice.
    #[test]
    fn a_summary_that_fits_cut_is_in_the_pack(
        summary_words in 5usize..400,
        gap in 0usize..3,
        turn_words in 1usize..60,
        chat in any::<bool>(),
    ) {
        let format = if chat { Format::OpenAiChat } else { Format::AnthropicMessages };
        let mut texts: Vec<(Role, String)> = (0..4)
            .map(|i| (if i % 2 == 0 { Role::User } else { Role::Assistant }, format!("covered message {i}")))
            .collect();
        // Messages after the watermark that only fit when the budget is large.
        for i in 0..gap {
            texts.push((Role::User, format!("uncovered question {i} {}", "detail ".repeat(40))));
            texts.push((Role::Assistant, format!("uncovered answer {i}")));
        }
        texts.push((Role::User, format!("The last question: {}", "word ".repeat(turn_words))));
        let log = log(&texts);
        let summary = SummarySection {
            text: "The user planned a trip and asked about weather. ".repeat(summary_words / 8 + 1),
            through_sequence: Sequence::parse(4).unwrap(),
        };
        let whole = pack(&log, &summary, 1_000_000, format);
        let summary_tokens = whole.stats.summary_tokens as usize;
        prop_assert!(summary_tokens > 0);
        let mandatory = whole.stats.total_tokens as usize - summary_tokens
            - whole.messages.iter().filter(|m| m.sequence.is_some_and(|s| s.get() <= 4 + 2 * gap as u64)).map(|m| m.tokens as usize).sum::<usize>();
        let smallest = text_message_cost("system", &format!("{}{SUMMARY_CUT_MARKER}", "word ".repeat(MIN_CUT)), Tokenizer::O200kBase);
        let notice = match gap { 0 => 0, _ => text_message_cost("system", "[99 earlier messages of this conversation (sequences 99 to 99) are not included here.]", Tokenizer::O200kBase) };
        let placeholder = if format == Format::AnthropicMessages { 16 } else { 0 };
        let top = whole.stats.total_tokens + 8;
        for budget in (mandatory as u32).max(1)..=top {
            let packed = pack(&log, &summary, budget, format);
            let held = packed.messages.iter().any(|m| m.source == Source::Summary);
            if budget as usize >= mandatory + smallest + notice + placeholder {
                prop_assert!(held, "budget {budget}: mandatory {mandatory} + summary {smallest} + notice {notice} fit, summary left out: {:?}", packed.stats);
                prop_assert!(!packed.stats.over_budget, "budget {budget}: over_budget with the summary in");
            }
            if held {
                prop_assert!(packed.stats.total_tokens <= budget, "budget {budget}: {:?}", packed.stats);
            }
        }
    }
}
