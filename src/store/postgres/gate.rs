//! How many pooled connections one conversation's writes may hold at once. Writes to one
//! conversation queue on its row lock in the database; without this, a conversation whose row is
//! locked (a slow writer, a `SELECT ... FOR UPDATE` held elsewhere) gathers every pooled
//! connection in that queue and unrelated conversations starve. The writers past the limit wait
//! here, holding no connection, until a slot frees or their deadline passes.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::StoreError;

/// Connections one conversation's writes may hold: one writing, one ready behind it.
pub(super) const CONNECTIONS_PER_CONVERSATION: usize = 2;

type Key = (String, String);

/// The per-conversation slots, kept only while some write holds or waits for one, so the map
/// never outgrows the calls in flight.
#[derive(Debug, Default)]
pub(super) struct ConversationGate {
    slots: Arc<Mutex<HashMap<Key, Arc<Semaphore>>>>,
}

/// A held slot; dropping it frees the slot (and the entry, if nobody else uses it).
#[derive(Debug)]
pub(super) struct Pass {
    _permit: OwnedSemaphorePermit,
    _ticket: Ticket,
}

/// Anyone holding or awaiting a slot of `key`; the last one out removes the entry.
#[derive(Debug)]
struct Ticket {
    slots: Arc<Mutex<HashMap<Key, Arc<Semaphore>>>>,
    key: Key,
    semaphore: Arc<Semaphore>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's reference and this one: nobody else holds or waits.
        if Arc::strong_count(&self.semaphore) == 2 {
            slots.remove(&self.key);
        }
    }
}

impl ConversationGate {
    /// Waits (at most `patience`) for a write slot of the conversation.
    pub(super) async fn enter(
        &self,
        tenant: &str,
        conversation: &str,
        patience: Option<Duration>,
    ) -> Result<Pass, StoreError> {
        let key = (tenant.to_owned(), conversation.to_owned());
        let semaphore = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots
                .entry(key.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(CONNECTIONS_PER_CONVERSATION)))
                .clone()
        };
        let ticket = Ticket {
            slots: self.slots.clone(),
            key,
            semaphore: semaphore.clone(),
        };
        let acquire = semaphore.acquire_owned();
        let permit = match patience {
            Some(patience) => tokio::time::timeout(patience, acquire)
                .await
                .map_err(|_| StoreError::DeadlineExceeded)?,
            None => acquire.await,
        };
        // The semaphore is never closed.
        let permit = permit.map_err(|_| StoreError::internal("conversation gate closed"))?;
        Ok(Pass {
            _permit: permit,
            _ticket: ticket,
        })
    }

    /// Conversations with a write holding or awaiting a slot.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_busy_conversation_waits_alone_and_entries_do_not_outlive_their_writes() {
        let gate = ConversationGate::default();
        let held: Vec<Pass> = hold(&gate, "t", "hot", CONNECTIONS_PER_CONVERSATION).await;
        let short = Some(Duration::from_millis(20));
        assert!(matches!(
            gate.enter("t", "hot", short).await,
            Err(StoreError::DeadlineExceeded)
        ));
        // Another conversation, and the same id under another tenant, are not affected.
        let other = gate.enter("t", "cold", short).await.unwrap();
        let tenant = gate.enter("u", "hot", short).await.unwrap();
        assert_eq!(gate.tracked(), 3);
        drop((other, tenant));
        assert_eq!(gate.tracked(), 1);
        drop(held);
        assert_eq!(gate.tracked(), 0);
        // A waiter that gives up leaves nothing behind either.
        let _ = gate.enter("t", "hot", Some(Duration::ZERO)).await;
        assert_eq!(gate.tracked(), 0);
    }

    async fn hold(gate: &ConversationGate, t: &str, c: &str, n: usize) -> Vec<Pass> {
        let mut passes = Vec::new();
        for _ in 0..n {
            passes.push(gate.enter(t, c, None).await.unwrap());
        }
        passes
    }
}
