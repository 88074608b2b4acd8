//! The rules for a request's pending messages (docs/design.md, "Provider rules"): pending tool results answer
//! open calls and complete their call's group, and pending calls are answered, so that the
//! pack built around them is valid for every provider.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::domain::{
    attachments,
    ids::Sequence,
    message::{AttachmentSource, Message, Role},
    violation::Violations,
};

/// Reads the dimensions of the pending messages' images from their headers, as append does
/// for the log's, so the pack counts a pending image as it counts the same image appended.
pub fn measure_attachments(pending: &mut [Message]) {
    for attachment in pending.iter_mut().flat_map(|m| m.attachments.iter_mut()) {
        attachments::measure(attachment);
    }
}

/// Bytes of the pending messages' attachments: the work [`measure_attachments`] does is
/// proportional to them.
pub fn attachment_bytes(pending: &[Message]) -> usize {
    pending
        .iter()
        .flat_map(|m| &m.attachments)
        .map(|a| match &a.source {
            AttachmentSource::Data(data) => data.len(),
            AttachmentSource::Uri(uri) => uri.len(),
        })
        .sum()
}

/// Ids answered by pending tool results that no earlier pending message calls: the calls they
/// answer must be open calls of the log, which the store looks up.
pub fn stored_calls_answered(pending: &[Message]) -> Vec<String> {
    let mut called = HashSet::new();
    let mut ids = Vec::new();
    for m in pending {
        called.extend(m.tool_calls.iter().map(|c| c.id.as_str()));
        if let Some(id) = m.tool_call_id.as_deref()
            && m.role == Role::Tool
            && !called.contains(id)
        {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// Checks `pending` against `open`: every open call of the log's messages that made any call
/// the pending results name, with the sequence of that message.
pub fn check_pending(pending: &[Message], open: &HashMap<String, Sequence>) -> Violations {
    let mut v = Violations::default();
    // Pending calls not answered yet: id -> (message index, call index).
    let mut awaiting: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    // Stored call messages answered by pending results: sequence -> first result's index.
    let mut stored_groups: BTreeMap<Sequence, usize> = BTreeMap::new();
    for (i, m) in pending.iter().enumerate() {
        if let Some(id) = m.tool_call_id.as_deref()
            && m.role == Role::Tool
        {
            let field = format!("pending_messages[{i}].tool_call_id");
            if !answered.insert(id) {
                v.add(field, format!("{id:?} is answered twice"));
            } else if awaiting.remove(id).is_some() {
                // Answers a call of an earlier pending message.
            } else if let Some(call) = open.get(id) {
                stored_groups.entry(*call).or_insert(i);
            } else {
                v.add(
                    field,
                    format!("{id:?} does not answer an open tool call of this conversation or of an earlier pending message"),
                );
            }
        }
        for (j, call) in m.tool_calls.iter().enumerate() {
            if open.contains_key(&call.id) || awaiting.insert(&call.id, (i, j)).is_some() {
                v.add(
                    format!("pending_messages[{i}].tool_calls[{j}].id"),
                    format!(
                        "{:?} is already a call id of this request or conversation",
                        call.id
                    ),
                );
            }
        }
    }
    for (sequence, first) in stored_groups {
        let mut missing: Vec<&str> = open
            .iter()
            .filter(|(id, call)| **call == sequence && !answered.contains(id.as_str()))
            .map(|(id, _)| id.as_str())
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            v.add(
                format!("pending_messages[{first}].tool_call_id"),
                format!(
                    "answers a call of the message at sequence {sequence}, whose calls {missing:?} have no result: \
                     pending results must complete their call's group"
                ),
            );
        }
    }
    let mut unanswered: Vec<_> = awaiting.into_iter().collect();
    unanswered.sort_by_key(|(_, at)| *at);
    for (id, (i, j)) in unanswered {
        v.add(
            format!("pending_messages[{i}].tool_calls[{j}].id"),
            format!("no later pending result answers {id:?}: a pack cannot end with an unanswered call"),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::ToolCall;

    fn result(id: &str) -> Message {
        Message {
            tool_call_id: Some(id.into()),
            ..Message::text(Role::Tool, "ok".into())
        }
    }

    fn call(ids: &[&str]) -> Message {
        Message {
            tool_calls: ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect(),
            ..Message::text(Role::Assistant, String::new())
        }
    }

    fn fields(v: &Violations) -> Vec<String> {
        v.iter().map(|f| f.field.clone()).collect()
    }

    #[test]
    fn a_pending_result_must_complete_its_stored_group() {
        let seq = Sequence::parse(4).unwrap();
        let open = HashMap::from([("a".to_string(), seq), ("b".to_string(), seq)]);
        let partial = check_pending(&[result("a")], &open);
        assert_eq!(fields(&partial), ["pending_messages[0].tool_call_id"]);
        assert!(partial.iter().any(|f| f.description.contains("[\"b\"]")));
        assert!(check_pending(&[result("b"), result("a")], &open).is_empty());
    }

    #[test]
    fn pending_calls_are_answered_once_by_later_pending_results() {
        let open = HashMap::new();
        assert!(check_pending(&[call(&["x"]), result("x")], &open).is_empty());
        let unanswered = check_pending(&[call(&["x", "y"]), result("x")], &open);
        assert_eq!(fields(&unanswered), ["pending_messages[0].tool_calls[1].id"]);
        let twice = check_pending(&[call(&["x"]), result("x"), result("x")], &open);
        assert_eq!(fields(&twice), ["pending_messages[2].tool_call_id"]);
        let unknown = check_pending(&[result("z")], &open);
        assert_eq!(fields(&unknown), ["pending_messages[0].tool_call_id"]);
    }
}
