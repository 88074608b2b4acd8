//! Integration tests: the real server over gRPC, on both stores.
#![allow(unreachable_pub)]

mod helpers;

mod append;
mod cache;
mod context;
mod conversations;
mod log;
mod memory;
mod openai;
mod production;
mod real_model;
mod reasoning;
mod retention;
mod server;
mod store_contract;
mod summary;
mod tenancy;
mod tls;
mod tokenize;
mod validation;
