//! Test harness: spawns the real server on port 0 against the in-memory store or a real
//! PostgreSQL. Postgres is a throwaway cluster started from the machine's binaries (or the server
//! named by `TEST_DATABASE_URL`); every test gets its own fresh database.

use std::{
    path::PathBuf,
    process::Command,
    sync::{
        OnceLock,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use clap::Parser;
use ctxd::{
    config::Cli,
    proto::{self, context_service_client::ContextServiceClient},
    startup::App,
};
use tokio::sync::oneshot;
use tonic::{Code, Request, Status, transport::Channel};
use tonic_types::StatusExt;

/// Which store a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    InMemory,
    Postgres,
}

/// A running server and a client connected to it. Dropping it stops the server.
pub struct TestApp {
    pub addr: std::net::SocketAddr,
    pub client: ContextServiceClient<Channel>,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Spawns a server with default settings.
pub async fn spawn_app(kind: StoreKind) -> TestApp {
    spawn_app_with(kind, &[]).await
}

/// Spawns a server with extra command-line flags.
pub async fn spawn_app_with(kind: StoreKind, flags: &[&str]) -> TestApp {
    let database_url = match kind {
        StoreKind::InMemory => None,
        StoreKind::Postgres => Some(fresh_database().await),
    };
    spawn_on(database_url, flags).await
}

/// Spawns a server on a given database (None = in-memory).
pub async fn spawn_on(database_url: Option<String>, flags: &[&str]) -> TestApp {
    init_logs();
    let mut args = vec!["ctxd".to_string(), "--listen".into(), "127.0.0.1:0".into()];
    if let Some(url) = &database_url {
        args.extend(["--database-url".into(), url.clone()]);
    }
    args.extend(flags.iter().map(|f| f.to_string()));
    let settings = Cli::try_parse_from(&args)
        .expect("flags parse")
        .config
        .validate()
        .expect("valid config");
    let app = App::build(settings).await.expect("app builds");
    let addr = app.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async {
        let _ = stopped.await;
    }));
    // Lazy: the listener is bound already, and a TLS server needs its own client anyway.
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("valid uri")
        .connect_lazy();
    let client = ContextServiceClient::new(channel);
    TestApp {
        addr,
        client,
        stop: Some(stop),
    }
}

fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        if let Ok(filter) = std::env::var("TEST_LOG") {
            let filter = if filter.is_empty() || filter == "1" {
                "debug".to_string()
            } else {
                filter
            };
            let _ = ctxd::runtime::telemetry::init(ctxd::runtime::telemetry::LogFormat::Text, &filter, None);
        }
    });
}

/// A request carrying `x-tenant-id`.
pub fn as_tenant<T>(tenant: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("x-tenant-id", tenant.parse().expect("ascii tenant"));
    request
}

/// A user message.
pub fn user(content: &str) -> proto::Message {
    proto::Message {
        role: proto::Role::User as i32,
        content: content.into(),
        ..Default::default()
    }
}

/// An assistant text message.
pub fn assistant(content: &str) -> proto::Message {
    proto::Message {
        role: proto::Role::Assistant as i32,
        content: content.into(),
        ..Default::default()
    }
}

/// An assistant message calling tools with the given ids.
pub fn assistant_calling(ids: &[&str]) -> proto::Message {
    proto::Message {
        role: proto::Role::Assistant as i32,
        tool_calls: ids
            .iter()
            .map(|id| proto::ToolCall {
                id: (*id).into(),
                name: "search".into(),
                arguments: r#"{"q":"x"}"#.into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A tool result answering `id`.
pub fn tool_result(id: &str, content: &str) -> proto::Message {
    proto::Message {
        role: proto::Role::Tool as i32,
        tool_call_id: id.into(),
        content: content.into(),
        ..Default::default()
    }
}

/// An append request without key or guard.
pub fn append(conversation: &str, messages: Vec<proto::Message>) -> proto::AppendMessageRequest {
    proto::AppendMessageRequest {
        conversation_id: conversation.into(),
        messages,
        ..Default::default()
    }
}

impl TestApp {
    /// The working memory after a refresh that must succeed.
    pub async fn refreshed_memory(&self, conversation: &str) -> proto::WorkingMemory {
        let request = proto::GetWorkingMemoryRequest {
            conversation_id: conversation.into(),
            refresh: true,
            prepare: false,
        };
        let response = self.client.clone().get_working_memory(request).await.unwrap();
        response.into_inner().memory.unwrap()
    }

    /// Appends and expects success.
    pub async fn append_ok(
        &self,
        conversation: &str,
        messages: Vec<proto::Message>,
    ) -> proto::AppendMessageResponse {
        self.client
            .clone()
            .append_message(append(conversation, messages))
            .await
            .expect("append succeeds")
            .into_inner()
    }

    /// The pack `request` asks for, which must be built.
    pub async fn build(&self, request: proto::BuildContextRequest) -> proto::BuildContextResponse {
        self.client
            .clone()
            .build_context(request)
            .await
            .expect("BuildContext succeeds")
            .into_inner()
    }

    /// The pack of `conversation` in `format` at `max_tokens`, which must be built.
    pub async fn pack(
        &self,
        conversation: &str,
        format: proto::Format,
        max_tokens: u32,
    ) -> proto::BuildContextResponse {
        self.build(proto::BuildContextRequest {
            conversation_id: conversation.into(),
            budget: Some(proto::Budget {
                max_tokens,
                ..Default::default()
            }),
            format: format as i32,
            ..Default::default()
        })
        .await
    }

    /// Every message of a conversation, following pages.
    pub async fn all_messages(&self, conversation: &str) -> Result<Vec<proto::Message>, Status> {
        self.all_messages_as("default", conversation).await
    }

    /// Every message of a conversation as a tenant, following pages.
    pub async fn all_messages_as(
        &self,
        tenant: &str,
        conversation: &str,
    ) -> Result<Vec<proto::Message>, Status> {
        let mut client = self.client.clone();
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let page = client
                .list_messages(as_tenant(
                    tenant,
                    proto::ListMessagesRequest {
                        conversation_id: conversation.into(),
                        after_sequence: after,
                        page_size: 1000,
                        format: None,
                    },
                ))
                .await?
                .into_inner();
            out.extend(page.messages);
            if page.next_after_sequence == 0 {
                return Ok(out);
            }
            after = page.next_after_sequence;
        }
    }
}

/// Asserts an INVALID_ARGUMENT status whose BadRequest details name `field`.
pub fn assert_field_violation(status: &Status, field: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let bad_request = status.get_details_bad_request().expect("BadRequest details");
    let fields: Vec<&str> = bad_request
        .field_violations
        .iter()
        .map(|v| v.field.as_str())
        .collect();
    assert!(
        fields.contains(&field),
        "expected a violation of {field}, got {fields:?}"
    );
}

// --- PostgreSQL -------------------------------------------------------------------------

struct Cluster {
    /// URL of the maintenance database, used to create per-test databases.
    admin_url: String,
}

/// Creates a fresh, empty database and returns its URL: on the throwaway cluster, on
/// `TEST_DATABASE_URL`'s server, or, with `TEST_CITUS_URL` (a Citus coordinator's database
/// whose workers are added, as `scripts/citus-cluster.sh` makes one), on every node of that
/// Citus cluster, so that every PostgreSQL test runs on Citus.
pub async fn fresh_database() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "ctxd_test_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    if let Ok(citus) = std::env::var("TEST_CITUS_URL") {
        return fresh_citus_database(&citus, &name).await;
    }
    let cluster = CLUSTER.get_or_init(start_cluster);
    let (client, connection) = tokio_postgres::connect(&cluster.admin_url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test cluster");
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create test database");
    drop(client);
    let _ = task.await;
    with_database(&cluster.admin_url, &name)
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    tokio::spawn(connection);
    client
}

/// `name` created on the Citus coordinator of `url` and on each of its workers, with the
/// extension in each, and the workers added to the coordinator's new database.
async fn fresh_citus_database(url: &str, name: &str) -> String {
    let coordinator = connect(url).await;
    let workers: Vec<(String, i32)> = coordinator
        .query(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary'",
            &[],
        )
        .await
        .expect("the Citus cluster's workers")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert!(
        !workers.is_empty(),
        "TEST_CITUS_URL names a coordinator without workers"
    );
    let config: tokio_postgres::Config = url.parse().expect("valid TEST_CITUS_URL");
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut nodes = vec![(host.clone(), i32::from(port))];
    nodes.extend(workers.iter().cloned());
    for (node_host, node_port) in &nodes {
        let admin = connect(&format!(
            "host={node_host} port={node_port} user=postgres dbname=postgres"
        ))
        .await;
        admin
            .batch_execute("SET citus.enable_create_database_propagation TO off")
            .await
            .expect("no propagation of CREATE DATABASE: each node gets its own");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the database on a Citus node");
        let fresh = connect(&format!(
            "host={node_host} port={node_port} user=postgres dbname={name}"
        ))
        .await;
        fresh
            .batch_execute("CREATE EXTENSION citus")
            .await
            .expect("the citus extension on a node");
    }
    let database = format!("host={host} port={port} user=postgres dbname={name}");
    let fresh = connect(&database).await;
    fresh
        .execute(
            "SELECT citus_set_coordinator_host($1, $2)",
            &[&host, &i32::from(port)],
        )
        .await
        .expect("the coordinator's host");
    for (worker_host, worker_port) in &workers {
        // Adding a node opens connections to every node; under many tests at once one can fail
        // for the moment.
        let mut tries = 0;
        while let Err(e) = fresh
            .execute("SELECT citus_add_node($1, $2)", &[worker_host, worker_port])
            .await
        {
            tries += 1;
            assert!(tries < 10, "a worker added: {e}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    database
}

fn with_database(url: &str, name: &str) -> String {
    let mut config: tokio_postgres::Config = url.parse().expect("valid admin url");
    config.dbname(name);
    // Re-assemble as key/value form, which tokio-postgres also accepts.
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let mut out = format!("host={host} port={port} user={user} dbname={name}");
    if let Some(password) = config.get_password() {
        out.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
    }
    out
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

fn start_cluster() -> Cluster {
    if let Ok(url) = std::env::var("TEST_DATABASE_URL") {
        return Cluster { admin_url: url };
    }
    let bin = postgres_bin_dir();
    let dir = std::env::temp_dir().join(format!("ctxd-test-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create cluster dir");
    let as_root = is_root();
    if as_root {
        // initdb refuses to run as root: the cluster belongs to the `postgres` system user.
        run(Command::new("chown").args(["postgres:postgres", dir.to_str().unwrap()]));
    }
    let data = dir.join("data");
    run(pg_command(as_root, &bin.join("initdb")).args([
        "-D",
        data.to_str().unwrap(),
        "-U",
        "postgres",
        "--auth=trust",
        "--no-sync",
        "-E",
        "UTF8",
        // Text sorts as most production databases sort it (en-US), not in byte order: the
        // store's orders must hold under a collation that Rust's string order is not.
        "--locale-provider=icu",
        "--icu-locale=en-US",
        "--locale=C",
    ]));
    let port = free_port();
    // A watchdog shell owns the server: when this test process exits, it stops the server and
    // removes the cluster, so no test run leaves a postgres behind.
    let script = r#"
        "$BIN/postgres" -D "$DATA" -p "$PORT" -k "$DIR" -c listen_addresses=127.0.0.1 \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
            -c max_connections=400 -c shared_buffers=128MB >"$DIR/log" 2>&1 &
        pg=$!
        while [ -d "/proc/$WATCH" ] && kill -0 "$pg" 2>/dev/null; do sleep 0.5; done
        kill -INT "$pg" 2>/dev/null; wait "$pg"; rm -rf "$DIR"
    "#;
    let mut launcher = pg_command(as_root, std::path::Path::new("/bin/sh"));
    launcher
        .args(["-c", script])
        .env("BIN", &bin)
        .env("DATA", &data)
        .env("PORT", port.to_string())
        .env("DIR", &dir)
        .env("WATCH", std::process::id().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Not waited for: the watchdog outlives nothing but this process, and stops with it.
    #[allow(clippy::zombie_processes)]
    launcher.spawn().expect("start postgres");
    let ready = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q"])
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(ready, "test postgres did not start; see {}/log", dir.display());
    Cluster {
        admin_url: format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
    }
}

/// Where the PostgreSQL server binaries are: `PG_BIN`, else the newest /usr/lib/postgresql/*/bin.
pub fn postgres_bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries under /usr/lib/postgresql (or set PG_BIN / TEST_DATABASE_URL)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL version with a bin/postgres")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn pg_command(as_root: bool, program: &std::path::Path) -> Command {
    if as_root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(command: &mut Command) {
    let output = command.output().expect("run command");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Declares each `async fn name(kind: StoreKind)` as a test on both stores.
#[macro_export]
macro_rules! contract_tests {
    ($($name:ident),* $(,)?) => {
        mod in_memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::StoreKind::InMemory).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::StoreKind::Postgres).await
                }
            )*
        }
    };
}
