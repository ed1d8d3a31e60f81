//! The comparison runner: the same workload over a matrix of evidence files
//! and storage layouts, repeated, each run a cold-cache `caseload run` in a
//! process of its own, with the reports rewritten after every run.
//!
//! Why child processes: each run's CPU times and peak memory are then its
//! own (nothing left over from an earlier run in the same process), and a
//! run that crashes or fills a disk takes only itself down; the comparison
//! records it and goes on.
//!
//! Why interleaved (for each repeat, every configuration once: ABAB, not
//! AABB): a machine's background load and thermal state drift over time;
//! interleaving spreads that drift over all configurations instead of
//! charging it to whichever ran last.

use crate::job::{JobSpec, JobStages};
use crate::report::{
    self, ChannelPlace, CompareReport, Configuration, EvidenceEntry, LayoutEntry, RunRecord,
    WorkloadInfo, files,
};
use caseload_engine::casedb::DbOptions;
use caseload_engine::channel::ChannelKind;
use caseload_engine::layout::{Layout, LayoutError};
use caseload_engine::probe::ChannelProbe;
use caseload_engine::report::{INSTANCES_SCHEMA, InstancesReport, RUN_SCHEMA, RunReport};
use caseload_engine::system::{self, SystemContext};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a run may take to stop after Ctrl-C is passed on before it is
/// killed: a run stops between items, so this is generous.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// How often a running child is checked.
const POLL: Duration = Duration::from_millis(50);

/// Errors that stop a comparison from starting or from writing its reports.
/// A run that fails is not an error: it is recorded and the matrix goes on.
/// Messages name what was being done; the cause is the error's `source`
/// (an error chain printed with `{:#}` shows both, once).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The arguments do not describe a comparison.
    #[error("{0}")]
    Invalid(String),
    /// An evidence file is missing or unreadable.
    #[error("evidence `{}`", path.display())]
    Evidence {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A layout's channel directories are unusable.
    #[error("layout `{layout}`")]
    Layout {
        /// Layout label.
        layout: String,
        /// The cause.
        #[source]
        source: LayoutError,
    },
    /// The output directory already holds a comparison.
    #[error("`{}` already holds a comparison (compare.json); choose another --out", .0.display())]
    OutputExists(PathBuf),
    /// A file or directory could not be created or written.
    #[error("{what} `{}`", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A configuration's stages cannot run on it (no hash library...).
    #[error("layout `{layout}`")]
    Stage {
        /// Layout label.
        layout: String,
        /// The cause.
        #[source]
        source: caseload_engine::stage::StageError,
    },
    /// An evidence file does not open as evidence.
    #[error("evidence `{}`", path.display())]
    EvidenceFormat {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: caseload_engine::source::SourceError,
    },
    /// The caseload executable could not be started.
    #[error("starting `{}`", exe.display())]
    Spawn {
        /// The executable.
        exe: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> CompareError + 'a {
    move |source| CompareError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Which configuration ratios are taken against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// 1-based configuration number, in evidence × layout order.
    Number(usize),
    /// A configuration label (`EVIDENCE@LAYOUT`), or an evidence or layout
    /// label that picks out exactly one configuration.
    Label(String),
}

impl std::str::FromStr for Baseline {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().parse::<usize>() {
            Ok(n) => Baseline::Number(n),
            Err(_) => Baseline::Label(s.trim().to_string()),
        })
    }
}

/// What each run runs.
#[derive(Debug, Clone, PartialEq)]
pub enum StageSelection {
    /// A workload: `arg` is passed to `caseload run --workload`.
    Workload {
        /// A workload file path or a built-in name.
        arg: String,
        /// Its name.
        name: String,
        /// Where it came from.
        origin: String,
        /// Its stages in order.
        stages: Vec<String>,
    },
    /// Stages by name (`caseload run --stages`).
    Stages(Vec<String>),
}

impl StageSelection {
    fn names(&self) -> &[String] {
        match self {
            StageSelection::Workload { stages, .. } | StageSelection::Stages(stages) => stages,
        }
    }
}

/// Probes a layout's channels (and, given a file, the evidence channel):
/// `caseload probe`'s `probe_layout`.
pub type Prober<'a> = &'a dyn Fn(&Layout, Option<&Path>) -> Vec<ChannelProbe>;

/// A comparison to run.
pub struct CompareSpec<'a> {
    /// The `caseload` executable each run is started from.
    pub exe: PathBuf,
    /// Evidence files (first file of each set).
    pub evidence: Vec<PathBuf>,
    /// Layouts.
    pub layouts: Vec<Layout>,
    /// Per layout, the lab whose modelled devices it is on (`caseload
    /// lab`): its runs run inside the lab (`run --lab`). Empty, or one
    /// entry per layout.
    pub labs: Vec<Option<String>>,
    /// The stages of every run.
    pub stages: StageSelection,
    /// `STAGE.KEY=VALUE` options passed to every run.
    pub stage_options: Vec<String>,
    /// Options passed to the runs of one layout only, by layout (the KFF
    /// library on that layout's database channel); empty, or one list per
    /// layout.
    pub layout_stage_options: Vec<Vec<String>>,
    /// The stages with their options (the selection's, with
    /// `stage_options` applied), to check before anything runs.
    pub stage_specs: Vec<(String, caseload_engine::stage::StageOptions)>,
    /// Runs per configuration.
    pub repeat: usize,
    /// Output directory.
    pub out: PathBuf,
    /// The baseline configuration.
    pub baseline: Baseline,
    /// Concurrent pipelines per run.
    pub instances: usize,
    /// Worker threads per pipeline (`None`: the run's default).
    pub threads: Option<usize>,
    /// Case database options of every run.
    pub db: DbOptions,
    /// The modelled workstation of every run.
    pub workstation: crate::job::WorkstationFlags,
    /// Keep each run's directories under the layout's channels.
    pub keep_runs: bool,
    /// Probe each layout's and evidence's devices before the runs.
    pub prober: Option<Prober<'a>>,
    /// The command line, for the record.
    pub command: Vec<String>,
}

/// Told what the comparison is doing (the command line prints it).
pub trait CompareObserver {
    /// A device probe starts.
    fn probing(&self, _what: &str) {}
    /// A run starts.
    fn run_started(&self, _sequence: usize, _total: usize, _label: &str, _repeat: usize) {}
    /// A run ended (in any way); the reports are already rewritten.
    fn run_finished(&self, _record: &RunRecord, _total: usize, _label: &str) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;
impl CompareObserver for Quiet {}

/// Make labels unique by suffixing `#N` (1-based position) to repeats.
fn unique_labels(labels: Vec<String>) -> Vec<String> {
    let counts = labels
        .iter()
        .fold(BTreeMap::<&str, usize>::new(), |mut m, l| {
            *m.entry(l.as_str()).or_default() += 1;
            m
        });
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if counts.get(l.as_str()).copied().unwrap_or(0) > 1 {
                format!("{l}#{}", i + 1)
            } else {
                l.clone()
            }
        })
        .collect()
}

/// A label made safe as a file-name component.
fn file_stem(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@' | '+' | '#') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Never `.`/`..` or a hidden name.
    format!("c-{s}")
}

fn resolve_baseline(
    baseline: &Baseline,
    configs: &[Configuration],
    evidence: &[String],
    layouts: &[String],
) -> Result<usize, CompareError> {
    let all = || {
        configs
            .iter()
            .map(|c| format!("{} {}", c.index + 1, c.label))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match baseline {
        Baseline::Number(n) if (1..=configs.len()).contains(n) => Ok(n - 1),
        Baseline::Number(n) => Err(CompareError::Invalid(format!(
            "--baseline {n}: there are {} configurations ({})",
            configs.len(),
            all()
        ))),
        Baseline::Label(l) => {
            if let Some(c) = configs.iter().find(|c| &c.label == l) {
                return Ok(c.index);
            }
            let matching: Vec<&Configuration> = configs
                .iter()
                .filter(|c| &evidence[c.evidence] == l || &layouts[c.layout] == l)
                .collect();
            match matching.as_slice() {
                [one] => Ok(one.index),
                [] => Err(CompareError::Invalid(format!(
                    "--baseline `{l}` names no configuration ({})",
                    all()
                ))),
                _ => Err(CompareError::Invalid(format!(
                    "--baseline `{l}` matches {} configurations; give one of: {}",
                    matching.len(),
                    all()
                ))),
            }
        }
    }
}

/// The per-run directories of one configuration's run, one per distinct
/// channel directory of its layout, created under the comparison's own
/// directory there.
struct RunDirs {
    database: PathBuf,
    case: PathBuf,
    temp: PathBuf,
    all: Vec<PathBuf>,
}

/// The comparison's directories under the layouts' channel directories;
/// removed when dropped (so also on an early error) unless runs are kept.
struct Scratch {
    roots: Vec<PathBuf>,
    keep: bool,
}

impl Scratch {
    fn run_dirs(
        &mut self,
        layout: &Layout,
        stamp: &str,
        name: &str,
    ) -> Result<RunDirs, CompareError> {
        let mut made: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
        let mut dir_for = |kind: ChannelKind| -> Result<PathBuf, CompareError> {
            let base = layout
                .dir(kind)
                .map_err(|source| CompareError::Layout {
                    layout: layout.name.clone(),
                    source,
                })?
                .to_path_buf();
            if let Some(d) = made.get(&base) {
                return Ok(d.clone());
            }
            let root = base.join(stamp);
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).map_err(io_err("creating run directory", &dir))?;
            if !self.roots.contains(&root) {
                self.roots.push(root);
            }
            made.insert(base, dir.clone());
            Ok(dir)
        };
        let database = dir_for(ChannelKind::Database)?;
        let case = dir_for(ChannelKind::Case)?;
        let temp = dir_for(ChannelKind::Temp)?;
        Ok(RunDirs {
            database,
            case,
            temp,
            all: made.into_values().collect(),
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for root in &self.roots {
            // Only empty roots go: a run directory that could not be removed
            // is reported with its run and left for the user to inspect.
            let _ = std::fs::remove_dir(root);
        }
    }
}

/// How a child run ended.
#[derive(Debug)]
pub struct ChildOutcome {
    /// Its exit status (none when waiting for it failed).
    pub status: Option<ExitStatus>,
    /// Whether Ctrl-C was passed on to it.
    pub interrupted: bool,
    /// Why waiting for it failed.
    pub wait_error: Option<String>,
}

/// Wait for `child` (started as the leader of its own process group),
/// passing Ctrl-C on to its process group and killing it if it does not
/// stop within `STOP_GRACE` (30 s).
pub fn wait_child(child: &mut std::process::Child, cancel: &AtomicBool) -> ChildOutcome {
    wait_children(std::slice::from_mut(child), cancel)
        .pop()
        .unwrap_or(ChildOutcome {
            status: None,
            interrupted: false,
            wait_error: Some("no child".into()),
        })
}

/// [`wait_child`] for several children at once: on Ctrl-C every one still
/// running is told at the same time.
pub fn wait_children(
    children: &mut [std::process::Child],
    cancel: &AtomicBool,
) -> Vec<ChildOutcome> {
    let mut out: Vec<Option<ChildOutcome>> = children.iter().map(|_| None).collect();
    let mut signalled: Option<Instant> = None;
    let mut killed = false;
    loop {
        for (child, slot) in children.iter_mut().zip(out.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    *slot = Some(ChildOutcome {
                        status: Some(status),
                        interrupted: signalled.is_some(),
                        wait_error: None,
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    *slot = Some(ChildOutcome {
                        status: None,
                        interrupted: signalled.is_some(),
                        wait_error: Some(e.to_string()),
                    });
                }
            }
        }
        if out.iter().all(Option::is_some) {
            return out.into_iter().flatten().collect();
        }
        if cancel.load(Ordering::Relaxed) {
            // First an interrupt, then, past the grace period, a kill.
            let hard = match signalled {
                None => {
                    signalled = Some(Instant::now());
                    Some(false)
                }
                Some(at) if !killed && at.elapsed() > STOP_GRACE => {
                    killed = true;
                    Some(true)
                }
                Some(_) => None,
            };
            if let Some(hard) = hard {
                for (child, slot) in children.iter().zip(&out) {
                    if slot.is_none() {
                        // The child leads its own process group.
                        caseload_engine::os::stop_process_group(child.id(), hard);
                    }
                }
            }
        }
        std::thread::sleep(POLL);
    }
}

/// The last lines of a run's stderr, for the record of a failed run.
fn stderr_tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.chars().count() > 1000 {
        tail.chars().take(1000).collect::<String>() + "..."
    } else {
        tail
    }
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    match status {
        Some(s) => match (s.code(), caseload_engine::os::exit_signal(&s)) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended".into(),
        },
        None => "could not be waited for".into(),
    }
}

/// What a child printed: a run report, or an instances report.
enum Printed {
    Run(Box<RunReport>),
    Instances(Box<InstancesReport>),
}

fn parse_printed(bytes: &[u8]) -> Result<Printed, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(s) if s == RUN_SCHEMA => serde_json::from_value(value)
            .map(|r| Printed::Run(Box::new(r)))
            .map_err(|e| e.to_string()),
        Some(s) if s == INSTANCES_SCHEMA => serde_json::from_value(value)
            .map(|r| Printed::Instances(Box::new(r)))
            .map_err(|e| e.to_string()),
        other => Err(format!("unexpected report schema {other:?}")),
    }
}

/// Run the comparison. Returns the final report (also in `spec.out`); a
/// run that fails is recorded in it, not returned as an error. When
/// `cancel` is set (Ctrl-C), the running run is asked to stop, is recorded
/// as interrupted, and the comparison ends with what finished.
pub fn run_compare(
    spec: &CompareSpec<'_>,
    observer: &dyn CompareObserver,
    cancel: &AtomicBool,
) -> Result<CompareReport, CompareError> {
    if spec.evidence.is_empty() {
        return Err(CompareError::Invalid("give at least one --evidence".into()));
    }
    if spec.layouts.is_empty() {
        return Err(CompareError::Invalid("give at least one --layout".into()));
    }
    if spec.repeat == 0 {
        return Err(CompareError::Invalid("--repeat must be at least 1".into()));
    }
    if spec.instances == 0 {
        return Err(CompareError::Invalid(
            "--instances must be at least 1".into(),
        ));
    }
    if spec.stages.names().is_empty() {
        return Err(CompareError::Invalid("no stage to run".into()));
    }
    let mut evidence_files = Vec::new();
    for path in &spec.evidence {
        let meta = std::fs::metadata(path).map_err(|source| CompareError::Evidence {
            path: path.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(CompareError::Evidence {
                path: path.clone(),
                source: std::io::Error::other("not a file"),
            });
        }
        evidence_files.push(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
    }
    let evidence_labels = unique_labels(
        spec.evidence
            .iter()
            .map(|p| {
                p.file_name().map_or_else(
                    || p.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                )
            })
            .collect(),
    );
    let layout_labels = unique_labels(spec.layouts.iter().map(|l| l.name.clone()).collect());
    // Every layout is checked before anything runs: a typo in the last
    // layout must not surface an hour into the matrix.
    for (layout, label) in spec.layouts.iter().zip(&layout_labels) {
        layout
            .check_writable(&evidence_files)
            .map_err(|source| CompareError::Layout {
                layout: label.clone(),
                source,
            })?;
    }
    // And so is every stage's requirement on each layout, and every
    // evidence file opens as evidence.
    for (l, (layout, label)) in spec.layouts.iter().zip(&layout_labels).enumerate() {
        let stage_error = |source| CompareError::Stage {
            layout: label.clone(),
            source,
        };
        let mut specs = spec.stage_specs.clone();
        for o in spec.layout_stage_options.get(l).into_iter().flatten() {
            caseload_engine::stage::apply_option(&mut specs, o).map_err(stage_error)?;
        }
        caseload_engine::run::build_stages(&specs).map_err(stage_error)?;
        let db_dir = layout
            .dir(ChannelKind::Database)
            .map_err(|source| CompareError::Layout {
                layout: label.clone(),
                source,
            })?;
        caseload_engine::stages::preflight(&specs, db_dir).map_err(stage_error)?;
    }
    for path in &evidence_files {
        let dir = path.parent().unwrap_or(Path::new("."));
        let channel =
            caseload_engine::channel::Channel::new(ChannelKind::Evidence, dir, Vec::new());
        caseload_engine::source::open_evidence(
            path,
            &channel,
            caseload_engine::source::ReadOptions::default(),
        )
        .map_err(|source| CompareError::EvidenceFormat {
            path: path.clone(),
            source,
        })?;
    }
    let mut configurations = Vec::new();
    for (e, ev) in evidence_labels.iter().enumerate() {
        for (l, lay) in layout_labels.iter().enumerate() {
            configurations.push(Configuration {
                index: configurations.len(),
                label: format!("{ev}@{lay}"),
                evidence: e,
                layout: l,
            });
        }
    }
    let baseline = resolve_baseline(
        &spec.baseline,
        &configurations,
        &evidence_labels,
        &layout_labels,
    )?;

    if spec.out.join(files::COMPARE_JSON).exists() {
        return Err(CompareError::OutputExists(spec.out.clone()));
    }
    let runs_dir = spec.out.join(files::RUNS_DIR);
    std::fs::create_dir_all(&runs_dir).map_err(io_err("creating output directory", &runs_dir))?;

    let mut evidence: Vec<EvidenceEntry> = spec
        .evidence
        .iter()
        .zip(&evidence_labels)
        .map(|(path, label)| EvidenceEntry {
            label: label.clone(),
            path: path.clone(),
            placement: system::placement(path),
            probe: None,
        })
        .collect();
    let mut layouts: Vec<LayoutEntry> = spec
        .layouts
        .iter()
        .zip(&layout_labels)
        .map(|(layout, label)| LayoutEntry {
            label: label.clone(),
            source: layout.source.clone(),
            description: layout.description.clone(),
            channels: [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp]
                .into_iter()
                .filter_map(|k| {
                    layout.dir(k).ok().map(|d| {
                        (
                            k,
                            ChannelPlace {
                                dir: d.to_path_buf(),
                                placement: system::placement(d),
                            },
                        )
                    })
                })
                .collect(),
            probe: None,
        })
        .collect();
    if let Some(prober) = spec.prober {
        for (entry, path) in evidence.iter_mut().zip(&spec.evidence) {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            observer.probing(&format!("evidence {}", entry.label));
            entry.probe = prober(&Layout::default(), Some(path)).into_iter().next();
        }
        for (entry, layout) in layouts.iter_mut().zip(&spec.layouts) {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            observer.probing(&format!("layout {}", entry.label));
            entry.probe = Some(prober(layout, None));
        }
    }

    let started_at = caseload_engine::casedb::now_utc();
    let stamp = format!(
        "caseload-compare-{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id()
    );
    let stage_names = spec.stages.names().to_vec();
    let mut report = CompareReport {
        schema: report::COMPARE_SCHEMA.into(),
        schema_version: report::COMPARE_SCHEMA_VERSION,
        caseload_version: env!("CARGO_PKG_VERSION").into(),
        status: "running".into(),
        started_at,
        finished_at: None,
        command: spec.command.clone(),
        workload: match &spec.stages {
            StageSelection::Workload {
                name,
                origin,
                stages,
                ..
            } => WorkloadInfo {
                name: Some(name.clone()),
                origin: Some(origin.clone()),
                stages: stages.clone(),
                stage_options: spec.stage_options.clone(),
            },
            StageSelection::Stages(stages) => WorkloadInfo {
                name: None,
                origin: None,
                stages: stages.clone(),
                stage_options: spec.stage_options.clone(),
            },
        },
        repeat: spec.repeat,
        instances: spec.instances,
        threads: spec.threads,
        cache: "cold".into(),
        database_options: spec.db.clone(),
        baseline,
        system: SystemContext::current(),
        evidence,
        layouts,
        configurations: configurations.clone(),
        runs: Vec::new(),
        summary: Vec::new(),
    };
    report.summary = report::summarize(&configurations, &[], &stage_names, baseline);
    report::write_reports(&spec.out, &report).map_err(io_err("writing reports", &spec.out))?;

    let mut scratch = Scratch {
        roots: Vec::new(),
        keep: spec.keep_runs,
    };
    let total = spec.repeat * configurations.len();
    let mut interrupted = false;
    'matrix: for repeat in 1..=spec.repeat {
        for config in &configurations {
            if cancel.load(Ordering::Relaxed) {
                interrupted = true;
                break 'matrix;
            }
            let sequence = report.runs.len() + 1;
            observer.run_started(sequence, total, &config.label, repeat);
            let record = run_one(spec, &mut scratch, &stamp, config, repeat, sequence, cancel)?;
            let was_interrupted = record.status == "interrupted";
            report.runs.push(record);
            report.summary =
                report::summarize(&configurations, &report.runs, &stage_names, baseline);
            report::write_reports(&spec.out, &report)
                .map_err(io_err("writing reports", &spec.out))?;
            if let Some(r) = report.runs.last() {
                observer.run_finished(r, total, &config.label);
            }
            if was_interrupted || cancel.load(Ordering::Relaxed) {
                interrupted = true;
                break 'matrix;
            }
        }
    }
    drop(scratch);
    report.status = if interrupted {
        "interrupted"
    } else if report.runs.iter().all(|r| r.status == "completed") {
        "completed"
    } else {
        "completed-with-failures"
    }
    .into();
    report.finished_at = Some(caseload_engine::casedb::now_utc());
    report::write_reports(&spec.out, &report).map_err(io_err("writing reports", &spec.out))?;
    Ok(report)
}

/// One run of one configuration, start to finish, recorded whatever
/// happened to it.
fn run_one(
    spec: &CompareSpec<'_>,
    scratch: &mut Scratch,
    stamp: &str,
    config: &Configuration,
    repeat: usize,
    sequence: usize,
    cancel: &AtomicBool,
) -> Result<RunRecord, CompareError> {
    let layout = &spec.layouts[config.layout];
    let name = format!("{}-r{repeat}", file_stem(&config.label));
    let dirs = scratch.run_dirs(layout, stamp, &name)?;
    let report_rel = format!("{}/{name}.json", files::RUNS_DIR);
    let stderr_rel = format!("{}/{name}.stderr.txt", files::RUNS_DIR);
    let stdout_path = spec.out.join(format!("{report_rel}.partial"));
    let stderr_path = spec.out.join(&stderr_rel);
    let stdout_file =
        std::fs::File::create(&stdout_path).map_err(io_err("creating run output", &stdout_path))?;
    let stderr_file =
        std::fs::File::create(&stderr_path).map_err(io_err("creating run output", &stderr_path))?;

    let mut job = JobSpec::new(spec.evidence[config.evidence].clone());
    job.layout = layout
        .source
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    job.database = Some(dirs.database.clone());
    job.case = Some(dirs.case.clone());
    job.temp = Some(dirs.temp.clone());
    job.stages = match &spec.stages {
        StageSelection::Workload { arg, .. } => JobStages::Workload(arg.clone()),
        StageSelection::Stages(stages) => JobStages::Stages(stages.clone()),
    };
    job.stage_options = spec.stage_options.clone();
    job.stage_options.extend(
        spec.layout_stage_options
            .get(config.layout)
            .into_iter()
            .flatten()
            .cloned(),
    );
    job.lab = spec.labs.get(config.layout).cloned().flatten();
    job.threads = spec.threads;
    job.instances = Some(spec.instances);
    job.cache = caseload_engine::cache::CacheMode::Cold;
    job.json = true;
    job.db = spec.db.clone();
    job.workstation = spec.workstation.clone();
    let mut cmd = Command::new(&spec.exe);
    cmd.args(job.command_line());
    cmd.stdin(Stdio::null())
        .stdout(stdout_file)
        .stderr(stderr_file);
    // Its own process group: Ctrl-C reaches the comparison, which passes
    // it on to the run and every instance the run started.
    caseload_engine::os::own_process_group(&mut cmd);

    let started_at = caseload_engine::casedb::now_utc();
    let clock = Instant::now();
    let mut child = cmd.spawn().map_err(|source| CompareError::Spawn {
        exe: spec.exe.clone(),
        source,
    })?;
    let outcome = wait_child(&mut child, cancel);
    let wall_seconds = clock.elapsed().as_secs_f64();

    let stdout = std::fs::read(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let mut record = RunRecord {
        sequence,
        configuration: config.index,
        repeat,
        status: String::new(),
        error: None,
        exit_code: outcome.status.and_then(|s| s.code()),
        started_at,
        wall_seconds,
        report: None,
        stderr: None,
        dirs: dirs.all.clone(),
        kept: spec.keep_runs,
        cache: None,
        stages: Vec::new(),
        instances: Vec::new(),
        instance_failures: Vec::new(),
    };
    match parse_printed(&stdout) {
        Ok(printed) => {
            let final_path = spec.out.join(&report_rel);
            std::fs::rename(&stdout_path, &final_path)
                .map_err(io_err("keeping run report", &final_path))?;
            record.report = Some(report_rel);
            match printed {
                Printed::Run(r) => {
                    record.status = r.status.clone();
                    record.cache = Some(r.cache.clone());
                    record.stages = report::figures_from_run(&r);
                }
                Printed::Instances(r) => {
                    let (stages, instances) = report::figures_from_instances(&r);
                    record.status = if r.runs.is_empty() {
                        "failed"
                    } else if r.runs.iter().any(|x| x.status == "interrupted") {
                        "interrupted"
                    } else if r.failures.is_empty()
                        && r.runs.len() == r.instances
                        && r.runs.iter().all(|x| x.status == "completed")
                    {
                        "completed"
                    } else {
                        "completed-with-errors"
                    }
                    .into();
                    if r.runs.is_empty() {
                        record.error =
                            Some(format!("no instance reported: {}", r.failures.join("; ")));
                    }
                    record.cache = Some(r.cache.clone());
                    record.stages = stages;
                    record.instances = instances;
                    record.instance_failures = r.failures.clone();
                }
            }
        }
        Err(parse_error) => {
            let _ = std::fs::remove_file(&stdout_path);
            let why = stderr_tail(&stderr);
            if outcome.interrupted {
                record.status = "interrupted".into();
                record.error = Some(format!(
                    "stopped by Ctrl-C before it reported ({})",
                    describe_exit(outcome.status)
                ));
            } else {
                record.status = "failed".into();
                record.error = Some(match (why.is_empty(), &outcome.wait_error) {
                    (_, Some(e)) => format!("waiting for the run failed: {e}"),
                    (false, None) => format!("{why} ({})", describe_exit(outcome.status)),
                    (true, None) => format!(
                        "no report ({}; {parse_error})",
                        describe_exit(outcome.status)
                    ),
                });
            }
        }
    }
    if stderr.trim().is_empty() {
        let _ = std::fs::remove_file(&stderr_path);
    } else {
        record.stderr = Some(stderr_rel);
    }
    if !spec.keep_runs {
        for d in &dirs.all {
            if let Err(e) = std::fs::remove_dir_all(d) {
                let note = format!("could not remove `{}`: {e}", d.display());
                record.error = Some(match record.error.take() {
                    Some(x) => format!("{x}; {note}"),
                    None => note,
                });
            }
        }
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_made_unique_and_safe() {
        assert_eq!(
            unique_labels(vec!["a".into(), "b".into(), "a".into()]),
            ["a#1", "b", "a#3"]
        );
        assert_eq!(file_stem("image.E01@db on/shm"), "c-image.E01@db_on_shm");
        assert_eq!(file_stem(".."), "c-..");
    }

    #[test]
    fn the_baseline_is_a_number_or_a_label() {
        let configs: Vec<Configuration> = [(0, 0), (0, 1), (1, 0), (1, 1)]
            .iter()
            .enumerate()
            .map(|(i, (e, l))| Configuration {
                index: i,
                label: format!("{}@{}", ["x.E01", "x.dd"][*e], ["shm", "disk"][*l]),
                evidence: *e,
                layout: *l,
            })
            .collect();
        let ev = vec!["x.E01".to_string(), "x.dd".to_string()];
        let la = vec!["shm".to_string(), "disk".to_string()];
        let r = |b: &str| resolve_baseline(&b.parse().unwrap(), &configs, &ev, &la);
        assert_eq!(r("1").unwrap(), 0);
        assert_eq!(r("4").unwrap(), 3);
        assert!(r("0").is_err());
        assert!(r("5").unwrap_err().to_string().contains("4 configurations"));
        assert_eq!(r("x.dd@shm").unwrap(), 2);
        assert!(r("shm").unwrap_err().to_string().contains("matches 2"));
        assert!(r("nope").is_err());
        let one_ev = &configs[..2];
        assert_eq!(
            resolve_baseline(&"disk".parse().unwrap(), one_ev, &ev, &la).unwrap(),
            1
        );
    }

    #[test]
    fn a_failed_run_is_described_by_its_last_stderr_lines() {
        assert_eq!(stderr_tail("a\n\nb\nc\nd\n"), "b | c | d");
        assert_eq!(stderr_tail(""), "");
    }
}
