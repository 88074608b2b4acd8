//! Semantic search's embeddings (docs/design.md, "Recall"): messages are embedded after append,
//! off the request path, by a few workers per replica that take conversations from a queue and
//! move each one's watermark; a search's query is embedded when it runs (with a small cache),
//! and answered lexically when that fails. An append never waits on the embeddings endpoint
//! and never fails because of it.

use std::{
    collections::{HashSet, VecDeque},
    num::NonZeroUsize,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use super::Service;
use crate::{
    domain::{
        ConversationId, TenantId,
        search::{
            searchable_text,
            vectors::{PassageVector, QueryVector, chunks},
        },
    },
    embed::{EmbedError, Embedder, Kind},
    store::{EmbeddingBatch, MessageVector, StoreError},
};

/// Workers per replica embedding conversations' backlogs.
const WORKERS: usize = 4;
/// Conversations that may wait in the queue; an append finding it full leaves its conversation
/// to its next append (counted in `ctxd_background_skipped_total{reason="queue_full"}`).
const MAX_QUEUED: usize = 10_000;
/// Messages read per backlog batch, and their bytes at most.
const BATCH_MESSAGES: usize = 32;
const BATCH_BYTES: usize = 4 << 20;
/// Texts per request to the endpoint.
const TEXTS_PER_REQUEST: usize = 64;
/// Attempts per request, and the first wait between them (doubled each time).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Queries whose vectors a replica keeps (the pages of one search, repeated recall queries).
const QUERY_CACHE: usize = 1_024;

/// The conversations waiting to be embedded, and the workers taking them.
#[derive(Debug, Default)]
pub(super) struct EmbeddingQueue {
    state: Mutex<QueueState>,
    queries: Mutex<Option<lru::LruCache<String, Arc<QueryVector>>>>,
}

#[derive(Debug, Default)]
struct QueueState {
    waiting: VecDeque<(TenantId, ConversationId)>,
    queued: HashSet<(TenantId, ConversationId)>,
    workers: usize,
}

impl Service {
    /// Queues the conversation for embedding (when semantic search is on) and starts a worker
    /// if fewer than [`WORKERS`] run.
    pub(super) fn embed_after_append(&self, tenant: &TenantId, conversation: &ConversationId) {
        if self.ai.embedder.is_none() {
            return;
        }
        let key = (tenant.clone(), conversation.clone());
        let start_worker = {
            let mut state = self.embeddings.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.queued.contains(&key) {
                return;
            }
            if state.waiting.len() >= MAX_QUEUED {
                drop(state);
                self.metrics
                    .background_skipped
                    .with_label_values(&["queue_full"])
                    .inc();
                return;
            }
            state.queued.insert(key.clone());
            state.waiting.push_back(key);
            self.metrics.embedding_queue.set(state.waiting.len() as i64);
            let start = state.workers < WORKERS;
            if start {
                state.workers += 1;
            }
            start
        };
        if start_worker {
            let service = self.clone();
            tokio::spawn(async move { service.embedding_worker().await });
        }
    }

    /// Takes conversations from the queue until it is empty.
    async fn embedding_worker(self) {
        loop {
            let next = {
                let mut state = self.embeddings.state.lock().unwrap_or_else(|p| p.into_inner());
                let next = state.waiting.pop_front();
                match &next {
                    Some(key) => {
                        state.queued.remove(key);
                    }
                    None => state.workers -= 1,
                }
                self.metrics.embedding_queue.set(state.waiting.len() as i64);
                next
            };
            let Some((tenant, conversation)) = next else {
                return;
            };
            self.metrics.embedding_workers.inc();
            if let Err(error) = self.embed_backlog(&tenant, &conversation).await {
                let error = crate::telemetry::ErrorChain(&error);
                tracing::warn!(%tenant, %conversation, %error, "embedding the backlog failed; the next append retries");
            }
            self.metrics.embedding_workers.dec();
        }
    }

    /// Embeds the conversation's messages after its watermark, batch by batch, until none is
    /// left. A batch whose log changed meanwhile (a rewind, a redaction, another replica) is
    /// read again.
    async fn embed_backlog(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<(), EmbeddingError> {
        let Some(embedder) = self.ai.embedder.clone() else {
            return Ok(());
        };
        loop {
            let backlog = self
                .store
                .embedding_backlog(tenant, conversation, BATCH_MESSAGES, BATCH_BYTES)
                .await?;
            let Some(backlog) = backlog.filter(|b| b.through > b.after) else {
                return Ok(());
            };
            let mut keys = Vec::new();
            let mut texts = Vec::new();
            for message in &backlog.messages {
                let text = searchable_text(&message.message);
                for (i, chunk) in chunks(&text).into_iter().enumerate() {
                    keys.push((message.sequence, i as u16));
                    texts.push(chunk.to_string());
                }
            }
            let mut vectors = Vec::with_capacity(texts.len());
            for (keys, texts) in keys
                .chunks(TEXTS_PER_REQUEST)
                .zip(texts.chunks(TEXTS_PER_REQUEST))
            {
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                let embedded = with_retries(&embedder, Kind::Passage, &texts)
                    .await
                    .inspect_err(|_| {
                        self.metrics
                            .embedding_failures
                            .with_label_values(&["passage"])
                            .inc();
                    })?;
                for (&(sequence, chunk), vector) in keys.iter().zip(embedded) {
                    if let Some(vector) = PassageVector::quantize(&vector) {
                        vectors.push(MessageVector {
                            sequence,
                            chunk,
                            vector,
                        });
                    }
                }
            }
            let batch = EmbeddingBatch {
                version: backlog.version,
                after: backlog.after,
                through: backlog.through,
                vectors,
            };
            if self.store.store_embeddings(tenant, conversation, &batch).await? {
                let now = SystemTime::now();
                self.metrics
                    .embedded_messages
                    .inc_by(backlog.messages.len() as u64);
                for message in &backlog.messages {
                    let lag = now.duration_since(message.created_at).unwrap_or_default();
                    self.metrics.embedding_lag.observe(lag.as_secs_f64());
                }
            }
        }
    }

    /// The vector of a search's `query`, if semantic search is on and the endpoint answers:
    /// from the replica's cache when it has it. A failure is counted and leaves the search
    /// lexical.
    pub(super) async fn query_vector(&self, query: &str) -> Option<Arc<QueryVector>> {
        let embedder = self.ai.embedder.as_ref()?;
        if let Some(cached) = self.cached_query(query) {
            return Some(cached);
        }
        match embedder.embed(Kind::Query, &[query]).await {
            Ok(vectors) => {
                let vector = Arc::new(QueryVector::new(vectors.first()?)?);
                let mut cache = self.embeddings.queries.lock().unwrap_or_else(|p| p.into_inner());
                let cache = cache.get_or_insert_with(|| {
                    lru::LruCache::new(NonZeroUsize::new(QUERY_CACHE).unwrap_or(NonZeroUsize::MIN))
                });
                cache.put(query.to_string(), vector.clone());
                Some(vector)
            }
            Err(error) => {
                self.metrics
                    .embedding_failures
                    .with_label_values(&["query"])
                    .inc();
                let error = crate::telemetry::ErrorChain(&error);
                tracing::warn!(%error, "the query could not be embedded; searching lexically");
                None
            }
        }
    }

    fn cached_query(&self, query: &str) -> Option<Arc<QueryVector>> {
        let mut cache = self.embeddings.queries.lock().unwrap_or_else(|p| p.into_inner());
        cache.as_mut()?.get(query).cloned()
    }
}

/// `texts` embedded, retrying with backoff what retrying can help.
async fn with_retries(embedder: &Embedder, kind: Kind, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut wait = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match embedder.embed(kind, texts).await {
            Ok(vectors) => return Ok(vectors),
            Err(error) if attempt < ATTEMPTS && retryable(&error) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

fn retryable(error: &EmbedError) -> bool {
    match error {
        EmbedError::Unreachable(_) => true,
        EmbedError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
        EmbedError::BadAnswer(_) => false,
    }
}

/// Why a backlog was not embedded.
#[derive(Debug, thiserror::Error)]
enum EmbeddingError {
    #[error("embeddings endpoint")]
    Endpoint(#[from] EmbedError),
    #[error("store")]
    Store(#[from] StoreError),
}
