//! The outside models ctxd calls: an OpenAI-compatible embeddings endpoint ([`embeddings`]) and
//! the summarizers and extractors ([`summarize`]: embedded, or an OpenAI-compatible endpoint).
//! Each treats its endpoint as a possible adversary: bounded, timed out, never trusted.

pub mod embeddings;
pub mod summarize;
