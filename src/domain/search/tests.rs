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

/// Values PostgreSQL 15 returns for the same vectors and queries.
#[test]
fn rank_matches_postgres_reference_values() {
    let abc = document(&[("a", &[1]), ("b", &[2]), ("c", &[3])]);
    assert_eq!(
        rank::rank_normalized(&abc, &query(&["a", "b", "c"]), 0),
        0.06079271
    );
    assert_eq!(
        rank::rank_normalized(&abc, &query(&["a", "b", "c"]), 1),
        0.030396355
    );
    assert_eq!(rank::rank_normalized(&abc, &query(&["a"]), 0), 0.06079271);
    let repeated = document(&[("a", &[1, 3, 7]), ("b", &[2]), ("c", &[3])]);
    let score = rank::rank_normalized(&repeated, &query(&["a", "b"]), 0);
    assert_eq!(score.to_bits(), 0x3d92fbb7);
    assert_eq!(rank(&SearchDocument::default(), &query(&["a"])), 0.0);
}

#[test]
fn snippets_center_on_the_first_match() {
    let text = format!(
        "{} The invoice number is INV-2291. {}",
        "filler words ".repeat(50),
        "more ".repeat(50)
    );
    let q = SearchQuery::parse("invoice", Language::English);
    let s = snippet(&text, &q, Language::English, 80);
    assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
    assert!(s.contains("invoice number is INV-2291"), "{s}");
    assert!(s.len() <= 80 + 2 * ELLIPSIS_BYTES, "{s}");
    assert_eq!(snippet("short   text", &q, Language::English, 80), "short text");
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
