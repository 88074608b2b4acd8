//! The tool-call protocol on append: every tool result answers exactly one open call, and call
//! ids are unique within a conversation. The stores look up the state of the ids a batch
//! mentions; this module decides.

use std::collections::HashMap;

use super::{
    ids::Sequence,
    message::{Message, Role},
    violation::Violations,
};

/// Where a batch breaks the tool-call protocol: the message, by its index in the batch, and
/// its field. The caller names the message as its request did (`messages[i]`, or the JSON path
/// of a message parsed from provider JSON), so no position is ever read back out of a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolViolation {
    /// Index of the message in the batch.
    pub message: usize,
    /// The field of that message.
    pub field: CallField,
    /// What is wrong, for people.
    pub description: String,
}

/// The field of a message that a [`ProtocolViolation`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallField {
    /// `tool_call_id`: the call a result answers.
    ToolCallId,
    /// `tool_calls[j].id`: a call the message makes.
    ToolCall(usize),
    /// `occurred_at`: the message's time, which the log's order holds to (it is checked with
    /// the calls, against the same locked conversation).
    OccurredAt,
}

impl ProtocolViolation {
    /// The violated field's path under `message`, the message's own path in the request.
    pub fn field_under(&self, message: &str) -> String {
        match self.field {
            CallField::ToolCallId => format!("{message}.tool_call_id"),
            CallField::ToolCall(j) => format!("{message}.tool_calls[{j}].id"),
            CallField::OccurredAt => format!("{message}.occurred_at"),
        }
    }

    /// `violations` as field violations, each message named by `name_of` its index.
    pub fn into_violations(
        violations: &[ProtocolViolation],
        name_of: impl Fn(usize) -> String,
    ) -> Violations {
        let mut out = Violations::default();
        for violation in violations {
            out.add(
                violation.field_under(&name_of(violation.message)),
                violation.description.clone(),
            );
        }
        out
    }
}

/// State of a tool call id already in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// Called, no result yet.
    Open,
    /// Called and answered.
    Answered,
}

/// A call id already in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownCall {
    /// Whether it has a result.
    pub state: CallState,
    /// Sequence of the assistant message that made it.
    pub sequence: Sequence,
}

/// What a valid batch does to the conversation's tool calls, by message index in the batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolEffects {
    /// Calls the batch makes: (message index, call id).
    pub new_calls: Vec<(usize, String)>,
    /// Calls the batch answers: (message index of the result, call id, sequence of the call).
    pub answered: Vec<(usize, String, Sequence)>,
}

impl ToolEffects {
    /// For each message of the batch, the sequence of the call it answers (tool results only).
    pub fn call_sequences(&self, count: usize) -> Vec<Option<Sequence>> {
        let mut out = vec![None; count];
        for (index, _, call) in &self.answered {
            out[*index] = Some(*call);
        }
        out
    }
}

/// Every call id a batch mentions (made or answered): what a store must look up.
pub fn mentioned_call_ids<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<String> {
    let mut ids: Vec<String> = messages
        .into_iter()
        .flat_map(|m| {
            m.tool_calls
                .iter()
                .map(|c| c.id.clone())
                .chain(m.tool_call_id.clone())
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Checks a batch to be stored after `last` against the call ids it mentions (`known`: ids
/// already in the conversation; absent = never made) and returns what it does.
pub fn check_tool_protocol<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    last: Sequence,
    known: &HashMap<String, KnownCall>,
) -> Result<ToolEffects, Vec<ProtocolViolation>> {
    let mut states: HashMap<&str, KnownCall> = known.iter().map(|(id, k)| (id.as_str(), *k)).collect();
    let mut violations = Vec::new();
    let mut refuse = |message, field, description| {
        violations.push(ProtocolViolation {
            message,
            field,
            description,
        })
    };
    let mut effects = ToolEffects::default();
    for (i, message) in messages.into_iter().enumerate() {
        for (j, call) in message.tool_calls.iter().enumerate() {
            if states.contains_key(call.id.as_str()) {
                refuse(
                    i,
                    CallField::ToolCall(j),
                    format!("tool call id {:?} is already used in this conversation", call.id),
                );
            } else {
                let sequence = last.plus(i as u64 + 1);
                states.insert(
                    &call.id,
                    KnownCall {
                        state: CallState::Open,
                        sequence,
                    },
                );
                effects.new_calls.push((i, call.id.clone()));
            }
        }
        if message.role != Role::Tool {
            continue;
        }
        let Some(id) = message.tool_call_id.as_deref() else {
            continue;
        };
        match states.get(id).copied() {
            Some(KnownCall {
                state: CallState::Open,
                sequence,
            }) => {
                states.insert(
                    id,
                    KnownCall {
                        state: CallState::Answered,
                        sequence,
                    },
                );
                effects.answered.push((i, id.to_owned(), sequence));
            }
            Some(KnownCall {
                state: CallState::Answered,
                ..
            }) => refuse(
                i,
                CallField::ToolCallId,
                format!("tool call {id:?} already has a result"),
            ),
            None => refuse(
                i,
                CallField::ToolCallId,
                format!("{id:?} does not answer a tool call made earlier in this conversation"),
            ),
        }
    }
    match violations.is_empty() {
        true => Ok(effects),
        false => Err(violations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::ToolCall;

    fn assistant_calling(ids: &[&str]) -> Message {
        Message {
            tool_calls: ids.iter().map(|id| ToolCall::new(*id, "lookup", "{}")).collect(),
            ..Message::text(Role::Assistant, String::new())
        }
    }

    fn first_field(violations: &[ProtocolViolation]) -> String {
        let named = ProtocolViolation::into_violations(violations, |i| format!("messages[{i}]"));
        named.iter().next().unwrap().field.clone()
    }

    fn call(state: CallState) -> KnownCall {
        KnownCall {
            state,
            sequence: Sequence::parse(1).unwrap(),
        }
    }

    fn result_for(id: &str) -> Message {
        Message {
            role: Role::Tool,
            content: "42".into(),
            tool_calls: vec![],
            tool_call_id: Some(id.into()),
            ..assistant_calling(&[])
        }
    }

    #[test]
    fn a_result_may_answer_a_call_made_earlier_in_the_same_batch() {
        let batch = [assistant_calling(&["a", "b"]), result_for("b"), result_for("a")];
        let effects = check_tool_protocol(&batch, Sequence::parse(10).unwrap(), &HashMap::new()).unwrap();
        assert_eq!(effects.new_calls, [(0, "a".into()), (0, "b".into())]);
        let eleven = Sequence::parse(11).unwrap();
        assert_eq!(
            effects.answered,
            [(1, "b".into(), eleven), (2, "a".into(), eleven)]
        );
        assert_eq!(effects.call_sequences(3), [None, Some(eleven), Some(eleven)]);
    }

    #[test]
    fn a_result_without_its_call_is_rejected() {
        let err = check_tool_protocol(&[result_for("zz")], Sequence::ZERO, &HashMap::new()).unwrap_err();
        assert_eq!(first_field(&err), "messages[0].tool_call_id");
    }

    #[test]
    fn a_second_result_for_one_call_is_rejected() {
        let known = HashMap::from([("a".to_string(), call(CallState::Open))]);
        let err =
            check_tool_protocol(&[result_for("a"), result_for("a")], Sequence::ZERO, &known).unwrap_err();
        assert_eq!(first_field(&err), "messages[1].tool_call_id");
        let answered = HashMap::from([("a".to_string(), call(CallState::Answered))]);
        assert!(check_tool_protocol(&[result_for("a")], Sequence::ZERO, &answered).is_err());
    }

    #[test]
    fn call_ids_are_unique_within_the_conversation() {
        let known = HashMap::from([("a".to_string(), call(CallState::Answered))]);
        let err = check_tool_protocol(&[assistant_calling(&["a"])], Sequence::ZERO, &known).unwrap_err();
        assert_eq!(first_field(&err), "messages[0].tool_calls[0].id");
        let err = check_tool_protocol(&[assistant_calling(&["x", "x"])], Sequence::ZERO, &HashMap::new())
            .unwrap_err();
        assert_eq!(first_field(&err), "messages[0].tool_calls[1].id");
    }

    #[test]
    fn mentioned_ids_cover_calls_and_results() {
        let batch = [assistant_calling(&["b", "a"]), result_for("c")];
        assert_eq!(mentioned_call_ids(&batch), ["a", "b", "c"]);
    }
}
