//! Conversations as resources on PostgreSQL: get, update, the keyset listing and the retention
//! sweep (fork and redaction have their own files).

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use deadpool_postgres::{GenericClient, Pool, Transaction};
use tokio_postgres::{Row, types::Json};

use super::{
    errors::corrupt,
    rows::{self, column},
};
use crate::{
    domain::{
        ConversationId, Sequence, TenantId, Usage,
        changes::{ChangeKind, NewChange},
        conversation::{
            self, Conversation, ConversationPage, ConversationPatch, ConversationStatus, IfMissing, ListQuery,
        },
        working_memory::WorkingMemory,
    },
    runtime::deadline::Deadline,
    store::{RetentionRule, StoreError, Swept},
};

/// The columns [`conversation_from_row`] reads, from `conversations c` left-joined with
/// `working_memory w` ([`FROM`]).
const COLUMNS: &str = "c.conversation_id, c.title, c.status, c.labels, c.created_at, c.updated_at,
     c.last_sequence, c.summary_through_sequence, coalesce(w.version, 0) AS memory_version, c.expire_time,
     c.forked_from_conversation_id, c.forked_from_sequence,
     c.usage_input, c.usage_output, c.usage_cached, c.usage_reasoning";

const FROM: &str = "conversations c LEFT JOIN working_memory w
     ON w.tenant_id = c.tenant_id AND w.conversation_id = c.conversation_id";

fn conversation_from_row(row: &Row) -> Result<Conversation, StoreError> {
    let id: String = column(row, "conversation_id")?;
    let status: &str = column(row, "status")?;
    let Json(labels): Json<BTreeMap<String, String>> = column(row, "labels")?;
    let forked_id: Option<String> = column(row, "forked_from_conversation_id")?;
    let forked_sequence: Option<i64> = column(row, "forked_from_sequence")?;
    let forked_from = match (forked_id, forked_sequence) {
        (Some(id), Some(sequence)) => Some((
            ConversationId::parse(id).map_err(|_| corrupt("forked_from_conversation_id"))?,
            Sequence::from_stored(sequence),
        )),
        _ => None,
    };
    Ok(Conversation {
        id: ConversationId::parse(id).map_err(|_| corrupt("conversation_id"))?,
        title: column(row, "title")?,
        status: ConversationStatus::from_name(status).ok_or_else(|| corrupt("status"))?,
        labels,
        created_at: column(row, "created_at")?,
        updated_at: column(row, "updated_at")?,
        last_sequence: Sequence::from_stored(column(row, "last_sequence")?),
        summary_through_sequence: Sequence::from_stored(column(row, "summary_through_sequence")?),
        memory_version: column::<i64>(row, "memory_version")?.max(0) as u64,
        expire_time: column(row, "expire_time")?,
        forked_from,
        usage: Usage {
            input_tokens: column::<i64>(row, "usage_input")?.max(0) as u64,
            output_tokens: column::<i64>(row, "usage_output")?.max(0) as u64,
            cached_input_tokens: column::<i64>(row, "usage_cached")?.max(0) as u64,
            reasoning_tokens: column::<i64>(row, "usage_reasoning")?.max(0) as u64,
        },
    })
}

pub(super) async fn read(
    client: &impl GenericClient,
    tenant: &str,
    conversation: &str,
) -> Result<Conversation, StoreError> {
    let query = format!("SELECT {COLUMNS} FROM {FROM} WHERE c.tenant_id = $1 AND c.conversation_id = $2");
    let statement = client.prepare_cached(&query).await?;
    let row = client
        .query_opt(&statement, &[&tenant, &conversation])
        .await?
        .ok_or(StoreError::NotFound)?;
    conversation_from_row(&row)
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn get(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
) -> Result<Conversation, StoreError> {
    let client = pool.get().await?;
    read(&client, tenant.as_str(), conversation.as_str()).await
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn update(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    patch: &ConversationPatch,
    if_missing: IfMissing,
    deadline: Option<&Deadline>,
) -> Result<Conversation, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    super::writes::limit(&tx, deadline).await?;
    if if_missing == IfMissing::Create {
        tx.execute(
            "INSERT INTO conversations (tenant_id, conversation_id, last_sequence, incarnation)
             VALUES ($1, $2, 0, $3)
             ON CONFLICT (tenant_id, conversation_id) DO NOTHING",
            &[&t, &c, &super::writes::new_incarnation()],
        )
        .await?;
    }
    let status = patch.status.map(ConversationStatus::as_str);
    let labels = patch.labels.as_ref().map(Json);
    let sets_expiry = patch.expire_time.is_some();
    let expire_time = patch.expire_time.flatten();
    let statement = tx
        .prepare_cached(
            "UPDATE conversations SET
                 title = coalesce($3, title),
                 status = coalesce($4, status),
                 labels = coalesce($5, labels),
                 -- Immutable functions only: Citus refuses a STABLE one (jsonb_build_object)
                 -- called with column references in an UPDATE.
                 listing = jsonb_set(jsonb_object(ARRAY['t', tenant_id, 's', coalesce($4, status)]),
                     '{l}', coalesce($5, labels)),
                 expire_time = CASE WHEN $6 THEN $7 ELSE expire_time END,
                 -- Not clock_timestamp(): Citus refuses volatile functions in an UPDATE.
                 updated_at = greatest(updated_at, statement_timestamp())
             WHERE tenant_id = $1 AND conversation_id = $2",
        )
        .await?;
    let updated = tx
        .execute(
            &statement,
            &[&t, &c, &patch.title, &status, &labels, &sets_expiry, &expire_time],
        )
        .await?;
    if updated == 0 {
        return Err(StoreError::NotFound);
    }
    super::changes::record(&tx, t, c, NewChange::whole(ChangeKind::Updated)).await?;
    let conversation = read(&tx, t, c).await?;
    super::writes::commit(tx, deadline).await?;
    Ok(conversation)
}

#[tracing::instrument(skip_all, fields(tenant = %tenant))]
pub(super) async fn list(
    pool: &Pool,
    tenant: &TenantId,
    query: &ListQuery,
) -> Result<ConversationPage, StoreError> {
    let client = pool.get().await?;
    // Two texts rather than `$n IS NULL OR ...`, so both plans walk the activity index.
    let after = match query.after {
        Some(_) => "AND (c.updated_at, c.conversation_id COLLATE \"C\") < ($5, $6::text COLLATE \"C\")",
        None => "AND $5::timestamptz IS NULL AND $6::text IS NULL",
    };
    // A filter is looked up in the listing index (only the tenant's matches, O(matches));
    // without one the activity index is walked (O(page)).
    let filtered = match listing_key(tenant, query) {
        Some(_) => "AND c.listing @> $7",
        None => "AND $7::jsonb IS NULL",
    };
    let text = format!(
        "SELECT {COLUMNS} FROM {FROM}
         WHERE c.tenant_id = $1 {after} {filtered}
           AND ($2::text IS NULL OR c.status = $2) AND c.labels @> $3
         ORDER BY c.updated_at DESC, c.conversation_id COLLATE \"C\" DESC
         LIMIT $4"
    );
    // A filtered listing is planned for its values (an unnamed statement): a cached generic
    // plan cannot tell a rare filter (the listing index) from a common one and walks the
    // activity index through every row of the tenant.
    let statement = match listing_key(tenant, query) {
        Some(_) => client.prepare(&text).await?,
        None => client.prepare_cached(&text).await?,
    };
    let status = query.status.map(ConversationStatus::as_str);
    let labels = Json(&query.labels);
    let listing = listing_key(tenant, query).map(Json);
    let fetch = query.limit as i64 + 1;
    let (after_time, after_id) = match &query.after {
        Some(key) => (
            Some(conversation::to_micros(
                SystemTime::UNIX_EPOCH + Duration::from_micros(key.micros.max(0) as u64),
            )),
            Some(key.id.as_str()),
        ),
        None => (None, None),
    };
    let rows = client
        .query(
            &statement,
            &[
                &tenant.as_str(),
                &status,
                &labels,
                &fetch,
                &after_time,
                &after_id,
                &listing,
            ],
        )
        .await?;
    let has_more = rows.len() > query.limit;
    let conversations = rows
        .iter()
        .take(query.limit)
        .map(conversation_from_row)
        .collect::<Result<_, _>>()?;
    Ok(ConversationPage {
        conversations,
        has_more,
    })
}

/// What a filtered listing looks up in the listing index (migration 9): the tenant with the
/// status and labels asked for; `None` without a filter.
fn listing_key(tenant: &TenantId, query: &ListQuery) -> Option<serde_json::Value> {
    if query.status.is_none() && query.labels.is_empty() {
        return None;
    }
    let mut key = serde_json::json!({ "t": tenant.as_str(), "l": &query.labels });
    if let Some(status) = query.status {
        key["s"] = status.as_str().into();
    }
    Some(key)
}

/// The conversation's working memory, if any; `lock` is appended to the query (`FOR UPDATE`).
pub(super) async fn read_memory(
    tx: &Transaction<'_>,
    tenant: &str,
    conversation: &str,
    lock: &str,
) -> Result<Option<WorkingMemory>, StoreError> {
    let query = format!(
        "SELECT document AS memory_document, through_sequence AS memory_through_sequence,
             version AS memory_version FROM working_memory
         WHERE tenant_id = $1 AND conversation_id = $2 {lock}"
    );
    match tx.query_opt(&query, &[&tenant, &conversation]).await? {
        Some(row) => rows::memory_from_row(&row),
        None => Ok(None),
    }
}

#[tracing::instrument(skip_all, fields(batch = rule.batch))]
pub(super) async fn sweep(pool: &Pool, rule: RetentionRule) -> Result<Swept, StoreError> {
    let limit = rule.batch as i64;
    let inactive_before = rule.inactive.and_then(|d| rule.now.checked_sub(d));
    let client = pool.get().await?;
    let mut candidates: Vec<(String, String)> = client
        .query(
            "SELECT tenant_id, conversation_id FROM conversations
             WHERE expire_time <= $1 ORDER BY expire_time LIMIT $2",
            &[&rule.now, &limit],
        )
        .await?
        .iter()
        .map(tenant_and_conversation)
        .collect::<Result<_, _>>()?;
    if let Some(before) = inactive_before {
        let room = limit - candidates.len() as i64;
        if room > 0 {
            let inactive = client
                .query(
                    "SELECT tenant_id, conversation_id FROM conversations
                     WHERE expire_time IS NULL AND updated_at < $1 ORDER BY updated_at LIMIT $2",
                    &[&before, &room],
                )
                .await?;
            for row in &inactive {
                candidates.push(tenant_and_conversation(row)?);
            }
        }
    }
    drop(client);
    let mut swept = Swept::default();
    for (t, c) in candidates {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        // Still expired now that the row is locked: an append or update since the scan keeps it.
        let sql = format!(
            "DELETE FROM conversations WHERE tenant_id = $1 AND conversation_id = $2
               AND (expire_time <= $3 OR (expire_time IS NULL AND updated_at < $4))
             RETURNING {}",
            super::changes::DELETED_COLUMNS
        );
        let Some(removed) = tx.query_opt(&sql, &[&t, &c, &rule.now, &inactive_before]).await? else {
            continue;
        };
        super::changes::record_removal(&tx, &t, &c, ChangeKind::Expired, &removed).await?;
        let messages = super::messages::delete_rows(&tx, &t, &c).await?;
        tx.commit().await?;
        swept.conversations += 1;
        swept.messages += messages;
    }
    Ok(swept)
}

/// The `tenant_id` and `conversation_id` columns of a row.
fn tenant_and_conversation(row: &Row) -> Result<(String, String), StoreError> {
    Ok((column(row, "tenant_id")?, column(row, "conversation_id")?))
}
