//! `caseload run`: run stages over evidence on a storage layout.

use super::db_args::DbArgs;
use super::util;
use anyhow::Context;
use caseload_engine::cache::CacheMode;
use caseload_engine::channel::ChannelKind;
use caseload_engine::layout::Layout;
use caseload_engine::report::{RunReport, StageReport, render_table};
use caseload_engine::run::{RunObserver, RunSpec};
use caseload_engine::stage::{Progress, ProgressUnit, StageOptions};
use caseload_engine::stages;
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Arguments of `caseload run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Evidence image: raw (`.dd`, `.raw`, first split part `.001`) or the
    /// first EWF segment (`.E01`). Opened read-only.
    #[arg(long)]
    pub evidence: PathBuf,
    /// Layout file mapping channels to directories.
    #[arg(long)]
    pub layout: Option<PathBuf>,
    /// Override the layout's database channel directory.
    #[arg(long, value_name = "DIR")]
    pub database: Option<PathBuf>,
    /// Override the layout's case channel directory.
    #[arg(long, value_name = "DIR")]
    pub case: Option<PathBuf>,
    /// Override the layout's temp channel directory.
    #[arg(long, value_name = "DIR")]
    pub temp: Option<PathBuf>,
    /// Workload: a workload file, or the name of a built-in one
    /// (ftk4-default, encase-verify, triage, full).
    #[arg(long, conflicts_with = "stages")]
    pub workload: Option<String>,
    /// Stages to run, in order (default: every stage this build has; `kff`
    /// only with --hashset, --kff-library or a kff stage option).
    #[arg(long, value_delimiter = ',')]
    pub stages: Vec<String>,
    /// A stage option, `STAGE.KEY=VALUE` (VALUE in TOML syntax, or a bare
    /// string), e.g. `image-hash.algorithms=["md5","sha256"]`. Repeatable.
    #[arg(long = "stage-option", value_name = "STAGE.KEY=VALUE")]
    pub stage_options: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Page cache before each stage: `cold` drops it, `warm` leaves it.
    #[arg(long, value_enum, default_value = "cold")]
    pub cache: CacheArg,
    /// Replace a case already in the case/database directories.
    #[arg(long)]
    pub force: bool,
    /// The case database.
    #[command(flatten)]
    pub db: DbArgs,
    /// Print run.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
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
    /// Import a hash set into the KFF library before the stages run,
    /// `known=FILE` or `notable=FILE` (set name = file stem; files sharing a
    /// stem make one set; a set already imported from the same files is
    /// reused). Repeatable.
    #[arg(long = "hashset", value_name = "CATEGORY=FILE")]
    pub hashsets: Vec<String>,
    /// KFF hash library (default: kff.sqlite in the database directory).
    #[arg(long, value_name = "PATH")]
    pub kff_library: Option<PathBuf>,
}

/// `--cache`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CacheArg {
    /// Drop the page cache before every stage.
    Cold,
    /// Leave the page cache alone.
    Warm,
}

impl Args {
    fn layout(&self) -> anyhow::Result<Layout> {
        let mut layout = match &self.layout {
            Some(path) => Layout::load(path)?,
            None => Layout {
                name: "command-line".into(),
                ..Layout::default()
            },
        };
        for (kind, dir) in [
            (ChannelKind::Database, &self.database),
            (ChannelKind::Case, &self.case),
            (ChannelKind::Temp, &self.temp),
        ] {
            if let Some(d) = dir {
                layout.set(kind, d.clone());
            }
        }
        Ok(layout)
    }
}

/// Stage names to run: as given, or all that this build has.
pub fn stage_list(names: &[String]) -> Vec<(String, StageOptions)> {
    if names.is_empty() {
        stages::REGISTRY
            .iter()
            .map(|s| (s.name.to_string(), StageOptions::new()))
            .collect()
    } else {
        names
            .iter()
            .map(|n| (n.trim().to_string(), StageOptions::new()))
            .collect()
    }
}

/// The stages named by `--stages`, or when none are named every stage this
/// build has, except `kff` unless a hash library is configured: without one
/// it has nothing to look hashes up in, and a default run should not fail
/// for want of an option the user never had to think about.
pub fn stages_or_default(names: &[String], kff_configured: bool) -> Vec<(String, StageOptions)> {
    let mut list = stage_list(names);
    if names.is_empty() && !kff_configured {
        list.retain(|(name, _)| name != "kff");
    }
    list
}

/// Whether `--stage-option`s configure the `kff` stage (its library).
pub fn configures_kff(stage_options: &[String]) -> bool {
    stage_options.iter().any(|o| o.starts_with("kff."))
}

/// Apply `STAGE.KEY=VALUE` options to the stage list. An option for a stage
/// that is not in the list is an error (it would silently do nothing).
pub fn apply_stage_options(
    stages: &mut [(String, StageOptions)],
    options: &[String],
) -> anyhow::Result<()> {
    for option in options {
        let (target, value) = option
            .split_once('=')
            .with_context(|| format!("--stage-option `{option}`: expected STAGE.KEY=VALUE"))?;
        let (stage, key) = target
            .split_once('.')
            .with_context(|| format!("--stage-option `{option}`: expected STAGE.KEY=VALUE"))?;
        let value = parse_option_value(value);
        let entry = stages
            .iter_mut()
            .find(|(name, _)| name == stage)
            .with_context(|| {
                format!("--stage-option `{option}`: stage `{stage}` is not being run")
            })?;
        entry.1.insert(key.to_string(), value);
    }
    Ok(())
}

/// A TOML value (`true`, `3`, `["md5"]`, `"x"`), or the text as a string.
fn parse_option_value(text: &str) -> toml::Value {
    let wrapped = format!("v = {text}");
    match wrapped.parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(text.to_string())),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

/// Default worker threads: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Set a flag on Ctrl-C so stages stop between items and the run reports
/// what finished.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flag);
    // Only one handler per process; a second registration just keeps the first.
    let _ = ctrlc::set_handler(move || f.store(true, std::sync::atomic::Ordering::Relaxed));
    flag
}

/// Progress bars for stages on the terminal.
pub struct TerminalObserver;

struct BarProgress(ProgressBar);

impl Progress for BarProgress {
    fn set_total(&self, total: u64, unit: ProgressUnit) {
        self.0.set_length(total);
        if unit == ProgressUnit::Items {
            self.0.set_style(util::count_style());
        }
    }
    fn advance(&self, amount: u64) {
        self.0.inc(amount);
    }
    fn message(&self, text: &str) {
        self.0.set_message(text.to_string());
    }
}

impl Drop for BarProgress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl RunObserver for TerminalObserver {
    fn stage_started(&self, stage: &str) -> Box<dyn Progress> {
        Box::new(BarProgress(util::byte_progress(0, stage)))
    }
    fn stage_finished(&self, report: &StageReport) {
        if let Some(e) = &report.error {
            eprintln!("caseload: stage {} {}: {e}", report.name, report.status);
        }
    }
}

/// Print a finished run and choose the exit code.
pub fn finish(report: &RunReport, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", render_table(report));
        if let Some(case) = report.channels.get(&ChannelKind::Case) {
            println!("case: {}", case.dir.display());
        }
        println!("database: {}", report.database.path.display());
    }
    Ok(if report.status == "completed" {
        ExitCode::SUCCESS
    } else {
        eprintln!("caseload: run {}", report.status);
        ExitCode::FAILURE
    })
}

/// `--instances N`: N child processes of this executable, each a complete
/// `caseload run` into its own `instance-K` directories, started together.
/// Separate processes keep each instance's CPU, memory and I/O figures its
/// own. A cold cache is made once, before they start (an instance dropping
/// caches mid-run would disturb the others); the instances then run warm.
fn run_instances(args: &Args, n: usize) -> anyhow::Result<ExitCode> {
    use caseload_engine::report::{
        INSTANCES_SCHEMA, InstancesReport, RUN_SCHEMA_VERSION, RunReport, aggregate,
        render_aggregate,
    };
    let layout = args.layout()?;
    let db_options = args.db.options()?;
    anyhow::ensure!(
        db_options.postgres.url.is_none(),
        "--instances with --db-url would put every instance's case in one database; give each instance a private cluster (--db-engine postgres without --db-url)"
    );
    let dir = |k: ChannelKind| -> anyhow::Result<PathBuf> { Ok(layout.dir(k)?.to_path_buf()) };
    let (db, case, temp) = (
        dir(ChannelKind::Database)?,
        dir(ChannelKind::Case)?,
        dir(ChannelKind::Temp)?,
    );
    let report_path = case.join("instances.json");
    anyhow::ensure!(
        args.force || !report_path.exists(),
        "`{}` already holds an instances run; use --force to replace it",
        case.display()
    );
    let exe = std::env::current_exe().context("locating the caseload executable")?;
    let mut per_instance_dirs = Vec::new();
    for k in 0..n {
        let dirs: Vec<PathBuf> = [&db, &case, &temp]
            .iter()
            .map(|d| d.join(format!("instance-{k}")))
            .collect();
        for d in &dirs {
            std::fs::create_dir_all(d).with_context(|| format!("creating `{}`", d.display()))?;
        }
        per_instance_dirs.push(dirs);
    }
    let cache = match args.cache {
        CacheArg::Cold => {
            let evidence =
                std::fs::canonicalize(&args.evidence).unwrap_or_else(|_| args.evidence.clone());
            caseload_engine::cache::make_cold(
                &[evidence],
                &[db.clone(), case.clone(), temp.clone()],
            )
        }
        CacheArg::Warm => caseload_engine::cache::warm(),
    };
    let started = std::time::Instant::now();
    let mut children = Vec::new();
    for (k, dirs) in per_instance_dirs.iter().enumerate() {
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("run").arg("--evidence").arg(&args.evidence);
        cmd.arg("--database")
            .arg(&dirs[0])
            .arg("--case")
            .arg(&dirs[1])
            .arg("--temp")
            .arg(&dirs[2]);
        match &args.workload {
            Some(w) => {
                cmd.arg("--workload").arg(w);
            }
            None if !args.stages.is_empty() => {
                cmd.arg("--stages").arg(args.stages.join(","));
            }
            None => {}
        }
        for o in &args.stage_options {
            cmd.arg("--stage-option").arg(o);
        }
        if let Some(t) = args.threads {
            cmd.arg("--threads").arg(t.to_string());
        }
        cmd.args(["--cache", "warm", "--json", "--instances", "1"]);
        cmd.arg("--instance").arg(k.to_string());
        cmd.args(db_options.command_line());
        if args.force {
            cmd.arg("--force");
        }
        cmd.stdout(std::process::Stdio::piped());
        children.push((
            k,
            cmd.spawn()
                .with_context(|| format!("starting instance {k}"))?,
        ));
    }
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for (k, child) in children {
        match child.wait_with_output() {
            Ok(out) => match serde_json::from_slice::<RunReport>(&out.stdout) {
                Ok(r) => runs.push(r),
                Err(e) => failures.push(format!("instance {k}: no report ({}; {e})", out.status)),
            },
            Err(e) => failures.push(format!("instance {k}: {e}")),
        }
    }
    let report = InstancesReport {
        schema: INSTANCES_SCHEMA.into(),
        schema_version: RUN_SCHEMA_VERSION,
        instances: n,
        wall_seconds: started.elapsed().as_secs_f64(),
        cache,
        aggregate: aggregate(&runs),
        runs,
        failures,
    };
    let tmp = case.join("instances.json.partial");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing `{}`", tmp.display()))?;
    std::fs::rename(&tmp, &report_path)
        .with_context(|| format!("writing `{}`", report_path.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for r in &report.runs {
            println!("instance {}:", r.instance.unwrap_or(0));
            print!("{}", render_table(r));
        }
        print!("{}", render_aggregate(&report));
        println!("instances report: {}", report_path.display());
    }
    let all_completed =
        report.failures.is_empty() && report.runs.iter().all(|r| r.status == "completed");
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Run it.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    let (mut stage_specs, workload, workload_instances) = match &args.workload {
        Some(w) => {
            let w = caseload_workloads::Workload::resolve(w)?;
            (w.stages.clone(), Some(w.name), w.instances)
        }
        None => {
            let kff_configured = !args.hashsets.is_empty()
                || args.kff_library.is_some()
                || configures_kff(&args.stage_options);
            (stages_or_default(&args.stages, kff_configured), None, None)
        }
    };
    let kff = super::hashset::prepare_run(
        &args.hashsets,
        args.kff_library.as_deref(),
        &args.layout()?,
        &stage_specs,
    )?;
    args.stage_options.splice(0..0, kff);
    apply_stage_options(&mut stage_specs, &args.stage_options)?;
    let instances = args.instances.or(workload_instances).unwrap_or(1);
    anyhow::ensure!(instances >= 1, "--instances must be at least 1");
    if instances > 1 && args.instance.is_none() {
        // Configuration errors surface here, once, not in every child.
        caseload_engine::run::build_stages(&stage_specs)?;
        return run_instances(&args, instances);
    }
    let spec = RunSpec {
        evidence: args.evidence.clone(),
        layout: args.layout()?,
        stages: stage_specs,
        workload,
        threads: args.threads.unwrap_or_else(default_threads).max(1),
        cache: match args.cache {
            CacheArg::Cold => CacheMode::Cold,
            CacheArg::Warm => CacheMode::Warm,
        },
        db: args.db.options()?,
        force: args.force,
        instance: args.instance,
    };
    let cancel = interrupt_flag();
    let report = caseload_engine::run::run(&spec, &TerminalObserver, &cancel)
        .with_context(|| format!("run on `{}`", args.evidence.display()))?;
    finish(&report, args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_options_parse_as_toml_or_strings() {
        let mut stages = stage_list(&["image-hash".to_string(), "carve".to_string()]);
        apply_stage_options(
            &mut stages,
            &[
                "image-hash.algorithms=[\"md5\",\"sha256\"]".into(),
                "carve.signatures=/etc/scalpel/scalpel.conf".into(),
                "carve.aligned=false".into(),
            ],
        )
        .unwrap();
        assert_eq!(stages[0].1["algorithms"].as_array().unwrap().len(), 2);
        assert_eq!(
            stages[1].1["signatures"].as_str(),
            Some("/etc/scalpel/scalpel.conf")
        );
        assert_eq!(stages[1].1["aligned"].as_bool(), Some(false));
        assert!(apply_stage_options(&mut stages, &["kff.x=1".into()]).is_err());
        assert!(apply_stage_options(&mut stages, &["nodot=1".into()]).is_err());
    }
}
