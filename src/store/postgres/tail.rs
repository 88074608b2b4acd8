//! What BuildContext reads on PostgreSQL: the conversation's state with the first page of its
//! tail in one round trip, further pages, and the open calls pending results answer. Pages
//! come from the replica's [`MessageCache`] where it holds them under the version the state
//! read saw; the database is read for what is newer or missing.

use std::collections::HashMap;
use tracing::Instrument as _;

use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::{
    cache::{MessageCache, PageSource, Segment},
    rows::{
        MESSAGE_COLUMNS, byte_limit, capped_messages, capped_page, column, memory_from_row, stored_messages,
    },
};
use crate::{
    domain::{
        ConversationId, Sequence, StoredMessage, TenantId,
        context::{ContextSnapshot, PageRequest, SummarySection},
    },
    runtime::traces,
    store::{CappedPage, LogVersion, OpenedContext, StoreError},
};

/// Where the tail's newest page is read: messages older than `before` and newer than `floor`
/// (`$3`, `$4`), at most `$5` of them and `$6` bytes, newest first.
fn tail_query() -> String {
    capped_page(
        "tenant_id = $1 AND conversation_id = $2 AND sequence < $3 AND sequence > $4
           AND NOT exclude_from_context",
        "DESC",
        "$5::bigint",
        "$6::bigint",
    )
}

/// The conversation's state, its pinned messages and the newest page of its tail past
/// `page.floor`, in one round trip. With a cached run, the floor is the run's newest sequence:
/// only what is newer is read.
#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn open_context(
    pool: &Pool,
    cache: &MessageCache,
    tenant: &TenantId,
    conversation: &ConversationId,
    first_page: usize,
    max_bytes: usize,
) -> Result<OpenedContext, StoreError> {
    let run = cache.run(tenant, conversation);
    let newest = PageRequest {
        before: Sequence::MAX,
        floor: run.as_ref().map_or(Sequence::ZERO, |r| r.hi()),
        limit: first_page,
        max_bytes,
    };
    let (snapshot, version, read) = match read_opening(pool, tenant, conversation, &newest).await {
        Err(StoreError::NotFound) => {
            cache.forget(tenant, conversation);
            return Err(StoreError::NotFound);
        }
        other => other?,
    };
    let last = snapshot.last_sequence;
    // What the read covered, up to the snapshot's last sequence (newer rows are the packer's
    // to ignore).
    let seen = Segment::of_page(
        &PageRequest {
            before: last.plus(1),
            ..newest
        },
        &read,
    );
    let whole = PageRequest {
        before: last.plus(1),
        floor: Sequence::ZERO,
        ..newest
    };
    let complete = !read.cut_by_size && read.messages.len() < first_page;
    let current = run.is_some_and(|r| r.version() == version && r.hi() <= last);
    let newest = match (newest.floor == Sequence::ZERO, current) {
        // No run: the read is the whole newest page.
        (true, _) => {
            cache.learn(tenant, conversation, version, seen);
            cache.count_page(PageSource::Database);
            read
        }
        // A run of another version is never served: the whole page again, without the floor.
        (false, false) => {
            cache.forget(tenant, conversation);
            reread(pool, cache, tenant, conversation, version, whole).await?
        }
        // A full page of messages newer than the run: it is the newest page.
        (false, true) if !complete => {
            cache.learn(tenant, conversation, version, seen);
            cache.count_page(PageSource::Database);
            read
        }
        // Only what is newer than the run came: the run, grown by it, serves the page.
        (false, true) => {
            cache.learn(tenant, conversation, version, seen);
            let served = cache
                .run(tenant, conversation)
                .filter(|r| r.version() == version)
                .and_then(|r| r.page(&whole));
            match served {
                Some(page) => {
                    cache.count_page(PageSource::Cache);
                    page
                }
                None => reread(pool, cache, tenant, conversation, version, whole).await?,
            }
        }
    };
    Ok(OpenedContext {
        snapshot,
        newest,
        version,
    })
}

/// The page `page` from the database, learned by the cache.
async fn reread(
    pool: &Pool,
    cache: &MessageCache,
    tenant: &TenantId,
    conversation: &ConversationId,
    version: LogVersion,
    page: PageRequest,
) -> Result<CappedPage, StoreError> {
    let client = pool.get().await?;
    let statement = client.prepare_cached(&tail_query()).await?;
    let read = query_page(&client, &statement, tenant, conversation, &page).await?;
    cache.learn(tenant, conversation, version, Segment::of_page(&page, &read));
    cache.count_page(PageSource::Database);
    Ok(read)
}

async fn query_page(
    client: &deadpool_postgres::Client,
    statement: &tokio_postgres::Statement,
    tenant: &TenantId,
    conversation: &ConversationId,
    page: &PageRequest,
) -> Result<CappedPage, StoreError> {
    let (limit, max_bytes) = (page.limit as i64, byte_limit(page.max_bytes));
    let (before, floor) = (page.before.as_i64(), page.floor.as_i64());
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let params: [&(dyn ToSql + Sync); 6] = [&t, &c, &before, &floor, &limit, &max_bytes];
    capped_messages(&client.query(statement, &params).await?)
}

/// The state query, the pinned messages and `newest` in one round trip.
async fn read_opening(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    newest: &PageRequest,
) -> Result<(ContextSnapshot, LogVersion, CappedPage), StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    let state = client
        .prepare_cached(
            "SELECT c.last_sequence, c.last_user_sequence, c.last_response_id,
                    (extract(epoch FROM c.created_at) * 1000000)::bigint AS created_micros,
                    c.redactions + c.rewinds AS changes, coalesce(c.incarnation, 0) AS incarnation,
                    s.text AS summary_text, s.through_sequence AS summary_through_sequence,
                    m.document AS memory_document, m.through_sequence AS memory_through_sequence,
                    m.version AS memory_version
             FROM conversations c
             LEFT JOIN summaries s ON s.tenant_id = c.tenant_id
                  AND s.conversation_id = c.conversation_id AND s.version = c.summary_version
             LEFT JOIN working_memory m ON m.tenant_id = c.tenant_id AND m.conversation_id = c.conversation_id
             WHERE c.tenant_id = $1 AND c.conversation_id = $2",
        )
        .await?;
    let pinned_query = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages
         WHERE tenant_id = $1 AND conversation_id = $2 AND pinned AND NOT exclude_from_context
         ORDER BY sequence"
    );
    let pinned = client.prepare_cached(&pinned_query).await?;
    let page = client.prepare_cached(&tail_query()).await?;
    let params: &[&(dyn ToSql + Sync)] = &[&t, &c];
    // The three queries go out together on one connection: one network round trip. The
    // server runs them in order, so the page never misses a message the state counts;
    // anything newer than the state is dropped by the cache or the packer.
    let (state, pinned, read) = tokio::try_join!(
        async { Ok::<_, StoreError>(client.query_opt(&state, params).await?) },
        async { Ok::<_, StoreError>(client.query(&pinned, params).await?) },
        query_page(&client, &page, tenant, conversation, newest),
    )?;
    let state = state.ok_or(StoreError::NotFound)?;
    let last_sequence = Sequence::from_stored(column(&state, "last_sequence")?);
    let last_user: Option<i64> = column(&state, "last_user_sequence")?;
    let pinned: Vec<StoredMessage> = stored_messages(&pinned)?;
    let summary_text: Option<String> = column(&state, "summary_text")?;
    let summary = match summary_text {
        Some(text) => Some(SummarySection {
            text,
            through_sequence: Sequence::from_stored(column(&state, "summary_through_sequence")?),
        }),
        None => None,
    };
    let version = LogVersion {
        created_micros: column(&state, "created_micros")?,
        changes: column::<i64>(&state, "changes")?.max(0) as u64,
        incarnation: column(&state, "incarnation")?,
    };
    let snapshot = ContextSnapshot {
        last_sequence,
        last_user_sequence: last_user.map(Sequence::from_stored),
        last_response_id: column(&state, "last_response_id")?,
        pinned: pinned
            .into_iter()
            .filter(|m| m.sequence <= last_sequence)
            .collect(),
        summary,
        memory: memory_from_row(&state)?,
        pending_calls: HashMap::new(),
    };
    Ok((snapshot, version, read))
}

/// A page of the tail as of `version`: from this replica's cache when it holds the page's
/// newest messages under that version, else from the database (and then learned).
#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation, before = page.before.get(), limit = page.limit))]
pub(super) async fn tail(
    pool: &Pool,
    cache: &MessageCache,
    tenant: &TenantId,
    conversation: &ConversationId,
    version: LogVersion,
    page: PageRequest,
) -> Result<CappedPage, StoreError> {
    let cached = cache
        .run(tenant, conversation)
        .filter(|r| r.version() == version)
        .and_then(|r| r.page(&page));
    if let Some(page) = cached {
        cache.count_page(PageSource::Cache);
        return Ok(page);
    }
    // Only a page read from the database is a statement; cached pages make no span.
    reread(pool, cache, tenant, conversation, version, page)
        .instrument(traces::db("SELECT", "messages"))
        .await
}

pub(super) async fn open_calls(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    ids: &[String],
) -> Result<HashMap<String, Sequence>, StoreError> {
    let client = pool.get().await?;
    let rows = client
        .query(
            // Primary-key lookups only: the named calls, their messages, those messages' calls.
            "SELECT t.call_id, t.call_sequence FROM tool_calls t
             WHERE t.tenant_id = $1 AND t.conversation_id = $2 AND t.result_sequence IS NULL
               AND t.call_id IN (
                 SELECT c->>'id' FROM messages m, jsonb_array_elements(m.tool_calls) c
                 WHERE m.tenant_id = $1 AND m.conversation_id = $2
                   AND m.sequence IN (
                     SELECT call_sequence FROM tool_calls
                     WHERE tenant_id = $1 AND conversation_id = $2 AND call_id = ANY($3)
                       AND result_sequence IS NULL))",
            &[&tenant.as_str(), &conversation.as_str(), &ids],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok((
                column(r, "call_id")?,
                Sequence::from_stored(column(r, "call_sequence")?),
            ))
        })
        .collect()
}
