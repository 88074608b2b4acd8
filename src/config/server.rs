//! How the gRPC server listens and treats connections and calls: address, TLS, deadlines,
//! connection limits, health probes and shutdown.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use super::problem::{ConfigProblem, Problems};

/// Listener, TLS, connection and deadline settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address the gRPC server listens on.
    #[arg(long, env = "CTXD_LISTEN", default_value = "0.0.0.0:50051", display_order = 0)]
    pub listen: SocketAddr,

    /// Deadline of every RPC (a shorter `grpc-timeout` from the client wins; past it the call
    /// ends with DEADLINE_EXCEEDED). A write's statements and lock waits end before the call's
    /// deadline, so no write the caller saw fail commits later; this is also every database
    /// connection's `statement_timeout`.
    #[arg(
        long,
        env = "CTXD_REQUEST_TIMEOUT_SECS",
        default_value_t = 30,
        display_order = 5
    )]
    pub request_timeout_secs: u64,

    /// Milliseconds between database health probes (readiness is NOT_SERVING while they fail).
    #[arg(
        long,
        env = "CTXD_HEALTH_PROBE_INTERVAL_MS",
        default_value_t = 5_000,
        display_order = 6
    )]
    pub health_probe_interval_ms: u64,

    /// PEM certificate chain: serve gRPC over TLS (with --tls-key).
    #[arg(long, env = "CTXD_TLS_CERT", display_order = 13)]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "CTXD_TLS_KEY", display_order = 14)]
    pub tls_key: Option<PathBuf>,

    /// PEM CA bundle: require client certificates signed by it (mutual TLS).
    #[arg(long, env = "CTXD_TLS_CLIENT_CA", display_order = 15)]
    pub tls_client_ca: Option<PathBuf>,

    /// Seconds after which a client connection is closed (gracefully), so long-lived HTTP/2
    /// clients reconnect and spread over new replicas.
    #[arg(
        long,
        env = "CTXD_MAX_CONNECTION_AGE_SECS",
        default_value_t = 300,
        display_order = 17
    )]
    pub max_connection_age_secs: u64,

    /// Client connections open at once (gRPC and metrics ports each); past it, new connections
    /// wait in the listen backlog until one closes.
    #[arg(
        long,
        env = "CTXD_MAX_CONNECTIONS",
        default_value_t = 2_048,
        display_order = 20
    )]
    pub max_connections: usize,

    /// Seconds a new connection has to send its first bytes (the HTTP/2 preface; with TLS,
    /// also to finish the TLS handshake; on the metrics port, the request headers) before it
    /// is closed.
    #[arg(
        long,
        env = "CTXD_HANDSHAKE_TIMEOUT_SECS",
        default_value_t = 10,
        display_order = 21
    )]
    pub handshake_timeout_secs: u64,

    /// Concurrent requests served per client connection.
    #[arg(
        long,
        env = "CTXD_CONCURRENCY_PER_CONNECTION",
        default_value_t = 256,
        display_order = 22
    )]
    pub concurrency_per_connection: usize,

    /// Seconds in-flight calls get to finish after SIGTERM/SIGINT before the process exits.
    #[arg(
        long,
        env = "CTXD_SHUTDOWN_GRACE_SECS",
        default_value_t = 20,
        display_order = 28
    )]
    pub shutdown_grace_secs: u64,

    /// Origins whose browser code may call ctxd (Connect and gRPC-Web), comma-separated, e.g.
    /// `https://app.example.com`; `*` allows any. Unset (the default): no cross-origin
    /// requests.
    #[arg(long, env = "CTXD_CORS_ORIGINS", value_delimiter = ',', display_order = 29)]
    pub cors_origins: Vec<String>,

    /// Serve the Inspector, a web page at `/inspect` on this port that shows conversations,
    /// logs, packs, memory and search through the public API with the API key typed into it.
    /// Unset: served only in the development default (in memory, no API keys).
    #[arg(
        long,
        env = "CTXD_INSPECTOR",
        value_parser = clap::builder::BoolishValueParser::new(),
        display_order = 51
    )]
    pub inspector: Option<bool>,
}

/// The server's validated settings.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Deadline of every RPC, and of every database statement.
    pub request_timeout: Duration,
    /// Interval of database health probes.
    pub health_probe_interval: Duration,
    /// TLS material, when serving over TLS.
    pub tls: Option<TlsFiles>,
    /// Age past which a client connection is closed, so clients spread over new replicas.
    pub max_connection_age: Duration,
    /// Open client connections per listener.
    pub max_connections: usize,
    /// Time a new connection has to send its first bytes.
    pub handshake_timeout: Duration,
    /// Concurrent requests per connection.
    pub concurrency_per_connection: usize,
    /// Drain period on shutdown.
    pub shutdown_grace: Duration,
    /// Origins allowed to call from browsers (`*`: any); empty: none.
    pub cors_origins: Vec<String>,
    /// CTXD_INSPECTOR as set (`None`: unset; [`crate::config::Settings::inspector`] decides).
    pub inspector: Option<bool>,
}

/// TLS material, read at start-up so a missing file stops the server before it listens.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// PEM certificate chain.
    pub cert: Vec<u8>,
    /// PEM private key.
    pub key: Vec<u8>,
    /// PEM CA bundle for client certificates (mutual TLS), if required.
    pub client_ca: Option<Vec<u8>>,
}

impl ServerArgs {
    /// Checks every setting and reads the TLS files.
    pub fn validate(&self) -> Result<ServerOptions, Vec<ConfigProblem>> {
        let mut problems = Problems::default();
        problems.positive("CTXD_MAX_CONNECTION_AGE_SECS", self.max_connection_age_secs);
        problems.positive(
            "CTXD_CONCURRENCY_PER_CONNECTION",
            self.concurrency_per_connection as u64,
        );
        problems.positive("CTXD_REQUEST_TIMEOUT_SECS", self.request_timeout_secs);
        problems.positive("CTXD_MAX_CONNECTIONS", self.max_connections as u64);
        problems.positive("CTXD_HANDSHAKE_TIMEOUT_SECS", self.handshake_timeout_secs);
        problems.positive("CTXD_HEALTH_PROBE_INTERVAL_MS", self.health_probe_interval_ms);
        let tls = self.tls(&mut problems);
        let cors_origins = self.cors_origins(&mut problems);
        problems.finish(ServerOptions {
            listen: self.listen,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            health_probe_interval: Duration::from_millis(self.health_probe_interval_ms),
            tls,
            max_connection_age: Duration::from_secs(self.max_connection_age_secs),
            max_connections: self.max_connections,
            handshake_timeout: Duration::from_secs(self.handshake_timeout_secs),
            concurrency_per_connection: self.concurrency_per_connection,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            cors_origins,
            inspector: self.inspector,
        })
    }

    /// The CORS origins, each `*` or a `scheme://host[:port]` origin.
    fn cors_origins(&self, problems: &mut Problems) -> Vec<String> {
        let origins: Vec<String> = self
            .cors_origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_owned())
            .filter(|o| !o.is_empty())
            .collect();
        for origin in &origins {
            let host = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            let valid = origin == "*"
                || host.is_some_and(|h| !h.is_empty() && !h.contains(['/', ' ', '\t']) && h.is_ascii());
            if !valid {
                problems.push(ConfigProblem::CorsOrigin {
                    origin: origin.clone(),
                });
            }
        }
        origins
    }

    /// The TLS files, read (`None` without TLS, or when one cannot be read).
    fn tls(&self, problems: &mut Problems) -> Option<TlsFiles> {
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => (cert, key),
            (None, None) => {
                if self.tls_client_ca.is_some() {
                    problems.push(ConfigProblem::ClientCaWithoutTls);
                }
                return None;
            }
            _ => {
                problems.push(ConfigProblem::TlsHalfConfigured);
                return None;
            }
        };
        let cert = read(problems, "CTXD_TLS_CERT", cert);
        let key = read(problems, "CTXD_TLS_KEY", key);
        let client_ca = match &self.tls_client_ca {
            Some(ca) => Some(read(problems, "CTXD_TLS_CLIENT_CA", ca)?),
            None => None,
        };
        Some(TlsFiles {
            cert: cert?,
            key: key?,
            client_ca,
        })
    }
}

/// The bytes of the file `setting` names (`None`, and a problem, when it cannot be read).
fn read(problems: &mut Problems, setting: &'static str, path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path)
        .map_err(|source| {
            problems.push(ConfigProblem::Unreadable {
                setting,
                path: path.to_owned(),
                source,
            })
        })
        .ok()
}
