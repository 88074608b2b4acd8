//! SearchMessages on PostgreSQL: the GIN index on `messages.search` finds the conversation's
//! matches (their lexemes carry its scope, see [`search::scope`]), first to tell its common
//! terms ([`search::COMMON_TERM_MESSAGES`]), then the candidates, which `ts_rank` ranks; only
//! the page's rows are read whole.

use deadpool_postgres::Pool;
use tokio_postgres::Row;

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

/// `$1` tenant, `$2` conversation, `$3` the query as `tsquery` text (what scores), `$4` the
/// highest sequence, `$5` roles, `$6` tools, `$7` sequences skipped, `$8`/`$9` the last hit of
/// the page before (score, sequence), `$10` how many, `$11` the byte limit, `$12` the
/// candidates' query (the terms that are not common), `$13` how many of the newest candidates
/// are ranked (all of them, or [`search::COMMON_TERM_MESSAGES`] when every term is common).
/// The ranking runs over the candidates only; the rows are read for the page only, cut at the
/// byte limit as [`super::rows::capped_page`] cuts.
fn search_sql() -> String {
    let rank = format!(
        "ts_rank(s.search, $3::text::tsquery, {})",
        search::RANK_NORMALIZATION
    );
    format!(
        "SELECT {MESSAGE_COLUMNS}, score, tool_name, log_last, hit_count FROM (
             SELECT m.*, hit.score, hit.log_last, {TOOL_NAME} AS tool_name, {MESSAGE_BYTES} AS own,
                    count(*) OVER () AS hit_count,
                    sum({MESSAGE_BYTES}) OVER (ORDER BY hit.score DESC, m.sequence DESC
                                               ROWS UNBOUNDED PRECEDING) AS upto
             FROM (SELECT s.sequence AS hit_sequence, {rank} AS score, s.log_last
                   FROM (SELECT s.sequence, s.search, bound.log_last
                         FROM (SELECT last_sequence AS log_last FROM conversations
                               WHERE tenant_id = $1 AND conversation_id = $2) bound,
                              messages s
                         WHERE s.tenant_id = $1 AND s.conversation_id = $2
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

/// How many messages up to `$3` hold each of the terms `$4` (`tsquery` text each), counted up
/// to `$5` (one more than [`search::COMMON_TERM_MESSAGES`]): the index finds them, and a
/// common term stops the count early.
const TERM_COUNTS: &str = "SELECT (SELECT count(*) FROM (
             SELECT 1 FROM messages s
             WHERE s.tenant_id = $1 AND s.conversation_id = $2 AND s.search @@ term::tsquery
               AND s.sequence <= $3::bigint
             LIMIT $5::bigint) matches) AS messages
         FROM unnest($4::text[]) WITH ORDINALITY AS terms(term, n) ORDER BY n";

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
    let (candidates, newest) = candidates(&client, t, c, spec, &scope, through).await?;
    let statement = client.prepare_cached(&search_sql()).await?;
    let query = spec.query.tsquery(&scope);
    let roles: Vec<&str> = spec.roles.iter().map(|r| r.as_str()).collect();
    let skip: Vec<i64> = spec.skip.iter().map(|s| s.as_i64()).collect();
    let after_score = spec.after.map(|(score, _)| score);
    let after_sequence = spec.after.map_or(0, |(_, s)| s.as_i64());
    // One more than asked for says whether more follow.
    let fetch = spec.limit as i64 + 1;
    let max_bytes = byte_limit(spec.max_bytes);
    let rows = client
        .query(
            &statement,
            &[
                &t,
                &c,
                &query,
                &through,
                &roles,
                &spec.tool_names,
                &skip,
                &after_score,
                &after_sequence,
                &fetch,
                &max_bytes,
                &candidates,
                &newest,
            ],
        )
        .await?;
    if rows.is_empty() {
        let exists = client
            .query_opt(
                "SELECT last_sequence FROM conversations WHERE tenant_id = $1 AND conversation_id = $2",
                &[&t, &c],
            )
            .await?
            .ok_or(StoreError::NotFound)?;
        let through = Sequence::from_stored(column(&exists, "last_sequence")?);
        return Ok(SearchPage {
            found: Vec::new(),
            through: through.min(spec.through.unwrap_or(through)),
            more: false,
        });
    }
    found_page(&rows, spec)
}

/// The candidates' query (the terms of `spec` that are not common among the messages up to
/// `through`, or all of them when every one is) and how many of its newest matches are ranked.
async fn candidates(
    client: &deadpool_postgres::Object,
    t: &str,
    c: &str,
    spec: &SearchSpec,
    scope: &str,
    through: i64,
) -> Result<(String, i64), StoreError> {
    let statement = client.prepare_cached(TERM_COUNTS).await?;
    let cap = search::COMMON_TERM_MESSAGES as i64;
    let terms = spec.query.tsquery_terms(scope);
    let rows = client
        .query(&statement, &[&t, &c, &through, &terms, &(cap + 1)])
        .await?;
    let mut common = std::collections::HashSet::new();
    for (term, row) in spec.query.terms().iter().zip(&rows) {
        if column::<i64>(row, "messages")? > cap {
            common.insert(term.as_str());
        }
    }
    let rare = spec.query.only(|term| !common.contains(term));
    Ok(match rare.is_empty() {
        true => (spec.query.tsquery(scope), cap),
        false => (rare.tsquery(scope), i64::MAX),
    })
}

/// The page the rows of [`search_sql`] make.
fn found_page(rows: &[Row], spec: &SearchSpec) -> Result<SearchPage, StoreError> {
    let log_last: i64 = column(&rows[0], "log_last")?;
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
    })
}
