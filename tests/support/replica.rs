//! `ctxd` server processes for the benchmark and reliability suites: the real binary, started
//! and killed the way an orchestrator does it, so RSS, CPU time and SIGKILL are the real thing.
//! Included with `#[path]` by `benches/suite/main.rs` and `tests/reliability/main.rs`.

use std::{
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use ctxd::proto::{self, context_service_client::ContextServiceClient};
use tokio::process::{Child, Command};
use tonic::transport::{Channel, Endpoint};

/// One running (or killed) `ctxd serve` process on a fixed loopback port.
#[derive(Debug)]
pub struct Replica {
    child: Option<Child>,
    /// gRPC address; kept across restarts.
    pub addr: SocketAddr,
    binary: PathBuf,
    env: Vec<(String, String)>,
    log: PathBuf,
}

impl Replica {
    /// Starts `binary` on a free loopback port with `env` added to this process's environment,
    /// and waits until it answers RPCs.
    pub async fn start(
        binary: &Path,
        env: &[(&str, &str)],
        log_dir: &Path,
        name: &str,
    ) -> anyhow::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut replica = Replica {
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            binary: binary.to_path_buf(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            log: log_dir.join(format!("{name}.log")),
        };
        let _ = std::fs::remove_file(&replica.log);
        replica.restart().await?;
        Ok(replica)
    }

    /// (Re)starts the process on the same port and waits until it serves.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.binary)
            .arg("serve")
            .env("CTXD_LISTEN", self.addr.to_string())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.child = Some(child);
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            // Answered is serving: with API keys on, the answer is UNAUTHENTICATED.
            if let Ok(mut client) = self.try_client().await
                && client
                    .count_tokens(proto::CountTokensRequest {
                        text: "ready?".into(),
                        ..Default::default()
                    })
                    .await
                    .map_or_else(|status| status.code() == tonic::Code::Unauthenticated, |_| true)
            {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                anyhow::bail!("replica exited with {status}; log: {}", self.log.display());
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "replica on {} not ready after 60 s; log: {}",
                self.addr,
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn try_client(&self) -> Result<ContextServiceClient<Channel>, tonic::transport::Error> {
        Ok(ContextServiceClient::new(self.channel().await?))
    }

    /// A new HTTP/2 connection to this replica.
    pub async fn channel(&self) -> Result<Channel, tonic::transport::Error> {
        Endpoint::from_shared(format!("http://{}", self.addr))?
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(30))
            .connect()
            .await
    }

    /// A client on a new connection, allowed large messages (the hostile-request table sends
    /// some on purpose).
    pub async fn client(&self) -> anyhow::Result<ContextServiceClient<Channel>> {
        Ok(ContextServiceClient::new(self.channel().await?)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20))
    }

    /// Process id while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL, as the kernel's OOM killer or a node loss would do it.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Resident set size in KiB, from /proc.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// User + system CPU seconds the process has used, from /proc.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()?)).ok()?;
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let after = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / clock_ticks_per_second())
    }

    /// The replica's log so far (for "no panic" checks and failure reports).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// A throwaway PostgreSQL cluster run by `scripts/throwaway-postgres.sh`, which the suites
/// stop and start again on purpose; or one given from outside (`TEST_CITUS_URL`), which they
/// neither stop nor own.
#[derive(Debug)]
pub struct Cluster {
    dir: Option<PathBuf>,
    /// Connection URL of the cluster's `ctxd` database.
    pub url: String,
}

impl Cluster {
    /// Starts a cluster under `parent` (which must be traversable by the `postgres` user).
    pub fn start(parent: &Path) -> anyhow::Result<Self> {
        let dir = parent.join("pg");
        let url = script("start", &dir)?;
        Ok(Cluster { dir: Some(dir), url })
    }

    /// A database someone else runs (a Citus coordinator's, say).
    pub fn external(url: String) -> Self {
        Cluster { dir: None, url }
    }

    /// Whether the suite owns the cluster (and may stop it).
    pub fn owned(&self) -> bool {
        self.dir.is_some()
    }

    /// `pg_ctl stop -m immediate`: the database vanishes mid-transaction.
    pub fn pause(&self) -> anyhow::Result<()> {
        let dir = self
            .dir
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("an external cluster is not paused"))?;
        script("pause", dir).map(drop)
    }

    /// Starts the stopped cluster again on the same port.
    pub fn resume(&self) -> anyhow::Result<()> {
        let dir = self
            .dir
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("an external cluster is not resumed"))?;
        script("resume", dir).map(drop)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = script("stop", dir);
        }
    }
}

fn script(command: &str, dir: &Path) -> anyhow::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/throwaway-postgres.sh");
    let output = std::process::Command::new("bash")
        .arg(path)
        .arg(command)
        .arg(dir)
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "throwaway-postgres.sh {command} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?.trim().to_string())
}

/// A fresh directory under the system temp dir that the `postgres` user can enter.
pub fn work_dir(name: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// The `q` quantile of `samples` (sorted in place).
pub fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort_unstable();
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}
