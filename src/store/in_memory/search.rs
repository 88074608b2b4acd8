//! SearchMessages in memory: per conversation, each message's search document and an inverted
//! index of their terms, ranked by BM25 from the same figures the PostgreSQL store reads
//! ([`crate::domain::search::Weights`]), so both stores find the same messages in the same order.

use std::collections::{BTreeSet, HashSet};

use super::entry::Conversation;
use crate::{
    domain::{
        Sequence, StoredMessage,
        search::{self, vectors},
    },
    store::{EmbeddingBacklog, EmbeddingBatch, FoundMessage, SearchPage, SearchSpec},
};

/// The hits of `spec` in `conversation`, as the PostgreSQL store pages them: the candidates
/// are the messages with a term that is not common (or, when every term is, the newest
/// [`search::COMMON_TERM_MESSAGES`] matches), ranked with every term.
pub(super) fn search(
    conversation: &Conversation,
    spec: &SearchSpec,
    query_vector: Option<&vectors::QueryVector>,
) -> SearchPage {
    let log_last = conversation.last_sequence();
    let through = spec.through.map_or(log_last, |t| t.min(log_last));
    let skip: HashSet<Sequence> = spec.skip.iter().copied().collect();
    let (lexical, weights) = lexical(conversation, spec, through, &skip);
    let relevance: std::collections::HashMap<Sequence, f32> = lexical
        .iter()
        .map(|&(s, score)| (s, weights.relevance(score)))
        .collect();
    let mut chunks = std::collections::HashMap::new();
    let ranked: Vec<(Sequence, f32)> = match query_vector {
        Some(query) => {
            let semantic = semantic(conversation, spec, query, through, &skip);
            let best = lexical
                .first()
                .map_or(0.0, |&(_, score)| weights.relevance(score));
            chunks.extend(semantic.iter().copied());
            vectors::fuse(&lexical, &semantic, vectors::lexical_trust(best))
        }
        None => lexical,
    };
    let ranked: Vec<(f32, Sequence, usize)> = ranked
        .into_iter()
        .filter(|&(q, score)| spec.after.is_none_or(|(s, a)| score < s || (score == s && q < a)))
        .map(|(q, score)| (score, q, q.get() as usize - 1))
        .collect();
    let mut found = Vec::new();
    let mut bytes = 0;
    for &(score, _, i) in ranked.iter().take(spec.limit) {
        let message = &conversation.messages[i];
        found.push(FoundMessage {
            message: message.clone(),
            score,
            relevance: relevance.get(&message.sequence).copied().unwrap_or(0.0),
            tool_name: tool_name(conversation, message),
            chunk: chunks.get(&message.sequence).copied(),
        });
        bytes += message.message.loaded_bytes();
        if bytes >= spec.max_bytes {
            break;
        }
    }
    SearchPage {
        more: ranked.len() > found.len(),
        found,
        through,
        rewinds: conversation.rewinds,
        term_weights: weights.term_weights(),
    }
}

/// How many messages of `conversation` up to `through` hold each of `query`'s terms (counted
/// up to one more than a common term's), and how many there are.
pub(super) fn term_holders(
    conversation: &Conversation,
    query: &search::SearchQuery,
    through: Option<Sequence>,
) -> search::TermHolders {
    let last = conversation.last_sequence();
    let through = through.map_or(last, |t| t.min(last));
    let index = &conversation.search;
    let within = |i: u32| Sequence::from_stored(i64::from(i) + 1) <= through;
    let holders = query
        .terms()
        .iter()
        .map(|term| {
            let held = index
                .postings(term)
                .iter()
                .filter(|&&i| within(i) && index.document(i as usize).positions(term).is_some());
            held.take(search::COMMON_TERM_MESSAGES + 1).count() as u64
        })
        .collect();
    search::TermHolders {
        holders,
        messages: through.get(),
    }
}

/// The lexical ranking of `spec` over the messages up to `through` (best first, ties newest
/// first): the candidates are the messages with a term that is not common (or, when every term
/// is, the newest [`search::COMMON_TERM_MESSAGES`] matches), scored by BM25 with every term.
fn lexical(
    conversation: &Conversation,
    spec: &SearchSpec,
    through: Sequence,
    skip: &HashSet<Sequence>,
) -> (Vec<(Sequence, f32)>, search::Weights) {
    let index = &conversation.search;
    // Message `i` has sequence `i + 1`.
    let within = |i: u32| Sequence::from_stored(i64::from(i) + 1) <= through;
    let holding = |term: &'_ str| -> Vec<u32> {
        let postings = index.postings(term).iter().copied();
        postings
            .filter(|&i| within(i) && index.document(i as usize).positions(term).is_some())
            .collect()
    };
    // How many messages hold each term, counted up to one more than a common term's.
    let holders: Vec<u64> = spec
        .query
        .terms()
        .iter()
        .map(|t| holding(t).len().min(search::COMMON_TERM_MESSAGES + 1) as u64)
        .collect();
    let collection = collection(conversation, through);
    let common = |term: &str| {
        let i = spec.query.terms().iter().position(|t| t == term);
        i.is_some_and(|i| search::is_common(holders[i], collection.messages))
    };
    let rare = spec.query.only(|term| !common(term));
    let weights = search::Weights::new(&spec.query, &holders, collection);
    let every_term_common = rare.is_empty();
    if every_term_common && spec.rare_only {
        return (Vec::new(), weights);
    }
    let candidate_terms = if every_term_common { &spec.query } else { &rare };
    let matches: BTreeSet<u32> = candidate_terms.terms().iter().flat_map(|t| holding(t)).collect();
    let passing = matches.into_iter().rev().filter(|&i| {
        let message = &conversation.messages[i as usize];
        search::role_passes(&spec.roles, message.message.role)
            && !skip.contains(&message.sequence)
            && (spec.tool_names.is_empty() || calls_tool(conversation, message, &spec.tool_names))
    });
    let cap = match every_term_common {
        true => search::COMMON_TERM_MESSAGES,
        false => usize::MAX,
    };
    let mut lexical: Vec<(Sequence, f32)> = passing
        .take(cap)
        .map(|i| {
            let message = &conversation.messages[i as usize];
            let document = index.document(i as usize);
            let score = weights.score(message.tokens.approx, |t| {
                document.occurrences(&spec.query.terms()[t])
            });
            (message.sequence, score)
        })
        .collect();
    lexical.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    (lexical, weights)
}

/// The semantic ranking of `spec`'s query vector ([`vectors`]): the shortlist by sign bits over
/// the chunks of the messages up to `through` not skipped and of the search's roles, rescored,
/// then held to its tools, as the PostgreSQL store does it.
fn semantic(
    conversation: &Conversation,
    spec: &SearchSpec,
    query: &vectors::QueryVector,
    through: Sequence,
    skip: &HashSet<Sequence>,
) -> Vec<(Sequence, u16)> {
    let index = &conversation.search;
    let last = (through.get() as usize).min(index.embedded());
    let codes = (0..last).flat_map(|i| {
        let message = &conversation.messages[i];
        let scanned = !skip.contains(&message.sequence)
            && !index.document(i).is_empty()
            && search::role_passes(&spec.roles, message.message.role);
        let chunks = if scanned { index.vectors(i) } else { &[][..] };
        chunks.iter().map(move |(chunk, code, _)| vectors::ChunkCode {
            sequence: message.sequence,
            chunk: *chunk,
            code,
        })
    });
    let shortlist = vectors::shortlist(query, codes);
    let rescored = shortlist.into_iter().filter_map(|(sequence, chunk)| {
        let i = sequence.get() as usize - 1;
        let (_, _, vector) = index.vectors(i).iter().find(|(c, _, _)| *c == chunk)?;
        Some((sequence, chunk, vector.clone()))
    });
    let mut ranked = vectors::semantic_ranking(query, rescored);
    if !spec.tool_names.is_empty() {
        ranked.retain(|(s, _)| {
            let message = &conversation.messages[s.get() as usize - 1];
            calls_tool(conversation, message, &spec.tool_names)
        });
    }
    ranked
}

/// [`crate::store::Store::embedding_backlog`] of `conversation`.
pub(super) fn embedding_backlog(
    conversation: &Conversation,
    limit: usize,
    max_bytes: usize,
) -> EmbeddingBacklog {
    let index = &conversation.search;
    let after = index.embedded();
    let mut through = after;
    let mut messages = Vec::new();
    let mut bytes = 0;
    for (i, message) in conversation
        .messages
        .iter()
        .enumerate()
        .skip(after)
        .take(limit.max(1))
    {
        if through > after && bytes >= max_bytes {
            break;
        }
        through = i + 1;
        if !index.document(i).is_empty() {
            bytes += message.message.loaded_bytes();
            messages.push(message.clone());
        }
    }
    EmbeddingBacklog {
        version: conversation.log_version(),
        after: Sequence::from_stored(after as i64),
        through: Sequence::from_stored(through as i64),
        messages,
    }
}

/// [`crate::store::Store::store_embeddings`] into `conversation`.
pub(super) fn store_embeddings(conversation: &mut Conversation, batch: &EmbeddingBatch) -> bool {
    let (after, through) = (batch.after.get() as usize, batch.through.get() as usize);
    let current = conversation.log_version() == batch.version
        && conversation.search.embedded() == after
        && through >= after
        && through <= conversation.messages.len();
    if !current {
        return false;
    }
    let late = batch.late.iter().filter(|v| v.sequence.get() as usize <= after);
    for v in batch
        .vectors
        .iter()
        .filter(|v| v.sequence.get() as usize > after)
        .chain(late)
    {
        let i = (v.sequence.get() as usize).wrapping_sub(1);
        if i < through && !conversation.search.document(i).is_empty() {
            conversation
                .search
                .add_vector(i, v.chunk, v.vector.clone(), v.code.clone());
        }
    }
    conversation.search.set_embedded(through);
    true
}

/// The messages up to `through` as ranking counts them: how many, and their approximate tokens
/// together (the offset of the log's end there).
fn collection(conversation: &Conversation, through: Sequence) -> search::Collection {
    let messages = through.get().min(conversation.messages.len() as u64);
    let length = match messages.checked_sub(1) {
        Some(last) => {
            let last = last as usize;
            let approx = conversation.messages[last].tokens.approx.max(1);
            conversation.positions[last].offset + u64::from(approx)
        }
        None => 0,
    };
    search::Collection { messages, length }
}

/// The call message a tool result answers, and the call.
fn answered_call<'a>(
    conversation: &'a Conversation,
    result: &StoredMessage,
) -> Option<&'a crate::domain::ToolCall> {
    let call = conversation.at(result.call_sequence?)?;
    let id = result.message.tool_call_id.as_deref()?;
    call.message.tool_calls.iter().find(|c| c.id == id)
}

/// What [`FoundMessage::tool_name`] says of `message`.
fn tool_name(conversation: &Conversation, message: &StoredMessage) -> Option<String> {
    match message.call_sequence {
        None => message.message.tool_calls.first().map(|c| c.name.clone()),
        Some(_) => answered_call(conversation, message).map(|c| c.name.clone()),
    }
}

/// Whether `message` calls one of `tools`, or answers a call of one.
fn calls_tool(conversation: &Conversation, message: &StoredMessage, tools: &[String]) -> bool {
    let named = |name: &str| tools.iter().any(|t| t == name);
    message.message.tool_calls.iter().any(|c| named(&c.name))
        || answered_call(conversation, message).is_some_and(|c| named(&c.name))
}
