//! `caseload plan`: a new case on PostgreSQL, its evidence and run rows,
//! the stages' preparation, and the work queue with the first units.

use super::{UnitScope, WorkError, phase_of};
use crate::casedb::queue::{NewUnit, PlanRow};
use crate::casedb::{CaseDb, DbEngine, DbOptions, Write};
use crate::channel::{Channel, ChannelKind};
use crate::layout::Layout;
use crate::report::PreparationReport;
use crate::run::{self, RunSpec};
use crate::source::{self, EvidenceSource, SourceInfo};
use crate::stage::{RecordCounts, Scope, StageContext, StageOptions, Units};
use crate::stages;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Default lease on a claimed unit: a worker that stops renewing it for
/// this long loses the unit.
pub const DEFAULT_LEASE_SECONDS: f64 = 30.0;
/// Files per file-hash batch, at most.
pub const DEFAULT_BATCH_FILES: u64 = 2000;
/// Content bytes per file-hash batch, at most.
pub const DEFAULT_BATCH_BYTES: u64 = 256 << 20;

/// What every worker runs identically: stored in the plan as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    /// The evidence as the planner saw it (first file, canonical); a
    /// worker whose mount differs names its own path.
    pub evidence: PathBuf,
    /// Its media size (a worker's evidence must match).
    pub media_size: u64,
    /// What the planner saw of it, for the report.
    pub evidence_info: SourceInfo,
    /// Stages with their options, in order.
    pub stages: Vec<(String, StageOptions)>,
    /// Workload name.
    pub workload: Option<String>,
    /// The run's row.
    pub run_id: i64,
    /// The evidence's row.
    pub evidence_id: i64,
    /// The case database's options (without the server's URL).
    pub db: DbOptions,
    /// Files per file-hash batch.
    pub batch_files: u64,
    /// Content bytes per file-hash batch.
    pub batch_bytes: u64,
    /// Largest evidence read for small requests.
    pub read_run: u64,
    /// When the case was planned.
    pub started_at: String,
    /// The planner's layout.
    pub layout: Layout,
    /// What the stages' preparation did.
    pub preparation: Vec<PreparationReport>,
}

impl PlanSpec {
    /// A digest of what workers must agree on: stages with options and
    /// the database profile.
    pub fn fingerprint(stages: &[(String, StageOptions)], db: &DbOptions) -> String {
        let text = serde_json::json!({
            "stages": stages,
            "profile": db.profile.as_str(),
            "batch_size": db.batch_size,
        })
        .to_string();
        use caseload_digests::Digest;
        caseload_digests::Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// A planned case, its database still open (a cluster keeps its private
/// server running through it while its workers work).
#[derive(Debug)]
pub struct Planned {
    /// The case database.
    pub db: CaseDb,
    /// Where workers reach it.
    pub url: String,
    /// The plan.
    pub spec: PlanSpec,
    /// The units planned.
    pub units: usize,
    /// The case channel.
    pub case: Channel,
    /// The database channel.
    pub database: Channel,
    /// The temp channel's root.
    pub temp_root: Channel,
    /// The plan's private temp directory (the server's dbTemp), removed
    /// with [`Planned::close`].
    pub temp_dir: String,
}

impl Planned {
    /// Release the server's temp space and close the database (a private
    /// cluster stops).
    pub fn close(mut self) -> Result<(), WorkError> {
        let released = self.db.release_temp();
        let closed = self.db.close();
        let _ = self.temp_root.remove_all(&self.temp_dir);
        released?;
        closed?;
        Ok(())
    }
}

/// Lease, batch sizes of a plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanKnobs {
    /// Lease length, seconds.
    pub lease_seconds: f64,
    /// Files per batch.
    pub batch_files: u64,
    /// Bytes per batch.
    pub batch_bytes: u64,
}

impl Default for PlanKnobs {
    fn default() -> Self {
        PlanKnobs {
            lease_seconds: DEFAULT_LEASE_SECONDS,
            batch_files: DEFAULT_BATCH_FILES,
            batch_bytes: DEFAULT_BATCH_BYTES,
        }
    }
}

/// Plan `spec`'s case on PostgreSQL (`spec.db.postgres.url`, or a private
/// cluster in the database channel when there is none): the case, its
/// preparation, the queue. Refused for SQLite, and for a server that
/// already holds a case unless `spec.force`.
pub fn plan_case(spec: &RunSpec, knobs: PlanKnobs) -> Result<Planned, WorkError> {
    if spec.db.engine != DbEngine::Postgres {
        return Err(WorkError::Mismatch(
            "a planned case lives on PostgreSQL (workers on other machines share it): use --db-engine postgres, with --db-url for a server of your own".into(),
        ));
    }
    if !(knobs.lease_seconds.is_finite() && knobs.lease_seconds >= 1.0) {
        return Err(WorkError::Mismatch(format!(
            "--lease-seconds {} is too short: at least 1",
            knobs.lease_seconds
        )));
    }
    let started_at = crate::casedb::now_utc();
    let stage_list = run::build_stages(&spec.stages)?;
    let evidence_dir = spec
        .evidence
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf();
    let evidence_channel = Channel::new(ChannelKind::Evidence, &evidence_dir, Vec::new());
    let source: Arc<dyn EvidenceSource> = Arc::from(
        source::open_evidence(
            &spec.evidence,
            &evidence_channel,
            source::ReadOptions {
                run_bytes: spec.read_run,
                cache_runs: 4,
            },
        )
        .map_err(crate::run::RunError::from)?,
    );
    let protected: Vec<PathBuf> = source.files().iter().map(|f| run::canonical(f)).collect();
    let [database, case, temp_root] =
        run::writable_channels(&spec.layout, &protected).map_err(crate::run::RunError::from)?;
    stages::preflight(&spec.stages, database.dir())?;
    run::prepare_case_dirs(&database, &case, spec.force)?;
    let temp_dir = format!("caseload-plan-{}", std::process::id());
    let temp = temp_root
        .sub(&temp_dir)
        .map_err(crate::run::RunError::from)?;
    let mut db = match CaseDb::create(&database, &spec.db, spec.force) {
        Ok(db) => db,
        Err(e) => {
            let _ = temp_root.remove_all(&temp_dir);
            return Err(e.into());
        }
    };
    let setup = Setup {
        spec,
        knobs,
        source: &source,
        stage_list: &stage_list,
        evidence: protected.first().cloned().unwrap_or_default(),
        case: &case,
        temp: &temp,
        started_at,
    };
    match fill(&mut db, setup) {
        Ok((plan_spec, units)) => Ok(Planned {
            url: db.server_url().unwrap_or_default(),
            db,
            spec: plan_spec,
            units,
            case,
            database,
            temp_root,
            temp_dir,
        }),
        Err(e) => {
            // Nothing that could pass for a case is left here (a private
            // server stops with the database).
            let _ = db.release_temp();
            let _ = db.close();
            for entry in crate::casedb::DB_DIR_ENTRIES {
                let _ = database.remove_all(entry);
            }
            let _ = temp_root.remove_all(&temp_dir);
            Err(e)
        }
    }
}

/// What [`fill`] works with.
struct Setup<'a> {
    spec: &'a RunSpec,
    knobs: PlanKnobs,
    source: &'a Arc<dyn EvidenceSource>,
    stage_list: &'a [Box<dyn crate::stage::Stage>],
    evidence: PathBuf,
    case: &'a Channel,
    temp: &'a Channel,
    started_at: String,
}

/// The new case's run and evidence rows, the stages' preparation and the
/// queue; the plan and the number of units.
fn fill(db: &mut CaseDb, s: Setup<'_>) -> Result<(PlanSpec, usize), WorkError> {
    db.attach_temp(s.temp)?;
    let names: Vec<&str> = s.stage_list.iter().map(|st| st.name()).collect();
    let run_id = run::insert_run(db, s.spec, &names, &s.started_at)?;
    let evidence_id = run::insert_evidence(db, s.source.as_ref())?;
    db.writer().flush()?;
    let cancel = AtomicBool::new(false);
    let recorded = RecordCounts::default();
    let ctx = StageContext {
        evidence: s.source,
        evidence_id,
        run_id,
        db,
        case: s.case,
        temp: s.temp,
        threads: s.spec.threads.max(1),
        progress: &crate::stage::NoProgress,
        cancel: &cancel,
        stage: "",
        recorded: &recorded,
        scope: Scope::Whole,
    };
    let preparation = run::prepare_stages(s.stage_list, &ctx)?;
    let mut db_options = db.options().clone();
    db_options.postgres.url = None;
    let plan_spec = PlanSpec {
        evidence: s.evidence,
        media_size: s.source.size(),
        evidence_info: s.source.info().clone(),
        stages: s.spec.stages.clone(),
        workload: s.spec.workload.clone(),
        run_id,
        evidence_id,
        db: db_options,
        batch_files: s.knobs.batch_files.max(1),
        batch_bytes: s.knobs.batch_bytes.max(1),
        read_run: s.spec.read_run,
        started_at: s.started_at.clone(),
        layout: s.spec.layout.clone(),
        preparation,
    };
    let units = first_units(&plan_spec.stages);
    let row = PlanRow {
        caseload_version: env!("CARGO_PKG_VERSION").into(),
        planned_at: s.started_at,
        fingerprint: PlanSpec::fingerprint(&plan_spec.stages, &plan_spec.db),
        spec: serde_json::to_string(&plan_spec)
            .map_err(|e| WorkError::Other(format!("writing the plan: {e}")))?,
        lease_seconds: s.knobs.lease_seconds,
    };
    let n = units.len();
    db.writer().call(Write::CreatePlan(Box::new(row), units))?;
    db.writer().flush()?;
    Ok((plan_spec, n))
}

/// The units known before anything ran: a whole unit per undivided
/// stage; a split and a finish unit per stage divided into batches (the
/// split adds the batches).
fn first_units(stage_specs: &[(String, StageOptions)]) -> Vec<NewUnit> {
    let mut out = Vec::new();
    for (seq, (name, _)) in stage_specs.iter().enumerate() {
        let waits = !stages::runs_beside(name);
        let scopes: &[UnitScope] = match stages::units_of(name) {
            Units::Whole => &[UnitScope::Whole],
            Units::FileBatches | Units::Parts => &[UnitScope::Split, UnitScope::Finish],
        };
        for &scope in scopes {
            out.push(NewUnit {
                stage: name.clone(),
                seq: i32::try_from(seq).unwrap_or(i32::MAX),
                phase: phase_of(scope),
                waits,
                scope: scope.to_json(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_stage_gets_a_split_and_a_finish_and_image_hash_waits_for_nothing() {
        let specs: Vec<(String, StageOptions)> = ["image-hash", "filesystem", "file-hash", "kff"]
            .iter()
            .map(|n| (n.to_string(), StageOptions::new()))
            .collect();
        let units = first_units(&specs);
        let got: Vec<(&str, i32, i32, bool)> = units
            .iter()
            .map(|u| (u.stage.as_str(), u.seq, u.phase, u.waits))
            .collect();
        assert_eq!(
            got,
            vec![
                ("image-hash", 0, 1, false),
                ("filesystem", 1, 0, true),
                ("filesystem", 1, 2, true),
                ("file-hash", 2, 0, true),
                ("file-hash", 2, 2, true),
                ("kff", 3, 0, true),
                ("kff", 3, 2, true),
            ]
        );
        assert_eq!(units[1].scope, r#"{"kind":"split"}"#);
        assert_eq!(units[2].scope, r#"{"kind":"finish"}"#);
    }
}
