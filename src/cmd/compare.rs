//! `caseload compare`: one workload over evidence × layouts, repeated and
//! interleaved, each run a cold-cache `caseload run` in its own process;
//! medians, ranges and ratios against a baseline in a table, CSV,
//! `compare.json` and `report.html`.

use super::util::{interrupt_flag, parse_size};
use super::workstation_args::WorkstationArgs;
use anyhow::Context;
use caseload_engine::layout::Layout;
use caseload_engine::probe::ProbeOptions;
use caseload_workloads::compare::{CompareObserver, Prober};
use caseload_workloads::report::{RunRecord, files, render_table};
use caseload_workloads::{Baseline, CompareSpec, StageSelection, Workload, run_compare};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `caseload compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Evidence image (raw or first E01 segment). Repeat to compare several.
    #[arg(long, required = true)]
    pub evidence: Vec<PathBuf>,
    /// Layout: a layout file or a preset (five-channel, three-channel,
    /// single-disk). Repeat to compare several. Configurations are every
    /// evidence on every layout, numbered from 1 in that order.
    #[arg(long, required_unless_present = "lab")]
    pub layout: Vec<String>,
    /// A lab that is up (`caseload lab up`), as a layout whose runs run on
    /// its modelled devices; evidence loaded into it (`lab up --evidence`)
    /// is used from its evidence device. Repeatable; after any --layout.
    #[arg(long)]
    pub lab: Vec<String>,
    /// Runs per configuration.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Output directory for compare.json, CSV, report.html and each run's
    /// report. Must not already hold a comparison.
    #[arg(long)]
    pub out: PathBuf,
    /// The configuration ratios are taken against: its number (from 1) or
    /// label (`EVIDENCE@LAYOUT`, or an evidence or layout name that picks
    /// out one configuration). Default: the first.
    #[arg(long, default_value = "1")]
    pub baseline: Baseline,
    /// Concurrent pipelines per run (default: the workload's `instances`,
    /// else 1). Figures are the aggregate over instances; each instance's
    /// own are kept too.
    #[arg(long)]
    pub instances: Option<usize>,
    /// Probe each layout's devices (and each evidence file) before the runs
    /// and set the results beside the stage figures.
    #[arg(long)]
    pub probe: bool,
    /// Scratch file size of each probe.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, requires = "probe")]
    pub probe_size: u64,
    /// Seconds of 4 KiB random reads per probed channel.
    #[arg(long, default_value_t = 3.0, requires = "probe")]
    pub probe_seconds: f64,
    /// Keep each run's case directories (removed after each run otherwise).
    #[arg(long)]
    pub keep_runs: bool,
    /// Worker threads per run (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Every run's modelled workstation (with --lab: over each lab's own).
    #[command(flatten)]
    pub workstation: WorkstationArgs,
    /// What the case runs, its database and hash library, the check
    /// before the first run.
    #[command(flatten)]
    pub job: super::job_args::JobArgs,
}

struct Printer;

impl CompareObserver for Printer {
    fn probing(&self, what: &str) {
        eprintln!("caseload compare: probing {what}");
    }
    fn run_started(&self, sequence: usize, total: usize, label: &str, repeat: usize) {
        eprintln!("caseload compare: run {sequence}/{total}: {label} repeat {repeat}");
    }
    fn run_finished(&self, record: &RunRecord, total: usize, label: &str) {
        let stages: f64 = record.stages.iter().map(|s| s.wall_seconds).sum();
        eprintln!(
            "caseload compare: run {}/{total}: {label} repeat {}: {} ({stages:.2} s in stages){}",
            record.sequence,
            record.repeat,
            record.status,
            record
                .error
                .as_deref()
                .map_or(String::new(), |e| format!(": {e}"))
        );
        for s in record.stages.iter().filter(|s| s.status != "completed") {
            eprintln!(
                "caseload compare:     stage {} {}{}",
                s.name,
                s.status,
                s.error
                    .as_deref()
                    .map_or(String::new(), |e| format!(": {e}"))
            );
        }
    }
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = execute(&args)?;
    print_report(&report, &args.out, "");
    Ok(exit_code(&report.status, "compare"))
}

/// The table of a comparison (or study) and where its reports are.
pub fn print_report(
    report: &caseload_workloads::report::CompareReport,
    out: &std::path::Path,
    more: &str,
) {
    print!("{}", render_table(report));
    println!(
        "reports: {} ({}, {}, {}, {}{more})",
        out.display(),
        files::COMPARE_JSON,
        files::SUMMARY_CSV,
        files::RUNS_CSV,
        files::REPORT_HTML
    );
}

/// The exit code for a comparison (or study) that ended with `status`.
pub fn exit_code(status: &str, command: &str) -> ExitCode {
    match status {
        "completed" => ExitCode::SUCCESS,
        "interrupted" => {
            eprintln!("caseload {command}: interrupted; the reports hold the runs that finished");
            ExitCode::from(130)
        }
        _ => {
            eprintln!("caseload {command}: some runs did not complete (see the table above)");
            ExitCode::FAILURE
        }
    }
}

/// Check the arguments and run the comparison; the report (also written
/// to `args.out`).
pub fn execute(args: &Args) -> anyhow::Result<caseload_workloads::report::CompareReport> {
    if let Some(trace) = args
        .job
        .workload
        .as_deref()
        .and_then(caseload_workloads::job::trace_workload)
    {
        return execute_trace(args, std::path::Path::new(trace));
    }
    // Everything the runs will be given is checked here, once, so a bad
    // workload or option is one clear error, not a matrix of failed runs.
    let resolved = args.job.resolve()?;
    let mut stage_specs = resolved.stages;
    let selection = match &args.job.workload {
        Some(w) => {
            let workload = Workload::resolve(w)?;
            // A file is handed to the runs by absolute path, so a run started
            // from elsewhere still finds it.
            let arg = match std::fs::canonicalize(w) {
                Ok(p) if p.is_file() => p.to_string_lossy().into_owned(),
                _ => w.clone(),
            };
            StageSelection::Workload {
                arg,
                name: workload.name.clone(),
                origin: workload.origin.clone(),
                stages: workload.stages.iter().map(|(n, _)| n.clone()).collect(),
            }
        }
        None => StageSelection::Stages(stage_specs.iter().map(|(n, _)| n.clone()).collect()),
    };
    for o in &args.job.stage_options {
        caseload_engine::stage::apply_option(&mut stage_specs, o)?;
    }
    caseload_engine::run::build_stages(&stage_specs)?;
    let db = args.job.db.options_with(resolved.profile)?;
    // Every lab's workstation, or none, checked on every evidence once.
    let lab_workstations = args
        .lab
        .iter()
        .map(|name| super::lab::workstation_of(name).map(Some))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for lab in lab_workstations
        .iter()
        .map(Option::as_ref)
        .chain((!args.layout.is_empty()).then_some(None))
    {
        args.workstation
            .preflight(lab, &args.evidence, args.threads, &db)?;
    }
    anyhow::ensure!(
        args.probe_seconds > 0.0 && args.probe_seconds.is_finite(),
        "--probe-seconds must be positive"
    );
    let mut layouts = Vec::new();
    let mut labs = Vec::new();
    for arg in &args.layout {
        layouts.push(caseload_workloads::layouts::resolve(arg)?);
        labs.push(None);
    }
    for name in &args.lab {
        layouts.push(super::lab::lab_layout(name)?);
        labs.push(Some(name.clone()));
    }
    super::job_args::preflight(
        &super::job_args::Planned {
            layouts: &layouts,
            labs: &[],
            evidence: &args.evidence,
            stages: &stage_specs,
            job: &args.job,
            db: &db,
            copies: if args.keep_runs {
                (args.repeat * args.evidence.len()) as u64
            } else {
                1
            },
        },
        Default::default(),
    )?;
    // The hash sets go into each layout's library once, before the matrix.
    let mut layout_stage_options = Vec::new();
    for layout in &layouts {
        layout_stage_options.push(super::hashset::prepare_run(
            &args.job.kff.hashsets,
            args.job.kff.kff_library.as_deref(),
            layout,
            &stage_specs,
        )?);
    }
    let exe = std::env::current_exe().context("locating the caseload executable")?;
    let probe_options = ProbeOptions {
        file_size: args.probe_size.max(1 << 20),
        random_duration: Duration::from_secs_f64(args.probe_seconds),
        ..ProbeOptions::default()
    };
    let probe_fn = |layout: &Layout, evidence: Option<&std::path::Path>| {
        caseload_engine::probe::probe_layout(layout, evidence, &probe_options)
    };
    let prober: Option<Prober<'_>> = if args.probe { Some(&probe_fn) } else { None };
    let spec = CompareSpec {
        exe,
        evidence: args.evidence.clone(),
        layouts,
        labs,
        stages: selection,
        stage_options: args.job.stage_options.clone(),
        layout_stage_options,
        stage_specs,
        repeat: args.repeat,
        out: args.out.clone(),
        baseline: args.baseline.clone(),
        instances: args.instances.or(resolved.instances).unwrap_or(1),
        threads: args.threads,
        db,
        workstation: args.workstation.job(),
        keep_runs: args.keep_runs,
        prober,
        command: std::env::args().collect(),
    };
    let cancel = interrupt_flag();
    Ok(run_compare(&spec, &Printer, &cancel)?)
}

/// A comparison whose workload is a trace (`--workload trace:FILE`): each
/// run is the trace replayed on the layout or lab (`caseload replay`),
/// its evidence standing for the trace's; the report's stages are the
/// trace's phases.
fn execute_trace(
    args: &Args,
    trace: &std::path::Path,
) -> anyhow::Result<caseload_workloads::report::CompareReport> {
    use caseload_traces::format::{Op, TraceReader};
    anyhow::ensure!(
        args.job.stages.is_empty() && args.job.stage_options.is_empty(),
        "--workload trace:FILE replays the trace: --stages and --stage-option are a run's"
    );
    anyhow::ensure!(
        args.instances.unwrap_or(1) == 1,
        "--instances with a trace workload: a trace is one job's I/O; run the suite several times to trace several"
    );
    let trace =
        std::fs::canonicalize(trace).with_context(|| format!("trace {}", trace.display()))?;
    // The stages are the trace's phases (a traced run's stages), else one.
    let mut reader = TraceReader::new(std::io::BufReader::new(std::fs::File::open(&trace)?))
        .with_context(|| format!("reading {}", trace.display()))?;
    let mut phases: Vec<String> = Vec::new();
    while let Some(r) = reader.next_record() {
        let r = r.with_context(|| format!("reading {}", trace.display()))?;
        if r.op == Op::Phase
            && let Some(p) = r.path
        {
            let name = String::from_utf8_lossy(&p).into_owned();
            if !phases.contains(&name) {
                phases.push(name);
            }
        }
    }
    if phases.is_empty() {
        phases.push("replay".into());
    }
    let mut layouts = Vec::new();
    let mut labs = Vec::new();
    for arg in &args.layout {
        layouts.push(caseload_workloads::layouts::resolve(arg)?);
        labs.push(None);
    }
    for name in &args.lab {
        layouts.push(super::lab::lab_layout(name)?);
        labs.push(Some(name.clone()));
    }
    let stem = trace
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let spec = CompareSpec {
        exe: std::env::current_exe().context("locating the caseload executable")?,
        evidence: args.evidence.clone(),
        layout_stage_options: vec![Vec::new(); layouts.len()],
        layouts,
        labs,
        stages: StageSelection::Workload {
            arg: format!("trace:{}", trace.display()),
            name: format!("trace:{stem}"),
            origin: trace.display().to_string(),
            stages: phases,
        },
        stage_options: Vec::new(),
        stage_specs: Vec::new(),
        repeat: args.repeat,
        out: args.out.clone(),
        baseline: args.baseline.clone(),
        instances: 1,
        threads: None,
        db: Default::default(),
        workstation: args.workstation.job(),
        keep_runs: args.keep_runs,
        prober: None,
        command: std::env::args().collect(),
    };
    let cancel = interrupt_flag();
    Ok(run_compare(&spec, &Printer, &cancel)?)
}
