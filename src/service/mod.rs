//! The application layer: one function per use case (append, build context, summarize, working
//! memory, list, delete, count tokens), taking domain types and the [`Store`], returning domain
//! results. No tonic here: the gRPC handlers parse, call one of these, and convert the answer.
//! Background work (auto summarization) runs in a tracked task set that shutdown drains.

use std::sync::Arc;

use crate::{
    domain::Violations,
    models::summarize::ModelError,
    runtime::response_budget::{Refusal, ResponseBudget},
    service::metrics::UseCaseMetrics,
    store::{Store, StoreError},
};

mod auto_summary;
mod background;
mod bind_results;
mod change_metrics;
mod change_window;
mod changes;
mod conversations;
mod embeddings;
mod late_counts;
mod messages;
pub mod metrics;
mod packing;
pub mod retention;
mod search;
mod settings;
mod summary;
mod tenant_slots;
mod working_memory;

pub use background::BackgroundTasks;
pub use changes::{Watch, WatchEvent, WatchRequest};
pub use messages::{DEFAULT_PAGE_SIZE, JsonMemory, MAX_PAGE_SIZE, MessagesOutcome};
pub use packing::ContextOutcome;
pub use search::{DEFAULT_SEARCH_PAGE, MAX_SEARCH_PAGE, SearchHit, SearchOutcome, SearchRequest};
pub use settings::{AiSettings, AutoSummarize, Limits};
pub use summary::{PreparedRequest, SummarizeMode, SummarizeOutcome, SummarizeRequest};
pub use working_memory::{MemoryMode, MemoryOutcome};

use tenant_slots::TenantSlots;

/// Forks one tenant may run at once on a replica: a fork copies rows, and one tenant's burst of
/// forks must not take the database pool from every other call.
pub const FORKS_PER_TENANT: usize = 2;

/// Searches one tenant runs at once on a replica; the others wait their turn, at most
/// [`SEARCH_QUEUE_WAIT`]. A search of a long conversation ranks thousands of candidates, and
/// one tenant's storm of them must not take every core from the others' calls (measured: 16
/// clients searching a 100k-message conversation raised another tenant's append and
/// BuildContext p99 5-7x; docs/reliability.md).
pub const SEARCHES_PER_TENANT: usize = 1;

/// How long a search waits for its tenant's running one before RESOURCE_EXHAUSTED.
pub const SEARCH_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Texts and requests larger than this are tokenized on the blocking pool, off the async
/// workers.
pub const OFFLOAD_BYTES: usize = 64 * 1024;

/// Why a use case failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or contradicts the stored conversation; nothing was stored.
    #[error("invalid request: {violations}")]
    InvalidArgument {
        /// What is wrong, by field.
        violations: Violations,
    },
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The call would need more memory than it may have, or than the replica has free now.
    #[error("the call's response budget was refused")]
    ResponseBudget {
        /// Which limit refused it.
        #[from]
        refusal: Refusal,
    },
    /// A pack and its rendering would be larger than the largest response a call may send.
    #[error("the pack and its rendering would be {bytes} bytes; the limit is {limit}")]
    PackTooLarge {
        /// The size the response would have.
        bytes: usize,
        /// The configured largest response.
        limit: usize,
    },
    /// The tenant runs as many calls of this kind at once as it may on this replica.
    #[error("the tenant already runs {limit} {what} at once on this replica")]
    TenantBusy {
        /// What kind of call, plural ("forks").
        what: &'static str,
        /// How many one tenant may run at once.
        limit: usize,
    },
    /// A change feed cursor older than the changes kept: the consumer must resync.
    #[error("the cursor is older than the changes kept")]
    CursorExpired {
        /// How long changes are kept (`CTXD_CHANGES_RETENTION`).
        retention: std::time::Duration,
        /// The cursor before the oldest change kept, if any.
        oldest: Option<String>,
    },
    /// The replica is shutting down: a stream it served ends (resume elsewhere).
    #[error("the replica is shutting down")]
    ShuttingDown,
    /// The summarizer or extractor failed; the stored state is unchanged.
    #[error(transparent)]
    Model(#[from] ModelError),
}

impl From<Violations> for ServiceError {
    fn from(violations: Violations) -> Self {
        ServiceError::InvalidArgument { violations }
    }
}

/// The use cases over one store. Cheap to clone: everything is shared.
#[derive(Debug, Clone)]
pub struct Service {
    store: Arc<dyn Store>,
    limits: Limits,
    response_budget: ResponseBudget,
    ai: AiSettings,
    tasks: Arc<BackgroundTasks>,
    /// Forks each tenant runs at once on this replica.
    forks: Arc<TenantSlots>,
    /// Searches each tenant runs at once on this replica.
    searches: Arc<TenantSlots>,
    /// What the use cases count: this service's own, never shared with another.
    metrics: Arc<UseCaseMetrics>,
    /// Conversations waiting to be embedded, and the query vectors this replica made.
    embeddings: Arc<embeddings::EmbeddingQueue>,
    /// The replica's WatchChanges streams.
    watchers: Arc<changes::Watchers>,
}

impl Service {
    /// The use cases over `store`.
    pub fn new(store: Arc<dyn Store>, limits: Limits, ai: AiSettings) -> Self {
        Self {
            store,
            response_budget: limits.response_budget(),
            limits,
            ai,
            tasks: Arc::new(BackgroundTasks::default()),
            forks: TenantSlots::new(FORKS_PER_TENANT),
            searches: TenantSlots::new(SEARCHES_PER_TENANT),
            metrics: Arc::new(UseCaseMetrics::new()),
            embeddings: Arc::default(),
            watchers: Arc::new(changes::Watchers::new(Default::default())),
        }
    }

    /// The service with the change feed's settings.
    pub fn with_changes(mut self, options: crate::config::ChangeOptions) -> Self {
        self.watchers = Arc::new(changes::Watchers::new(options));
        self
    }

    /// What the use cases count, for the server's metrics and the retention sweeper.
    pub fn metrics(&self) -> &Arc<UseCaseMetrics> {
        &self.metrics
    }

    /// Request limits and defaults, for parsing.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The replica's memory for what calls load, answer and receive (request bodies count
    /// into it too, see `grpc::request_body`).
    pub fn response_budget(&self) -> &ResponseBudget {
        &self.response_budget
    }

    /// `max_summary_tokens` when a request leaves it at 0.
    pub fn default_summary_tokens(&self) -> usize {
        self.ai.max_summary_tokens
    }

    /// The background tasks, for shutdown to drain.
    pub fn background(&self) -> &BackgroundTasks {
        &self.tasks
    }
}

/// Runs CPU work proportional to `bytes` on the CPU pool ([`crate::runtime::cpu`]) when large, inline
/// when small.
pub(crate) async fn offload<T: Send + 'static>(
    owner: &str,
    bytes: usize,
    work: impl FnOnce(&crate::runtime::cpu::Cancel) -> T + Send + 'static,
) -> T {
    if bytes > OFFLOAD_BYTES {
        crate::runtime::cpu::run(owner, work).await
    } else {
        work(&crate::runtime::cpu::Cancel::default())
    }
}
