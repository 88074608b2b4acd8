//! Group commit (issue 62): concurrent appends to different conversations share one
//! transaction, so `BEGIN`, the statement limit, the conversations' update and `COMMIT` are
//! paid once per batch, not once per append. A batch is two round trips, as one append is:
//! the rows of its conversations locked with `SKIP LOCKED`, then the update, every member's
//! rows and `COMMIT`, pipelined. Each promise of the single path holds (docs/design.md,
//! "Group commit"):
//! - each member is atomic and gapless: its sequences are allocated under its row's lock, in
//!   the one transaction that writes its rows;
//! - a conversation locked elsewhere never stalls the batch: `SKIP LOCKED` leaves it out, and
//!   its member takes the single path, where it waits on its own;
//! - nothing a caller saw fail commits later: a member whose call ended before the write is
//!   claimed leaves the batch, and the batch's statements run under its members' earliest
//!   deadline;
//! - on Citus the batch would span shards, so it is off there (every append takes the single
//!   path, one shard each);
//! - only appends that read nothing of the stored log join (no time to check, no tool call or
//!   result); a keyed member's record is read after the lock and written with its rows (one
//!   whose key has a record takes the single path, which replays or refuses), and a guard is
//!   checked against the locked row (one that does not hold takes the single path too).
//!
//! A lone append never waits for company: it joins only while others are in flight on this
//! replica, as many as half its connections ([`min_company`]).

use std::{
    collections::HashSet,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use crate::{
    domain::{AppendOutcome, CountedBatch, TenantId, append::reads_the_log},
    runtime::deadline::Deadline,
    store::StoreError,
};

mod batch;
mod member;
mod records;

use batch::commit;
use member::{Member, Verdict};

/// Appends already in flight on this replica before one joins a batch, as a share of the pool:
/// half. Below, the single path is faster: each append has its own connection and PostgreSQL
/// runs them side by side, where a batch would make them wait for one another (measured with a
/// pool of 32: at 8 clients 4,006-5,057 appends/s in batches against 5,700-6,200 alone; at 32,
/// 7,418 in batches against 5,900-6,200 alone). Past it, appends would soon wait for
/// connections, which a batch spares them.
fn min_company(pool_size: usize) -> usize {
    (pool_size / 2).max(2)
}
/// The most appends one batch carries.
const MAX_MEMBERS: usize = 64;
/// Batches sent at once. One: the appends that arrive while it is sent form the next, which is
/// what makes batches (measured: at 32 clients 7,298 appends/s with one, 6,594 with two and
/// 4,820 with four, whose batches were mostly of one).
const CONCURRENT_BATCHES: usize = 1;
/// Appends waiting for the next batch; beyond them an append takes the single path.
const QUEUE: usize = 256;
/// A batch joins appends of at most this many bytes as loaded (text, attachments, native
/// data): a large one gains nothing from company and would be copied to join.
const MAX_MEMBER_BYTES: usize = 64 * 1024;
/// A member with less time left than this takes the single path: the batch's statements run
/// under its earliest deadline, which must leave the others time.
const MIN_WORK_LEFT: Duration = Duration::from_millis(50);

/// A replica's group commit: the queue of appends waiting for a batch, and the task that
/// sends the batches (started on first use).
#[derive(Debug)]
pub(in crate::store::postgres) struct GroupCommit {
    pool: Pool,
    /// Whether the database is a Citus coordinator: a lone append takes two round trips there.
    citus: Arc<crate::store::postgres::citus::Citus>,
    queue: OnceLock<mpsc::Sender<Member>>,
    /// Appends on their way through this store.
    in_flight: AtomicUsize,
    /// Off by configuration, or found to run on Citus.
    off: Arc<AtomicBool>,
    /// Appends in flight before one joins a batch ([`min_company`]).
    company: usize,
    /// Batches written, and the appends they wrote.
    counts: Arc<Counts>,
}

/// What a replica's batches wrote since it started.
#[derive(Debug, Default)]
pub(super) struct Counts {
    batches: std::sync::atomic::AtomicU64,
    appends: std::sync::atomic::AtomicU64,
}

impl Counts {
    /// One batch that wrote `appends` appends.
    fn wrote(&self, appends: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.appends.fetch_add(appends as u64, Ordering::Relaxed);
    }
}

/// Counts an append in flight while it lives.
struct Flight<'a>(&'a AtomicUsize);

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl GroupCommit {
    /// Group commit over `pool`, or none when `enabled` is false.
    pub(in crate::store::postgres) fn new(
        pool: Pool,
        enabled: bool,
        citus: Arc<crate::store::postgres::citus::Citus>,
    ) -> Self {
        Self {
            citus,
            company: min_company(pool.status().max_size),
            pool,
            queue: OnceLock::new(),
            in_flight: AtomicUsize::new(0),
            off: Arc::new(AtomicBool::new(!enabled)),
            counts: Arc::default(),
        }
    }

    /// The batches written since the store opened, and the appends they wrote.
    pub(in crate::store::postgres) fn counts(&self) -> (u64, u64) {
        let counts = &self.counts;
        (
            counts.batches.load(Ordering::Relaxed),
            counts.appends.load(Ordering::Relaxed),
        )
    }

    /// Appends `batch`, in a batch when others are appending and it may join, else alone.
    pub(in crate::store::postgres) async fn append(
        &self,
        tenant: &TenantId,
        batch: &CountedBatch,
        deadline: Option<&Deadline>,
    ) -> Result<AppendOutcome, StoreError> {
        let others = self.in_flight.fetch_add(1, Ordering::Relaxed);
        let _flight = Flight(&self.in_flight);
        if others >= self.company && self.may_join(batch, deadline) {
            let (reply, verdict) = oneshot::channel();
            let member = Member {
                tenant: tenant.clone(),
                batch: Arc::new(batch.clone()),
                deadline: deadline.cloned(),
                reply,
            };
            if self.queue().try_send(member).is_ok() {
                match verdict.await {
                    Ok(Verdict::Done(outcome)) => return outcome,
                    Ok(Verdict::Single) => {}
                    // The batch ended without a word: whether it wrote is unknown.
                    Err(_) => {
                        return Err(StoreError::Unavailable {
                            source: "a batch of appends ended without an answer".into(),
                        });
                    }
                }
            }
        }
        super::append_messages(&self.pool, &self.citus, tenant, batch, deadline).await
    }

    fn may_join(&self, batch: &CountedBatch, deadline: Option<&Deadline>) -> bool {
        !self.off.load(Ordering::Relaxed)
            && !reads_the_log(batch)
            && batch.messages.len() <= super::insert::ROWS_PER_INSERT
            && batch
                .messages
                .iter()
                .map(|m| m.message.loaded_bytes())
                .sum::<usize>()
                <= MAX_MEMBER_BYTES
            && deadline.is_none_or(|d| d.work_left() >= MIN_WORK_LEFT)
    }

    fn queue(&self) -> &mpsc::Sender<Member> {
        self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(run(
                self.pool.clone(),
                receiver,
                self.off.clone(),
                self.counts.clone(),
            ));
            sender
        })
    }
}

/// Sends batches, at most [`CONCURRENT_BATCHES`] at a time: the appends that arrive while
/// they are sent form the next.
async fn run(pool: Pool, mut queue: mpsc::Receiver<Member>, off: Arc<AtomicBool>, counts: Arc<Counts>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_BATCHES));
    let mut checked = false;
    while let Some(first) = queue.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            first.answer(Verdict::Single);
            continue;
        };
        let mut members = vec![first];
        while members.len() < MAX_MEMBERS {
            let Ok(member) = queue.try_recv() else { break };
            members.push(member);
        }
        if !checked {
            // Asked once the database answers: until then every batch takes the single path.
            match on_citus(&pool).await {
                Some(true) => {
                    tracing::info!("group commit off: Citus spreads conversations over shards");
                    off.store(true, Ordering::Relaxed);
                    checked = true;
                }
                Some(false) => checked = true,
                None => {}
            }
        }
        let members = distinct(members);
        if members.is_empty() || !checked || off.load(Ordering::Relaxed) {
            members.into_iter().for_each(|m| m.answer(Verdict::Single));
            continue;
        }
        let (pool, counts) = (pool.clone(), counts.clone());
        tokio::spawn(async move {
            if let Some(written) = commit(&pool, members).await {
                counts.wrote(written);
            }
            drop(slot);
        });
    }
}

/// Whether the database is a Citus coordinator (`None`: it cannot say now).
async fn on_citus(pool: &Pool) -> Option<bool> {
    let client = pool.get().await.ok()?;
    let found = client
        .query_opt("SELECT 1 FROM pg_extension WHERE extname = 'citus'", &[])
        .await
        .ok()?;
    Some(found.is_some())
}

/// The members still waiting, one per conversation: a second append to a conversation (and one
/// whose caller has gone) takes the single path.
fn distinct(members: Vec<Member>) -> Vec<Member> {
    let mut seen = HashSet::new();
    let mut kept = Vec::with_capacity(members.len());
    for member in members {
        if member.reply.is_closed() {
            continue;
        }
        let key = (member.key().0.to_owned(), member.key().1.to_owned());
        if seen.insert(key) {
            kept.push(member);
        } else {
            member.answer(Verdict::Single);
        }
    }
    kept
}
