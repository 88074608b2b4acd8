//! Token counting throughput of ctxd's tokenizers on a mixed corpus; scripts/bench.sh runs
//! tiktoken on the same file and compares throughput and counts.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use ctxd::tokenize::Tokenizer;

pub(crate) fn run(out: &Path) {
    let corpus: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("../../tests/data/tokenizer_corpus.json")).expect("corpus");
    let text: String = corpus
        .iter()
        .filter_map(|e| e.get("text").and_then(|t| t.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
        .repeat(40);
    let path = out.join("token-text.txt");
    std::fs::write(&path, &text).expect("write token text");
    println!(
        "# token counting, {} KB of mixed text (written to {})",
        text.len() / 1024,
        path.display()
    );
    for tokenizer in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
        // Median of five 1-second rounds: single rounds vary a lot on shared machines.
        let mut rates = Vec::new();
        let mut tokens = 0;
        for _ in 0..5 {
            let start = Instant::now();
            let mut rounds = 0;
            while start.elapsed() < Duration::from_secs(1) {
                tokens = tokenizer.count(&text);
                rounds += 1;
            }
            rates.push((text.len() * rounds) as f64 / start.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{{\"encoding\": \"{}\", \"tokens\": {tokens}, \"bytes_per_sec\": {:.0}}}",
            tokenizer.name(),
            rates[2]
        );
    }
}
