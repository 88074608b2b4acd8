//! Binding tool results that name their call by function name only (Gemini
//! `functionResponse` parts without an `id`, docs/native.md) to the conversation's open calls.

use super::{Service, ServiceError};
use crate::{
    domain::{AppendBatch, Sequence, TenantId, Violations},
    store::StoreError,
};

/// How far back, in messages, the calls a result may answer are looked for.
const WINDOW: u64 = 64;

impl Service {
    /// Gives each of `batch.unbound` the id of the oldest open call of its name among the
    /// conversation's last [`WINDOW`] messages (or, for a keyed retry whose calls are answered
    /// by the first try, the newest call of its name, so that the retry replays); a result with
    /// no such call is a violation at its JSON path. The append itself checks the binding again,
    /// under the conversation's lock.
    pub(super) async fn bind_results(
        &self,
        tenant: &TenantId,
        batch: &mut AppendBatch,
    ) -> Result<(), ServiceError> {
        let last = match self.store.get_conversation(tenant, &batch.conversation_id).await {
            Ok(conversation) => conversation.last_sequence,
            Err(StoreError::NotFound) => Sequence::ZERO,
            Err(e) => return Err(e.into()),
        };
        let after = Sequence::from_stored(last.as_i64().saturating_sub(WINDOW as i64));
        let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
        let read = reservation.begin_read()?;
        let page = match last == Sequence::ZERO {
            true => None,
            false => Some(
                self.store
                    .list_messages(tenant, &batch.conversation_id, after, WINDOW as usize, read.limit)
                    .await?,
            ),
        };
        let messages = page.map(|p| p.messages).unwrap_or_default();
        reservation.end_read(read, super::context::loaded_bytes(&messages))?;
        let mut calls: Vec<(&str, &str)> = Vec::new();
        let mut open: Vec<(&str, &str)> = Vec::new();
        for stored in &messages {
            for call in &stored.message.tool_calls {
                calls.push((call.name.as_str(), call.id.as_str()));
                open.push((call.name.as_str(), call.id.as_str()));
            }
            if let Some(answered) = stored.message.tool_call_id.as_deref() {
                open.retain(|(_, id)| *id != answered);
            }
        }
        let mut v = Violations::default();
        for (index, name) in std::mem::take(&mut batch.unbound) {
            let bound = match open.iter().position(|(n, _)| *n == name) {
                Some(at) => Some(open.remove(at).1),
                None if batch.idempotency_key.is_some() => {
                    calls.iter().rev().find(|(n, _)| *n == name).map(|c| c.1)
                }
                None => None,
            };
            match bound {
                Some(id) => batch.messages[index].tool_call_id = Some(id.to_owned()),
                None => v.add(
                    format!("{}.functionResponse.id", batch.origins[index]),
                    format!(
                        "no open call named `{name}` among the conversation's last {WINDOW} messages: \
                         give the call's id (ListMessages shows it in tool_calls[].id)"
                    ),
                ),
            }
        }
        match v.is_empty() {
            true => Ok(()),
            false => Err(StoreError::Invalid { violations: v }.into()),
        }
    }
}
