//! One tenant's recent changes on a replica, read from the store once for all of the tenant's
//! watchers here: a tail task reads each settled page after the window's end and wakes them;
//! a watcher whose cursor the window covers takes its changes from memory, and one further
//! behind reads the store itself until it catches up. With eight watchers, the store is read
//! once per page instead of eight times.
//!
//! The window holds every change after `start` up to `end`, in cursor order, as the store's
//! reads after `start` returned them, so a read from it answers what a read from the store
//! would. It keeps at most [`WINDOW`] changes; older ones leave, and `start` moves to them.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError, Weak},
    time::Duration,
};

use tokio::sync::watch;

use crate::{
    config::ChangeOptions,
    domain::{
        TenantId,
        changes::{Change, ChangePage, ChangeQuery, Cursor},
    },
    store::Store,
};

/// Changes a window keeps: about 70 ms of 7,000 appends a second; a watcher further behind
/// reads the store. At about 200 bytes a change, 100 KiB per watched tenant.
const WINDOW: usize = 512;

/// Changes one read takes from the store.
pub(super) const PAGE: usize = 256;

/// The least time between two reads of the tail: a busy replica's writes wake it thousands of
/// times a second, and one read then takes what they wrote.
const READ_GAP: Duration = Duration::from_millis(20);

/// How long the tail waits after a store failure before reading again.
const RETRY: Duration = Duration::from_secs(1);

/// The replica's windows, by tenant, while some watcher holds them.
#[derive(Debug, Default)]
pub(super) struct Windows {
    by_tenant: Mutex<HashMap<TenantId, Weak<TenantWindow>>>,
}

impl Windows {
    /// The tenant's window, started at `start` (the store's horizon) with its tail task if no
    /// watcher holds one.
    pub(super) fn of(
        &self,
        store: &Arc<dyn Store>,
        tenant: &TenantId,
        options: ChangeOptions,
        start: Cursor,
    ) -> Arc<TenantWindow> {
        let mut windows = self.by_tenant.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(window) = windows.get(tenant).and_then(Weak::upgrade) {
            return window;
        }
        windows.retain(|_, w| w.strong_count() > 0);
        let window = Arc::new(TenantWindow {
            state: Mutex::new(Window {
                changes: VecDeque::new(),
                start: start.clone(),
                end: start,
            }),
            grown: watch::Sender::new(0),
        });
        windows.insert(tenant.clone(), Arc::downgrade(&window));
        let tail = tail(Arc::downgrade(&window), store.clone(), tenant.clone(), options);
        tokio::spawn(tail);
        window
    }
}

/// One tenant's recent changes (see the module's notes).
#[derive(Debug)]
pub(super) struct TenantWindow {
    state: Mutex<Window>,
    /// Bumped each time the window grows.
    grown: watch::Sender<u64>,
}

#[derive(Debug)]
struct Window {
    changes: VecDeque<Change>,
    /// Every change after it up to `end` is in `changes`.
    start: Cursor,
    /// What the tail has read up to (the settled horizon of its last read).
    end: Cursor,
}

impl TenantWindow {
    /// Wakes when the window grows.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.grown.subscribe()
    }

    /// The changes after `query.after` (of `query.conversation` when set), as the store would
    /// answer, or `None` when the window no longer holds them all.
    pub(super) fn read(&self, query: &ChangeQuery) -> Option<ChangePage> {
        let window = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // Changes of one position (a group-commit batch) are in the store's order of their
        // conversation ids, which is the database's collation, not Rust's byte order: a cursor
        // among them is left to the store, which orders it as it ordered them.
        let after = &query.after;
        let tied = |c: &Cursor| {
            c.position == after.position
                && !after.conversation.is_empty()
                && !c.conversation.is_empty()
                && c.conversation != after.conversation
        };
        if tied(&window.start) || window.changes.iter().any(|c| tied(&c.cursor)) || *after < window.start {
            return None;
        }
        let first = window.changes.partition_point(|c| c.cursor <= query.after);
        let wanted = |c: &&Change| {
            query
                .conversation
                .as_ref()
                .is_none_or(|id| id.as_str() == c.conversation())
        };
        let changes: Vec<Change> = window
            .changes
            .range(first..)
            .filter(wanted)
            .take(query.limit)
            .cloned()
            .collect();
        let next = match changes.last() {
            Some(last) if changes.len() == query.limit => last.cursor.clone(),
            _ => window.end.clone().max(query.after.clone()),
        };
        Some(ChangePage {
            changes,
            next: Some(next),
        })
    }

    fn end(&self) -> Cursor {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .end
            .clone()
    }

    /// Appends a page the store returned after `end`, and moves `end` to its next cursor.
    fn extend(&self, page: ChangePage) {
        let mut window = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        window.changes.extend(page.changes);
        // The store's next cursor is never before the one it read after (its order, which is
        // not always Rust's among one position's changes: no `max` here).
        if let Some(next) = page.next {
            window.end = next;
        }
        while window.changes.len() > WINDOW {
            if let Some(gone) = window.changes.pop_front() {
                window.start = gone.cursor;
            }
        }
        drop(window);
        self.grown.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Reads the tenant's settled changes after the window's end, page by page, as long as a
/// watcher holds the window: at once when this replica writes, else every `options.poll`.
async fn tail(window: Weak<TenantWindow>, store: Arc<dyn Store>, tenant: TenantId, options: ChangeOptions) {
    let mut woken = store.change_signal().subscribe();
    loop {
        let read_at = tokio::time::Instant::now();
        let Some(held) = window.upgrade() else { return };
        let query = ChangeQuery {
            after: held.end(),
            conversation: None,
            limit: PAGE,
        };
        match store.read_changes(&tenant, &query).await {
            Ok(page) => {
                let full = page.changes.len() == PAGE;
                held.extend(page);
                if full {
                    continue;
                }
            }
            Err(error) => {
                let error = crate::runtime::telemetry::ErrorChain(&error).to_string();
                tracing::warn!(error, "change feed read failed; reading again");
                drop(held);
                tokio::time::sleep(RETRY).await;
                continue;
            }
        }
        drop(held);
        tokio::select! {
            _ = woken.changed() => {}
            () = tokio::time::sleep(options.poll) => {}
        }
        tokio::time::sleep_until(read_at + READ_GAP).await;
    }
}
