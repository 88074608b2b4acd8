//! Where a phase's CPU goes on this machine: the ctxd server, the PostgreSQL cluster (the
//! postmaster and all its processes: backends, WAL writer, checkpointer) and this load
//! generator (every thread of the bench process). On a small machine the three share the
//! cores, so what the three together spend per call bounds the rate the machine can reach.

use std::collections::HashMap;

use crate::replica::Replica;

/// The cluster's processes: the postmaster and its children.
pub(crate) struct Cluster {
    postmaster: u32,
}

impl Cluster {
    /// The cluster that `db`'s backend belongs to.
    pub(crate) async fn find(db: &tokio_postgres::Client) -> anyhow::Result<Self> {
        let backend: i32 = db.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        Ok(Self {
            postmaster: parent_of(backend as u32)
                .ok_or_else(|| anyhow::anyhow!("no PPid for the backend"))?,
        })
    }

    /// The postmaster and its children now.
    pub(crate) fn processes(&self) -> Vec<u32> {
        let mut pids = vec![self.postmaster];
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                if let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>()
                    && parent_of(pid) == Some(self.postmaster)
                {
                    pids.push(pid);
                }
            }
        }
        pids
    }

    /// Nanoseconds `pids` have run on a CPU so far (`/proc/PID/schedstat`, exact, unlike the
    /// 10 ms ticks of `/proc/PID/stat`).
    pub(crate) fn cpu_nanos(pids: &[u32]) -> u64 {
        pids.iter()
            .filter_map(|pid| schedstat(&format!("/proc/{pid}/schedstat")))
            .sum()
    }

    /// Each of the cluster's processes' CPU so far.
    fn by_process(&self) -> HashMap<u32, u64> {
        self.processes()
            .into_iter()
            .filter_map(|pid| Some((pid, schedstat(&format!("/proc/{pid}/schedstat"))?)))
            .collect()
    }
}

/// The first field of a schedstat file: nanoseconds on a CPU.
fn schedstat(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The parent of process `pid`, from /proc.
fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

/// Nanoseconds every thread of this process has run so far.
fn own_nanos() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| schedstat(&format!("{}/schedstat", t.path().display())))
                .sum()
        })
        .unwrap_or(0)
}

/// The CPU the server, the cluster and this process had spent at one moment.
pub(crate) struct Snapshot {
    server: f64,
    cluster: HashMap<u32, u64>,
    own: u64,
}

/// Microseconds of CPU per call: the server's, the database's and the load generator's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spent {
    pub(crate) server: f64,
    pub(crate) database: f64,
    pub(crate) generator: f64,
}

impl Spent {
    /// All three together.
    pub(crate) fn total(&self) -> f64 {
        self.server + self.database + self.generator
    }
}

impl Snapshot {
    pub(crate) fn take(server: &Replica, cluster: &Cluster) -> Self {
        Self {
            server: server.cpu_seconds().unwrap_or(0.0),
            cluster: cluster.by_process(),
            own: own_nanos(),
        }
    }

    /// What each spent since this snapshot, per one of `calls` calls. A cluster process that
    /// started since counts whole; one that ended since is not counted.
    pub(crate) fn per_call(&self, server: &Replica, cluster: &Cluster, calls: f64) -> Spent {
        let now = Self::take(server, cluster);
        let database: u64 = now
            .cluster
            .iter()
            .map(|(pid, nanos)| nanos.saturating_sub(self.cluster.get(pid).copied().unwrap_or(0)))
            .sum();
        let calls = calls.max(1.0);
        Spent {
            server: (now.server - self.server).max(0.0) * 1e6 / calls,
            database: database as f64 / 1e3 / calls,
            generator: now.own.saturating_sub(self.own) as f64 / 1e3 / calls,
        }
    }
}
