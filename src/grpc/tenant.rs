//! Which tenant a call acts for.
//!
//! With API keys configured, the key (`authorization: Bearer <key>` or `x-api-key`) names the
//! tenant: keys are stored as SHA-256 hashes and compared in constant time; a missing or unknown
//! key is UNAUTHENTICATED, and an `x-tenant-id` header naming another tenant is
//! PERMISSION_DENIED. Without keys (development, or behind a trusted mesh) the `x-tenant-id`
//! header names the tenant, falling back to a configured default.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tonic::{Request, Status, metadata::MetadataMap, service::Interceptor};

use crate::domain::TenantId;

/// Metadata header naming the tenant.
pub const TENANT_HEADER: &str = "x-tenant-id";
/// Metadata header carrying an API key (alternative to `authorization: Bearer`).
pub const API_KEY_HEADER: &str = "x-api-key";

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

/// Resolves the tenant of each call and stores it in the request's extensions.
#[derive(Debug, Clone)]
pub struct TenantInterceptor {
    mode: Mode,
}

#[derive(Debug, Clone)]
enum Mode {
    TrustHeader { default_tenant: TenantId },
    ApiKeys { keys: Arc<Vec<ApiKey>> },
}

impl TenantInterceptor {
    /// Auth disabled: trusts `x-tenant-id`, falling back to `default_tenant`.
    pub fn trusting_header(default_tenant: TenantId) -> Self {
        Self {
            mode: Mode::TrustHeader { default_tenant },
        }
    }

    /// Auth enabled: every call needs one of `keys`.
    pub fn with_api_keys(keys: Vec<ApiKey>) -> Self {
        Self {
            mode: Mode::ApiKeys { keys: Arc::new(keys) },
        }
    }

    fn resolve(&self, metadata: &MetadataMap) -> Result<TenantId, Status> {
        let header = header_tenant(metadata)?;
        match &self.mode {
            Mode::TrustHeader { default_tenant } => Ok(header.unwrap_or_else(|| default_tenant.clone())),
            Mode::ApiKeys { keys } => {
                let key = presented_key(metadata).ok_or_else(|| {
                    Status::unauthenticated("an API key is required (authorization: Bearer <key>)")
                })?;
                let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
                // Every entry is compared, so timing does not reveal which one matched.
                let tenant = keys
                    .iter()
                    .fold(None, |found, k| {
                        if constant_time_eq(&k.hash, &hash) {
                            Some(&k.tenant)
                        } else {
                            found
                        }
                    })
                    .ok_or_else(|| Status::unauthenticated("unknown API key"))?;
                match header {
                    Some(claimed) if &claimed != tenant => Err(Status::permission_denied(format!(
                        "{TENANT_HEADER} does not match the API key's tenant"
                    ))),
                    _ => Ok(tenant.clone()),
                }
            }
        }
    }
}

fn header_tenant(metadata: &MetadataMap) -> Result<Option<TenantId>, Status> {
    let Some(value) = metadata.get(TENANT_HEADER) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| Status::invalid_argument(format!("{TENANT_HEADER} must be ASCII")))?;
    TenantId::parse(text)
        .map(Some)
        .map_err(|e| Status::invalid_argument(format!("{TENANT_HEADER}: {e}")))
}

fn presented_key(metadata: &MetadataMap) -> Option<String> {
    if let Some(value) = metadata.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, key) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| key.trim().to_owned());
    }
    metadata
        .get(API_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|k| k.trim().to_owned())
}

impl Interceptor for TenantInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let tenant = self.resolve(request.metadata())?;
        request.extensions_mut().insert(tenant);
        Ok(request)
    }
}

/// The tenant the interceptor resolved for this call.
pub(crate) fn tenant_of<T>(request: &Request<T>) -> Result<TenantId, Status> {
    request
        .extensions()
        .get::<TenantId>()
        .cloned()
        .ok_or_else(|| Status::internal("tenant was not resolved"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interceptor() -> TenantInterceptor {
        let entry = format!("{}=acme", ApiKey::hash_hex("secret-acme"));
        TenantInterceptor::with_api_keys(vec![ApiKey::parse(&entry).unwrap()])
    }

    fn metadata(pairs: &[(&'static str, &str)]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for (k, v) in pairs {
            m.insert(*k, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn a_known_key_names_its_tenant() {
        let t = interceptor()
            .resolve(&metadata(&[("authorization", "Bearer secret-acme")]))
            .unwrap();
        assert_eq!(t.as_str(), "acme");
        let t = interceptor()
            .resolve(&metadata(&[
                ("x-api-key", "secret-acme"),
                ("x-tenant-id", "acme"),
            ]))
            .unwrap();
        assert_eq!(t.as_str(), "acme");
    }

    #[test]
    fn missing_or_unknown_keys_are_unauthenticated_and_other_tenants_denied() {
        let code =
            |pairs: &[(&'static str, &str)]| interceptor().resolve(&metadata(pairs)).unwrap_err().code();
        assert_eq!(code(&[]), tonic::Code::Unauthenticated);
        assert_eq!(
            code(&[("authorization", "Bearer wrong")]),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            code(&[("authorization", "Basic c2VjcmV0")]),
            tonic::Code::Unauthenticated
        );
        let denied = [("authorization", "Bearer secret-acme"), ("x-tenant-id", "globex")];
        assert_eq!(code(&denied), tonic::Code::PermissionDenied);
    }

    #[test]
    fn key_entries_must_be_sha256_hex() {
        assert!(ApiKey::parse("abc=acme").is_err());
        assert!(ApiKey::parse(&format!("{} acme", ApiKey::hash_hex("k"))).is_ok());
    }
}
