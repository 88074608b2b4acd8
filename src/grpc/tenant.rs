//! Which tenant a call acts for. Until API keys exist, the `x-tenant-id` metadata header names
//! the tenant (a configured default when absent): the development and trusted-mesh mode.

use tonic::{Request, Status, service::Interceptor};

use crate::domain::TenantId;

/// Metadata header naming the tenant.
pub const TENANT_HEADER: &str = "x-tenant-id";

/// Resolves the tenant of each call and stores it in the request's extensions.
#[derive(Debug, Clone)]
pub struct TenantInterceptor {
    default_tenant: TenantId,
}

impl TenantInterceptor {
    /// Trusts `x-tenant-id`, falling back to `default_tenant`.
    pub fn trusting_header(default_tenant: TenantId) -> Self {
        Self { default_tenant }
    }
}

impl Interceptor for TenantInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let tenant = match request.metadata().get(TENANT_HEADER) {
            None => self.default_tenant.clone(),
            Some(value) => {
                let text = value
                    .to_str()
                    .map_err(|_| Status::invalid_argument(format!("{TENANT_HEADER} must be ASCII")))?;
                TenantId::parse(text)
                    .map_err(|e| Status::invalid_argument(format!("{TENANT_HEADER}: {e}")))?
            }
        };
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
