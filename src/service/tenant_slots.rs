//! At most a few of one kind of heavy call at once per tenant on this replica, so that one
//! tenant's burst cannot take what every tenant's calls share (the database pool, the disk).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::sync::Notify;

use crate::domain::TenantId;

/// The calls each tenant runs now, each at most `per_tenant`.
#[derive(Debug)]
pub(crate) struct TenantSlots {
    per_tenant: usize,
    held: Mutex<HashMap<TenantId, usize>>,
    /// Wakes the calls waiting in [`TenantSlots::take`] when a slot is given back.
    freed: Notify,
}

/// One call's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<TenantSlots>,
    tenant: TenantId,
}

impl TenantSlots {
    /// `per_tenant` calls at once per tenant.
    pub(crate) fn new(per_tenant: usize) -> Arc<Self> {
        Arc::new(Self {
            per_tenant,
            held: Mutex::default(),
            freed: Notify::new(),
        })
    }

    /// The most one tenant runs at once.
    pub(crate) fn per_tenant(&self) -> usize {
        self.per_tenant
    }

    /// A slot for `tenant`, or `None` when it runs `per_tenant` such calls already.
    pub(crate) fn try_take(self: &Arc<Self>, tenant: &TenantId) -> Option<Slot> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let running = held.entry(tenant.clone()).or_default();
        if *running >= self.per_tenant {
            return None;
        }
        *running += 1;
        Some(Slot {
            slots: self.clone(),
            tenant: tenant.clone(),
        })
    }
}

impl TenantSlots {
    /// A slot for `tenant`, waiting at most `wait` for one of its calls to end: its calls queue
    /// behind each other instead of running side by side; `None` past the wait.
    pub(crate) async fn take(self: &Arc<Self>, tenant: &TenantId, wait: Duration) -> Option<Slot> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a slot given back in between wakes it.
            freed.as_mut().enable();
            if let Some(slot) = self.try_take(tenant) {
                return Some(slot);
            }
            tokio::time::timeout_at(deadline, freed).await.ok()?;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = held.get_mut(&self.tenant) {
            *running = running.saturating_sub(1);
            if *running == 0 {
                held.remove(&self.tenant);
            }
        }
        drop(held);
        self.slots.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_holds_at_most_its_slots_and_gets_them_back() {
        let slots = TenantSlots::new(2);
        let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
        let first = slots.try_take(&a).unwrap();
        let _second = slots.try_take(&a).unwrap();
        assert!(slots.try_take(&a).is_none());
        assert!(slots.try_take(&b).is_some(), "another tenant is not affected");
        drop(first);
        assert!(slots.try_take(&a).is_some());
    }

    #[tokio::test]
    async fn a_waiting_call_gets_the_slot_its_tenants_call_gives_back() {
        let slots = TenantSlots::new(1);
        let acme = TenantId::parse("acme").unwrap();
        let first = slots.try_take(&acme).unwrap();
        let waiting = {
            let (slots, acme) = (slots.clone(), acme.clone());
            tokio::spawn(async move { slots.take(&acme, Duration::from_secs(5)).await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(first);
        assert!(waiting.await.unwrap(), "woken when the slot came back");
        let _held = slots.try_take(&acme).unwrap();
        assert!(
            slots.take(&acme, Duration::from_millis(20)).await.is_none(),
            "past the wait"
        );
    }
}
