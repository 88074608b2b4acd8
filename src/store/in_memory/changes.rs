//! The in-memory store's change feed: every change in commit order, recorded under the store's
//! lock by the write that makes it. A change's position is a counter taken under that lock, so
//! positions are commit order and every recorded change is settled.

use std::{collections::VecDeque, time::SystemTime};

use crate::domain::{
    ConversationId, TenantId,
    changes::{Change, ChangePage, ChangeQuery, Cursor, NewChange, micros},
};

/// The recorded changes, oldest first, with their tenants.
#[derive(Debug, Default)]
pub(super) struct ChangeLog {
    entries: VecDeque<(TenantId, Change)>,
    /// The position the next change takes.
    next: i64,
}

impl ChangeLog {
    /// Records `change` of the tenant's conversation, made at `now`.
    pub(super) fn record(&mut self, key: &(TenantId, ConversationId), change: NewChange, now: SystemTime) {
        self.next += 1;
        let cursor = Cursor {
            position: self.next,
            conversation: key.1.as_str().to_owned(),
            // Positions are unique here: the conversation's change number adds nothing.
            number: self.next,
            time_micros: micros(now),
        };
        self.entries.push_back((
            key.0.clone(),
            Change {
                cursor,
                kind: change.kind,
                first_sequence: change.first_sequence,
                last_sequence: change.last_sequence,
                time: now,
            },
        ));
    }

    /// A cursor before the next change.
    pub(super) fn horizon(&self, now: SystemTime) -> Cursor {
        Cursor::before(self.next + 1, now)
    }

    /// The tenant's changes after `query.after`, in order.
    pub(super) fn read(&self, tenant: &TenantId, query: &ChangeQuery, now: SystemTime) -> ChangePage {
        let start = self.entries.partition_point(|(_, c)| c.cursor <= query.after);
        let wanted = |(t, c): &&(TenantId, Change)| {
            t == tenant
                && query
                    .conversation
                    .as_ref()
                    .is_none_or(|id| id.as_str() == c.conversation())
        };
        let changes: Vec<Change> = self
            .entries
            .range(start..)
            .filter(wanted)
            .take(query.limit)
            .map(|(_, c)| c.clone())
            .collect();
        let next = match changes.last() {
            Some(last) if changes.len() == query.limit => last.cursor.clone(),
            _ => self.horizon(now).max(query.after.clone()),
        };
        ChangePage {
            changes,
            next: Some(next),
        }
    }

    /// The cursor just before the tenant's oldest change made at or after `since`.
    pub(super) fn oldest(&self, tenant: &TenantId, since: SystemTime) -> Option<Cursor> {
        let since = micros(since);
        self.entries
            .iter()
            .find(|(t, c)| t == tenant && c.cursor.time_micros >= since)
            .map(|(_, c)| Cursor {
                number: c.cursor.number - 1,
                ..c.cursor.clone()
            })
    }

    /// Forgets up to `batch` changes made before `before`; returns how many.
    pub(super) fn sweep(&mut self, before: SystemTime, batch: usize) -> u64 {
        let before = micros(before);
        let mut swept = 0;
        while swept < batch as u64
            && self
                .entries
                .front()
                .is_some_and(|(_, c)| c.cursor.time_micros < before)
        {
            self.entries.pop_front();
            swept += 1;
        }
        swept
    }
}
