//! The in-memory store's writes to a conversation's resource, summary and memory, and forks:
//! each under the store's lock, recording its change.

use std::time::SystemTime;

use super::{
    ready,
    rewrite::MemoryFork,
    state::{Key, State},
};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId,
        changes::{ChangeKind, NewChange},
        conversation::{self, ConversationPatch, IfMissing},
        summary::Summary,
        working_memory::WorkingMemory,
    },
    store::{MemoryBase, NewSummary, StoreError},
};

impl State {
    pub(super) fn store_summary(
        &mut self,
        key: &Key,
        base: Sequence,
        summary: NewSummary,
    ) -> Result<Summary, StoreError> {
        let conversations = self;
        let c = conversations.get_mut(key).ok_or(StoreError::NotFound)?;
        let current = c.summaries.last().map_or(Sequence::ZERO, |s| s.through_sequence);
        let changes = c.redactions.saturating_add(c.rewinds);
        if summary
            .prepared_log_changes
            .is_some_and(|prepared| prepared != changes)
        {
            return Err(StoreError::LogChanged { current: changes });
        }
        if current != base
            || summary.through_sequence <= base
            || summary.through_sequence > c.last_sequence()
            || summary.rewinds != c.rewinds
            || (summary.redactions != c.redactions
                && c.tombstones(base, summary.through_sequence) != summary.tombstones)
        {
            return Err(StoreError::SummaryMoved { current });
        }
        let stored = Summary {
            text: summary.text,
            through_sequence: summary.through_sequence,
            summarizer: summary.summarizer,
            version: c.summaries.len() as u64 + 1,
            updated_at: SystemTime::now(),
        };
        c.summaries.push(stored.clone());
        let change = NewChange::new(ChangeKind::Summarized, Sequence::ZERO, stored.through_sequence);
        conversations.changes.record(key, change, stored.updated_at);
        Ok(stored)
    }

    pub(super) fn store_memory(
        &mut self,
        key: &Key,
        base: MemoryBase,
        memory: &WorkingMemory,
    ) -> Result<WorkingMemory, StoreError> {
        let conversations = self;
        let c = conversations.get_mut(key).ok_or(StoreError::NotFound)?;
        let current = c.memory.as_ref().map_or(0, |m| m.version);
        if current != base.version || c.redactions != base.redactions || c.rewinds != base.rewinds {
            return Err(StoreError::MemoryVersionMismatch { current });
        }
        let stored = WorkingMemory {
            version: current + 1,
            updated_at: Some(SystemTime::now()),
            ..memory.clone()
        };
        c.memory = Some(stored.clone());
        let change = NewChange::whole(ChangeKind::MemoryUpdated);
        conversations.changes.record(key, change, SystemTime::now());
        Ok(stored)
    }

    pub(super) fn update(
        &mut self,
        key: &Key,
        patch: &ConversationPatch,
        if_missing: IfMissing,
    ) -> Result<conversation::Conversation, StoreError> {
        let conversations = self;
        if if_missing == IfMissing::NotFound && !conversations.contains_key(key) {
            return Err(StoreError::NotFound);
        }
        let c = conversations.touch(key, SystemTime::now());
        let mut resource = c.resource(&key.1);
        patch.apply_to(&mut resource);
        c.resource.title = resource.title;
        c.resource.status = resource.status;
        c.resource.labels = resource.labels;
        c.resource.expire_time = resource.expire_time.map(conversation::to_micros);
        let resource = c.resource(&key.1);
        let change = NewChange::whole(ChangeKind::Updated);
        conversations.changes.record(key, change, SystemTime::now());
        Ok(resource)
    }

    pub(super) fn fork(
        &mut self,
        tenant: &TenantId,
        source: &ConversationId,
        through: Sequence,
        target: &ConversationId,
    ) -> Result<conversation::Conversation, StoreError> {
        let conversations = self;
        let c = conversations
            .get(&(tenant.clone(), source.clone()))
            .ok_or(StoreError::NotFound)?;
        let target_key = (tenant.clone(), target.clone());
        let now = SystemTime::now();
        let mut fork = ready::run_now(conversation::fork(MemoryFork { source: c, now }, through))?;
        if conversations.contains_key(&target_key) {
            return Err(StoreError::AlreadyExists);
        }
        fork.resource.forked_from = Some((source.clone(), through));
        conversations.insert(target_key.clone(), fork);
        let fork = conversations.touch(&target_key, now).resource(target);
        let change = NewChange::new(ChangeKind::Forked, Sequence::ZERO.plus(1).min(through), through);
        conversations.changes.record(&target_key, change, now);
        Ok(fork)
    }
}
