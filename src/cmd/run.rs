//! `caseload run`: run stages over evidence on a storage layout.

use super::util;
use anyhow::Context;
use caseload_engine::cache::CacheMode;
use caseload_engine::casedb::{DbOptions, JournalMode, Synchronous};
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
    /// Stages to run, in order (default: every stage this build has).
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
    /// SQLite journal mode of the case database.
    #[arg(long, value_enum, default_value = "wal")]
    pub journal_mode: JournalArg,
    /// SQLite synchronous level of the case database.
    #[arg(long, value_enum, default_value = "normal")]
    pub synchronous: SyncArg,
    /// Database operations per transaction.
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Print run.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `--cache`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CacheArg {
    /// Drop the page cache before every stage.
    Cold,
    /// Leave the page cache alone.
    Warm,
}

/// `--journal-mode`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum JournalArg {
    Delete,
    Truncate,
    Persist,
    Wal,
    Memory,
    Off,
}

/// `--synchronous`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum SyncArg {
    Off,
    Normal,
    Full,
    Extra,
}

impl Args {
    fn db_options(&self) -> anyhow::Result<DbOptions> {
        anyhow::ensure!(self.batch_size > 0, "--batch-size must be at least 1");
        Ok(DbOptions {
            journal_mode: match self.journal_mode {
                JournalArg::Delete => JournalMode::Delete,
                JournalArg::Truncate => JournalMode::Truncate,
                JournalArg::Persist => JournalMode::Persist,
                JournalArg::Wal => JournalMode::Wal,
                JournalArg::Memory => JournalMode::Memory,
                JournalArg::Off => JournalMode::Off,
            },
            synchronous: match self.synchronous {
                SyncArg::Off => Synchronous::Off,
                SyncArg::Normal => Synchronous::Normal,
                SyncArg::Full => Synchronous::Full,
                SyncArg::Extra => Synchronous::Extra,
            },
            batch_size: self.batch_size,
        })
    }

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

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (mut stage_specs, workload) = match &args.workload {
        Some(w) => {
            let w = caseload_workloads::Workload::resolve(w)?;
            (w.stages.clone(), Some(w.name))
        }
        None => (stage_list(&args.stages), None),
    };
    apply_stage_options(&mut stage_specs, &args.stage_options)?;
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
        db: args.db_options()?,
        force: args.force,
        instance: None,
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
