//! The reliability suite (the product contract's reliability targets): three real `ctxd` replicas on one throwaway
//! PostgreSQL, pushed through concurrency, database outages, SIGKILLs, racing summaries and
//! hostile requests. Every check prints its figures; the process fails if any check fails.
//!
//! `cargo test --test reliability` runs the reduced version CI runs; the full version is
//! `CTXD_RELIABILITY=full cargo test --release --test reliability` (docs/reliability.md), and
//! `CTXD_RELIABILITY_ONLY=locked` (a comma-separated list) runs only the named checks.

mod adversary;
mod appenders;
mod bodies;
mod connections;
mod cpu;
mod degradations;
mod feed;
mod forks;
mod held;
mod hostile;
#[path = "../support/hostile_endpoint.rs"]
#[allow(dead_code, unreachable_pub)]
mod hostile_endpoint;
mod kill;
mod locked;
mod memory;
mod outage;
mod race;
mod raw;
mod redaction_races;
#[path = "../support/replica.rs"]
#[allow(dead_code, unreachable_pub)]
mod replica;
mod short_deadlines;
mod summary_races;

use std::{path::Path, time::Instant};

use replica::{Cluster, Replica};

/// Sizes of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub(crate) appends: usize,
    pub(crate) kills: usize,
    pub(crate) race_appends: usize,
    pub(crate) outage_secs: u64,
}

/// The figures and verdict of one check.
#[derive(Debug)]
pub(crate) struct Report {
    name: &'static str,
    figures: Vec<(String, String)>,
    failures: Vec<String>,
}

impl Report {
    pub(crate) fn new(name: &'static str) -> Self {
        Report {
            name,
            figures: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Records a figure for the printout.
    pub(crate) fn figure(&mut self, label: &str, value: impl std::fmt::Display) {
        self.figures.push((label.to_string(), value.to_string()));
    }

    /// Records a failure unless `ok`.
    pub(crate) fn expect(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failures.push(what.into());
        }
    }

    fn print(&self) {
        let verdict = if self.failures.is_empty() { "PASS" } else { "FAIL" };
        println!("\n## {} — {verdict}", self.name);
        for (label, value) in &self.figures {
            println!("  {label:<44} {value}");
        }
        for failure in &self.failures {
            println!("  FAILED: {failure}");
        }
    }
}

fn main() -> anyhow::Result<()> {
    let full = std::env::var("CTXD_RELIABILITY").is_ok_and(|v| v == "full");
    let scale = if full {
        Scale {
            appends: 10_000,
            kills: 50,
            race_appends: 2_000,
            outage_secs: 10,
        }
    } else {
        Scale {
            appends: 2_000,
            kills: 10,
            race_appends: 400,
            outage_secs: 10,
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(scale, full))
}

async fn run(scale: Scale, full: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let work = replica::work_dir("ctxd-reliability")?;
    // `TEST_CITUS_URL` (a Citus coordinator's fresh `ctxd` database, scripts/citus-cluster.sh):
    // the checks that keep to one database run there (appenders and forks unless
    // CTXD_RELIABILITY_ONLY says otherwise).
    let citus = std::env::var("TEST_CITUS_URL").ok();
    let cluster = match &citus {
        Some(url) => Cluster::external(url.clone()),
        None => Cluster::start(&work)?,
    };
    let env = [
        ("DATABASE_URL", cluster.url.as_str()),
        ("CTXD_HEALTH_PROBE_INTERVAL_MS", "200"),
        ("CTXD_DB_CONNECT_TIMEOUT_SECS", "1"),
        ("CTXD_REQUEST_TIMEOUT_SECS", "10"),
        ("RUST_LOG", "info"),
    ];
    // `CTXD_RELIABILITY_BINARY` runs the suite against another build (a "before" figure).
    let other = std::env::var("CTXD_RELIABILITY_BINARY").ok();
    let binary = other
        .as_deref()
        .map_or(Path::new(env!("CARGO_BIN_EXE_ctxd")), Path::new);
    // All three start at once: they race to migrate the empty database.
    let (a, b, c) = tokio::try_join!(
        Replica::start(binary, &env, &work, "replica-0"),
        Replica::start(binary, &env, &work, "replica-1"),
        Replica::start(binary, &env, &work, "replica-2"),
    )?;
    let mut replicas = vec![a, b, c];
    println!(
        "# reliability suite ({}), 3 replicas of {} on PostgreSQL {}; logs in {}",
        if full {
            "full"
        } else {
            "reduced: CTXD_RELIABILITY=full for the full run"
        },
        binary.display(),
        cluster.url,
        work.display()
    );

    // `CTXD_RELIABILITY_ONLY=locked,hostile` runs only the named checks (while working on one).
    let only = std::env::var("CTXD_RELIABILITY_ONLY").unwrap_or_else(|_| match cluster.owned() {
        true => String::new(),
        false => "appenders,forks".into(),
    });
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|n| n.trim() == name);
    let mut reports = Vec::new();
    if wanted("appenders") {
        reports.push(appenders::concurrent_appenders(&replicas, scale.appends).await?);
        reports.push(appenders::idempotent_retries(&replicas, 3).await?);
        reports.push(appenders::idempotent_retries(&replicas, 1).await?);
    }
    if wanted("race") {
        reports.push(race::summarize_racing_appenders(&replicas, scale.race_appends).await?);
    }
    if wanted("forks") {
        reports.push(forks::concurrent_forks(&replicas[1], &cluster).await?);
    }
    if wanted("redaction_races") {
        let rounds = if full { 30 } else { 10 };
        reports.push(redaction_races::redactions_racing_refreshes(&replicas, rounds).await?);
    }
    if wanted("summary_races") {
        let rounds = if full { 600 } else { 300 };
        reports.push(summary_races::provided_summaries_racing_redactions(&replicas, rounds).await?);
    }
    if wanted("adversary") {
        reports.push(adversary::outside_services(binary, &cluster, &work).await?);
    }
    if wanted("hostile") {
        reports.push(hostile::table(&mut replicas).await?);
    }
    if wanted("cpu") {
        reports.push(cpu::pathological_memory_work(&replicas[1]).await?);
        reports.push(cpu::large_appends_with_short_deadlines(&replicas[1]).await?);
    }
    if wanted("memory") {
        reports.push(memory::large_calls(binary, &cluster, &work).await?);
    }
    if wanted("bodies") {
        reports.push(bodies::hostile_bodies(binary, &cluster, &work).await?);
    }
    if wanted("degradations") {
        reports.push(degradations::degradations(binary, &cluster, &work).await?);
    }
    if wanted("held") {
        reports.push(held::held_memory(binary, &cluster, &work).await?);
    }
    if wanted("locked") {
        reports.push(locked::locked_conversation(binary, &cluster, &work).await?);
    }
    if wanted("short_deadlines") {
        let appends = if full { 8_000 } else { 2_000 };
        for shape in [short_deadlines::CONTENDED, short_deadlines::IN_BATCHES] {
            reports.push(short_deadlines::short_deadlines(&replicas[0], &cluster, appends, shape).await?);
        }
    }
    if wanted("connections") {
        reports.push(connections::silent_connections(binary, &cluster, &work).await?);
    }
    if wanted("feed") {
        let secs = if full { 30 } else { 12 };
        reports.push(feed::watched_under_fire(&mut replicas, &cluster, secs, scale.outage_secs).await?);
    }
    if wanted("outage") {
        reports.push(outage::database_stopped(&mut replicas, &cluster, scale.outage_secs).await?);
    }
    if wanted("kill") {
        reports.push(kill::sigkill_mid_batch(&mut replicas, scale.kills).await?);
    }
    reports.push(no_panics(&mut replicas));
    for report in &reports {
        report.print();
    }
    let failed = reports.iter().filter(|r| !r.failures.is_empty()).count();
    println!(
        "\nreliability: {} passed, {failed} failed in {:.0} s",
        reports.len() - failed,
        started.elapsed().as_secs_f64()
    );
    drop(replicas);
    drop(cluster);
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&work);
        Ok(())
    } else {
        anyhow::bail!(
            "{failed} reliability checks failed; replica logs are in {}",
            work.display()
        )
    }
}

/// No replica panicked or died unexpectedly during the run.
fn no_panics(replicas: &mut [Replica]) -> Report {
    let mut report = Report::new("no panics in any replica log");
    let mut panics = 0;
    for (i, replica) in replicas.iter_mut().enumerate() {
        let log = replica.log_text();
        let count = log.matches("panicked").count();
        panics += count;
        report.expect(count == 0, format!("replica {i} logged {count} panics"));
        report.expect(replica.is_running(), format!("replica {i} is not running"));
    }
    report.figure("panics logged", panics);
    report
}
