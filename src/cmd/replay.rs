//! `caseload replay`: a trace played on a layout or lab, thread by thread
//! with its think time, into a run.json like any run's
//! (`caseload_engine::replay`).

use super::job_args::LayoutArgs;
use super::workstation_args::WorkstationArgs;
use caseload_engine::cache::CacheMode;
use caseload_engine::replay::{Phases, ReplaySpec};
use caseload_engine::report::render_table;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

/// Arguments of `caseload replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace (`trace import`'s output, or a traced run's trace.csv).
    pub trace: PathBuf,
    /// Where to replay it.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Files standing for the trace's evidence files, in the order the
    /// trace first reads them (default: the trace's own where they exist,
    /// else stand-ins of the size it reads).
    #[arg(long)]
    pub evidence: Vec<PathBuf>,
    /// cold: drop the page cache after setting up (default); warm: leave it.
    #[arg(long, default_value = "cold")]
    pub cache: String,
    /// Think time as recorded times F (0: as fast as the devices go).
    #[arg(long, default_value_t = 1.0)]
    pub think_scale: f64,
    /// A phase of the report: NAME=START..END in seconds of trace time
    /// (repeat); operations outside every window are phase `other`.
    #[arg(long = "phase", value_name = "NAME=START..END")]
    pub phases: Vec<String>,
    /// Phases by process instead of the trace's own markers.
    #[arg(long, conflicts_with = "phases")]
    pub phase_by_process: bool,
    /// Replace an earlier replay (or run) in the layout's directories.
    #[arg(long)]
    pub force: bool,
    /// Print run.json instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The modelled workstation's memory.
    #[command(flatten)]
    pub workstation: WorkstationArgs,
}

fn parse_window(text: &str) -> anyhow::Result<(String, f64, f64)> {
    let bad = || {
        anyhow::anyhow!("--phase {text}: write NAME=START..END in seconds, e.g. index=120.5..300")
    };
    let (name, range) = text.split_once('=').ok_or_else(bad)?;
    let (a, b) = range.split_once("..").ok_or_else(bad)?;
    let (a, b): (f64, f64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    anyhow::ensure!(!name.is_empty() && a >= 0.0 && b > a, "{}", bad());
    Ok((name.to_string(), a, b))
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.workstation.check()?;
    anyhow::ensure!(
        args.workstation.cpu_scale.is_none(),
        "--cpu-scale is for runs; a replay's CPU is the machine's"
    );
    let mut lab_workstation = None;
    if let Some(lab) = args.layout.lab.clone() {
        if let Some(code) = super::lab::enter(&lab)? {
            return Ok(code);
        }
        lab_workstation = Some(super::lab::workstation_of(&lab)?);
    }
    let workstation = args.workstation.spec(lab_workstation.as_ref())?;
    let _cpus = args.workstation.apply_cpus(lab_workstation.as_ref())?;
    let cache = match args.cache.as_str() {
        "cold" => CacheMode::Cold,
        "warm" => CacheMode::Warm,
        other => anyhow::bail!("--cache {other}: cold or warm"),
    };
    anyhow::ensure!(
        args.think_scale >= 0.0 && args.think_scale.is_finite(),
        "--think-scale must be 0 or more"
    );
    let phases = if args.phase_by_process {
        Phases::Process
    } else if args.phases.is_empty() {
        Phases::Trace
    } else {
        Phases::Windows(
            args.phases
                .iter()
                .map(|p| parse_window(p))
                .collect::<anyhow::Result<_>>()?,
        )
    };
    let trace = if args.trace.is_dir() {
        args.trace.join("trace.csv")
    } else {
        args.trace.clone()
    };
    let spec = ReplaySpec {
        trace,
        layout: args.layout.layout()?,
        evidence: args.evidence.clone(),
        cache,
        think_scale: args.think_scale,
        phases,
        force: args.force,
        workstation,
    };
    let cancel = AtomicBool::new(false);
    let report = caseload_engine::replay::replay(&spec, &cancel)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_table(&report));
        for n in &report.evidence.notes {
            println!("note: {n}");
        }
    }
    Ok(if report.status == "completed" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
