//! SearchMessages on PostgreSQL: the GIN index on `messages.search` finds the conversation's
//! matches (their lexemes carry its scope, see [`search::scope`]), first to tell its common
//! terms ([`search::COMMON_TERM_MESSAGES`]), then the candidates, which `ts_rank` ranks; only
//! the page's rows are read whole.

use std::collections::HashSet;

use deadpool_postgres::Pool;
use tokio_postgres::{
    Row,
    types::{ToSql, Type},
};

use super::rows::{MESSAGE_BYTES, MESSAGE_COLUMNS, byte_limit, column, stored_messages};
use crate::{
    domain::{ConversationId, Sequence, TenantId, search},
    store::{FoundMessage, SearchPage, SearchSpec, StoreError},
};

/// The tool a message calls (its first call) or, for a tool result, the tool that returned it,
/// from the call's message. `m` is the message row.
const TOOL_NAME: &str = "CASE WHEN m.call_sequence IS NULL THEN m.tool_calls->0->>'name'
     ELSE (SELECT e->>'name' FROM messages call, jsonb_array_elements(call.tool_calls) e
           WHERE call.tenant_id = $1 AND call.conversation_id = $2
             AND call.sequence = m.call_sequence AND e->>'id' = m.tool_call_id LIMIT 1) END";

/// Whether the message `s` calls one of the tools `$6` or answers a call of one.
const TOOL_FILTER: &str = "(EXISTS (SELECT 1 FROM jsonb_array_elements(s.tool_calls) e
                 WHERE e->>'name' = ANY($6::text[]))
         OR EXISTS (SELECT 1 FROM messages call, jsonb_array_elements(call.tool_calls) e
                 WHERE call.tenant_id = $1 AND call.conversation_id = $2
                   AND call.sequence = s.call_sequence AND e->>'id' = s.tool_call_id
                   AND e->>'name' = ANY($6::text[])))";

/// How the statements here find a conversation's messages. The conversation's scope is in the
/// lexemes, so the GIN index alone finds its matches; `tenant_id || ''` keeps the planner from
/// walking the primary key through the whole conversation instead (its estimates for a young
/// conversation say "a few rows"), which would be O(conversation). `conversation_id` stays a
/// plain equality: it routes the statement to its shard on Citus. The statements go out
/// unprepared ([`tokio_postgres::Client::query_typed`]), so each is planned with its values:
/// a generic plan cannot see how common a term is.
const BY_INDEX: &str = "s.conversation_id = $2 AND s.tenant_id || '' = $1";
/// The same filter where the primary key may serve (the newest matches of common terms).
const BY_KEY: &str = "s.conversation_id = $2 AND s.tenant_id = $1";

/// `$1` tenant, `$2` conversation, `$3` the query as `tsquery` text (what scores), `$4` the
/// highest sequence, `$5` roles, `$6` tools, `$7` sequences skipped, `$8`/`$9` the last hit of
/// the page before (score, sequence), `$10` how many, `$11` the byte limit, `$12` the
/// candidates' query, `$13` how many of the newest candidates are ranked. With `every_common`
/// the candidates are the newest [`search::COMMON_TERM_MESSAGES`] matches of the whole query;
/// otherwise every match of its terms that are not common. The ranking runs over the
/// candidates only; the rows are read for the page only, cut at the byte limit as
/// [`super::rows::capped_page`] cuts.
fn search_sql(every_common: bool) -> String {
    let rank = format!(
        "ts_rank(s.search, $3::text::tsquery, {})",
        search::RANK_NORMALIZATION
    );
    let filter = if every_common { BY_KEY } else { BY_INDEX };
    format!(
        "SELECT {MESSAGE_COLUMNS}, score, tool_name, log_last, log_rewinds, hit_count FROM (
             SELECT m.*, hit.score, hit.log_last, hit.log_rewinds, {TOOL_NAME} AS tool_name, {MESSAGE_BYTES} AS own,
                    count(*) OVER () AS hit_count,
                    sum({MESSAGE_BYTES}) OVER (ORDER BY hit.score DESC, m.sequence DESC
                                               ROWS UNBOUNDED PRECEDING) AS upto
             FROM (SELECT s.sequence AS hit_sequence, {rank} AS score, s.log_last, s.log_rewinds
                   FROM (SELECT s.sequence, s.search, bound.log_last, bound.log_rewinds
                         FROM (SELECT last_sequence AS log_last, rewinds AS log_rewinds FROM conversations
                               WHERE tenant_id = $1 AND conversation_id = $2) bound,
                              messages s
                         WHERE {filter}
                           AND s.search @@ $12::text::tsquery
                           AND s.sequence <= least($4::bigint, bound.log_last)
                           AND (cardinality($5::text[]) = 0 OR s.role = ANY($5::text[]))
                           AND (cardinality($6::text[]) = 0 OR {TOOL_FILTER})
                           AND NOT (s.sequence = ANY($7::bigint[]))
                         ORDER BY s.sequence DESC
                         LIMIT $13::bigint) s
                   WHERE $8::real IS NULL OR {rank} < $8::real
                         OR ({rank} = $8::real AND s.sequence < $9::bigint)
                   ORDER BY score DESC, s.sequence DESC
                   LIMIT $10::bigint) hit
             JOIN messages m ON m.tenant_id = $1 AND m.conversation_id = $2
                            AND m.sequence = hit.hit_sequence) page
         WHERE upto - own < $11::bigint
         ORDER BY score DESC, sequence DESC"
    )
}

/// How many messages up to `$3` hold each of `terms` terms (`$5`, `$6`, ... as `tsquery`
/// text), counted up to `$4` (one more than [`search::COMMON_TERM_MESSAGES`]): the index
/// finds them, and a common term stops the count early.
fn term_counts_sql(terms: usize) -> String {
    let counts: Vec<String> = (0..terms)
        .map(|i| {
            format!(
                "(SELECT count(*) FROM (SELECT 1 FROM messages s WHERE {BY_INDEX}
                     AND s.search @@ ${}::text::tsquery AND s.sequence <= $3::bigint
                     LIMIT $4::bigint) matches) AS t{i}",
                i + 5
            )
        })
        .collect();
    format!("SELECT {}", counts.join(", "))
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn search_messages(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    spec: &SearchSpec,
) -> Result<SearchPage, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    let scope = search::scope(t, c);
    let through = spec.through.map_or(i64::MAX, Sequence::as_i64);
    if spec.query.is_empty() {
        return nothing_found(&client, t, c, spec).await;
    }
    let (candidates, every_common) = candidates(&client, t, c, spec, &scope, through).await?;
    let newest = match every_common {
        true => search::COMMON_TERM_MESSAGES as i64,
        false => i64::MAX,
    };
    let query = spec.query.tsquery(&scope);
    let roles: Vec<&str> = spec.roles.iter().map(|r| r.as_str()).collect();
    let skip: Vec<i64> = spec.skip.iter().map(|s| s.as_i64()).collect();
    let after_score = spec.after.map(|(score, _)| score);
    let after_sequence = spec.after.map_or(0, |(_, s)| s.as_i64());
    // One more than asked for says whether more follow.
    let fetch = spec.limit as i64 + 1;
    let max_bytes = byte_limit(spec.max_bytes);
    let params: [(&(dyn ToSql + Sync), Type); 13] = [
        (&t, Type::TEXT),
        (&c, Type::TEXT),
        (&query, Type::TEXT),
        (&through, Type::INT8),
        (&roles, Type::TEXT_ARRAY),
        (&spec.tool_names, Type::TEXT_ARRAY),
        (&skip, Type::INT8_ARRAY),
        (&after_score, Type::FLOAT4),
        (&after_sequence, Type::INT8),
        (&fetch, Type::INT8),
        (&max_bytes, Type::INT8),
        (&candidates, Type::TEXT),
        (&newest, Type::INT8),
    ];
    let rows = client.query_typed(&search_sql(every_common), &params).await?;
    if rows.is_empty() {
        return nothing_found(&client, t, c, spec).await;
    }
    found_page(&rows, spec)
}

/// The empty page, or NotFound without the conversation.
async fn nothing_found(
    client: &deadpool_postgres::Object,
    t: &str,
    c: &str,
    spec: &SearchSpec,
) -> Result<SearchPage, StoreError> {
    let exists = client
        .query_opt(
            "SELECT last_sequence, rewinds FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
            &[&t, &c],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let through = Sequence::from_stored(column(&exists, "last_sequence")?);
    Ok(SearchPage {
        found: Vec::new(),
        through: through.min(spec.through.unwrap_or(through)),
        more: false,
        rewinds: column::<i64>(&exists, "rewinds")?.max(0) as u64,
    })
}

/// The candidates' query: the terms of `spec` that are not common among the messages up to
/// `through`, or all of them when every one is (then true).
async fn candidates(
    client: &deadpool_postgres::Object,
    t: &str,
    c: &str,
    spec: &SearchSpec,
    scope: &str,
    through: i64,
) -> Result<(String, bool), StoreError> {
    let cap = search::COMMON_TERM_MESSAGES as i64;
    let count_to = cap + 1;
    let terms = spec.query.tsquery_terms(scope);
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![
        (&t, Type::TEXT),
        (&c, Type::TEXT),
        (&through, Type::INT8),
        (&count_to, Type::INT8),
    ];
    params.extend(terms.iter().map(|term| (term as &(dyn ToSql + Sync), Type::TEXT)));
    let row = client.query_typed(&term_counts_sql(terms.len()), &params).await?;
    let row = row
        .first()
        .ok_or_else(|| StoreError::internal("term counts: no row"))?;
    let mut common = HashSet::new();
    for (i, term) in spec.query.terms().iter().enumerate() {
        if column::<i64>(row, &format!("t{i}"))? > cap {
            common.insert(term.as_str());
        }
    }
    let rare = spec.query.only(|term| !common.contains(term));
    Ok(match rare.is_empty() {
        true => (spec.query.tsquery(scope), true),
        false => (rare.tsquery(scope), false),
    })
}

/// The page the rows of [`search_sql`] make.
fn found_page(rows: &[Row], spec: &SearchSpec) -> Result<SearchPage, StoreError> {
    let log_last: i64 = column(&rows[0], "log_last")?;
    let rewinds: i64 = column(&rows[0], "log_rewinds")?;
    let hit_count: i64 = column(&rows[0], "hit_count")?;
    let messages = stored_messages(rows)?;
    let mut found = Vec::with_capacity(messages.len());
    for (row, message) in rows.iter().zip(messages) {
        found.push(FoundMessage {
            message,
            score: column(row, "score")?,
            tool_name: column(row, "tool_name")?,
        });
    }
    found.truncate(spec.limit);
    // The hits ranked (at most one more than asked for) against those that came.
    let more = hit_count as usize > found.len();
    let log_last = Sequence::from_stored(log_last);
    Ok(SearchPage {
        found,
        through: spec.through.map_or(log_last, |t| t.min(log_last)),
        more,
        rewinds: rewinds.max(0) as u64,
    })
}
