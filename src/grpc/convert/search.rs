//! SearchMessages and BuildContext's recall on the wire.

use super::fields::{conversation_id, role_at, role_to_proto};
use crate::{
    domain::{
        Violations,
        context::{Recall, recall::MAX_RECALL_QUERY_BYTES},
    },
    proto,
    service::{SearchOutcome, SearchRequest},
};

/// The longest query SearchMessages and recall take (recall's own from a user message is as long).
const MAX_QUERY_BYTES: usize = MAX_RECALL_QUERY_BYTES;
/// Roles a search may filter by (there are four; a repeat is allowed, a flood is not).
const MAX_ROLES: usize = 8;
/// Tool names a search may filter by.
const MAX_TOOL_NAMES: usize = 64;
/// Bytes of one tool name.
const MAX_TOOL_NAME_BYTES: usize = 256;
/// Recall's `max_tokens` when the request leaves it at 0.
const DEFAULT_RECALL_TOKENS: u32 = 1000;
/// Recall's `max_items` when the request leaves it at 0.
const DEFAULT_RECALL_ITEMS: u32 = 40;
/// The most messages recall quotes.
const MAX_RECALL_ITEMS: u32 = 40;

/// Parses a SearchMessages request, with every violation found.
pub(crate) fn search_request(request: proto::SearchMessagesRequest) -> Result<SearchRequest, Violations> {
    let proto::SearchMessagesRequest {
        conversation_id: raw_id,
        query,
        page_size,
        roles,
        tool_names,
        page_token,
    } = request;
    let mut v = Violations::default();
    let conversation = conversation_id(raw_id, "conversation_id", &mut v);
    if query.trim().is_empty() {
        v.add("query", "query is required");
    }
    check_query(&query, "query", &mut v);
    // Past the limit no entry is read: one violation, not one per entry.
    if roles.len() > MAX_ROLES {
        v.add(
            "roles",
            format!("{} roles; the limit is {MAX_ROLES}", roles.len()),
        );
    }
    let roles: Vec<_> = roles
        .iter()
        .take(MAX_ROLES)
        .enumerate()
        .filter_map(|(i, r)| role_at(*r, &format!("roles[{i}]"), &mut v))
        .collect();
    if tool_names.len() > MAX_TOOL_NAMES {
        let n = tool_names.len();
        v.add("tool_names", format!("{n} names; the limit is {MAX_TOOL_NAMES}"));
    }
    for (i, name) in tool_names.iter().enumerate().take(MAX_TOOL_NAMES) {
        if name.len() > MAX_TOOL_NAME_BYTES {
            let problem = format!("{} bytes; the limit is {MAX_TOOL_NAME_BYTES}", name.len());
            v.add(format!("tool_names[{i}]"), problem);
        }
    }
    match conversation {
        Some(conversation) if v.is_empty() => Ok(SearchRequest {
            conversation,
            query,
            page_size: page_size as usize,
            roles,
            tool_names,
            page_token,
        }),
        _ => Err(v),
    }
}

fn check_query(query: &str, field: &str, v: &mut Violations) {
    if query.len() > MAX_QUERY_BYTES {
        let problem = format!("{} bytes; the limit is {MAX_QUERY_BYTES}", query.len());
        v.add(field, problem);
    }
}

/// BuildContext's `recall`, defaults applied.
pub(super) fn recall(recall: proto::Recall, v: &mut Violations) -> Recall {
    let proto::Recall {
        query,
        max_tokens,
        max_items,
    } = recall;
    check_query(&query, "recall.query", v);
    if max_items > MAX_RECALL_ITEMS {
        v.add(
            "recall.max_items",
            format!("{max_items}; the limit is {MAX_RECALL_ITEMS}"),
        );
    }
    let or = |n: u32, default: u32| if n == 0 { default } else { n };
    Recall {
        query,
        max_tokens: or(max_tokens, DEFAULT_RECALL_TOKENS),
        max_items: or(max_items, DEFAULT_RECALL_ITEMS),
    }
}

/// A page of hits as SearchMessages answers it.
pub(crate) fn search_response(outcome: SearchOutcome) -> proto::SearchMessagesResponse {
    proto::SearchMessagesResponse {
        hits: outcome
            .hits
            .into_iter()
            .map(|hit| proto::SearchHit {
                sequence: hit.sequence.get(),
                role: role_to_proto(hit.role) as i32,
                snippet: hit.snippet,
                score: hit.score,
                relevance: hit.relevance,
                tool_name: hit.tool_name.unwrap_or_default(),
            })
            .collect(),
        next_page_token: outcome.next_page_token.unwrap_or_default(),
    }
}
