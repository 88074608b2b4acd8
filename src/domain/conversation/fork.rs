//! What a fork copies (docs/design.md, "Conversations as resources"): the stores look up the
//! source's state ([`ForkSource`]), [`ForkPlan::decide`] refuses or says what the fork starts
//! with, and the stores copy the log up to [`ForkPlan::through`] and write the rest; [`fork`]
//! runs that sequence over each store's [`ForkTx`].

use std::future::Future;

use crate::domain::{
    Message, Role, Sequence, summary::Summary, violation::Violations, working_memory::WorkingMemory,
};

/// Why a log cannot be forked at a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkRefusal {
    /// The sequence is past the log's end.
    PastEnd {
        /// The log's last sequence.
        last: Sequence,
    },
    /// A tool result after the sequence answers a call at or before it.
    InsideToolGroup,
}

impl ForkRefusal {
    /// The field violation it answers with.
    pub fn violations(self) -> Violations {
        let description = match self {
            ForkRefusal::PastEnd { last } => {
                format!("is past the end of the conversation (last sequence {last})")
            }
            ForkRefusal::InsideToolGroup => "is inside a tool-call group: a call at or before it \
                 is answered after it; fork before the call or after its last result"
                .to_owned(),
        };
        Violations::single("through_sequence", description)
    }
}

/// What a store looked up about the source conversation to fork it.
#[derive(Debug, Clone)]
pub struct ForkSource {
    /// The source's last sequence.
    pub last: Sequence,
    /// A call at or before the fork point whose result comes after it, if the store found one
    /// (the fork would split its tool-call group).
    pub split_call: Option<Sequence>,
    /// The newest summary version whose watermark is at or before the fork point.
    pub summary: Option<Summary>,
    /// The source's working memory.
    pub memory: Option<WorkingMemory>,
}

/// What a fork through a sequence starts with, besides the log it copies.
#[derive(Debug, Clone)]
pub struct ForkPlan {
    /// Messages, their tool-call bookkeeping and log positions at or before this are copied.
    pub through: Sequence,
    /// The fork's summary: the source's newest within the copy, as the fork's version 1.
    pub summary: Option<Summary>,
    /// The working memory items whose provenance lies within the copy ([`memory_within`]).
    pub memory: Option<WorkingMemory>,
}

impl ForkPlan {
    /// Refuses a fork past the end or inside a tool-call group; otherwise says what it starts
    /// with.
    pub fn decide(through: Sequence, source: ForkSource) -> Result<Self, ForkRefusal> {
        if through > source.last {
            return Err(ForkRefusal::PastEnd { last: source.last });
        }
        if source.split_call.is_some_and(|call| call <= through) {
            return Err(ForkRefusal::InsideToolGroup);
        }
        let summary = source
            .summary
            .filter(|s| s.through_sequence <= through)
            .map(|s| Summary { version: 1, ..s });
        let memory = source.memory.and_then(|m| memory_within(&m, through));
        Ok(Self {
            through,
            summary,
            memory,
        })
    }

    /// Whether the copied message counts as the fork's newest user message when it is the
    /// newest such: a user message in context, as appends count it.
    pub fn opens_user_turn(message: &Message) -> bool {
        message.role == Role::User && !message.exclude_from_context
    }

    /// The response id the fork continues from when the copied message is the newest to carry
    /// one: an assistant message's.
    pub fn response_id(message: &Message) -> Option<&str> {
        (message.role == Role::Assistant && !message.response_id.is_empty())
            .then_some(message.response_id.as_str())
    }
}

/// One fork's transaction, as a store runs it: the source locked while it is read, the fork
/// written in the same transaction (the store commits after [`fork`] returns).
pub trait ForkTx: Send {
    /// What the store makes of a written fork.
    type Forked: Send;
    /// The store's error; refusals of the plan become one.
    type Error: From<ForkRefusal> + Send;

    /// Locks the source and reads what [`ForkPlan::decide`] needs to fork it through
    /// `through`.
    fn read_source(
        &mut self,
        through: Sequence,
    ) -> impl Future<Output = Result<ForkSource, Self::Error>> + Send;

    /// Creates the fork as `plan` says.
    fn write(&mut self, plan: ForkPlan) -> impl Future<Output = Result<Self::Forked, Self::Error>> + Send;
}

/// Forks through `through` by `tx`: reads the source, decides, writes the plan.
pub async fn fork<T: ForkTx>(mut tx: T, through: Sequence) -> Result<T::Forked, T::Error> {
    let source = tx.read_source(through).await?;
    let plan = ForkPlan::decide(through, source)?;
    tx.write(plan).await
}

/// The working memory a fork through `through` starts with: only the items and glossary
/// entries whose every source lies within it; a superseding item that is left out no longer
/// supersedes; the prose summary only if the memory did not read past `through`. `None` when
/// nothing is left.
pub fn memory_within(memory: &WorkingMemory, through: Sequence) -> Option<WorkingMemory> {
    let mut forked = memory.clone();
    forked.retain_sources(|s| s <= through);
    if forked.through_sequence > through {
        forked.summary.clear();
        forked.through_sequence = through;
    }
    forked.version = 1;
    (!forked.is_empty()).then_some(forked)
}
