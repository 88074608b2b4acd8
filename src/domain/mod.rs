//! Pure domain logic: identifiers, messages, and the rules of appending to a conversation.
//! No tokio, tonic or SQL here; the transport and the stores build on these types.

pub mod append;
pub mod attachments;
pub mod context;
pub mod conversation;
pub mod ids;
pub mod message;
pub mod native;
pub mod reasoning;
pub mod search;
pub mod summary;
pub mod tool_protocol;
pub mod usage;
pub mod violation;
pub mod working_memory;

pub use append::{
    AppendBatch, AppendLimits, AppendOutcome, AppendPlan, AppendRejection, AppendState, IdempotencyRecord,
    PayloadHash, WritePlan,
};
pub use ids::{ConversationId, IdempotencyKey, Sequence, TenantId};
pub use message::{
    Attachment, AttachmentSource, Block, LlmError, Message, Provider, Reasoning, ReasoningKind, Role,
    StoredMessage, ToolCall, Usage,
};
pub use tool_protocol::{CallState, KnownCall, ToolEffects};
pub use violation::{FieldViolation, Violations};
