//! WatchChanges (DESIGN 2.11, docs/design.md "Change feed"): a watcher follows the tenant's
//! changes from a cursor. The tenant's recent changes are read from the store once for all of
//! its watchers on this replica ([`super::change_window`]), at once when this replica writes
//! (the store's [`crate::store::ChangeSignal`]) and every [`ChangeOptions::poll`] for what other
//! replicas write; a missed wake-up only delays a change. A watcher behind that window reads the
//! store page by page until it catches up.
//!
//! Bounded: each watcher holds one page and one response at a time (the stream is a channel of
//! one), so a consumer that reads nothing holds no more; a replica serves at most
//! [`ChangeOptions::max_watchers`] of them; shutdown ends every stream with UNAVAILABLE.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use tokio::sync::{Semaphore, mpsc, watch};

use super::{Service, ServiceError};
use crate::{
    config::ChangeOptions,
    domain::{
        ConversationId, TenantId,
        changes::{ChangeKind, ChangeQuery, Cursor, DeliveredChange},
    },
    runtime::response_budget::{Refusal, Reservation, ResponseBudget},
    store::{Store, StoreError},
};

use super::change_window::{PAGE, TenantWindow, Windows};

/// The most bytes of messages one response carries (less when `CTXD_MAX_RESPONSE_BYTES` is
/// under twice this): well within the 4 MiB that gRPC clients accept by default. An append
/// whose messages pass it carries those that fit, with `messages_truncated`.
const MESSAGE_BYTES: usize = 2 << 20;

/// How long a watcher waits after a store failure before reading again.
const RETRY: Duration = Duration::from_secs(1);

/// How long a watcher waits for the replica's memory for loaded messages, in use by other calls.
const MEMORY_RETRY: Duration = Duration::from_millis(50);

/// What a watch asks for.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// Resume after this cursor; `None`: from now.
    pub after: Option<Cursor>,
    /// Only this conversation's changes.
    pub conversation: Option<ConversationId>,
    /// Whether APPENDED changes carry their messages.
    pub include_messages: bool,
}

/// What a watch stream sends.
#[derive(Debug)]
pub enum WatchEvent {
    /// Changes, in order, and the replica's memory their messages hold until they are sent.
    Changes(Vec<DeliveredChange>, Vec<Reservation>),
    /// Nothing to deliver: every change before this cursor has been delivered.
    Heartbeat(Cursor),
}

/// A watch's stream: events until the consumer leaves, the replica shuts down (an error), or
/// the store fails for longer than a call may wait (an error).
#[derive(Debug)]
pub struct Watch {
    /// The events.
    pub events: mpsc::Receiver<Result<WatchEvent, ServiceError>>,
}

/// The replica's watchers: their cap, and the signal that ends them at shutdown.
#[derive(Debug)]
pub(super) struct Watchers {
    options: ChangeOptions,
    slots: Arc<Semaphore>,
    /// Each tenant's share of the slots.
    tenants: Arc<super::tenant_slots::TenantSlots>,
    closing: watch::Sender<bool>,
    /// The tenants' recent changes, read once for all their watchers.
    windows: Windows,
}

impl Watchers {
    pub(super) fn new(options: ChangeOptions) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(options.max_watchers)),
            tenants: super::tenant_slots::TenantSlots::new(options.max_watchers_per_tenant),
            closing: watch::Sender::new(false),
            windows: Windows::default(),
            options,
        }
    }
}

impl Service {
    /// The change feed's settings.
    pub fn change_options(&self) -> ChangeOptions {
        self.watchers.options
    }

    /// Ends every watch stream (with UNAVAILABLE: resume from the last cursor elsewhere); new
    /// ones are refused. For shutdown, before the server drains its calls.
    pub fn close_watchers(&self) {
        self.watchers.closing.send_replace(true);
        self.watchers.slots.close();
    }

    /// Starts a watch: OUT_OF_RANGE for a cursor older than the retention, RESOURCE_EXHAUSTED
    /// when the replica serves as many watchers as it may.
    pub async fn watch_changes(
        &self,
        tenant: &TenantId,
        request: WatchRequest,
    ) -> Result<Watch, ServiceError> {
        let options = self.watchers.options;
        let slot = self
            .watchers
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| ServiceError::TenantBusy {
                what: "change watchers (CTXD_MAX_WATCHERS, for the whole replica)",
                limit: options.max_watchers,
            })?;
        let tenant_slot = self
            .watchers
            .tenants
            .try_take(tenant)
            .ok_or(ServiceError::TenantBusy {
                what: "change watchers of one tenant (CTXD_MAX_WATCHERS_PER_TENANT)",
                limit: options.max_watchers_per_tenant,
            })?;
        let start = match request.after.clone() {
            Some(after) if !after.held(options.retention, SystemTime::now()) => {
                // An hour inside retention (a quarter of a shorter one): the consumer has that
                // long to resync before this cursor expires too.
                let grace = (options.retention / 4).min(Duration::from_secs(3600));
                let since = SystemTime::now() - options.retention + grace;
                let oldest = self.store.oldest_change(tenant, since).await?;
                return Err(ServiceError::CursorExpired {
                    retention: options.retention,
                    oldest: oldest.map(|c| c.encode()),
                });
            }
            Some(after) => after,
            None => self.store.change_horizon().await?,
        };
        let horizon = self.store.change_horizon().await?;
        let window = self.watchers.windows.of(&self.store, tenant, options, horizon);
        let (sender, events) = mpsc::channel(1);
        let follower = Follower {
            window,
            store: self.store.clone(),
            tenant: tenant.clone(),
            request,
            cursor: start,
            options,
            max_message_bytes: message_bytes(&self.limits),
            budget: self.response_budget.clone(),
            metrics: self.metrics.clone(),
            sender,
            closing: self.watchers.closing.subscribe(),
        };
        let metrics = self.metrics.clone();
        metrics.changes.watchers.inc();
        tokio::spawn(async move {
            follower.run().await;
            metrics.changes.watchers.dec();
            drop((slot, tenant_slot));
        });
        Ok(Watch { events })
    }
}

/// The most bytes of messages one response carries: [`MESSAGE_BYTES`], or less where the
/// limits are small, so that a read (reserved twice over) always fits the call's limit and a
/// quarter of the tenant's share of the replica's memory, and a watcher never waits for memory
/// it can never get.
fn message_bytes(limits: &super::Limits) -> usize {
    let share = limits.response_budget_bytes / 100 * limits.tenant_memory_percent.clamp(1, 100);
    MESSAGE_BYTES
        .min(limits.max_response_bytes / 2)
        .min(share / 4)
        .max(1)
}

/// One watcher's loop.
struct Follower {
    /// The tenant's recent changes on this replica.
    window: Arc<TenantWindow>,
    store: Arc<dyn Store>,
    tenant: TenantId,
    request: WatchRequest,
    cursor: Cursor,
    options: ChangeOptions,
    /// The most bytes of messages one response carries.
    max_message_bytes: usize,
    /// The replica's memory for loaded messages, which the messages a watcher carries count in.
    budget: ResponseBudget,
    metrics: Arc<super::metrics::UseCaseMetrics>,
    sender: mpsc::Sender<Result<WatchEvent, ServiceError>>,
    /// True once the replica shuts down.
    closing: watch::Receiver<bool>,
}

/// The consumer left (or the replica shuts down while it reads nothing): the follower stops.
struct Gone;

/// What one read found.
enum Read {
    /// A whole page: there may be more.
    Full,
    /// Some changes, all there were.
    Some,
    /// Nothing (or the store failed).
    Nothing,
}

impl Follower {
    async fn run(mut self) {
        let mut woken = self.window.subscribe();
        // The stream opens with its starting cursor: a consumer cut off before the first change
        // resumes from there, and a watch "from now" misses nothing after it.
        let opening = WatchEvent::Heartbeat(self.cursor.clone());
        if self.sender.send(Ok(opening)).await.is_err() {
            return;
        }
        let mut idle_since = tokio::time::Instant::now();
        loop {
            if *self.closing.borrow() {
                let _ = self.sender.send(Err(ServiceError::ShuttingDown)).await;
                return;
            }
            match self.deliver().await {
                // Behind: the next page at once.
                Ok(Read::Full) => {
                    idle_since = tokio::time::Instant::now();
                    continue;
                }
                Ok(Read::Some) => idle_since = tokio::time::Instant::now(),
                Ok(Read::Nothing) => {}
                Err(Gone) => return,
            }
            if idle_since.elapsed() >= self.options.heartbeat {
                let beat = WatchEvent::Heartbeat(self.cursor.clone());
                if self.sender.send(Ok(beat)).await.is_err() {
                    return;
                }
                idle_since = tokio::time::Instant::now();
            }
            let wait = self.options.poll.min(self.options.heartbeat);
            tokio::select! {
                _ = woken.changed() => {}
                _ = self.closing.changed() => {}
                () = tokio::time::sleep(wait) => {}
                () = self.sender.closed() => return,
            }
        }
    }

    /// Reads one page and sends what it holds; what it found. A store failure
    /// waits [`RETRY`] and reads again: the consumer sees a delay, never a gap.
    async fn deliver(&mut self) -> Result<Read, Gone> {
        let query = ChangeQuery {
            after: self.cursor.clone(),
            conversation: self.request.conversation.clone(),
            limit: PAGE,
        };
        // From the window when it covers the cursor; a watcher further behind reads the store.
        let read = match self.window.read(&query) {
            Some(page) => Ok(page),
            None => {
                self.metrics.changes.behind_reads.inc();
                self.store.read_changes(&self.tenant, &query).await
            }
        };
        let page = match read {
            Ok(page) => page,
            Err(error) => return self.wait_after(Stalled::Store(error)).await,
        };
        let read = match page.changes.len() {
            0 => Read::Nothing,
            n if n == PAGE => Read::Full,
            _ => Read::Some,
        };
        let mut batch = Batch::default();
        for change in page.changes {
            let carried = match self.messages_of(&change).await {
                Ok(carried) => carried,
                Err(error) => {
                    // What was read so far goes out; the rest is read again.
                    self.send(batch).await?;
                    return self.wait_after(error).await;
                }
            };
            if batch.bytes + carried.bytes > self.max_message_bytes {
                self.send(std::mem::take(&mut batch)).await?;
            }
            batch.push(change, carried);
        }
        self.send(batch).await?;
        // Never before the cursor read after, in the store's order (see `change_window`).
        if let Some(next) = page.next {
            self.cursor = next;
        }
        Ok(read)
    }

    /// Waits before reading again (or until the consumer leaves): [`RETRY`] after a store
    /// failure, which is logged; [`MEMORY_RETRY`] when the replica's memory for loaded messages
    /// is in use by other calls, which lasts as long as a read does, and is no failure.
    async fn wait_after(&self, stalled: Stalled) -> Result<Read, Gone> {
        let (wait, then) = match &stalled {
            Stalled::Store(error) => {
                let error = crate::runtime::telemetry::ErrorChain(error).to_string();
                tracing::warn!(error, "change feed read failed; reading again");
                (RETRY, Read::Nothing)
            }
            Stalled::Memory(refusal) => {
                tracing::debug!(%refusal, "change feed waits for memory to read messages");
                // Read again at once after the wait, not at the next poll.
                (MEMORY_RETRY, Read::Full)
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => Ok(then),
            () = self.sender.closed() => Err(Gone),
        }
    }

    /// The messages an APPENDED change carries, when asked for: as the log holds them now,
    /// those that fit one response.
    async fn messages_of(&self, change: &crate::domain::changes::Change) -> Result<Carried, Stalled> {
        if !self.request.include_messages || change.kind != ChangeKind::Appended {
            return Ok(Carried::default());
        }
        let Ok(conversation) = ConversationId::parse(change.conversation().to_owned()) else {
            return Ok(Carried::default());
        };
        let count = (change.last_sequence.get() + 1).saturating_sub(change.first_sequence.get()) as usize;
        let after = change.first_sequence.minus(1);
        let limit = self.max_message_bytes;
        let mut memory = self.budget.reserve().of_tenant(self.tenant.as_str());
        // While the read runs its rows are in memory twice: as received, and decoded.
        memory.grow(2 * limit).map_err(Stalled::Memory)?;
        let page = match self
            .store
            .list_messages(&self.tenant, &conversation, after, count, limit)
            .await
        {
            Ok(page) => page,
            // Deleted since: the DELETED change follows.
            Err(StoreError::NotFound) => return Ok(Carried::default()),
            Err(error) => return Err(Stalled::Store(error)),
        };
        let mut carried = Carried::default();
        for message in page.messages {
            if message.sequence > change.last_sequence {
                break;
            }
            let size = message.message.loaded_bytes();
            if carried.bytes + size > limit {
                carried.truncated = true;
                break;
            }
            carried.bytes += size;
            carried.messages.push(message);
        }
        // A page the store cut at `limit` before the append's end.
        let reached = carried.messages.last().map_or(after, |m| m.sequence);
        carried.truncated |= page.has_more && reached < change.last_sequence;
        // The messages, and their encoding.
        memory.settle_at(2 * carried.bytes).map_err(Stalled::Memory)?;
        carried.memory = Some(memory);
        Ok(carried)
    }

    async fn send(&mut self, batch: Batch) -> Result<(), Gone> {
        let Batch { changes, memory, .. } = batch;
        let Some(last) = changes.last() else {
            return Ok(());
        };
        let cursor = last.change.cursor.clone();
        let now = SystemTime::now();
        for delivered in &changes {
            let lag = now.duration_since(delivered.change.time).unwrap_or_default();
            self.metrics.changes.lag.observe(lag.as_secs_f64());
        }
        let count = changes.len() as u64;
        // A consumer that reads nothing holds this send; shutdown does not wait for it.
        tokio::select! {
            sent = self.sender.send(Ok(WatchEvent::Changes(changes, memory))) => sent.map_err(|_| Gone)?,
            _ = self.closing.wait_for(|closing| *closing) => return Err(Gone),
        }
        self.metrics.changes.delivered.inc_by(count);
        self.cursor = cursor;
        Ok(())
    }
}

/// Why a watcher waits before reading again.
enum Stalled {
    Store(StoreError),
    /// The replica's memory for loaded messages is in use by other calls.
    Memory(Refusal),
}

/// The messages one change carries.
#[derive(Default)]
struct Carried {
    messages: Vec<crate::domain::StoredMessage>,
    bytes: usize,
    /// Some of the append's messages did not fit.
    truncated: bool,
    memory: Option<Reservation>,
}

/// The changes of one response.
#[derive(Default)]
struct Batch {
    changes: Vec<DeliveredChange>,
    /// Bytes of the messages they carry.
    bytes: usize,
    memory: Vec<Reservation>,
}

impl Batch {
    fn push(&mut self, change: crate::domain::changes::Change, carried: Carried) {
        self.bytes += carried.bytes;
        self.memory.extend(carried.memory);
        self.changes.push(DeliveredChange {
            change,
            messages: carried.messages,
            messages_truncated: carried.truncated,
        });
    }
}
