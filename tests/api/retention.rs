//! Fact retention of the embedded summarizer and extractor on a scripted 200-message
//! conversation with planted decisions, requirements, numbers and names. Prints the share kept.

use ctxd::proto;

use crate::helpers::{StoreKind, spawn_app, user};

/// (planted sentence, what must survive of it).
const FACTS: &[(&str, &str)] = &[
    ("We decided to use Kafka for the event bus.", "Kafka"),
    ("The dashboard must load in under 2 seconds.", "2 seconds"),
    ("The total budget is 48,000 euros.", "48,000"),
    ("The product owner is Priya Raman.", "Priya Raman"),
    ("We decided to deploy in eu-central-1.", "eu-central-1"),
    ("Exports must support CSV and Parquet.", "Parquet"),
    ("The deadline for the beta is June 14.", "June 14"),
    ("We agreed to use OAuth 2.1 with PKCE.", "PKCE"),
    ("Invoices must keep 7 years of history.", "7 years"),
    ("We cannot store card numbers.", "card numbers"),
    ("The sponsor is Marcus Lee from finance.", "Marcus Lee"),
    ("We decided on a monthly release train.", "release train"),
    ("The API must handle 1,200 requests per second.", "1,200"),
    ("Retries must stop after 5 attempts.", "5 attempts"),
    ("We will use Rust for the ingestion service.", "ingestion service"),
    ("The mobile app needs to work offline.", "offline"),
    ("Support hours are at most 9 to 17 CET.", "9 to 17"),
    ("We chose Grafana for dashboards.", "Grafana"),
    ("Data must stay in the EU.", "stay in the EU"),
    ("The pilot customer is Northwind Traders.", "Northwind"),
];

const FILLER: &[&str] = &[
    "Thanks, that helps.",
    "Let me think about it.",
    "Sounds good to me.",
    "Can you explain that again?",
    "Okay, got it.",
    "Interesting point.",
    "Great, moving on.",
    "Could you rephrase?",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_summary_and_memory_retain_planted_facts() {
    let app = spawn_app(StoreKind::Memory).await;
    let mut client = app.client.clone();
    // 200 messages: user/assistant pairs, a fact planted every tenth message.
    for i in 0..100 {
        let user_text = if i % 5 == 0 {
            FACTS[i / 5].0.to_string()
        } else {
            FILLER[i % FILLER.len()].to_string()
        };
        let answer = proto::Message {
            role: proto::Role::Assistant as i32,
            content: format!("Noted ({i}). {}", FILLER[(i + 3) % FILLER.len()]),
            ..Default::default()
        };
        app.append_ok("facts", vec![user(&user_text), answer]).await;
        // Roll the summary every 50 messages, keeping ~300 tokens verbatim, as a backend would.
        if (i + 1) % 25 == 0 {
            let request = proto::SummarizeRequest {
                conversation_id: "facts".into(),
                keep_recent_tokens: 300,
                ..Default::default()
            };
            client.summarize(request).await.unwrap();
        }
    }
    let summary = client
        .summarize(proto::SummarizeRequest {
            conversation_id: "facts".into(),
            keep_recent_tokens: 0,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .summary
        .unwrap();
    let memory_request = proto::GetWorkingMemoryRequest {
        conversation_id: "facts".into(),
        refresh: true,
        prepare: false,
    };
    let memory = client
        .get_working_memory(memory_request)
        .await
        .unwrap()
        .into_inner()
        .memory
        .unwrap();
    let memory_text: String = [
        &memory.goals,
        &memory.requirements,
        &memory.constraints,
        &memory.decisions,
        &memory.assumptions,
        &memory.open_questions,
        &memory.stakeholders,
    ]
    .iter()
    .flat_map(|items| {
        items
            .iter()
            .filter(|i| i.superseded_by.is_empty())
            .map(|i| i.text.clone())
    })
    .collect::<Vec<_>>()
    .join("\n");

    let kept =
        |text: &str| FACTS.iter().filter(|(_, key)| text.contains(key)).count() as f64 / FACTS.len() as f64;
    let (in_summary, in_memory) = (kept(&summary.text), kept(&memory_text));
    println!(
        "fact retention over 200 messages: summary {:.0}% ({} tokens, limit 1000), working memory {:.0}%",
        in_summary * 100.0,
        summary.tokens,
        in_memory * 100.0
    );
    // Every planted fact carries a decision/requirement/constraint phrase, a number or a
    // stakeholder phrase, which both embedded components treat as key: the summary drops
    // chit-chat before them and the memory matches them by pattern. A floor below 100% leaves
    // room for wording the patterns do not cover.
    assert!(
        in_summary >= 0.9,
        "summary kept {in_summary:.2} of the facts:\n{}",
        summary.text
    );
    assert!(
        in_memory >= 0.85,
        "memory kept {in_memory:.2} of the facts:\n{memory_text}"
    );
    for item in memory.decisions.iter().chain(&memory.requirements) {
        assert!(!item.source_sequences.is_empty(), "every item has provenance");
    }
}
