//! The protocol layer's settings, and the protocol each call came by.

use std::time::Duration;

use crate::{
    grpc::TenantInterceptor, runtime::response_budget::ResponseBudget, service::metrics::ServerMetrics,
};

/// How a call reached the server, as metrics label it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// gRPC over HTTP/2.
    Grpc,
    /// gRPC-Web (browsers).
    GrpcWeb,
    /// Connect's unary protocol (JSON or binary).
    Connect,
}

impl Protocol {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::GrpcWeb => "grpc_web",
            Protocol::Connect => "connect",
        }
    }
}

/// Serves Connect and the health path, and labels every call with its [`Protocol`].
#[derive(Debug, Clone)]
pub struct ProtocolLayer {
    /// The memory Connect bodies and answers are taken from.
    pub(super) budget: ResponseBudget,
    /// Resolves the caller's tenant before a body is read.
    pub(super) tenants: TenantInterceptor,
    /// The largest body read.
    pub(super) max_request_bytes: usize,
    /// The longest a call may take (and a `Connect-Timeout-Ms` ask for).
    pub(super) request_timeout: Duration,
    /// Counts what this layer refuses itself.
    pub(super) metrics: ServerMetrics,
    /// Whether `/inspect` is served.
    pub(super) inspector: bool,
}

impl ProtocolLayer {
    /// Connect bodies up to `max_request_bytes` are read within `request_timeout` (or the call's
    /// `Connect-Timeout-Ms`) into memory taken from `budget`, in the share of the tenant
    /// `tenants` resolves; what this layer refuses itself is counted in `metrics`. The
    /// Inspector is served at `/inspect` when `inspector` is set.
    pub fn new(
        budget: ResponseBudget,
        tenants: TenantInterceptor,
        max_request_bytes: usize,
        request_timeout: Duration,
        metrics: ServerMetrics,
        inspector: bool,
    ) -> Self {
        Self {
            budget,
            tenants,
            max_request_bytes,
            request_timeout,
            metrics,
            inspector,
        }
    }
}
