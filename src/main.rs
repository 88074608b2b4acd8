//! The `ctxd` binary: parse configuration, set up logging, then serve or migrate.

use std::process::ExitCode;

use clap::Parser;
use ctxd::{
    config::{Cli, Command},
    startup::{App, migrate_with_retry},
    store::PostgresStore,
    telemetry,
};

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let settings = match cli.config.validate() {
        Ok(settings) => settings,
        Err(problems) => {
            eprintln!("ctxd: invalid configuration:");
            problems.iter().for_each(|p| eprintln!("  - {p}"));
            return Ok(ExitCode::from(2));
        }
    };
    telemetry::init(cli.config.log_format, &cli.config.log).map_err(|e| anyhow::anyhow!(e))?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = App::build(settings).await?;
            app.run_until_stopped(ctxd::shutdown_signal()).await?;
        }
        Command::Migrate => {
            let Some(options) = &settings.postgres else {
                eprintln!("ctxd migrate: DATABASE_URL is required");
                return Ok(ExitCode::from(2));
            };
            let store = PostgresStore::connect(options)?;
            migrate_with_retry(&store, settings.db_startup_wait).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
