//! Runtime plumbing every layer stands on and none of them decides with: CPU-heavy work off the
//! async workers ([`cpu`]), a call's deadline ([`deadline`]), the listener and its connection
//! limits ([`net`]), the replica's memory for responses and parses ([`response_budget`]), logging ([`telemetry`]) and traces ([`traces`]). Nothing here knows a conversation.

pub mod cpu;
pub mod deadline;
pub mod net;
pub mod response_budget;
pub mod telemetry;
pub mod traces;
