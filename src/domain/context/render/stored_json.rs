//! Stored provider JSON (docs/native.md) as packs of its format send it.

use serde_json::Value;

use crate::domain::{
    context::{
        Format,
        cost::{openai_name, pack_arguments},
    },
    message::Message,
};

/// A native function call (`{name, <arguments key>}`) as packs send every call: its name as
/// [`openai_name`] maps it, its arguments as [`pack_arguments`] (a model's invalid JSON is
/// stored as it came, and sent as `{"_raw": ...}`). Valid names and object arguments are
/// unchanged.
pub(super) fn sendable_call(call: &mut Value, arguments_key: &str) {
    if let Some(name) = call["name"].as_str()
        && let Some(mapped) = openai_name(name)
        && mapped != name
    {
        call["name"] = Value::String(mapped.into_owned());
    }
    if let Some(arguments) = call[arguments_key].as_str() {
        let packed = pack_arguments(arguments);
        if packed != arguments {
            call[arguments_key] = Value::String(packed.into_owned());
        }
    }
}

/// The message's native JSON for `format` as a list (blocks, items or parts), if it has some.
pub(super) fn native_list(message: &Message, format: Format) -> Option<Vec<Value>> {
    let native = message.native.as_ref().filter(|n| n.format == format)?;
    Some(match &native.json {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    })
}
