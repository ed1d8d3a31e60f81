//! A run: open the evidence read-only, set up the channels a layout names,
//! create the case database, run the stages in order with per-stage and
//! per-channel figures, and write `run.json`.

use crate::cache::model::PageCacheModel;
use crate::cache::watch::ResidencyWatch;
use crate::cache::{self, CacheMode, CacheReport};
use crate::casedb::{self, CaseDb, DbError, DbOptions, NewEvidence, NewRun, StageRunRow, Write};
use crate::channel::{Channel, ChannelError, ChannelKind};
use crate::fault::InjectedFault;
use crate::layout::{Layout, LayoutError};
use crate::metrics::{self, CpuTimes, PeakScope};
use crate::report::{
    self, ChannelFault, ChannelFigures, ChannelInfo, PreparationReport, Recorded, Resumed,
    RunReport, StageReport, Totals, TraceReport,
};
use crate::resume::{
    FinishedStage, PROGRESS_FILE, PROGRESS_TMP, ProgressFile, ProgressRecord, ResumeError,
    StageStart,
};
use crate::source::{self, EvidenceSource, SourceError};
use crate::stage::{
    NoProgress, Progress, RecordCounts, Stage, StageContext, StageError, StageOptions,
};
use crate::stages;
use crate::system::{self, SystemContext};
use crate::trace::Trace;
use crate::workstation::{MemoryPlan, WorkstationError, WorkstationSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Name of the run report in the case directory.
pub const RUN_JSON: &str = "run.json";

/// Entries a run may create in the case directory; `--force` removes these
/// (and only these) before a new run.
pub const CASE_DIR_ENTRIES: &[&str] = &[
    RUN_JSON,
    RUN_JSON_PARTIAL,
    PROGRESS_FILE,
    PROGRESS_TMP,
    TRACE_FILE,
    "carved",
    "index",
    "export",
];

/// The case-directory entries stages write (what `--resume` removes when
/// the stage that made them was cut short).
const STAGE_CASE_ENTRIES: &[&str] = &["carved", "index", "export"];

/// The run report's space, reserved when a run starts and renamed to
/// [`RUN_JSON`] when it ends: a case directory that holds it and no
/// `run.json` is a run that never finished (killed, or the machine lost).
pub const RUN_JSON_PARTIAL: &str = "run.json.partial";

/// Bytes reserved for the run report when the run starts, so that it can
/// be written even when the case channel fills up (a report of the full
/// workload is about 60 KiB).
const REPORT_RESERVE: u64 = 256 << 10;

/// Name of the operation trace in the case directory (`run --trace`).
pub const TRACE_FILE: &str = "trace.csv";

/// Errors that prevent a run from starting or finishing.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Layout problem.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// Evidence problem.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Database problem.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Channel problem.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// A stage's configuration is wrong.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// The modelled workstation cannot be.
    #[error(transparent)]
    Workstation(#[from] WorkstationError),
    /// The case directory already holds a case.
    #[error("`{}` already holds a case; use --force to replace it", .0.display())]
    CaseExists(PathBuf),
    /// The case directory holds a case whose run never finished.
    #[error("`{}` holds the case of a run that never finished (killed or lost); use --resume with the same arguments to continue it, or --force to replace it", .0.display())]
    CaseIncomplete(PathBuf),
    /// The run cannot be resumed.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// Reading a recorded run's report failed.
    #[error("reading the run report `{}`: {source}", path.display())]
    ReadReport {
        /// Where.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing the report failed.
    #[error("writing {what} `{}`: {source}", path.display())]
    Report {
        /// Which report.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Evidence (first file of a set).
    pub evidence: PathBuf,
    /// Storage layout.
    pub layout: Layout,
    /// Stages with their options, in order.
    pub stages: Vec<(String, StageOptions)>,
    /// Workload name, if from a workload file.
    pub workload: Option<String>,
    /// Worker threads.
    pub threads: usize,
    /// Page-cache policy.
    pub cache: CacheMode,
    /// Case database options.
    pub db: DbOptions,
    /// Replace an existing case.
    pub force: bool,
    /// Instance number when several run at once.
    pub instance: Option<usize>,
    /// Largest evidence read for small requests (`--read-run`).
    pub read_run: u64,
    /// Record every channel operation in `trace.csv` (`--trace`).
    pub trace: bool,
    /// Faults to inject into the channels (reliability tests; see
    /// [`crate::fault`]).
    pub faults: Vec<InjectedFault>,
    /// Continue the unfinished run in the case directory (`--resume`; see
    /// [`crate::resume`]).
    pub resume: bool,
    /// The modelled workstation (`--ram`): its page cache held to what
    /// its memory leaves, its database server's memory settings.
    pub workstation: Option<WorkstationSpec>,
    /// Processes that serve the run without being its workload (a lab's
    /// device server): their CPU is measured per stage and left out of
    /// the machine's figures.
    pub helpers: Vec<crate::sampler::Helper>,
}

/// Check, before any run starts, that `workstation` can be modelled for
/// a run on `evidence` (opened read-only for its media size) with
/// `threads` threads and case database `db`: its plan.
pub fn check_workstation(
    workstation: &WorkstationSpec,
    threads: usize,
    db: &DbOptions,
    evidence: &Path,
) -> Result<MemoryPlan, RunError> {
    let dir = evidence.parent().unwrap_or(Path::new("."));
    // Outside any run: a channel whose counts go nowhere.
    let channel = Channel::new(ChannelKind::Evidence, dir, Vec::new());
    let source = source::open_evidence(evidence, &channel, source::ReadOptions::default())?;
    Ok(memory_plan(workstation, threads, db, source.size())?.0)
}

/// A run's modelled workstation: the plan, and the page cache that puts
/// it into effect.
struct Workstation {
    plan: MemoryPlan,
    model: Arc<PageCacheModel>,
    /// Channels on memory file systems, whose pages cannot be dropped.
    in_memory: Vec<ChannelKind>,
}

/// The memory plan of `spec`'s workstation for evidence of
/// `evidence_bytes`, and the database options with its settings (a
/// user's `--pg-setting` wins).
pub fn memory_plan(
    workstation: &WorkstationSpec,
    spec_threads: usize,
    db: &DbOptions,
    evidence_bytes: u64,
) -> Result<(MemoryPlan, DbOptions), WorkstationError> {
    let postgres = db.engine == casedb::DbEngine::Postgres;
    if postgres && db.postgres.url.is_some() {
        return Err(WorkstationError::ExternalServer);
    }
    let suite = match db.profile {
        casedb::Profile::Ftk4 => crate::workstation::Suite::Ftk,
        _ => crate::workstation::Suite::Caseload,
    };
    let plan = workstation.plan(
        evidence_bytes,
        spec_threads.max(1),
        suite,
        postgres,
        &db.postgres.settings,
    )?;
    let mut db = db.clone();
    for (k, v) in &plan.database_settings {
        db.postgres.settings.insert(k.clone(), v.clone());
    }
    Ok((plan, db))
}

/// Receives progress and results while a run goes on (the command line draws
/// progress bars with it).
pub trait RunObserver: Sync {
    /// A stage starts; return where its progress goes.
    fn stage_started(&self, _stage: &str) -> Box<dyn Progress> {
        Box::new(NoProgress)
    }
    /// A stage ended.
    fn stage_finished(&self, _report: &StageReport) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;
impl RunObserver for Quiet {}

/// Build the stages of a spec (so that configuration errors surface before
/// anything is created).
pub fn build_stages(specs: &[(String, StageOptions)]) -> Result<Vec<Box<dyn Stage>>, StageError> {
    let names: Vec<&str> = specs.iter().map(|(n, _)| n.as_str()).collect();
    stages::check_order(&names)?;
    specs
        .iter()
        .map(|(name, options)| stages::build(name, options))
        .collect()
}

/// Run `spec`. Returns the report (also written as `run.json` in the case
/// directory) even when a stage failed; errors are for runs that could not
/// start or whose case could not be written.
pub fn run(
    spec: &RunSpec,
    observer: &dyn RunObserver,
    cancel: &AtomicBool,
) -> Result<RunReport, RunError> {
    let started_at = casedb::now_utc();
    let stage_list = build_stages(&spec.stages)?;
    // The kernels' first-use measurements (a few milliseconds), here rather
    // than inside the first stage that hashes; run.json records them.
    crate::kernels::all();

    // Evidence first (read-only), so the writable channels can refuse it.
    let evidence_dir = spec
        .evidence
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let evidence_channel = Channel::new(ChannelKind::Evidence, &evidence_dir, Vec::new());
    let source: Arc<dyn EvidenceSource> = Arc::from(source::open_evidence(
        &spec.evidence,
        &evidence_channel,
        source::ReadOptions::for_threads(spec.read_run, spec.threads),
    )?);
    let protected: Vec<PathBuf> = source.files().iter().map(|f| canonical(f)).collect();
    // The evidence as the progress record names it.
    let evidence_file = protected.first().cloned().unwrap_or_default();
    let [database, case, temp_root_channel] = writable_channels(&spec.layout, &protected)?;
    // The modelled workstation: its database settings go into the spec
    // the stages see; its page cache covers every channel.
    let planned;
    let (spec, workstation) = match &spec.workstation {
        Some(w) => {
            let (plan, db) = memory_plan(w, spec.threads, &spec.db, source.size())?;
            let model = Arc::new(PageCacheModel::new(plan.cache_budget_bytes));
            let mut in_memory = Vec::new();
            for c in [&evidence_channel, &database, &case, &temp_root_channel] {
                c.set_page_cache(Arc::clone(&model));
                if cache::residency::on_memory_fs(c.dir()) {
                    in_memory.push(c.kind());
                }
            }
            planned = RunSpec { db, ..spec.clone() };
            (
                &planned,
                Some(Workstation {
                    plan,
                    model,
                    in_memory,
                }),
            )
        }
        None => (spec, None),
    };
    let stage_names: Vec<&str> = stage_list.iter().map(|s| s.name()).collect();
    let (reserved, progress) = if spec.resume {
        resume_case(
            spec,
            &database,
            &case,
            source.as_ref(),
            &evidence_file,
            &stage_names,
        )?
    } else {
        prepare_case_dirs(&database, &case, spec.force)?;
        (reserve_report(&case)?, None)
    };
    let progress_file = ProgressFile::new(&case);
    // Until the stages start, an error leaves no sign of a run (a
    // resumed one keeps its case as it was).
    let unreserve = |e: RunError| {
        if !spec.resume {
            let _ = case.remove_instrument(RUN_JSON_PARTIAL);
        }
        e
    };
    let trace = if spec.trace {
        let file = case
            .create_instrument(TRACE_FILE)
            .map_err(|e| unreserve(e.into()))?;
        // Each channel's directory, so a replay can place the files
        // relative to another layout.
        let roots = [&evidence_channel, &database, &case, &temp_root_channel]
            .iter()
            .map(|c| {
                (
                    "channel-root".to_string(),
                    format!("{} {}", c.kind().name(), c.dir().display()),
                )
            })
            .collect();
        let trace = Arc::new(Trace::start(file, roots).map_err(|source| {
            unreserve(RunError::Report {
                what: "trace",
                path: case.dir().join(TRACE_FILE),
                source,
            })
        })?);
        for c in [&evidence_channel, &database, &case, &temp_root_channel] {
            c.set_trace(Arc::clone(&trace))
                .map_err(|e| unreserve(e.into()))?;
        }
        Some(trace)
    } else {
        None
    };
    if spec.resume {
        crate::resume::remove_dead_temp_dirs(&temp_root_channel);
    }
    let private = crate::resume::private_temp_name();
    // Stages see only the run's private directory, so concurrent runs on
    // one temp directory never collide.
    let temp = temp_root_channel
        .sub(&private)
        .map_err(|e| unreserve(e.into()))?;

    let result = run_stages(
        spec,
        observer,
        cancel,
        &stage_list,
        &source,
        RunChannels {
            evidence: &evidence_channel,
            database: &database,
            case: &case,
            temp: &temp,
        },
        RunProgress {
            started_at: started_at.clone(),
            file: &progress_file,
            resumed: progress,
            evidence: evidence_file,
        },
        workstation.as_ref().map(|w| &w.model),
    );
    let _ = temp_root_channel.remove_all(&private);
    // Every operation of the run is in the trace before the report says so.
    let mut trace_report = trace.map(|t| {
        let waits = t.waits();
        let s = t.finish();
        TraceReport {
            file: TRACE_FILE.into(),
            records: s.records,
            bytes: s.bytes,
            waits,
            dropped: s.dropped,
            error: s.error,
        }
    });
    // A run that could not start leaves no sign of a case.
    let mut report = result.inspect_err(|_| {
        let _ = case.remove_file(RUN_JSON_PARTIAL);
    })?;
    // An incomplete trace (a full case channel) is the run's error: the
    // results stand, the observation does not. The partial file goes: it
    // would replay a different workload, and it holds the space run.json
    // needs.
    if let Some(t) = &mut trace_report
        && t.error.is_some()
    {
        if case.remove_file(TRACE_FILE).is_ok() {
            t.file = String::new();
        }
        if report.status == "completed" {
            report.status = "completed-with-errors".into();
        }
    }
    report.trace = trace_report;

    let mut channels = BTreeMap::new();
    let evidence_place = system::placement(
        source
            .files()
            .first()
            .map_or(evidence_dir.as_path(), PathBuf::as_path),
    );
    channels.insert(
        ChannelKind::Evidence,
        ChannelInfo {
            dir: evidence_dir.clone(),
            placement: evidence_place,
        },
    );
    for c in [&database, &case, &temp_root_channel] {
        channels.insert(c.kind(), ChannelInfo::at(c.dir()));
    }
    report.channels = channels;
    report.workstation = workstation.map(|w| workstation_report(w, &report));
    write_run_json(&case, reserved, &report)?;
    progress_file.remove();
    Ok(report)
}

/// A path's canonical form (itself when that fails).
pub(crate) fn canonical(dir: &Path) -> PathBuf {
    crate::os::resolve(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// What the case looks like before stage `seq` writes anything, so that
/// a resumed run can undo it; `rowids: None` (not resumable) when it
/// cannot be told.
fn stage_start(
    db: &CaseDb,
    case: &Channel,
    engine: casedb::DbEngine,
    seq: usize,
    stage: &str,
) -> StageStart {
    let entries = case.list("");
    let rowids = match (engine, &entries) {
        (casedb::DbEngine::Sqlite, Ok(_)) => {
            db.reader().and_then(|mut r| r.rowid_watermarks()).ok()
        }
        _ => None,
    };
    StageStart {
        seq,
        stage: stage.to_string(),
        rowids,
        case_entries: entries.unwrap_or_default(),
    }
}

/// Where a run records its progress, and the record of the unfinished
/// run it resumes.
struct RunProgress<'a> {
    /// When this process started the run.
    started_at: String,
    file: &'a ProgressFile<'a>,
    resumed: Option<ProgressRecord>,
    /// The evidence's first file, canonical.
    evidence: PathBuf,
}

/// `--resume`: the unfinished run's reserved report file and progress,
/// checked against this run's arguments. A run killed before it recorded
/// any progress is started again from nothing.
fn resume_case(
    spec: &RunSpec,
    database: &Channel,
    case: &Channel,
    source: &dyn EvidenceSource,
    evidence: &Path,
    stages: &[&str],
) -> Result<(std::fs::File, Option<ProgressRecord>), RunError> {
    let nothing = |reason| {
        RunError::Resume(ResumeError::Nothing {
            dir: case.dir().to_path_buf(),
            reason,
        })
    };
    if spec.trace {
        return Err(RunError::Resume(ResumeError::Different {
            dir: case.dir().to_path_buf(),
            what: "cannot be resumed with --trace (the trace of the killed attempt is incomplete)"
                .into(),
        }));
    }
    if case.exists(RUN_JSON) {
        return Err(nothing("its run finished: run.json is there"));
    }
    if !case.exists(RUN_JSON_PARTIAL) && !case.exists(PROGRESS_FILE) {
        return Err(nothing("no run.json.partial or run.progress"));
    }
    match ProgressFile::new(case).read()? {
        Some(p) => {
            p.check(
                case.dir(),
                evidence,
                source.size(),
                stages,
                spec.db.engine.as_str(),
                &canonical(database.dir()),
                spec.db.profile.as_str(),
            )?;
            // The report's space again (the killed run's may be gone
            // with a report half-written into it).
            case.remove_instrument(RUN_JSON_PARTIAL)?;
            Ok((reserve_report(case)?, Some(p)))
        }
        None => {
            prepare_case_dirs(database, case, true)?;
            Ok((reserve_report(case)?, None))
        }
    }
}

struct RunChannels<'a> {
    evidence: &'a Channel,
    database: &'a Channel,
    case: &'a Channel,
    temp: &'a Channel,
}

impl RunChannels<'_> {
    fn all(&self) -> [&Channel; 4] {
        [self.evidence, self.database, self.case, self.temp]
    }
}

/// The layout's writable channels, database, case and temp (its root),
/// their directories checked writable and apart from `protected` (the
/// evidence's files, which no channel may write).
pub(crate) fn writable_channels(
    layout: &crate::layout::Layout,
    protected: &[PathBuf],
) -> Result<[Channel; 3], crate::layout::LayoutError> {
    let dirs = layout.check_writable(protected)?;
    Ok(
        [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp].map(|k| {
            Channel::new(
                k,
                dirs.get(&k).cloned().unwrap_or_default(),
                protected.to_vec(),
            )
        }),
    )
}

/// Refuse to overwrite a case unless forced; when forced, remove only what a
/// run creates.
pub(crate) fn prepare_case_dirs(
    database: &Channel,
    case: &Channel,
    force: bool,
) -> Result<(), RunError> {
    if !force {
        if case.exists(RUN_JSON) {
            return Err(RunError::CaseExists(case.dir().to_path_buf()));
        }
        if case.exists(RUN_JSON_PARTIAL) || case.exists(PROGRESS_FILE) {
            return Err(RunError::CaseIncomplete(case.dir().to_path_buf()));
        }
        if casedb::DB_DIR_ENTRIES.iter().any(|e| database.exists(e)) {
            return Err(RunError::CaseExists(database.dir().to_path_buf()));
        }
    }
    for entry in casedb::DB_DIR_ENTRIES {
        database.remove_all(entry)?;
    }
    for entry in CASE_DIR_ENTRIES {
        case.remove_all(entry)?;
    }
    Ok(())
}

/// What the modelled workstation's page cache did, for run.json.
fn workstation_report(w: Workstation, report: &RunReport) -> crate::report::WorkstationReport {
    let t = w.model.totals();
    let sum = |f: fn(&crate::channel::ChannelSnapshot) -> u64| -> u64 {
        report.totals.channels.values().map(f).sum()
    };
    let (hit, miss) = (sum(|c| c.cache_hit_bytes), sum(|c| c.cache_miss_bytes));
    let mut note = "every read and write through the channels and the case database's SQLite files, and what the kernel holds of a private PostgreSQL server's files (mincore every 250 ms), in an LRU held to the budget; evicted ranges written back when dirty (sync_file_range) and dropped from the kernel's page cache (posix_fadvise DONTNEED); the kernel's cache was dropped once before the first stage, not between stages".to_string();
    if !w.in_memory.is_empty() {
        let names: Vec<&str> = w.in_memory.iter().map(|k| k.name()).collect();
        note.push_str(&format!(
            "; NOT ENFORCED on the {} channel(s), on a memory file system (tmpfs): their pages are the files and stay in memory",
            names.join(", ")
        ));
    }
    crate::report::WorkstationReport {
        memory: w.plan,
        page_cache: crate::report::PageCacheReport {
            budget_bytes: w.model.budget_bytes(),
            granule_bytes: w.model.granule(),
            peak_resident_bytes: t.peak_resident_bytes,
            resident_bytes_at_end: t.resident_bytes,
            hit_bytes: hit,
            miss_bytes: miss,
            hit_ratio: if hit + miss > 0 {
                hit as f64 / (hit + miss) as f64
            } else {
                0.0
            },
            evicted_bytes: sum(|c| c.cache_evicted_bytes),
            written_back_bytes: sum(|c| c.cache_written_back_bytes),
            evictions: t.evictions,
            failed_evictions: t.failed_evictions,
            files: t.files,
            enforced: w.in_memory.is_empty(),
            note,
        },
    }
}

#[allow(clippy::too_many_arguments)]
fn run_stages(
    spec: &RunSpec,
    observer: &dyn RunObserver,
    cancel: &AtomicBool,
    stage_list: &[Box<dyn Stage>],
    source: &Arc<dyn EvidenceSource>,
    ch: RunChannels<'_>,
    mut record: RunProgress<'_>,
    page_cache: Option<&Arc<PageCacheModel>>,
) -> Result<RunReport, RunError> {
    let run_start: Vec<_> = ch.all().iter().map(|c| c.snapshot()).collect();
    let resumed = record.resumed.take();
    // A resumed run started when its first attempt did.
    let started_at = resumed
        .as_ref()
        .map_or(record.started_at.as_str(), |p| p.started_at.as_str())
        .to_string();
    let started_at = started_at.as_str();
    let created = match &resumed {
        Some(_) => CaseDb::reopen(ch.database, &spec.db),
        None => CaseDb::create(ch.database, &spec.db, spec.force),
    }
    .and_then(|mut db| {
        db.attach_temp(ch.temp)?;
        Ok(db)
    });
    let mut db = match created {
        Ok(db) => db,
        Err(e) => {
            // Nothing that could pass for a case is left behind (the
            // directory held none: prepare_case_dirs saw to that); a case
            // being resumed is left as it was.
            if resumed.is_none() {
                for entry in casedb::DB_DIR_ENTRIES {
                    let _ = ch.database.remove_all(entry);
                }
            }
            return Err(e.into());
        }
    };
    // The server's own files join the modelled page cache.
    let _residency = match page_cache {
        Some(model) => {
            let dirs: Vec<(_, Arc<dyn crate::cache::model::CacheAccounts>)> = db
                .server_dirs()
                .into_iter()
                .map(|(dir, kind)| {
                    let channel = if kind == ChannelKind::Temp {
                        ch.temp
                    } else {
                        ch.database
                    };
                    let counters: Arc<dyn crate::cache::model::CacheAccounts> =
                        channel.counters().clone();
                    (dir, counters)
                })
                .collect();
            (!dirs.is_empty())
                .then(|| ResidencyWatch::start(Arc::clone(model), dirs))
                .transpose()
                .map_err(|source| RunError::Report {
                    what: "page-cache watcher",
                    path: ch.database.dir().to_path_buf(),
                    source,
                })?
        }
        None => None,
    };
    let names: Vec<&str> = stage_list.iter().map(|s| s.name()).collect();
    let (run_id, evidence_id) = match &resumed {
        Some(p) => (p.run_id, p.evidence_id),
        None => (
            insert_run(&db, spec, &names, started_at)?,
            insert_evidence(&db, source.as_ref())?,
        ),
    };
    db.writer().flush()?;
    // A resumed run first undoes the stage that was cut short: its rows,
    // its case directory entries.
    if let Some(StageStart {
        rowids: Some(rowids),
        case_entries,
        ..
    }) = resumed.as_ref().and_then(|p| p.running.as_ref())
    {
        db.writer().call(Write::DiscardAfter(rowids.clone()))?;
        db.writer().flush()?;
        crate::resume::remove_new_case_entries(
            ch.case,
            case_entries.as_slice(),
            STAGE_CASE_ENTRIES,
        )?;
    }

    let threads = spec.threads.max(1);
    let no_records = RecordCounts::default();
    // What every stage sees; each stage's own progress, name and counts
    // are filled in for it.
    let base = StageContext {
        evidence: source,
        evidence_id,
        run_id,
        db: &db,
        case: ch.case,
        temp: ch.temp,
        threads,
        progress: &NoProgress,
        cancel,
        stage: "",
        recorded: &no_records,
        scope: crate::stage::Scope::Whole,
    };
    let first = resumed.as_ref().map_or(0, |p| p.finished.len());
    let preparation = match prepare_stages(&stage_list[first..], &base) {
        Ok(p) => p,
        Err(e) => {
            // Before any stage: as when the database could not be made,
            // nothing that could pass for a case is left behind.
            let e = match db.server_problem() {
                Some(_) => RunError::Db(DbError::Writer(with_server_problem(&db, &e))),
                None => e,
            };
            let _ = db.close();
            if resumed.is_none() {
                for entry in casedb::DB_DIR_ENTRIES {
                    let _ = ch.database.remove_all(entry);
                }
            }
            return Err(e);
        }
    };
    let mut state = match resumed {
        Some(mut p) => {
            p.resumed += 1;
            p.running = None;
            p
        }
        None => ProgressRecord {
            schema: crate::resume::PROGRESS_SCHEMA.into(),
            version: crate::resume::PROGRESS_VERSION,
            caseload_version: env!("CARGO_PKG_VERSION").into(),
            started_at: started_at.to_string(),
            run_id,
            evidence_id,
            evidence: record.evidence.clone(),
            media_size: source.size(),
            stages: names.iter().map(|n| n.to_string()).collect(),
            db_engine: spec.db.engine.as_str().to_string(),
            database: canonical(ch.database.dir()),
            profile: spec.db.profile.as_str().to_string(),
            finished: Vec::new(),
            running: None,
            resumed: 0,
        },
    };
    let resumed_from = (state.resumed > 0).then(|| Resumed {
        from_stage: stage_list
            .get(first)
            .map(|s| s.name().to_string())
            .unwrap_or_default(),
        times: state.resumed,
    });
    // The killed attempts' stages are reported as they finished.
    let mut stage_reports: Vec<(usize, String, StageReport)> = state
        .finished
        .iter()
        .map(|f| (f.seq, f.started_at.clone(), f.report.clone()))
        .collect();
    // Injected faults count from the first stage, so that they land where
    // a test means them to whatever the set-up wrote.
    for f in &spec.faults {
        match f.channel {
            ChannelKind::Database => ch.database.arm_fault(f),
            ChannelKind::Case => ch.case.arm_fault(f),
            ChannelKind::Temp => ch.temp.arm_fault(f),
            ChannelKind::Evidence => {}
        }
    }
    let mut cache_report = match spec.cache {
        CacheMode::Warm => cache::warm(),
        CacheMode::Cold => CacheReport {
            mode: CacheMode::Cold,
            method: cache::CacheMethod::None,
            honoured: true,
            note: String::new(),
        },
    };
    let mut interrupted = false;
    // A resumed run's earlier stages may have failed.
    let mut failed = state
        .finished
        .iter()
        .any(|f| f.report.status != "completed");
    let mut channel_fault = None;
    for (seq, stage) in stage_list.iter().enumerate().skip(first) {
        if cancel.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        // What the case looks like before the stage writes anything, so
        // that a resumed run can undo it (recorded with the previous
        // stage's end, or here for the first). A record that fails to be
        // written leaves an older one, which undoes more: still right.
        if state.running.as_ref().map(|r| r.seq) != Some(seq) {
            state.running = Some(stage_start(&db, ch.case, spec.db.engine, seq, stage.name()));
            let _ = record.file.write(&state);
        }
        // A modelled workstation starts cold and keeps what its memory
        // holds from stage to stage, as the workstation would.
        if spec.cache == CacheMode::Cold && (page_cache.is_none() || seq == first) {
            let dirs: Vec<PathBuf> = [ch.database, ch.case, ch.temp]
                .iter()
                .map(|c| c.dir().to_path_buf())
                .collect();
            let r = cache::make_cold(source.files(), &dirs);
            cache_report.honoured &= r.honoured;
            cache_report.method = r.method;
            cache_report.note = r.note;
        }
        metrics::release_free_memory();
        let scope = if metrics::reset_peak_rss() {
            PeakScope::Stage
        } else {
            PeakScope::Process
        };
        db.sample_io();
        let work_before = db.writer().work();
        let before: Vec<_> = ch.all().iter().map(|c| c.snapshot()).collect();
        let cpu_before = CpuTimes::now();
        let io_before = crate::os::process_io();
        let stage_started = casedb::now_utc();
        let clock = Instant::now();
        let sampler = crate::sampler::Sampler::start_excluding(
            std::time::Duration::from_millis(250),
            spec.helpers.clone(),
        );
        if let Some(t) = ch.case.counters().trace() {
            t.phase(stage.name());
        }
        let progress = observer.stage_started(stage.name());
        let recorded = RecordCounts::default();
        let ctx = StageContext {
            progress: progress.as_ref(),
            stage: stage.name(),
            recorded: &recorded,
            ..base
        };
        let outcome = stage.run(&ctx);
        // The stage's database work is part of the stage: commit it now.
        // How long that takes is the writer's backlog when the stage's own
        // work was done (`caseload predict` sets it apart from the waits
        // the stage's threads had while working).
        let drain = Instant::now();
        let flushed = db.writer().flush();
        let mut database_work = db.writer().work().since(&work_before);
        database_work.drain_ns = u64::try_from(drain.elapsed().as_nanos()).unwrap_or(u64::MAX);
        db.sample_io();
        let wall = clock.elapsed().as_secs_f64();
        let (machine, memory) = sampler.finish();
        let cpu = CpuTimes::now().since(&cpu_before);
        let process_io = crate::os::process_io()
            .zip(io_before)
            .map(|(after, before)| after.since(&before));
        let peak = metrics::peak_rss();
        let mut channels = BTreeMap::new();
        for (c, b) in ch.all().iter().zip(&before) {
            channels.insert(
                c.kind(),
                ChannelFigures::from_counters(c.snapshot().since(b), wall),
            );
        }
        let (status, error, summary) = match (outcome, flushed) {
            (Ok(summary), Ok(())) => ("completed", None, summary),
            (Err(StageError::Interrupted), _) => {
                interrupted = true;
                (
                    "interrupted",
                    Some("interrupted".to_string()),
                    Default::default(),
                )
            }
            (Err(e), _) => {
                failed = true;
                (
                    "failed",
                    Some(with_server_problem(&db, &e)),
                    Default::default(),
                )
            }
            (Ok(_), Err(e)) => {
                failed = true;
                (
                    "failed",
                    Some(with_server_problem(&db, &e)),
                    Default::default(),
                )
            }
        };
        // A writable channel that failed during the stage (even under a
        // stage that swallowed the error, or whose files went with a
        // removed directory) fails the stage and ends the run: later
        // stages would measure a broken device and build on lost output.
        // A case-database server that stopped (killed, or it failed on a
        // full or failing disk) is the database channel failing too.
        let fault = writable_fault(&ch).or_else(|| {
            (status == "failed")
                .then(|| db.server_problem())
                .flatten()
                .map(|p| {
                    (
                        ChannelKind::Database,
                        format!("database channel: the case database's server stopped: {p}"),
                    )
                })
        });
        let (status, error) = match fault {
            Some((kind, fault)) if !interrupted => {
                failed = true;
                let error = match error {
                    Some(e) if e.contains(&fault) => e,
                    Some(e) => format!("{e} ({fault})"),
                    None => fault.clone(),
                };
                channel_fault = Some(ChannelFault {
                    channel: kind,
                    stage: stage.name().to_string(),
                    error: fault,
                });
                ("failed", Some(error))
            }
            _ => (status, error),
        };
        let bound_by = report::bound_by(&channels);
        let stage_report = StageReport {
            name: stage.name().to_string(),
            status: status.to_string(),
            error,
            wall_seconds: wall,
            cpu_user_seconds: cpu.user.as_secs_f64(),
            cpu_system_seconds: cpu.system.as_secs_f64(),
            peak_rss_bytes: peak,
            peak_rss_scope: scope,
            process_io,
            mb_per_s: if wall > 0.0 {
                summary.bytes as f64 / 1e6 / wall
            } else {
                0.0
            },
            summary,
            recorded: Recorded::of(&recorded),
            channels,
            bound_by,
            machine,
            memory,
            database_work,
        };
        observer.stage_finished(&stage_report);
        // A stage cut short by a channel fault stays the running one, so
        // that a resumed run (once the device is fixed) redoes it.
        if !interrupted && channel_fault.is_none() {
            state.finished.push(FinishedStage {
                seq,
                started_at: stage_started.clone(),
                report: stage_report.clone(),
            });
            // The end of this stage and the start of the next in one
            // record: no moment where the next one runs unrecorded.
            state.running = stage_list
                .get(seq + 1)
                .map(|next| stage_start(&db, ch.case, spec.db.engine, seq + 1, next.name()));
            let _ = record.file.write(&state);
        }
        stage_reports.push((seq, stage_started, stage_report));
        if interrupted || channel_fault.is_some() {
            break;
        }
    }
    if spec.cache == CacheMode::Cold && cache_report.note.is_empty() {
        cache_report.note = "no stage ran".into();
    }

    let status = if interrupted {
        "interrupted"
    } else if channel_fault.is_some() {
        "failed"
    } else if failed {
        "completed-with-errors"
    } else {
        "completed"
    };
    let finished_at = casedb::now_utc();
    // Bookkeeping after the last stage, so its I/O is charged to no stage.
    // Neither it nor closing the database may lose the report of what the
    // stages did (a server killed mid-run): their failures are noted in it.
    let released = db.release_temp();
    let mut database = db.info();
    let mut notes: Vec<String> = database.note.take().into_iter().collect();
    if let Err(e) = released {
        notes.push(format!(
            "removing the server's temporary tablespace failed: {e}"
        ));
    }
    if let Err(e) = record_stage_runs(&db, run_id, &stage_reports, status, &finished_at) {
        notes.push(format!("recording the stage runs failed: {e}"));
    }
    if let Err(e) = db.close() {
        notes.push(format!("closing the case database failed: {e}"));
    }
    database.bytes_at_end = casedb::stored_bytes(ch.database, &database);
    let status =
        if notes.iter().any(|n| !n.starts_with("server statistics")) && status == "completed" {
            "completed-with-errors"
        } else {
            status
        };
    database.note = (!notes.is_empty()).then(|| notes.join("; "));
    let mut run_totals: BTreeMap<ChannelKind, crate::channel::ChannelSnapshot> = ch
        .all()
        .iter()
        .zip(&run_start)
        .map(|(c, start)| (c.kind(), c.snapshot().since(start)))
        .collect();
    // A resumed run's totals hold the stages its killed attempts finished
    // (what those attempts did outside stages is lost with them).
    for (_, _, r) in stage_reports.iter().take(first) {
        for (k, f) in &r.channels {
            let e = run_totals.entry(*k).or_default();
            *e = e.plus(&f.counters);
        }
    }

    let stages: Vec<StageReport> = stage_reports.into_iter().map(|(_, _, r)| r).collect();
    let mut totals = Totals::default();
    let mut in_stages: BTreeMap<ChannelKind, crate::channel::ChannelSnapshot> = BTreeMap::new();
    for s in &stages {
        totals.wall_seconds += s.wall_seconds;
        totals.recorded = totals.recorded.plus(&s.recorded);
        for (k, f) in &s.channels {
            let e = in_stages.entry(*k).or_default();
            *e = e.plus(&f.counters);
        }
    }
    for (k, whole) in &run_totals {
        let staged = in_stages.get(k).copied().unwrap_or_default();
        totals.outside_stages.insert(*k, whole.since(&staged));
    }
    totals.channels = run_totals;
    Ok(RunReport {
        schema: report::RUN_SCHEMA.into(),
        schema_version: report::RUN_SCHEMA_VERSION,
        caseload_version: env!("CARGO_PKG_VERSION").into(),
        started_at: started_at.to_string(),
        finished_at,
        status: status.into(),
        workload: spec.workload.clone(),
        instance: spec.instance,
        threads,
        evidence: source.info().clone(),
        layout: spec.layout.clone(),
        channels: BTreeMap::new(),
        database,
        cache: cache_report,
        system: SystemContext::current(),
        stages,
        totals,
        trace: None,
        preparation,
        channel_fault,
        resumed: resumed_from,
        distributed: None,
        workstation: None,
    })
}

/// Every stage's [`Stage::prepare`], in order, timed; the first failure
/// ends the run before any stage starts.
pub(crate) fn prepare_stages(
    stage_list: &[Box<dyn Stage>],
    ctx: &StageContext<'_>,
) -> Result<Vec<PreparationReport>, RunError> {
    let mut out = Vec::new();
    for stage in stage_list {
        let ctx = StageContext {
            stage: stage.name(),
            ..*ctx
        };
        let clock = Instant::now();
        let done = stage.prepare(&ctx)?;
        ctx.db.writer().flush()?;
        if let Some(p) = done {
            out.push(PreparationReport {
                stage: stage.name().to_string(),
                what: p.what,
                wall_seconds: clock.elapsed().as_secs_f64(),
                details: p.details,
            });
        }
    }
    Ok(out)
}

/// A stage's error, with why the database server stopped when it did.
pub(crate) fn with_server_problem(db: &CaseDb, e: &dyn std::fmt::Display) -> String {
    match db.server_problem() {
        Some(p) => format!("{e} ({p})"),
        None => e.to_string(),
    }
}

pub(crate) fn insert_run(
    db: &CaseDb,
    spec: &RunSpec,
    names: &[&str],
    started_at: &str,
) -> Result<i64, RunError> {
    let o = &spec.db;
    let (journal, synchronous) = match o.engine {
        casedb::DbEngine::Sqlite => (o.journal_mode.as_str(), o.synchronous.as_str().to_string()),
        // PostgreSQL's log is always a WAL; its commit durability is
        // synchronous_commit.
        casedb::DbEngine::Postgres => (
            "wal",
            db.info()
                .settings
                .get("synchronous_commit")
                .cloned()
                .unwrap_or_else(|| "on".into()),
        ),
    };
    Ok(db
        .writer()
        .call(Write::Run(NewRun {
            started_at: started_at.to_string(),
            workload: spec.workload.clone(),
            stages: names.iter().map(|n| n.to_string()).collect(),
            threads: spec.threads,
            cache_mode: spec.cache.as_str().to_string(),
            db_engine: o.engine.as_str().to_string(),
            journal_mode: journal.to_string(),
            synchronous,
            batch_size: o.batch_size,
        }))?
        .id()?)
}

pub(crate) fn insert_evidence(db: &CaseDb, source: &dyn EvidenceSource) -> Result<i64, RunError> {
    let info = source.info();
    let format = serde_json::to_value(info.format)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    Ok(db
        .writer()
        .call(Write::Evidence(NewEvidence {
            path: info
                .files
                .first()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            format,
            media_size: info.media_size,
            container_bytes: info.container_bytes,
            chunk_size: info.chunk_size,
            stored_md5: info.stored_hashes.md5.clone(),
            stored_sha1: info.stored_hashes.sha1.clone(),
            files: info
                .files
                .iter()
                .map(|f| {
                    (
                        f.to_string_lossy().into_owned(),
                        std::fs::metadata(f).map_or(0, |m| m.len()),
                    )
                })
                .collect(),
            metadata: info
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }))?
        .id()?)
}

pub(crate) fn record_stage_runs(
    db: &CaseDb,
    run_id: i64,
    reports: &[(usize, String, StageReport)],
    status: &str,
    finished_at: &str,
) -> Result<(), RunError> {
    let ns = |s: f64| (s * 1e9) as u64;
    let stages = reports
        .iter()
        .map(|(seq, started, r)| StageRunRow {
            seq: *seq,
            stage: r.name.clone(),
            status: r.status.clone(),
            started_at: started.clone(),
            wall_ns: ns(r.wall_seconds),
            cpu_user_ns: ns(r.cpu_user_seconds),
            cpu_system_ns: ns(r.cpu_system_seconds),
            peak_rss_bytes: r.peak_rss_bytes,
            items: r.summary.items,
            bytes: r.summary.bytes,
            summary: serde_json::to_string(&r.summary.details).unwrap_or_default(),
            channels: r
                .channels
                .iter()
                .map(|(k, f)| (k.name().to_string(), f.counters))
                .collect(),
        })
        .collect();
    db.writer().exec(Write::FinishRun {
        run_id,
        stages,
        status: if matches!(status, "interrupted" | "failed") {
            "failed"
        } else {
            "completed"
        },
        finished_at: finished_at.to_string(),
    })?;
    db.writer().flush()?;
    Ok(())
}

/// The first writable channel that failed, with its error.
fn writable_fault(ch: &RunChannels<'_>) -> Option<(ChannelKind, String)> {
    [ch.database, ch.case, ch.temp]
        .iter()
        .find_map(|c| c.fault().map(|f| (c.kind(), f)))
}

/// Reserve the run report's space in the case directory: the report is
/// the record of what was written, so a case channel that fills up during
/// the run must still have room for it. Its I/O is caseload's own (an
/// instrument), not the workload's.
pub(crate) fn reserve_report(case: &Channel) -> Result<std::fs::File, RunError> {
    let file = case.create_instrument(RUN_JSON_PARTIAL)?;
    // A channel too small for the reservation still runs (the report may
    // then not fit at the end, which the run's error will say).
    let _ = crate::os::preallocate(&file, REPORT_RESERVE);
    file.sync_all().map_err(|source| RunError::Report {
        what: "run report (reserving its space)",
        path: case.dir().join(RUN_JSON_PARTIAL),
        source,
    })?;
    Ok(file)
}

/// Write the report into its reserved space and rename it `run.json`, so
/// that a failure never leaves a half-written report that looks complete.
/// When the case directory itself is gone, it is made again to hold the
/// report (which says what happened).
pub(crate) fn write_run_json(
    case: &Channel,
    reserved: std::fs::File,
    report: &RunReport,
) -> Result<(), RunError> {
    use std::io::Write;
    let path = case.dir().join(RUN_JSON);
    let err = |source: std::io::Error| RunError::Report {
        what: "run report",
        path: path.clone(),
        source,
    };
    let mut json = serde_json::to_vec_pretty(report).map_err(|e| err(std::io::Error::other(e)))?;
    json.push(b'\n');
    let mut file = if case.dir().is_dir() && case.exists(RUN_JSON_PARTIAL) {
        reserved
    } else {
        drop(reserved);
        case.recreate_dir()?;
        case.create_instrument(RUN_JSON_PARTIAL)?
    };
    {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(0)).map_err(err)?;
    }
    file.write_all(&json).map_err(err)?;
    file.set_len(json.len() as u64).map_err(err)?;
    file.sync_all().map_err(err)?;
    drop(file);
    case.rename(RUN_JSON_PARTIAL, RUN_JSON)?;
    case.sync_dir("")?;
    Ok(())
}

/// Read a case directory's `run.json`.
pub fn load_run_json(case_dir: &Path) -> Result<RunReport, RunError> {
    let path = case_dir.join(RUN_JSON);
    let err = |source: std::io::Error| RunError::ReadReport {
        path: path.clone(),
        source,
    };
    // Outside any run: a channel whose counts go nowhere.
    let case = Channel::new(ChannelKind::Case, case_dir, Vec::new());
    let file = case.open(RUN_JSON).map_err(|e| match e {
        ChannelError::Io { source, .. } => err(source),
        other => err(std::io::Error::other(other)),
    })?;
    let mut text = vec![0u8; usize::try_from(file.len().map_err(err)?).unwrap_or(0)];
    let n = file.read_at(&mut text, 0).map_err(err)?;
    text.truncate(n);
    crate::report::parse_run_json(&text)
        .map_err(|e| err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}
