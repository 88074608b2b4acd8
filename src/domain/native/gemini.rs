//! Gemini: a `GenerateContentResponse` (its first candidate's content), or an array of
//! `contents`, in the REST API's JSON (camelCase).
//!
//! A model content is one assistant message: text parts make `content`, thought parts its
//! reasoning, `functionCall` parts its calls (with their `thoughtSignature`s); every other
//! part (`executableCode`, `codeExecutionResult`, files...) stays native. A user content's
//! `functionResponse` parts become tool messages, and its other parts one user message after
//! them. A call without an `id` gets one (`gemini_`, a digest of the append's salt and the
//! JSON, and its place);
//! a response without an `id` answers the oldest unanswered call of its name earlier in the
//! same JSON, or else (bound on append) in the conversation.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::Value;

use super::{
    NativeContent, Parsed, ROOT, arguments_text, array, count, decode_base64, leftover, native_message,
    required_str, str_at,
};
use crate::domain::{
    format::Format,
    message::{Attachment, AttachmentSource, Message, Provider, Reasoning, Role, ToolCall, Usage},
    violation::Violations,
};

/// Ids given to calls that came without one, and the calls still unanswered: by id, and by
/// name in call order (O(1) each, whatever the JSON holds).
struct Calls {
    prefix: String,
    given: usize,
    by_name: HashMap<String, VecDeque<String>>,
    open: HashSet<String>,
}

impl Calls {
    /// `salt` tells apart identical JSON appended twice (the append's idempotency key, so a
    /// retry gets the same ids, or a unique value).
    fn new(value: &Value, salt: &str) -> Self {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(salt.as_bytes());
        hasher.update([0]);
        hasher.update(value.to_string().as_bytes());
        let digest: String = hasher.finalize()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Self {
            prefix: format!("gemini_{digest}"),
            given: 0,
            by_name: HashMap::new(),
            open: HashSet::new(),
        }
    }

    fn call_id(&mut self, name: &str, id: Option<&str>) -> String {
        let id = id.map(str::to_owned).unwrap_or_else(|| {
            self.given += 1;
            format!("{}_{}", self.prefix, self.given)
        });
        self.by_name
            .entry(name.to_owned())
            .or_default()
            .push_back(id.clone());
        self.open.insert(id.clone());
        id
    }

    /// The call a response answers: its own id, or the oldest open call of its name.
    fn answer(&mut self, name: &str, id: Option<&str>) -> Option<String> {
        if let Some(id) = id {
            self.open.remove(id);
            return Some(id.to_owned());
        }
        let queue = self.by_name.get_mut(name)?;
        while let Some(candidate) = queue.pop_front() {
            if self.open.remove(&candidate) {
                return Some(candidate);
            }
        }
        None
    }
}

pub(super) fn parse(value: &Value, salt: &str, parsed: &mut Parsed, v: &mut Violations) {
    let mut calls = Calls::new(value, salt);
    match value {
        Value::Array(contents) => {
            for (i, content) in contents.iter().enumerate() {
                let path = format!("{ROOT}[{i}]");
                let parts_path = format!("{path}.parts");
                let parts = array(
                    content.get("parts").unwrap_or(&Value::Null),
                    &parts_path,
                    "parts",
                    v,
                );
                match str_at(content, "role") {
                    Some("model") => parsed.push(model(parts, &parts_path, &mut calls, v), path),
                    None | Some("user" | "function") => user(parts, &parts_path, &mut calls, parsed, v),
                    Some(other) => v.add(
                        format!("{path}.role"),
                        format!("`{other}` is not a Gemini role (`user` or `model`)"),
                    ),
                }
            }
        }
        Value::Object(_) if value.get("candidates").is_some() => {
            let path = format!("{ROOT}.candidates");
            let candidates = array(&value["candidates"], &path, "candidates", v);
            if candidates.len() != 1 {
                v.add(
                    path,
                    format!("{} candidates: append one (candidateCount 1)", candidates.len()),
                );
                return;
            }
            let parts_path = format!("{ROOT}.candidates[0].content.parts");
            let parts = array(
                candidates[0].pointer("/content/parts").unwrap_or(&Value::Null),
                &parts_path,
                "parts",
                v,
            );
            let mut message = model(parts, &parts_path, &mut calls, v);
            message.usage = value.get("usageMetadata").map(usage).unwrap_or_default();
            parsed.push(message, ROOT.into());
        }
        _ => v.add(
            ROOT,
            "expected a Gemini `GenerateContentResponse` or an array of `contents`",
        ),
    }
}

/// A model content's parts as one assistant message.
fn model(parts: &[Value], path: &str, calls: &mut Calls, v: &mut Violations) -> Message {
    let native = NativeContent::new(Format::Gemini, Value::Array(parts.to_vec()));
    let mut message = native_message(Role::Assistant, native);
    let mut text_seen = false;
    for (k, part) in parts.iter().enumerate() {
        let path = format!("{path}[{k}]");
        let signature = str_at(part, "thoughtSignature").unwrap_or_default();
        let position = u32::from(text_seen) + message.tool_calls.len() as u32;
        if let Some(call) = part.get("functionCall") {
            let name = required_str(call, "name", &format!("{path}.functionCall"), v).unwrap_or_default();
            let id = calls.call_id(name, str_at(call, "id"));
            let mut tool_call = ToolCall::new(id, name, arguments_text(call.get("args")));
            tool_call.signature = signature.into();
            message.tool_calls.push(tool_call);
        } else if part.get("thought").and_then(Value::as_bool) == Some(true) {
            let mut r = Reasoning::new(Provider::Gemini, "thought");
            r.text = str_at(part, "text").unwrap_or_default().into();
            r.signature = signature.into();
            r.position = position;
            message.reasoning.push(r);
        } else if let Some(text) = str_at(part, "text") {
            message.content.push_str(text);
            text_seen = true;
            if message.content_signature.is_empty() {
                message.content_signature = signature.into();
            }
        } else if part.get("functionResponse").is_some() {
            v.add(
                format!("{path}.functionResponse"),
                "a function response belongs in a user content",
            );
        } else if !part.is_object() {
            v.add(path, "must be a JSON object");
        }
    }
    message
}

/// A user content: its function responses, then the rest as one user message.
fn user(parts: &[Value], path: &str, calls: &mut Calls, parsed: &mut Parsed, v: &mut Violations) {
    let mut rest = Vec::new();
    for (k, part) in parts.iter().enumerate() {
        let part_path = format!("{path}[{k}]");
        match part.get("functionResponse") {
            Some(response) => {
                let mut message =
                    native_message(Role::Tool, NativeContent::new(Format::Gemini, part.clone()));
                let response_path = format!("{part_path}.functionResponse");
                let name = required_str(response, "name", &response_path, v).unwrap_or_default();
                message.tool_call_id = calls.answer(name, str_at(response, "id"));
                if message.tool_call_id.is_none() {
                    // Answers a call appended earlier: bound to it on append.
                    parsed.unbound.push((parsed.messages.len(), name.to_owned()));
                }
                message.content = match response.get("response") {
                    Some(Value::Object(map))
                        if map.len() == 1 && map.get("output").is_some_and(Value::is_string) =>
                    {
                        map["output"].as_str().unwrap_or_default().into()
                    }
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                parsed.push(message, part_path);
            }
            None if !part.is_object() => v.add(part_path, "must be a JSON object"),
            None => rest.push((k, part)),
        }
    }
    let Some(&(first, _)) = rest.first() else {
        return;
    };
    let kept: Vec<Value> = rest.iter().map(|(_, p)| (*p).clone()).collect();
    let mut message = native_message(Role::User, NativeContent::new(Format::Gemini, Value::Array(kept)));
    let mut texts = Vec::new();
    for (k, part) in rest {
        let part_path = format!("{path}[{k}]");
        if let Some(text) = str_at(part, "text") {
            texts.push(text);
        }
        message.attachments.extend(attachment(part, &part_path, v));
    }
    message.content = texts.join("\n");
    parsed.push(message, format!("{path}[{first}]"));
}

fn attachment(part: &Value, path: &str, v: &mut Violations) -> Option<Attachment> {
    if let Some(inline) = part.get("inlineData") {
        let path = format!("{path}.inlineData");
        let mime_type = required_str(inline, "mimeType", &path, v)?.to_owned();
        let data = required_str(inline, "data", &path, v)?;
        let bytes = decode_base64(data, &format!("{path}.data"), v)?;
        return Some(Attachment {
            mime_type,
            filename: String::new(),
            source: AttachmentSource::Data(bytes),
            width: 0,
            height: 0,
        });
    }
    let file = part.get("fileData")?;
    let path = format!("{path}.fileData");
    let uri = required_str(file, "fileUri", &path, v)?;
    let mime_type = str_at(file, "mimeType")
        .unwrap_or("application/octet-stream")
        .to_owned();
    Some(Attachment {
        mime_type,
        filename: String::new(),
        source: AttachmentSource::Uri(uri.into()),
        width: 0,
        height: 0,
    })
}

fn usage(usage: &Value) -> Usage {
    let thoughts = count(usage, "/thoughtsTokenCount");
    Usage {
        input_tokens: count(usage, "/promptTokenCount"),
        output_tokens: count(usage, "/candidatesTokenCount") + thoughts,
        cached_input_tokens: count(usage, "/cachedContentTokenCount"),
        reasoning_tokens: thoughts,
    }
}

/// Thought parts go, and every part's `thoughtSignature`.
pub(super) fn strip_reasoning(json: &mut Value) {
    let Value::Array(parts) = json else {
        return;
    };
    parts.retain(|p| p.get("thought").and_then(Value::as_bool) != Some(true));
    for part in parts.iter_mut() {
        if let Value::Object(map) = part {
            map.remove("thoughtSignature");
        }
    }
    // A blank text part was there for its signature: without it, Gemini refuses it.
    drop_blank_text(parts);
}

/// Leaves out parts that are blank text alone (no signature): Gemini refuses them ("empty
/// text parameter").
pub fn drop_blank_text(parts: &mut Vec<Value>) {
    parts.retain(|p| {
        let blank = p
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| t.trim().is_empty());
        !(blank && p.as_object().is_some_and(|o| o.len() == 1))
    });
}

pub(super) fn extra(json: &Value) -> Vec<Value> {
    let Value::Array(parts) = json else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for part in parts {
        if part.get("text").is_some() {
            out.extend(leftover(part, &["text", "thought", "thoughtSignature"]));
        } else if part.get("functionCall").is_some() {
            out.extend(leftover(part, &["functionCall", "thoughtSignature"]));
        } else if part.get("inlineData").is_none() && part.get("fileData").is_none() {
            out.push(part.clone());
        }
    }
    out
}
