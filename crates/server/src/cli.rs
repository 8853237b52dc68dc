//! The command line: run services, talk to them as a person (remember, recall, show), run the
//! benches and administrative tasks.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::services::ServiceKind;

/// Thinkus Memory: memory for AI employees.
#[derive(Debug, Parser)]
#[command(name = "thinkus", version, about, long_about = None)]
pub struct Cli {
    /// A TOML configuration file (layered over the built-in defaults, under THINKUS__… variables
    /// and --set flags).
    #[arg(long, short = 'c', global = true, env = "THINKUS_CONFIG")]
    pub config: Option<PathBuf>,

    /// Overrides one configuration key: `--set storage.database=postgres://…` (repeatable).
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,

    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs every service in one process, on embedded defaults unless configured otherwise.
    All,
    /// Runs the memory controller.
    MemoryController,
    /// Runs the retriever.
    Retriever,
    /// Runs the knowledge manager.
    KnowledgeManager,
    /// Runs the artifact service.
    Artifact,
    /// Runs the summary service.
    Summary,
    /// Runs the gateway.
    Gateway,
    /// Runs a chosen set of services in one process (`--services retriever,knowledge-manager`).
    Serve {
        #[arg(long, value_delimiter = ',', required = true)]
        services: Vec<ServiceKind>,
    },
    /// Writes a memory (client).
    Remember(crate::commands::RememberArgs),
    /// Recalls memories for a query (client).
    Recall(crate::commands::RecallArgs),
    /// Shows memories in full with their history (client).
    Show(crate::commands::ShowArgs),
    /// Sees and fixes what the employees remember: list, show, history, correct, suppress,
    /// delete, candidates, conflicts, Markdown export and import (client).
    Memory(crate::memory_cli::MemoryArgs),
    /// Runs a benchmark and prints its figures (last line JSON).
    Bench {
        #[command(subcommand)]
        bench: crate::bench::Bench,
    },
    /// Trains an engine's learned heads and writes their weight file.
    Train {
        #[command(subcommand)]
        engine: crate::train::Train,
    },
    /// Administrative tasks (client).
    Admin {
        #[command(subcommand)]
        task: crate::commands::AdminTask,
    },
    /// API key helpers.
    Keys {
        #[command(subcommand)]
        task: crate::commands::KeysTask,
    },
    /// Prints the effective configuration as TOML.
    Config,
}

fn services_of(command: &Command) -> Option<BTreeSet<ServiceKind>> {
    let one = |kind| Some(BTreeSet::from([kind]));
    match command {
        Command::All => Some(ServiceKind::ALL.into_iter().collect()),
        Command::MemoryController => one(ServiceKind::MemoryController),
        Command::Retriever => one(ServiceKind::Retriever),
        Command::KnowledgeManager => one(ServiceKind::KnowledgeManager),
        Command::Artifact => one(ServiceKind::Artifact),
        Command::Summary => one(ServiceKind::Summary),
        Command::Gateway => one(ServiceKind::Gateway),
        Command::Serve { services } => Some(services.iter().copied().collect()),
        _ => None,
    }
}

/// Runs the command line; the process's exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            report_error(&anyhow::anyhow!("cannot start the async runtime: {err}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            report_error(&err);
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::print_stderr)]
fn report_error(err: &anyhow::Error) {
    eprintln!("error: {err:#}");
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::load(cli.config.as_deref(), &cli.overrides)?;
    if let Some(services) = services_of(&cli.command) {
        return serve(config, services).await;
    }
    match cli.command {
        Command::Remember(args) => crate::commands::remember(args).await,
        Command::Recall(args) => crate::commands::recall(args).await,
        Command::Show(args) => crate::commands::show(args).await,
        Command::Memory(args) => crate::memory_cli::run(args).await,
        Command::Admin { task } => crate::commands::admin(task).await,
        Command::Bench { bench } => {
            // Warnings and errors of the services under test go to stderr; the figures to stdout.
            let mut telemetry = config.telemetry.clone();
            telemetry.log_level = "warn".into();
            let _guard = thinkus_common::telemetry::init("thinkus-bench", &telemetry)?;
            crate::bench::run(bench, config).await
        }
        Command::Train { engine } => {
            let mut telemetry = config.telemetry.clone();
            telemetry.log_level = "warn".into();
            let _guard = thinkus_common::telemetry::init("thinkus-train", &telemetry)?;
            crate::train::run(engine, config).await
        }
        Command::Keys { task } => crate::commands::keys(task),
        Command::Config => crate::commands::print_config(&config),
        _ => Ok(()),
    }
}

/// Runs services until SIGTERM or SIGINT, then drains and flushes telemetry.
async fn serve(config: Config, services: BTreeSet<ServiceKind>) -> anyhow::Result<()> {
    let name = if services.len() == ServiceKind::ALL.len() {
        "thinkus".to_string()
    } else {
        format!(
            "thinkus-{}",
            services.iter().map(|s| s.name()).collect::<Vec<_>>().join("+")
        )
    };
    let telemetry = thinkus_common::telemetry::init(&name, &config.telemetry)?;
    std::fs::create_dir_all(&config.server.data_dir).ok();
    let shutdown = thinkus_common::shutdown::on_signals();
    if let Some(addr) = config.server.metrics_addr {
        let token = shutdown.clone();
        tokio::spawn(async move {
            if let Err(err) = thinkus_common::metrics::serve(addr, token).await {
                tracing::error!(%err, %addr, "metrics endpoint failed");
            }
        });
    }
    let listener = thinkus_common::grpc::bind(config.server.grpc_addr).await?;
    let node = crate::node::start(config, services, listener, None, shutdown.clone()).await?;
    let result = node.wait().await;
    telemetry.shutdown().await;
    result
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every command's flags are distinct (clap checks a command only when it is parsed: a
    /// clash, such as `memory correct -c` with the global `-c/--config`, panicked at run time).
    #[test]
    fn every_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
