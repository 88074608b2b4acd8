//! The in-memory store's map of conversations, and the index that lists them by activity; all
//! of it changed under the store's lock.

use std::{
    collections::{BTreeSet, HashMap},
    ops::{Deref, DerefMut},
    time::SystemTime,
};

use crate::domain::{
    ConversationId, TenantId,
    conversation::{self, ActivityKey, ConversationPage, ListQuery},
};

use super::{changes::ChangeLog, entry::Conversation};
use crate::{
    domain::changes::{ChangeKind, NewChange},
    store::{RetentionRule, Swept},
};

/// A conversation's place in the store: its tenant and its id.
pub(super) type Key = (TenantId, ConversationId);

/// The conversations, and each tenant's listing order beside them.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) conversations: HashMap<Key, Conversation>,
    /// Every conversation's [`ActivityKey`], by tenant.
    pub(super) activity: HashMap<TenantId, BTreeSet<ActivityKey>>,
    /// Every change, in commit order.
    pub(super) changes: ChangeLog,
}

impl Deref for State {
    type Target = HashMap<Key, Conversation>;

    fn deref(&self) -> &Self::Target {
        &self.conversations
    }
}

impl DerefMut for State {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conversations
    }
}

impl State {
    /// Records activity on the conversation at `now` (creating it when missing), keeping the
    /// listing order.
    pub(super) fn touch(&mut self, key: &Key, now: SystemTime) -> &mut Conversation {
        let now = conversation::to_micros(now);
        let index = self.activity.entry(key.0.clone()).or_default();
        let conversation = self
            .conversations
            .entry(key.clone())
            .or_insert_with(|| Conversation::new(now));
        index.remove(&conversation.activity_key(&key.1));
        conversation.resource.updated_at = now;
        index.insert(conversation.activity_key(&key.1));
        conversation
    }

    /// A page of the tenant's conversations matching `query`, newest activity first.
    pub(super) fn list(&self, tenant: &TenantId, query: &ListQuery) -> ConversationPage {
        let Some(index) = self.activity.get(tenant) else {
            return ConversationPage {
                conversations: Vec::new(),
                has_more: false,
            };
        };
        let newest_first: Box<dyn Iterator<Item = &ActivityKey>> = match &query.after {
            Some(after) => Box::new(index.range(..after).rev()),
            None => Box::new(index.iter().rev()),
        };
        let mut matching = newest_first.filter_map(|k| {
            let c = self.get(&(tenant.clone(), k.id.clone()))?;
            let resource = c.resource(&k.id);
            query.matches(&resource).then_some(resource)
        });
        let conversations: Vec<_> = matching.by_ref().take(query.limit).collect();
        let has_more = matching.next().is_some();
        ConversationPage {
            conversations,
            has_more,
        }
    }

    /// Removes a conversation and its place in the listing.
    /// Deletes up to `rule.batch` conversations that `rule` says have expired.
    pub(super) fn sweep(&mut self, rule: &RetentionRule) -> Swept {
        let expired: Vec<Key> = self
            .conversations
            .iter()
            .filter(|(_, c)| c.expired(rule))
            .map(|(k, _)| k.clone())
            .take(rule.batch)
            .collect();
        let mut swept = Swept::default();
        for key in expired {
            if let Some(removed) = self.remove(&key) {
                let expired = NewChange::whole(ChangeKind::Expired);
                self.changes.record(&key, expired, std::time::SystemTime::now());
                swept.conversations += 1;
                swept.messages += removed.messages.len() as u64;
            }
        }
        swept
    }

    pub(super) fn remove(&mut self, key: &Key) -> Option<Conversation> {
        let removed = self.conversations.remove(key)?;
        if let Some(index) = self.activity.get_mut(&key.0) {
            index.remove(&removed.activity_key(&key.1));
        }
        Some(removed)
    }
}

/// The store's state locked for a write; tells watchers when it is released.
pub(super) struct Written<'a> {
    pub(super) state: std::sync::MutexGuard<'a, State>,
    pub(super) signal: &'a crate::store::ChangeSignal,
}

impl std::ops::Deref for Written<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for Written<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Written<'_> {
    fn drop(&mut self) {
        self.signal.notify();
    }
}
