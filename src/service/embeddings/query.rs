//! A search's query vector (docs/design.md, "Recall"): embedded when the search runs, within a
//! short budget of its own (`CTXD_EMBEDDINGS_QUERY_TIMEOUT_MS`, less when the call's deadline
//! leaves less), and answered lexically past it; the model's mean vector, which a query's code
//! is centred on, is learned off the request path. A search never waits on the endpoint for
//! longer than its budget, and never holds its tenant's search slot while it waits.

use std::{num::NonZeroUsize, sync::Arc, sync::atomic::Ordering, time::Duration};
use tracing::Instrument as _;

use super::{CALIBRATION_OWNER, with_retries};
use crate::{
    domain::{
        TenantId,
        search::vectors::{QueryVector, mean_of},
    },
    models::embeddings::{EmbedError, Embedder, Kind},
    runtime::deadline::Deadline,
    service::Service,
    store::QueryEmbedding,
};

/// Queries whose vectors a replica keeps (the pages of one search, repeated recall queries).
const QUERY_CACHE: usize = 1_024;
/// Of what the call's deadline leaves, the share a query's vector may take: the rest is the
/// lexical search's.
const DEADLINE_SHARE: u32 = 4;
/// The wait before the mean is asked for again after a failure.
const MEAN_RETRY: Duration = Duration::from_secs(5);

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

impl Service {
    /// The embedding of a search's `query`, started now when semantic search is on, and
    /// settled (a vector, or none: the search is lexical) within the query budget or the
    /// share of `deadline` left for it, whichever is sooner.
    pub(in crate::service) fn query_embedding(
        &self,
        tenant: &TenantId,
        query: &str,
        deadline: Option<&Deadline>,
    ) -> Option<QueryEmbedding> {
        let embedder = self.ai.embedder.as_ref()?;
        if let Some(cached) = self.cached_query(query) {
            return Some(QueryEmbedding::ready(cached));
        }
        let mut budget = embedder.options().query_timeout;
        if let Some(deadline) = deadline {
            budget = budget.min(deadline.work_left() / DEADLINE_SHARE);
        }
        let (service, query, owner) = (self.clone(), query.to_string(), tenant.clone());
        // The call's span goes along: the embeddings call is part of its trace.
        let work = async move {
            match tokio::time::timeout(budget, service.query_vector(&owner, &query)).await {
                Ok(vector) => vector,
                Err(_) => {
                    service.lexical_fallback("timeout");
                    None
                }
            }
        };
        Some(QueryEmbedding::spawn(crate::runtime::traces::carried(work)))
    }

    /// The vector of a search's `query`, if semantic search is on, the model's mean is known
    /// and the endpoint answers: from the replica's cache when it has it. Without the mean, the
    /// search is lexical and the mean is asked for in the background.
    async fn query_vector(&self, tenant: &TenantId, query: &str) -> Option<Arc<QueryVector>> {
        let embedder = self.ai.embedder.clone()?;
        if let Some(cached) = self.cached_query(query) {
            return Some(cached);
        }
        let Some(mean) = self.embeddings.mean.get().cloned() else {
            self.learn_model_mean();
            self.lexical_fallback("model_mean_unknown");
            return None;
        };
        let owner = tenant.as_str();
        match embedder
            .embed(Kind::Query, &[query], &self.response_budget, owner)
            .await
        {
            Ok(vectors) => {
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
                self.lexical_fallback("failed");
                let error = crate::runtime::telemetry::ErrorChain(&error);
                tracing::warn!(%error, "the query could not be embedded; searching lexically");
                None
            }
        }
    }

    /// Counts a search answered lexically though semantic search is on, by why.
    fn lexical_fallback(&self, reason: &str) {
        self.metrics
            .search_lexical_fallback
            .with_label_values(&[reason])
            .inc();
    }

    /// Starts learning the model's mean in the background, unless it is known or being
    /// learned: at start-up, and whenever a search finds it unknown.
    pub fn learn_model_mean(&self) {
        let Some(embedder) = self.ai.embedder.clone() else {
            return;
        };
        if self.embeddings.mean.get().is_some() || self.embeddings.learning.swap(true, Ordering::AcqRel) {
            return;
        }
        let service = self.clone();
        let span = tracing::info_span!(
            target: crate::runtime::traces::SPAN_TARGET,
            parent: None,
            "learn_model_mean"
        );
        let work = async move {
            while service.model_mean(&embedder).await.is_err() {
                tokio::time::sleep(MEAN_RETRY).await;
            }
            service.embeddings.learning.store(false, Ordering::Release);
        };
        tokio::spawn(work.instrument(span));
    }

    /// The model's mean vector ([`mean_of`] the [`CALIBRATION`] texts), asked for once per
    /// replica (again after a failure). The model is deterministic, so every replica finds
    /// the same one. Only background work waits for it.
    pub(super) async fn model_mean(&self, embedder: &Embedder) -> Result<Arc<Vec<f32>>, EmbedError> {
        let mean = self
            .embeddings
            .mean
            .get_or_try_init(|| async {
                let budget = &self.response_budget;
                let vectors =
                    with_retries(embedder, Kind::Passage, &CALIBRATION, budget, CALIBRATION_OWNER).await?;
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
