//! `caseload corpus`: generate a synthetic evidence corpus.

use std::process::ExitCode;

/// Arguments of `caseload corpus`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Generate the corpus.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("corpus generation is not built yet")
}
