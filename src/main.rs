//! The `caseload` command line: a thin layer over the library crates.

mod cmd;

use clap::Parser;

fn main() -> std::process::ExitCode {
    // Before any thread: memory that stays flat with image size.
    caseload_engine::metrics::tune_allocator();
    quiet_on_closed_stdout();
    let cli = cmd::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("caseload: error: {}", message(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Output to a closed pipe (`caseload lab status LAB | head -3`) ends the
/// command without a panic's message and backtrace. Rust ignores SIGPIPE
/// (a write to a database server's closed socket must be an error, not
/// the end of the process), so `println!` panics on EPIPE; the panic
/// still unwinds, so what the command started (a server, a lab's mounts)
/// is stopped by its guards as on any error.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            return;
        }
        default(info);
    }));
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
