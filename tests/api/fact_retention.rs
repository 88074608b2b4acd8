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
    let app = spawn_app(StoreKind::InMemory).await;
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

/// The `rules` extractor on a labelled conversation it was not written against
/// (`tests/data/rules_eval.json`: a ledger-migration chat with every fact labelled by category,
/// message and a key phrase). Prints precision and recall per category; the floors below are
/// the measured figures less a margin, so a change that loses facts or adds noise fails.
#[tokio::test]
async fn the_rules_extractor_on_a_labelled_conversation_it_was_not_tuned_on() {
    #[derive(serde::Deserialize)]
    struct Eval {
        messages: Vec<EvalMessage>,
        facts: Vec<Fact>,
    }
    #[derive(serde::Deserialize)]
    struct EvalMessage {
        role: String,
        content: String,
    }
    #[derive(serde::Deserialize)]
    struct Fact {
        category: String,
        sequence: u64,
        key: String,
    }
    let eval: Eval = serde_json::from_str(include_str!("../data/rules_eval.json")).unwrap();
    let app = spawn_app(StoreKind::InMemory).await;
    let messages: Vec<proto::Message> = eval
        .messages
        .iter()
        .map(|m| proto::Message {
            role: match m.role.as_str() {
                "assistant" => proto::Role::Assistant,
                _ => proto::Role::User,
            } as i32,
            content: m.content.clone(),
            ..Default::default()
        })
        .collect();
    app.append_ok("eval", messages).await;
    let memory = app.refreshed_memory("eval").await;
    // (text, sources) of what the extractor produced, per category; open questions that were
    // closed (superseded) and the "Answered at" notes are not open questions.
    let items = |category: &str| -> Vec<(String, Vec<u64>)> {
        let list = match category {
            "goals" => &memory.goals,
            "requirements" => &memory.requirements,
            "constraints" => &memory.constraints,
            "decisions" => &memory.decisions,
            "assumptions" => &memory.assumptions,
            "open_questions" => &memory.open_questions,
            "stakeholders" => &memory.stakeholders,
            _ => {
                return memory
                    .glossary
                    .iter()
                    .map(|e| (e.term.clone(), e.source_sequences.clone()))
                    .collect();
            }
        };
        list.iter()
            .filter(|i| category != "open_questions" || i.superseded_by.is_empty())
            .map(|i| (i.text.clone(), i.source_sequences.clone()))
            .collect()
    };
    let matches = |category: &str, fact: &Fact, (text, sources): &(String, Vec<u64>)| {
        let text = text.to_lowercase();
        let key = fact.key.to_lowercase();
        let hit = match category {
            "glossary" => text == key || text.contains(&key) || key.contains(&text),
            _ => text.contains(&key),
        };
        hit && sources.contains(&fact.sequence)
    };
    // (category, floor of precision, floor of recall): the measured figures (docs/design.md,
    // Working memory) less about one fact. Requirements and constraints are the weak pair: the
    // first pattern that matches wins, so "has to" makes a deadline a requirement, and
    // statements of policy ("nothing AGPL-licensed goes into Atlas") match no pattern.
    let floors = [
        ("goals", 0.9, 0.8),
        ("requirements", 0.55, 0.8),
        ("constraints", 0.5, 0.6),
        ("decisions", 0.9, 0.75),
        ("assumptions", 0.7, 0.85),
        ("open_questions", 0.9, 0.9),
        ("stakeholders", 0.9, 0.75),
        ("glossary", 0.85, 0.9),
    ];
    println!(
        "rules extractor on tests/data/rules_eval.json ({} messages):",
        eval.messages.len()
    );
    println!("| category | facts | extracted | precision | recall |");
    println!("|---|---|---|---|---|");
    let mut failures = Vec::new();
    for (category, precision_floor, recall_floor) in floors {
        let facts: Vec<&Fact> = eval.facts.iter().filter(|f| f.category == category).collect();
        let produced = items(category);
        let found = facts
            .iter()
            .filter(|f| produced.iter().any(|i| matches(category, f, i)))
            .count();
        let right = produced
            .iter()
            .filter(|i| facts.iter().any(|f| matches(category, f, i)))
            .count();
        let recall = found as f64 / facts.len().max(1) as f64;
        let precision = right as f64 / produced.len().max(1) as f64;
        println!(
            "| {category} | {} | {} | {:.0}% | {:.0}% |",
            facts.len(),
            produced.len(),
            precision * 100.0,
            recall * 100.0
        );
        if precision < precision_floor || recall < recall_floor {
            failures.push(format!(
                "{category}: precision {precision:.2}, recall {recall:.2}"
            ));
        }
        for f in facts
            .iter()
            .filter(|f| !produced.iter().any(|i| matches(category, f, i)))
        {
            println!("    missed #{} {:?}", f.sequence, f.key);
        }
    }
    assert!(failures.is_empty(), "below the floors: {failures:?}");
}
