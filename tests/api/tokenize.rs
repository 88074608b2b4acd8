//! Token counts equal OpenAI's tiktoken on a varied corpus (code, CJK, emoji, whitespace runs,
//! 100 KB strings without spaces). The expected counts in `tests/data/tiktoken_counts.json` are
//! tiktoken's own output (`scripts/tiktoken_oracle.py`, re-checked against tiktoken in CI).

use std::collections::HashMap;

use ctxd::{domain::tokenize::Tokenizer, proto};
use serde_json::Value;

use crate::helpers::{StoreKind, spawn_app};

fn corpus() -> Vec<(String, String, HashMap<String, usize>)> {
    let entries: Vec<Value> = serde_json::from_str(include_str!("../data/tokenizer_corpus.json")).unwrap();
    let counts: HashMap<String, HashMap<String, usize>> =
        serde_json::from_str(include_str!("../data/tiktoken_counts.json")).unwrap();
    entries
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_string();
            let text = match e.get("text") {
                Some(text) => text.as_str().unwrap().to_string(),
                None => e["repeat"]
                    .as_str()
                    .unwrap()
                    .repeat(e["times"].as_u64().unwrap() as usize),
            };
            let expected = counts[&name].clone();
            (name, text, expected)
        })
        .collect()
}

#[test]
fn counts_equal_tiktoken_on_the_whole_corpus_for_both_encodings() {
    let corpus = corpus();
    assert!(corpus.len() >= 40);
    let mut mismatches = Vec::new();
    for (name, text, expected) in &corpus {
        for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
            let ours = tokenizer.count(text);
            let theirs = expected[tokenizer.name()];
            if ours != theirs {
                mismatches.push(format!(
                    "{name} ({}): ctxd {ours}, tiktoken {theirs}",
                    tokenizer.name()
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

#[tokio::test]
async fn count_tokens_serves_exactly_those_counts() {
    let app = spawn_app(StoreKind::InMemory).await;
    let mut client = app.client.clone();
    for (name, text, expected) in corpus().into_iter().filter(|(_, t, _)| t.len() < 200_000) {
        for (tokenizer, key) in [
            (proto::Tokenizer::O200kBase, "o200k_base"),
            (proto::Tokenizer::Cl100kBase, "cl100k_base"),
        ] {
            let response = client
                .count_tokens(proto::CountTokensRequest {
                    text: text.clone(),
                    tokenizer: tokenizer as i32,
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(response.tokens as usize, expected[key], "{name} {key}");
        }
    }
    let default = client
        .count_tokens(proto::CountTokensRequest {
            text: "Hello, world!".into(),
            tokenizer: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (default.tokens, default.tokenizer()),
        (4, proto::Tokenizer::O200kBase)
    );
    let approx = client
        .count_tokens(proto::CountTokensRequest {
            text: "abcdefghi".into(),
            tokenizer: proto::Tokenizer::Approx as i32,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(approx.tokens, 3);
}
