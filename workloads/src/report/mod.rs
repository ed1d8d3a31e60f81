//! The comparison report: `compare.json` (a versioned contract, documented
//! in `docs/compare-json.md` with a JSON Schema in
//! `docs/compare.schema.json`) and what is rendered from it: the terminal
//! table, CSV files and a self-contained `report.html` with SVG charts.
//!
//! Every renderer takes only a [`CompareReport`], so anything the HTML page
//! or the CSV shows is also in `compare.json`. Likewise `model.html`
//! (`caseload model --out`) is rendered from the
//! [`ModelReport`](crate::model::ModelReport) alone.

mod advise_page;
mod case_page;
mod chart;
mod csv_files;
mod html;
mod model_page;
mod storage_page;
mod summary;
mod table;
mod tables_page;

pub use advise_page::{render_advice_html, render_advice_table};
pub use case_page::render_case_html;
pub use html::render_html;
pub use model_page::render_model_html;
pub use storage_page::{render_storage_html, render_storage_table};
pub use summary::{figures_from_instances, figures_from_run, summarize};
pub use table::render_table;
pub use tables_page::render_tables_html;

use caseload_engine::cache::CacheReport;
use caseload_engine::casedb::DbOptions;
use caseload_engine::channel::ChannelKind;
use caseload_engine::probe::ChannelProbe;
use caseload_engine::report::ChannelFigures;
use caseload_engine::sampler::CpuSample;
use caseload_engine::system::{Placement, SystemContext};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// `compare.json`'s schema identifier.
pub const COMPARE_SCHEMA: &str = "caseload-compare";
/// `compare.json`'s schema version. Additive changes keep the version;
/// removing a field or changing its meaning bumps it.
pub const COMPARE_SCHEMA_VERSION: u32 = 1;

/// File names written into the output directory.
pub mod files {
    /// The compare document.
    pub const COMPARE_JSON: &str = "compare.json";
    /// One row per configuration and stage (medians, ranges, ratios).
    pub const SUMMARY_CSV: &str = "compare.csv";
    /// One row per run and stage.
    pub const RUNS_CSV: &str = "runs.csv";
    /// The HTML report.
    pub const REPORT_HTML: &str = "report.html";
    /// The terminal table, as printed.
    pub const TABLE_TXT: &str = "table.txt";
    /// Directory of per-run reports.
    pub const RUNS_DIR: &str = "runs";
}

/// Everything a comparison recorded: the matrix, every run, and the
/// per-configuration summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CompareReport {
    /// Always [`COMPARE_SCHEMA`].
    pub schema: String,
    /// [`COMPARE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// caseload version.
    pub caseload_version: String,
    /// `running` (rewritten after every run), `completed`,
    /// `completed-with-failures` (some run did not complete) or
    /// `interrupted`.
    pub status: String,
    /// Start time (ISO 8601 UTC).
    pub started_at: String,
    /// End time, once finished.
    pub finished_at: Option<String>,
    /// The command line that started the comparison.
    pub command: Vec<String>,
    /// What each run ran.
    pub workload: WorkloadInfo,
    /// Runs per configuration asked for.
    pub repeat: usize,
    /// Concurrent pipelines per run (`--instances`).
    pub instances: usize,
    /// Worker threads per pipeline, when fixed.
    pub threads: Option<usize>,
    /// Page-cache policy of every run (always `cold`: each run drops the
    /// cache before each stage).
    pub cache: String,
    /// Case database options of every run.
    pub database_options: DbOptions,
    /// Index (0-based) of the baseline configuration.
    pub baseline: usize,
    /// The machine.
    pub system: SystemContext,
    /// The evidence files compared.
    pub evidence: Vec<EvidenceEntry>,
    /// The layouts compared.
    pub layouts: Vec<LayoutEntry>,
    /// Evidence × layout, in that order.
    pub configurations: Vec<Configuration>,
    /// Every run in the order it ran (interleaved: every configuration once
    /// per repeat).
    pub runs: Vec<RunRecord>,
    /// Per configuration: medians, ranges and ratios against the baseline.
    pub summary: Vec<ConfigSummary>,
}

/// The stages each run ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkloadInfo {
    /// Workload name, when from a workload file.
    pub name: Option<String>,
    /// Where it came from (`builtin:NAME` or a path), when a workload.
    pub origin: Option<String>,
    /// Stage names in order.
    pub stages: Vec<String>,
    /// `--stage-option` values passed to every run.
    pub stage_options: Vec<String>,
}

/// One evidence file of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EvidenceEntry {
    /// Short label (file name, made unique).
    pub label: String,
    /// Path given.
    pub path: PathBuf,
    /// Where it lives.
    pub placement: Placement,
    /// Device probe of the evidence channel (`--probe`).
    pub probe: Option<ChannelProbe>,
}

/// One layout of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LayoutEntry {
    /// Short label (layout name, made unique).
    pub label: String,
    /// Layout file, if any.
    pub source: Option<PathBuf>,
    /// Description from the layout file.
    pub description: Option<String>,
    /// Per writable channel: the layout's directory and where it lives.
    pub channels: BTreeMap<ChannelKind, ChannelPlace>,
    /// Device probes of the writable channels (`--probe`).
    pub probe: Option<Vec<ChannelProbe>>,
}

/// A channel directory and its device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChannelPlace {
    /// The layout's directory (each run works in its own sub-directory).
    pub dir: PathBuf,
    /// Mount, file system and device.
    pub placement: Placement,
}

/// One configuration: an evidence file on a layout.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Configuration {
    /// 0-based index.
    pub index: usize,
    /// `EVIDENCE@LAYOUT`.
    pub label: String,
    /// Index into `evidence`.
    pub evidence: usize,
    /// Index into `layouts`.
    pub layout: usize,
}

/// One run of one configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// 1-based position in the order runs happened.
    pub sequence: usize,
    /// Configuration index.
    pub configuration: usize,
    /// 1-based repeat number.
    pub repeat: usize,
    /// `completed`, `completed-with-errors` (a stage failed), `interrupted`
    /// or `failed` (the run produced no report).
    pub status: String,
    /// Why the run did not complete.
    pub error: Option<String>,
    /// Exit code of the run's process (absent when killed by a signal).
    pub exit_code: Option<i32>,
    /// Start time (ISO 8601 UTC).
    pub started_at: String,
    /// Wall time of the whole run process, seconds.
    pub wall_seconds: f64,
    /// The run's `run.json` (or `instances.json`), relative to the output
    /// directory.
    pub report: Option<String>,
    /// The run's stderr, relative to the output directory, when it wrote any.
    pub stderr: Option<String>,
    /// The run's own directories under the layout's channels.
    pub dirs: Vec<PathBuf>,
    /// Whether those directories were kept (`--keep-runs`).
    pub kept: bool,
    /// Page-cache handling the run reported.
    pub cache: Option<CacheReport>,
    /// Per stage: the run's figures (with `--instances`, the aggregate over
    /// instances).
    pub stages: Vec<StageFigures>,
    /// With `--instances`: each instance's figures.
    pub instances: Vec<InstanceFigures>,
    /// With `--instances`: instances that produced no report, with why.
    pub instance_failures: Vec<String>,
}

/// One stage's figures in one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageFigures {
    /// Stage name.
    pub name: String,
    /// `completed`, `failed` or `interrupted`.
    pub status: String,
    /// Error that stopped the stage.
    pub error: Option<String>,
    /// Wall seconds (with instances: the longest instance).
    pub wall_seconds: f64,
    /// CPU user seconds (with instances: summed).
    pub cpu_user_seconds: f64,
    /// CPU system seconds (with instances: summed).
    pub cpu_system_seconds: f64,
    /// Peak resident memory (with instances: the largest).
    pub peak_rss_bytes: Option<u64>,
    /// Items processed (with instances: summed).
    pub items: u64,
    /// Logical bytes processed (with instances: summed).
    pub bytes: u64,
    /// Logical MB/s (bytes over wall).
    pub mb_per_s: f64,
    /// Per channel: counters, blocked seconds, MB/s and IOPS over the wall.
    pub channels: BTreeMap<ChannelKind, ChannelFigures>,
    /// The channel with the most time blocked.
    pub bound_by: Option<ChannelKind>,
    /// Whole-machine CPU shares and load during the stage.
    pub machine: MachineFigures,
    /// The sampled series (kept in the run's own report; the summary
    /// carries the representative run's).
    #[serde(skip)]
    pub samples: Vec<CpuSample>,
}

/// Whole-machine CPU during a stage (averages over the stage).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct MachineFigures {
    /// User share of all CPUs, percent.
    pub user_pct: f64,
    /// System share, percent.
    pub system_pct: f64,
    /// I/O-wait share, percent.
    pub iowait_pct: f64,
    /// Highest 1-minute load average.
    pub load1_max: f64,
}

/// One instance of an `--instances` run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstanceFigures {
    /// 0-based instance number.
    pub instance: usize,
    /// The instance's run status.
    pub status: String,
    /// Its stages.
    pub stages: Vec<StageFigures>,
}

/// Median, smallest and largest value over the runs.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

/// One configuration's summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConfigSummary {
    /// Configuration index.
    pub configuration: usize,
    /// Runs made.
    pub runs: usize,
    /// Runs with status `completed`.
    pub runs_completed: usize,
    /// Sum of stage wall times, over completed runs.
    pub total_seconds: Option<Stat>,
    /// Median total over the baseline's median total.
    pub total_ratio: Option<f64>,
    /// Sequence number of the run whose CPU series are shown: the completed
    /// run whose total is nearest the median.
    pub representative_run: Option<usize>,
    /// Per stage, in pipeline order; a stage is present once at least one
    /// run completed it.
    pub stages: Vec<StageStats>,
}

/// One stage of one configuration, over the runs that completed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageStats {
    /// Stage name.
    pub name: String,
    /// Runs that completed the stage (the sample size).
    pub runs: usize,
    /// Wall seconds.
    pub wall_seconds: Stat,
    /// Median wall over the baseline's median wall for this stage.
    pub wall_ratio: Option<f64>,
    /// CPU user seconds.
    pub cpu_user_seconds: Stat,
    /// CPU system seconds.
    pub cpu_system_seconds: Stat,
    /// Peak resident memory.
    pub peak_rss_bytes: Option<Stat>,
    /// Logical MB/s.
    pub mb_per_s: Stat,
    /// Items processed.
    pub items: Stat,
    /// Logical bytes processed.
    pub bytes: Stat,
    /// Per channel.
    pub channels: BTreeMap<ChannelKind, ChannelStats>,
    /// The channel with the largest median time blocked.
    pub bound_by: Option<ChannelKind>,
    /// That channel's median blocked seconds over the median wall (blocked
    /// time is summed over threads, so this can exceed 1).
    pub bound_share: Option<f64>,
    /// Whole-machine CPU and load.
    pub machine: MachineStats,
}

/// One channel of one stage of one configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChannelStats {
    /// Bytes read.
    pub bytes_read: Stat,
    /// Bytes written.
    pub bytes_written: Stat,
    /// Read calls.
    pub read_ops: Stat,
    /// Write calls.
    pub write_ops: Stat,
    /// fsync calls.
    pub fsyncs: Stat,
    /// Seconds blocked in any call.
    pub blocked_seconds: Stat,
    /// Seconds blocked in fsync calls.
    pub sync_blocked_seconds: Stat,
    /// Read MB/s over the stage's wall.
    pub read_mb_per_s: Stat,
    /// Write MB/s.
    pub write_mb_per_s: Stat,
    /// Read IOPS.
    pub read_iops: Stat,
    /// Write IOPS.
    pub write_iops: Stat,
    /// Median blocked seconds over the baseline's.
    pub blocked_ratio: Option<f64>,
}

/// Whole-machine CPU and load of one stage over the runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MachineStats {
    /// User share, percent.
    pub user_pct: Stat,
    /// System share, percent.
    pub system_pct: Stat,
    /// I/O-wait share, percent.
    pub iowait_pct: Stat,
    /// Highest 1-minute load.
    pub load1_max: Stat,
    /// The representative run's samples (time from the stage's start).
    pub samples: Vec<CpuSample>,
}

impl CompareReport {
    /// The baseline configuration's summary, if it has one.
    pub fn baseline_summary(&self) -> Option<&ConfigSummary> {
        self.summary
            .iter()
            .find(|s| s.configuration == self.baseline)
    }

    /// A configuration's label, or `#N` when the index is out of range.
    pub fn label(&self, configuration: usize) -> String {
        self.configurations
            .get(configuration)
            .map_or_else(|| format!("#{configuration}"), |c| c.label.clone())
    }
}

/// Write `compare.json`, the CSV files, `report.html` and `table.txt` into
/// `dir`. Each file is written under a temporary name and renamed, so a
/// reader (or an interruption) never sees half a file.
pub fn write_reports(dir: &Path, report: &CompareReport) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
    write_atomic(&dir.join(files::COMPARE_JSON), &json)?;
    write_atomic(
        &dir.join(files::SUMMARY_CSV),
        &csv_files::summary_csv(report).map_err(io::Error::other)?,
    )?;
    write_atomic(
        &dir.join(files::RUNS_CSV),
        &csv_files::runs_csv(report).map_err(io::Error::other)?,
    )?;
    write_atomic(&dir.join(files::TABLE_TXT), render_table(report).as_bytes())?;
    write_atomic(
        &dir.join(files::REPORT_HTML),
        render_html(report).as_bytes(),
    )?;
    Ok(())
}

/// Write `bytes` to `path` through a temporary file in the same directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
