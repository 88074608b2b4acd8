//! Generated code for the `ctxd.v1` contract. Nothing hand-written lives here.
#![allow(missing_docs, unreachable_pub, missing_debug_implementations, clippy::all)]

tonic::include_proto!("ctxd.v1");

/// Encoded file descriptor set of `ctxd.v1`, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("ctxd_descriptor");
