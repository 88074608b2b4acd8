//! Compiles the `ctxd.v1` contract with tonic-prost-build and writes the file descriptor set that
//! server reflection serves. protoc comes from `protoc-bin-vendored` unless `PROTOC` is set, so a
//! fresh machine needs no system protobuf compiler.

use std::{env, path::PathBuf};

const PROTOS: &[&str] = &[
    "proto/ctxd/v1/messages.proto",
    "proto/ctxd/v1/context.proto",
    "proto/ctxd/v1/memory.proto",
    "proto/ctxd/v1/conversations.proto",
    "proto/ctxd/v1/context_service.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    let protoc = match env::var_os("PROTOC") {
        Some(path) => PathBuf::from(path),
        None => protoc_bin_vendored::protoc_bin_path()?,
    };
    config.protoc_executable(protoc);
    // `prost::Name` on every message: the codec finds a request's descriptor by its name
    // (src/grpc/codec.rs).
    config.enable_type_names();
    let wkt_include = protoc_bin_vendored::include_path()?;
    let includes = [PathBuf::from("proto"), wkt_include];
    let protos: Vec<PathBuf> = PROTOS.iter().map(PathBuf::from).collect();

    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("ctxd_descriptor.bin"))
        // BTreeMap keeps metadata encoding (and so idempotency hashes and renders) deterministic.
        .btree_map(".ctxd.v1.Message.metadata")
        .btree_map(".ctxd.v1.Conversation.labels")
        .btree_map(".ctxd.v1.ListConversationsRequest.labels")
        // Malformed request bytes are INVALID_ARGUMENT, not INTERNAL (src/grpc/codec.rs).
        .codec_path("crate::grpc::codec::StrictCodec")
        .compile_with_config(config, &protos, &includes)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
