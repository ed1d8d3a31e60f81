//! The `caseload` command line: a thin layer over the library crates.

mod cmd;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("caseload: error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
