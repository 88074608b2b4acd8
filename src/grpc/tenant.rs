//! Which tenant a call acts for.
//!
//! With API keys configured, the key (`authorization: Bearer <key>` or `x-api-key`) names the
//! tenant: keys are stored as SHA-256 hashes and compared in constant time; a missing or unknown
//! key is UNAUTHENTICATED, and an `x-tenant-id` header naming another tenant is
//! PERMISSION_DENIED. Without keys (development, or behind a trusted mesh) the `x-tenant-id`
//! header names the tenant, falling back to a configured default.

use std::sync::Arc;

use tonic::{Request, Status, metadata::MetadataMap, service::Interceptor};

use crate::{config::ApiKey, domain::TenantId};

/// Metadata header naming the tenant.
pub const TENANT_HEADER: &str = "x-tenant-id";
/// Metadata header carrying an API key (alternative to `authorization: Bearer`).
pub const API_KEY_HEADER: &str = "x-api-key";

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
                let tenant = ApiKey::tenant_of(keys, &key)
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

impl TenantInterceptor {
    /// The tenant a request with `headers` acts for, as the interceptor will resolve it;
    /// `None` when it will refuse the call.
    pub(crate) fn tenant_for(&self, headers: &tonic::codegen::http::HeaderMap) -> Option<TenantId> {
        self.check(headers).ok()
    }

    /// The tenant a request with `headers` acts for, or the status the interceptor will answer
    /// with: what the Connect protocol checks before it reads a body.
    pub(crate) fn check(&self, headers: &tonic::codegen::http::HeaderMap) -> Result<TenantId, Status> {
        self.resolve(&MetadataMap::from_headers(headers.clone()))
    }
}

impl Interceptor for TenantInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let tenant = self.resolve(request.metadata())?;
        tracing::Span::current().record("ctxd.tenant", tenant.as_str());
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
        let acme = TenantId::parse("acme").unwrap();
        TenantInterceptor::with_api_keys(vec![ApiKey::from_key("secret-acme", acme)])
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
    fn only_keys_a_client_can_present_can_be_hashed() {
        assert!(ApiKey::check_key("sk-live_0123~").is_ok());
        for bad in ["", " k", "k ", "k\t", "a b", "ключ", "k\0"] {
            assert!(ApiKey::check_key(bad).is_err(), "{bad:?}");
        }
    }
}
