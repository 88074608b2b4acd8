//! Semantic search's embeddings (docs/design.md, "Recall"): messages are embedded after append,
//! off the request path, by a few workers per replica that take conversations from a queue and
//! move each one's watermark; a search's query is embedded when it runs (with a small cache),
//! and answered lexically when that fails. An append never waits on the embeddings endpoint
//! and never fails because of it.

use opentelemetry::trace::SpanContext;
use std::{
    collections::{HashSet, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

mod query;
mod refused;

use tracing::Instrument as _;

use super::Service;
use crate::{
    domain::{
        ConversationId, Sequence, StoredMessage, TenantId,
        search::{
            searchable_text,
            vectors::{PassageVector, QueryVector, centred_code, chunks},
        },
    },
    models::embeddings::{EmbedError, Embedder, Kind},
    runtime::response_budget::ResponseBudget,
    store::{EmbeddingBatch, MessageVector, StoreError},
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
/// The longest `Retry-After` honoured: a longer one is waited this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Who the replica's own embedding work (the model's mean) is counted for in the CPU pool and
/// the response budget.
const CALIBRATION_OWNER: &str = "ctxd:embeddings";

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
    /// True while a background task learns the mean.
    learning: std::sync::atomic::AtomicBool,
    /// Messages whose texts the endpoint refused, by conversation, to be tried again rarely.
    refused: Mutex<refused::Refused>,
}

#[derive(Debug, Default)]
struct QueueState {
    /// Conversations in the order they were queued, with when, and the traced call that
    /// queued them (their backlog's trace links to it).
    waiting: VecDeque<(TenantId, ConversationId, Instant, Option<SpanContext>)>,
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
            let queued_by = crate::runtime::traces::current_link();
            state.waiting.push_back((key.0, key.1, Instant::now(), queued_by));
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
                state.waiting.front().map(|(_, _, queued, _)| *queued + SETTLE)
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
                    .is_some_and(|(_, _, queued, _)| *queued + SETTLE > Instant::now())
                {
                    continue;
                }
                let next = state.waiting.pop_front();
                match &next {
                    Some((tenant, conversation, _, _)) => {
                        state.queued.remove(&(tenant.clone(), conversation.clone()));
                    }
                    None => state.workers -= 1,
                }
                self.metrics.embedding_queue.set(state.waiting.len() as i64);
                next
            };
            let Some((tenant, conversation, _, queued_by)) = next else {
                return;
            };
            self.metrics.embedding_workers.inc();
            let key = (tenant.clone(), conversation.clone());
            let span = tracing::info_span!(
                target: crate::runtime::traces::SPAN_TARGET,
                parent: None,
                "embed_backlog",
                ctxd.tenant = %tenant,
                gen_ai.conversation.id = %conversation,
            );
            let span = crate::runtime::traces::linked(span, queued_by);
            match self.embed_backlog(&tenant, &conversation).instrument(span).await {
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
    /// left, with the refused messages whose next try is due. A batch whose log changed
    /// meanwhile (a rewind, a redaction, another replica) is read again. A message the
    /// endpoint refuses is skipped ([`refused`]); only a failure of the endpoint itself
    /// (unreachable, busy, failing) stops the backlog, to be tried again later.
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
        let key = (tenant.clone(), conversation.clone());
        let mut late = self.lock_refused().take_due(&key);
        loop {
            self.yield_to_appends().await;
            let backlog = self
                .store
                .embedding_backlog(tenant, conversation, BATCH_MESSAGES, BATCH_BYTES)
                .await?;
            let Some(backlog) = backlog else {
                return Ok(());
            };
            if backlog.through <= backlog.after && late.is_empty() {
                return Ok(());
            }
            let texts = Texts::of(&backlog.messages);
            let embedded = self.embed_or_skip(&embedder, &texts.texts, tenant).await?;
            let (vectors, refused) = texts.vectors(embedded, &mean);
            let (late_vectors, late_refused) = self
                .embed_late(&embedder, &mean, tenant, conversation, &late)
                .await?;
            let batch = EmbeddingBatch {
                version: backlog.version,
                after: backlog.after,
                through: backlog.through,
                vectors,
                late: late_vectors,
            };
            if !self.store.store_embeddings(tenant, conversation, &batch).await? {
                continue;
            }
            self.count_embedded(&backlog.messages, &refused);
            let refused = refused.into_iter().map(|s| (s, 0)).chain(late_refused);
            self.keep_refused(tenant, conversation, refused);
            late = Vec::new();
            if backlog.through <= backlog.after {
                return Ok(());
            }
        }
    }

    /// `texts` embedded, each `None` where the endpoint refused that text ([`EmbedError::refuses_input`]):
    /// a refused request is split in halves until the texts refused alone are found, so one bad
    /// text never stops its neighbours. Any other failure fails the whole.
    async fn embed_or_skip(
        &self,
        embedder: &Embedder,
        texts: &[String],
        tenant: &TenantId,
    ) -> Result<Vec<Option<Vec<f32>>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        let mut pending: Vec<&[String]> = texts.chunks(TEXTS_PER_REQUEST).rev().collect();
        while let Some(part) = pending.pop() {
            let refs: Vec<&str> = part.iter().map(String::as_str).collect();
            let budget = &self.response_budget;
            match with_retries(embedder, Kind::Passage, &refs, budget, tenant.as_str()).await {
                Ok(vectors) => out.extend(vectors.into_iter().map(Some)),
                Err(error) if error.refuses_input() && part.len() > 1 => {
                    let (first, second) = part.split_at(part.len() / 2);
                    pending.extend([second, first]);
                }
                Err(error) if error.refuses_input() => {
                    let reason = match error {
                        EmbedError::Dimensions { .. } => "dimensions",
                        _ => "input",
                    };
                    self.metrics.embedding_refused.with_label_values(&[reason]).inc();
                    out.push(None);
                }
                Err(error) => {
                    self.metrics
                        .embedding_failures
                        .with_label_values(&["passage"])
                        .inc();
                    return Err(error);
                }
            }
        }
        Ok(out)
    }

    /// The vectors of refused messages tried again, and those refused again (with their
    /// tries); a message gone meanwhile (rewound, redacted) is dropped.
    async fn embed_late(
        &self,
        embedder: &Embedder,
        mean: &[f32],
        tenant: &TenantId,
        conversation: &ConversationId,
        late: &[(Sequence, u32)],
    ) -> Result<(Vec<MessageVector>, Vec<(Sequence, u32)>), EmbeddingError> {
        let mut messages = Vec::new();
        for &(sequence, _) in late {
            let after = Sequence::from_stored(sequence.as_i64() - 1);
            let page = self
                .store
                .list_messages(tenant, conversation, after, 1, BATCH_BYTES)
                .await?;
            messages.extend(page.messages.into_iter().filter(|m| m.sequence == sequence));
        }
        let texts = Texts::of(&messages);
        let embedded = self.embed_or_skip(embedder, &texts.texts, tenant).await?;
        let (vectors, refused) = texts.vectors(embedded, mean);
        let tries = |s: Sequence| late.iter().find(|(l, _)| *l == s).map_or(0, |(_, t)| t + 1);
        Ok((vectors, refused.into_iter().map(|s| (s, tries(s))).collect()))
    }

    /// Counts a stored batch: the messages that have their vectors, and each one's lag.
    fn count_embedded(&self, messages: &[StoredMessage], refused: &[Sequence]) {
        let now = SystemTime::now();
        let embedded: Vec<&StoredMessage> = messages
            .iter()
            .filter(|m| !refused.contains(&m.sequence))
            .collect();
        self.metrics.embedded_messages.inc_by(embedded.len() as u64);
        for message in embedded {
            let lag = now.duration_since(message.created_at).unwrap_or_default();
            self.metrics.embedding_lag.observe(lag.as_secs_f64());
        }
    }

    /// Keeps refused messages to try again, and queues the conversation when their try is due.
    fn keep_refused(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        refused: impl IntoIterator<Item = (Sequence, u32)>,
    ) {
        let refused: Vec<(Sequence, u32)> = refused.into_iter().collect();
        if refused.is_empty() {
            return;
        }
        for (sequence, tries) in &refused {
            tracing::warn!(%tenant, %conversation, sequence = sequence.get(), tries, "the embeddings endpoint refused a message; it is skipped and tried again later");
        }
        let key = (tenant.clone(), conversation.clone());
        let Some(due) = self.lock_refused().keep(&key, refused) else {
            return;
        };
        let service = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(due.into()).await;
            service.queue_for_embedding(key);
        });
    }

    fn lock_refused(&self) -> std::sync::MutexGuard<'_, refused::Refused> {
        self.embeddings.refused.lock().unwrap_or_else(|p| p.into_inner())
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
}

/// `texts` embedded, retrying with backoff what retrying can help, and waiting as long as
/// the endpoint's `Retry-After` asks (at most [`MAX_RETRY_AFTER`]).
async fn with_retries(
    embedder: &Embedder,
    kind: Kind,
    texts: &[&str],
    budget: &ResponseBudget,
    owner: &str,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut wait = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match embedder.embed(kind, texts, budget, owner).await {
            Ok(vectors) => return Ok(vectors),
            Err(error) if attempt < ATTEMPTS && error.retryable() => {
                let asked = error
                    .retry_after()
                    .map_or(Duration::ZERO, |d| d.min(MAX_RETRY_AFTER));
                tokio::time::sleep(wait.max(asked)).await;
                wait *= 2;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// A batch's texts: each message's chunks, with whose chunk each is.
struct Texts {
    keys: Vec<(Sequence, u16)>,
    texts: Vec<String>,
}

impl Texts {
    fn of(messages: &[StoredMessage]) -> Self {
        let mut keys = Vec::new();
        let mut texts = Vec::new();
        for message in messages {
            let text = searchable_text(&message.message);
            for (i, chunk) in chunks(&text).into_iter().enumerate() {
                keys.push((message.sequence, i as u16));
                texts.push(chunk.to_string());
            }
        }
        Self { keys, texts }
    }

    /// The stored form of `embedded` (in the order of the texts), and the messages with a
    /// refused chunk, whose other chunks are left out too.
    fn vectors(&self, embedded: Vec<Option<Vec<f32>>>, mean: &[f32]) -> (Vec<MessageVector>, Vec<Sequence>) {
        let mut refused: Vec<Sequence> = Vec::new();
        let mut vectors = Vec::new();
        for (&(sequence, chunk), vector) in self.keys.iter().zip(embedded) {
            let stored = vector.and_then(|vector| {
                let code = centred_code(&vector, Some(mean))?;
                Some((PassageVector::quantize(&vector)?, code))
            });
            match stored {
                Some((vector, code)) => vectors.push(MessageVector {
                    sequence,
                    chunk,
                    vector,
                    code,
                }),
                None if !refused.contains(&sequence) => refused.push(sequence),
                None => {}
            }
        }
        vectors.retain(|v| !refused.contains(&v.sequence));
        (vectors, refused)
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
