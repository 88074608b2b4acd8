//! API keys: stored as SHA-256 hashes, compared in constant time, each acting for one tenant.
//! The transport ([`crate::grpc::tenant`]) reads the key off a call; this module knows keys.
//! Their configured form (`sha256hex=tenant`) is parsed with the rest of the configuration.

use sha2::{Digest, Sha256};

use crate::domain::TenantId;

/// One configured API key: the SHA-256 of the key and the tenant it acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    /// The tenant the key acts for.
    pub tenant: TenantId,
}

/// Why a key could never be presented, so hashing it would configure a key nobody can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// An empty header value is no key.
    #[error("an API key must not be empty")]
    Empty,
    /// HTTP header values lose surrounding whitespace and carry only visible ASCII.
    #[error(
        "an API key must be visible ASCII without spaces (HTTP headers trim whitespace and refuse \
         other bytes)"
    )]
    NotVisibleAscii,
}

impl ApiKey {
    /// The key `key` acting for `tenant`: for whoever holds a key itself (tests, tools), where
    /// configuration holds only its hash.
    pub fn from_key(key: &str, tenant: TenantId) -> Self {
        Self {
            hash: Sha256::digest(key.as_bytes()).into(),
            tenant,
        }
    }

    /// Checks that `key` can be presented: a key outside `!`..=`~` could never match its hash.
    pub fn check_key(key: &str) -> Result<(), KeyError> {
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(KeyError::NotVisibleAscii);
        }
        Ok(())
    }

    /// The SHA-256 hex of a key, as configured (`ctxd hash-key`).
    pub fn hash_hex(key: &str) -> String {
        Sha256::digest(key.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The tenant of the configured key whose hash matches `presented`, if any. Every entry is
    /// compared, so timing does not reveal which one matched.
    pub fn tenant_of<'a>(keys: &'a [ApiKey], presented: &str) -> Option<&'a TenantId> {
        let hash: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        keys.iter().fold(None, |found, k| {
            if constant_time_eq(&k.hash, &hash) {
                Some(&k.tenant)
            } else {
                found
            }
        })
    }
}

/// Compares two hashes in time independent of where they differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
