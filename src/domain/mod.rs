//! Pure domain logic: identifiers, messages, and the rules of appending to a conversation.
//! No tokio, tonic or SQL here; the transport and the stores build on these types.
//!
//! Three floors (docs/design.md, "Architecture"): the vocabulary (`ids`, `violation`, `usage`,
//! `reasoning`, `format`, `token_counts`, `native_content`, `message`) imports nothing above
//! it; the rules over it (`attachments`, `changes`, `native` parsing, `tool_protocol`, `search`,
//! `summary`, `working_memory`) import the vocabulary; and what uses the rules (`context`
//! packing and rendering, `append`, `conversation`) stands on both.

pub mod append;
pub mod attachments;
pub mod changes;
pub mod context;
pub mod conversation;
pub mod format;
pub mod ids;
pub mod message;
pub mod native;
pub mod native_content;
pub mod reasoning;
pub mod search;
pub mod summary;
pub mod token_counts;
pub mod tokenize;
pub mod tool_protocol;
pub mod usage;
pub mod violation;
pub mod working_memory;

pub use append::{
    AppendLimits, AppendOutcome, AppendPlan, AppendRejection, AppendState, CountedBatch, CountedMessage,
    IdempotencyRecord, ParsedBatch, ParsedMessage, PayloadHash, WritePlan,
};
pub use ids::{ConversationId, IdempotencyKey, Sequence, TenantId};
pub use message::{
    Attachment, AttachmentSource, Block, LlmError, Message, Provider, Reasoning, ReasoningKind, Role,
    StoredMessage, ToolCall, Usage,
};
pub use tool_protocol::{CallState, KnownCall, ToolEffects};
pub use violation::{FieldViolation, Violations};
