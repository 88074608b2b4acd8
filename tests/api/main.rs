//! Integration tests: the real server over gRPC, on both stores.
#![allow(unreachable_pub)]

mod helpers;

mod append;
mod attachments;
mod auth;
mod bound_summaries;
mod cache;
mod changes;
mod compaction;
mod conformance;
mod connect;
mod connect_stream;
mod context;
mod conversations;
mod embeddings;
mod fact_retention;
mod group_commit;
mod hardening;
mod hostile_embeddings;
#[path = "../support/hostile_endpoint.rs"]
#[allow(dead_code, unreachable_pub)]
mod hostile_endpoint;
mod message_cache;
mod messages;
mod native;
mod observability;
mod openai;
mod outage;
mod real_model;
mod reasoning;
mod recall_excerpts;
mod redaction_storm;
mod response_limits;
mod search;
mod server;
mod store_contract;
mod summary;
mod tenancy;
mod tls;
mod tokenize;
mod tokenizers;
mod traces;
mod validation;
mod working_memory;
