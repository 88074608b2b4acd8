//! OpenAI Responses `input` items. System parts (system prompt, summary, memory, notice) are
//! `system` message items in pack order rather than `instructions`: the pack stays one array
//! whose beginning repeats from call to call, and `instructions` stays the caller's. Messages
//! carry no `name` (the Responses API has none).

use serde_json::{Map, Value, json};

use super::{
    Mode, OPENAI_IMAGE_TYPES, attachment_note, data_uri, fetchable, inline, native_list,
    responses_pairing::{
        plain_outputs_typed, unpairable_reasoning_dropped, unpaired_ids_dropped, without_id,
    },
};
use crate::domain::{
    context::{
        ContextMessage, Format,
        cost::{context_text, openai_name, pack_arguments},
    },
    message::{Attachment, AttachmentSource, Block, Message, Reasoning, ReasoningKind, Role},
};

/// The pack as a Responses `input` array. In a pack, an output item keeps its id only where
/// the reasoning of its response is sent before it ("Item 'fc_…' of type 'function_call' was
/// provided without its required 'reasoning' item"): native items appended without their
/// reasoning lose their ids as modeled ones do ([`assistant_items`]); history keeps them.
pub(super) fn openai_responses(messages: &[ContextMessage], mode: Mode) -> String {
    let mut items = Vec::with_capacity(messages.len());
    for m in messages {
        push_items(&m.message, &mut items);
    }
    plain_outputs_typed(&mut items);
    if mode == Mode::Pack {
        unpairable_reasoning_dropped(&mut items);
        unpaired_ids_dropped(&mut items);
    }
    Value::Array(items).to_string()
}

fn push_items(message: &Message, items: &mut Vec<Value>) {
    if let Some(mut native) = native_list(message, Format::OpenAiResponses) {
        for item in native.iter_mut().filter(|item| item["type"] == "function_call") {
            super::sendable_call(item, "arguments");
        }
        items.extend(native);
        return;
    }
    let text = context_text(message);
    match message.role {
        Role::System => items.push(json!({"type": "message", "role": "system", "content": text})),
        Role::User if message.attachments.is_empty() => {
            items.push(json!({"type": "message", "role": "user", "content": text}))
        }
        Role::User => {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(json!({"type": "input_text", "text": text}));
            }
            parts.extend(message.attachments.iter().map(input_part));
            items.push(json!({"type": "message", "role": "user", "content": parts}));
        }
        Role::Tool => items.push(json!({
            "type": "function_call_output",
            "call_id": message.tool_call_id.as_deref().unwrap_or_default(),
            "output": text,
        })),
        Role::Assistant => items.extend(assistant_items(message, &text)),
    }
}

/// An assistant message's output items in the order the model produced them. The API pairs a
/// `reasoning` item with the item right after it by that item's id, and refuses one without
/// its following item: a reasoning item is sent only when an item carrying its id follows it,
/// and item ids only when the message's reasoning is sent (an id alone pairs with nothing).
fn assistant_items(message: &Message, text: &str) -> Vec<Value> {
    let mut items: Vec<(Value, bool)> = Vec::new();
    for block in message.blocks() {
        match block {
            Block::Text if text.is_empty() => {}
            Block::Text => items.push((assistant_text(message, text), !message.content_item_id.is_empty())),
            Block::Call(call) => {
                let mut item = json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": openai_name(&call.name).unwrap_or_default(),
                    "arguments": pack_arguments(&call.arguments),
                });
                if !call.item_id.is_empty() {
                    item["id"] = json!(call.item_id);
                }
                items.push((item, !call.item_id.is_empty()));
            }
            Block::Reasoning(r) if r.known_kind() == Some(ReasoningKind::OpenAiReasoning) => {
                items.push((reasoning_item(r), false))
            }
            // Another provider's: the packer strips those.
            Block::Reasoning(_) => {}
        }
    }
    let is_reasoning = |item: &Value| item["type"] == "reasoning";
    let paired: Vec<bool> = (0..items.len())
        .map(|i| !is_reasoning(&items[i].0) || items.get(i + 1).is_some_and(|(_, has_id)| *has_id))
        .collect();
    let any_reasoning = items
        .iter()
        .zip(&paired)
        .any(|((item, _), keep)| *keep && is_reasoning(item));
    items
        .into_iter()
        .zip(paired)
        .filter(|(_, keep)| *keep)
        .map(|((mut item, has_id), _)| {
            if has_id && !any_reasoning {
                without_id(&mut item);
            }
            item
        })
        .collect()
}

/// Assistant text: the output message item it came in when its id is known (so that the
/// reasoning before it finds its following item), a plain message otherwise.
fn assistant_text(message: &Message, text: &str) -> Value {
    let mut item = if message.content_item_id.is_empty() {
        json!({"type": "message", "role": "assistant", "content": text})
    } else {
        json!({
            "type": "message",
            "role": "assistant",
            "id": message.content_item_id,
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    };
    // OpenAI asks for the phase back on every assistant message, reasoning or not.
    if !message.content_phase.is_empty() {
        item["phase"] = json!(message.content_phase);
    }
    item
}

/// A `reasoning` item as the API returned it: id, summary parts, and the encrypted content
/// and reasoning text when there were any.
fn reasoning_item(reasoning: &Reasoning) -> Value {
    let mut item = Map::new();
    item.insert("type".into(), json!("reasoning"));
    item.insert("id".into(), json!(reasoning.id));
    let summary: Vec<Value> = reasoning
        .summary
        .iter()
        .map(|text| json!({"type": "summary_text", "text": text}))
        .collect();
    item.insert("summary".into(), Value::Array(summary));
    if !reasoning.data.is_empty() {
        item.insert("encrypted_content".into(), json!(reasoning.data));
    }
    if !reasoning.text.is_empty() {
        item.insert(
            "content".into(),
            json!([{"type": "reasoning_text", "text": reasoning.text}]),
        );
    }
    Value::Object(item)
}

/// An attachment as an input part: images of [`OPENAI_IMAGE_TYPES`] as `input_image`, inline
/// files of [`INPUT_FILE_TYPES`] as `input_file`, anything else as a text reference (the API
/// refuses other types: "Expected context stuffing file type to be a supported format").
fn input_part(attachment: &Attachment) -> Value {
    // Parameters (`; charset=utf-8`) are not part of the type.
    let mime = attachment.mime_type.split(';').next().unwrap_or_default().trim();
    let is_image = OPENAI_IMAGE_TYPES.iter().any(|t| t.eq_ignore_ascii_case(mime));
    let file_name = || input_file_name(&attachment.filename, mime);
    match (&attachment.source, is_image) {
        (AttachmentSource::Uri(uri), true) => match fetchable(uri) {
            Some(url) => json!({"type": "input_image", "image_url": url, "detail": "auto"}),
            None => json!({"type": "input_text", "text": attachment_note(attachment)}),
        },
        (AttachmentSource::Data(data), true) => json!({
            "type": "input_image",
            "image_url": data_uri(mime, data),
            "detail": "auto",
        }),
        (AttachmentSource::Data(data), false) => match file_name() {
            Some(filename) => json!({
                "type": "input_file",
                "filename": filename,
                "file_data": data_uri(mime, data),
            }),
            None => json!({"type": "input_text", "text": attachment_note(attachment)}),
        },
        // A file given as a `data:` URI is inline data too.
        (AttachmentSource::Uri(uri), false) => match (inline(uri), file_name()) {
            (Some(file_data), Some(filename)) => json!({
                "type": "input_file",
                "filename": filename,
                "file_data": file_data,
            }),
            _ => json!({"type": "input_text", "text": attachment_note(attachment)}),
        },
    }
}

/// The file types the Responses API takes as `input_file` (developers.openai.com, "File
/// inputs", full list of accepted file types): PDF, spreadsheets, rich documents,
/// presentations, text and code. No image, audio or video type is among them.
const INPUT_FILE_TYPES: [&str; 127] = [
    "application/csv",
    "application/graphql",
    "application/javascript",
    "application/json",
    "application/json5",
    "application/msword",
    "application/pdf",
    "application/rtf",
    "application/toml",
    "application/typescript",
    "application/vnd.apple.iwork",
    "application/vnd.apple.keynote",
    "application/vnd.apple.pages",
    "application/vnd.google-apps.document",
    "application/vnd.google-apps.presentation",
    "application/vnd.google-apps.spreadsheet",
    "application/vnd.ms-excel",
    "application/vnd.ms-powerpoint",
    "application/vnd.oasis.opendocument.text",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/x-awk",
    "application/x-bash",
    "application/x-graphql",
    "application/x-httpd-php",
    "application/x-httpd-php-source",
    "application/x-iif",
    "application/x-json5",
    "application/x-ndjson",
    "application/x-patch",
    "application/x-php",
    "application/x-powershell",
    "application/x-protobuf",
    "application/x-rust",
    "application/x-scala",
    "application/x-sql",
    "application/x-subrip",
    "application/x-terraform",
    "application/x-toml",
    "application/x-yaml",
    "application/yaml",
    "message/rfc822",
    "text/calendar",
    "text/css",
    "text/csv",
    "text/html",
    "text/javascript",
    "text/jsx",
    "text/markdown",
    "text/plain",
    "text/rtf",
    "text/srt",
    "text/tsv",
    "text/tsx",
    "text/vbscript",
    "text/vtt",
    "text/x-asm",
    "text/x-astro",
    "text/x-awk",
    "text/x-bash",
    "text/x-c",
    "text/x-c++",
    "text/x-clojure",
    "text/x-cmake",
    "text/x-csharp",
    "text/x-dart",
    "text/x-diff",
    "text/x-dockerfile",
    "text/x-ejs",
    "text/x-elixir",
    "text/x-erb",
    "text/x-erlang",
    "text/x-go",
    "text/x-golang",
    "text/x-gradle",
    "text/x-graphql",
    "text/x-groovy",
    "text/x-handlebars",
    "text/x-haskell",
    "text/x-hcl",
    "text/x-iif",
    "text/x-ini",
    "text/x-jade",
    "text/x-java",
    "text/x-jinja2",
    "text/x-julia",
    "text/x-kotlin",
    "text/x-less",
    "text/x-liquid",
    "text/x-lisp",
    "text/x-lua",
    "text/x-makefile",
    "text/x-mustache",
    "text/x-objectivec",
    "text/x-objectivec++",
    "text/x-patch",
    "text/x-perl",
    "text/x-php",
    "text/x-properties",
    "text/x-protobuf",
    "text/x-pug",
    "text/x-python",
    "text/x-r",
    "text/x-R",
    "text/x-rst",
    "text/x-ruby",
    "text/x-rust",
    "text/x-sass",
    "text/x-scala",
    "text/x-script.python",
    "text/x-scss",
    "text/x-sh",
    "text/x-shellscript",
    "text/x-sql",
    "text/x-subrip",
    "text/x-swift",
    "text/x-terraform",
    "text/x-tex",
    "text/x-tmpl",
    "text/x-toml",
    "text/x-twig",
    "text/x-typescript",
    "text/x-vcard",
    "text/x-yaml",
    "text/x-zsh",
    "text/xml",
];

/// The extensions the same list accepts, by category.
const PDF_EXTENSIONS: &[&str] = &["pdf"];
const EXCEL_EXTENSIONS: &[&str] = &["xla", "xlb", "xlc", "xlm", "xls", "xlsx", "xlt", "xlw"];
const SHEET_TEXT_EXTENSIONS: &[&str] = &["csv", "tsv", "iif"];
const DOCUMENT_EXTENSIONS: &[&str] = &["doc", "docx", "dot", "odt", "rtf"];
const PRESENTATION_EXTENSIONS: &[&str] = &["pot", "ppa", "pps", "ppt", "pptx", "pwz", "wiz"];
const TEXT_EXTENSIONS: &[&str] = &[
    "asm", "bat", "c", "cc", "conf", "cpp", "css", "cxx", "def", "dic", "eml", "h", "hh", "htm", "html",
    "ics", "ifb", "in", "js", "json", "ksh", "list", "log", "markdown", "md", "mht", "mhtml", "mime", "mjs",
    "nws", "pl", "py", "rst", "s", "sql", "srt", "text", "txt", "vcf", "vtt", "xml",
];

/// The extensions an `input_file` of `mime` may carry, and the one a name without them gets
/// (`None`: the type has no extension of its own in the list, e.g. Google Docs).
fn input_file_extensions(mime: &str) -> (&'static [&'static str], Option<&'static str>) {
    match mime.to_ascii_lowercase().as_str() {
        "application/pdf" => (PDF_EXTENSIONS, Some("pdf")),
        "application/vnd.ms-excel" => (EXCEL_EXTENSIONS, Some("xls")),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => {
            (EXCEL_EXTENSIONS, Some("xlsx"))
        }
        "text/csv" | "application/csv" => (SHEET_TEXT_EXTENSIONS, Some("csv")),
        "text/tsv" => (SHEET_TEXT_EXTENSIONS, Some("tsv")),
        "text/x-iif" | "application/x-iif" => (SHEET_TEXT_EXTENSIONS, Some("iif")),
        "application/vnd.google-apps.spreadsheet" => (SHEET_TEXT_EXTENSIONS, None),
        "application/msword" => (DOCUMENT_EXTENSIONS, Some("doc")),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => {
            (DOCUMENT_EXTENSIONS, Some("docx"))
        }
        "application/vnd.oasis.opendocument.text" => (DOCUMENT_EXTENSIONS, Some("odt")),
        "application/rtf" | "text/rtf" => (DOCUMENT_EXTENSIONS, Some("rtf")),
        "application/vnd.apple.pages" | "application/vnd.google-apps.document" => (DOCUMENT_EXTENSIONS, None),
        "application/vnd.ms-powerpoint" => (PRESENTATION_EXTENSIONS, Some("ppt")),
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => {
            (PRESENTATION_EXTENSIONS, Some("pptx"))
        }
        "application/vnd.apple.keynote" | "application/vnd.google-apps.presentation" => {
            (PRESENTATION_EXTENSIONS, None)
        }
        "application/vnd.apple.iwork" => (&[], None),
        // The rest of the list is text and code, all of which the text extensions cover.
        mime => (TEXT_EXTENSIONS, Some(text_extension(mime))),
    }
}

/// The usual extension of a text or code type, among [`TEXT_EXTENSIONS`] (`txt` for the others).
fn text_extension(mime: &str) -> &'static str {
    match mime {
        "text/markdown" => "md",
        "application/json" => "json",
        "text/html" => "html",
        "text/xml" => "xml",
        "text/css" => "css",
        "text/javascript" | "application/javascript" => "js",
        "text/x-python" | "text/x-script.python" => "py",
        "text/x-c" => "c",
        "text/x-c++" => "cpp",
        "text/x-sql" | "application/x-sql" => "sql",
        "text/vtt" => "vtt",
        "text/srt" | "text/x-subrip" | "application/x-subrip" => "srt",
        "text/calendar" => "ics",
        "text/x-vcard" => "vcf",
        "message/rfc822" => "eml",
        _ => "txt",
    }
}

/// The file name an `input_file` of `mime` goes with, or `None` if the type is not one the API
/// takes, or takes only under an extension it cannot be given. The API tells a file's type by
/// its name's extension and refuses one it does not list, or a name without one ("but got
/// none"), so a name (after its last `/`) whose extension the list does not accept for the
/// type gets the type's own (`README` as `text/markdown` goes as `README.md`, `main.rs` as
/// `main.rs.txt`); "file" stands in for no name.
fn input_file_name(filename: &str, mime: &str) -> Option<String> {
    if !INPUT_FILE_TYPES.iter().any(|t| t.eq_ignore_ascii_case(mime)) {
        return None;
    }
    let name = if filename.trim().is_empty() {
        "file"
    } else {
        filename
    };
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let (accepted, own) = input_file_extensions(mime);
    let extension = base
        .rsplit_once('.')
        .filter(|(stem, _)| !stem.is_empty())
        .map(|(_, e)| e);
    if extension.is_some_and(|e| accepted.iter().any(|a| a.eq_ignore_ascii_case(e))) {
        return Some(name.to_owned());
    }
    own.map(|own| format!("{name}.{own}"))
}
