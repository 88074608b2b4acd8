//! Working memory on PostgreSQL: one versioned JSON document per conversation.

use deadpool_postgres::Pool;
use tokio_postgres::types::{Json, ToSql};

use super::{
    messages::messages_after,
    rows::{column, memory_from_row},
};
use crate::{
    domain::{ConversationId, Sequence, TenantId, changes::ChangeKind, working_memory::WorkingMemory},
    runtime::deadline::Deadline,
    store::{MemoryBase, MemoryState, StoreError},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn memory_state(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    messages_up_to: Option<usize>,
) -> Result<MemoryState, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "SELECT m.document AS memory_document, m.through_sequence AS memory_through_sequence,
                    m.version AS memory_version, m.updated_at, c.last_sequence, c.redactions, c.rewinds
             FROM conversations c
             LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
             WHERE c.tenant_id = $1 AND c.conversation_id = $2",
            &[&t, &c],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let mut memory = memory_from_row(&row)?.unwrap_or_default();
    memory.updated_at = column(&row, "updated_at")?;
    let (messages, complete) = match messages_up_to {
        Some(max_bytes) => messages_after(&client, t, c, memory.through_sequence, max_bytes).await?,
        None => (Vec::new(), true),
    };
    Ok(MemoryState {
        memory,
        messages,
        complete,
        last_sequence: Sequence::from_stored(column(&row, "last_sequence")?),
        redactions: column::<i64>(&row, "redactions")?.max(0) as u64,
        rewinds: column::<i64>(&row, "rewinds")?.max(0) as u64,
    })
}

/// A first memory, stored if the conversation's removals are still those the caller read.
const FIRST_MEMORY: &str =
    "INSERT INTO working_memory (tenant_id, conversation_id, document, through_sequence, version)
     SELECT tenant_id, conversation_id, $3, $4, 1 FROM conversations
     WHERE tenant_id = $1 AND conversation_id = $2 AND redactions = $5 AND rewinds = $6
     FOR SHARE
     ON CONFLICT (tenant_id, conversation_id) DO NOTHING
     RETURNING version, updated_at";

/// A later memory, stored if its version is still the one the caller read.
const NEXT_MEMORY: &str = "UPDATE working_memory
     SET document = $3, through_sequence = $4, version = version + 1, updated_at = now()
     WHERE tenant_id = $1 AND conversation_id = $2 AND version = $5
     RETURNING version, updated_at";

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, expected_version = base.version))]
pub(super) async fn store_memory(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    base: MemoryBase,
    memory: &WorkingMemory,
    deadline: Option<&Deadline>,
) -> Result<WorkingMemory, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let (document, through) = (Json(memory), memory.through_sequence.as_i64());
    let (redactions, rewinds, version) = (base.redactions as i64, base.rewinds as i64, base.version as i64);
    // The compare-and-set goes out with `BEGIN`, as it did before the change feed: the least
    // time between the caller's read and the check, so that a storm of redactions elsewhere
    // does not starve refreshes. It does not take the conversation's row lock (a redaction takes
    // that row first and the memory's after it): its change is ordered by its own transaction
    // only (docs/design.md, "Change feed").
    let (tx, row) = if base.version == 0 {
        // Selected from the conversation's row: on Citus, a statement on its shard. A first
        // memory is checked against the redaction count (a later one against its version, which
        // every redaction bumps), on the row locked: a redaction running now (it holds the row)
        // is waited for and seen, and one that starts later finds this memory and forgets what
        // it must.
        let params: [&(dyn ToSql + Sync); 6] = [&t, &c, &document, &through, &redactions, &rewinds];
        super::writes::Pipelined::begin(pool, deadline, FIRST_MEMORY, &params).await?
    } else {
        let params: [&(dyn ToSql + Sync); 5] = [&t, &c, &document, &through, &version];
        super::writes::Pipelined::begin(pool, deadline, NEXT_MEMORY, &params).await?
    };
    if let Some(row) = row {
        let stored = WorkingMemory {
            version: column::<i64>(&row, "version")?.max(0) as u64,
            updated_at: column(&row, "updated_at")?,
            ..memory.clone()
        };
        let kind = ChangeKind::MemoryUpdated.code();
        let params: [&(dyn ToSql + Sync); 3] = [&t, &c, &kind];
        tx.commit_after(deadline, super::changes::INSERT_AT_TRANSACTION, &params)
            .await?;
        return Ok(stored);
    }
    let client = tx.client()?;
    let current = client
        .query_opt(
            "SELECT m.version FROM conversations c
             LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
             WHERE c.tenant_id = $1 AND c.conversation_id = $2",
            &[&t, &c],
        )
        .await?;
    tx.roll_back().await;
    let current = current.ok_or(StoreError::NotFound)?;
    let current: Option<i64> = column(&current, "version")?;
    Err(StoreError::MemoryVersionMismatch {
        current: current.unwrap_or(0).max(0) as u64,
    })
}
