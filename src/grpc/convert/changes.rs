//! WatchChanges: its request parsed, its events on the wire.

use std::time::SystemTime;

use super::{conversation_id, stored_message};
use crate::{
    domain::{
        Violations,
        changes::{ChangeKind, Cursor, DeliveredChange},
    },
    proto,
    service::{WatchEvent, WatchRequest},
};

/// Parses a WatchChanges request.
pub(crate) fn watch_request(request: proto::WatchChangesRequest) -> Result<WatchRequest, Violations> {
    let proto::WatchChangesRequest {
        after_cursor,
        conversation_id: conversation,
        include_messages,
    } = request;
    let mut v = Violations::default();
    let after = match after_cursor.as_str() {
        "" => None,
        raw => Cursor::parse(raw).map_err(|e| v.add("after_cursor", e)).ok(),
    };
    let conversation = match conversation.is_empty() {
        true => None,
        false => conversation_id(conversation, "conversation_id", &mut v),
    };
    v.into_result(WatchRequest {
        after,
        conversation,
        include_messages,
    })
}

/// One stream message.
pub(crate) fn watch_response(event: WatchEvent) -> proto::WatchChangesResponse {
    match event {
        // The messages are moved into the response; the memory they hold is counted until here.
        WatchEvent::Changes(changes, _memory) => proto::WatchChangesResponse {
            changes: changes.into_iter().map(change).collect(),
            heartbeat: None,
        },
        WatchEvent::Heartbeat(cursor) => proto::WatchChangesResponse {
            changes: Vec::new(),
            heartbeat: Some(proto::Heartbeat {
                cursor: cursor.encode(),
                time: Some(SystemTime::now().into()),
            }),
        },
    }
}

fn change(delivered: DeliveredChange) -> proto::Change {
    let DeliveredChange {
        change,
        messages,
        messages_truncated,
    } = delivered;
    proto::Change {
        cursor: change.cursor.encode(),
        kind: kind(change.kind) as i32,
        first_sequence: change.first_sequence.get(),
        last_sequence: change.last_sequence.get(),
        messages: messages.into_iter().map(stored_message).collect(),
        time: Some(change.time.into()),
        messages_truncated,
        conversation_id: change.cursor.conversation,
    }
}

fn kind(kind: ChangeKind) -> proto::ChangeKind {
    match kind {
        ChangeKind::Appended => proto::ChangeKind::Appended,
        ChangeKind::Redacted => proto::ChangeKind::Redacted,
        ChangeKind::Rewound => proto::ChangeKind::Rewound,
        ChangeKind::Deleted => proto::ChangeKind::Deleted,
        ChangeKind::Expired => proto::ChangeKind::Expired,
        ChangeKind::Forked => proto::ChangeKind::Forked,
        ChangeKind::Updated => proto::ChangeKind::Updated,
        ChangeKind::Summarized => proto::ChangeKind::Summarized,
        ChangeKind::MemoryUpdated => proto::ChangeKind::MemoryUpdated,
    }
}
