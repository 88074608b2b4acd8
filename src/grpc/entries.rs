//! What a request decodes into, bounded on its bytes before anything is decoded. A body of a
//! few megabytes can hold millions of empty entries (`{}` in JSON, two bytes in protobuf), and
//! each decodes into a struct hundreds of bytes long: 16 MiB of them is gigabytes. The body's
//! size limit bounds its bytes; this bounds its entries: every message value (each message of a
//! list, each map entry, each nested message) and every value of a repeated field, at any depth.
//! A request past [`MAX_ENTRIES`] is refused before it is decoded, INVALID_ARGUMENT naming the
//! top-level field that holds the most (`messages`); valid requests are far below it (see the
//! constant). The scan is linear in the bytes and stops at the limit.

use prost_reflect::{Kind, MessageDescriptor};
use tonic::Status;

use crate::domain::Violations;

/// The most entries a request may decode into. A valid request is far below it (AppendMessage
/// takes 100 messages by default, each with at most 64 reasoning blocks, and so on); at a few
/// hundred bytes an entry, the most a request can decode into is a few tens of megabytes.
pub(crate) const MAX_ENTRIES: usize = 50_000;

/// Nesting deeper than this is not followed (prost refuses it when it decodes).
const MAX_DEPTH: usize = 100;

/// A request holding more than [`MAX_ENTRIES`] entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooManyEntries {
    /// The top-level field holding the most of them (its proto name), empty if none does.
    pub(crate) field: String,
}

impl TooManyEntries {
    /// The refusal as field violations: at the top-level field, or the request.
    fn violations(&self) -> Violations {
        let field = match self.field.as_str() {
            "" => "request",
            field => field,
        };
        Violations::single(
            field,
            format!(
                "the request holds more than {MAX_ENTRIES} entries (list items, map entries, \
                 nested messages), far more than any valid request: see the per-request limits"
            ),
        )
    }

    /// INVALID_ARGUMENT with the field violation.
    pub(crate) fn status(&self) -> Status {
        super::status::invalid_argument(&self.violations())
    }

    /// The status's message, for the Connect protocol's error JSON.
    pub(crate) fn message(&self) -> String {
        self.status().message().to_owned()
    }
}

/// Checks the protobuf `bytes` of a `descriptor` message. Malformed bytes pass: decoding
/// reports them.
pub(crate) fn check_protobuf(descriptor: &MessageDescriptor, bytes: &[u8]) -> Result<(), TooManyEntries> {
    let mut left = MAX_ENTRIES;
    let mut by_field: Vec<(u32, usize)> = Vec::new();
    let mut rest = bytes;
    while let Some((number, wire, value, after)) = next_field(rest) {
        rest = after;
        let before = left;
        let outcome = count_field(descriptor, number, wire, value, &mut left, 0);
        match by_field.iter_mut().find(|(n, _)| *n == number) {
            Some((_, used)) => *used += before - left,
            None => by_field.push((number, before - left)),
        }
        if outcome.is_err() {
            let field = by_field
                .iter()
                .max_by_key(|(_, used)| *used)
                .and_then(|(n, _)| descriptor.get_field(*n))
                .map(|f| f.name().to_owned())
                .unwrap_or_default();
            return Err(TooManyEntries { field });
        }
    }
    Ok(())
}

/// Checks the JSON `body` of a request: its values (objects, array items) may not exceed
/// [`MAX_ENTRIES`]. Strings are skipped whole; malformed JSON passes (parsing reports it).
pub(crate) fn check_json(body: &[u8]) -> Result<(), TooManyEntries> {
    match crate::domain::native::json_values(body, MAX_ENTRIES) > MAX_ENTRIES {
        true => Err(TooManyEntries { field: String::new() }),
        false => Ok(()),
    }
}

/// Counts one field's entries into `left`; `Err` once it is spent.
fn count_field(
    descriptor: &MessageDescriptor,
    number: u32,
    wire: u8,
    value: &[u8],
    left: &mut usize,
    depth: usize,
) -> Result<(), ()> {
    let Some(field) = descriptor.get_field(number) else {
        // Unknown fields are dropped by prost, and cost nothing decoded.
        return Ok(());
    };
    let repeated = field.is_list() || field.is_map();
    match (wire, field.kind()) {
        (2, Kind::Message(inner)) => {
            spend(left, 1)?;
            if depth < MAX_DEPTH {
                let mut rest = value;
                while let Some((n, w, v, after)) = next_field(rest) {
                    rest = after;
                    count_field(&inner, n, w, v, left, depth + 1)?;
                }
            }
            Ok(())
        }
        // A packed list: one entry per value (a varint ends at a byte without its high bit).
        (2, Kind::String | Kind::Bytes) if repeated => spend(left, 1),
        (2, _) if repeated => spend(left, value.iter().filter(|b| **b < 0x80).count()),
        (_, _) if repeated => spend(left, 1),
        _ => Ok(()),
    }
}

fn spend(left: &mut usize, n: usize) -> Result<(), ()> {
    *left = left.checked_sub(n).ok_or(())?;
    Ok(())
}

/// The next field of protobuf bytes: its number, wire type, value bytes (the payload of a
/// length-delimited field, the encoding of others) and the rest; `None` at the end or on
/// malformed input.
fn next_field(bytes: &[u8]) -> Option<(u32, u8, &[u8], &[u8])> {
    let (tag, rest) = varint(bytes)?;
    let number = u32::try_from(tag >> 3).ok()?;
    let wire = (tag & 7) as u8;
    let len = match wire {
        0 => rest.iter().position(|b| *b < 0x80)? + 1,
        1 => 8,
        2 => {
            let (len, after) = varint(rest)?;
            let len = usize::try_from(len).ok()?;
            let value = after.get(..len)?;
            return Some((number, wire, value, &after[len..]));
        }
        5 => 4,
        _ => return None,
    };
    let value = rest.get(..len)?;
    Some((number, wire, value, &rest[len..]))
}

fn varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::proto;

    fn descriptor(name: &str) -> MessageDescriptor {
        super::super::descriptors::pool()
            .get_message_by_name(name)
            .unwrap()
    }

    #[test]
    fn millions_of_empty_messages_are_refused_on_their_bytes() {
        let append = descriptor("ctxd.v1.AppendMessageRequest");
        // Field 2 (`messages`), length 0: two bytes an entry.
        let mut bytes = Vec::new();
        for _ in 0..MAX_ENTRIES + 1 {
            bytes.extend_from_slice(&[0x12, 0x00]);
        }
        let refused = check_protobuf(&append, &bytes).unwrap_err();
        assert_eq!(refused.field, "messages");
        bytes.truncate(2 * 1000);
        assert_eq!(check_protobuf(&append, &bytes), Ok(()));
    }

    #[test]
    fn a_valid_request_passes_and_nested_entries_count() {
        let message = proto::Message {
            role: proto::Role::User as i32,
            content: "hi".into(),
            metadata: (0..10).map(|i| (format!("k{i}"), "v".into())).collect(),
            ..Default::default()
        };
        let request = proto::AppendMessageRequest {
            conversation_id: "c".into(),
            messages: vec![message.clone(); 100],
            ..Default::default()
        };
        let append = descriptor("ctxd.v1.AppendMessageRequest");
        assert_eq!(check_protobuf(&append, &request.encode_to_vec()), Ok(()));
        let crowded = proto::AppendMessageRequest {
            messages: vec![message; MAX_ENTRIES / 11 + 1],
            ..request
        };
        assert!(check_protobuf(&append, &crowded.encode_to_vec()).is_err());
    }

    #[test]
    fn json_values_are_counted_outside_strings() {
        let many = format!("{{\"messages\":[{}{{}}]}}", "{},".repeat(MAX_ENTRIES));
        assert!(check_json(many.as_bytes()).is_err());
        let quoted = format!("{{\"conversationId\":\"{}\"}}", "{},".repeat(MAX_ENTRIES));
        assert_eq!(check_json(quoted.as_bytes()), Ok(()));
        let escaped = r#"{"a":"\"{,{,","b":[1,2]}"#;
        assert_eq!(check_json(escaped.as_bytes()), Ok(()));
    }
}
