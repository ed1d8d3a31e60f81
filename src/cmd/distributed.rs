//! `caseload plan`, `worker`, `status`, `report` and `cluster`: one case
//! processed by several workers through its PostgreSQL case database
//! (docs/distributed.md).

use super::db_args::EngineArg;
use super::job_args::{KffArgs, LayoutArgs};
use super::util;
use anyhow::Context;
use caseload_engine::casedb::queue::{Queue, UnitRow, WorkerRow};
use caseload_engine::casedb::{CaseDb, DbEngine};
use caseload_engine::channel::{Channel, ChannelKind, ChannelSnapshot};
use caseload_engine::report::{ChannelInfo, RunReport};
use caseload_engine::run::RunSpec;
use caseload_engine::work::{self, AggregateInput, PlanKnobs, PlanSpec, UnitScope, WorkerOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What a case is: the flags `plan` and `cluster` share with `run`.
#[derive(Debug, clap::Args)]
pub struct CaseArgs {
    /// Evidence image (raw, split raw or the first E01 segment); every
    /// worker must reach it (a shared mount; a worker may name its own
    /// path with `worker --evidence`).
    #[arg(long)]
    pub evidence: PathBuf,
    /// Layout and channel directories of the planner (its case directory
    /// is the case's).
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Largest evidence read for small requests.
    #[arg(long, default_value = "2MiB", value_parser = util::parse_size)]
    pub read_run: u64,
    /// Replace a case already in the case directory or on the server.
    #[arg(long)]
    pub force: bool,
    /// Seconds a worker may go without renewing its claim before the unit
    /// is given to another worker.
    #[arg(long, default_value_t = work::plan::DEFAULT_LEASE_SECONDS)]
    pub lease_seconds: f64,
    /// Files per file-hash unit, at most.
    #[arg(long, default_value_t = work::plan::DEFAULT_BATCH_FILES)]
    pub batch_files: u64,
    /// Bytes per unit at most: content bytes of a file-hash, index or kff
    /// batch, region bytes of a carve part.
    #[arg(long, default_value = "256MiB", value_parser = util::parse_size)]
    pub batch_bytes: u64,
    /// What the case runs, its database and hash library, the check
    /// before the first run.
    #[command(flatten)]
    pub job: super::job_args::JobArgs,
}

impl CaseArgs {
    /// The run this case is, on PostgreSQL.
    /// `extra`: the command's own problems (cluster's --netns), listed
    /// with the check's.
    fn spec(
        &mut self,
        threads: usize,
        extra: caseload_engine::preflight::Problems,
    ) -> anyhow::Result<(RunSpec, PlanKnobs)> {
        let layout = self.layout.layout()?;
        let (stages, resolved) = super::run::case_stages(
            &layout,
            &self.evidence,
            &mut self.job,
            &|job, resolved, stages| {
                let mut db = job.db.options_with(resolved.profile)?;
                db.engine = DbEngine::Postgres;
                super::job_args::preflight(
                    &super::job_args::Planned {
                        layouts: std::slice::from_ref(&layout),
                        labs: &[],
                        evidence: std::slice::from_ref(&self.evidence),
                        stages,
                        job,
                        db: &db,
                        copies: 1,
                    },
                    extra.clone(),
                )
            },
        )?;
        anyhow::ensure!(
            !matches!(self.job.db.db_engine, Some(EngineArg::Sqlite)),
            "a case shared by workers lives on PostgreSQL: leave --db-engine out or say postgres"
        );
        let mut db = self.job.db.options_with(resolved.profile)?;
        db.engine = DbEngine::Postgres;
        anyhow::ensure!(
            (caseload_engine::source::MIN_RUN_BYTES..=caseload_engine::source::MAX_RUN_BYTES)
                .contains(&self.read_run),
            "--read-run must be between 512 bytes and 64 MiB"
        );
        Ok((
            RunSpec {
                evidence: self.evidence.clone(),
                layout,
                stages,
                workload: resolved.workload,
                threads,
                cache: caseload_engine::cache::CacheMode::Warm,
                db,
                force: self.force,
                instance: None,
                read_run: self.read_run,
                trace: false,
                resume: false,
                faults: Vec::new(),
                workstation: None,
                helpers: Vec::new(),
            },
            PlanKnobs {
                lease_seconds: self.lease_seconds,
                batch_files: self.batch_files,
                batch_bytes: self.batch_bytes,
            },
        ))
    }
}

/// Arguments of `caseload plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The case.
    #[command(flatten)]
    pub case: CaseArgs,
}

/// `caseload plan`: the case and its units on the server --db-url names.
pub fn plan(mut args: PlanArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.case.job.db.db_url.is_some(),
        "plan needs --db-url: workers on other machines reach the case there (for one machine, `caseload cluster` starts a private server)"
    );
    let (spec, knobs) = args
        .case
        .spec(util::default_threads(), Default::default())?;
    let planned = work::plan_case(&spec, knobs).context("planning the case")?;
    let units = planned.units;
    let stages: Vec<String> = planned.spec.stages.iter().map(|(n, _)| n.clone()).collect();
    planned.close()?;
    println!(
        "planned: {units} units over stages {}; start workers with `caseload worker --db-url URL --layout LAYOUT`",
        stages.join(",")
    );
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `caseload worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The case database's server.
    #[arg(long, value_name = "URL")]
    pub db_url: String,
    /// This worker's layout: its temp and database directories, and the
    /// case directory it shares with the other workers.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// This worker's name (default: host name and process id).
    #[arg(long)]
    pub id: Option<String>,
    /// Threads a unit may use (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The evidence as this machine mounts it (default: the planner's
    /// path).
    #[arg(long)]
    pub evidence: Option<PathBuf>,
    /// The workload this worker is meant to run: refused when it is not
    /// the plan's (default: the plan's).
    #[arg(long, conflicts_with = "stages")]
    pub workload: Option<String>,
    /// The stages this worker is meant to run (checked like --workload).
    #[arg(long, value_delimiter = ',')]
    pub stages: Vec<String>,
    /// Keep retrying a server that cannot be reached for this long before
    /// giving up.
    #[arg(long, default_value_t = 60.0)]
    pub retry_seconds: f64,
    /// Internal (tests): hold each finished unit this many milliseconds
    /// before committing it.
    #[arg(long, hide = true)]
    pub hold_before_commit_ms: Option<u64>,
    /// Print the worker's outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `caseload worker`.
pub fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let layout = args.layout.layout()?;
    let stages = match (&args.workload, args.stages.is_empty()) {
        (None, true) => None,
        _ => {
            let resolved = super::job_args::resolve_stages(
                args.workload.as_deref(),
                &args.stages,
                &KffArgs {
                    hashsets: Vec::new(),
                    kff_library: None,
                },
                &[],
            )?;
            Some(resolved.stages)
        }
    };
    let host = Some(caseload_engine::system::hostname())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".into());
    let opts = WorkerOptions {
        url: args.db_url.clone(),
        layout,
        name: args
            .id
            .clone()
            .unwrap_or_else(|| format!("{host}-{}", std::process::id())),
        threads: args.threads.unwrap_or_else(util::default_threads).max(1),
        evidence: args.evidence.clone(),
        stages,
        retry_for: Duration::from_secs_f64(args.retry_seconds.max(0.0)),
        hold_before_commit: args.hold_before_commit_ms.map(Duration::from_millis),
    };
    let cancel = util::interrupt_flag();
    let outcome =
        work::run_worker(&opts, &cancel).with_context(|| format!("worker {}", opts.name))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        println!(
            "worker {}: {} units done ({} redone after another worker), {} failed, {} leases lost; {} coordination statements, {:.3} s",
            outcome.name,
            outcome.units_done,
            outcome.units_redone,
            outcome.units_failed,
            outcome.leases_lost,
            outcome.coordination.statements,
            outcome.coordination.seconds
        );
    }
    Ok(if outcome.finished {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Arguments of `caseload status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The case database's server.
    #[arg(long, value_name = "URL")]
    pub db_url: String,
    /// Print units and workers as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `caseload status`: progress per stage and worker.
pub fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let mut queue = Queue::connect(&args.db_url)?;
    anyhow::ensure!(queue.plan()?.is_some(), "the server holds no planned case");
    let units = queue.units()?;
    let workers = queue.workers()?;
    if args.json {
        let units: Vec<serde_json::Value> = units
            .iter()
            .map(|u| {
                serde_json::json!({
                    "id": u.id, "stage": u.stage, "scope": u.scope, "state": u.state,
                    "worker": u.worker, "attempts": u.attempts, "failures": u.failures,
                    "last_error": u.last_error,
                })
            })
            .collect();
        let workers: Vec<serde_json::Value> = workers
            .iter()
            .map(|w| {
                serde_json::json!({
                    "name": w.name, "host": w.host, "pid": w.pid, "state": w.state,
                    "message": w.message, "units_done": w.units_done,
                    "silent_seconds": w.silent_seconds,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"units": units, "workers": workers}))?
        );
    } else {
        print!("{}", status_table(&units, &workers));
    }
    Ok(ExitCode::SUCCESS)
}

/// Units per stage by state, then the workers.
fn status_table(units: &[UnitRow], workers: &[WorkerRow]) -> String {
    let mut out = format!(
        "{:<12} {:>6} {:>6} {:>8} {:>6} {:>7}\n",
        "stage", "units", "done", "running", "ready", "failed"
    );
    let mut order: Vec<(i32, &str)> = units.iter().map(|u| (u.seq, u.stage.as_str())).collect();
    order.dedup();
    for (seq, stage) in order {
        let of: Vec<&UnitRow> = units.iter().filter(|u| u.seq == seq).collect();
        let n = |s: &str| of.iter().filter(|u| u.state == s).count();
        out.push_str(&format!(
            "{stage:<12} {:>6} {:>6} {:>8} {:>6} {:>7}\n",
            of.len(),
            n("done"),
            n("running"),
            n("ready"),
            n("failed")
        ));
    }
    for u in units.iter().filter(|u| u.state == "failed") {
        let scope = UnitScope::from_json(&u.scope).map_or_else(|_| u.scope.clone(), |s| s.label());
        out.push_str(&format!(
            "failed: {} {} after {} attempts: {}\n",
            u.stage,
            scope,
            u.attempts,
            u.last_error.as_deref().unwrap_or("")
        ));
    }
    out.push_str(&format!(
        "\n{:<24} {:<10} {:>6} {:>10}\n",
        "worker", "state", "units", "silent s"
    ));
    for w in workers {
        out.push_str(&format!(
            "{:<24} {:<10} {:>6} {:>10.1}{}\n",
            w.name,
            w.state,
            w.units_done,
            w.silent_seconds,
            w.message
                .as_deref()
                .map(|m| format!("  {m}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// Arguments of `caseload report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The case database's server.
    #[arg(long, value_name = "URL")]
    pub db_url: String,
    /// Where run.json goes: the case directory the workers shared (so that
    /// `export` and `search` read it like a single run's).
    #[arg(long)]
    pub out: PathBuf,
    /// Print run.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `caseload report`: the case's figures as run.json.
pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating `{}`", args.out.display()))?;
    let case = Channel::new(ChannelKind::Case, &args.out, Vec::new());
    let mut queue = Queue::connect(&args.db_url)?;
    let plan = queue
        .plan()?
        .ok_or_else(|| anyhow::anyhow!("the server holds no planned case"))?;
    let spec: PlanSpec = serde_json::from_str(&plan.spec).context("reading the plan")?;
    let mut options = spec.db.clone();
    options.postgres.url = Some(args.db_url.clone());
    let db = CaseDb::join(&case, &options)?;
    let database = db.info();
    db.close()?;
    let mut channels = BTreeMap::new();
    channels.insert(ChannelKind::Case, ChannelInfo::at(&args.out));
    let report = aggregate(&mut queue, &spec, database, &[], channels)?;
    work::write_report(&case, &report)?;
    write_page(&case, &report)?;
    util::finish(&report, args.json, false)
}

/// `report.html` beside run.json.
fn write_page(case: &Channel, report: &RunReport) -> anyhow::Result<()> {
    let html = caseload_workloads::report::render_case_html(report)
        .map_err(|e| anyhow::anyhow!("drawing report.html: {e}"))?;
    let mut file = case.create_instrument(REPORT_HTML)?;
    std::io::Write::write_all(&mut file, html.as_bytes())
        .with_context(|| format!("writing `{}`", case.dir().join(REPORT_HTML).display()))?;
    Ok(())
}

/// The page `report` and `cluster` write beside run.json.
const REPORT_HTML: &str = "report.html";

/// The case's run report from the queue.
fn aggregate(
    queue: &mut Queue,
    spec: &PlanSpec,
    database: caseload_engine::casedb::DatabaseInfo,
    server_io: &[(f64, ChannelSnapshot)],
    channels: BTreeMap<ChannelKind, ChannelInfo>,
) -> anyhow::Result<RunReport> {
    let units = queue.units()?;
    let workers = queue.workers()?;
    Ok(work::aggregate_report(&AggregateInput {
        spec,
        units: &units,
        workers: &workers,
        database,
        server_io,
        channels,
        finished_at: caseload_engine::casedb::now_utc(),
        threads: 0,
    }))
}

/// Arguments of `caseload cluster`.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// The case.
    #[command(flatten)]
    pub case: CaseArgs,
    /// Workers to start on this machine.
    #[arg(long)]
    pub workers: usize,
    /// Threads each worker's units may use (default: the cores shared out
    /// among the workers, at least 1).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print run.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Run each worker in a network namespace of its own, reaching the
    /// private server over a veth pair of its own (root, iproute2): the
    /// database traffic crosses a link per worker, as a lab's does.
    #[arg(long)]
    pub netns: bool,
    /// Shape each worker's link to this many MB/s both ways (`tc tbf`;
    /// with --netns; 1 Gbit/s Ethernet: about 117).
    #[arg(long, value_name = "MB/s", requires = "netns")]
    pub link_mb_s: Option<f64>,
    /// Internal (tests): each worker holds each finished unit this many
    /// milliseconds before committing it.
    #[arg(long, hide = true)]
    pub worker_hold_ms: Option<u64>,
}

/// `caseload cluster`: plan the case on a private server (or --db-url),
/// start N workers here, wait for them, and write run.json.
pub fn cluster(mut args: ClusterArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        (1..=256).contains(&args.workers),
        "--workers must be 1 to 256"
    );
    let threads = args
        .threads
        .unwrap_or_else(|| (util::default_threads() / args.workers).max(1))
        .max(1);
    anyhow::ensure!(
        !(args.netns && args.case.job.db.db_url.is_some()),
        "--netns links the workers to the private server it starts; without --db-url"
    );
    // Everything is checked before anything starts, --netns's needs with
    // the rest.
    let mut extra = caseload_engine::preflight::Problems::default();
    if args.netns {
        for p in super::netns::Links::problems(args.workers, args.link_mb_s) {
            extra.push(p);
        }
    }
    let (mut spec, knobs) = args.case.spec(threads, extra)?;
    // The workers' links before the plan: the server listens on their
    // addresses.
    let links = if args.netns {
        Some(super::netns::Links::create(args.workers, args.link_mb_s)?)
    } else {
        None
    };
    if let Some(links) = &links {
        // Not a user's --pg-setting (refused: caseload sets it), but the
        // server's own addresses on the workers' links, for this start
        // only; the socket stays.
        spec.db
            .postgres
            .settings
            .insert("listen_addresses".into(), links.listen_addresses());
    }
    let planned = work::plan_case(&spec, knobs).context("planning the case")?;
    let urls: Vec<(Option<String>, String)> = match &links {
        Some(links) => {
            let server = planned
                .db
                .server()
                .context("--netns needs the private server")?;
            server.trust_network(&links.network)?;
            links
                .links
                .iter()
                .map(|l| {
                    (
                        Some(l.namespace.clone()),
                        server.tcp_connection_string(&l.host_address),
                    )
                })
                .collect()
        }
        None => vec![(None, planned.url.clone()); args.workers],
    };
    eprintln!(
        "planned {} units (split stages add their batches); {} workers{}; watch with: caseload status --db-url \"{}\"",
        planned.units,
        args.workers,
        if links.is_some() {
            " in network namespaces of their own"
        } else {
            ""
        },
        planned.url
    );
    let exe = std::env::current_exe().context("locating the caseload executable")?;
    let cancel = util::interrupt_flag();
    // The server's I/O, sampled where it runs, for the report.
    let stop = AtomicBool::new(false);
    let samples = std::sync::Mutex::new(Vec::new());
    let statuses = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                planned.db.sample_io();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                samples
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((now, planned.database.snapshot()));
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        let r = run_workers(
            &exe,
            &planned,
            &urls,
            (threads, args.worker_hold_ms),
            &cancel,
        );
        stop.store(true, Ordering::Relaxed);
        r
    })?;
    planned.db.sample_io();
    let mut series = samples
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    series.push((
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        planned.database.snapshot(),
    ));
    let mut queue = Queue::connect(&planned.url)?;
    let mut channels = BTreeMap::new();
    for c in [&planned.database, &planned.case, &planned.temp_root] {
        channels.insert(c.kind(), ChannelInfo::at(c.dir()));
    }
    let mut report = aggregate(
        &mut queue,
        &planned.spec,
        planned.db.info(),
        &series,
        channels,
    )?;
    report.threads = threads;
    drop(queue);
    if let (Some(links), Some(d)) = (&links, report.distributed.as_mut()) {
        for (k, carried) in links.carried(args.link_mb_s).into_iter().enumerate() {
            let name = format!("w{}", k + 1);
            if let Some(w) = d.workers.iter_mut().find(|w| w.name == name) {
                w.link = Some(carried);
            }
        }
    }
    let recorded = work::record_finish(&planned.db, &report, planned.spec.run_id);
    let case = planned.case.clone();
    let database_channel = planned.database.clone();
    let closed = planned.close();
    report.database.bytes_at_end =
        caseload_engine::casedb::stored_bytes(&database_channel, &report.database);
    let mut notes: Vec<String> = report.database.note.take().into_iter().collect();
    if let Err(e) = recorded {
        notes.push(format!("recording the stage runs failed: {e}"));
    }
    if let Err(e) = closed {
        notes.push(format!("closing the case database failed: {e}"));
    }
    report.database.note = (!notes.is_empty()).then(|| notes.join("; "));
    work::write_report(&case, &report)?;
    write_page(&case, &report)?;
    let failures: Vec<String> = statuses
        .iter()
        .enumerate()
        .filter(|(_, ok)| !**ok)
        .map(|(i, _)| format!("w{}", i + 1))
        .collect();
    let code = util::finish(&report, args.json, false)?;
    if !failures.is_empty() {
        eprintln!(
            "workers that did not finish cleanly: {}",
            failures.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(code)
}

/// Start the workers, each the leader of its own process group, and wait
/// for them, passing Ctrl-C on (a worker gives its unit back and stops);
/// whether each ended cleanly.
fn run_workers(
    exe: &std::path::Path,
    planned: &work::Planned,
    urls: &[(Option<String>, String)],
    (threads, hold_ms): (usize, Option<u64>),
    cancel: &AtomicBool,
) -> anyhow::Result<Vec<bool>> {
    let mut children = Vec::new();
    for (k, (namespace, url)) in (1..).zip(urls) {
        // In its namespace, `ip netns exec` becomes the worker (same pid,
        // same process group).
        let mut cmd = match namespace {
            Some(ns) => {
                let mut c = std::process::Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c
            }
            None => std::process::Command::new(exe),
        };
        if let Some(ms) = hold_ms {
            cmd.arg("worker")
                .arg("--hold-before-commit-ms")
                .arg(ms.to_string());
        } else {
            cmd.arg("worker");
        }
        caseload_engine::os::own_process_group(&mut cmd);
        let child = cmd
            .arg("--db-url")
            .arg(url)
            .arg("--database")
            .arg(planned.database.dir())
            .arg("--case")
            .arg(planned.case.dir())
            .arg("--temp")
            .arg(planned.temp_root.dir())
            .arg("--id")
            .arg(format!("w{k}"))
            .arg("--threads")
            .arg(threads.to_string())
            .arg("--evidence")
            .arg(&planned.spec.evidence)
            .stdout(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("starting worker w{k}"))?;
        children.push(child);
    }
    Ok(
        caseload_workloads::compare::wait_children(&mut children, cancel)
            .into_iter()
            .map(|o| o.status.is_some_and(|s| s.success()) && !o.interrupted)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_table_counts_units_by_state_and_names_failures() {
        let unit = |id, stage: &str, seq, state: &str| UnitRow {
            id,
            stage: stage.into(),
            seq,
            phase: 1,
            scope: r#"{"kind":"whole"}"#.into(),
            state: state.into(),
            worker: None,
            attempts: 1,
            failures: u32::from(state == "failed") as i32,
            last_error: (state == "failed").then(|| "evidence missing".to_string()),
            figures: None,
        };
        let units = vec![
            unit(1, "filesystem", 0, "done"),
            unit(2, "file-hash", 1, "done"),
            unit(3, "file-hash", 1, "running"),
            unit(4, "file-hash", 1, "failed"),
        ];
        let t = status_table(&units, &[]);
        assert!(
            t.contains("file-hash         3      1        1      0       1"),
            "{t}"
        );
        assert!(
            t.contains("failed: file-hash whole after 1 attempts: evidence missing"),
            "{t}"
        );
    }
}
