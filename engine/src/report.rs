//! The run report: `run.json` (a versioned contract, documented in
//! `docs/run-json.md`) and the per-stage table printed at the end of a run.

use crate::cache::CacheReport;
use crate::casedb::DbOptions;
use crate::channel::{ChannelKind, ChannelSnapshot};
use crate::layout::Layout;
use crate::metrics::PeakScope;
use crate::sampler::CpuProfile;
use crate::source::SourceInfo;
use crate::stage::StageSummary;
use crate::system::{Placement, SystemContext};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `run.json`'s schema identifier.
pub const RUN_SCHEMA: &str = "caseload-run";
/// `run.json`'s schema version. Additive changes keep the version; removing
/// or changing the meaning of a field bumps it.
pub const RUN_SCHEMA_VERSION: u32 = 1;

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
    /// `completed`, `completed-with-errors` (a stage failed) or `interrupted`.
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
}

/// A channel's directory and device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChannelInfo {
    /// Directory used.
    pub dir: PathBuf,
    /// Mount, file system and device.
    pub placement: Placement,
}

/// How the case database ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DatabaseInfo {
    /// Database file.
    pub path: PathBuf,
    /// Engine.
    pub engine: String,
    /// Journal mode, synchronous level, batch size.
    pub options: DbOptions,
    /// How its I/O is charged to the database channel.
    pub accounting: String,
}

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

/// The per-stage table printed at the end of a run.
pub fn render_table(report: &RunReport) -> String {
    let headers = [
        "stage",
        "status",
        "wall s",
        "MB/s",
        "cpu usr/sys s",
        "peak MB",
        "evidence R MB/ops",
        "database R/W MB",
        "db ops R/W",
        "fsync",
        "case W MB/ops",
        "temp W MB/ops",
        "blocked s",
        "bound by",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in &report.stages {
        let ch = |k: ChannelKind| s.channels.get(&k).copied().unwrap_or_default();
        let (ev, db, case, temp) = (
            ch(ChannelKind::Evidence),
            ch(ChannelKind::Database),
            ch(ChannelKind::Case),
            ch(ChannelKind::Temp),
        );
        let blocked: f64 = s.channels.values().map(|f| f.blocked_seconds).sum();
        rows.push(vec![
            s.name.clone(),
            s.status.clone(),
            format!("{:.2}", s.wall_seconds),
            format!("{:.1}", s.mb_per_s),
            format!("{:.2}/{:.2}", s.cpu_user_seconds, s.cpu_system_seconds),
            s.peak_rss_bytes
                .map_or("-".into(), |b| format!("{:.0}", b as f64 / 1e6)),
            format!("{}/{}", mb(ev.counters.bytes_read), ev.counters.read_ops),
            format!(
                "{}/{}",
                mb(db.counters.bytes_read),
                mb(db.counters.bytes_written)
            ),
            format!("{}/{}", db.counters.read_ops, db.counters.write_ops),
            format!(
                "{}",
                s.channels.values().map(|f| f.counters.fsyncs).sum::<u64>()
            ),
            format!(
                "{}/{}",
                mb(case.counters.bytes_written),
                case.counters.write_ops
            ),
            format!(
                "{}/{}",
                mb(temp.counters.bytes_written),
                temp.counters.write_ops
            ),
            format!("{blocked:.2}"),
            s.bound_by.map_or("-".into(), |k| k.to_string()),
        ]);
    }
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 || i == 1 || i == cells.len() - 1 {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("{cell:>w$}"));
            }
            out.push_str(if i + 1 < cells.len() { "  " } else { "\n" });
        }
    };
    line(
        &headers.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
        &mut out,
    );
    for row in &rows {
        line(row, &mut out);
    }
    let r = report.totals.recorded;
    out.push_str(&format!(
        "total {:.2} s; recorded {} errors, {} warnings, {} findings; cache {} ({}); database {} journal={} synchronous={} batch={}\n",
        report.totals.wall_seconds,
        r.errors,
        r.warnings,
        r.findings,
        report.cache.mode.as_str(),
        if report.cache.honoured { "honoured" } else { "not fully honoured" },
        report.database.engine,
        report.database.options.journal_mode.as_str(),
        report.database.options.synchronous.as_str(),
        report.database.options.batch_size,
    ));
    out
}
