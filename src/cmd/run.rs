//! `caseload run`: run stages over evidence on a storage layout.

use super::job_args::LayoutArgs;
use super::util::{self, CacheArg, TerminalObserver, finish};
use super::workstation_args::WorkstationArgs;
use anyhow::Context;
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::{render_aggregate, render_table};
use caseload_engine::run::RunSpec;
use caseload_engine::stage;
use caseload_workloads::{JobSpec, JobStages};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Evidence image: raw (`.dd`, `.raw`, first split part `.001`) or the
    /// first EWF segment (`.E01`). Opened read-only.
    #[arg(long)]
    pub evidence: PathBuf,
    /// Layout and channel directories.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Page cache before each stage: `cold` drops it, `warm` leaves it.
    /// With --ram, `cold` drops it before the first stage only: the
    /// modelled workstation's memory decides what later stages find.
    #[arg(long, value_enum, default_value = "cold")]
    pub cache: CacheArg,
    /// Largest evidence read issued for requests smaller than it: small
    /// reads are served from aligned runs of this size read whole (E01:
    /// consecutive stored chunks), shared between threads.
    #[arg(long, default_value = "2MiB", value_parser = util::parse_size)]
    pub read_run: u64,
    /// Record every channel operation (time, channel, file, operation,
    /// offset, length) in `trace.csv` in the case directory, for
    /// `caseload export --format fio-iolog` (docs/trace.md).
    #[arg(long)]
    pub trace: bool,
    /// Replace a case already in the case/database directories.
    #[arg(long, conflicts_with = "resume")]
    pub force: bool,
    /// Continue the run that was cut short (killed, machine lost) in the
    /// case directory, from the start of the stage it was in: give the
    /// same arguments as that run. SQLite case databases.
    #[arg(long)]
    pub resume: bool,
    /// Print run.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Every column of the table (operation counts, per-operation sizes,
    /// split CPU time); the default fits a 120-column terminal.
    #[arg(long, conflicts_with = "json")]
    pub wide: bool,
    /// Run N pipelines at once on the same evidence (default: the
    /// workload's `instances`, else 1). Each has its own case in
    /// `instance-K` sub-directories of the channel directories; the
    /// per-instance and aggregate figures go to `instances.json` in the case
    /// directory.
    #[arg(long)]
    pub instances: Option<usize>,
    /// Internal: this process is instance K of an `--instances` run.
    #[arg(long, hide = true)]
    pub instance: Option<usize>,
    /// The modelled workstation's memory and processors.
    #[command(flatten)]
    pub workstation: WorkstationArgs,
    /// What the case runs, its database and hash library, the check
    /// before the first run.
    #[command(flatten)]
    pub job: super::job_args::JobArgs,
}

/// Run it.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    args.workstation.check()?;
    let mut lab_workstation = None;
    if let Some(lab) = args.layout.lab.clone() {
        anyhow::ensure!(
            args.workstation.cpu_scale.is_none(),
            "--cpu-scale with --lab: the lab's processor is its `[workstation] cpu_scale`"
        );
        if let Some(code) = super::lab::enter(&lab)? {
            return Ok(code);
        }
        args.evidence = super::lab::evidence_in(&lab, args.evidence);
        lab_workstation = Some(super::lab::workstation_of(&lab)?);
    }
    let workstation = args.workstation.spec(lab_workstation.as_ref())?;
    anyhow::ensure!(
        workstation.is_none()
            || matches!(args.cache.mode(), caseload_engine::cache::CacheMode::Cold),
        "--ram models the workstation's page cache from a cold start; --cache warm would leave what this machine cached, which the model cannot know"
    );
    // The processors first: every thread and server process the run
    // starts inherits them.
    let cpus = args.workstation.apply_cpus(lab_workstation.as_ref())?;
    if let Some(code) = args.workstation.enter_cpu_quota(cpus)? {
        return Ok(code);
    }
    let layout = args.layout.layout()?;
    let instances_asked = args.instances;
    let (stage_specs, resolved) = case_stages(
        &layout,
        &args.evidence,
        &mut args.job,
        &|job, resolved, stages| {
            // Instance K's parent checked for all of them.
            if args.instance.is_some() {
                return Ok(());
            }
            let copies = instances_asked.or(resolved.instances).unwrap_or(1) as u64;
            super::job_args::preflight(
                &super::job_args::Planned {
                    layouts: std::slice::from_ref(&layout),
                    labs: &[],
                    evidence: std::slice::from_ref(&args.evidence),
                    stages,
                    job,
                    db: &job.db.options_with(resolved.profile)?,
                    copies,
                },
                Default::default(),
            )
        },
    )?;
    anyhow::ensure!(
        (caseload_engine::source::MIN_RUN_BYTES..=caseload_engine::source::MAX_RUN_BYTES)
            .contains(&args.read_run),
        "--read-run must be between 512 bytes and 64 MiB"
    );
    let instances = args.instances.or(resolved.instances).unwrap_or(1);
    anyhow::ensure!(instances >= 1, "--instances must be at least 1");
    anyhow::ensure!(
        !(args.resume && instances > 1),
        "--resume continues one run; resume each instance's case on its own"
    );
    if instances > 1 && args.instance.is_none() {
        // Configuration errors surface here, once, not in every child.
        caseload_engine::run::build_stages(&stage_specs)?;
        let db = args.job.db.options_with(resolved.profile)?;
        return run_instances(&args, &layout, db, instances);
    }
    let spec = RunSpec {
        evidence: args.evidence.clone(),
        layout,
        stages: stage_specs,
        workload: resolved.workload,
        threads: args.threads.unwrap_or_else(util::default_threads).max(1),
        cache: args.cache.mode(),
        db: args.job.db.options_with(resolved.profile)?,
        force: args.force,
        instance: args.instance,
        read_run: args.read_run,
        trace: args.trace,
        resume: args.resume,
        faults: caseload_engine::fault::parse_faults(
            &std::env::var(caseload_engine::fault::INJECT_ENV).unwrap_or_default(),
        )?,
        workstation,
        helpers: match &args.layout.lab {
            Some(lab) => super::lab::helpers_of(lab)?,
            None => Vec::new(),
        },
    };
    let cancel = util::interrupt_flag();
    let report = caseload_engine::run::run(&spec, &TerminalObserver, &cancel)
        .with_context(|| format!("run on `{}`", args.evidence.display()))?;
    finish(&report, args.json, args.wide)
}

/// A command's check of what its runs need, given its flags and the
/// stages resolved (`case_stages` calls it before importing anything).
pub type BeforeImport<'a> = &'a dyn Fn(
    &super::job_args::JobArgs,
    &super::job_args::ResolvedStages,
    &[(String, stage::StageOptions)],
) -> anyhow::Result<()>;

/// The stages of a case with their options: the workload or stage list,
/// the hash sets imported into the KFF library (on the layout's database
/// channel, checked writable first), the `--stage-option`s applied.
/// `job.stage_options` gains the KFF options the import gave. `before`
/// checks what the run needs (the command's preflight) once the stages
/// are known and before anything is imported.
pub fn case_stages(
    layout: &caseload_engine::layout::Layout,
    evidence: &std::path::Path,
    job: &mut super::job_args::JobArgs,
    before: BeforeImport<'_>,
) -> anyhow::Result<(
    Vec<(String, stage::StageOptions)>,
    super::job_args::ResolvedStages,
)> {
    let mut resolved = job.resolve()?;
    let mut stage_specs = std::mem::take(&mut resolved.stages);
    // The channel directories are checked again with the evidence when the
    // run starts; here first, so that a missing one is named before the
    // hash sets are imported into it.
    let given: Vec<std::path::PathBuf> = std::fs::canonicalize(evidence).into_iter().collect();
    layout.check_writable(&given)?;
    before(job, &resolved, &stage_specs)?;
    let imported = super::hashset::prepare_run(
        &job.kff.hashsets,
        job.kff.kff_library.as_deref(),
        layout,
        &stage_specs,
    )?;
    job.stage_options.splice(0..0, imported);
    for o in job.stage_options.iter() {
        stage::apply_option(&mut stage_specs, o)?;
    }
    Ok((stage_specs, resolved))
}

/// `--instances N`: the job described once, run N times at once
/// (`caseload_workloads::instances`), and the reports printed.
fn run_instances(
    args: &Args,
    layout: &caseload_engine::layout::Layout,
    db: caseload_engine::casedb::DbOptions,
    n: usize,
) -> anyhow::Result<ExitCode> {
    let dir = |k: ChannelKind| -> anyhow::Result<PathBuf> { Ok(layout.dir(k)?.to_path_buf()) };
    let mut job = JobSpec::new(args.evidence.clone());
    job.database = Some(dir(ChannelKind::Database)?);
    job.case = Some(dir(ChannelKind::Case)?);
    job.temp = Some(dir(ChannelKind::Temp)?);
    job.stages = match (&args.job.workload, args.job.stages.is_empty()) {
        (Some(w), _) => JobStages::Workload(w.clone()),
        (None, false) => JobStages::Stages(args.job.stages.clone()),
        (None, true) => JobStages::Default,
    };
    job.stage_options = args.job.stage_options.clone();
    job.threads = args.threads;
    job.cache = args.cache.mode();
    job.db = db;
    job.force = args.force;
    job.read_run = Some(args.read_run);
    job.trace = args.trace;
    job.workstation = args.workstation.job();
    let exe = std::env::current_exe().context("locating the caseload executable")?;
    let (report, path) = caseload_workloads::instances::run_instances(&exe, &job, n)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for r in &report.runs {
            println!("instance {}:", r.instance.unwrap_or(0));
            print!("{}", render_table(r));
        }
        print!("{}", render_aggregate(&report));
        println!("instances report: {}", path.display());
    }
    let all_completed =
        report.failures.is_empty() && report.runs.iter().all(|r| r.status == "completed");
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
