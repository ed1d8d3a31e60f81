//! One case, many workstations: a case split into work units in the case
//! database (`caseload plan`), claimed and run by any number of workers
//! (`caseload worker`), watched (`caseload status`) and summed up into a
//! run report (`caseload report`, `caseload cluster`). PostgreSQL is the
//! only coordinator (see [`crate::casedb::queue`]): its row locks give
//! the claims, its transactions make a unit's rows and its `done` mark
//! one commit, its connection loss rolls back a dead worker's unit.
//!
//! Units follow a suite's split: image-hash per image; the file-system
//! walk per volume (spooled, stored in volume order by a finish unit);
//! file hashing, KFF and the index per batch of files (a split unit cuts
//! the batches once the walk is done; a finish unit does the case-wide
//! work); carving per run of regions (numbered provisionally, renumbered
//! by its finish as a single run numbers them). A stage waits
//! for every unit of the earlier stages it may read from.

mod aggregate;
pub mod plan;
mod worker;

pub use aggregate::{AggregateInput, aggregate_report};
// The figures a distributed case reports are run.json's (`report`); named
// here too, where the work that makes them is.
pub use crate::report::{
    DistributedReport, LinkFigures, ThroughputBin, UnitFigures, UnitScope, WorkerFigures,
};
pub use plan::{PlanKnobs, PlanSpec, Planned, plan_case};
pub use worker::{WorkerOptions, WorkerOutcome, run_worker};

use crate::casedb::DbError;
use crate::stage::Scope;

/// Errors of planning, working and reporting.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// The case database or the queue failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Setting the case up failed (evidence, layout, stages).
    #[error(transparent)]
    Run(#[from] crate::run::RunError),
    /// A stage's configuration is wrong.
    #[error(transparent)]
    Stage(#[from] crate::stage::StageError),
    /// The worker and the plan do not match.
    #[error("{0}")]
    Mismatch(String),
    /// Anything else, said plainly.
    #[error("{0}")]
    Other(String),
}

impl From<Scope> for UnitScope {
    fn from(s: Scope) -> Self {
        match s {
            Scope::Whole => UnitScope::Whole,
            Scope::Files { first, last } => UnitScope::Files { first, last },
            Scope::Part {
                part,
                ranges,
                bytes,
            } => UnitScope::Part {
                part,
                ranges,
                bytes,
            },
            Scope::Finish => UnitScope::Finish,
        }
    }
}

/// Phase of a unit within its stage: splits, then work, then finish.
pub(crate) fn phase_of(scope: UnitScope) -> i32 {
    match scope {
        UnitScope::Split => 0,
        UnitScope::Whole | UnitScope::Files { .. } | UnitScope::Part { .. } => 1,
        UnitScope::Finish => 2,
    }
}

/// Record a planned case's end in its database (the run's stage rows and
/// status), as a single run does when it closes.
pub fn record_finish(
    db: &crate::casedb::CaseDb,
    report: &crate::report::RunReport,
    run_id: i64,
) -> Result<(), WorkError> {
    let stages: Vec<(usize, String, crate::report::StageReport)> = report
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| (i, report.started_at.clone(), s.clone()))
        .collect();
    crate::run::record_stage_runs(db, run_id, &stages, &report.status, &report.finished_at)?;
    Ok(())
}

/// Write `run.json` into the case directory (replacing one there), the
/// way a run writes its own: into reserved space, then renamed.
pub fn write_report(
    case: &crate::channel::Channel,
    report: &crate::report::RunReport,
) -> Result<(), WorkError> {
    let _ = case.remove_instrument(crate::run::RUN_JSON_PARTIAL);
    let reserved = crate::run::reserve_report(case)?;
    crate::run::write_run_json(case, reserved, report)?;
    Ok(())
}
