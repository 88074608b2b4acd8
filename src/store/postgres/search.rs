//! SearchMessages on PostgreSQL: the GIN index on `messages.search` finds the conversation's
//! matches (their lexemes carry its scope, see [`search::scope`]), first to count how many
//! messages hold each term (its weight, and whether it is common, see
//! [`search::COMMON_TERM_MESSAGES`]), then the candidates with what ranking needs of them;
//! ctxd ranks them by BM25 ([`search::Weights`]), as the in-memory store does, and reads only
//! the page's rows whole.

use std::collections::HashSet;

use deadpool_postgres::Pool;
use tokio_postgres::types::{ToSql, Type};

use super::{
    rows::{MESSAGE_BYTES, MESSAGE_COLUMNS, byte_limit, column, stored_messages},
    vectors::{self, VERSION_COLUMNS},
};
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

/// `$1` tenant, `$2` conversation, `$3` the highest sequence, `$4` roles, `$5` sequences
/// skipped, `$6` tools ([`TOOL_FILTER`]), `$7` the candidates' query (`tsquery` text), `$8` how many of the newest
/// candidates are read, `$9` the query's terms as scoped lexemes. With `every_common` the
/// candidates are the newest [`search::COMMON_TERM_MESSAGES`] matches of the whole query;
/// otherwise every match of its terms that are not common. Each comes with what ranking it
/// needs (its length, how often it holds each query term) and its size; the rows themselves
/// are read for the page only ([`PAGE_SQL`]).
fn candidates_sql(every_common: bool) -> String {
    let filter = if every_common { BY_KEY } else { BY_INDEX };
    format!(
        "SELECT s.sequence, s.tokens_approx, ({MESSAGE_BYTES})::bigint AS own, tf.lexemes, tf.counts
         FROM (SELECT s.*
               FROM messages s
               WHERE {filter}
                 AND s.search @@ $7::text::tsquery
                 AND s.sequence <= $3::bigint
                 AND (cardinality($4::text[]) = 0 OR s.role = ANY($4::text[]))
                 AND NOT (s.sequence = ANY($5::bigint[]))
                 AND (cardinality($6::text[]) = 0 OR {TOOL_FILTER})
               ORDER BY s.sequence DESC
               LIMIT $8::bigint) s,
              LATERAL (SELECT array_agg(u.lexeme) AS lexemes,
                              array_agg(coalesce(array_length(u.positions, 1), 1)) AS counts
                       FROM unnest(s.search) u WHERE u.lexeme = ANY($9::text[])) tf"
    )
}

/// The page's rows, with their tool names: `$1` tenant, `$2` conversation, `$3` sequences.
fn page_sql() -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS}, {TOOL_NAME} AS tool_name FROM messages m
         WHERE m.tenant_id = $1 AND m.conversation_id = $2 AND m.sequence = ANY($3::bigint[])"
    )
}

/// The searched end (`$3`, at most the log's end), the messages up to it as ranking counts
/// them, and how many messages up to it hold each of `terms` terms (`$5`, `$6`, ... as
/// `tsquery` text), counted up to `$4` (one more than [`search::COMMON_TERM_MESSAGES`]): the
/// index finds them, and a common term stops the count early. No row without the conversation.
fn term_counts_sql(terms: usize) -> String {
    let counts: Vec<String> = (0..terms)
        .map(|i| {
            format!(
                "(SELECT count(*) FROM (SELECT 1 FROM messages s WHERE {BY_INDEX}
                     AND s.search @@ ${}::text::tsquery AND s.sequence <= bound.last
                     LIMIT $4::bigint) matches) AS t{i}",
                i + 5
            )
        })
        .collect();
    let counts = match counts.is_empty() {
        true => String::new(),
        false => format!(", {}", counts.join(", ")),
    };
    format!(
        "SELECT bound.*,
                coalesce((SELECT e.token_offset + greatest(e.tokens_approx, 1) FROM messages e
                          WHERE e.tenant_id = $1 AND e.conversation_id = $2 AND e.sequence = bound.last),
                         0) AS length{counts}
         FROM (SELECT least($3::bigint, c.last_sequence) AS last, c.rewinds, {VERSION_COLUMNS}
               FROM conversations c WHERE c.tenant_id = $1 AND c.conversation_id = $2) bound"
    )
}

/// A candidate as [`candidates_sql`] reads it.
struct Candidate {
    sequence: i64,
    score: f32,
    /// Its BM25 score (0 when only the semantic half found it).
    lexical: f32,
    bytes: i64,
    /// Its chunk nearest the query, when the semantic half found it.
    chunk: Option<u16>,
}

#[tracing::instrument(skip_all, fields(tenant = %tenant, conversation_id = %conversation))]
pub(super) async fn search_messages(
    pool: &Pool,
    codes: &super::vector_codes::VectorCodes,
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
    let Some(terms) = term_statistics(&client, t, c, &spec.query, &scope, through).await? else {
        return Err(StoreError::NotFound);
    };
    let lexemes: Vec<String> = spec
        .query
        .terms()
        .iter()
        .map(|term| format!("{scope}{term}"))
        .collect();
    // The semantic half goes out with the candidates' query, on the same connection: one
    // round trip for both.
    let tools = (&spec.tool_names[..], TOOL_FILTER);
    let semantic = async {
        let query = match &spec.semantic {
            Some(embedding) => embedding.get().await,
            None => None,
        };
        match query {
            Some(query) => Ok(Some(
                semantic_half(&client, codes, (t, c), &terms, &query, spec, tools).await?,
            )),
            None => Ok::<_, StoreError>(None),
        }
    };
    let lexical = candidate_rows(&client, (t, c), spec, &terms, &lexemes);
    let (rows, semantic) = tokio::try_join!(lexical, semantic)?;
    let mut ranked = ranked_candidates(&rows, &lexemes, &terms.weights)?;
    if let Some((semantic, sizes)) = semantic {
        let best = ranked.first().map_or(0.0, |c| terms.weights.relevance(c.lexical));
        ranked = fused(ranked, &semantic, sizes, search::vectors::lexical_trust(best));
    }
    let below = |candidate: &Candidate| {
        spec.after.is_none_or(|(score, sequence)| {
            candidate.score < score || (candidate.score == score && candidate.sequence < sequence.as_i64())
        })
    };
    ranked.retain(below);
    let page = page_of(&ranked, spec);
    let log_last = Sequence::from_stored(terms.last);
    let mut found = found_messages(&client, t, c, &page, &terms.weights).await?;
    // A hit whose row went (a rewind since the statistics) is not found.
    found.retain(|f| f.message.sequence <= log_last);
    Ok(SearchPage {
        more: ranked.len() > found.len(),
        found,
        through: spec.through.map_or(log_last, |t| t.min(log_last)),
        rewinds: terms.rewinds,
        term_weights: terms.weights.term_weights(),
    })
}

/// The rows of [`candidates_sql`] for `spec`.
async fn candidate_rows(
    client: &deadpool_postgres::Object,
    (t, c): (&str, &str),
    spec: &SearchSpec,
    terms: &TermStatistics,
    lexemes: &[String],
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    if terms.every_common && spec.rare_only {
        return Ok(Vec::new());
    }
    let newest = match terms.every_common {
        true => search::COMMON_TERM_MESSAGES as i64,
        false => i64::MAX,
    };
    let roles: Vec<&str> = spec.roles.iter().map(|r| r.as_str()).collect();
    let skip: Vec<i64> = spec.skip.iter().map(|s| s.as_i64()).collect();
    let params: [(&(dyn ToSql + Sync), Type); 9] = [
        (&t, Type::TEXT),
        (&c, Type::TEXT),
        (&terms.last, Type::INT8),
        (&roles, Type::TEXT_ARRAY),
        (&skip, Type::INT8_ARRAY),
        (&spec.tool_names, Type::TEXT_ARRAY),
        (&terms.candidates, Type::TEXT),
        (&newest, Type::INT8),
        (&lexemes, Type::TEXT_ARRAY),
    ];
    Ok(client
        .query_typed(&candidates_sql(terms.every_common), &params)
        .await?)
}

/// The candidates of [`candidates_sql`]'s rows scored by BM25 ([`search::Weights`]), best
/// first (ties newest first); `lexemes` are the query's terms as scoped lexemes.
fn ranked_candidates(
    rows: &[tokio_postgres::Row],
    lexemes: &[String],
    weights: &search::Weights,
) -> Result<Vec<Candidate>, StoreError> {
    let mut ranked = Vec::with_capacity(rows.len());
    for row in rows {
        let held: Option<Vec<String>> = column(row, "lexemes")?;
        let counts: Option<Vec<i32>> = column(row, "counts")?;
        let (held, counts) = (held.unwrap_or_default(), counts.unwrap_or_default());
        let occurrences = |i: usize| {
            let at = held.iter().position(|l| *l == lexemes[i]);
            at.and_then(|at| counts.get(at)).map_or(0, |&n| n.max(0) as u32)
        };
        let length: i32 = column(row, "tokens_approx")?;
        let score = weights.score(length.max(0) as u32, occurrences);
        ranked.push(Candidate {
            sequence: column(row, "sequence")?,
            score,
            lexical: score,
            bytes: column(row, "own")?,
            chunk: None,
        });
    }
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.sequence.cmp(&a.sequence)));
    Ok(ranked)
}

/// The page of `ranked`: at most `spec.limit` hits, and no more once their sizes reach
/// `spec.max_bytes` (a first hit always comes).
fn page_of<'a>(ranked: &'a [Candidate], spec: &SearchSpec) -> Vec<&'a Candidate> {
    let mut page = Vec::new();
    let mut bytes = 0i64;
    for candidate in ranked.iter().take(spec.limit) {
        page.push(candidate);
        bytes = bytes.saturating_add(candidate.bytes);
        if bytes >= byte_limit(spec.max_bytes) {
            break;
        }
    }
    page
}

/// [`crate::store::Store::term_holders`] in PostgreSQL: the term counts of a search.
pub(super) async fn term_holders(
    pool: &Pool,
    tenant: &TenantId,
    conversation: &ConversationId,
    query: &search::SearchQuery,
    through: Option<Sequence>,
) -> Result<Option<search::TermHolders>, StoreError> {
    let (t, c) = (tenant.as_str(), conversation.as_str());
    let client = pool.get().await?;
    let scope = search::scope(t, c);
    let through = through.map_or(i64::MAX, Sequence::as_i64);
    let terms = term_statistics(&client, t, c, query, &scope, through).await?;
    Ok(terms.map(|terms| terms.holders))
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
        term_weights: Vec::new(),
    })
}

/// What [`term_statistics`] learns: the searched end, the query's weights there, and the
/// candidates' query.
struct TermStatistics {
    last: i64,
    /// The log's version and embedding watermark.
    state: super::vector_codes::LogState,
    rewinds: u64,
    holders: search::TermHolders,
    weights: search::Weights,
    /// The terms of the query that are not common, or all of them when every one is (then
    /// `every_common`), as `tsquery` text.
    candidates: String,
    every_common: bool,
}

/// The searched end and the query's term statistics up to it; `None` without the conversation.
async fn term_statistics(
    client: &deadpool_postgres::Object,
    t: &str,
    c: &str,
    query: &search::SearchQuery,
    scope: &str,
    through: i64,
) -> Result<Option<TermStatistics>, StoreError> {
    let cap = search::COMMON_TERM_MESSAGES as u64;
    let count_to = cap as i64 + 1;
    let terms = query.tsquery_terms(scope);
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![
        (&t, Type::TEXT),
        (&c, Type::TEXT),
        (&through, Type::INT8),
        (&count_to, Type::INT8),
    ];
    params.extend(terms.iter().map(|term| (term as &(dyn ToSql + Sync), Type::TEXT)));
    let rows = client.query_typed(&term_counts_sql(terms.len()), &params).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let last: i64 = column(row, "last")?;
    let mut holders = Vec::with_capacity(terms.len());
    for i in 0..terms.len() {
        holders.push(column::<i64>(row, &format!("t{i}"))?.max(0) as u64);
    }
    let collection = search::Collection {
        messages: last.max(0) as u64,
        length: column::<i64>(row, "length")?.max(0) as u64,
    };
    let common: HashSet<&str> = query
        .terms()
        .iter()
        .zip(&holders)
        .filter(|&(_, &n)| search::is_common(n, collection.messages))
        .map(|(term, _)| term.as_str())
        .collect();
    let rare = query.only(|term| !common.contains(term));
    let every_common = rare.is_empty();
    Ok(Some(TermStatistics {
        last,
        state: super::vector_codes::LogState {
            version: vectors::version_of(row)?,
            embedded_through: column(row, "embedded_through")?,
            embedded_late: column(row, "embedded_late")?,
            last,
        },
        rewinds: column::<i64>(row, "rewinds")?.max(0) as u64,
        holders: search::TermHolders {
            holders: holders.clone(),
            messages: collection.messages,
        },
        weights: search::Weights::new(query, &holders, collection),
        candidates: match every_common {
            true => query.tsquery(scope),
            false => rare.tsquery(scope),
        },
        every_common,
    }))
}

/// The semantic half of a search ([`vectors::semantic`]): its ranking, and the sizes of the
/// messages it found.
async fn semantic_half(
    client: &deadpool_postgres::Object,
    codes: &super::vector_codes::VectorCodes,
    (t, c): (&str, &str),
    terms: &TermStatistics,
    query: &search::vectors::QueryVector,
    spec: &SearchSpec,
    (tools, tool_filter): (&[String], &str),
) -> Result<(Vec<(Sequence, u16)>, std::collections::HashMap<i64, i64>), StoreError> {
    let filters = vectors::Filters {
        skip: &spec.skip,
        roles: &spec.roles,
        tools,
        tool_filter,
    };
    vectors::semantic(client, codes, (t, c), &terms.state, query, filters).await
}

/// The lexical ranking fused with the semantic one ([`search::vectors::fuse`]).
fn fused(
    lexical: Vec<Candidate>,
    semantic: &[(Sequence, u16)],
    sizes: std::collections::HashMap<i64, i64>,
    trust: f64,
) -> Vec<Candidate> {
    let mut bytes = sizes;
    bytes.extend(lexical.iter().map(|l| (l.sequence, l.bytes)));
    let bm25: std::collections::HashMap<i64, f32> = lexical.iter().map(|l| (l.sequence, l.lexical)).collect();
    let chunks: std::collections::HashMap<Sequence, u16> = semantic.iter().copied().collect();
    let scored: Vec<(Sequence, f32)> = lexical
        .iter()
        .map(|l| (Sequence::from_stored(l.sequence), l.score))
        .collect();
    search::vectors::fuse(&scored, semantic, trust)
        .into_iter()
        .map(|(sequence, score)| Candidate {
            sequence: sequence.as_i64(),
            score,
            lexical: bm25.get(&sequence.as_i64()).copied().unwrap_or(0.0),
            bytes: bytes.get(&sequence.as_i64()).copied().unwrap_or(0),
            chunk: chunks.get(&sequence).copied(),
        })
        .collect()
}

/// The rows of `page`, in its order, with their scores and tool names.
async fn found_messages(
    client: &deadpool_postgres::Object,
    t: &str,
    c: &str,
    page: &[&Candidate],
    weights: &search::Weights,
) -> Result<Vec<FoundMessage>, StoreError> {
    if page.is_empty() {
        return Ok(Vec::new());
    }
    let sequences: Vec<i64> = page.iter().map(|p| p.sequence).collect();
    let rows = client
        .query_typed(
            &page_sql(),
            &[(&t, Type::TEXT), (&c, Type::TEXT), (&sequences, Type::INT8_ARRAY)],
        )
        .await?;
    let tool_names: Vec<Option<String>> = rows
        .iter()
        .map(|row| column(row, "tool_name"))
        .collect::<Result<_, _>>()?;
    let mut by_sequence: std::collections::HashMap<i64, FoundMessage> = stored_messages(&rows)?
        .into_iter()
        .zip(tool_names)
        .map(|(message, tool_name)| {
            let found = FoundMessage {
                message,
                score: 0.0,
                relevance: 0.0,
                tool_name,
                chunk: None,
            };
            (found.message.sequence.as_i64(), found)
        })
        .collect();
    Ok(page
        .iter()
        .filter_map(|p| {
            let mut found = by_sequence.remove(&p.sequence)?;
            found.score = p.score;
            found.relevance = weights.relevance(p.lexical);
            found.chunk = p.chunk;
            Some(found)
        })
        .collect())
}
