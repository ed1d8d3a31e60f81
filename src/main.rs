//! The `caseload` command line: a thin layer over the library crates.

mod cmd;

use clap::Parser;

fn main() -> std::process::ExitCode {
    // Before any thread: memory that stays flat with image size.
    caseload_engine::metrics::tune_allocator();
    let cli = cmd::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("caseload: error: {}", message(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each cause once: library errors
/// often say their cause in their own message as well as in `source()`.
fn message(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    text
}
