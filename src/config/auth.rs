//! Who may call: API keys (stored as SHA-256 hashes, compared in constant time, each acting for
//! one tenant), or, with none configured, whoever names a tenant in `x-tenant-id`. The
//! transport ([`crate::grpc::tenant`]) reads the key off a call; this module knows keys.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::domain::TenantId;

use super::problem::{ConfigProblem, KeyEntryError, KeyOrigin, Problems};

/// API key and default tenant settings.
#[derive(Debug, Clone, clap::Args)]
pub struct AuthArgs {
    /// API keys as comma-separated `sha256hex=tenant` pairs (`ctxd hash-key KEY` prints the
    /// hash). With any key configured, every call needs one; without, auth is off and the
    /// x-tenant-id header is trusted.
    #[arg(
        long,
        env = "CTXD_API_KEYS",
        hide_env_values = true,
        value_delimiter = ',',
        display_order = 11
    )]
    pub api_keys: Vec<String>,

    /// File of API keys, one `sha256hex tenant` per line (`#` starts a comment).
    #[arg(long, env = "CTXD_API_KEYS_FILE", display_order = 12)]
    pub api_keys_file: Option<PathBuf>,

    /// Tenant of calls without an x-tenant-id header (auth off only).
    #[arg(
        long,
        env = "CTXD_DEFAULT_TENANT",
        default_value = "default",
        display_order = 23
    )]
    pub default_tenant: String,
}

/// The validated authentication settings.
#[derive(Debug, Clone)]
pub struct AuthOptions {
    /// The configured keys; empty means auth is off (x-tenant-id trusted).
    pub api_keys: Vec<ApiKey>,
    /// Tenant of calls without a tenant header, when auth is off.
    pub default_tenant: TenantId,
}

/// One configured API key: the SHA-256 of the key (never the key itself) and the tenant it
/// acts for. Keys are compared in constant time ([`ApiKey::tenant_of`]).
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
    /// Parses `sha256hex=tenant` (also `sha256hex tenant`, the key-file line format).
    pub fn parse(entry: &str) -> Result<Self, KeyEntryError> {
        let (hash, tenant) =
            entry
                .trim()
                .split_once(['=', ' ', '\t'])
                .ok_or_else(|| KeyEntryError::NotAPair {
                    entry: entry.to_owned(),
                })?;
        Ok(Self {
            hash: decode_sha256_hex(hash.trim()).ok_or(KeyEntryError::NotSha256)?,
            tenant: TenantId::parse(tenant.trim()).map_err(|reason| KeyEntryError::Tenant { reason })?,
        })
    }

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

impl AuthArgs {
    /// Parses the default tenant and every key entry, from the list and the file.
    pub fn validate(&self) -> Result<AuthOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        let default_tenant = TenantId::parse(self.default_tenant.clone())
            .map_err(|reason| problems.push(ConfigProblem::DefaultTenant { reason }))
            .ok();
        let api_keys = self
            .entries(&mut problems)
            .into_iter()
            .filter_map(|(origin, entry)| {
                ApiKey::parse(&entry)
                    .map_err(|source| problems.push(ConfigProblem::ApiKey { origin, source }))
                    .ok()
            })
            .collect();
        let Some(default_tenant) = default_tenant else {
            return Err(problems.into_problems());
        };
        problems.finish(AuthOptions {
            api_keys,
            default_tenant,
        })
    }

    /// Every configured entry with where it came from: the list's, then the file's lines
    /// without comments and blanks.
    fn entries(&self, problems: &mut Problems) -> Vec<(KeyOrigin, String)> {
        let mut entries: Vec<_> = self
            .api_keys
            .iter()
            .filter(|e| !e.trim().is_empty())
            .map(|e| (KeyOrigin::List, e.clone()))
            .collect();
        let Some(path) = &self.api_keys_file else {
            return entries;
        };
        match std::fs::read_to_string(path) {
            Ok(text) => entries.extend(
                text.lines()
                    .map(|l| l.split('#').next().unwrap_or_default().trim())
                    .filter(|l| !l.is_empty())
                    .map(|l| (KeyOrigin::File(path.clone()), l.to_owned())),
            ),
            Err(source) => problems.push(ConfigProblem::Unreadable {
                setting: "CTXD_API_KEYS_FILE",
                path: path.clone(),
                source,
            }),
        }
        entries
    }
}

/// The 32 bytes of a SHA-256 written as 64 hex characters.
fn decode_sha256_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_entries_must_be_sha256_hex() {
        assert_eq!(ApiKey::parse("abc=acme"), Err(KeyEntryError::NotSha256));
        let hash = "ab".repeat(32);
        let entry = ApiKey::parse(&format!("{hash} acme")).unwrap();
        assert_eq!(entry.hash, [0xab; 32]);
        assert_eq!(entry.tenant.as_str(), "acme");
    }

    #[test]
    fn an_entry_without_a_tenant_is_not_a_pair() {
        assert!(matches!(
            ApiKey::parse(&"ab".repeat(32)),
            Err(KeyEntryError::NotAPair { .. })
        ));
    }

    #[test]
    fn a_hash_key_line_configures_the_key_it_was_made_from() {
        let entry = ApiKey::parse(&format!("{}=acme", ApiKey::hash_hex("secret"))).unwrap();
        let key = ApiKey::from_key("secret", entry.tenant.clone());
        assert_eq!(key.hash, entry.hash);
    }
}
