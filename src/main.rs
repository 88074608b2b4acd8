//! The `ctxd` binary: parse configuration, set up logging, then serve or migrate.

use std::process::ExitCode;

use clap::Parser;
use ctxd::{
    config::ApiKey,
    config::{Cli, Command, Settings},
    runtime::telemetry::ErrorChain,
    startup::{App, init_telemetry, migrate_with_retry, postgres_options},
    store,
};

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let settings = match cli.config.validate() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("ctxd: invalid configuration:");
            for problem in &error.problems {
                eprintln!("  - {}", ErrorChain(problem));
            }
            return Ok(ExitCode::from(2));
        }
    };
    let traces = init_telemetry(&settings.telemetry)?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = App::build(settings).await?;
            let served = app.run_until_stopped(ctxd::shutdown_signal()).await;
            if let Some(traces) = traces {
                traces.shutdown().await;
            }
            served?;
        }
        Command::Health { addr, service } => return Ok(health_check(addr, service).await),
        Command::HashKey { key } => {
            if let Err(e) = ApiKey::check_key(&key) {
                eprintln!("ctxd hash-key: {e}");
                return Ok(ExitCode::from(2));
            }
            println!("{}", ApiKey::hash_hex(&key));
        }
        Command::Migrate => return migrate(&settings).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// Applies pending migrations, for a Kubernetes Job run before the replicas start.
async fn migrate(settings: &Settings) -> anyhow::Result<ExitCode> {
    let Some(options) = postgres_options(&settings.database, settings.server.request_timeout) else {
        eprintln!("ctxd migrate: DATABASE_URL is required");
        return Ok(ExitCode::from(2));
    };
    let store = store::open(Some(&options))?;
    migrate_with_retry(&*store, settings.database.startup_wait).await?;
    Ok(ExitCode::SUCCESS)
}

/// Exit 0 when the server at `addr` reports `service` SERVING, 1 otherwise.
async fn health_check(addr: std::net::SocketAddr, service: String) -> ExitCode {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{addr}")) {
        Ok(endpoint) => endpoint.timeout(std::time::Duration::from_secs(2)),
        Err(_) => return ExitCode::FAILURE,
    };
    let Ok(channel) = endpoint.connect().await else {
        return ExitCode::FAILURE;
    };
    match HealthClient::new(channel)
        .check(HealthCheckRequest { service })
        .await
    {
        Ok(response) if response.get_ref().status() == ServingStatus::Serving => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
