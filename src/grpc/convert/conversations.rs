//! Conversations as resources: ListConversations, Get/UpdateConversation, ForkConversation,
//! RedactMessage.

use std::time::SystemTime;

use super::fields::{conversation_id, sequence};
use crate::{
    domain::{
        ConversationId, Sequence, Violations,
        conversation::{
            Conversation, ConversationPatch, ConversationStatus, DEFAULT_LIST_PAGE, IfMissing, ListQuery,
            MAX_LIST_PAGE, TIME_RANGE_SECS, check_labels, check_title,
        },
    },
    proto,
};

/// The wire enum of a status.
fn status_to_proto(status: ConversationStatus) -> proto::ConversationStatus {
    match status {
        ConversationStatus::Active => proto::ConversationStatus::Active,
        ConversationStatus::AwaitingAnswer => proto::ConversationStatus::AwaitingAnswer,
        ConversationStatus::Idle => proto::ConversationStatus::Idle,
        ConversationStatus::Closed => proto::ConversationStatus::Closed,
    }
}

/// Parses a status field; `None` for UNSPECIFIED (and for unknown values, recorded).
fn status(raw: i32, field: &str, v: &mut Violations) -> Option<ConversationStatus> {
    match proto::ConversationStatus::try_from(raw) {
        Ok(proto::ConversationStatus::Unspecified) => None,
        Ok(proto::ConversationStatus::Active) => Some(ConversationStatus::Active),
        Ok(proto::ConversationStatus::AwaitingAnswer) => Some(ConversationStatus::AwaitingAnswer),
        Ok(proto::ConversationStatus::Idle) => Some(ConversationStatus::Idle),
        Ok(proto::ConversationStatus::Closed) => Some(ConversationStatus::Closed),
        Err(_) => {
            v.add(field, format!("unknown status value {raw}"));
            None
        }
    }
}

/// The wire form of a conversation.
pub(crate) fn conversation(conversation: Conversation) -> proto::Conversation {
    let Conversation {
        id,
        title,
        status,
        labels,
        created_at,
        updated_at,
        last_sequence,
        summary_through_sequence,
        memory_version,
        expire_time,
        forked_from,
        usage,
    } = conversation;
    proto::Conversation {
        conversation_id: id.as_str().to_owned(),
        title,
        status: status_to_proto(status).into(),
        labels,
        created_at: Some(created_at.into()),
        updated_at: Some(updated_at.into()),
        last_sequence: last_sequence.get(),
        summary_through_sequence: summary_through_sequence.get(),
        memory_version,
        expire_time: expire_time.map(Into::into),
        forked_from: forked_from.map(|(id, sequence)| proto::ForkOrigin {
            conversation_id: id.as_str().to_owned(),
            sequence: sequence.get(),
        }),
        usage: super::provider_json::usage_to_proto(usage),
    }
}

/// A GetConversation request's conversation.
pub(crate) fn get_request(request: proto::GetConversationRequest) -> Result<ConversationId, Violations> {
    let proto::GetConversationRequest { conversation_id: raw } = request;
    let mut v = Violations::default();
    match conversation_id(raw, "conversation_id", &mut v) {
        Some(id) => Ok(id),
        None => Err(v),
    }
}

/// An UpdateConversation request: the conversation, the patch of its masked fields, and what
/// to do when it is missing (`allow_missing`).
pub(crate) fn update_request(
    request: proto::UpdateConversationRequest,
) -> Result<(ConversationId, ConversationPatch, IfMissing), Violations> {
    let proto::UpdateConversationRequest {
        conversation,
        update_mask,
        allow_missing,
    } = request;
    let mut v = Violations::default();
    let Some(conversation) = conversation else {
        return Err(Violations::single("conversation", "is required"));
    };
    let proto::Conversation {
        conversation_id: raw_id,
        title,
        status: raw_status,
        labels,
        // Output only: ignored, as AIP-134 asks of fields the server sets.
        created_at: _,
        updated_at: _,
        last_sequence: _,
        summary_through_sequence: _,
        memory_version: _,
        expire_time,
        forked_from: _,
        usage: _,
    } = conversation;
    let id = conversation_id(raw_id, "conversation.conversation_id", &mut v);
    let paths = update_mask.map(|m| m.paths).unwrap_or_default();
    if paths.is_empty() {
        v.add(
            "update_mask",
            "is required: name the fields to set (title, status, labels, expire_time)",
        );
    }
    let mut patch = ConversationPatch::default();
    for path in &paths {
        match path.as_str() {
            "title" => {
                check_title(&mut v, &title, "conversation.title");
                patch.title = Some(title.clone());
            }
            "status" => match status(raw_status, "conversation.status", &mut v) {
                Some(s) => patch.status = Some(s),
                None => v.add("conversation.status", "must be set when update_mask names it"),
            },
            "labels" => {
                check_labels(&mut v, &labels, "conversation.labels");
                patch.labels = Some(labels.clone());
            }
            "expire_time" => patch.expire_time = Some(expire(expire_time, &mut v)),
            other => v.add(
                "update_mask",
                format!(
                    "cannot set {:?}: only title, status, labels and expire_time",
                    other.chars().take(64).collect::<String>()
                ),
            ),
        }
    }
    match id {
        Some(id) if v.is_empty() => {
            let if_missing = match allow_missing {
                true => IfMissing::Create,
                false => IfMissing::NotFound,
            };
            Ok((id, patch, if_missing))
        }
        _ => Err(v),
    }
}

/// A patched `expire_time`: `None` clears it; a timestamp outside years 1 to 9999 is a
/// violation.
fn expire(expire_time: Option<prost_types::Timestamp>, v: &mut Violations) -> Option<SystemTime> {
    match expire_time {
        None => None,
        Some(t) if !TIME_RANGE_SECS.contains(&t.seconds) || !(0..1_000_000_000).contains(&t.nanos) => {
            v.add(
                "conversation.expire_time",
                "must be a valid timestamp between years 1 and 9999",
            );
            None
        }
        Some(t) => SystemTime::try_from(t).ok(),
    }
}

/// A ListConversations request as a store query.
pub(crate) fn list_request(request: proto::ListConversationsRequest) -> Result<ListQuery, Violations> {
    let proto::ListConversationsRequest {
        page_size,
        page_token,
        labels,
        status: raw_status,
    } = request;
    let mut v = Violations::default();
    check_labels(&mut v, &labels, "labels");
    let status = status(raw_status, "status", &mut v);
    let limit = match page_size as usize {
        0 => DEFAULT_LIST_PAGE,
        n => n.min(MAX_LIST_PAGE),
    };
    let mut query = ListQuery {
        labels,
        status,
        limit,
        after: None,
    };
    if !page_token.is_empty() {
        match query.parse_page_token(&page_token) {
            Ok(after) => query.after = Some(after),
            Err(e) => v.add("page_token", e),
        }
    }
    v.into_result(query)
}

/// A ForkConversation request: source, through, target.
pub(crate) fn fork_request(
    request: proto::ForkConversationRequest,
) -> Result<(ConversationId, Sequence, ConversationId), Violations> {
    let proto::ForkConversationRequest {
        conversation_id: raw_source,
        through_sequence,
        new_conversation_id,
    } = request;
    let mut v = Violations::default();
    let source = conversation_id(raw_source, "conversation_id", &mut v);
    let through = positive(through_sequence, "through_sequence", &mut v);
    let target = conversation_id(new_conversation_id, "new_conversation_id", &mut v);
    if let (Some(s), Some(t)) = (&source, &target)
        && s == t
    {
        v.add("new_conversation_id", "must differ from conversation_id");
    }
    match (source, through, target) {
        (Some(s), Some(n), Some(t)) if v.is_empty() => Ok((s, n, t)),
        _ => Err(v),
    }
}

/// A sequence field that must name a message (at least 1).
fn positive(raw: u64, field: &str, v: &mut Violations) -> Option<Sequence> {
    if raw == 0 {
        v.add(field, "must be at least 1");
        return None;
    }
    sequence(raw, field, v)
}

/// A RedactMessage request: conversation and sequence.
pub(crate) fn redact_request(
    request: proto::RedactMessageRequest,
) -> Result<(ConversationId, Sequence), Violations> {
    let proto::RedactMessageRequest {
        conversation_id: raw,
        sequence: raw_sequence,
    } = request;
    let mut v = Violations::default();
    let id = conversation_id(raw, "conversation_id", &mut v);
    let at = positive(raw_sequence, "sequence", &mut v);
    match (id, at) {
        (Some(id), Some(at)) if v.is_empty() => Ok((id, at)),
        _ => Err(v),
    }
}

/// A RewindConversation request: the conversation, the sequence to keep through, and the
/// optional guard on the last sequence.
pub(crate) fn rewind_request(
    request: proto::RewindConversationRequest,
) -> Result<(ConversationId, Sequence, Option<Sequence>), Violations> {
    let proto::RewindConversationRequest {
        conversation_id: raw,
        after_sequence,
        expected_last_sequence,
    } = request;
    let mut v = Violations::default();
    let id = conversation_id(raw, "conversation_id", &mut v);
    let after = Sequence::parse(after_sequence)
        .map_err(|e| v.add("after_sequence", e))
        .ok();
    let expected = match expected_last_sequence.map(Sequence::parse).transpose() {
        Ok(expected) => expected,
        Err(e) => {
            v.add("expected_last_sequence", e);
            None
        }
    };
    match (id, after) {
        (Some(id), Some(after)) if v.is_empty() => Ok((id, after, expected)),
        _ => Err(v),
    }
}
