//! `caseload worker`: claim ready units, run them, commit each unit's rows
//! with its `done` mark, until no unit is left that can still be done.

use super::plan::PlanSpec;
use super::{UnitScope, WorkError, phase_of};
use crate::casedb::queue::{Claimed, Coordination, NewUnit, Queue};
use crate::casedb::{CaseDb, DbError, Write};
use crate::channel::{Channel, ChannelKind, ChannelSnapshot};
use crate::layout::Layout;
use crate::metrics::CpuTimes;
use crate::report::Recorded;
use crate::report::UnitFigures;
use crate::run;
use crate::source::{self, EvidenceSource};
use crate::stage::{
    RecordCounts, Stage, StageContext, StageError, StageOptions, StageSummary, Units,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The case database's server.
    pub url: String,
    /// This worker's layout: its own temp and database directories; the
    /// case directory shared with the others.
    pub layout: Layout,
    /// Its name in the queue (unique among the case's workers).
    pub name: String,
    /// Threads a unit may use.
    pub threads: usize,
    /// The evidence as this worker's mount names it (default: the
    /// planner's path).
    pub evidence: Option<PathBuf>,
    /// The stages the worker was told to run, checked against the plan.
    pub stages: Option<Vec<(String, StageOptions)>>,
    /// How long to keep retrying a server that cannot be reached.
    pub retry_for: Duration,
    /// Hold each finished unit this long before committing it (tests
    /// kill a worker there, mid-unit).
    pub hold_before_commit: Option<Duration>,
}

/// How a worker ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerOutcome {
    /// Its name.
    pub name: String,
    /// Units it committed.
    pub units_done: u64,
    /// Of those, units another worker had claimed before (redone).
    pub units_redone: u64,
    /// Units that failed in its hands (given back).
    pub units_failed: u64,
    /// Units whose lease it lost before committing (rolled back).
    pub leases_lost: u64,
    /// Its coordination traffic.
    pub coordination: Coordination,
    /// Whether the queue was finished when it stopped.
    pub finished: bool,
}

/// Waits between empty claims, growing to this.
const IDLE_MAX: Duration = Duration::from_millis(500);

/// Run as a worker of the case at `opts.url` until no unit is left that
/// can still be done (or `cancel`). Errors are for a worker that could
/// not work at all or lost its server for longer than `retry_for`.
pub fn run_worker(opts: &WorkerOptions, cancel: &AtomicBool) -> Result<WorkerOutcome, WorkError> {
    let mut queue = reach(&opts.url, opts.retry_for, cancel)?;
    let plan = queue.plan()?.ok_or_else(|| {
        WorkError::Mismatch(
            "the server holds no plan: run `caseload plan` (or `caseload cluster`) first".into(),
        )
    })?;
    let ours = env!("CARGO_PKG_VERSION");
    if plan.caseload_version != ours {
        return Err(WorkError::Mismatch(format!(
            "the case was planned by caseload {} and this is caseload {ours}: every worker must run the planner's version",
            plan.caseload_version
        )));
    }
    let spec: PlanSpec = serde_json::from_str(&plan.spec)
        .map_err(|e| WorkError::Other(format!("the plan is not readable: {e}")))?;
    if let Some(stages) = &opts.stages
        && PlanSpec::fingerprint(stages, &spec.db) != plan.fingerprint
    {
        return Err(WorkError::Mismatch(format!(
            "this worker's workload ({}) is not the plan's ({}): a worker runs the plan's workload; leave --workload/--stages out to take it",
            stages
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(","),
            spec.stages
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(","),
        )));
    }
    let stage_list = run::build_stages(&spec.stages)?;
    let evidence_path = opts
        .evidence
        .clone()
        .unwrap_or_else(|| spec.evidence.clone());
    let protected = vec![run::canonical(&evidence_path)];
    let [database, case, temp_root] =
        run::writable_channels(&opts.layout, &protected).map_err(run::RunError::from)?;
    let private = crate::resume::private_temp_name();
    let temp = temp_root.sub(&private).map_err(run::RunError::from)?;
    let mut db_options = spec.db.clone();
    db_options.postgres.url = Some(opts.url.clone());
    let db = CaseDb::join(&database, &db_options)?;
    let host = crate::system::hostname();
    queue.register(&opts.name, &host, std::process::id())?;
    let lease = Duration::from_secs_f64(plan.lease_seconds);

    let held: Mutex<Option<(i64, String)>> = Mutex::new(None);
    let unit_cancel = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let renewer_traffic: Mutex<Coordination> = Mutex::new(Coordination::default());
    let mut outcome = WorkerOutcome {
        name: opts.name.clone(),
        ..WorkerOutcome::default()
    };
    let evidence_channel = Channel::new(
        ChannelKind::Evidence,
        evidence_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf(),
        Vec::new(),
    );
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            renew_leases(
                &opts.url,
                lease,
                &held,
                &unit_cancel,
                cancel,
                &stop,
                &renewer_traffic,
            )
        });
        let worked = work(
            &mut queue,
            &mut outcome,
            WorkSetting {
                opts,
                spec: &spec,
                stages: &stage_list,
                db: &db,
                channels: [&evidence_channel, &database, &case, &temp],
                evidence_path: &evidence_path,
                lease,
                held: &held,
                unit_cancel: &unit_cancel,
                cancel,
            },
        );
        stop.store(true, Ordering::Relaxed);
        worked
    });
    let _ = temp_root.remove_all(&private);
    let renewals = *renewer_traffic
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (state, message) = match &result {
        Ok(()) if outcome.finished => ("finished", None),
        Ok(()) => ("stopped", Some("interrupted".to_string())),
        Err(e) => ("failed", Some(e.to_string())),
    };
    let done = i64::try_from(outcome.units_done).unwrap_or(i64::MAX);
    // The renewing connection's traffic is the worker's too.
    let traffic = queue.traffic().plus(&renewals);
    outcome.coordination = traffic;
    let _ = queue.unregister(&opts.name, state, message.as_deref(), done, &traffic);
    let closed = db.close();
    result?;
    closed?;
    Ok(outcome)
}

/// Connect to the queue, retrying with backoff for `retry_for`.
fn reach(url: &str, retry_for: Duration, cancel: &AtomicBool) -> Result<Queue, WorkError> {
    let start = Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        match Queue::connect(url) {
            Ok(q) => return Ok(q),
            Err(e) if start.elapsed() >= retry_for || cancel.load(Ordering::Relaxed) => {
                return Err(WorkError::Other(format!(
                    "gave up after {:.0} s: {e}",
                    start.elapsed().as_secs_f64()
                )));
            }
            Err(_) => {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Keep the held unit's lease alive; when it is lost, or the worker is
/// interrupted, tell the unit to stop.
fn renew_leases(
    url: &str,
    lease: Duration,
    held: &Mutex<Option<(i64, String)>>,
    unit_cancel: &AtomicBool,
    cancel: &AtomicBool,
    stop: &AtomicBool,
    traffic: &Mutex<Coordination>,
) {
    let every = (lease / 3).max(Duration::from_millis(200));
    let mut queue: Option<Queue> = None;
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if cancel.load(Ordering::Relaxed) {
            unit_cancel.store(true, Ordering::Relaxed);
        }
        if last.elapsed() < every {
            continue;
        }
        last = Instant::now();
        let current = held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let Some((unit, token)) = current else {
            continue;
        };
        if queue.is_none() {
            queue = Queue::connect(url).ok();
        }
        let Some(q) = queue.as_mut() else { continue };
        match q.renew(unit, &token, lease) {
            Ok(true) => {}
            Ok(false) => {
                // Still ours by the token? The unit may have just been
                // committed; only a unit still held is told to stop.
                // The lock is held while the flag is set, so it cannot land
                // on the next unit (which clears it under the same lock).
                let guard = held
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if guard
                    .as_ref()
                    .is_some_and(|(u, t)| *u == unit && *t == token)
                {
                    unit_cancel.store(true, Ordering::Relaxed);
                }
            }
            Err(_) => {
                // The server is away: reconnect at the next turn; the
                // lease may run out meanwhile, and the commit then fails.
                if let Some(q) = queue.take() {
                    add_traffic(traffic, q.traffic());
                }
            }
        }
    }
    if let Some(q) = queue {
        add_traffic(traffic, q.traffic());
    }
}

fn add_traffic(total: &Mutex<Coordination>, t: Coordination) {
    let mut g = total
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *g = g.plus(&t);
}

/// What the claim loop works with.
struct WorkSetting<'a> {
    opts: &'a WorkerOptions,
    spec: &'a PlanSpec,
    stages: &'a [Box<dyn Stage>],
    db: &'a CaseDb,
    /// Evidence, database, case, temp.
    channels: [&'a Channel; 4],
    evidence_path: &'a PathBuf,
    lease: Duration,
    held: &'a Mutex<Option<(i64, String)>>,
    unit_cancel: &'a AtomicBool,
    cancel: &'a AtomicBool,
}

/// The claim loop.
fn work(
    queue: &mut Queue,
    outcome: &mut WorkerOutcome,
    w: WorkSetting<'_>,
) -> Result<(), WorkError> {
    let mut idle = Duration::from_millis(20);
    let mut source: Option<Arc<dyn EvidenceSource>> = None;
    let mut serial = 0u64;
    while !w.cancel.load(Ordering::Relaxed) {
        serial += 1;
        let token = format!(
            "{}:{}:{serial}:{}",
            w.opts.name,
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let claimed = match queue.claim(&w.opts.name, &token, w.lease) {
            Ok(c) => c,
            Err(e) => {
                reconnect(queue, &w, &e)?;
                continue;
            }
        };
        let Some(unit) = claimed else {
            let left = match queue.outstanding() {
                Ok(left) => left,
                Err(e) => {
                    reconnect(queue, &w, &e)?;
                    continue;
                }
            };
            if left.finished() {
                outcome.finished = true;
                return Ok(());
            }
            // Woken at once when a unit is done or given back anywhere
            // (LISTEN/NOTIFY); the poll stays for leases that run out.
            match queue.wait(idle) {
                Ok(true) => idle = Duration::from_millis(20),
                Ok(false) => idle = (idle * 2).min(IDLE_MAX),
                Err(e) => reconnect(queue, &w, &e)?,
            }
            continue;
        };
        idle = Duration::from_millis(20);
        let scope = UnitScope::from_json(&unit.scope).map_err(WorkError::Other)?;
        let Some(stage) = w.stages.iter().find(|s| s.name() == unit.stage) else {
            let why = format!(
                "worker {}: no stage `{}` in the plan",
                w.opts.name, unit.stage
            );
            queue.release(unit.id, &token, &why)?;
            return Err(WorkError::Mismatch(why));
        };
        // The evidence on this worker's mount, opened at its first unit.
        let evidence = match &source {
            Some(s) => Arc::clone(s),
            None => match open_evidence(&w) {
                Ok(s) => {
                    source = Some(Arc::clone(&s));
                    s
                }
                Err(why) => {
                    // Left for workers that can read it.
                    queue.release(unit.id, &token, &why)?;
                    outcome.units_failed += 1;
                    return Err(WorkError::Other(why));
                }
            },
        };
        {
            let mut held = w
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *held = Some((unit.id, token.clone()));
            w.unit_cancel.store(false, Ordering::Relaxed);
        }
        let done = run_unit(&w, &evidence, stage.as_ref(), &unit, scope, &token);
        *w.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        match done {
            Ok(()) => {
                outcome.units_done += 1;
                if unit.attempts > 1 {
                    outcome.units_redone += 1;
                }
            }
            Err(UnitEnd::LeaseLost) => outcome.leases_lost += 1,
            Err(UnitEnd::Interrupted) => {
                let _ = queue.release(
                    unit.id,
                    &token,
                    &format!("worker {} was interrupted", w.opts.name),
                );
                return Ok(());
            }
            Err(UnitEnd::Failed(why)) => {
                outcome.units_failed += 1;
                let why = format!("worker {}: {why}", w.opts.name);
                if let Err(e) = queue.release(unit.id, &token, &why) {
                    return Err(WorkError::Other(format!(
                        "{why}; giving the unit back failed too: {e}"
                    )));
                }
                // The case database itself is gone: nothing more can be
                // committed from here.
                if w.db.server_problem().is_some() || why.contains("connection") {
                    return Err(WorkError::Other(why));
                }
            }
        }
    }
    Ok(())
}

/// The queue's connection failed with `e`: connect again, retrying with
/// backoff, or give up with both errors.
fn reconnect(queue: &mut Queue, w: &WorkSetting<'_>, e: &DbError) -> Result<(), WorkError> {
    *queue = reach(&w.opts.url, w.opts.retry_for, w.cancel).map_err(|again| {
        WorkError::Other(format!("lost the case database's server ({e}); {again}"))
    })?;
    Ok(())
}

fn open_evidence(w: &WorkSetting<'_>) -> Result<Arc<dyn EvidenceSource>, String> {
    let opened = source::open_evidence(
        w.evidence_path,
        w.channels[0],
        source::ReadOptions::for_threads(w.spec.read_run, w.opts.threads),
    )
    .map_err(|e| {
        format!(
            "worker {}: the evidence cannot be opened here: {e}",
            w.opts.name
        )
    })?;
    if opened.size() != w.spec.media_size {
        return Err(format!(
            "worker {}: `{}` holds {} bytes of media, the planned evidence {}: not the same evidence",
            w.opts.name,
            w.evidence_path.display(),
            opened.size(),
            w.spec.media_size
        ));
    }
    Ok(Arc::from(opened))
}

/// Why a unit was not committed.
enum UnitEnd {
    LeaseLost,
    Interrupted,
    Failed(String),
}

/// Run one unit inside one transaction, and commit it with its figures.
fn run_unit(
    w: &WorkSetting<'_>,
    evidence: &Arc<dyn EvidenceSource>,
    stage: &dyn Stage,
    unit: &Claimed,
    scope: UnitScope,
    token: &str,
) -> Result<(), UnitEnd> {
    let failed = |e: &dyn std::fmt::Display| UnitEnd::Failed(run::with_server_problem(w.db, e));
    w.db.writer().begin_unit().map_err(|e| failed(&e))?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let before: Vec<ChannelSnapshot> = w.channels.iter().map(|c| c.snapshot()).collect();
    let work_before = w.db.writer().work();
    let cpu_before = CpuTimes::now();
    let clock = Instant::now();
    let recorded = RecordCounts::default();
    let ctx = StageContext {
        evidence,
        evidence_id: w.spec.evidence_id,
        run_id: w.spec.run_id,
        db: w.db,
        case: w.channels[2],
        temp: w.channels[3],
        threads: w.opts.threads.max(1),
        progress: &crate::stage::NoProgress,
        cancel: w.unit_cancel,
        stage: stage.name(),
        recorded: &recorded,
        scope: scope.stage_scope().unwrap_or_default(),
    };
    let outcome: Result<StageSummary, StageError> = match scope.stage_scope() {
        None => split(w, &ctx, stage, unit),
        Some(_) => stage.run(&ctx),
    };
    let flushed = w.db.writer().flush();
    let wall = clock.elapsed().as_secs_f64();
    let cpu = CpuTimes::now().since(&cpu_before);
    let summary = match (outcome, flushed) {
        (Ok(s), Ok(())) => s,
        (Err(StageError::Interrupted), _) => {
            let _ = w.db.writer().end_unit(None);
            return Err(if w.cancel.load(Ordering::Relaxed) {
                UnitEnd::Interrupted
            } else {
                UnitEnd::LeaseLost
            });
        }
        (Err(e), _) => {
            let _ = w.db.writer().end_unit(None);
            return Err(failed(&e));
        }
        (Ok(_), Err(e)) => {
            let _ = w.db.writer().end_unit(None);
            return Err(failed(&e));
        }
    };
    let channels: BTreeMap<ChannelKind, ChannelSnapshot> = w
        .channels
        .iter()
        .zip(&before)
        .map(|(c, b)| (c.kind(), c.snapshot().since(b)))
        .collect();
    let figures = UnitFigures {
        unit: unit.id,
        stage: unit.stage.clone(),
        scope,
        worker: w.opts.name.clone(),
        attempt: unit.attempts,
        started,
        wall_seconds: wall,
        cpu_user_seconds: cpu.user.as_secs_f64(),
        cpu_system_seconds: cpu.system.as_secs_f64(),
        summary,
        recorded: Recorded::of(&recorded),
        channels,
        // The unit's one commit, made with its done mark below.
        database_work: {
            let mut work = w.db.writer().work().since(&work_before);
            work.transactions += 1;
            work
        },
    };
    if let Some(hold) = w.opts.hold_before_commit {
        std::thread::sleep(hold);
    }
    let done = Write::UnitDone {
        unit: unit.id,
        token: token.to_string(),
        figures: serde_json::to_string(&figures).unwrap_or_default(),
    };
    match w.db.writer().end_unit(Some(done)) {
        Ok(_) => {
            if let Err(e) = stage.committed(&ctx) {
                eprintln!(
                    "caseload worker {}: unit {} committed; tidying after it failed: {e}",
                    w.opts.name, unit.id
                );
            }
            Ok(())
        }
        Err(DbError::LeaseLost { .. }) => Err(UnitEnd::LeaseLost),
        Err(e) if e.to_string().contains("lease on work unit") => Err(UnitEnd::LeaseLost),
        Err(e) => Err(failed(&e)),
    }
}

/// A split unit: cut the stage into batches of files (or let it cut
/// itself into parts of regions) and queue them.
fn split(
    w: &WorkSetting<'_>,
    ctx: &StageContext<'_>,
    stage: &dyn Stage,
    unit: &Claimed,
) -> Result<StageSummary, StageError> {
    let scopes: Vec<UnitScope> = match crate::stages::units_of(&unit.stage) {
        Units::Parts => stage
            .split(ctx, w.spec.batch_bytes)?
            .into_iter()
            .map(UnitScope::from)
            .collect(),
        Units::FileBatches | Units::Whole => {
            w.db.reader()?
                .file_hash_batches(w.spec.batch_files, w.spec.batch_bytes)?
                .into_iter()
                .map(|(first, last)| UnitScope::Files { first, last })
                .collect()
        }
    };
    let waits = !crate::stages::runs_beside(&unit.stage);
    let units: Vec<NewUnit> = scopes
        .iter()
        .map(|&scope| NewUnit {
            stage: unit.stage.clone(),
            seq: unit.seq,
            phase: phase_of(scope),
            waits,
            scope: scope.to_json(),
        })
        .collect();
    let n = units.len() as u64;
    w.db.writer().exec(Write::AddUnits(units))?;
    // Its only result is the batches: no item of the stage is done here.
    let mut summary = StageSummary::default();
    summary.details.insert("batches".into(), n.into());
    Ok(summary)
}
