//! Responses `input` items as the API pairs them: reasoning with the output item after it,
//! item ids with their reasoning, built-in calls with their own output types. Applied to a
//! pack's items once they are in order ([`super::openai_responses`]).

use serde_json::{Value, json};

use crate::domain::native::{ID_BOUND_ITEMS, ID_OPTIONAL_ITEMS};

/// Gives a plain tool result the output type of the built-in call it answers: the API pairs
/// `shell_call` with `shell_call_output`, `apply_patch_call` with `apply_patch_call_output`,
/// and so on, and refuses a `function_call_output` for them. The result's text goes where the
/// output type keeps text: a shell call's stdout (exit code 0: a plain result records none; append
/// `shell_call_output` natively to keep stderr and the outcome), the patch log of a completed
/// patch. A `computer_call` needs a screenshot, which text is not: its result stays as it is
/// (append `computer_call_output` natively).
pub(super) fn plain_outputs_typed(items: &mut [Value]) {
    let typed: Vec<(String, String)> = items
        .iter()
        .filter_map(|item| {
            let kind = item["type"].as_str()?;
            let typed = matches!(
                kind,
                "shell_call" | "apply_patch_call" | "custom_tool_call" | "local_shell_call"
            );
            Some((item["call_id"].as_str()?.to_owned(), kind.to_owned())).filter(|_| typed)
        })
        .collect();
    if typed.is_empty() {
        return;
    }
    for item in items
        .iter_mut()
        .filter(|item| item["type"] == "function_call_output")
    {
        let call_id = item["call_id"].as_str().unwrap_or_default();
        let Some((_, kind)) = typed.iter().find(|(id, _)| id == call_id) else {
            continue;
        };
        let text = item["output"].as_str().unwrap_or_default().to_owned();
        *item = match kind.as_str() {
            "shell_call" => json!({"type": "shell_call_output", "call_id": call_id, "output": [
                {"stdout": text, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}),
            "apply_patch_call" => {
                json!({"type": "apply_patch_call_output", "call_id": call_id, "status": "completed", "output": text})
            }
            "custom_tool_call" => {
                json!({"type": "custom_tool_call_output", "call_id": call_id, "output": text})
            }
            // The deprecated local shell's output names its call by `id`.
            _ => json!({"type": "local_shell_call_output", "id": call_id, "output": text}),
        };
    }
}

/// Drops each reasoning item that the item after it cannot pair with: the API pairs reasoning
/// with the next output item by that item's id ("Item 'rs_…' of type 'reasoning' was provided
/// without its required following item"), so reasoning before a call appended without its
/// `fc_` id, before more reasoning, or at the end of the input is refused.
pub(super) fn unpairable_reasoning_dropped(items: &mut Vec<Value>) {
    let pairs = |next: Option<&Value>| {
        next.is_some_and(|item| {
            let kind = item["type"].as_str().unwrap_or("message");
            let output = kind == "message" && item["role"] == "assistant"
                || kind != "message" && kind != "reasoning" && !kind.ends_with("_output")
                || ID_BOUND_ITEMS.contains(&kind)
                || ID_OPTIONAL_ITEMS.contains(&kind);
            output && item.get("id").is_some()
        })
    };
    let keep: Vec<bool> = (0..items.len())
        .map(|i| items[i]["type"] != "reasoning" || pairs(items.get(i + 1)))
        .collect();
    let mut flags = keep.into_iter();
    items.retain(|_| flags.next().unwrap_or(true));
}

/// Drops the ids of calls, assistant messages and the other items whose id is optional
/// ([`ID_OPTIONAL_ITEMS`]) when their run of output items has no reasoning item before them,
/// and drops the items that cannot go without theirs ([`ID_BOUND_ITEMS`]). Server-side items
/// keep theirs (their input form requires it, and they pair with nothing), and so does a
/// compaction item (it stands for earlier context, not for its response's work).
pub(super) fn unpaired_ids_dropped(items: &mut Vec<Value>) {
    let mut reasoning = false;
    let mut keep = Vec::with_capacity(items.len());
    for item in items.iter_mut() {
        let kind = item["type"].as_str().unwrap_or("message");
        let assistant = kind == "message" && item["role"] == "assistant";
        let output = assistant
            || kind != "message" && !kind.ends_with("_output")
            || ID_BOUND_ITEMS.contains(&kind)
            || ID_OPTIONAL_ITEMS.contains(&kind);
        if !output {
            reasoning = false;
            keep.push(true);
            continue;
        }
        if kind == "reasoning" {
            reasoning = true;
        } else if !reasoning && ID_BOUND_ITEMS.contains(&kind) {
            keep.push(false);
            continue;
        } else if !reasoning
            && (assistant || kind != "compaction" && ID_OPTIONAL_ITEMS.contains(&kind))
            && item.get("id").is_some()
        {
            without_id(item);
        }
        keep.push(true);
    }
    let mut flags = keep.into_iter();
    items.retain(|_| flags.next().unwrap_or(true));
}

/// An output item without its id: a function call keeps its other fields; an output message
/// becomes a plain assistant message.
pub(super) fn without_id(item: &mut Value) {
    if item["type"] == "message" {
        // Every text part (a native message may have several), as one plain text.
        let text: String = match &item["content"] {
            Value::String(text) => text.clone(),
            parts => parts
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|part| part["text"].as_str())
                .collect(),
        };
        let phase = item.get_mut("phase").map(Value::take);
        *item = json!({"type": "message", "role": "assistant", "content": text});
        if let Some(phase) = phase {
            item["phase"] = phase;
        }
    } else if let Value::Object(map) = item {
        map.remove("id");
    }
}
