//! The run report: `run.json` (a versioned contract, documented in
//! `docs/run-json.md`) and the per-stage table printed at the end of a run.

mod distributed;

use crate::cache::CacheReport;
use crate::channel::{ChannelKind, ChannelSnapshot};
use crate::layout::Layout;
use crate::metrics::PeakScope;
use crate::sampler::{CpuProfile, MemoryPeaks};
use crate::source::SourceInfo;
use crate::stage::StageSummary;
use crate::system::{Placement, SystemContext};
pub use distributed::{
    DistributedReport, LinkFigures, ThroughputBin, UnitFigures, UnitScope, WorkerFigures,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `run.json`'s schema identifier.
pub const RUN_SCHEMA: &str = "caseload-run";
/// `run.json`'s schema version. Additive changes keep the version; removing
/// or changing the meaning of a field bumps it.
pub const RUN_SCHEMA_VERSION: u32 = 1;

/// Why bytes are not a run.json this version of caseload reads.
#[derive(Debug, thiserror::Error)]
pub enum RunJsonError {
    /// Not JSON, or not an object.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// `schema` is missing or names another document.
    #[error("field `schema` is {found}, not \"{RUN_SCHEMA}\": not a caseload run.json")]
    Schema {
        /// What it held.
        found: String,
    },
    /// `schema_version` is missing or another version.
    #[error(
        "field `schema_version` is {found}: this caseload reads run.json version {RUN_SCHEMA_VERSION} (written by caseload {})",
        env!("CARGO_PKG_VERSION")
    )]
    Version {
        /// What it held.
        found: String,
    },
    /// The right schema and version, but a field does not fit.
    #[error("{0}")]
    Field(#[source] serde_json::Error),
}

/// Parse run.json, checking its schema and version before its fields, so
/// that a report of another version is named as such rather than as a
/// missing field.
pub fn parse_run_json(bytes: &[u8]) -> Result<RunReport, RunJsonError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(RunJsonError::NotJson)?;
    let shown = |v: Option<&serde_json::Value>| v.map_or("missing".to_string(), |v| v.to_string());
    if value.get("schema").and_then(|v| v.as_str()) != Some(RUN_SCHEMA) {
        return Err(RunJsonError::Schema {
            found: shown(value.get("schema")),
        });
    }
    if value.get("schema_version").and_then(|v| v.as_u64()) != Some(u64::from(RUN_SCHEMA_VERSION)) {
        return Err(RunJsonError::Version {
            found: shown(value.get("schema_version")),
        });
    }
    serde_json::from_value(value).map_err(RunJsonError::Field)
}

/// Everything a run recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunReport {
    /// Always [`RUN_SCHEMA`].
    pub schema: String,
    /// [`RUN_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// caseload version.
    pub caseload_version: String,
    /// Start time (ISO 8601 UTC).
    pub started_at: String,
    /// End time.
    pub finished_at: String,
    /// `completed`, `completed-with-errors` (a stage failed), `failed` (a
    /// writable channel failed: the run stopped after that stage; see
    /// `channel_fault`) or `interrupted`.
    pub status: String,
    /// Workload name, when run from a workload file.
    pub workload: Option<String>,
    /// Instance number when several pipelines ran at once (0-based).
    pub instance: Option<usize>,
    /// Worker threads.
    pub threads: usize,
    /// The evidence.
    pub evidence: SourceInfo,
    /// The layout used.
    pub layout: Layout,
    /// Where each channel sits.
    pub channels: BTreeMap<ChannelKind, ChannelInfo>,
    /// The case database.
    pub database: DatabaseInfo,
    /// Page-cache handling.
    pub cache: CacheReport,
    /// The machine.
    pub system: SystemContext,
    /// One entry per stage, in order.
    pub stages: Vec<StageReport>,
    /// Totals over all stages.
    pub totals: Totals,
    /// The operation trace, when the run recorded one (`--trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReport>,
    /// What stages did before processing started (their I/O is in
    /// `totals.outside_stages`), in stage order; absent when none did
    /// anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preparation: Vec<PreparationReport>,
    /// The writable channel that failed (full, failing, read-only or its
    /// directory gone) and stopped the run; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_fault: Option<ChannelFault>,
    /// Present when the run was resumed after it was cut short (`run
    /// --resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<Resumed>,
    /// Present for a case run by several workers (`caseload cluster`,
    /// `caseload report`): per-worker figures, units, coordination and
    /// the shared channels' throughput over time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedReport>,
    /// The modelled workstation (`--ram`): its memory part by part and
    /// what its page cache did; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workstation: Option<WorkstationReport>,
}

/// The modelled workstation of a run (`--ram`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkstationReport {
    /// Its memory, part by part, and the database settings that follow.
    pub memory: crate::workstation::MemoryPlan,
    /// What the modelled page cache did over the run.
    pub page_cache: PageCacheReport,
}

/// What the modelled page cache did over a run (per stage and channel:
/// the channels' `cache_*` figures).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PageCacheReport {
    /// The budget, bytes (a whole number of granules).
    pub budget_bytes: u64,
    /// The granule pages are tracked in, bytes.
    pub granule_bytes: u64,
    /// Most bytes held at once.
    pub peak_resident_bytes: u64,
    /// Bytes held when the run ended.
    pub resident_bytes_at_end: u64,
    /// Bytes read that the cache held, over every channel.
    pub hit_bytes: u64,
    /// Bytes read that it did not.
    pub miss_bytes: u64,
    /// hit / (hit + miss), 0 with no reads.
    pub hit_ratio: f64,
    /// Bytes dropped from the kernel's cache, over every channel.
    pub evicted_bytes: u64,
    /// Of those, dirty bytes written back first.
    pub written_back_bytes: u64,
    /// Ranges dropped from the kernel's cache.
    pub evictions: u64,
    /// Drops that failed or found the file gone.
    pub failed_evictions: u64,
    /// Files the model followed.
    pub files: u64,
    /// Whether the model could be put into effect on every channel (not
    /// where a channel is on a memory file system, whose pages cannot be
    /// dropped).
    pub enforced: bool,
    /// For a reader: how it was done, and what it could not do.
    pub note: String,
}

/// How a run was resumed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Resumed {
    /// The stage it went on from (run again from its start).
    pub from_stage: String,
    /// How many times it was resumed.
    pub times: u32,
}

/// A writable channel's failure, which ends a run (`status: failed`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChannelFault {
    /// The channel.
    pub channel: ChannelKind,
    /// The stage during which it was found.
    pub stage: String,
    /// Its first error, naming the channel and the file.
    pub error: String,
}

/// One stage's preparation ([`crate::stage::Stage::prepare`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PreparationReport {
    /// The stage.
    pub stage: String,
    /// What it did.
    pub what: String,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Figures, stage-specific.
    #[serde(default)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// The operation trace of a run (`run --trace`, `docs/trace.md`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TraceReport {
    /// The trace file, relative to the case directory (empty when an
    /// incomplete trace was removed).
    pub file: String,
    /// Records written.
    pub records: u64,
    /// Bytes of the trace file (not counted on the case channel).
    pub bytes: u64,
    /// Operations that waited for the trace writer (its queue was full).
    pub waits: u64,
    /// Operations not recorded after a write error.
    pub dropped: u64,
    /// The write error that made the trace incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A channel's directory and device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChannelInfo {
    /// Directory used.
    pub dir: PathBuf,
    /// Mount, file system and device.
    pub placement: Placement,
}

impl ChannelInfo {
    /// A channel's directory and where it sits.
    pub fn at(dir: &std::path::Path) -> ChannelInfo {
        ChannelInfo {
            dir: dir.to_path_buf(),
            placement: crate::system::placement(dir),
        }
    }
}

/// How the case database ran (defined with the case database).
pub use crate::casedb::DatabaseInfo;

/// Figures of one stage.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageReport {
    /// Stage name.
    pub name: String,
    /// `completed`, `failed` or `interrupted`.
    pub status: String,
    /// Error that stopped the stage.
    pub error: Option<String>,
    /// Wall time in seconds.
    pub wall_seconds: f64,
    /// CPU user seconds (all threads).
    pub cpu_user_seconds: f64,
    /// CPU system seconds (all threads).
    pub cpu_system_seconds: f64,
    /// Peak resident memory.
    pub peak_rss_bytes: Option<u64>,
    /// Whether that peak is the stage's or the process's.
    pub peak_rss_scope: PeakScope,
    /// The whole process's I/O during the stage as the system counted it
    /// (all channels, the database engine's and caseload's own files, cache
    /// hits included): a cross-check of the channels' counts. Absent where
    /// the system does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_io: Option<crate::os::ProcessIoCounters>,
    /// Items and bytes processed and stage details.
    pub summary: StageSummary,
    /// Logical throughput (summary bytes / wall), MB/s (10^6).
    pub mb_per_s: f64,
    /// Processing errors, warnings and findings recorded.
    pub recorded: Recorded,
    /// Per-channel I/O.
    pub channels: BTreeMap<ChannelKind, ChannelFigures>,
    /// The channel with the most time blocked in I/O, if any I/O happened.
    pub bound_by: Option<ChannelKind>,
    /// Whole-machine CPU user/system/iowait and load sampled during the stage.
    pub machine: CpuProfile,
    /// The process's resident memory by kind (anonymous, file-backed,
    /// shared), highest values sampled during the stage.
    #[serde(default)]
    pub memory: MemoryPeaks,
    /// The case database's writer during the stage: writes applied and
    /// transactions committed (its I/O is in `channels.database`).
    #[serde(default)]
    pub database_work: crate::casedb::DbWork,
}

/// Counts of recorded problems.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Recorded {
    /// Errors.
    pub errors: u64,
    /// Warnings.
    pub warnings: u64,
    /// Findings.
    pub findings: u64,
}

impl Recorded {
    /// The sum of two counts.
    pub fn plus(&self, other: &Recorded) -> Recorded {
        Recorded {
            errors: self.errors + other.errors,
            warnings: self.warnings + other.warnings,
            findings: self.findings + other.findings,
        }
    }

    /// What a stage's counters hold now.
    pub fn of(counts: &crate::stage::RecordCounts) -> Recorded {
        use std::sync::atomic::Ordering;
        Recorded {
            errors: counts.errors.load(Ordering::Relaxed),
            warnings: counts.warnings.load(Ordering::Relaxed),
            findings: counts.findings.load(Ordering::Relaxed),
        }
    }
}

/// One channel's figures over one stage.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ChannelFigures {
    /// Raw counters.
    #[serde(flatten)]
    pub counters: ChannelSnapshot,
    /// Seconds blocked in any I/O call.
    pub blocked_seconds: f64,
    /// Read MB/s over the stage's wall time.
    pub read_mb_per_s: f64,
    /// Write MB/s over the stage's wall time.
    pub write_mb_per_s: f64,
    /// Read operations per second over the wall time.
    pub read_iops: f64,
    /// Write operations per second over the wall time.
    pub write_iops: f64,
}

impl ChannelFigures {
    /// Derive rates from counters over `wall_seconds`.
    pub fn from_counters(counters: ChannelSnapshot, wall_seconds: f64) -> Self {
        let per_s = |v: f64| {
            if wall_seconds > 0.0 {
                v / wall_seconds
            } else {
                0.0
            }
        };
        ChannelFigures {
            counters,
            blocked_seconds: counters.blocked_ns() as f64 / 1e9,
            read_mb_per_s: per_s(counters.bytes_read as f64 / 1e6),
            write_mb_per_s: per_s(counters.bytes_written as f64 / 1e6),
            read_iops: per_s(counters.read_ops as f64),
            write_iops: per_s(counters.write_ops as f64),
        }
    }
}

/// Totals over a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    /// Sum of stage wall times.
    pub wall_seconds: f64,
    /// Per-channel I/O of the whole run: the stages plus `outside_stages`
    /// (everything but the writing of `run.json` itself).
    pub channels: BTreeMap<ChannelKind, ChannelSnapshot>,
    /// Per-channel I/O outside any stage: creating the case database and
    /// its bookkeeping rows, and the final commit and checkpoint.
    pub outside_stages: BTreeMap<ChannelKind, ChannelSnapshot>,
    /// Recorded problems.
    pub recorded: Recorded,
}

/// The channel a stage was bound by: the one with the most time blocked.
pub fn bound_by(channels: &BTreeMap<ChannelKind, ChannelFigures>) -> Option<ChannelKind> {
    channels
        .iter()
        .filter(|(_, f)| f.counters.blocked_ns() > 0)
        .max_by_key(|(_, f)| f.counters.blocked_ns())
        .map(|(k, _)| *k)
}

fn mb(bytes: u64) -> String {
    let v = bytes as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Which columns the run's table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableWidth {
    /// The columns that matter most, within [`NARROW_COLUMNS`] characters
    /// on the usual runs.
    Default,
    /// Every column (`--wide`).
    Wide,
}

/// The terminal width the default table is made for.
pub const NARROW_COLUMNS: usize = 120;

/// One column of the run's table: its header, whether only the wide
/// table has it, and its cell for a stage.
struct Column {
    header: &'static str,
    wide_only: bool,
    cell: fn(&StageReport) -> String,
}

fn channel(s: &StageReport, k: ChannelKind) -> ChannelFigures {
    s.channels.get(&k).copied().unwrap_or_default()
}

/// The table's columns, in order: what a reader looks at first (time,
/// work, where the bytes went, what bound the stage) in both widths; the
/// operation counts, syncs and per-operation figures in the wide one.
const COLUMNS: &[Column] = &[
    Column {
        header: "stage",
        wide_only: false,
        cell: |s| s.name.clone(),
    },
    Column {
        header: "status",
        wide_only: false,
        cell: |s| s.status.clone(),
    },
    Column {
        header: "wall s",
        wide_only: false,
        cell: |s| format!("{:.2}", s.wall_seconds),
    },
    Column {
        header: "MB/s",
        wide_only: false,
        cell: |s| format!("{:.1}", s.mb_per_s),
    },
    Column {
        header: "cpu s",
        wide_only: false,
        cell: |s| format!("{:.2}", s.cpu_user_seconds + s.cpu_system_seconds),
    },
    Column {
        header: "cpu usr/sys s",
        wide_only: true,
        cell: |s| format!("{:.2}/{:.2}", s.cpu_user_seconds, s.cpu_system_seconds),
    },
    Column {
        header: "peak MB",
        wide_only: false,
        cell: |s| {
            s.peak_rss_bytes
                .map_or("-".into(), |b| format!("{:.0}", b as f64 / 1e6))
        },
    },
    Column {
        header: "ev R MB",
        wide_only: false,
        cell: |s| mb(channel(s, ChannelKind::Evidence).counters.bytes_read),
    },
    Column {
        header: "evidence R MB/ops",
        wide_only: true,
        cell: |s| {
            let c = channel(s, ChannelKind::Evidence).counters;
            format!("{}/{}", mb(c.bytes_read), c.read_ops)
        },
    },
    Column {
        header: "ev KiB/op",
        wide_only: true,
        cell: |s| {
            let c = channel(s, ChannelKind::Evidence).counters;
            format!("{:.0}", c.mean_read_bytes() as f64 / 1024.0)
        },
    },
    Column {
        header: "db R/W MB",
        wide_only: false,
        cell: |s| {
            let c = channel(s, ChannelKind::Database).counters;
            format!("{}/{}", mb(c.bytes_read), mb(c.bytes_written))
        },
    },
    Column {
        header: "db ops R/W",
        wide_only: true,
        cell: |s| {
            let c = channel(s, ChannelKind::Database).counters;
            format!("{}/{}", c.read_ops, c.write_ops)
        },
    },
    Column {
        header: "db rows/txn",
        wide_only: true,
        cell: |s| format!("{}/{}", s.database_work.rows, s.database_work.transactions),
    },
    Column {
        header: "fsync",
        wide_only: true,
        cell: |s| {
            format!(
                "{}",
                s.channels.values().map(|f| f.counters.fsyncs).sum::<u64>()
            )
        },
    },
    Column {
        header: "case W MB",
        wide_only: false,
        cell: |s| mb(channel(s, ChannelKind::Case).counters.bytes_written),
    },
    Column {
        header: "case W MB/ops",
        wide_only: true,
        cell: |s| {
            let c = channel(s, ChannelKind::Case).counters;
            format!("{}/{}", mb(c.bytes_written), c.write_ops)
        },
    },
    Column {
        header: "temp W MB",
        wide_only: false,
        cell: |s| mb(channel(s, ChannelKind::Temp).counters.bytes_written),
    },
    Column {
        header: "temp W MB/ops",
        wide_only: true,
        cell: |s| {
            let c = channel(s, ChannelKind::Temp).counters;
            format!("{}/{}", mb(c.bytes_written), c.write_ops)
        },
    },
    Column {
        header: "blocked s",
        wide_only: false,
        cell: |s| {
            format!(
                "{:.2}",
                s.channels.values().map(|f| f.blocked_seconds).sum::<f64>()
            )
        },
    },
    Column {
        header: "bound by",
        wide_only: false,
        cell: |s| s.bound_by.map_or("-".into(), |k| k.to_string()),
    },
];

/// The per-stage table printed at the end of a run, default width.
pub fn render_table(report: &RunReport) -> String {
    render_table_as(report, TableWidth::Default)
}

/// The per-stage table at `width`: the default's columns fit a
/// 120-column terminal (the wide table's split figures, such as MB/ops,
/// are in its place); every line of the footer too.
pub fn render_table_as(report: &RunReport, width: TableWidth) -> String {
    let columns: Vec<&Column> = COLUMNS
        .iter()
        .filter(|c| width == TableWidth::Wide || !c.wide_only)
        // The wide table shows split figures in place of their totals.
        .filter(|c| {
            width == TableWidth::Default
                || !matches!(c.header, "cpu s" | "ev R MB" | "case W MB" | "temp W MB")
        })
        .collect();
    let rows: Vec<Vec<String>> = report
        .stages
        .iter()
        .map(|s| columns.iter().map(|c| (c.cell)(s)).collect())
        .collect();
    let mut widths: Vec<usize> = columns.iter().map(|c| c.header.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 || i == 1 || i == cells.len() - 1 {
                text.push_str(&format!("{cell:<w$}"));
            } else {
                text.push_str(&format!("{cell:>w$}"));
            }
            if i + 1 < cells.len() {
                text.push_str("  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(
        &columns
            .iter()
            .map(|c| c.header.to_string())
            .collect::<Vec<_>>(),
        &mut out,
    );
    for row in &rows {
        line(row, &mut out);
    }
    let r = report.totals.recorded;
    out.push_str(&format!(
        "total {:.2} s; recorded {} errors, {} warnings, {} findings; cache {} ({})\n",
        report.totals.wall_seconds,
        r.errors,
        r.warnings,
        r.findings,
        report.cache.mode.as_str(),
        if report.cache.honoured {
            "honoured"
        } else {
            "not fully honoured"
        },
    ));
    out.push_str(&format!(
        "profile {}; database {} journal={} synchronous={} batch={}\n",
        report.database.options.profile.as_str(),
        report.database.engine,
        report.database.options.journal_mode.as_str(),
        report.database.options.synchronous.as_str(),
        report.database.options.batch_size,
    ));
    if let Some(w) = &report.workstation {
        out.push_str(&workstation_line(w));
    }
    out
}

/// The modelled workstation in one line of the run's table.
fn workstation_line(w: &WorkstationReport) -> String {
    use crate::workstation::human;
    let m = &w.memory;
    let scale = m.scale.map_or(String::new(), |s| {
        format!(
            " scaled x{:.4} ({} of {})",
            s.factor,
            human(s.evidence_bytes),
            human(s.modelled_evidence_bytes)
        )
    });
    let buffers = if m.modelled_database_buffers_bytes > 0 {
        format!(
            ", database buffers {}",
            human(m.modelled_database_buffers_bytes)
        )
    } else {
        String::new()
    };
    let p = &w.page_cache;
    format!(
        "workstation: RAM {}{scale}: page cache {}{buffers}\npage cache: {:.0}% of {} MB read hit, {} MB evicted ({} MB written back first){}\n",
        human(m.ram_bytes),
        human(p.budget_bytes),
        p.hit_ratio * 100.0,
        mb(p.hit_bytes + p.miss_bytes),
        mb(p.evicted_bytes),
        mb(p.written_back_bytes),
        if p.enforced {
            ""
        } else {
            "; NOT ENFORCED (a channel on tmpfs)"
        },
    )
}
pub const INSTANCES_SCHEMA: &str = "caseload-instances";

/// Several pipelines run at once on the same evidence (`--instances N`):
/// each instance's full report, and per-stage aggregates.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstancesReport {
    /// Always [`INSTANCES_SCHEMA`].
    pub schema: String,
    /// Same versioning rule as `run.json`.
    pub schema_version: u32,
    /// Number of instances.
    pub instances: usize,
    /// Wall time from the first start to the last end, seconds.
    pub wall_seconds: f64,
    /// Cache handling (done once, before all instances start).
    pub cache: CacheReport,
    /// Each instance's report, in instance order (failed ones absent).
    pub runs: Vec<RunReport>,
    /// Instances that failed to produce a report, with why.
    pub failures: Vec<String>,
    /// Per stage (in pipeline order), the sum over instances.
    pub aggregate: Vec<AggregateStage>,
}

/// One stage summed over concurrent instances.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AggregateStage {
    /// Stage name.
    pub name: String,
    /// Instances that ran it.
    pub instances: usize,
    /// Longest instance wall time (the instances overlap).
    pub wall_seconds_max: f64,
    /// Shortest instance wall time.
    pub wall_seconds_min: f64,
    /// Summed items and bytes.
    pub items: u64,
    /// Summed logical bytes.
    pub bytes: u64,
    /// Aggregate logical throughput: summed bytes over the longest wall.
    pub mb_per_s: f64,
    /// Summed CPU user seconds.
    pub cpu_user_seconds: f64,
    /// Summed CPU system seconds.
    pub cpu_system_seconds: f64,
    /// Per channel: summed counters, rates over the longest wall.
    pub channels: BTreeMap<ChannelKind, ChannelFigures>,
    /// Channel with the most summed time blocked.
    pub bound_by: Option<ChannelKind>,
}

/// Sum the stages of concurrent runs, stage by stage in pipeline order.
pub fn aggregate(runs: &[RunReport]) -> Vec<AggregateStage> {
    let stages = runs.iter().map(|r| r.stages.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for i in 0..stages {
        let present: Vec<&StageReport> = runs.iter().filter_map(|r| r.stages.get(i)).collect();
        let Some(first) = present.first() else {
            continue;
        };
        let wall_max = present.iter().map(|s| s.wall_seconds).fold(0.0, f64::max);
        let wall_min = present
            .iter()
            .map(|s| s.wall_seconds)
            .fold(f64::INFINITY, f64::min);
        let mut counters: BTreeMap<ChannelKind, ChannelSnapshot> = BTreeMap::new();
        for s in &present {
            for (k, f) in &s.channels {
                let e = counters.entry(*k).or_default();
                *e = e.plus(&f.counters);
            }
        }
        let channels: BTreeMap<ChannelKind, ChannelFigures> = counters
            .into_iter()
            .map(|(k, c)| (k, ChannelFigures::from_counters(c, wall_max)))
            .collect();
        let bytes: u64 = present.iter().map(|s| s.summary.bytes).sum();
        out.push(AggregateStage {
            name: first.name.clone(),
            instances: present.len(),
            wall_seconds_max: wall_max,
            wall_seconds_min: if wall_min.is_finite() { wall_min } else { 0.0 },
            items: present.iter().map(|s| s.summary.items).sum(),
            bytes,
            mb_per_s: if wall_max > 0.0 {
                bytes as f64 / 1e6 / wall_max
            } else {
                0.0
            },
            cpu_user_seconds: present.iter().map(|s| s.cpu_user_seconds).sum(),
            cpu_system_seconds: present.iter().map(|s| s.cpu_system_seconds).sum(),
            bound_by: bound_by(&channels),
            channels,
        });
    }
    out
}

/// The aggregate table printed after `--instances N`.
pub fn render_aggregate(report: &InstancesReport) -> String {
    let mut out = format!(
        "aggregate of {} concurrent instances ({:.2} s overall)\n{:<12} {:>9} {:>12} {:>10} {:>16} {:>16} {:>10} {:>9}\n",
        report.instances,
        report.wall_seconds,
        "stage",
        "instances",
        "wall max s",
        "MB/s",
        "evidence R MB",
        "database W MB",
        "blocked s",
        "bound by"
    );
    for s in &report.aggregate {
        let get = |k: ChannelKind| s.channels.get(&k).copied().unwrap_or_default();
        out.push_str(&format!(
            "{:<12} {:>9} {:>12.2} {:>10.1} {:>16} {:>16} {:>10.2} {:>9}\n",
            s.name,
            s.instances,
            s.wall_seconds_max,
            s.mb_per_s,
            mb(get(ChannelKind::Evidence).counters.bytes_read),
            mb(get(ChannelKind::Database).counters.bytes_written),
            s.channels.values().map(|f| f.blocked_seconds).sum::<f64>(),
            s.bound_by.map_or("-".into(), |k| k.to_string())
        ));
    }
    for f in &report.failures {
        out.push_str(&format!("failed: {f}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded run with figures as wide as a 64 GiB run's (the
    /// evidence read whole, gigabytes on the database, minutes of wall
    /// time) and the longest status.
    fn wide_report() -> RunReport {
        let text = include_str!("../../../workloads/tests/data/run.json");
        let mut r: RunReport = serde_json::from_str(text).unwrap();
        let template = r.stages[0].clone();
        r.stages = [
            "image-hash",
            "filesystem",
            "file-hash",
            "index",
            "carve",
            "kff",
        ]
        .iter()
        .map(|n| StageReport {
            name: n.to_string(),
            ..template.clone()
        })
        .collect();
        for s in &mut r.stages {
            for k in ChannelKind::ALL {
                s.channels.entry(k).or_default();
            }
            s.bound_by = Some(ChannelKind::Database);
            s.status = "interrupted".into();
            s.wall_seconds = 999.99;
            s.mb_per_s = 9999.9;
            s.cpu_user_seconds = 999.0;
            s.peak_rss_bytes = Some(9_999_000_000);
            for (k, c) in s.channels.iter_mut() {
                let big = if *k == ChannelKind::Database {
                    9_900_000_000
                } else {
                    68_700_000_000
                };
                c.counters.bytes_read = big;
                c.counters.bytes_written = big;
                c.counters.read_ops = 99_999_999;
                c.counters.write_ops = 99_999_999;
                c.blocked_seconds = 999.99;
            }
        }
        r
    }

    #[test]
    fn the_default_table_fits_120_columns_and_wide_has_every_column() {
        let r = wide_report();
        let narrow = render_table(&r);
        for line in narrow.lines() {
            assert!(
                line.chars().count() <= NARROW_COLUMNS,
                "{} columns: {line}",
                line.chars().count()
            );
        }
        let wide = render_table_as(&r, TableWidth::Wide);
        let header = wide.lines().next().unwrap();
        let narrow_header = narrow.lines().next().unwrap();
        for h in [
            "cpu usr/sys s",
            "evidence R MB/ops",
            "ev KiB/op",
            "db ops R/W",
            "db rows/txn",
            "fsync",
            "case W MB/ops",
            "temp W MB/ops",
        ] {
            assert!(header.contains(h), "{h} missing from {header}");
            assert!(!narrow_header.contains(h), "{h} in the default table");
        }
        assert_eq!(wide.lines().count(), narrow.lines().count());
    }
}
