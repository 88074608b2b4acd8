//! Semantic search's embeddings (docs/design.md, "Recall"): messages are embedded after append,
//! off the request path, by a few workers per replica that take conversations from a queue and
//! move each one's watermark; a search's query is embedded when it runs (with a small cache),
//! and answered lexically when that fails. An append never waits on the embeddings endpoint
//! and never fails because of it.

use std::{
    collections::{HashSet, VecDeque},
    num::NonZeroUsize,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use super::Service;
use crate::{
    domain::{
        ConversationId, TenantId,
        search::{
            searchable_text,
            vectors::{PassageVector, QueryVector, centred_code, chunks, mean_of},
        },
    },
    models::embeddings::{EmbedError, Embedder, Kind},
    store::{EmbeddingBatch, MessageVector, QueryEmbedding, StoreError},
};

/// Workers per replica embedding conversations' backlogs.
const WORKERS: usize = 4;
/// Conversations that may wait in the queue; an append finding it full leaves its conversation
/// to its next append (counted in `ctxd_background_skipped_total{reason="queue_full"}`).
const MAX_QUEUED: usize = 10_000;
/// How long a queued conversation waits before a worker takes it: the appends of a busy chat
/// meanwhile join one backlog batch instead of one each (measured: docs/benchmarks.md,
/// "Recall II").
const SETTLE: Duration = Duration::from_millis(300);
/// Embedding yields to appends: before each batch a worker waits until this replica has had
/// no append for [`QUIET`], but at most [`MAX_YIELD`], so that a burst of appends never shares
/// the replica with its own embedding (docs/benchmarks.md, "Recall II") and a replica under
/// sustained load still embeds a batch a second at least.
const QUIET: Duration = Duration::from_millis(20);
const MAX_YIELD: Duration = Duration::from_secs(1);
/// Messages read per backlog batch, and their bytes at most.
const BATCH_MESSAGES: usize = 128;
const BATCH_BYTES: usize = 4 << 20;
/// Texts per request to the endpoint.
const TEXTS_PER_REQUEST: usize = 64;
/// Attempts per request, and the first wait between them (doubled each time).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The wait before a failed backlog is tried again, and the longest (it doubles per failure).
const FIRST_RETRY_WAIT: Duration = Duration::from_secs(2);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);
/// Queries whose vectors a replica keeps (the pages of one search, repeated recall queries).
const QUERY_CACHE: usize = 1_024;

/// Texts of every kind, whose vectors' mean stands for the model's common part: the sign bits
/// of the scan are taken around it (see [`crate::domain::search::vectors`]).
const CALIBRATION: [&str; 32] = [
    "Thanks, see you tomorrow!",
    "Can you check why the nightly backup job failed?",
    "The invoice for March is attached; payment is due in 30 days.",
    "We are flying to Lisbon on Friday and coming back on Monday.",
    "My daughter started piano lessons last week and loves them.",
    "The deploy to staging finished, all health checks are green.",
    "I made a lasagna with spinach and ricotta for dinner.",
    "What time does the meeting with the design team start?",
    "Disk usage on the database server is at 85 percent.",
    "She adopted a rescue dog named Biscuit last summer.",
    "The quarterly revenue grew by twelve percent year over year.",
    "Please rename the variable to make the function easier to read.",
    "I have been training for a half marathon in October.",
    "The museum exhibition on impressionist painters opens next month.",
    "Error: connection refused while connecting to port 5432.",
    "Our landlord finally fixed the leaking kitchen faucet.",
    "Let's move the release to Thursday so QA has time to test.",
    "He is reading a history of the Roman empire.",
    "The weather forecast says heavy rain all weekend.",
    "I'm nervous about my job interview on Wednesday.",
    "The API returns a 429 when the rate limit is exceeded.",
    "We planted tomatoes, basil and peppers in the garden.",
    "Congratulations on the new job, that's amazing news!",
    "The contract renewal needs a signature from legal.",
    "My grandmother turns ninety next year; we're planning a party.",
    "The train was delayed by forty minutes because of a signal failure.",
    "Use the staging credentials, not the production ones.",
    "I've started volunteering at the animal shelter on Saturdays.",
    "The patient's blood pressure was normal at the last check-up.",
    "Can you summarize the main points of the article?",
    "We're thinking about moving to a bigger apartment closer to the park.",
    "The model's accuracy dropped after we changed the tokenizer.",
];

/// The conversations waiting to be embedded, and the workers taking them.
#[derive(Debug, Default)]
pub(super) struct EmbeddingQueue {
    state: Mutex<QueueState>,
    /// When this replica last stored an append, if it did.
    last_append: Mutex<Option<Instant>>,
    /// Conversations whose backlog failed, with the failures in a row.
    retries: Mutex<std::collections::HashMap<(TenantId, ConversationId), u32>>,
    queries: Mutex<Option<lru::LruCache<String, Arc<QueryVector>>>>,
    /// The model's mean vector, once known.
    mean: tokio::sync::OnceCell<Arc<Vec<f32>>>,
}

#[derive(Debug, Default)]
struct QueueState {
    /// Conversations in the order they were queued, with when.
    waiting: VecDeque<(TenantId, ConversationId, Instant)>,
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
        *self
            .embeddings
            .last_append
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.queue_for_embedding((tenant.clone(), conversation.clone()));
    }

    /// Queues the conversation (once) and starts a worker if fewer than [`WORKERS`] run.
    fn queue_for_embedding(&self, key: (TenantId, ConversationId)) {
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
            state.waiting.push_back((key.0, key.1, Instant::now()));
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

    /// Takes conversations from the queue, each once it has waited [`SETTLE`], until it is
    /// empty.
    async fn embedding_worker(self) {
        loop {
            let due = {
                let state = self.embeddings.state.lock().unwrap_or_else(|p| p.into_inner());
                state.waiting.front().map(|(_, _, queued)| *queued + SETTLE)
            };
            if let Some(due) = due {
                tokio::time::sleep_until(due.into()).await;
            }
            let next = {
                let mut state = self.embeddings.state.lock().unwrap_or_else(|p| p.into_inner());
                // Another worker may have taken the one waited for: wait for the next.
                if state
                    .waiting
                    .front()
                    .is_some_and(|(_, _, queued)| *queued + SETTLE > Instant::now())
                {
                    continue;
                }
                let next = state.waiting.pop_front();
                match &next {
                    Some((tenant, conversation, _)) => {
                        state.queued.remove(&(tenant.clone(), conversation.clone()));
                    }
                    None => state.workers -= 1,
                }
                self.metrics.embedding_queue.set(state.waiting.len() as i64);
                next
            };
            let Some((tenant, conversation, _)) = next else {
                return;
            };
            self.metrics.embedding_workers.inc();
            let key = (tenant.clone(), conversation.clone());
            match self.embed_backlog(&tenant, &conversation).await {
                Ok(()) => {
                    self.embeddings
                        .retries
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&key);
                }
                Err(error) => {
                    let error = crate::runtime::telemetry::ErrorChain(&error);
                    tracing::warn!(%tenant, %conversation, %error, "embedding the backlog failed; retrying later");
                    self.retry_later(key);
                }
            }
            self.metrics.embedding_workers.dec();
        }
    }

    /// Queues the conversation again after a wait that doubles with each failure in a row (2 s,
    /// 4 s, ... at most [`MAX_RETRY_WAIT`]), so that a backlog the endpoint refused is embedded
    /// once it is back, with or without another append. At most [`MAX_QUEUED`] conversations
    /// wait for a retry; past that, their next append retries.
    fn retry_later(&self, key: (TenantId, ConversationId)) {
        let wait = {
            let mut retries = self.embeddings.retries.lock().unwrap_or_else(|p| p.into_inner());
            if retries.len() >= MAX_QUEUED && !retries.contains_key(&key) {
                return;
            }
            let failures = retries.entry(key.clone()).or_insert(0);
            *failures = failures.saturating_add(1);
            FIRST_RETRY_WAIT
                .saturating_mul(1 << (*failures - 1).min(16))
                .min(MAX_RETRY_WAIT)
        };
        let service = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            service.queue_for_embedding(key);
        });
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
        let mean = self.model_mean(&embedder).await.inspect_err(|_| {
            self.metrics
                .embedding_failures
                .with_label_values(&["passage"])
                .inc();
        })?;
        loop {
            self.yield_to_appends().await;
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
                    let code = centred_code(&vector, Some(&mean));
                    if let (Some(code), Some(vector)) = (code, PassageVector::quantize(&vector)) {
                        vectors.push(MessageVector {
                            sequence,
                            chunk,
                            vector,
                            code,
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

    /// Waits until the replica had no append for [`QUIET`], at most [`MAX_YIELD`].
    async fn yield_to_appends(&self) {
        let started = Instant::now();
        while started.elapsed() < MAX_YIELD {
            let last = *self
                .embeddings
                .last_append
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match last.map(|at| at.elapsed()) {
                Some(quiet) if quiet < QUIET => tokio::time::sleep(QUIET - quiet).await,
                _ => return,
            }
        }
    }

    /// The embedding of a search's `query`, started now, when semantic search is on: the
    /// store reads the term statistics meanwhile.
    pub(super) fn query_embedding(&self, query: &str) -> Option<QueryEmbedding> {
        self.ai.embedder.as_ref()?;
        if let Some(cached) = self.cached_query(query) {
            return Some(QueryEmbedding::ready(cached));
        }
        let (service, query) = (self.clone(), query.to_string());
        Some(QueryEmbedding::spawn(async move {
            service.query_vector(&query).await
        }))
    }

    /// The vector of a search's `query`, if semantic search is on and the endpoint answers:
    /// from the replica's cache when it has it. A failure is counted and leaves the search
    /// lexical.
    pub(super) async fn query_vector(&self, query: &str) -> Option<Arc<QueryVector>> {
        let embedder = self.ai.embedder.as_ref()?;
        if let Some(cached) = self.cached_query(query) {
            return Some(cached);
        }
        let embedded = match self.model_mean(embedder).await {
            Ok(mean) => embedder
                .embed(Kind::Query, &[query])
                .await
                .map(|vectors| (vectors, mean)),
            Err(error) => Err(error),
        };
        match embedded {
            Ok((vectors, mean)) => {
                let vector = Arc::new(QueryVector::new(vectors.first()?, Some(&mean))?);
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
                let error = crate::runtime::telemetry::ErrorChain(&error);
                tracing::warn!(%error, "the query could not be embedded; searching lexically");
                None
            }
        }
    }

    /// The model's mean vector ([`mean_of`] the [`CALIBRATION`] texts), asked for once per
    /// replica (again after a failure). The model is deterministic, so every replica finds
    /// the same one.
    async fn model_mean(&self, embedder: &Embedder) -> Result<Arc<Vec<f32>>, EmbedError> {
        let mean = self
            .embeddings
            .mean
            .get_or_try_init(|| async {
                let vectors = with_retries(embedder, Kind::Passage, &CALIBRATION).await?;
                let mean = mean_of(&vectors).ok_or_else(|| EmbedError::BadAnswer("no mean vector".into()))?;
                Ok::<_, EmbedError>(Arc::new(mean))
            })
            .await?;
        Ok(mean.clone())
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
