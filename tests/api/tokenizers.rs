//! `CTXD_TOKENIZERS` (issue 62): an append counts only the configured tokenizers, and a read
//! that needs another counts it when it first reads a message, stores it, and packs exactly as a
//! server that counted it at append. Both stores.

use ctxd::{
    domain::{Message, Role, Sequence, StoredMessage, tokenize::Tokenizer},
    proto,
    store::Store,
};

use crate::{
    contract_tests,
    helpers::{StoreKind, TestApp, assistant, spawn_app, spawn_app_with, tool_result, user},
    store_contract::{batch, store_of, tenant},
};

contract_tests!(
    a_tokenizer_left_out_is_counted_when_a_pack_first_needs_it_and_kept,
    a_summary_under_a_tokenizer_left_out_keeps_the_same_window,
    counts_made_late_land_only_on_the_message_they_were_made_from,
);

/// A conversation with a name, a tool loop with Anthropic thinking, a long tool output and a
/// failed call: every part of a message's count.
fn conversation() -> Vec<proto::Message> {
    let thinking = proto::Reasoning {
        provider: proto::Provider::Anthropic as i32,
        r#type: "thinking".into(),
        text: "The user wants the weather; I will call the tool and then compare.".into(),
        signature: "EqQBCkgIARABGAIiQL2ZbnBUw5v2tg9y9/5oMV2uQ0Y2f4T0GmwRktBA+sig==".into(),
        ..Default::default()
    };
    let calling = proto::Message {
        role: proto::Role::Assistant as i32,
        content: "Let me check.".into(),
        tool_calls: vec![proto::ToolCall {
            id: "toolu_01".into(),
            name: "get_weather".into(),
            arguments: r#"{"city": "Zürich"}"#.into(),
            ..Default::default()
        }],
        reasoning: vec![thinking],
        ..Default::default()
    };
    let failed = proto::Message {
        error: Some(proto::LlmError {
            code: "timeout".into(),
            message: "the model timed out".into(),
            partial_output: "Zürich is colder than".into(),
        }),
        ..assistant("")
    };
    vec![
        proto::Message {
            name: "Ilse".into(),
            ..user("Wie ist das Wetter in Zürich? 天気はどうですか")
        },
        calling,
        tool_result(
            "toolu_01",
            &"temperature: 3°C, wind 12 km/h, humidity 81%; ".repeat(40),
        ),
        failed,
        user("Try again, please."),
    ]
}

async fn build(app: &TestApp, tokenizer: proto::Tokenizer) -> proto::BuildContextResponse {
    app.client
        .clone()
        .build_context(proto::BuildContextRequest {
            conversation_id: "weather".into(),
            budget: Some(proto::Budget {
                max_tokens: 100_000,
                ..Default::default()
            }),
            tokenizer: tokenizer as i32,
            format: proto::Format::AnthropicMessages as i32,
            reasoning: proto::ReasoningPolicy::All as i32,
            ..Default::default()
        })
        .await
        .expect("BuildContext succeeds")
        .into_inner()
}

/// Each stored message's counts: (tokens, reasoning tokens).
async fn counts(app: &TestApp) -> Vec<(proto::TokenCounts, Option<proto::TokenCounts>)> {
    let messages = app.all_messages("weather").await.expect("listed");
    messages
        .into_iter()
        .map(|m| (m.tokens.expect("tokens"), m.reasoning_tokens))
        .collect()
}

async fn a_tokenizer_left_out_is_counted_when_a_pack_first_needs_it_and_kept(kind: StoreKind) {
    // The default counts o200k_base (the default tokenizer) and the approximation only.
    let lazy = spawn_app(kind).await;
    let eager = spawn_app_with(kind, &["--tokenizers", "o200k_base,cl100k_base"]).await;
    for app in [&lazy, &eager] {
        app.append_ok("weather", conversation()).await;
    }
    let (before, counted) = (counts(&lazy).await, counts(&eager).await);
    for ((lazy, lazy_reasoning), (eager, eager_reasoning)) in before.iter().zip(&counted) {
        assert_eq!(lazy.cl100k_base, None, "not counted at append: {lazy:?}");
        assert!(eager.cl100k_base.is_some_and(|n| n > 0), "{eager:?}");
        assert_eq!((lazy.o200k_base, lazy.approx), (eager.o200k_base, eager.approx));
        // Reasoning and native data are counted under every tokenizer at append.
        assert_eq!(lazy_reasoning, eager_reasoning);
    }
    assert!(counted[1].1.is_some(), "the thinking is counted");

    // A pack under cl100k_base counts it late, and packs exactly as counted at append.
    let packed = build(&eager, proto::Tokenizer::Cl100kBase).await;
    for _ in 0..2 {
        let late = build(&lazy, proto::Tokenizer::Cl100kBase).await;
        assert_eq!(late.rendered, packed.rendered);
        assert_eq!(late.stats, packed.stats);
        let tokens =
            |r: &proto::BuildContextResponse| r.messages.iter().map(|m| m.tokens).collect::<Vec<_>>();
        assert_eq!(tokens(&late), tokens(&packed));
    }
    // ... and kept: the log now lists what the eager server counted at append.
    assert_eq!(counts(&lazy).await, counted);
    // A pack under the tokenizer counted at append is the same on both.
    let o200k = build(&eager, proto::Tokenizer::O200kBase).await;
    assert_eq!(build(&lazy, proto::Tokenizer::O200kBase).await.stats, o200k.stats);
}

/// A summary keeping the newest `keep` cl100k_base tokens verbatim.
async fn summarize(app: &TestApp, keep: u32) -> Option<proto::Summary> {
    app.client
        .clone()
        .summarize(proto::SummarizeRequest {
            conversation_id: "weather".into(),
            keep_recent_tokens: keep,
            tokenizer: proto::Tokenizer::Cl100kBase as i32,
            mode: proto::SummarizeMode::Server as i32,
            ..Default::default()
        })
        .await
        .expect("Summarize succeeds")
        .into_inner()
        .summary
}

async fn a_summary_under_a_tokenizer_left_out_keeps_the_same_window(kind: StoreKind) {
    let lazy = spawn_app(kind).await;
    let eager = spawn_app_with(kind, &["--tokenizers", "cl100k_base"]).await;
    for app in [&lazy, &eager] {
        app.append_ok("weather", conversation()).await;
    }
    // Room for the last two messages only: a window counted as nothing would fold nothing.
    let keep = counts(&eager).await[3..]
        .iter()
        .map(|(tokens, _)| tokens.cl100k_base.expect("counted"))
        .sum();
    let summary = summarize(&eager, keep).await.expect("a summary");
    assert_eq!(summary.through_sequence, 3);
    let late = summarize(&lazy, keep).await.expect("a summary");
    assert_eq!(
        (late.through_sequence, late.text),
        (summary.through_sequence, summary.text)
    );
    assert_eq!(counts(&lazy).await[..3], counts(&eager).await[..3], "kept");
}

fn stored(messages: Vec<StoredMessage>) -> StoredMessage {
    messages.into_iter().next().expect("one message")
}

async fn counts_made_late_land_only_on_the_message_they_were_made_from(kind: StoreKind) {
    let store = store_of(kind).await;
    let t = tenant("t");
    let first = |content: &str| batch("c", vec![Message::text(Role::User, content.into())]);
    let conversation = first("x").conversation_id.clone();
    let read = async |store: &dyn Store| {
        let page = store
            .list_messages(&t, &conversation, Sequence::ZERO, 10, usize::MAX)
            .await
            .expect("listed");
        stored(page.messages)
    };
    store
        .append_messages(&t, &first("the first words, counted late"), None)
        .await
        .unwrap();
    let mut old = read(&*store).await;
    assert_eq!(old.tokens.counted(Tokenizer::Cl100kBase), None);
    let late = old.count_under(Tokenizer::Cl100kBase).expect("counted");
    assert!(old.count_under(Tokenizer::Cl100kBase).is_none(), "counted once");

    // Rewound and appended again: another message at the same sequence takes none of it.
    store
        .rewind_conversation(&t, &conversation, Sequence::ZERO, None, None)
        .await
        .unwrap();
    store
        .append_messages(&t, &first("other words"), None)
        .await
        .unwrap();
    store.store_late_counts(&t, &conversation, &[late]).await.unwrap();
    let mut other = read(&*store).await;
    assert_eq!(
        other.tokens.counted(Tokenizer::Cl100kBase),
        None,
        "not the old message's count"
    );

    // Its own count is kept, once: a second, different count for it changes nothing.
    let own = other.count_under(Tokenizer::Cl100kBase).expect("counted");
    store.store_late_counts(&t, &conversation, &[own]).await.unwrap();
    let kept = read(&*store).await;
    assert_eq!(kept.tokens, other.tokens);
    let wrong = ctxd::domain::context::cost::CountedLate { tokens: 999, ..own };
    store
        .store_late_counts(&t, &conversation, &[wrong])
        .await
        .unwrap();
    assert_eq!(read(&*store).await.tokens, other.tokens);

    // A redaction counts its tombstone under every tokenizer: nothing made from the old text
    // lands on it.
    store
        .append_messages(&t, &first("secret words"), None)
        .await
        .unwrap();
    let secret = store
        .list_messages(&t, &conversation, Sequence::from_stored(1), 10, usize::MAX)
        .await
        .unwrap();
    let mut secret = stored(secret.messages);
    let from_secret = secret.count_under(Tokenizer::Cl100kBase).expect("counted");
    let redaction = store
        .redact_message(&t, &conversation, secret.sequence, None)
        .await
        .unwrap();
    store
        .store_late_counts(&t, &conversation, &[from_secret])
        .await
        .unwrap();
    let tombstone = store
        .list_messages(&t, &conversation, Sequence::from_stored(1), 10, usize::MAX)
        .await
        .unwrap();
    let tombstone = stored(tombstone.messages);
    assert!(tombstone.tokens.uncounted.is_empty());
    assert_eq!(tombstone.tokens, redaction.message.tokens);
}

/// A late count is best effort: a message another transaction holds (a rewind, a redaction)
/// is skipped, not waited for, so a pack never waits on a write for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_count_skips_a_message_a_write_holds_instead_of_waiting() {
    let url = crate::helpers::fresh_database().await;
    let store = crate::store_contract::postgres_store(url.clone()).await;
    let t = tenant("t");
    let appended = batch("c", vec![Message::text(Role::User, "held words".into())]);
    let conversation = appended.conversation_id.clone();
    store.append_messages(&t, &appended, None).await.unwrap();
    let read = async || {
        let page = store
            .list_messages(&t, &conversation, Sequence::ZERO, 10, usize::MAX)
            .await
            .expect("listed");
        stored(page.messages)
    };
    let late = read().await.count_under(Tokenizer::Cl100kBase).expect("counted");

    let (holder, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    holder
        .batch_execute("BEGIN; SELECT 1 FROM messages FOR UPDATE")
        .await
        .unwrap();
    let stored_while_held = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        store.store_late_counts(&t, &conversation, &[late]),
    )
    .await
    .expect("the write does not wait for the row");
    stored_while_held.unwrap();
    assert_eq!(
        read().await.tokens.counted(Tokenizer::Cl100kBase),
        None,
        "skipped"
    );

    holder.batch_execute("ROLLBACK").await.unwrap();
    store.store_late_counts(&t, &conversation, &[late]).await.unwrap();
    assert_eq!(
        read().await.tokens.counted(Tokenizer::Cl100kBase),
        Some(late.tokens)
    );
}
