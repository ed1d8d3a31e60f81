//! `caseload study ftk4`: the FTK 4 study's configurations, each a lab
//! brought up with the evidence on its evidence device, compared on (the
//! ftk4 workload, DD and E01, cold cache), and taken down again; the labs'
//! comparisons merged into one report with ratios to the base system
//! (`caseload_workloads::study`).

use super::compare;
use super::db_args::DbArgs;
use super::job_args::{KffArgs, resolve_stages};
use super::util::interrupt_flag;
use super::workstation_args::WorkstationArgs;
use anyhow::Context;
use caseload_lab::lab::{self, LabState, UpOptions};
use caseload_workloads::Baseline;
use caseload_workloads::report::{files, render_table, write_reports};
use caseload_workloads::study::{FTK4_LABS, LabPart, merge};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Arguments of `caseload study`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    study: Study,
}

#[derive(Debug, clap::Subcommand)]
enum Study {
    /// The FTK 4 study (root: builds each configuration as a lab of
    /// modelled devices): base system, SSD database, PCIe database, RAID-5
    /// evidence+case, SSD O/S+temp, high-end, five channels.
    Ftk4(Ftk4Args),
}

/// Arguments of `caseload study ftk4`.
#[derive(Debug, clap::Args)]
pub struct Ftk4Args {
    /// Evidence image(s), e.g. the same disk as DD and as E01. Copied onto
    /// each lab's evidence device.
    #[arg(long, required = true)]
    pub evidence: Vec<PathBuf>,
    /// Output directory: the merged compare.json, CSV and report.html, and
    /// each lab's comparison under labs/.
    #[arg(long)]
    pub out: PathBuf,
    /// Only these labs (default: all seven, base first).
    #[arg(long, value_delimiter = ',')]
    pub labs: Vec<String>,
    /// Runs per configuration.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// The workload every run runs.
    #[arg(long, default_value = "ftk4-default")]
    pub workload: String,
    /// A stage option passed to every run. Repeatable.
    #[arg(long = "stage-option", value_name = "STAGE.KEY=VALUE")]
    pub stage_options: Vec<String>,
    /// Worker threads per run (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Every run's case database.
    #[command(flatten)]
    pub db: DbArgs,
    /// The KFF stage's hash sets, imported into each lab's database device
    /// (with its model off: setting up is not measured).
    #[command(flatten)]
    pub kff: KffArgs,
    /// Every run's modelled workstation (over each lab's own).
    #[command(flatten)]
    pub workstation: WorkstationArgs,
}

/// A lab taken down when dropped, so also on an error or Ctrl-C.
struct LabUp(Option<LabState>);

impl Drop for LabUp {
    fn drop(&mut self) {
        if let Some(state) = self.0.take()
            && let Err(e) = lab::down(&state)
        {
            eprintln!(
                "caseload study: taking lab `{}` down failed: {e}; run `caseload lab down {}`",
                state.spec.name, state.spec.name
            );
        }
    }
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.study {
        Study::Ftk4(a) => ftk4(a),
    }
}

fn ftk4(args: Ftk4Args) -> anyhow::Result<ExitCode> {
    let labs: Vec<String> = if args.labs.is_empty() {
        FTK4_LABS.iter().map(|s| s.to_string()).collect()
    } else {
        args.labs.clone()
    };
    // Everything is checked before the first lab is built.
    anyhow::ensure!(
        caseload_lab::host::is_root(),
        "a study builds labs of modelled devices, which needs root (loop devices, mounts, cgroups)"
    );
    anyhow::ensure!(args.repeat >= 1, "--repeat must be at least 1");
    let specs = labs
        .iter()
        .map(|name| caseload_workloads::devices::lab(name))
        .collect::<Result<Vec<_>, _>>()?;
    for f in &args.evidence {
        anyhow::ensure!(f.is_file(), "evidence `{}` is not a file", f.display());
    }
    anyhow::ensure!(
        !args.out.join(files::COMPARE_JSON).exists(),
        "`{}` already holds a study (compare.json); choose another --out",
        args.out.display()
    );
    let resolved = resolve_stages(Some(&args.workload), &[], &args.kff, &args.stage_options)?;
    let db = args.db.options_with(resolved.profile)?;
    for spec in &specs {
        args.workstation
            .preflight(Some(&spec.workstation), &args.evidence, args.threads, &db)
            .with_context(|| format!("lab `{}`", spec.name))?;
    }
    let stage_specs = resolved.stages;
    let exe = std::env::current_exe().context("locating the caseload executable")?;
    let cancel = interrupt_flag();
    let command: Vec<String> = std::env::args().collect();
    let mut parts: Vec<LabPart> = Vec::new();
    let mut failure: Option<anyhow::Error> = None;
    for spec in &specs {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let name = spec.name.clone();
        eprintln!("caseload study: lab {name}: {}", spec.description);
        let dir = format!("labs/{name}");
        let result = (|| -> anyhow::Result<_> {
            let up = LabUp(Some(lab::up(spec, &UpOptions { exe: exe.clone() })?));
            let state = up.0.as_ref().context("lab state")?;
            let copies = lab::load_evidence(state, &args.evidence)?;
            // The hash sets go into the lab's database device unmodelled;
            // the comparison then finds them imported and reuses them.
            if !args.kff.hashsets.is_empty() {
                state.set_modelled(false)?;
                let layout = super::lab::lab_layout(&name)?;
                let imported = super::hashset::prepare_run(
                    &args.kff.hashsets,
                    args.kff.kff_library.as_deref(),
                    &layout,
                    &stage_specs,
                );
                state.set_modelled(true)?;
                imported?;
            }
            let compare_args = compare::Args {
                evidence: copies,
                layout: Vec::new(),
                lab: vec![name.clone()],
                workload: Some(args.workload.clone()),
                stages: Vec::new(),
                stage_options: args.stage_options.clone(),
                repeat: args.repeat,
                out: args.out.join(&dir),
                baseline: Baseline::Number(1),
                instances: None,
                probe: false,
                probe_size: 256 << 20,
                probe_seconds: 3.0,
                keep_runs: false,
                threads: args.threads,
                db: args.db.clone(),
                kff: args.kff.clone(),
                workstation: args.workstation.clone(),
            };
            let report = compare::execute(&compare_args)?;
            drop(up);
            Ok(report)
        })();
        match result {
            Ok(report) => {
                print!("{}", render_table(&report));
                parts.push(LabPart {
                    lab: name,
                    dir,
                    report,
                });
            }
            Err(e) => {
                failure = Some(e.context(format!("lab `{name}`")));
                break;
            }
        }
    }
    if parts.is_empty() {
        return Err(failure.unwrap_or_else(|| anyhow::anyhow!("interrupted before any lab ran")));
    }
    let mut report = merge(&parts, FTK4_LABS[0], command)?;
    if failure.is_some() && report.status == "completed" {
        report.status = "completed-with-failures".into();
    }
    write_reports(&args.out, &report)
        .with_context(|| format!("writing the study's reports in `{}`", args.out.display()))?;
    println!(
        "study ftk4: every configuration, ratios to {}:",
        report.label(report.baseline)
    );
    compare::print_report(&report, &args.out, "; each lab's comparison in labs/");
    if let Some(e) = failure {
        eprintln!("caseload study: stopped: {e:#}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(compare::exit_code(&report.status, "study"))
}
