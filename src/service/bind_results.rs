//! Binding tool results that name their call by function name only (Gemini
//! `functionResponse` parts without an `id`, docs/native.md) to the conversation's open calls.

use std::collections::HashSet;

use super::{Service, ServiceError};
use crate::{
    domain::{ParsedBatch, Sequence, TenantId, Violations},
    store::StoreError,
};

/// How far back, in messages, the calls a result may answer are looked for.
const WINDOW: u64 = 64;

impl Service {
    /// Gives each result of `batch` that names its call by function name only the id of the oldest open call of its name among the
    /// conversation's last [`WINDOW`] messages (or, for a keyed retry whose calls are answered
    /// by the first try, the newest call of its name, so that the retry replays); a result with
    /// no such call is a violation at its JSON path. The append itself checks the binding again,
    /// under the conversation's lock.
    pub(super) async fn bind_results(
        &self,
        tenant: &TenantId,
        batch: &mut ParsedBatch,
    ) -> Result<(), ServiceError> {
        let last = match self.store.get_conversation(tenant, &batch.conversation_id).await {
            Ok(conversation) => conversation.last_sequence,
            Err(StoreError::NotFound) => Sequence::ZERO,
            Err(e) => return Err(e.into()),
        };
        // The window's calls in log order, page by page (a page stops at the read's byte
        // limit; only names and ids are kept).
        let mut after = Sequence::from_stored(last.as_i64().saturating_sub(WINDOW as i64));
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut answered: HashSet<String> = HashSet::new();
        while after < last {
            let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
            let read = reservation.begin_read()?;
            let page = self
                .store
                .list_messages(tenant, &batch.conversation_id, after, WINDOW as usize, read.limit)
                .await?;
            reservation.end_read(read, super::packing::loaded_bytes(&page.messages))?;
            for stored in &page.messages {
                calls.extend(
                    stored
                        .message
                        .tool_calls
                        .iter()
                        .map(|c| (c.name.clone(), c.id.clone())),
                );
                answered.extend(stored.message.tool_call_id.clone());
            }
            match page.messages.last() {
                Some(newest) if page.has_more => after = newest.sequence,
                _ => break,
            }
        }
        // Results in the batch that name their call answer it too.
        answered.extend(
            batch
                .messages
                .iter()
                .filter_map(|m| m.message.tool_call_id.clone()),
        );
        let mut open: Vec<(&str, &str)> = calls
            .iter()
            .filter(|(_, id)| !answered.contains(id))
            .map(|(name, id)| (name.as_str(), id.as_str()))
            .collect();
        let mut v = Violations::default();
        for index in 0..batch.messages.len() {
            let Some(name) = batch.messages[index].unbound_call.take() else {
                continue;
            };
            let bound = match open.iter().position(|(n, _)| *n == name) {
                Some(at) => Some(open.remove(at).1),
                None if batch.idempotency_key.is_some() => {
                    calls.iter().rev().find(|(n, _)| *n == name).map(|c| c.1.as_str())
                }
                None => None,
            };
            match bound {
                Some(id) => batch.messages[index].message.tool_call_id = Some(id.to_owned()),
                None => v.add(
                    format!("{}.functionResponse.id", batch.field_of(index)),
                    format!(
                        "no open call named `{name}` among the conversation's last {WINDOW} messages: \
                         give the call's id (ListMessages shows it in tool_calls[].id)"
                    ),
                ),
            }
        }
        match v.is_empty() {
            true => Ok(()),
            false => Err(v.into()),
        }
    }
}
