//! Token counting throughput of ctxd's tokenizers on two texts: the tokenizer test corpus
//! (code, CJK, emoji, long runs: the hard cases) and chat turns like the bench conversation's.
//! scripts/bench.sh runs tiktoken on the same files and compares throughput and counts.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use ctxd::domain::tokenize::Tokenizer;

use crate::build::message;

pub(crate) fn run(out: &Path) {
    let corpus: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("../../tests/data/tokenizer_corpus.json")).expect("corpus");
    let corpus: String = corpus
        .iter()
        .filter_map(|e| e.get("text").and_then(|t| t.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
        .repeat(40);
    let chat: String = (0..4_000)
        .map(|n| {
            let m = message(n);
            let calls = m.tool_calls.iter().map(|c| c.arguments.as_str());
            std::iter::once(m.content.as_str())
                .chain(calls)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n");
    for (name, text) in [("corpus", corpus), ("chat", chat)] {
        let path = out.join(format!("{name}.txt"));
        std::fs::write(&path, &text).expect("write token text");
        println!(
            "# token counting, {} KB of {name} text ({})",
            text.len() / 1024,
            path.display()
        );
        for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
            measure(name, tokenizer, &text);
        }
    }
}

/// Median of five 1-second rounds: single rounds vary a lot on shared machines.
fn measure(name: &str, tokenizer: Tokenizer, text: &str) {
    let mut rates = Vec::new();
    let mut tokens = 0;
    for _ in 0..5 {
        let start = Instant::now();
        let mut rounds = 0;
        while start.elapsed() < Duration::from_secs(1) {
            tokens = tokenizer.count(text);
            rounds += 1;
        }
        rates.push((text.len() * rounds) as f64 / start.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "{{\"text\": \"{name}\", \"encoding\": \"{}\", \"tokens\": {tokens}, \"bytes_per_sec\": {:.0}}}",
        tokenizer.name(),
        rates[2]
    );
}
