//! At most a few of one kind of heavy call at once per tenant on this replica, so that one
//! tenant's burst cannot take what every tenant's calls share (the database pool, the disk).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use crate::domain::TenantId;

/// The calls each tenant runs now, each at most `per_tenant`.
#[derive(Debug)]
pub(crate) struct TenantSlots {
    per_tenant: usize,
    held: Mutex<HashMap<TenantId, usize>>,
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

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = held.get_mut(&self.tenant) {
            *running = running.saturating_sub(1);
            if *running == 0 {
                held.remove(&self.tenant);
            }
        }
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
}
