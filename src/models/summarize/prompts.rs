//! The LLM protocol of summaries and extraction: the prompts, the JSON schema of extracted
//! facts and the parsing of answers. Used by the `openai` engines and by the prepare paths that
//! hand the same request to the caller's own model.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{
    context::cost::context_text,
    ids::Sequence,
    message::{Message, Role, StoredMessage},
    violation::clip,
    working_memory::{Category, ExtractedItem, Extraction, GlossaryEntry, WorkingMemory},
};

/// Instructions given to an LLM summarizer (the `openai` summarizer and PREPARE).
pub fn instructions(max_summary_tokens: usize) -> String {
    format!(
        "You maintain the rolling summary of a conversation between a user and an AI assistant. \
         Update the previous summary with the new messages and return only the new summary, with \
         these sections: Goals, Decisions, Constraints, Progress, Open questions, Next steps. \
         Keep facts, numbers, names, identifiers and decisions exactly as stated; drop pleasantries. \
         Cite message numbers like [#12] for key facts. Stay under {max_summary_tokens} tokens."
    )
}

/// The transcript of `messages` for a summarizer or extractor: one block per message, tagged
/// with its sequence and role. UI-only (excluded) messages are left out.
pub fn transcript(messages: &[StoredMessage]) -> String {
    let mut out = String::new();
    for m in messages.iter().filter(|m| !m.message.exclude_from_context) {
        let msg = &m.message;
        let role = match (msg.role, msg.name.is_empty()) {
            (Role::Tool, _) => format!("tool result for {}", msg.tool_call_id.as_deref().unwrap_or("?")),
            (role, true) => role.as_str().to_owned(),
            (role, false) => format!("{} {}", role.as_str(), msg.name),
        };
        out.push_str(&format!("[#{} {role}]", m.sequence));
        let text = context_text(msg);
        if !text.is_empty() {
            out.push(' ');
            out.push_str(&text);
        }
        for call in &msg.tool_calls {
            out.push_str(&format!(
                "\n  called {}({}) as {}",
                call.name, call.arguments, call.id
            ));
        }
        for attachment in &msg.attachments {
            out.push_str(&format!(
                "\n  attached {} ({})",
                attachment.filename, attachment.mime_type
            ));
        }
        out.push('\n');
    }
    out
}

/// The chat request a summarizer LLM is given: instructions, then the previous summary (its
/// text and watermark) and the new messages.
pub fn summary_request(
    previous: Option<(&str, Sequence)>,
    messages: &[StoredMessage],
    max_summary_tokens: usize,
) -> Vec<Message> {
    let (from, to) = (
        messages.first().map_or(0, |m| m.sequence.get()),
        messages.last().map_or(0, |m| m.sequence.get()),
    );
    let previous_text = match previous {
        Some((text, through)) => format!("Previous summary (messages 1 to {through}):\n{text}"),
        None => "Previous summary: none yet.".to_owned(),
    };
    let body = format!(
        "{previous_text}\n\nNew messages ({from} to {to}):\n{}",
        transcript(messages)
    );
    vec![
        Message::text(Role::System, instructions(max_summary_tokens)),
        Message::text(Role::User, body),
    ]
}

/// Renders plain chat messages as an OpenAI chat `messages` JSON array.
pub fn render_chat(messages: &[Message]) -> String {
    let array: Vec<_> = messages
        .iter()
        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
        .collect();
    serde_json::Value::Array(array).to_string()
}

/// Name of the extraction schema (`json_schema.name`).
pub const EXTRACTION_SCHEMA_NAME: &str = "working_memory";

/// The size limit (`max_tokens`) of an extraction answer.
pub const EXTRACTION_MAX_TOKENS: usize = 4_000;

/// The size limit of an extraction answer from a model with `context_tokens` of context: at
/// most [`EXTRACTION_MAX_TOKENS`], at most a quarter of the context.
pub fn extraction_max_tokens(context_tokens: usize) -> usize {
    EXTRACTION_MAX_TOKENS.min(context_tokens / 4)
}

/// The OpenAI `response_format` of an extraction request (strict `json_schema`).
pub fn extraction_response_format() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {"name": EXTRACTION_SCHEMA_NAME, "strict": true, "schema": extraction_schema()}
    })
}

/// JSON schema of the extraction output (OpenAI structured output, strict mode).
pub fn extraction_schema() -> Value {
    let item = json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "source_sequences": {"type": "array", "items": {"type": "integer"}},
            "supersedes": {"type": "string"}
        },
        "required": ["text", "source_sequences", "supersedes"],
        "additionalProperties": false
    });
    let mut properties = serde_json::Map::new();
    properties.insert("summary".into(), json!({"type": "string"}));
    for category in Category::ALL {
        properties.insert(category.name().into(), json!({"type": "array", "items": item}));
    }
    properties.insert(
        "glossary".into(),
        json!({"type": "array", "items": {
            "type": "object",
            "properties": {
                "term": {"type": "string"},
                "definition": {"type": "string"},
                "source_sequences": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["term", "definition", "source_sequences"],
            "additionalProperties": false
        }}),
    );
    let required: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// The extraction request for an LLM: instructions with the schema, the current facts (with
/// their ids), and the new messages.
pub fn extraction_request(memory: &WorkingMemory, messages: &[StoredMessage]) -> Vec<Message> {
    let instructions = format!(
        "Extract the structured facts of this conversation: goals, requirements, constraints, decisions, \
         assumptions, open questions, stakeholders, and a glossary of defined terms. Report only facts \
         stated in the new messages; give each the message numbers it came from in source_sequences. \
         Do not repeat facts already known. When a new fact replaces a known one (a changed decision, an \
         answered question), put the known fact's id (like d2) in supersedes; otherwise leave supersedes \
         empty. Answer with one JSON object matching this schema:\n{}",
        extraction_schema()
    );
    let known = memory
        .render_with_ids()
        .unwrap_or_else(|| "Known facts: none yet.".into());
    let body = format!("{known}\n\nNew messages:\n{}", transcript(messages));
    vec![
        Message::text(Role::System, instructions),
        Message::text(Role::User, body),
    ]
}

/// Parses an extraction answer, which must be one JSON object of [`extraction_schema`]: only
/// its fields (a field left out is empty), at least one of them, items of the right shape.
/// Anything else (`{}`, `[]`, prose, other fields) is an error: the answer did not follow the
/// schema, and taking it as "no facts" would move the watermark past unread facts.
pub fn parse_extraction(answer: &str) -> Result<Extraction, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        text: String,
        #[serde(default)]
        source_sequences: Vec<u64>,
        #[serde(default)]
        supersedes: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        term: String,
        definition: String,
        #[serde(default)]
        source_sequences: Vec<u64>,
    }
    let value: Value = serde_json::from_str(answer.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut fields) = value else {
        return Err(format!("a JSON {}, not an object", kind(&value)));
    };
    let known = |k: &str| k == "summary" || k == "glossary" || Category::ALL.iter().any(|c| c.name() == k);
    if let Some(other) = fields.keys().find(|k| !known(k)) {
        return Err(format!("{:?} is not a field of the schema", clip(other, 40)));
    }
    if fields.is_empty() {
        return Err("an empty object: none of the schema's fields".into());
    }
    let sequences = |raw: Vec<u64>, field: &str| -> Result<Vec<Sequence>, String> {
        raw.into_iter()
            .map(|s| Sequence::parse(s).map_err(|e| format!("{field}.source_sequences: {e}")))
            .collect()
    };
    let mut extraction = Extraction::default();
    for category in Category::ALL {
        let Some(raw) = fields.remove(category.name()) else {
            continue;
        };
        let items: Vec<Item> =
            serde_json::from_value(raw).map_err(|e| format!("{}: {e}", category.name()))?;
        for item in items {
            extraction.items.push(ExtractedItem {
                category,
                text: item.text,
                source_sequences: sequences(item.source_sequences, category.name())?,
                supersedes: Some(item.supersedes.trim().to_owned()).filter(|s| !s.is_empty()),
            });
        }
    }
    if let Some(raw) = fields.remove("glossary") {
        let entries: Vec<Entry> = serde_json::from_value(raw).map_err(|e| format!("glossary: {e}"))?;
        for e in entries {
            extraction.glossary.push(GlossaryEntry {
                term: e.term,
                definition: e.definition,
                source_sequences: sequences(e.source_sequences, "glossary")?,
            });
        }
    }
    if let Some(raw) = fields.remove("summary") {
        extraction.summary = raw.as_str().ok_or("summary: not a string")?.to_owned();
    }
    Ok(extraction)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_answers_parse_into_items() {
        let answer = r#"{"summary":"s","goals":[{"text":"Ship","source_sequences":[4],"supersedes":""}],"requirements":[],
            "constraints":[],"decisions":[{"text":"Use v2","source_sequences":[5],"supersedes":"d1"}],"assumptions":[],
            "open_questions":[],"stakeholders":[],
            "glossary":[{"term":"GA","definition":"general availability","source_sequences":[5]}]}"#;
        let extraction = parse_extraction(answer).unwrap();
        assert_eq!(
            extraction.items[0].source_sequences,
            [Sequence::parse(4).unwrap()]
        );
        assert_eq!(extraction.items[0].supersedes, None);
        assert_eq!(extraction.items[1].supersedes.as_deref(), Some("d1"));
        assert_eq!(extraction.glossary[0].definition, "general availability");
        assert_eq!(extraction_schema()["required"].as_array().unwrap().len(), 9);
        // A field left out is empty (json_object servers drop empty arrays).
        assert_eq!(
            parse_extraction(r#"{"goals": []}"#).unwrap(),
            Extraction::default()
        );
    }

    #[test]
    fn answers_that_ignore_the_schema_are_refused() {
        for answer in [
            "{}",
            "[]",
            "\"I cannot help\"",
            "42",
            "null",
            "I cannot help with that.",
            r#"{"facts": [{"text": "x"}]}"#,
            r#"{"goals": "Ship"}"#,
            r#"{"goals": [{"fact": "Ship"}]}"#,
            r#"{"goals": [{"text": "Ship", "source_sequences": [-1]}]}"#,
        ] {
            assert!(parse_extraction(answer).is_err(), "{answer} was accepted");
        }
    }
}
