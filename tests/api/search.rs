//! Recall (docs/design.md, "Recall"): SearchMessages over a long conversation with facts
//! planted early and asked about much later in other words, on both stores; both stores'
//! rankings bit for bit alike; tenants, redaction, rewind and fork; and
//! BuildContext's recalled turn in every format.

use ctxd::proto;
use tonic::{Code, transport::Channel};

use crate::{
    contract_tests,
    helpers::{
        StoreKind, append, as_tenant, assert_field_violation, fresh_database, spawn_app, spawn_on,
        tool_result, user,
    },
};

type Client = proto::context_service_client::ContextServiceClient<Channel>;

contract_tests!(
    planted_facts_are_found_in_the_top_five_by_questions_in_other_words,
    search_pages_filters_and_bad_requests,
    redacted_rewound_and_other_tenants_messages_are_never_found,
    recall_quotes_the_fact_the_pack_left_out_in_every_format,
    common_terms_do_not_hide_rare_ones_and_bound_the_ranking,
    recall_never_pushes_the_mandatory_part_over_the_budget,
    a_pack_that_ends_on_a_reply_keeps_no_room_for_recall,
);

/// A fact stated early, and a later question about it in other words that shares its key
/// terms (after stemming).
const FACTS: [(&str, &str); 20] = [
    (
        "The invoice number for the March order is INV-4471.",
        "which invoice did we get for the march order?",
    ),
    (
        "My passport expires on 2031-08-14, renewal is due early.",
        "when does my passport expire again?",
    ),
    (
        "The staging database password rotates every Tuesday at 09:00.",
        "how often does the staging password rotate?",
    ),
    (
        "Our dog is called Biscuit and she is allergic to chicken.",
        "what is the dog allergic to?",
    ),
    (
        "The flight to Lisbon is TP1352, departing gate B12.",
        "what gate does the lisbon flight leave from?",
    ),
    (
        "Priya owns the billing microservice and its on-call rota.",
        "who owns billing?",
    ),
    (
        "The lease on the Berlin office ends in November 2027.",
        "when does the berlin office lease end?",
    ),
    (
        "Use port 5433 for the analytics replica, not 5432.",
        "which port does the analytics replica listen on?",
    ),
    (
        "The customer prefers invoices in Swiss francs, CHF.",
        "which currency does the customer want invoices in?",
    ),
    (
        "Kubernetes namespace for the pilot is pilot-eu-west.",
        "what namespace is the pilot deployed in?",
    ),
    (
        "My sister's wedding is on the 3rd of June in Porto.",
        "where is my sister's wedding?",
    ),
    (
        "The API rate limit for the partner tier is 1200 requests per minute.",
        "what rate limit applies to partners?",
    ),
    (
        "The warranty on the laptop covers accidental damage until 2026.",
        "does the laptop warranty cover accidental damage?",
    ),
    (
        "Grafana dashboards live in the observability folder of the infra repo.",
        "where are the grafana dashboards kept?",
    ),
    (
        "The contractor's hourly rate is 95 euros, billed monthly.",
        "how much does the contractor charge per hour?",
    ),
    (
        "The backup bucket is s3://acme-nightly-backups in eu-central-1.",
        "which bucket holds the nightly backups?",
    ),
    (
        "Our wifi password at the cabin is mountain-echo-42.",
        "what's the cabin wifi password?",
    ),
    (
        "The quarterly board meeting moved to Thursday afternoons.",
        "when is the board meeting now?",
    ),
    (
        "The allergy clinic appointment is with Dr. Okafor.",
        "who is the doctor at the allergy clinic?",
    ),
    (
        "Feature flag checkout-v2 is enabled for ten percent of users.",
        "what percentage of users have the checkout flag?",
    ),
];

/// Filler a long agent conversation is made of, with distractors that share one key term
/// with a question (an invoice to send, a March deadline, a gate in the pipeline, ...).
const FILLER_USER: [&str; 12] = [
    "Can you refactor the parser module so the tests pass?",
    "Please send the invoice reminder to the new client next week.",
    "Let's plan the sprint; the march deadline is tight.",
    "Run the linter again and fix the warnings.",
    "Check the deployment gate in the pipeline, it failed.",
    "What does the error in the logs mean?",
    "The dashboard is slow to load this morning.",
    "Summarize the pull request comments for me.",
    "Add a retry with backoff to the HTTP client.",
    "Why is the flight recorder test flaky?",
    "Update the changelog for the release.",
    "Rename the config option and keep the old one working.",
];
const FILLER_ASSISTANT: [&str; 8] = [
    "I updated the module and the tests pass now.",
    "The warnings came from unused imports; I removed them.",
    "The pipeline failed on a timeout; I re-ran it and it is green.",
    "The error means the connection pool was exhausted under load.",
    "I added exponential backoff with jitter, capped at 30 seconds.",
    "The release notes are in the changelog under 1.4.0.",
    "Here is a summary of the review: naming, error handling, and tests.",
    "The owner of that service is on leave; I left a note in the ticket.",
];

/// The conversation: 2,400 messages; fact `f` stated at turn `3 + 2f` (within the first 50
/// turns), everything after that filler, with a tool call and result every fourth turn.
/// Returns the messages and each fact's sequence.
fn long_conversation() -> (Vec<proto::Message>, Vec<u64>) {
    let mut messages = Vec::new();
    let mut facts = vec![0; FACTS.len()];
    let mut turn = 0usize;
    while messages.len() < 2400 {
        let fact = (turn >= 3 && (turn - 3).is_multiple_of(2))
            .then(|| (turn - 3) / 2)
            .filter(|f| *f < FACTS.len());
        match fact {
            Some(f) => {
                messages.push(user(FACTS[f].0));
                facts[f] = messages.len() as u64;
                messages.push(assistant_text("Noted, I will remember that."));
            }
            None if turn % 4 == 1 => {
                let id = format!("call-{turn}");
                messages.push(user(FILLER_USER[turn % FILLER_USER.len()]));
                messages.push(calling(&id, "run_tests"));
                messages.push(tool_result(&id, "42 passed, 0 failed in 3.1s"));
                messages.push(assistant_text(FILLER_ASSISTANT[turn % FILLER_ASSISTANT.len()]));
            }
            None => {
                messages.push(user(FILLER_USER[(turn * 7) % FILLER_USER.len()]));
                messages.push(assistant_text(
                    FILLER_ASSISTANT[(turn * 3) % FILLER_ASSISTANT.len()],
                ));
            }
        }
        turn += 1;
    }
    (messages, facts)
}

fn assistant_text(text: &str) -> proto::Message {
    proto::Message {
        role: proto::Role::Assistant as i32,
        content: text.into(),
        ..Default::default()
    }
}

fn calling(id: &str, tool: &str) -> proto::Message {
    proto::Message {
        role: proto::Role::Assistant as i32,
        tool_calls: vec![proto::ToolCall {
            id: id.into(),
            name: tool.into(),
            arguments: r#"{"suite":"all"}"#.into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

async fn load(client: &mut Client, conversation: &str, messages: &[proto::Message]) {
    for chunk in messages.chunks(100) {
        client
            .append_message(append(conversation, chunk.to_vec()))
            .await
            .unwrap();
    }
}

async fn search(
    client: &mut Client,
    conversation: &str,
    query: &str,
    page_size: u32,
) -> Vec<proto::SearchHit> {
    let request = proto::SearchMessagesRequest {
        conversation_id: conversation.into(),
        query: query.into(),
        page_size,
        ..Default::default()
    };
    client.search_messages(request).await.unwrap().into_inner().hits
}

/// recall@5 of the planted facts: the share of questions whose fact is among the first five
/// hits. The floor, 0.9: every question shares at least two key terms with its fact (after
/// stemming and stop words) and at most one with any distractor, and BM25 ranks a message
/// matching more of the query's terms above one matching fewer; the 10% slack is for a
/// distractor that happens to share two.
async fn planted_facts_are_found_in_the_top_five_by_questions_in_other_words(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let (messages, facts) = long_conversation();
    load(&mut client, "long", &messages).await;
    let mut found = 0;
    for (f, (_, question)) in FACTS.iter().enumerate() {
        let hits = search(&mut client, "long", question, 5).await;
        let rank = hits.iter().position(|h| h.sequence == facts[f]);
        found += usize::from(rank.is_some());
        if rank.is_none() {
            eprintln!("missed fact {f}: {question:?}");
        }
        let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
    }
    let recall = found as f64 / FACTS.len() as f64;
    println!(
        "recall@5 over {} messages, {} planted facts: {recall:.2} ({kind:?})",
        messages.len(),
        FACTS.len()
    );
    assert!(recall >= 0.9, "recall@5 {recall:.2} is below the floor of 0.9");
    let hit = &search(&mut client, "long", FACTS[0].1, 1).await[0];
    assert_eq!(hit.role, proto::Role::User as i32);
    assert!(hit.snippet.contains("INV-4471"), "{}", hit.snippet);
}

async fn search_pages_filters_and_bad_requests(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let (messages, _) = long_conversation();
    load(&mut client, "paged", &messages[..400]).await;
    // Pages of 7 add up to the one page of 50, in order.
    let whole = search(&mut client, "paged", "tests pass pipeline", 50).await;
    assert!(whole.len() > 20, "{}", whole.len());
    let mut paged = Vec::new();
    let mut token = String::new();
    loop {
        let request = proto::SearchMessagesRequest {
            conversation_id: "paged".into(),
            query: "tests pass pipeline".into(),
            page_size: 7,
            page_token: token.clone(),
            ..Default::default()
        };
        let page = client.search_messages(request).await.unwrap().into_inner();
        paged.extend(page.hits);
        if page.next_page_token.is_empty() || paged.len() >= whole.len() {
            token = page.next_page_token;
            break;
        }
        token = page.next_page_token;
        // Messages appended between pages are not found by later pages.
        client
            .append_message(append("paged", vec![user("tests pass pipeline again")]))
            .await
            .unwrap();
    }
    let sequences = |hits: &[proto::SearchHit]| hits.iter().map(|h| h.sequence).collect::<Vec<_>>();
    assert_eq!(sequences(&paged[..whole.len()]), sequences(&whole));
    // A token goes with its query.
    let other = proto::SearchMessagesRequest {
        conversation_id: "paged".into(),
        query: "something else".into(),
        page_token: if token.is_empty() { "AQ".into() } else { token },
        ..Default::default()
    };
    let status = client.search_messages(other).await.unwrap_err();
    assert_field_violation(&status, "page_token");
    // Filters: tool results of run_tests only; roles.
    let request = proto::SearchMessagesRequest {
        conversation_id: "paged".into(),
        query: "passed failed".into(),
        tool_names: vec!["run_tests".into()],
        page_size: 50,
        ..Default::default()
    };
    let hits = client.search_messages(request).await.unwrap().into_inner().hits;
    assert!(!hits.is_empty());
    assert!(
        hits.iter()
            .all(|h| h.role == proto::Role::Tool as i32 && h.tool_name == "run_tests")
    );
    let request = proto::SearchMessagesRequest {
        conversation_id: "paged".into(),
        query: "tests".into(),
        roles: vec![proto::Role::Assistant as i32],
        page_size: 50,
        ..Default::default()
    };
    let hits = client.search_messages(request).await.unwrap().into_inner().hits;
    assert!(!hits.is_empty() && hits.iter().all(|h| h.role == proto::Role::Assistant as i32));
    // Bad requests.
    let empty = proto::SearchMessagesRequest {
        conversation_id: "paged".into(),
        ..Default::default()
    };
    assert_field_violation(&client.search_messages(empty).await.unwrap_err(), "query");
    let missing = proto::SearchMessagesRequest {
        conversation_id: "nope".into(),
        query: "x".into(),
        ..Default::default()
    };
    assert_eq!(
        client.search_messages(missing).await.unwrap_err().code(),
        Code::NotFound
    );
    assert!(
        search(&mut client, "paged", "what was it again", 5)
            .await
            .is_empty()
    );
    let bad = |change: fn(&mut proto::SearchMessagesRequest)| {
        let mut request = proto::SearchMessagesRequest {
            conversation_id: "paged".into(),
            query: "tests".into(),
            ..Default::default()
        };
        change(&mut request);
        request
    };
    for (request, field) in [
        (bad(|r| r.query = "x".repeat(4097)), "query"),
        (bad(|r| r.roles = vec![99]), "roles[0]"),
        (bad(|r| r.roles = vec![2; 9]), "roles"),
        (bad(|r| r.tool_names = vec!["t".into(); 65]), "tool_names"),
        (bad(|r| r.tool_names = vec!["t".repeat(257)]), "tool_names[0]"),
        (bad(|r| r.page_token = "not a token".into()), "page_token"),
    ] {
        assert_field_violation(&client.search_messages(request).await.unwrap_err(), field);
    }
    for (recall, field) in [
        (
            proto::Recall {
                max_items: 41,
                ..Default::default()
            },
            "recall.max_items",
        ),
        (
            proto::Recall {
                query: "x".repeat(4097),
                ..Default::default()
            },
            "recall.query",
        ),
    ] {
        let request = proto::BuildContextRequest {
            conversation_id: "paged".into(),
            budget: Some(proto::Budget {
                max_tokens: 1000,
                ..Default::default()
            }),
            recall: Some(recall),
            ..Default::default()
        };
        assert_field_violation(&client.build_context(request).await.unwrap_err(), field);
    }
}

async fn redacted_rewound_and_other_tenants_messages_are_never_found(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let said = [
        user("The vault code is zebra-7781."),
        assistant_text("Noted."),
        user("The spare key is under the blue flowerpot."),
        assistant_text("Noted too."),
    ];
    for tenant in ["alpha", "beta"] {
        client
            .append_message(as_tenant(tenant, append("c", said.to_vec())))
            .await
            .unwrap();
    }
    let reader = client.clone();
    let find = |tenant: &'static str, query: &'static str| {
        let mut client = reader.clone();
        async move {
            let request = proto::SearchMessagesRequest {
                conversation_id: "c".into(),
                query: query.into(),
                ..Default::default()
            };
            client
                .search_messages(as_tenant(tenant, request))
                .await
                .map(|r| r.into_inner().hits)
        }
    };
    // Fork before the changes: the fork keeps what it copied.
    let fork = proto::ForkConversationRequest {
        conversation_id: "c".into(),
        new_conversation_id: "c-fork".into(),
        through_sequence: 4,
    };
    client.fork_conversation(as_tenant("alpha", fork)).await.unwrap();
    let redact = proto::RedactMessageRequest {
        conversation_id: "c".into(),
        sequence: 1,
    };
    client.redact_message(as_tenant("alpha", redact)).await.unwrap();
    assert!(
        find("alpha", "zebra vault").await.unwrap().is_empty(),
        "redacted text found"
    );
    assert_eq!(
        find("beta", "zebra vault").await.unwrap().len(),
        1,
        "the other tenant's own"
    );
    let rewind = proto::RewindConversationRequest {
        conversation_id: "c".into(),
        after_sequence: 2,
        ..Default::default()
    };
    client
        .rewind_conversation(as_tenant("alpha", rewind))
        .await
        .unwrap();
    assert!(
        find("alpha", "flowerpot").await.unwrap().is_empty(),
        "rewound text found"
    );
    let request = proto::SearchMessagesRequest {
        conversation_id: "c-fork".into(),
        query: "zebra flowerpot".into(),
        ..Default::default()
    };
    let hits = client
        .search_messages(as_tenant("alpha", request.clone()))
        .await
        .unwrap()
        .into_inner()
        .hits;
    let mut sequences: Vec<u64> = hits.iter().map(|h| h.sequence).collect();
    sequences.sort();
    assert_eq!(sequences, [1, 3], "the fork finds what it copied");
    // Another tenant never sees the fork.
    let status = client
        .search_messages(as_tenant("beta", request))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    client
        .delete_conversation(as_tenant(
            "beta",
            proto::DeleteConversationRequest {
                conversation_id: "c".into(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(find("beta", "zebra").await.unwrap_err().code(), Code::NotFound);
}

/// The fact at sequence 9 is far outside a small budget; asked about in a pending message,
/// recall quotes it, in every format, in a user turn at the end, within the budget, and the
/// pack before it is the pack of another question.
async fn recall_quotes_the_fact_the_pack_left_out_in_every_format(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let (messages, facts) = long_conversation();
    load(&mut client, "recall", &messages[..600]).await;
    for format in [
        proto::Format::OpenaiChat,
        proto::Format::AnthropicMessages,
        proto::Format::OpenaiResponses,
        proto::Format::Gemini,
    ] {
        let build = |question: &str| proto::BuildContextRequest {
            conversation_id: "recall".into(),
            budget: Some(proto::Budget {
                max_tokens: 3000,
                ..Default::default()
            }),
            pending_messages: vec![user(question)],
            format: format as i32,
            recall: Some(proto::Recall {
                max_tokens: 400,
                ..Default::default()
            }),
            ..Default::default()
        };
        let pack = client
            .build_context(build(FACTS[0].1))
            .await
            .unwrap()
            .into_inner();
        let stats = pack.stats.unwrap();
        assert!(
            stats.oldest_included_sequence > facts[0],
            "the fact is out of the window"
        );
        assert!(
            stats.messages_recalled >= 1 && stats.recall_tokens <= 400,
            "{stats:?}"
        );
        assert!(stats.total_tokens <= stats.budget_tokens, "{stats:?}");
        let last = pack.messages.last().unwrap();
        assert_eq!(last.source, proto::ContextSource::Recall as i32);
        assert!(last.content.contains("INV-4471"), "{}", last.content);
        assert!(
            last.content.contains(&format!("[message {}, user, ", facts[0])),
            "{}",
            last.content
        );
        assert!(pack.rendered.contains("INV-4471"), "{format:?}");
        if format == proto::Format::AnthropicMessages {
            // The cache breakpoints sit before the recalled block, which changes every question.
            let rendered: serde_json::Value = serde_json::from_str(&pack.rendered).unwrap();
            let last = rendered["messages"].as_array().unwrap().last().unwrap()["content"].clone();
            let blocks = last.as_array().unwrap();
            assert!(blocks.last().unwrap()["cache_control"].is_null(), "{last}");
            assert!(
                blocks.iter().rev().skip(1).any(|b| !b["cache_control"].is_null()),
                "{last}"
            );
        }
        // Another question: everything before the recalled turn is the same.
        let other = client
            .build_context(build(FACTS[4].1))
            .await
            .unwrap()
            .into_inner();
        let before = |p: &proto::BuildContextResponse| {
            let n = p.messages.len()
                - usize::from(
                    p.messages
                        .last()
                        .is_some_and(|m| m.source == proto::ContextSource::Recall as i32),
                )
                - 1;
            p.messages[..n].to_vec()
        };
        assert_eq!(before(&pack), before(&other), "{format:?}");
        assert!(other.messages.last().unwrap().content.contains("TP1352"));
    }
}

/// 1,200 messages that all say "deploy" (a common term: more than
/// `COMMON_TERM_MESSAGES` = 1,000 hold it), one of them early with a rare word too.
fn deploy_log() -> Vec<proto::Message> {
    (0..1200)
        .map(|n| match n {
            7 => user("The zebra deploy key is K-77, keep it safe."),
            n if n % 2 == 0 => user(&format!("deploy build {n} to staging please")),
            n => assistant_text(&format!("deploy {n} finished, status green")),
        })
        .collect()
}

/// The recalled turn's room comes after the mandatory part, the summary and the memory: a
/// large pending message leaves recall less room, never the pack over its budget.
async fn recall_never_pushes_the_mandatory_part_over_the_budget(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    load(&mut client, "tight", &long_conversation().0[..200]).await;
    let question = format!(
        "which invoice did we get for the march order? {}",
        "padding words ".repeat(1600)
    );
    let request = proto::BuildContextRequest {
        conversation_id: "tight".into(),
        budget: Some(proto::Budget {
            max_tokens: 4000,
            ..Default::default()
        }),
        pending_messages: vec![user(&question)],
        recall: Some(proto::Recall::default()),
        ..Default::default()
    };
    let stats = client
        .build_context(request)
        .await
        .unwrap()
        .into_inner()
        .stats
        .unwrap();
    assert!(!stats.over_budget, "{stats:?}");
    assert!(stats.pending_tokens > 3000, "{stats:?}");
    assert!(
        stats.total_tokens <= 4000 && stats.budget_tokens == 4000,
        "{stats:?}"
    );
}

/// A pack that ends on an assistant reply (built right after it, in a format that keeps it)
/// takes no recalled turn, so it keeps no room for one: its history is the pack's without
/// recall. Where the reply is left out (Anthropic), the room is kept as before.
async fn a_pack_that_ends_on_a_reply_keeps_no_room_for_recall(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    let mut messages = long_conversation().0[..300].to_vec();
    messages.push(user("which invoice did we get for the march order?"));
    messages.push(assistant_text("Let me look that up for you."));
    load(&mut client, "replied", &messages).await;
    let build = |format: proto::Format, recall: Option<proto::Recall>| proto::BuildContextRequest {
        conversation_id: "replied".into(),
        budget: Some(proto::Budget {
            max_tokens: 3000,
            ..Default::default()
        }),
        format: format as i32,
        recall,
        omit_messages: true,
        ..Default::default()
    };
    for format in [proto::Format::OpenaiChat, proto::Format::AnthropicMessages] {
        let mut stats = Vec::new();
        for recall in [None, Some(proto::Recall::default())] {
            let pack = client.build_context(build(format, recall)).await.unwrap();
            stats.push(pack.into_inner().stats.unwrap());
        }
        let (without, with) = (&stats[0], &stats[1]);
        match format {
            proto::Format::OpenaiChat => {
                assert_eq!(with.recall_tokens, 0, "{with:?}");
                assert_eq!(with.oldest_included_sequence, without.oldest_included_sequence);
                assert_eq!(with.total_tokens, without.total_tokens, "{with:?}");
            }
            _ => {
                assert!(with.messages_recalled >= 1, "{with:?}");
                assert!(
                    with.oldest_included_sequence > without.oldest_included_sequence,
                    "recall's room comes out of older history: {with:?} {without:?}"
                );
            }
        }
    }
}

async fn common_terms_do_not_hide_rare_ones_and_bound_the_ranking(kind: StoreKind) {
    let app = spawn_app(kind).await;
    let mut client = app.client.clone();
    load(&mut client, "deploys", &deploy_log()).await;
    // "deploy" is common: the early message with the rare "zebra" is still the best hit.
    let hits = search(&mut client, "deploys", "zebra deploy", 5).await;
    assert_eq!(hits[0].sequence, 8, "{hits:?}");
    assert_eq!(
        hits.len(),
        1,
        "only messages with a term that is not common are candidates"
    );
    // Every term common: the newest 1,000 matches are ranked, older ones never come.
    let hits = search(&mut client, "deploys", "deploy", 50).await;
    assert_eq!(hits.len(), 50);
    assert!(
        hits.iter().all(|h| h.sequence > 200),
        "{:?}",
        hits.iter().map(|h| h.sequence).collect::<Vec<_>>()
    );
    // "status" is not common (600 of 1,200 messages hold it): it picks the candidates, and
    // the common "deploy" adds little.
    let hits = search(&mut client, "deploys", "deploy status", 50).await;
    assert!(
        hits.iter().all(|h| h.snippet.contains("status")),
        "{:?}",
        hits.iter().map(|h| &h.snippet).collect::<Vec<_>>()
    );
}

/// Both stores rank alike: the same conversation on both, every question and a few more
/// queries, the same hits with bit-identical scores (the statistics each store counts are the
/// same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_stores_rank_alike_with_bit_identical_scores() {
    let postgres = spawn_on(Some(fresh_database().await), &[]).await;
    let memory = spawn_on(None, &[]).await;
    let (messages, _) = long_conversation();
    let (mut pg, mut mem) = (postgres.client.clone(), memory.client.clone());
    load(&mut pg, "same", &messages[..1200]).await;
    load(&mut mem, "same", &messages[..1200]).await;
    load(&mut pg, "deploys", &deploy_log()).await;
    load(&mut mem, "deploys", &deploy_log()).await;
    let extra = [
        "tests",
        "passed failed pipeline",
        "invoice reminder client",
        "noted remember",
        "lisbon",
    ];
    for query in FACTS.iter().map(|(_, q)| *q).chain(extra) {
        let (a, b) = (
            search(&mut pg, "same", query, 50).await,
            search(&mut mem, "same", query, 50).await,
        );
        let key = |hits: &[proto::SearchHit]| {
            hits.iter()
                .map(|h| {
                    (
                        h.sequence,
                        h.score.to_bits(),
                        h.snippet.clone(),
                        h.tool_name.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b), "{query:?}");
    }
    // A redaction, a rewind past it and a new message at its place: the same counts on both.
    for client in [&mut pg, &mut mem] {
        let redact = proto::RedactMessageRequest {
            conversation_id: "deploys".into(),
            sequence: 1200,
        };
        client.redact_message(redact).await.unwrap();
        let rewind = proto::RewindConversationRequest {
            conversation_id: "deploys".into(),
            after_sequence: 1199,
            ..Default::default()
        };
        client.rewind_conversation(rewind).await.unwrap();
        load(
            client,
            "deploys",
            &[assistant_text("deploy 1199 finished, status green")],
        )
        .await;
    }
    for query in [
        "zebra deploy",
        "deploy status",
        "deploy build staging",
        "finished green",
    ] {
        let (a, b) = (
            search(&mut pg, "deploys", query, 50).await,
            search(&mut mem, "deploys", query, 50).await,
        );
        let key = |hits: &[proto::SearchHit]| {
            hits.iter()
                .map(|h| (h.sequence, h.score.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b), "{query:?}");
    }
}
