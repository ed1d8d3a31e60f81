//! `caseload doctor`: what this machine runs caseload with: the CPU, and
//! which implementation of each hot kernel was chosen and how fast each
//! candidate measured (the same record as run.json's `system.kernels`).

use caseload_engine::kernels::{self, How};
use caseload_engine::system::SystemContext;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

/// Arguments of `caseload doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the machine and its kernels as JSON (run.json's `system`
    /// object).
    #[arg(long)]
    pub json: bool,
}

/// Measure (a few milliseconds) and print.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let system = SystemContext::current();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&system)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    writeln!(out, "caseload {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(
        out,
        "cpu:    {} ({} logical CPUs)",
        system.cpu_model, system.logical_cpus
    )?;
    writeln!(out, "os:     {} {}", system.os, system.kernel)?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<12} {:<26} {:<9} candidates (MB/s in the first-use measurement)",
        "kernel", "runs", "how"
    )?;
    for k in &system.kernels {
        let how = match k.how {
            How::Measured => "measured",
            How::Forced => "forced",
            How::Rule => "rule",
            How::Only => "only",
        };
        let candidates: Vec<String> = k
            .candidates
            .iter()
            .map(|c| match (c.available, c.mb_s) {
                (true, Some(mb)) => format!("{} {mb:.0}", c.name),
                (true, None) => c.name.clone(),
                (false, _) => format!("{} (not here)", c.name),
            })
            .collect();
        writeln!(
            out,
            "{:<12} {:<26} {:<9} {}",
            k.kernel,
            k.chosen,
            how,
            candidates.join(", ")
        )?;
    }
    writeln!(out)?;
    for k in &system.kernels {
        if let Some(note) = &k.note {
            writeln!(out, "{}: {note}", k.kernel)?;
        }
        for c in k.candidates.iter().filter(|c| !c.available) {
            if let Some(why) = &c.note {
                writeln!(out, "{} {}: {why}", k.kernel, c.name)?;
            }
        }
    }
    let envs: Vec<&str> = system
        .kernels
        .iter()
        .filter_map(|k| k.env.as_deref())
        .collect();
    writeln!(out)?;
    writeln!(
        out,
        "force a choice with {} (refused if this CPU cannot run it)",
        envs.join(", ")
    )?;
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = std::io::stdout().write_all(out.as_bytes());
    kernels::check_environment().map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}
