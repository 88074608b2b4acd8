//! The LLM protocol of summaries and extraction: the prompts, the JSON schema of extracted
//! facts and the parsing of answers. Used by the `openai` engines and by the prepare paths that
//! hand the same request to the caller's own model.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{
    context::cost::context_text,
    ids::Sequence,
    memory::{Category, MemoryEditor, Supersedes, WorkingMemory},
    message::{Message, Role, StoredMessage},
    summary::Summary,
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

/// The chat request a summarizer LLM is given: instructions, then the previous summary and the
/// new messages.
pub fn summary_request(
    previous: Option<&Summary>,
    messages: &[StoredMessage],
    max_summary_tokens: usize,
) -> Vec<Message> {
    let (from, to) = (
        messages.first().map_or(0, |m| m.sequence.get()),
        messages.last().map_or(0, |m| m.sequence.get()),
    );
    let previous_text = match previous {
        Some(s) => format!(
            "Previous summary (messages 1 to {}):\n{}",
            s.through_sequence, s.text
        ),
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

/// JSON schema of the extraction output (OpenAI structured output, strict mode).
pub fn extraction_schema() -> Value {
    let item = json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "source_sequences": {"type": "array", "items": {"type": "integer"}}
        },
        "required": ["text", "source_sequences"],
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

/// The extraction request for an LLM: instructions with the schema, the current facts, and the
/// new messages.
pub fn extraction_request(memory: &WorkingMemory, messages: &[StoredMessage]) -> Vec<Message> {
    let instructions = format!(
        "Extract the structured facts of this conversation: goals, requirements, constraints, decisions, \
         assumptions, open questions, stakeholders, and a glossary of defined terms. Report only facts \
         stated in the new messages; give each the message numbers it came from in source_sequences. \
         Do not repeat facts already known. Answer with JSON matching this schema:\n{}",
        extraction_schema()
    );
    let known = memory.render().unwrap_or_else(|| "Known facts: none yet.".into());
    let body = format!("{known}\n\nNew messages:\n{}", transcript(messages));
    vec![
        Message::text(Role::System, instructions),
        Message::text(Role::User, body),
    ]
}

/// Parses an extraction answer (JSON per [`extraction_schema`]) into a document to merge.
pub fn parse_extraction(answer: &str) -> Result<WorkingMemory, serde_json::Error> {
    #[derive(Deserialize)]
    struct Item {
        text: String,
        #[serde(default)]
        source_sequences: Vec<u64>,
    }
    let value: Value = serde_json::from_str(answer)?;
    let mut memory = WorkingMemory::default();
    let mut editor = MemoryEditor::new(&mut memory);
    for category in Category::ALL {
        let items: Vec<Item> =
            serde_json::from_value(value.get(category.name()).cloned().unwrap_or(json!([])))?;
        for item in items {
            let sources: Vec<Sequence> = item
                .source_sequences
                .into_iter()
                .filter_map(|s| Sequence::parse(s).ok())
                .collect();
            editor.add(category, &item.text, &sources, Supersedes::Nothing);
        }
    }
    #[derive(Deserialize)]
    struct Entry {
        term: String,
        definition: String,
        #[serde(default)]
        source_sequences: Vec<u64>,
    }
    let glossary: Vec<Entry> = serde_json::from_value(value.get("glossary").cloned().unwrap_or(json!([])))?;
    for e in glossary {
        let sources: Vec<Sequence> = e
            .source_sequences
            .into_iter()
            .filter_map(|s| Sequence::parse(s).ok())
            .collect();
        editor.define(&e.term, &e.definition, &sources);
    }
    memory.summary = value
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_answers_parse_into_items() {
        let answer = r#"{"summary":"s","goals":[{"text":"Ship","source_sequences":[4]}],"requirements":[],
            "constraints":[],"decisions":[],"assumptions":[],"open_questions":[],"stakeholders":[],
            "glossary":[{"term":"GA","definition":"general availability","source_sequences":[5]}]}"#;
        let memory = parse_extraction(answer).unwrap();
        assert_eq!(memory.goals[0].source_sequences, [Sequence::parse(4).unwrap()]);
        assert_eq!(memory.glossary[0].definition, "general availability");
        assert_eq!(extraction_schema()["required"].as_array().unwrap().len(), 9);
    }
}
