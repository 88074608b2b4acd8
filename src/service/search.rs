//! SearchMessages, and the recalled turn BuildContext adds (docs/design.md, "Recall").

use super::{SEARCH_QUEUE_WAIT, Service, ServiceError, offload, tenant_slots::Slot};
use crate::{
    domain::tokenize::Tokenizer,
    domain::{
        ConversationId, Role, Sequence, TenantId, Violations,
        context::{
            ContextPack, ContextRequest, Recall,
            recall::{
                BRIDGE_HITS, Found, RecallShape, add_recalled, bridge_query, held_verbatim, recall_query,
                recalled_turn, takes_recall,
            },
        },
        search::{
            Language, SearchQuery, Weighted,
            page_token::{PageToken, PageTokenError, fingerprint},
            searchable_text, semantic_text, snippet,
        },
    },
    runtime::{deadline::Deadline, response_budget::Reservation},
    store::{QueryEmbedding, SearchPage, SearchSpec},
};

/// Hits per page when the request leaves it at 0.
pub const DEFAULT_SEARCH_PAGE: usize = 10;
/// The largest page SearchMessages serves; larger requests are capped.
pub const MAX_SEARCH_PAGE: usize = 50;
/// Bytes of a hit's snippet (before the ellipses).
const SNIPPET_BYTES: usize = 200;

/// A parsed SearchMessages request.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The conversation searched.
    pub conversation: ConversationId,
    /// What to look for (1 to 4,096 bytes).
    pub query: String,
    /// Hits per page, 0 = [`DEFAULT_SEARCH_PAGE`].
    pub page_size: usize,
    /// Only these roles (empty = every role).
    pub roles: Vec<Role>,
    /// Only calls of these tools and their results (empty = every message).
    pub tool_names: Vec<String>,
    /// The previous page's token; empty for the first page.
    pub page_token: String,
}

/// One hit of SearchMessages.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The message's sequence.
    pub sequence: Sequence,
    /// Its role.
    pub role: Role,
    /// Its text around the first match.
    pub snippet: String,
    /// Its rank score: BM25 (see [`crate::domain::search::Weights`]), or the fused score of a
    /// hybrid search. It orders the hits; its scale depends on the conversation and the query.
    pub score: f32,
    /// How much of the query it matches, 0 to 1 ([`crate::domain::search::Weights::relevance`]):
    /// comparable across queries and conversations.
    pub relevance: f32,
    /// The tool it calls or that returned it.
    pub tool_name: Option<String>,
}

/// A page of SearchMessages.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Where the next page starts, if one may follow.
    pub next_page_token: Option<String>,
}

impl Service {
    /// A page of the conversation's messages that match `request`, best first.
    #[tracing::instrument(name = "search_messages", skip_all, fields(%tenant, conversation_id = %request.conversation))]
    pub async fn search_messages(
        &self,
        tenant: &TenantId,
        request: SearchRequest,
        deadline: Option<&Deadline>,
    ) -> Result<SearchOutcome, ServiceError> {
        let language = self.limits.search_language;
        let query = SearchQuery::parse(&request.query, language);
        // The query's vector first, within its budget, and only then the tenant's search slot:
        // a slot is never held by a wait on the embeddings endpoint.
        let semantic = self
            .semantic_query(
                tenant,
                &request.conversation,
                &request.query,
                &query,
                None,
                deadline,
            )
            .await?;
        let _slot = self.search_slot(tenant).await?;
        let print = fingerprint(
            (tenant.as_str(), request.conversation.as_str()),
            &query,
            &request.roles,
            &request.tool_names,
        );
        let after = match request.page_token.as_str() {
            "" => None,
            text => Some(PageToken::decode(text, print).map_err(|e| page_token_violation(&e))?),
        };
        let limit = match request.page_size {
            0 => DEFAULT_SEARCH_PAGE,
            n => n.min(MAX_SEARCH_PAGE),
        };
        let mut reservation = self.response_budget.reserve().of_tenant(tenant.as_str());
        let read = reservation.begin_read()?;
        let spec = SearchSpec {
            query: query.clone(),
            roles: request.roles,
            tool_names: request.tool_names,
            skip: Vec::new(),
            through: after.map(|t| t.through),
            after: after.map(|t| (t.score, t.sequence)),
            limit,
            max_bytes: read.limit,
            semantic,
            rare_only: false,
        };
        let page = self
            .store
            .search_messages(tenant, &request.conversation, &spec)
            .await?;
        let loaded = page.found.iter().map(|f| f.message.message.loaded_bytes()).sum();
        reservation.end_read(read, loaded)?;
        if after.is_some_and(|token| token.rewinds != page.rewinds) {
            return Err(page_token_violation(&PageTokenError::Rewound));
        }
        let next_page_token = next_page_token(&page, print);
        // Snippets stem the words of the hits: on the CPU pool when the texts are large.
        let hits = offload(tenant.as_str(), loaded, move |_| hits_of(page, &query, language)).await;
        tracing::info!(hits = hits.len(), "searched");
        Ok(SearchOutcome {
            hits,
            next_page_token,
        })
    }
}

impl Service {
    /// One of the tenant's search slots (SearchMessages and BuildContext's recall share them),
    /// waited for at most [`SEARCH_QUEUE_WAIT`].
    async fn search_slot(&self, tenant: &TenantId) -> Result<Slot, ServiceError> {
        self.searches
            .take(tenant, SEARCH_QUEUE_WAIT)
            .await
            .ok_or(ServiceError::TenantBusy {
                what: "searches",
                limit: self.searches.per_tenant(),
            })
    }

    /// The embedding of `text` (parsed as `query`) for a search of `conversation` up to
    /// `through`, once it has settled ([`Service::settled_query_embedding`]), when semantic
    /// search is on: of the text without the words the conversation says all the time
    /// ([`semantic_text`]), which the store counts first.
    async fn semantic_query(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        text: &str,
        query: &SearchQuery,
        through: Option<Sequence>,
        deadline: Option<&Deadline>,
    ) -> Result<Option<QueryEmbedding>, ServiceError> {
        if self.ai.embedder.is_none() || query.is_empty() {
            return Ok(None);
        }
        let holders = self
            .store
            .term_holders(tenant, conversation, query, through)
            .await?;
        let language = self.limits.search_language;
        let embedded = match holders {
            Some(holders) => semantic_text(text, query, &holders, language),
            None => text.to_owned(),
        };
        Ok(self.settled_query_embedding(tenant, &embedded, deadline).await)
    }

    /// The query's embedding ([`Service::query_embedding`]), once it has settled: a vector, or
    /// none within its budget (the search is then lexical).
    async fn settled_query_embedding(
        &self,
        tenant: &TenantId,
        query: &str,
        deadline: Option<&Deadline>,
    ) -> Option<QueryEmbedding> {
        let semantic = self.query_embedding(tenant, query, deadline)?;
        semantic.get().await;
        Some(semantic)
    }
}

/// The hits of `page`, each with its snippet: the window of its text that holds the most of
/// `query`'s weight.
fn hits_of(page: SearchPage, query: &SearchQuery, language: Language) -> Vec<SearchHit> {
    let weighted = Weighted {
        query,
        weights: &page.term_weights,
        language,
    };
    page.found
        .into_iter()
        .map(|f| SearchHit {
            sequence: f.message.sequence,
            role: f.message.message.role,
            snippet: snippet(&searchable_text(&f.message.message), weighted, SNIPPET_BYTES),
            score: f.score,
            relevance: f.relevance,
            tool_name: f.tool_name,
        })
        .collect()
}

/// The token of the page after `page`, if more hits follow.
fn next_page_token(page: &SearchPage, fingerprint: u64) -> Option<String> {
    let last = page.found.last().filter(|_| page.more)?;
    let token = PageToken {
        through: page.through,
        rewinds: page.rewinds,
        score: last.score,
        sequence: last.message.sequence,
        fingerprint,
    };
    Some(token.encode())
}

fn page_token_violation(error: &PageTokenError) -> ServiceError {
    Violations::single("page_token", error.to_string()).into()
}

/// A request's recall: what [`recall_into`] needs of the request. The packer has kept its
/// room out of older history ([`Recall::room`]).
#[derive(Debug)]
pub(super) struct RecallPlan {
    recall: Recall,
    room: usize,
    /// Tokens the request makes available.
    budget: usize,
    tokenizer: Tokenizer,
    language: Language,
}

impl RecallPlan {
    /// The recall `request` asks for, if any.
    pub(super) fn of(request: &ContextRequest, language: Language) -> Option<Self> {
        let recall = request.recall.clone()?;
        Some(Self {
            room: recall.room(&request.budget),
            budget: request.budget.available(),
            tokenizer: request.tokenizer,
            recall,
            language,
        })
    }

    /// The call that adds the recalled turn to the pack of `conversation`.
    pub(super) fn call<'a>(
        &'a self,
        service: &'a Service,
        tenant: &'a TenantId,
        conversation: &'a ConversationId,
        deadline: Option<&'a Deadline>,
    ) -> RecallCall<'a> {
        RecallCall {
            service,
            tenant,
            conversation,
            deadline,
            recall: &self.recall,
            room: self.room,
            budget: self.budget,
            tokenizer: self.tokenizer,
            language: self.language,
        }
    }
}

/// What [`recall_into`] needs beside the pack.
#[derive(Debug)]
pub(super) struct RecallCall<'a> {
    /// The store searched, and the query's embedding.
    pub(super) service: &'a Service,
    pub(super) tenant: &'a TenantId,
    pub(super) conversation: &'a ConversationId,
    /// The call's deadline, which bounds the wait for the query's vector.
    pub(super) deadline: Option<&'a Deadline>,
    pub(super) recall: &'a Recall,
    pub(super) room: usize,
    /// Tokens the request makes available.
    pub(super) budget: usize,
    pub(super) tokenizer: Tokenizer,
    pub(super) language: Language,
}

/// Adds the recalled turn to `pack`: searches the log as the pack saw it for the query,
/// skipping what the pack holds verbatim, and quotes the best hits that fit (the excerpts are
/// cut and counted on the CPU pool when the messages are large). The search takes one of the
/// tenant's search slots, as SearchMessages does (RESOURCE_EXHAUSTED when none frees in time),
/// after its query's vector has settled.
pub(super) async fn recall_into(
    call: RecallCall<'_>,
    pack: &mut ContextPack,
    reservation: &mut Reservation,
) -> Result<(), ServiceError> {
    let text = recall_query(call.recall, pack);
    let query = SearchQuery::parse(&text, call.language);
    let left = call.budget.saturating_sub(pack.stats.total_tokens as usize);
    let room = call.room.min(left);
    if query.is_empty() || room == 0 || !takes_recall(pack) {
        return Ok(());
    }
    let through = Sequence::from_stored(pack.stats.log_last_sequence as i64);
    let semantic = call
        .service
        .semantic_query(
            call.tenant,
            call.conversation,
            &text,
            &query,
            Some(through),
            call.deadline,
        )
        .await?;
    let _slot = call.service.search_slot(call.tenant).await?;
    let read = reservation.begin_read()?;
    let spec = SearchSpec {
        query: query.clone(),
        roles: Vec::new(),
        tool_names: Vec::new(),
        skip: held_verbatim(pack),
        through: Some(through),
        after: None,
        limit: call.recall.max_items as usize,
        max_bytes: read.limit,
        semantic,
        rare_only: false,
    };
    let page = call
        .service
        .store
        .search_messages(call.tenant, call.conversation, &spec)
        .await?;
    let loaded: usize = page.found.iter().map(|f| f.message.message.loaded_bytes()).sum();
    reservation.end_read(read, loaded)?;
    let bridged = bridge_hop(&call, &query, &spec, &page, reservation).await?;
    let loaded = loaded + bridged.as_ref().map_or(0, |b| b.loaded);
    let (recall, language, tokenizer) = (call.recall.clone(), call.language, call.tokenizer);
    let turn = offload(call.tenant.as_str(), loaded, move |_| {
        let mut found: Vec<Found<'_>> = page.found.iter().map(found_of).collect();
        if let Some(b) = &bridged {
            // Right after the hit they bridge from, ranked as it is.
            let score = found.first().map_or(0.0, |f| f.score);
            let hits = b.page.found.iter().map(|f| Found {
                score,
                bridged_by: Some((&b.query, b.page.term_weights.as_slice())),
                ..found_of(f)
            });
            found.splice(1..1, hits.collect::<Vec<_>>());
        }
        let shape = RecallShape {
            recall: &recall,
            room,
            query: &query,
            weights: &page.term_weights,
            language,
            tokenizer,
        };
        recalled_turn(&found, shape)
    })
    .await;
    if let Some(turn) = turn {
        add_recalled(pack, turn);
    }
    Ok(())
}

/// The second hop of recall (see [`bridge_query`]): up to [`BRIDGE_HITS`] messages that hold
/// what the best hit of `page` names and the question does not. Lexical only, and never a
/// message the pack or the first page already has.
async fn bridge_hop(
    call: &RecallCall<'_>,
    query: &SearchQuery,
    first: &SearchSpec,
    page: &SearchPage,
    reservation: &mut Reservation,
) -> Result<Option<Bridged>, ServiceError> {
    let Some(bridge) = page
        .found
        .first()
        .filter(|_| call.recall.max_items > 1)
        .and_then(|best| bridge_query(&best.message.message, query, call.language))
    else {
        return Ok(None);
    };
    // The hop is extra: without memory for it, the pack goes without it.
    let Ok(read) = reservation.begin_read() else {
        return Ok(None);
    };
    let mut skip = first.skip.clone();
    skip.extend(page.found.iter().map(|f| f.message.sequence));
    let spec = SearchSpec {
        query: bridge,
        roles: Vec::new(),
        tool_names: Vec::new(),
        skip,
        through: first.through,
        after: None,
        limit: BRIDGE_HITS,
        max_bytes: read.limit,
        semantic: None,
        rare_only: true,
    };
    let found = call
        .service
        .store
        .search_messages(call.tenant, call.conversation, &spec)
        .await?;
    let loaded = found.found.iter().map(|f| f.message.message.loaded_bytes()).sum();
    reservation.end_read(read, loaded)?;
    Ok(Some(Bridged {
        query: spec.query,
        page: found,
        loaded,
    }))
}

/// What the second hop found.
struct Bridged {
    /// The bridge's query: the bridged hits are cut around its words.
    query: SearchQuery,
    page: SearchPage,
    /// The bytes its messages loaded.
    loaded: usize,
}

/// A hit as recall quotes it.
fn found_of(f: &crate::store::FoundMessage) -> Found<'_> {
    Found {
        message: &f.message,
        tool_name: f.tool_name.as_deref(),
        score: f.score,
        relevance: f.relevance,
        chunk: f.chunk,
        bridged_by: None,
    }
}
