//! API keys: stored as SHA-256 hashes, compared in constant time, each acting for one tenant.
//! The transport ([`crate::grpc::tenant`]) reads the key off a call; this module knows keys.

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

impl ApiKey {
    /// Parses `sha256hex=tenant` (also `sha256hex tenant`, the key-file line format).
    pub fn parse(entry: &str) -> Result<Self, String> {
        let (hash, tenant) = entry
            .trim()
            .split_once(['=', ' ', '\t'])
            .ok_or_else(|| format!("API key entry {entry:?} is not `sha256hex=tenant`"))?;
        let bytes = decode_hex(hash.trim()).ok_or("an API key hash must be 64 hex characters (SHA-256)")?;
        Ok(Self {
            hash: bytes,
            tenant: TenantId::parse(tenant.trim())?,
        })
    }

    /// Checks that `key` can be presented: HTTP header values lose surrounding whitespace and
    /// carry only visible ASCII, so a key outside `!`..=`~` could never match its hash.
    pub fn check_key(key: &str) -> Result<(), String> {
        if key.is_empty() {
            return Err("an API key must not be empty".into());
        }
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "an API key must be visible ASCII without spaces (HTTP headers trim whitespace and refuse other bytes)"
                    .into(),
            );
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
}

fn decode_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Compares two hashes in time independent of where they differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl ApiKey {
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
