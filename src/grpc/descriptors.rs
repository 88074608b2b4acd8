//! The descriptors of every message ctxd serves, decoded once from the compiled descriptor
//! sets: the Connect protocol transcodes with them, and request bodies are bounded with them
//! before they are decoded (`entries`).

use std::sync::OnceLock;

use prost_reflect::DescriptorPool;

/// Every service the Connect protocol reaches: ctxd's, health, and google.rpc for error
/// details.
pub(crate) fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut pool = DescriptorPool::new();
        for set in [
            crate::proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_types::pb::FILE_DESCRIPTOR_SET,
        ] {
            pool.decode_file_descriptor_set(set)
                .expect("the compiled descriptors decode");
        }
        pool
    })
}
