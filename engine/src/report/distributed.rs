//! What a case run by several workers adds to run.json (`distributed`):
//! the units and their figures, per worker, their links, and the shared
//! channels' throughput over time. The types are the report's; `work`
//! fills them in.

use super::Recorded;
use crate::casedb::DbWork;
use crate::casedb::queue::Coordination;
use crate::channel::{ChannelKind, ChannelSnapshot};
use crate::stage::{Scope, StageSummary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a unit does: cut its stage into batches, or run (part of) it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum UnitScope {
    /// Cut the stage's files into batch units.
    Split,
    /// The whole stage.
    Whole,
    /// A batch of files.
    Files {
        /// First file id.
        first: i64,
        /// Last file id.
        last: i64,
    },
    /// One part of a stage that cuts itself into parts.
    Part {
        /// The part.
        part: u32,
        /// Its byte ranges of the evidence.
        ranges: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// The stage's case-wide finish.
    Finish,
}

impl UnitScope {
    /// The stage scope it runs with (`None` for a split).
    pub fn stage_scope(self) -> Option<Scope> {
        match self {
            UnitScope::Split => None,
            UnitScope::Whole => Some(Scope::Whole),
            UnitScope::Files { first, last } => Some(Scope::Files { first, last }),
            UnitScope::Part {
                part,
                ranges,
                bytes,
            } => Some(Scope::Part {
                part,
                ranges,
                bytes,
            }),
            UnitScope::Finish => Some(Scope::Finish),
        }
    }

    /// As stored in the queue.
    pub fn to_json(self) -> String {
        serde_json::to_string(&self).unwrap_or_default()
    }

    /// Parse a stored scope; the error says what could not be read.
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("unit scope `{text}` is not readable: {e}"))
    }

    /// For tables: `whole`, `files 1-200`, `split`, `finish`.
    pub fn label(self) -> String {
        match self {
            UnitScope::Split => "split".into(),
            UnitScope::Whole => "whole".into(),
            UnitScope::Files { first, last } => format!("files {first}-{last}"),
            UnitScope::Part {
                part,
                ranges,
                bytes,
            } => format!(
                "part {part}: {ranges} ranges, {:.1} MiB",
                bytes as f64 / 1048576.0
            ),
            UnitScope::Finish => "finish".into(),
        }
    }
}

/// What a worker measured of one unit, stored with the unit when it is
/// committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitFigures {
    /// The unit.
    pub unit: i64,
    /// Its stage.
    pub stage: String,
    /// Its scope.
    pub scope: UnitScope,
    /// The worker that committed it.
    pub worker: String,
    /// Which claim of the unit this was (2 and more: redone).
    pub attempt: i32,
    /// When it started, seconds since the Unix epoch.
    pub started: f64,
    /// Wall time, seconds.
    pub wall_seconds: f64,
    /// CPU user time of the worker process meanwhile.
    pub cpu_user_seconds: f64,
    /// CPU system time.
    pub cpu_system_seconds: f64,
    /// The stage's summary of this unit.
    pub summary: StageSummary,
    /// Problems recorded.
    pub recorded: Recorded,
    /// The worker's channels (evidence, database, case, temp) over the
    /// unit. The database channel holds only the worker's own files (a
    /// KFF library); the server's I/O is the case's, measured where the
    /// server runs.
    pub channels: BTreeMap<ChannelKind, ChannelSnapshot>,
    /// Writes, rows and transactions the unit sent to the case database.
    pub database_work: DbWork,
}

impl UnitFigures {
    /// When it ended, seconds since the Unix epoch.
    pub fn ended(&self) -> f64 {
        self.started + self.wall_seconds
    }
}

/// One worker's share of a case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerFigures {
    /// Its name.
    pub name: String,
    /// Its host.
    pub host: String,
    /// working, finished, stopped, failed.
    pub state: String,
    /// Why it stopped, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Units it committed.
    pub units: u64,
    /// Wall seconds spent in them.
    pub busy_seconds: f64,
    /// CPU seconds (user + system) of the process during them.
    pub cpu_seconds: f64,
    /// Its channels over its units.
    pub channels: BTreeMap<ChannelKind, ChannelSnapshot>,
    /// What it wrote to the case database.
    pub database_work: DbWork,
    /// Its coordination traffic (claims, renewals, releases), apart from
    /// the case database's I/O.
    pub coordination: Coordination,
    /// Its own link to the server (`caseload cluster --netns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkFigures>,
}

/// What one worker's link to the server carried (`cluster --netns`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkFigures {
    /// The rate it was shaped to, MB/s (`None`: not shaped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mb_s: Option<f64>,
    /// Bytes from the worker to the server.
    pub to_server_bytes: u64,
    /// Bytes from the server to the worker.
    pub from_server_bytes: u64,
}

/// The shared channels over one interval of a distributed case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThroughputBin {
    /// Start of the interval, seconds after the first unit started.
    pub at_seconds: f64,
    /// Its length.
    pub seconds: f64,
    /// Evidence read by all workers, MB/s (each unit's bytes spread over
    /// its span).
    pub evidence_mb_per_s: f64,
    /// Case directory written and read by all workers, MB/s.
    pub case_mb_per_s: f64,
    /// The database server's reads and writes, MB/s (when measured).
    pub database_mb_per_s: f64,
    /// Units running, on average.
    pub units_running: f64,
}

/// What only a distributed case has (`run.json`'s `distributed`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DistributedReport {
    /// Units in the plan (with the batches the splits added).
    pub units: u64,
    /// Units done.
    pub units_done: u64,
    /// Units failed for good.
    pub units_failed: u64,
    /// Units committed by a later claim than the first (a worker died or
    /// lost the lease).
    pub units_redone: u64,
    /// Per worker.
    pub workers: Vec<WorkerFigures>,
    /// All workers' coordination traffic.
    pub coordination: Coordination,
    /// The shared channels' aggregate throughput over time.
    pub throughput: Vec<ThroughputBin>,
    /// How the database server's I/O was charged to stages.
    pub database_io: String,
}
