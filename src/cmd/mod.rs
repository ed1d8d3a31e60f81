//! Subcommands. Each lives in its own module and owns its arguments.

pub mod corpus;
pub mod run;
pub mod util;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Reproduce and time the storage workload of a forensic suite.
#[derive(Debug, Parser)]
#[command(name = "caseload", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a synthetic evidence corpus with exact ground truth.
    Corpus(corpus::Args),
    /// Run forensic stages over evidence on a storage layout, timing each
    /// stage and I/O channel.
    Run(run::Args),
}

/// Run the chosen subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Corpus(args) => corpus::run(args),
        Command::Run(args) => run::run(args),
    }
}
