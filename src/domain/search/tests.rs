use proptest::strategy::Strategy as _;

use super::*;
use crate::domain::message::ToolCall;

fn document(entries: &[(&str, &[u16])]) -> SearchDocument {
    SearchDocument {
        entries: entries
            .iter()
            .map(|(t, p)| (Box::<str>::from(*t), p.to_vec()))
            .collect(),
    }
}

fn query(terms: &[&str]) -> SearchQuery {
    let mut terms: Vec<String> = terms.iter().map(|t| t.to_string()).collect();
    terms.sort();
    terms.dedup();
    SearchQuery { terms }
}

#[test]
fn english_documents_stem_and_leave_stop_words_out() {
    let doc = SearchDocument::of_text(
        "The invoice numbers: INV-2291, invoiced twice!",
        Language::English,
    );
    let terms: Vec<&str> = doc.terms().collect();
    assert_eq!(terms, ["2291", "inv", "invoic", "number", "twice"]);
    assert_eq!(doc.positions("invoic"), Some(&[2, 6][..]));
    assert_eq!(
        doc.tsvector("ab12cd34:"),
        "'ab12cd34:2291':5 'ab12cd34:inv':4 'ab12cd34:invoic':2,6 'ab12cd34:number':3 'ab12cd34:twice':7"
    );
}

#[test]
fn simple_documents_only_lower_case() {
    let doc = SearchDocument::of_text("The Invoices the", Language::Simple);
    let terms: Vec<&str> = doc.terms().collect();
    assert_eq!(terms, ["invoices", "the"]);
    assert_eq!(doc.positions("the"), Some(&[1, 3][..]));
}

#[test]
fn words_of_any_script_are_words_and_long_tokens_are_not() {
    let blob = "x".repeat(MAX_WORD_BYTES + 1);
    let text = format!("Grüße aus Köln, привет мир — नमस्ते {blob}");
    let doc = SearchDocument::of_text(&text, Language::Simple);
    let terms: Vec<&str> = doc.terms().collect();
    assert_eq!(terms, ["aus", "grüße", "köln", "мир", "привет", "नमस्ते"]);
}

#[test]
fn positions_are_capped_as_postgres_caps_them() {
    let text = "word ".repeat(300) + &"filler ".repeat(20_000) + "late late";
    let doc = SearchDocument::of_text(&text, Language::Simple);
    assert_eq!(doc.positions("word").map(<[u16]>::len), Some(MAX_POSITIONS));
    assert_eq!(doc.positions("late"), Some(&[MAX_POSITION][..]));
}

#[test]
fn queries_are_sorted_distinct_terms() {
    let q = SearchQuery::parse(
        "What was the invoice number again? The invoice!",
        Language::English,
    );
    assert_eq!(q.terms(), ["invoic", "number"]);
    assert_eq!(q.tsquery("s:"), "'s:invoic' | 's:number'");
    assert!(SearchQuery::parse("what was it again?", Language::English).is_empty());
}

#[test]
fn quoting_doubles_quotes_and_escapes_backslashes() {
    let mut out = String::new();
    push_quoted(&mut out, "s:", "a'b\\c");
    assert_eq!(out, r"'s:a''b\\c'");
}

#[test]
fn searchable_text_holds_content_calls_and_errors() {
    let mut message = Message::text(Role::User, "look up".into());
    message.tool_calls = vec![ToolCall::new("c1", "get_invoice", r#"{"id":"INV-7"}"#)];
    assert_eq!(
        searchable_text(&message),
        "look up\nget_invoice\n{\"id\":\"INV-7\"}"
    );
    message.content = "é".repeat(MAX_SEARCHED_BYTES);
    let text = searchable_text(&message);
    assert!(text.len() <= MAX_SEARCHED_BYTES && text.len() > MAX_SEARCHED_BYTES - 4);
}

/// BM25 by hand: N = 1,000 messages of mean length 20; "adopt" held by 3, "caroline" by 500.
#[test]
fn bm25_weighs_rare_terms_saturates_repeats_and_normalizes_length() {
    let collection = Collection {
        messages: 1000,
        length: 20_000,
    };
    let q = query(&["adopt", "caroline"]);
    let weights = Weights::new(&q, &[3, 500], collection);
    // idf(adopt) = ln(1 + 997.5 / 3.5) = 5.65599; at the mean length one occurrence scores
    // exactly its idf.
    let rare = weights.score(20, |i| u32::from(i == 0));
    assert!(
        (f64::from(rare) - (1.0f64 + 997.5 / 3.5).ln()).abs() < 1e-5,
        "{rare}"
    );
    // idf(caroline) = ln(1 + 500.5 / 500.5) = ln 2: a name half the messages hold weighs an
    // eighth of the rare word, however often it is repeated.
    let name = weights.score(20, |i| u32::from(i == 1));
    assert!((f64::from(name) - 2f64.ln()).abs() < 1e-6, "{name}");
    // Repeats saturate towards k1 + 1 = 1.9 times one occurrence: 50 of them score 1.87.
    let name_repeated = weights.score(20, |i| if i == 1 { 50 } else { 0 });
    assert!(
        name_repeated < 1.9 * name && name_repeated > 1.85 * name,
        "{name_repeated}"
    );
    assert!(rare > name_repeated * 3.0);
    // A short message with the name only does not outrank a long one with the rare word.
    assert!(weights.score(2, |i| u32::from(i == 1)) < weights.score(200, |i| u32::from(i == 0)));
    // Longer is lower for the same occurrences; nothing held is zero.
    assert!(weights.score(40, |i| u32::from(i == 0)) < rare);
    assert_eq!(weights.score(20, |_| 0), 0.0);
    // Holders beyond the collection (a count capped above a short log) stay non-negative.
    let few = Collection {
        messages: 2,
        length: 10,
    };
    let weights = Weights::new(&q, &[1001, 1001], few);
    assert!(weights.score(5, |_| 1) > 0.0);
}

/// A document counts a term's occurrences as its positions.
#[test]
fn occurrences_are_positions() {
    let repeated = document(&[("a", &[1, 3, 7]), ("b", &[2])]);
    assert_eq!(repeated.occurrences("a"), 3);
    assert_eq!(repeated.occurrences("b"), 1);
    assert_eq!(repeated.occurrences("z"), 0);
}

#[test]
fn snippets_hold_the_match() {
    let text = format!(
        "{} The invoice number is INV-2291. {}",
        "filler words ".repeat(50),
        "more ".repeat(50)
    );
    let q = SearchQuery::parse("invoice", Language::English);
    let weighted = Weighted {
        query: &q,
        weights: &[],
        language: Language::English,
    };
    let s = snippet(&text, weighted, 80);
    assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
    assert!(s.contains("invoice number is INV-2291"), "{s}");
    assert!(s.len() <= 80 + 2 * ELLIPSIS_BYTES, "{s}");
    assert_eq!(snippet("short   text", weighted, 80), "short text");
}

const ELLIPSIS_BYTES: usize = "…".len();

#[test]
fn scopes_differ_by_tenant_and_conversation() {
    let a = scope("t", "c");
    assert_eq!(a.len(), 9);
    assert!(a.ends_with(':'));
    assert_ne!(a, scope("t", "d"));
    assert_ne!(a, scope("u", "c"));
    assert_eq!("english".parse::<Language>(), Ok(Language::English));
    assert!("klingon".parse::<Language>().is_err());
}

#[test]
fn the_embedded_query_leaves_out_what_the_conversation_says_all_the_time() {
    let text = "What is Hamish's dog allergic to, Hamish?";
    let q = SearchQuery::parse(text, Language::English);
    // Terms sorted: allerg, dog, hamish.
    assert_eq!(q.terms(), ["allerg", "dog", "hamish"]);
    let holders = TermHolders {
        holders: vec![2, 9, 150],
        messages: 600,
    };
    assert_eq!(
        semantic_text(text, &q, &holders, Language::English),
        "What is 's dog allergic to, ?"
    );
    // Nothing common: the text as asked; everything common: the text as asked too.
    let rare = TermHolders {
        holders: vec![2, 9, 20],
        messages: 600,
    };
    assert_eq!(semantic_text(text, &q, &rare, Language::English), text);
    let all = TermHolders {
        holders: vec![200, 200, 200],
        messages: 600,
    };
    assert_eq!(semantic_text(text, &q, &all, Language::English), text);
}

/// A document as the word-by-word path would build it: every term in a sorted map, its
/// first-seen ones up to the cap.
fn document_word_by_word(text: &str, language: Language) -> SearchDocument {
    let mut terms: std::collections::BTreeMap<String, Vec<u16>> = Default::default();
    let mut order = 0;
    language.terms(text, |term, position| {
        let position = u16::try_from(position).unwrap_or(MAX_POSITION).min(MAX_POSITION);
        if !terms.contains_key(term) {
            if order >= MAX_DOCUMENT_TERMS {
                return;
            }
            order += 1;
            terms.insert(term.to_owned(), Vec::new());
        }
        let positions = terms.get_mut(term).unwrap();
        if positions.len() < MAX_POSITIONS && positions.last() != Some(&position) {
            positions.push(position);
        }
    });
    SearchDocument {
        entries: terms.into_iter().map(|(t, p)| (t.into_boxed_str(), p)).collect(),
    }
}

proptest::proptest! {
    /// Stemming each distinct word once per document (and numbering terms) changes nothing:
    /// repeats in any case, stop words, long words, scripts, past the term cap and past the
    /// positions' caps.
    #[test]
    fn documents_are_the_same_as_word_by_word(
        words in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(vec![
                    "The", "the", "THE", "running", "Runs", "ran", "Zürich", "zürich", "naïve", "日本語",
                    "x", "1", "2291", "INV", "connection", "connected", "connects", "a", "is",
                ]).prop_map(str::to_owned),
                "[a-zA-Z]{1,12}",
                "[a-z]{65,70}",
            ],
            0..400,
        ),
        separator in proptest::sample::select(vec![" ", ", ", "-", "\n", "。"]),
        language in proptest::sample::select(Language::ALL.to_vec()),
    ) {
        let text = words.join(separator);
        proptest::prop_assert_eq!(SearchDocument::of_text(&text, language), document_word_by_word(&text, language));
    }
}

#[test]
fn documents_past_the_term_cap_keep_their_first_terms_as_word_by_word() {
    let text: String = (0..MAX_DOCUMENT_TERMS + 300)
        .map(|i| format!("w{i} w{} ", i / 2))
        .collect();
    for language in [Language::Simple, Language::English] {
        let document = SearchDocument::of_text(&text, language);
        assert_eq!(document.len(), MAX_DOCUMENT_TERMS);
        assert_eq!(document, document_word_by_word(&text, language));
    }
}
