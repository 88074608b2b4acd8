//! ctxd's benchmark suite: the real `ctxd` binary serving from a real PostgreSQL, driven by
//! the real tonic client. Each figure is printed next to the baseline it is judged against,
//! measured in the same run (targets: docs/benchmarks.md and the product contract's performance targets).
//!
//! Run `scripts/bench.sh`: it starts a throwaway PostgreSQL, runs this with `DATABASE_URL`
//! set, then measures tiktoken and LangChain `trim_messages` (Python) on the same data and
//! prints the ratios. `BENCH_QUICK=1` shrinks every phase (the CI smoke run); `BENCH_ONLY=`
//! `build`, `append`, `memory`, `tokens`, `cache`, `changes`, `conversations`, `dbcost`, `protocols`, `scale`, `search`, `traces` (comma-separated) runs some phases; `BENCH_SAMPLES=N`
//! sets the BuildContext samples per size (for profiling).

mod append;
mod build;
mod cache;
mod changes;
mod conversations;
mod dbcost;
mod embeddings;
mod machine;
mod memory;
mod protocols;
#[path = "../../tests/support/replica.rs"]
#[allow(dead_code, unreachable_pub)]
mod replica;
mod scale;
mod search;
mod tokens;
mod traces;

use std::path::{Path, PathBuf};

use replica::Replica;

/// Sizes of one run: the full run, or a quick one that only proves the harness works.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub(crate) history_sizes: [usize; 3],
    pub(crate) samples: usize,
    pub(crate) append_secs: u64,
    pub(crate) sustain_secs: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("ctxd bench: set DATABASE_URL to an empty database (or run scripts/bench.sh)");
        return Ok(());
    };
    let mut scale = if std::env::var_os("BENCH_QUICK").is_some() {
        Scale {
            history_sizes: [100, 1_000, 2_000],
            samples: 50,
            append_secs: 1,
            sustain_secs: 4,
        }
    } else {
        Scale {
            history_sizes: [1_000, 10_000, 100_000],
            samples: 400,
            append_secs: 5,
            sustain_secs: 60,
        }
    };
    if let Some(samples) = std::env::var("BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()) {
        scale.samples = samples;
    }
    let out = output_dir()?;
    let server = Replica::start(
        Path::new(env!("CARGO_BIN_EXE_ctxd")),
        &[
            ("DATABASE_URL", &url),
            ("CTXD_DB_POOL_SIZE", "32"),
            ("RUST_LOG", "info"),
        ],
        &out,
        "bench-server",
    )
    .await?;
    println!("# machine: {}", machine());
    println!(
        "# server: {} (pid {}), log in {}",
        server.addr,
        server.pid().unwrap_or(0),
        out.display()
    );

    // BENCH_ONLY=append,tokens runs a subset (profiling one phase); the sustained phase needs
    // the histories the build phase seeds.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let wanted = |phase: &str| only.is_empty() || only.split(',').any(|p| p == phase);
    let mut rss = memory::RssLog::default();
    rss.sample("after start", &server);
    if wanted("build") {
        build::run(&server, &url, scale, &out, &mut rss).await?;
    }
    if wanted("append") {
        append::run(&server, &url, scale).await?;
    }
    if wanted("build") && wanted("memory") {
        memory::sustained(&server, scale, &mut rss).await?;
        rss.report();
    }
    if wanted("tokens") {
        tokens::run(&out);
    }
    if wanted("cache") {
        cache::run(&server, scale).await?;
    }
    if wanted("changes") {
        changes::run(&server, std::env::var_os("BENCH_QUICK").is_some()).await?;
    }
    if wanted("conversations") {
        conversations::run(&server, &url, std::env::var_os("BENCH_QUICK").is_some()).await?;
    }
    if wanted("dbcost") {
        dbcost::run(&server, &url, &out, std::env::var_os("BENCH_QUICK").is_some()).await?;
    }
    if wanted("protocols") {
        protocols::run(&server, std::env::var_os("BENCH_QUICK").is_some()).await?;
    }
    if wanted("search") {
        search::run(&server, std::env::var_os("BENCH_QUICK").is_some()).await?;
    }
    if wanted("embeddings") {
        let quick = std::env::var_os("BENCH_QUICK").is_some();
        embeddings::run(&server, &url, &out, quick).await?;
    }
    if wanted("traces") {
        traces::run(&url, &out, std::env::var_os("BENCH_QUICK").is_some()).await?;
    }
    if wanted("scale") {
        let secs = if std::env::var_os("BENCH_QUICK").is_some() {
            2
        } else {
            20
        };
        scale::run(&server, &url, secs).await?;
    }
    Ok(())
}

/// `target/bench`: data files the Python comparisons read.
fn output_dir() -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}")
}
