//! `caseload lab up|down|status|list`: modelled devices on this machine
//! (`caseload_lab`), and how `run --lab` and `probe --lab` enter a lab.

use anyhow::Context;
use caseload_lab::lab::{self, LabState, UpOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload lab`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Debug, clap::Subcommand)]
enum LabCommand {
    /// Build a lab: backing files, loop devices, file systems, device
    /// models and cgroups; print the layout its runs use.
    Up {
        /// Lab file, or a built-in lab (`caseload lab list`).
        lab: String,
        /// Evidence files to copy onto the lab's evidence device (with the
        /// device models off, so loading takes no modelled time).
        #[arg(long)]
        evidence: Vec<PathBuf>,
        /// Print the lab's status as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove everything `up` made for a lab, and nothing else.
    Down {
        /// Lab name (or its lab file).
        lab: String,
    },
    /// What is there of a lab, checked against the machine.
    Status {
        /// Lab name (or its lab file).
        lab: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Built-in device models and labs.
    List,
    /// Run any command inside a lab: in its cgroups (its I/O throttles and
    /// CPU quota), with `CASELOAD_LAB_<CHANNEL>` set to each channel's
    /// directory, so a real tool (tsk_loaddb, foremost, ewfverify) runs on
    /// the modelled devices as caseload's own runs do.
    Exec {
        /// Lab name (or its lab file); the lab must be up.
        lab: String,
        /// The command and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Internal: the device server `up` starts.
    #[command(hide = true)]
    Serve {
        /// The lab.
        #[arg(long)]
        lab: String,
        /// Where to mount the device files.
        #[arg(long)]
        mount: PathBuf,
    },
    /// Internal: a network share's server `up` starts in its namespace.
    #[command(hide = true)]
    ShareServe {
        /// The lab (names the process for `down`).
        #[arg(long)]
        lab: String,
        /// Address and port to listen on.
        #[arg(long)]
        listen: String,
        /// The directory served.
        #[arg(long)]
        dir: PathBuf,
        /// Link rate, MB/s (applied by tc on the veth pair; recorded).
        #[arg(long)]
        link_mb_s: f64,
        /// Round trip, µs.
        #[arg(long)]
        rtt_us: f64,
        /// Server time per request, µs.
        #[arg(long)]
        op_us: f64,
    },
}

/// A lab argument as a lab name: a name stays, a lab file gives its name.
fn lab_name(arg: &str) -> anyhow::Result<String> {
    if std::path::Path::new(arg).is_file() {
        return Ok(caseload_workloads::devices::lab(arg)?.name);
    }
    Ok(arg.to_string())
}

fn print_status(state: &LabState, json: bool) -> anyhow::Result<()> {
    let s = lab::status(state);
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "lab {}: {} ({})",
        s.name,
        state.spec.description,
        if s.healthy { "up" } else { "NOT HEALTHY" }
    );
    for d in &s.devices {
        println!(
            "  device {:<10} {:<13} {:<8} {:>6} MiB  {} on {}",
            d["name"].as_str().unwrap_or(""),
            d["model"].as_str().unwrap_or(""),
            d["mechanism"].as_str().unwrap_or(""),
            d["size"].as_u64().unwrap_or(0) >> 20,
            d["loop_device"].as_str().unwrap_or("-"),
            d["mount"].as_str().unwrap_or("-"),
        );
    }
    for (c, dir) in &s.channels {
        println!("  channel {c:<9} {}", dir.display());
    }
    for c in &s.cgroups {
        println!("  cgroup {}", c["path"].as_str().unwrap_or(""));
    }
    if let Some(server) = &s.server {
        println!(
            "  device server pid {} ({})",
            server["pid"],
            if server["alive"] == true {
                "running"
            } else {
                "gone"
            }
        );
    }
    if let Some(l) = &s.layout {
        println!("  layout {}", l.display());
    }
    for p in &s.problems {
        println!("  problem: {p}");
    }
    Ok(())
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        LabCommand::Up {
            lab: arg,
            evidence,
            json,
        } => {
            let spec = caseload_workloads::devices::lab(&arg)?;
            for f in &evidence {
                anyhow::ensure!(f.is_file(), "evidence `{}` is not a file", f.display());
            }
            let exe = std::env::current_exe().context("locating the caseload executable")?;
            let state = lab::up(&spec, &UpOptions { exe })?;
            if !evidence.is_empty() {
                match lab::load_evidence(&state, &evidence) {
                    Ok(copies) => {
                        for c in copies {
                            eprintln!("evidence: {}", c.display());
                        }
                    }
                    Err(e) => {
                        let _ = lab::down(&state);
                        return Err(e.into());
                    }
                }
            }
            print_status(&state, json)?;
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Down { lab: arg } => {
            let state = LabState::load(&lab_name(&arg)?)?;
            let report = lab::down(&state)?;
            for r in &report.removed {
                println!("removed {r}");
            }
            for s in &report.skipped {
                println!("skipped {s}");
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Status { lab: arg, json } => {
            let state = LabState::load(&lab_name(&arg)?)?;
            print_status(&state, json)?;
            Ok(if lab::status(&state).healthy {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        LabCommand::List => {
            println!("device models:");
            for (name, _) in caseload_workloads::devices::DEVICES {
                let m = caseload_workloads::devices::device(name).map_err(anyhow::Error::msg)?;
                println!(
                    "  {:<13} {:<8} {:>6.0} MB/s {:>7.0} IOPS (QD1)  {}",
                    m.name,
                    m.mechanism.as_str(),
                    m.expect.seq_read_mb_s,
                    m.expect.random_read_iops_qd1,
                    m.description
                );
            }
            println!("labs:");
            for (name, _) in caseload_workloads::devices::LABS {
                let l = caseload_workloads::devices::lab(name)?;
                println!("  {:<18} {}", l.name, l.description);
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Exec { lab: arg, command } => {
            let state = LabState::load(&lab_name(&arg)?)?;
            state.ready()?;
            let (program, rest) = command
                .split_first()
                .context("give the command to run after the lab's name")?;
            let mut cmd = std::process::Command::new(program);
            cmd.args(rest);
            for (channel, dir) in &lab::status(&state).channels {
                cmd.env(format!("CASELOAD_LAB_{}", channel.to_uppercase()), dir);
            }
            lab::enter(&state, &mut cmd)?;
            let status = cmd.status().with_context(|| {
                format!("starting {} inside lab `{arg}`", program.to_string_lossy())
            })?;
            Ok(match status.code() {
                Some(0) => ExitCode::SUCCESS,
                Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
                None => ExitCode::FAILURE,
            })
        }
        LabCommand::Serve { lab: name, mount } => {
            caseload_lab::serve_lab(&name, &mount)?;
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::ShareServe {
            lab: _,
            listen,
            dir,
            link_mb_s,
            rtt_us,
            op_us,
        } => {
            let link = caseload_lab::share::ShareLink {
                link_mb_s,
                rtt_us,
                op_us,
            };
            caseload_lab::share::serve_share(&listen, &dir, link)
                .with_context(|| format!("serving {} at {listen}", dir.display()))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The variable that tells a process it already runs inside a lab.
const INSIDE: &str = "CASELOAD_LAB_INSIDE";

/// For a command given `--lab NAME`: unless this process already runs
/// inside the lab, run the same command line again as a child that joins
/// the lab's cgroups first, and return its exit code. `None`: go on here
/// (inside the lab, with its layout).
pub fn enter(name: &str) -> anyhow::Result<Option<ExitCode>> {
    let state = LabState::load(name)?;
    state.ready()?;
    if std::env::var_os(INSIDE).is_some_and(|v| v == name) {
        return Ok(None);
    }
    let exe = std::env::current_exe().context("locating the caseload executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1)).env(INSIDE, name);
    lab::enter(&state, &mut cmd)?;
    let status = cmd
        .status()
        .with_context(|| format!("starting the run inside lab `{name}`"))?;
    Ok(Some(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    }))
}

/// The workstation lab `name` models besides its drives.
pub fn workstation_of(name: &str) -> anyhow::Result<caseload_lab::lab::Workstation> {
    Ok(LabState::load(name)?.spec.workstation)
}

/// The processes of lab `name` that serve a run without being its
/// workload: its device server, whose CPU the run's machine figures
/// leave out.
pub fn helpers_of(name: &str) -> anyhow::Result<Vec<caseload_engine::sampler::Helper>> {
    Ok(LabState::load(name)?
        .daemon
        .map(|d| caseload_engine::sampler::Helper {
            name: "lab device server".into(),
            pid: d.pid,
        })
        .into_iter()
        .collect())
}

/// The layout file of lab `name`.
pub fn layout_of(name: &str) -> anyhow::Result<PathBuf> {
    let state = LabState::load(name)?;
    state
        .layout
        .clone()
        .with_context(|| format!("lab `{name}` has no layout (was `up` interrupted?)"))
}

/// The layout of lab `name` (which must be up), named after the lab, for
/// `compare --lab`.
pub fn lab_layout(name: &str) -> anyhow::Result<caseload_engine::layout::Layout> {
    let state = LabState::load(name)?;
    state.ready()?;
    let path = layout_of(name)?;
    let mut layout = caseload_engine::layout::Layout::load(&path)?;
    layout.name = name.to_string();
    Ok(layout)
}

/// The evidence a run inside lab `name` reads: the copy `lab up --evidence`
/// put on the lab's evidence device when there is one of that file name
/// (and, when `path` exists, of its size), else `path` as given.
pub fn evidence_in(name: &str, path: PathBuf) -> PathBuf {
    let Ok(state) = LabState::load(name) else {
        return path;
    };
    let copy = match (state.channel_dir("evidence"), path.file_name()) {
        (Some(dir), Some(file)) => dir.join(file),
        _ => return path,
    };
    if copy == path {
        return path;
    }
    // The evidence's other segments of a set travel with the first one.
    let same = match (std::fs::metadata(&copy), std::fs::metadata(&path)) {
        (Ok(c), Ok(p)) => c.is_file() && c.len() == p.len(),
        (Ok(c), Err(_)) => c.is_file(),
        _ => false,
    };
    if same {
        eprintln!(
            "caseload: lab `{name}`: evidence read from its evidence device: {}",
            copy.display()
        );
        copy
    } else {
        path
    }
}
