//! The gRPC router: the context service behind its interceptor and layers, health, reflection,
//! TLS and per-connection limits. Built before anything runs, so a bad certificate stops
//! start-up instead of a running server.

use std::time::Duration;

use tonic::codegen::http::{self, HeaderValue};
use tonic::{
    service::interceptor::InterceptedService,
    transport::{Certificate, Identity, Server, ServerTlsConfig, server::Router},
};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_web::GrpcWebLayer;
use tower::layer::util::{Identity as NoLayer, Stack};
use tower::util::MapResponseLayer;
use tower::util::{Either, option_layer};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::error::StartupError;
use crate::{
    config::{ServerOptions, Settings, TlsFiles},
    grpc::{
        ContextApi, TenantInterceptor,
        connect::ProtocolLayer,
        deadline_layer::DeadlineLayer,
        metered::MeteredLayer,
        request_body::RequestBodyLayer,
        request_id::{REQUEST_ID_HEADER, RequestIdLayer},
    },
    proto::{self, context_service_server::ContextServiceServer},
    service::Service,
    service::metrics::ServerMetrics,
};

/// Streams a client may reset before the server has taken them up, per connection, before
/// the connection is closed (GOAWAY `too_many_resets`, h2's rapid-reset mitigation; its
/// default is 20). A client cancelling many short-deadline calls at once resets that many
/// queued streams legitimately; the bound still stops a reset flood.
const MAX_PENDING_RESETS: usize = 512;

/// How often an HTTP/2 connection is pinged, and how long the answer may take.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The rewrite of tonic's answer to an oversized request.
type Rewrite = fn(http::Response<tonic::body::Body>) -> http::Response<tonic::body::Body>;

/// The layers around every call, outermost first: CORS (when configured), the protocols (Connect
/// transcoded to gRPC, `/healthz`), gRPC-Web, metrics, request id, the oversize rewrite, the
/// deadline, the request body's memory and framing (tower's `Stack` spells them innermost
/// first). Every layer from metrics in sees a gRPC call, whatever protocol it came in; what the
/// protocol layer refuses itself (a Connect body too large or malformed) it counts and logs. Metrics see every call's final code, including the rewrite's, the deadline's and
/// the body checks' answers.
pub(super) type Layers = Stack<
    RequestBodyLayer,
    Stack<
        DeadlineLayer,
        Stack<
            MapResponseLayer<Rewrite>,
            Stack<
                RequestIdLayer,
                Stack<MeteredLayer, Stack<GrpcWebLayer, Stack<ProtocolLayer, Stack<Cors, NoLayer>>>>,
            >,
        >,
    >,
>;

/// Cross-origin requests, when CTXD_CORS_ORIGINS allows some.
type Cors = Either<CorsLayer, NoLayer>;

/// Everything the gRPC port serves, ready to run on a listener.
pub(super) fn router(
    settings: &Settings,
    service: Service,
    interceptor: TenantInterceptor,
    health: HealthServer<impl Health>,
    metrics: ServerMetrics,
) -> Result<Router<Layers>, StartupError> {
    let protocols = ProtocolLayer::new(
        service.response_budget().clone(),
        interceptor.clone(),
        settings.limits.max_request_bytes,
        settings.server.request_timeout,
        metrics.clone(),
        settings.inspector(),
    );
    if settings.inspector() {
        tracing::info!(path = "/inspect", "inspector served (CTXD_INSPECTOR)");
    }
    let body = RequestBodyLayer::new(
        service.response_budget().clone(),
        settings.limits.max_request_bytes,
        interceptor.clone(),
    );
    let api = ContextServiceServer::new(ContextApi::new(service))
        .max_decoding_message_size(settings.limits.max_request_bytes)
        // A backstop: responses are checked against max_response_bytes as they are built.
        .max_encoding_message_size(settings.limits.max_response_bytes.saturating_mul(2));
    let mut server = configured_server(&settings.server)?
        .layer(option_layer(cors(&settings.server.cors_origins)))
        .layer(protocols)
        .layer(GrpcWebLayer::new())
        .layer(MeteredLayer::new(metrics, settings.server.request_timeout))
        .layer(RequestIdLayer)
        .layer(MapResponseLayer::new(oversize_is_resource_exhausted as Rewrite))
        .layer(DeadlineLayer::new(settings.server.request_timeout))
        .layer(body);
    Ok(server
        .add_service(health)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(InterceptedService::new(api, interceptor)))
}

/// CORS for the configured origins (Connect and gRPC-Web from browsers), or none.
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = match origins.iter().any(|o| o == "*") {
        true => AllowOrigin::any(),
        false => AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok())),
    };
    let header = |name: &'static str| http::HeaderName::from_static(name);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([http::Method::POST, http::Method::GET, http::Method::OPTIONS])
            .allow_headers([
                header("content-type"),
                header("connect-protocol-version"),
                header("connect-timeout-ms"),
                header("grpc-timeout"),
                header("x-grpc-web"),
                header("x-user-agent"),
                header("authorization"),
                header("x-api-key"),
                header("x-tenant-id"),
                header("x-request-id"),
            ])
            .expose_headers([
                header("grpc-status"),
                header("grpc-message"),
                header("grpc-status-details-bin"),
                header("x-request-id"),
            ])
            .max_age(Duration::from_secs(3600)),
    )
}

/// The server's connection handling and, when configured, TLS. HTTP/1.1 is accepted beside
/// HTTP/2: Connect and gRPC-Web calls come over both.
fn configured_server(options: &ServerOptions) -> Result<Server, StartupError> {
    let mut server = Server::builder().accept_http1(true);
    if let Some(tls) = &options.tls {
        server = server
            .tls_config(tls_config(tls, options.handshake_timeout))
            .map_err(|source| StartupError::Tls { source })?;
        tracing::info!(mutual = tls.client_ca.is_some(), "serving gRPC over TLS");
    }
    Ok(server
        .max_connection_age(options.max_connection_age)
        // Past its age, a connection gets this long to finish its calls, then is closed, with
        // whatever responses its client never read.
        .max_connection_age_grace(options.request_timeout)
        // A peer that stops answering pings (gone, or not reading at all) is closed.
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .concurrency_limit_per_connection(options.concurrency_per_connection)
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .trace_fn(|request| {
            let request_id = request
                .headers()
                .get(REQUEST_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            tracing::info_span!("rpc", method = %request.uri().path(), request_id)
        }))
}

/// The certificate, and the CA client certificates must be signed by (mutual TLS).
fn tls_config(tls: &TlsFiles, handshake_timeout: Duration) -> ServerTlsConfig {
    // tonic's rustls uses the process-wide provider; a second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = ServerTlsConfig::new()
        .identity(Identity::from_pem(&tls.cert, &tls.key))
        .timeout(handshake_timeout);
    match &tls.client_ca {
        Some(ca) => config.client_ca_root(Certificate::from_pem(ca)),
        None => config,
    }
}

/// tonic answers a request over the decoding limit with OUT_OF_RANGE; the contract (docs/design.md,
/// "Errors") says RESOURCE_EXHAUSTED. ctxd's one OUT_OF_RANGE of its own (a change feed cursor
/// past retention) carries error details, which tonic's never does: the rewrite touches only
/// tonic's.
fn oversize_is_resource_exhausted(
    mut response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let out_of_range = HeaderValue::from_static("11");
    let headers = response.headers();
    if headers.get("grpc-status") == Some(&out_of_range) && !headers.contains_key("grpc-status-details-bin") {
        response
            .headers_mut()
            .insert("grpc-status", HeaderValue::from_static("8"));
    }
    response
}

/// Reflection over ctxd.v1, health, and google.rpc (so grpcurl can decode error details).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
}
