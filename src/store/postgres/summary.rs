//! Rolling summaries on PostgreSQL: the state Summarize reads and the compare-and-set that
//! stores a new version.

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::{messages::messages_after, rows::column};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId,
        changes::{ChangeKind, NewChange},
        conversation::REDACTED_CONTENT,
        summary::Summary,
    },
    runtime::deadline::Deadline,
    store::{NewSummary, StoreError, SummaryState},
};

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn summary_state(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    max_bytes: usize,
) -> Result<SummaryState, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    let state = client
        .query_opt(
            "SELECT c.last_sequence, s.text, s.through_sequence, s.summarizer, s.version, s.created_at,
                    c.redactions, c.rewinds
             FROM conversations c
             LEFT JOIN summaries s ON s.tenant_id = c.tenant_id
                  AND s.conversation_id = c.conversation_id AND s.version = c.summary_version
             WHERE c.tenant_id = $1 AND c.conversation_id = $2",
            &[&t, &c],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let text: Option<String> = column(&state, "text")?;
    let summary = match text {
        Some(text) => Some(Summary {
            text,
            through_sequence: Sequence::from_stored(column(&state, "through_sequence")?),
            summarizer: column(&state, "summarizer")?,
            version: column::<i64>(&state, "version")?.max(0) as u64,
            updated_at: column(&state, "created_at")?,
        }),
        None => None,
    };
    let watermark = summary.as_ref().map_or(Sequence::ZERO, |s| s.through_sequence);
    let (messages, complete) = messages_after(&client, t, c, watermark, max_bytes).await?;
    Ok(SummaryState {
        summary,
        messages,
        complete,
        last_sequence: Sequence::from_stored(column(&state, "last_sequence")?),
        redactions: column::<i64>(&state, "redactions")?.max(0) as u64,
        rewinds: column::<i64>(&state, "rewinds")?.max(0) as u64,
    })
}

/// Whether a redaction since the summary's read reached a message of its new range: the row is
/// locked (by the watermark's update), so the count read now is final.
async fn redacted_within(
    tx: &deadpool_postgres::Transaction<'_>,
    t: &str,
    c: &str,
    base: Sequence,
    summary: &NewSummary,
    moved: &tokio_postgres::Row,
) -> Result<bool, StoreError> {
    let redactions: i64 = column(moved, "redactions")?;
    if redactions == summary.redactions as i64 {
        return Ok(false);
    }
    let row = tx
        .query_one(
            "SELECT count(*) AS tombstones FROM messages
             WHERE tenant_id = $1 AND conversation_id = $2 AND sequence > $3 AND sequence <= $4
               AND content = $5",
            &[
                &t,
                &c,
                &base.as_i64(),
                &summary.through_sequence.as_i64(),
                &REDACTED_CONTENT,
            ],
        )
        .await?;
    Ok(column::<i64>(&row, "tombstones")? != summary.tombstones as i64)
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, base = base.get()))]
pub(super) async fn store_summary(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    base: Sequence,
    summary: NewSummary,
    deadline: Option<&Deadline>,
) -> Result<Summary, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let mut client = pool.get().await?;
    let through = summary.through_sequence.as_i64();
    // Compare-and-set of the watermark, then the new version row, in one transaction of two
    // statements on the conversation's shard (a writable CTE would not be routed to one shard
    // on Citus).
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;
    let moved = tx
        .prepare_cached(
            "UPDATE conversations
             SET summary_through_sequence = $4, summary_version = summary_version + 1
             WHERE tenant_id = $1 AND conversation_id = $2 AND summary_through_sequence = $3
               AND $4 > $3 AND $4 <= last_sequence AND rewinds = $5
               AND ($6::bigint IS NULL OR redactions + rewinds = $6)
             RETURNING summary_version, redactions",
        )
        .await?;
    let rewinds = summary.rewinds as i64;
    // A caller's summary is held to the removals counted when it was prepared, under the row
    // lock that redactions and rewinds take first: one that came first is seen here.
    let prepared = summary
        .prepared_log_changes
        .map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    let params: [&(dyn ToSql + Sync); 6] = [&t, &c, &base.as_i64(), &through, &rewinds, &prepared];
    let moved = match tx.query_opt(&moved, &params).await? {
        Some(moved) if redacted_within(&tx, t, c, base, &summary, &moved).await? => None,
        moved => moved,
    };
    let row = match moved {
        Some(moved) => {
            let version: i64 = column(&moved, "summary_version")?;
            let insert = tx
                .prepare_cached(
                    "INSERT INTO summaries (tenant_id, conversation_id, version, text, through_sequence, summarizer)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     RETURNING version, created_at",
                )
                .await?;
            let params: [&(dyn ToSql + Sync); 6] =
                [&t, &c, &version, &summary.text, &through, &summary.summarizer];
            let row = tx.query_one(&insert, &params).await?;
            let change = NewChange::new(ChangeKind::Summarized, Sequence::ZERO, summary.through_sequence);
            super::changes::record(&tx, t, c, change).await?;
            super::writes::commit(tx, deadline).await?;
            Some(row)
        }
        None => {
            drop(tx);
            None
        }
    };
    match row {
        Some(row) => Ok(Summary {
            text: summary.text,
            through_sequence: summary.through_sequence,
            summarizer: summary.summarizer,
            version: column::<i64>(&row, "version")?.max(0) as u64,
            updated_at: column(&row, "created_at")?,
        }),
        None => Err(refusal(&client, t, c, summary.prepared_log_changes).await?),
    }
}

/// Why a summary was not stored: the conversation's removals changed since it was prepared
/// (`prepared`), or its watermark moved.
async fn refusal(
    client: &deadpool_postgres::Object,
    t: &str,
    c: &str,
    prepared: Option<u64>,
) -> Result<StoreError, StoreError> {
    let current = client
        .query_opt(
            "SELECT summary_through_sequence, redactions + rewinds AS changes FROM conversations
             WHERE tenant_id = $1 AND conversation_id = $2",
            &[&t, &c],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let changes = column::<i64>(&current, "changes")?.max(0) as u64;
    if prepared.is_some_and(|prepared| prepared != changes) {
        return Ok(StoreError::LogChanged { current: changes });
    }
    Ok(StoreError::SummaryMoved {
        current: Sequence::from_stored(column(&current, "summary_through_sequence")?),
    })
}
