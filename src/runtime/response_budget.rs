//! The memory a replica gives to the data its calls load and answer with: message pages read
//! for BuildContext, ListMessages and the summary and working-memory transcripts, and the
//! responses built from them until the client has read them. Each call holds a [`Reservation`]
//! that grows with every message it loads, up to a per-call limit, out of one process-wide
//! amount, so that N large calls at once fit the memory the replica is given instead of
//! getting it OOM-killed. Growing never waits (no call can hold part of the memory while
//! waiting for more): a call that would pass either limit is refused with a clear reason.
//!
//! A reservation made for a tenant also counts against that tenant's share of the amount, so
//! one tenant's calls (large pages its client never reads, request bodies it never finishes)
//! cannot hold all of it: the other tenants' calls still find room.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Reservations are counted in KiB (a semaphore holds at most `u32::MAX >> 3` permits).
const UNIT: usize = 1024;

/// The most one store read loads (plus the one message that crosses it): reserved before the
/// read, so that what is loaded was accounted for before it arrived.
pub const READ_BYTES: usize = 4 << 20;

/// A read in progress: the reservation it started from and its byte limit.
#[derive(Debug, Clone, Copy)]
#[must_use = "end the read with Reservation::end_read"]
pub struct Read {
    before: usize,
    /// The most the read may load (the store's `max_bytes`).
    pub limit: usize,
}

/// The process-wide amount, the per-call limit and the tenants' shares.
#[derive(Debug, Clone)]
pub struct ResponseBudget {
    units: Arc<Semaphore>,
    total_bytes: usize,
    per_call_bytes: usize,
    shares: Arc<Shares>,
}

/// What each tenant's reservations hold, in units, and the most one tenant may.
#[derive(Debug)]
struct Shares {
    limit: usize,
    held: Mutex<HashMap<Arc<str>, usize>>,
}

impl Shares {
    /// Counts `units` more for `tenant`, or refuses.
    fn take(&self, tenant: &Arc<str>, units: usize) -> Result<(), Refusal> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let holds = held.get(tenant).copied().unwrap_or(0);
        if holds + units > self.limit {
            return Err(Refusal::TenantBusy {
                share: self.limit * UNIT,
            });
        }
        held.insert(tenant.clone(), holds + units);
        Ok(())
    }

    /// Returns `units` of `tenant`'s.
    fn give_back(&self, tenant: &str, units: usize) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(holds) = held.get_mut(tenant) {
            *holds = holds.saturating_sub(units);
            if *holds == 0 {
                held.remove(tenant);
            }
        }
    }
}

/// Why a reservation could not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The call itself needs more than the per-call limit.
    #[error("the call needs more than {limit} bytes of messages and response, the per-call limit")]
    TooLarge {
        /// The per-call limit.
        limit: usize,
    },
    /// Other calls hold the replica's memory for now.
    #[error("the replica's memory for large calls ({total} bytes) is in use by other calls")]
    Busy {
        /// The process-wide amount.
        total: usize,
    },
    /// The tenant's other calls hold its share of the replica's memory for now.
    #[error("the tenant's calls hold its share of the replica's memory ({share} bytes)")]
    TenantBusy {
        /// One tenant's share.
        share: usize,
    },
}

impl ResponseBudget {
    /// `total_bytes` for all calls at once, at most `per_call_bytes` for one, and all of it for
    /// one tenant's (see [`Self::with_tenant_share`]).
    pub fn new(total_bytes: usize, per_call_bytes: usize) -> Self {
        let units = (total_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            units: Arc::new(Semaphore::new(units)),
            total_bytes,
            per_call_bytes: per_call_bytes.min(total_bytes),
            shares: Arc::new(Shares {
                limit: units,
                held: Mutex::default(),
            }),
        }
    }

    /// The same amount, of which one tenant's reservations may hold at most `percent`.
    pub fn with_tenant_share(mut self, percent: usize) -> Self {
        let units = self.units.available_permits();
        let limit = (units * percent.clamp(1, 100)).div_ceil(100);
        self.shares = Arc::new(Shares {
            limit,
            held: Mutex::default(),
        });
        self
    }

    /// An empty reservation for one call, up to the per-call limit.
    pub fn reserve(&self) -> Reservation {
        self.reserve_up_to(self.per_call_bytes)
    }

    /// An empty reservation that may grow to `limit` bytes (at most the whole amount): a
    /// request body's, whose limit is the request size limit rather than the per-call one.
    pub fn reserve_up_to(&self, limit: usize) -> Reservation {
        Reservation {
            memory: self.clone(),
            held: None,
            bytes: 0,
            limit: limit.min(self.total_bytes),
            tenant: None,
        }
    }

    /// Bytes not reserved by any call right now.
    pub fn available_bytes(&self) -> usize {
        self.units.available_permits() * UNIT
    }
}

impl Default for ResponseBudget {
    /// 256 MiB in all, 32 MiB per call: the defaults.
    fn default() -> Self {
        Self::new(256 << 20, 32 << 20)
    }
}

/// One call's share; released when dropped (for a response, once the client has read it or
/// the connection is gone).
#[derive(Debug)]
pub struct Reservation {
    memory: ResponseBudget,
    held: Option<OwnedSemaphorePermit>,
    bytes: usize,
    /// The most it may grow to.
    limit: usize,
    /// The tenant whose share it counts against, if any.
    tenant: Option<Arc<str>>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let (Some(tenant), Some(held)) = (&self.tenant, &self.held) {
            self.memory.shares.give_back(tenant, held.num_permits());
        }
    }
}

impl Reservation {
    /// Counts the reservation against `tenant`'s share from now on (call it before growing).
    pub fn of_tenant(mut self, tenant: &str) -> Self {
        debug_assert!(
            self.held.is_none(),
            "a reservation is given its tenant before it grows"
        );
        if self.held.is_none() {
            self.tenant = Some(Arc::from(tenant));
        }
        self
    }

    /// Counts `bytes` more: grows the reservation, or refuses without waiting.
    pub fn grow(&mut self, bytes: usize) -> Result<(), Refusal> {
        let wanted = self.bytes.saturating_add(bytes);
        if wanted > self.limit {
            return Err(Refusal::TooLarge { limit: self.limit });
        }
        let (have, need) = (units(self.bytes), units(wanted));
        if need > have {
            if let Some(tenant) = &self.tenant {
                self.memory.shares.take(tenant, need - have)?;
            }
            let acquired = self
                .memory
                .units
                .clone()
                .try_acquire_many_owned((need - have) as u32);
            let Ok(more) = acquired else {
                if let Some(tenant) = &self.tenant {
                    self.memory.shares.give_back(tenant, need - have);
                }
                return Err(Refusal::Busy {
                    total: self.memory.total_bytes,
                });
            };
            match &mut self.held {
                Some(held) => held.merge(more),
                None => self.held = Some(more),
            }
        }
        self.bytes = wanted;
        Ok(())
    }

    /// Grows or shrinks the reservation to exactly `bytes`.
    pub fn settle_at(&mut self, bytes: usize) -> Result<(), Refusal> {
        match bytes.checked_sub(self.bytes) {
            Some(more) => self.grow(more),
            None => {
                self.shrink_to(bytes);
                Ok(())
            }
        }
    }

    /// Keeps only `bytes` (what the response still needs), returning the rest.
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes >= self.bytes {
            return;
        }
        let keep = units(bytes);
        if let Some(held) = &mut self.held {
            let surplus = held.num_permits().saturating_sub(keep);
            drop(held.split(surplus));
            if let Some(tenant) = &self.tenant {
                self.memory.shares.give_back(tenant, surplus);
            }
        }
        self.bytes = bytes;
    }

    /// Bytes counted so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Reserves room for one store read of at most [`READ_BYTES`] (less when the call is near
    /// its limit), twice over while it runs; its `limit` is the store's `max_bytes`.
    pub fn begin_read(&mut self) -> Result<Read, Refusal> {
        // A quarter of what is left: the read is reserved twice over while it runs, and what it
        // loads may need as much again for the response built from it.
        let left = self.limit.saturating_sub(self.bytes) / 4;
        if left == 0 {
            return Err(Refusal::TooLarge { limit: self.limit });
        }
        let before = self.bytes;
        let limit = left.min(READ_BYTES);
        // While the read runs, its rows are in memory twice: as received, and decoded.
        self.grow(2 * limit)?;
        Ok(Read { before, limit })
    }

    /// Settles `read` at the `loaded` bytes it brought (the message crossing its limit may
    /// bring it past it).
    pub fn end_read(&mut self, read: Read, loaded: usize) -> Result<(), Refusal> {
        self.settle_at(read.before + loaded)
    }
}

/// KiB, rounded up.
fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_share_the_total_and_none_passes_its_own_limit() {
        let memory = ResponseBudget::new(10 * UNIT, 6 * UNIT);
        let mut a = memory.reserve();
        a.grow(4 * UNIT).unwrap();
        assert_eq!(a.grow(3 * UNIT), Err(Refusal::TooLarge { limit: 6 * UNIT }));
        let mut b = memory.reserve();
        b.grow(5 * UNIT).unwrap();
        let mut c = memory.reserve();
        assert_eq!(c.grow(2 * UNIT), Err(Refusal::Busy { total: 10 * UNIT }));
        assert_eq!(memory.available_bytes(), UNIT);
        a.shrink_to(UNIT + 1);
        assert_eq!(memory.available_bytes(), 3 * UNIT);
        c.grow(2 * UNIT).unwrap();
        drop((a, b, c));
        assert_eq!(memory.available_bytes(), 10 * UNIT);
    }

    #[test]
    fn reads_reserve_before_and_settle_after() {
        let memory = ResponseBudget::new(READ_BYTES * 16, READ_BYTES * 6);
        let mut call = memory.reserve();
        let read = call.begin_read().unwrap();
        assert_eq!(read.limit, READ_BYTES);
        // Twice the limit while the read runs.
        assert_eq!(memory.available_bytes(), READ_BYTES * 14);
        call.end_read(read, 10 * UNIT).unwrap();
        assert_eq!(call.bytes(), 10 * UNIT);
        // The second read may load only what is left of the call's limit, plus one message.
        let read = call.begin_read().unwrap();
        assert_eq!(read.limit, READ_BYTES);
        call.end_read(read, 6 * READ_BYTES).unwrap_err();
        let read = call.begin_read();
        assert!(matches!(read, Err(Refusal::TooLarge { .. })) || read.unwrap().limit < READ_BYTES);
    }

    #[test]
    fn one_tenant_holds_at_most_its_share() {
        let memory = ResponseBudget::new(10 * UNIT, 10 * UNIT).with_tenant_share(50);
        let mut a = memory.reserve().of_tenant("a");
        a.grow(4 * UNIT).unwrap();
        let mut a2 = memory.reserve().of_tenant("a");
        assert_eq!(a2.grow(2 * UNIT), Err(Refusal::TenantBusy { share: 5 * UNIT }));
        a2.grow(UNIT).unwrap();
        // Another tenant still finds the rest.
        let mut b = memory.reserve().of_tenant("b");
        b.grow(5 * UNIT).unwrap();
        assert_eq!(memory.available_bytes(), 0);
        a.shrink_to(UNIT);
        a2.grow(2 * UNIT).unwrap();
        drop((a, a2, b));
        assert_eq!(memory.available_bytes(), 10 * UNIT);
        let mut again = memory.reserve().of_tenant("a");
        again.grow(5 * UNIT).unwrap();
    }

    #[test]
    fn small_growths_round_up_once() {
        let memory = ResponseBudget::new(4 * UNIT, 4 * UNIT);
        let mut a = memory.reserve();
        for _ in 0..UNIT {
            a.grow(1).unwrap();
        }
        assert_eq!(memory.available_bytes(), 3 * UNIT);
        a.grow(1).unwrap();
        assert_eq!(memory.available_bytes(), 2 * UNIT);
    }
}
