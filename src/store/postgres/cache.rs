//! The replica's cache of decoded messages (docs/design.md, "Database work per call").
//!
//! Stored messages are immutable: only a redaction or a rewind changes or removes one, and both
//! count themselves on the conversation row, as a new creation time marks a deleted id that came
//! back ([`LogVersion`]). (A token count made after the append fills in what any reader would
//! compute, so it patches the run in place: [`MessageCache::keep_late_counts`].) BuildContext
//! reads that version in the one statement every call makes; the cache keeps, per
//! conversation, one run of the log's tail decoded under one version and serves it only to calls that read the same version, so the database reads only messages newer
//! than the run. Another replica's redaction, rewind, delete or the retention sweeper's delete
//! changes the version every replica reads next, and the stale run is never served again.
//!
//! A run covers a range of sequences: every non-excluded message in it is in the run (excluded
//! ones are never read for a pack). The cache holds at most its byte capacity of messages (as
//! [`Message::loaded_bytes`](crate::domain::message::Message::loaded_bytes) counts them), one
//! conversation at most an eighth of it (its oldest messages go first), and evicts the least
//! recently used conversations.

use std::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicU64, Ordering},
};

use lru::LruCache;

use crate::{
    domain::{
        ConversationId, Sequence, StoredMessage, TenantId,
        context::{PageRequest, cost::CountedLate},
    },
    store::{CacheStats, CappedPage, LogVersion},
};

/// One conversation's cached run: every non-excluded message with a sequence in `lo..=hi`,
/// oldest first, as read under `version`.
#[derive(Debug)]
pub(super) struct Run {
    version: LogVersion,
    lo: Sequence,
    hi: Sequence,
    messages: Vec<Arc<StoredMessage>>,
    bytes: usize,
}

/// Messages a read returned and the sequences it covered: every non-excluded message of
/// `lo..=hi` is among them (they may include others, outside it).
#[derive(Debug)]
pub(super) struct Segment<'a> {
    pub(super) lo: Sequence,
    pub(super) hi: Sequence,
    pub(super) messages: &'a [StoredMessage],
}

impl Segment<'_> {
    /// The segment a newest-first page read for `page` stands for.
    pub(super) fn of_page<'a>(page: &PageRequest, read: &'a CappedPage) -> Segment<'a> {
        let complete = !read.cut_by_size && read.messages.len() < page.limit;
        let hi = page.before.minus(1);
        let lo = match (complete, read.messages.last()) {
            (true, _) => page.floor.plus(1),
            (false, Some(oldest)) => oldest.sequence,
            // Nothing came and more may exist: it covered nothing.
            (false, None) => hi.plus(1),
        };
        Segment {
            lo,
            hi,
            messages: &read.messages,
        }
    }
}

type Key = (TenantId, ConversationId);

/// The cache; see the module documentation. A capacity of 0 turns it off.
#[derive(Debug)]
pub(super) struct MessageCache {
    capacity: usize,
    inner: Mutex<Inner>,
    /// Tail pages served from the cache, for [`MessageCache::stats`].
    pages_from_cache: AtomicU64,
    /// Tail pages read from the database.
    pages_from_database: AtomicU64,
}

/// Where a tail page came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PageSource {
    /// The cache.
    Cache,
    /// The database.
    Database,
}

#[derive(Debug)]
struct Inner {
    runs: LruCache<Key, Arc<Run>>,
    bytes: usize,
}

impl MessageCache {
    /// A cache of at most `capacity` bytes of messages.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner {
                runs: LruCache::unbounded(),
                bytes: 0,
            }),
            pages_from_cache: AtomicU64::new(0),
            pages_from_database: AtomicU64::new(0),
        }
    }

    /// Counts one tail page BuildContext read, by where it came from.
    pub(super) fn count_page(&self, source: PageSource) {
        let counter = match source {
            PageSource::Cache => &self.pages_from_cache,
            PageSource::Database => &self.pages_from_database,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// What the cache holds and the pages counted, for metrics.
    pub(super) fn stats(&self) -> CacheStats {
        CacheStats {
            bytes: self.lock().bytes,
            pages_from_cache: self.pages_from_cache.load(Ordering::Relaxed),
            pages_from_database: self.pages_from_database.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data: every update replaces an Arc.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The conversation's run, whatever its version (the caller checks it).
    pub(super) fn run(&self, tenant: &TenantId, conversation: &ConversationId) -> Option<Arc<Run>> {
        if self.capacity == 0 {
            return None;
        }
        let key = (tenant.clone(), conversation.clone());
        self.lock().runs.get(&key).cloned()
    }

    /// Forgets the conversation (it is gone).
    pub(super) fn forget(&self, tenant: &TenantId, conversation: &ConversationId) {
        let mut inner = self.lock();
        let forgotten = inner.runs.pop(&(tenant.clone(), conversation.clone()));
        if let Some(run) = &forgotten {
            inner.bytes -= run.bytes;
        }
        drop(inner);
        // Freed outside the lock.
        drop(forgotten);
    }

    /// Adds what a read under `version` saw: merged into the run of the same version when the
    /// ranges touch, replacing an older version's run (or a run it does not touch, when its
    /// range is newer); a newer version's run stays as it is.
    pub(super) fn learn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        version: LogVersion,
        seen: Segment<'_>,
    ) {
        if self.capacity == 0 || seen.lo > seen.hi {
            return;
        }
        let key = (tenant.clone(), conversation.clone());
        let current = self.lock().runs.peek(&key).cloned();
        let Some(run) = Run::merged(current.as_deref(), version, seen, self.capacity / 8) else {
            return;
        };
        let mut inner = self.lock();
        // Another call may have replaced the run since: keep the newer of the two.
        if let Some(now) = inner.runs.peek(&key)
            && !current.as_ref().is_some_and(|read| Arc::ptr_eq(read, now))
            && now.version >= run.version
        {
            return;
        }
        let bytes = run.bytes;
        let mut freed = Vec::new();
        if let Some((_, old)) = inner.runs.push(key, Arc::new(run)) {
            inner.bytes -= old.bytes;
            freed.push(old);
        }
        inner.bytes += bytes;
        while inner.bytes > self.capacity {
            let Some((_, evicted)) = inner.runs.pop_lru() else {
                break;
            };
            inner.bytes -= evicted.bytes;
            freed.push(evicted);
        }
        drop(inner);
        // Freed outside the lock.
        drop(freed);
    }

    /// Puts counts made after the append (see [`crate::store::Store::store_late_counts`])
    /// into the conversation's run. Counts of a message under a tokenizer are the same whoever
    /// makes them, so the run keeps its version.
    pub(super) fn keep_late_counts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        counts: &[CountedLate],
    ) {
        let key = (tenant.clone(), conversation.clone());
        let Some(current) = self.lock().runs.peek(&key).cloned() else {
            return;
        };
        let Some(patched) = current.with_late_counts(counts) else {
            return;
        };
        let mut inner = self.lock();
        if let Some(now) = inner.runs.peek_mut(&key)
            && Arc::ptr_eq(now, &current)
        {
            *now = Arc::new(patched);
        }
    }
}

impl Run {
    /// This run with `counts` kept in its messages, if any of them takes one.
    fn with_late_counts(&self, counts: &[CountedLate]) -> Option<Run> {
        let mut messages = self.messages.clone();
        let mut changed = false;
        for late in counts {
            let Ok(at) = messages.binary_search_by_key(&late.sequence, |m| m.sequence) else {
                continue;
            };
            let mut message = StoredMessage::clone(&messages[at]);
            if message.keep_late(late) {
                messages[at] = Arc::new(message);
                changed = true;
            }
        }
        changed.then_some(Run {
            version: self.version,
            lo: self.lo,
            hi: self.hi,
            messages,
            bytes: self.bytes,
        })
    }

    /// The version its messages were read under.
    pub(super) fn version(&self) -> LogVersion {
        self.version
    }

    /// The newest sequence it covers.
    pub(super) fn hi(&self) -> Sequence {
        self.hi
    }

    /// `current` (if any) with `seen` added, at most `max_bytes` (oldest messages dropped);
    /// `None` when `current` should stay.
    fn merged(
        current: Option<&Run>,
        version: LogVersion,
        seen: Segment<'_>,
        max_bytes: usize,
    ) -> Option<Run> {
        let fresh = || Run::from_segment(version, &seen);
        let mut run = match current {
            None => fresh(),
            Some(run) if run.version < version => fresh(),
            Some(run) if run.version > version => return None,
            Some(run) if seen.lo.get() > run.hi.get() + 1 || seen.hi.get() + 1 < run.lo.get() => {
                if seen.hi <= run.hi {
                    return None;
                }
                fresh()
            }
            Some(run) if seen.lo >= run.lo && seen.hi <= run.hi => return None,
            Some(run) => run.union(&seen),
        };
        run.trim_to(max_bytes);
        Some(run)
    }

    fn from_segment(version: LogVersion, seen: &Segment<'_>) -> Run {
        let mut messages: Vec<Arc<StoredMessage>> = seen
            .messages
            .iter()
            .filter(|m| m.sequence >= seen.lo && m.sequence <= seen.hi && !m.message.exclude_from_context)
            .map(|m| Arc::new(m.clone()))
            .collect();
        messages.sort_by_key(|m| m.sequence);
        let bytes = messages.iter().map(|m| m.message.loaded_bytes()).sum();
        Run {
            version,
            lo: seen.lo,
            hi: seen.hi,
            messages,
            bytes,
        }
    }

    /// This run and a segment that touches or overlaps it, under the same version.
    fn union(&self, seen: &Segment<'_>) -> Run {
        let added = Run::from_segment(self.version, seen);
        let (lo, hi) = (self.lo.min(added.lo), self.hi.max(added.hi));
        let below = added.messages.iter().filter(|m| m.sequence < self.lo);
        let above = added.messages.iter().filter(|m| m.sequence > self.hi);
        let messages: Vec<Arc<StoredMessage>> =
            below.chain(self.messages.iter()).chain(above).cloned().collect();
        let bytes = messages.iter().map(|m| m.message.loaded_bytes()).sum();
        Run {
            version: self.version,
            lo,
            hi,
            messages,
            bytes,
        }
    }

    /// Drops the oldest messages until the run holds at most `max_bytes`.
    fn trim_to(&mut self, max_bytes: usize) {
        let mut drop = 0;
        while self.bytes > max_bytes && drop < self.messages.len() {
            self.bytes -= self.messages[drop].message.loaded_bytes();
            self.lo = self.messages[drop].sequence.plus(1);
            drop += 1;
        }
        self.messages.drain(..drop);
        if self.messages.is_empty() {
            self.bytes = 0;
        }
    }

    /// The page `page` asks for, newest first, when the run holds its newest messages:
    /// `before - 1` is in the run and some message of the page's range is. Where the run ends
    /// above the page's floor, the page is marked cut (the caller asks for the rest).
    pub(super) fn page(&self, page: &PageRequest) -> Option<CappedPage> {
        let top = page.before.minus(1);
        if top < self.lo || top > self.hi || page.limit == 0 {
            return None;
        }
        let end = self.messages.partition_point(|m| m.sequence < page.before);
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for message in self.messages[..end].iter().rev() {
            if message.sequence <= page.floor || out.len() == page.limit || bytes >= page.max_bytes {
                break;
            }
            bytes += message.message.loaded_bytes();
            out.push(StoredMessage::clone(message));
        }
        let below_run = page.floor.get() + 1 < self.lo.get();
        let ran_out = out.len() < page.limit && bytes < page.max_bytes && below_run;
        if ran_out && out.is_empty() {
            return None;
        }
        Some(CappedPage {
            cut_by_size: bytes >= page.max_bytes || ran_out,
            messages: out,
        })
    }
}

#[cfg(test)]
mod tests;
