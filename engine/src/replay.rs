//! `caseload replay`: a trace (another tool's, imported, or a traced run's)
//! played on a layout, thread by thread, into a run report like any run's.
//!
//! Each recorded thread is replayed by a thread of its own, its operations
//! in their recorded order, each begun after the recorded think time since
//! the thread's previous operation ended (scaled by `think_scale`; the
//! tracer's own time, where the trace says it, taken out of the trace's
//! clock first: every stop of every thread moves what follows back).
//! Across threads, an operation waits for every operation of another
//! thread on the same file that had ended before it began in the trace
//! (open after create, read after write), so order that mattered is kept
//! and the rest runs as concurrently as the devices allow.
//!
//! Files the trace uses without creating them existed before it began:
//! they are made and filled with incompressible data up to the furthest
//! byte read before the clock starts; what the trace creates, renames and
//! removes is created, renamed and removed during the replay, since that
//! metadata work is part of a suite's load. Evidence is read in place (the
//! trace's own evidence file where it exists, or the files given with
//! `--evidence`), or from a stand-in of the size the trace reads. Every
//! operation goes through the channels, so the report counts what the
//! replay did exactly as a run's would; non-cached operations aligned to
//! 4 KiB are done with direct I/O.
//!
//! A replay's files go under `replay/` in each writable channel's
//! directory; its report is `run.json` in the case directory, with the
//! trace's phases as its stages (the trace's own stage markers, time
//! windows, or one phase per process).
//!
//! Memory: the trace is held in memory (about 120 bytes per operation) so
//! that threads can be scheduled against each other; buffers are 4 MiB per
//! thread whatever the request size.

use crate::cache::{self, CacheMode, CacheReport};
use crate::channel::{Channel, ChannelError, ChannelFile, ChannelKind, ChannelSnapshot};
use crate::layout::Layout;
use crate::metrics::{self, CpuTimes, PeakScope};
use crate::report::{
    ChannelFigures, ChannelInfo, RUN_SCHEMA, RUN_SCHEMA_VERSION, Recorded, RunReport, StageReport,
    Totals,
};
use crate::source::{SourceFormat, SourceInfo};
use crate::stage::StageSummary;
use crate::system::SystemContext;
use caseload_traces::format::{Op, Record, TraceReader};
use caseload_traces::import::STOP_BUCKET_NS;
use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where a replay's files go inside each writable channel.
pub const REPLAY_DIR: &str = "replay";

/// Where evidence stand-ins go, inside the case directory, when the layout
/// names no evidence directory.
pub const STAND_IN_DIR: &str = "replay-evidence";

/// Largest buffer a replay thread reads or writes through at once.
const BUFFER: usize = 4 << 20;

/// How the trace's operations are grouped into the report's stages.
#[derive(Debug, Clone, PartialEq)]
pub enum Phases {
    /// The trace's own `phase` records (a traced run's stages); one phase
    /// `replay` when it has none.
    Trace,
    /// Named windows of trace time, in seconds (`--phase NAME=START..END`);
    /// operations outside every window go to `other`.
    Windows(Vec<(String, f64, f64)>),
    /// One phase per process.
    Process,
}

/// A replay fully described.
#[derive(Debug, Clone)]
pub struct ReplaySpec {
    /// The trace file.
    pub trace: PathBuf,
    /// Where each channel's files go.
    pub layout: Layout,
    /// Files standing for the trace's evidence files, in the order the
    /// trace first uses them (empty: the trace's own, or stand-ins).
    pub evidence: Vec<PathBuf>,
    /// Cold or warm page cache at the start.
    pub cache: CacheMode,
    /// Think time as recorded times this (0: as fast as the devices go).
    pub think_scale: f64,
    /// How operations group into stages.
    pub phases: Phases,
    /// Replace an earlier replay's files and report.
    pub force: bool,
    /// The modelled workstation's memory (`--ram`, `--scale-from`): a
    /// page cache held to what a suite's workstation of that size leaves
    /// for it, over every channel's files (none: this machine's own).
    pub workstation: Option<crate::workstation::WorkstationSpec>,
}

/// A replay that cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The trace is bad.
    #[error("{}: {source}", .path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: caseload_traces::import::error::FormatError,
    },
    /// Reading the trace failed.
    #[error("{}: {source}", .path.display())]
    Read {
        /// The trace file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The trace cannot be replayed as asked (said why).
    #[error("{0}")]
    Refused(String),
    /// A channel failed while setting up.
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

/// One operation to replay.
#[derive(Debug, Clone)]
struct Step {
    t: u64,
    dur: u64,
    file: u32,
    op: Op,
    offset: u64,
    len: u64,
    direct: bool,
    /// A writeback that waits for its writes.
    wait: bool,
    /// The tracer's stops in the gap before it (the trace's `calls`; 1
    /// where not counted).
    calls: u32,
    channel: ChannelKind,
    path: Option<PathBuf>,
    to: Option<PathBuf>,
    phase: usize,
    /// (thread index, step index) that must be done first.
    deps: Vec<(usize, usize)>,
    /// Another thread's step this one began just after, having been idle
    /// until then (see `find_triggers`).
    trigger: Option<(usize, usize)>,
    /// A message (`send`, `recv`): the stream it went through. It does no
    /// I/O; a receive waits for the send that supplied its last byte
    /// (see `pair_messages`).
    stream: Option<u32>,
    /// A receive: the other thread's send that supplied it.
    sent_by: Option<(usize, usize)>,
    /// A timer: how long it ran, in wall time as recorded (the tracer's
    /// stops do not lengthen a timer, so none come out of it).
    wall: u64,
    /// Left out: it followed a timer that would have run out after the
    /// plain run had ended (see `skip_unfired_timers`).
    skip: bool,
}

impl Step {
    /// An operation on a file or path (not a message or a timer).
    fn is_io(&self) -> bool {
        self.stream.is_none() && self.op != Op::Timer
    }
}

/// A file of the trace.
#[derive(Debug, Clone)]
struct TraceFile {
    channel: ChannelKind,
    /// Relative to the channel's replay directory (writable channels and
    /// evidence stand-ins), or the file read in place.
    rel: PathBuf,
    in_place: Option<PathBuf>,
    /// The furthest byte read before the trace writes it: what must exist.
    fill: u64,
    /// It existed before the trace began.
    existed: bool,
    /// Other files of the trace are inside it: a folder opened as a file
    /// (Process Monitor shows folders opened without the directory
    /// option); opened and closed as a lookup, made as a folder.
    folder: bool,
}

/// The trace as a replay needs it.
struct Plan {
    threads: Vec<(String, Vec<Step>)>,
    files: HashMap<u32, TraceFile>,
    phase_names: Vec<String>,
    /// Bytes each writable channel needs at most.
    space: BTreeMap<ChannelKind, u64>,
    notes: Vec<String>,
}

fn bytes_path(p: &[u8]) -> PathBuf {
    crate::os::path_from_bytes(p)
}

/// The part of an absolute path under a channel's recorded directory, or
/// the path made relative (its root and `..` dropped).
fn relative_to(path: &Path, root: Option<&Path>) -> PathBuf {
    let rest = root.and_then(|r| path.strip_prefix(r).ok()).unwrap_or(path);
    rest.components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect()
}

/// Read and plan the trace: threads, files, dependencies, phases.
fn plan(spec: &ReplaySpec, input: impl BufRead) -> Result<Plan, ReplayError> {
    let bad = |source| ReplayError::Trace {
        path: spec.trace.clone(),
        source,
    };
    let mut reader = TraceReader::new(input).map_err(bad)?;
    let header = reader.header().clone();
    let roots: HashMap<ChannelKind, PathBuf> = header
        .meta
        .iter()
        .filter(|(k, _)| k == "channel-root")
        .filter_map(|(_, v)| {
            let (c, dir) = v.split_once(' ')?;
            Some((ChannelKind::parse(c)?, PathBuf::from(dir)))
        })
        .collect();
    let overhead_ns = header
        .get("tracer-overhead-ns")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut thread_index: HashMap<u32, usize> = HashMap::new();
    let mut threads: Vec<(String, Vec<Step>)> = Vec::new();
    let mut files: HashMap<u32, TraceFile> = HashMap::new();
    let mut phase_names: Vec<String> = Vec::new();
    let mut trace_phase = 0usize;
    let mut thread_process: Vec<String> = Vec::new();
    let mut stream_ids: HashMap<Vec<u8>, u32> = HashMap::new();
    // First pass: records into steps.
    let mut records: Vec<Record> = Vec::new();
    while let Some(r) = reader.next_record() {
        records.push(r.map_err(bad)?);
    }
    // When the tracer stopped threads (all of them, kept or not), per
    // millisecond: `# stops MS N` at an import's end.
    let stops: Vec<(u64, u64)> = reader
        .trailer()
        .iter()
        .filter(|(k, _)| k == "stops")
        .filter_map(|(_, v)| {
            let (ms, n) = v.split_once(' ')?;
            Some((
                ms.parse::<u64>().ok()?.checked_mul(STOP_BUCKET_NS)?,
                n.parse().ok()?,
            ))
        })
        .collect();
    // A version 1 trace has absolute paths and no roots: each channel's
    // files are placed relative to the directory they share.
    let mut common: HashMap<ChannelKind, PathBuf> = HashMap::new();
    if roots.is_empty() {
        for r in records.iter().filter(|r| r.op == Op::Add) {
            let (Some(c), Some(p)) = (r.channel, r.path.as_deref()) else {
                continue;
            };
            let p = bytes_path(p);
            if !p.is_absolute() {
                continue;
            }
            let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
            let e = common.entry(c).or_insert_with(|| dir.clone());
            while !dir.starts_with(&*e) {
                if !e.pop() {
                    break;
                }
            }
        }
    }
    let root_of = |c: ChannelKind| {
        roots
            .get(&c)
            .or_else(|| common.get(&c))
            .map(PathBuf::as_path)
    };
    for r in records {
        match r.op {
            Op::Thread => {
                let name = r
                    .path
                    .as_deref()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default();
                let idx = *thread_index.entry(r.thread).or_insert_with(|| {
                    threads.push((name.clone(), Vec::new()));
                    threads.len() - 1
                });
                while thread_process.len() <= idx {
                    thread_process.push(String::new());
                }
                thread_process[idx] = name.split(':').next().unwrap_or("").to_string();
                continue;
            }
            Op::Phase => {
                let name = r
                    .path
                    .as_deref()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default();
                if spec.phases == Phases::Trace {
                    trace_phase = match phase_names.iter().position(|n| *n == name) {
                        Some(i) => i,
                        None => {
                            phase_names.push(name);
                            phase_names.len() - 1
                        }
                    };
                }
                continue;
            }
            Op::Add => {
                let (Some(channel), Some(p)) = (r.channel, r.path.as_deref()) else {
                    return Err(ReplayError::Refused(format!(
                        "file {} is added without a channel or path",
                        r.file
                    )));
                };
                let original = bytes_path(p);
                let rel = relative_to(&original, root_of(channel));
                if rel.as_os_str().is_empty() {
                    return Err(ReplayError::Refused(format!(
                        "file {} (`{}`) is a channel's directory itself, not a file in it",
                        r.file,
                        original.display()
                    )));
                }
                files.insert(
                    r.file,
                    TraceFile {
                        channel,
                        rel,
                        in_place: original.is_absolute().then_some(original),
                        fill: 0,
                        existed: false,
                        folder: false,
                    },
                );
                continue;
            }
            _ => {}
        }
        // Messages are on no channel; the one they carry is never used.
        let stream = match (r.op.is_message(), r.path.as_deref()) {
            (true, Some(name)) => {
                let next = stream_ids.len() as u32;
                Some(*stream_ids.entry(name.to_vec()).or_insert(next))
            }
            (true, None) => continue,
            (false, _) => None,
        };
        // Messages and timers are on no channel; Temp stands in.
        let off_channel = stream.is_some() || r.op == Op::Timer;
        let Some(channel) = r.channel.or(off_channel.then_some(ChannelKind::Temp)) else {
            continue;
        };
        let idx = match thread_index.get(&r.thread) {
            Some(&i) => i,
            None => {
                // A version 1 trace or a thread never introduced.
                threads.push((format!("thread {}", r.thread), Vec::new()));
                thread_process.push(String::new());
                thread_index.insert(r.thread, threads.len() - 1);
                threads.len() - 1
            }
        };
        if r.file != 0 && !files.contains_key(&r.file) {
            return Err(ReplayError::Refused(format!(
                "an operation names file {} which the trace never added (line order broken?)",
                r.file
            )));
        }
        let phase = match &spec.phases {
            Phases::Trace => trace_phase,
            Phases::Windows(w) => {
                let secs = r.t_ns as f64 / 1e9;
                w.iter()
                    .position(|(_, a, b)| secs >= *a && secs < *b)
                    .unwrap_or(w.len())
            }
            Phases::Process => {
                let p = thread_process.get(idx).cloned().unwrap_or_default();
                match phase_names.iter().position(|n| *n == p) {
                    Some(i) => i,
                    None => {
                        phase_names.push(p);
                        phase_names.len() - 1
                    }
                }
            }
        };
        let path = r
            .path
            .as_deref()
            .filter(|_| stream.is_none())
            .map(|p| relative_to(&bytes_path(p), root_of(channel)));
        let to =
            r.to.as_deref()
                .map(|p| relative_to(&bytes_path(p), root_of(channel)));
        if channel == ChannelKind::Evidence
            && matches!(
                r.op,
                Op::Write | Op::Create | Op::Truncate | Op::Rename | Op::Remove | Op::Mkdir
            )
        {
            return Err(ReplayError::Refused(format!(
                "the trace {}s on the evidence channel (line order {}): evidence is read-only; map that path to another channel",
                r.op.name(),
                threads[idx].1.len()
            )));
        }
        threads[idx].1.push(Step {
            t: r.t_ns,
            dur: r.dur_ns,
            file: r.file,
            op: r.op,
            offset: r.offset,
            len: r.len,
            direct: r.direct,
            wait: r.wait,
            calls: r.calls.max(1),
            channel,
            path,
            to,
            phase,
            deps: Vec::new(),
            trigger: None,
            stream,
            sent_by: None,
            wall: if r.op == Op::Timer { r.dur_ns } else { 0 },
            skip: false,
        });
    }
    if let Phases::Windows(w) = &spec.phases {
        phase_names = w.iter().map(|(n, _, _)| n.clone()).collect();
        phase_names.push("other".into());
    }
    if phase_names.is_empty() {
        phase_names.push("replay".into());
    }
    threads.retain(|(_, steps)| !steps.is_empty());
    if threads.is_empty() {
        return Err(ReplayError::Refused(
            "the trace holds no operation to replay".into(),
        ));
    }
    // Which files existed before: the first operation on each (in trace
    // time) is not a create, and no rename made it.
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for (ti, (_, steps)) in threads.iter().enumerate() {
        for (si, s) in steps.iter().enumerate() {
            order.push((s.t, ti, si));
        }
    }
    order.sort_unstable();
    let mut seen: HashMap<u32, bool> = HashMap::new();
    let mut renamed_to: std::collections::HashSet<(ChannelKind, PathBuf)> = Default::default();
    let mut extent: HashMap<u32, u64> = HashMap::new();
    for &(_, ti, si) in &order {
        let s = &threads[ti].1[si];
        if s.op == Op::Rename
            && let Some(to) = &s.to
        {
            renamed_to.insert((s.channel, to.clone()));
        }
        if s.file == 0 {
            continue;
        }
        let Some(f) = files.get_mut(&s.file) else {
            continue;
        };
        let first = !seen.contains_key(&s.file);
        if first {
            let made = s.op == Op::Create || renamed_to.contains(&(f.channel, f.rel.clone()));
            f.existed = !made;
            seen.insert(s.file, true);
        }
        let end = s.offset.saturating_add(s.len);
        match s.op {
            Op::Read => {
                // Bytes read before anything was written there must exist.
                if f.existed && !seen.get(&s.file).copied().unwrap_or(false) {
                    // (unreachable: seen was set above)
                }
                if f.existed && *extent.get(&s.file).unwrap_or(&0) < end {
                    f.fill = f.fill.max(end);
                }
            }
            Op::Write => {
                let e = extent.entry(s.file).or_default();
                *e = (*e).max(end);
            }
            Op::Truncate | Op::Create => {
                extent.insert(s.file, if s.op == Op::Truncate { s.len } else { 0 });
                // After a create or truncate, reads past it find nothing
                // the trace did not write: no fill needed beyond this.
                if s.op == Op::Create {
                    f.existed = f.existed && f.fill > 0;
                }
            }
            _ => {}
        }
    }
    // Files that hold other files, or that the trace made with mkdir, are
    // folders (strace shows a folder opened without O_DIRECTORY, to list
    // it, as an open like a file's).
    let mut parents: std::collections::HashSet<(ChannelKind, PathBuf)> = files
        .values()
        .flat_map(|f| {
            f.rel
                .ancestors()
                .skip(1)
                .map(move |a| (f.channel, a.to_path_buf()))
        })
        .collect();
    parents.extend(
        threads
            .iter()
            .flat_map(|(_, steps)| steps.iter())
            .filter(|s| s.op == Op::Mkdir)
            .filter_map(|s| Some((s.channel, s.path.clone()?))),
    );
    for f in files.values_mut() {
        if parents.contains(&(f.channel, f.rel.clone())) {
            f.folder = true;
            f.fill = 0;
        }
    }
    // Space: each writable channel's files at their largest.
    let mut space: BTreeMap<ChannelKind, u64> = BTreeMap::new();
    let mut largest: HashMap<u32, u64> = HashMap::new();
    for (_, steps) in &threads {
        for s in steps {
            let end = match s.op {
                Op::Write | Op::Read => s.offset.saturating_add(s.len),
                Op::Truncate => s.len,
                _ => 0,
            };
            let e = largest.entry(s.file).or_default();
            *e = (*e).max(end);
        }
    }
    for (id, f) in &files {
        if f.channel != ChannelKind::Evidence {
            *space.entry(f.channel).or_default() +=
                largest.get(id).copied().unwrap_or(0).max(f.fill);
        }
    }
    // Cross-thread dependencies: per path (a run's trace numbers each
    // open of a file anew, so one path can have many numbers), each
    // thread's steps by end time. A rename touches two paths.
    let mut key_ids: HashMap<(ChannelKind, PathBuf), usize> = HashMap::new();
    let mut step_keys: Vec<Vec<Vec<usize>>> = Vec::with_capacity(threads.len());
    for (_, steps) in &threads {
        let mut per_thread = Vec::with_capacity(steps.len());
        for s in steps {
            let mut paths: Vec<PathBuf> = Vec::new();
            if s.file != 0
                && let Some(f) = files.get(&s.file)
            {
                paths.push(f.rel.clone());
            }
            // Lookups do not order anything a replay could get wrong.
            if s.op != Op::Stat {
                paths.extend(s.path.iter().cloned());
                paths.extend(s.to.iter().cloned());
            }
            let mut keys: Vec<usize> = Vec::with_capacity(paths.len());
            for p in paths {
                let next = key_ids.len();
                let k = *key_ids.entry((s.channel, p)).or_insert(next);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            per_thread.push(keys);
        }
        step_keys.push(per_thread);
    }
    // A total order of steps consistent with every thread's own order
    // (start times made non-decreasing along each thread: a source may log
    // a thread's calls slightly out of time order). A step waits only for
    // steps before it in this order, so waits never form a circle. A
    // receive is placed at its end, when its thread learnt what it
    // received: it began (waiting) before the send it waits for.
    let order_of: Vec<Vec<u64>> = threads
        .iter()
        .map(|(_, steps)| {
            let mut t = 0;
            steps
                .iter()
                .map(|s| {
                    let at = if s.op == Op::Recv {
                        s.t.saturating_add(s.dur)
                    } else {
                        s.t
                    };
                    t = t.max(at);
                    t
                })
                .collect()
        })
        .collect();
    let deps_total = find_deps(&mut threads, &step_keys, &order_of);
    let mut notes = Vec::new();
    if deps_total > 0 {
        notes.push(format!("{deps_total} cross-thread waits kept (an operation after another thread's on the same file)"));
    }
    let (paired, unpaired) = pair_messages(&mut threads, &order_of);
    if paired + unpaired > 0 {
        notes.push(format!(
            "{paired} receives wait for the send that supplied their last byte ({} streams){}",
            stream_ids.len(),
            if unpaired > 0 {
                format!("; {unpaired} received bytes no send in the trace supplied (sent before it began, or by a process it left out), and wait for nothing")
            } else {
                String::new()
            }
        ));
    }
    // Guessed waits only where the trace shows none: with its threads'
    // messages kept, a guess ties a thread to whichever step happened to
    // end just before it (a backend to an autovacuum worker's read).
    let triggers = if paired == 0 {
        find_triggers(&mut threads, &order_of)
    } else {
        0
    };
    let plain_ns = header.get("plain-ns").and_then(|v| v.parse::<u64>().ok());
    if let Some(note) = take_out_tracer(&mut threads, overhead_ns, plain_ns, &stops) {
        notes.push(note);
    }
    if let Some(plain) = plain_ns
        && let Some(note) = skip_unfired_timers(&mut threads, &order_of, plain)
    {
        notes.push(note);
    }
    if triggers > 0 {
        notes.push(format!(
            "{triggers} operations follow another thread's, after idling until it ended: replayed after it (a client waiting on its server through calls the trace does not show)"
        ));
    }
    Ok(Plan {
        threads,
        files,
        phase_names,
        space,
        notes,
    })
}

/// Per path key, per thread: (end time, the latest step ending by then).
type StepsByKey = HashMap<usize, HashMap<usize, Vec<(u64, usize)>>>;

/// What another thread's step must wait for. Only what a replay could
/// get wrong is kept: a step that makes, removes, renames or cuts a path
/// waits for every earlier step on it (a read must not find it changed
/// under it); a read waits for the writes before it (read-after-write
/// finds its data, and the length a write gave the file); any other step
/// (writes, syncs, opens) for those that change the path. A write needs
/// no other thread's write, one that made the file longer included, and a
/// sync flushes whatever is written when it runs: in the traced run their
/// order was timing's, and kept it tied a database's backend, through the
/// write-ahead log, to a checkpointer pacing its writes by the clock.
/// Waiting for every earlier step on the same file chained a database's
/// backends through each other's page writes.
/// `step_keys` are each step's paths (its file's first). Sets each step's
/// `deps`; returns how many.
fn find_deps(
    threads: &mut [(String, Vec<Step>)],
    step_keys: &[Vec<Vec<usize>>],
    order_of: &[Vec<u64>],
) -> u64 {
    // What a step changes, 0 to 2: nothing, data (a write: reads wait for
    // it), or the path (everything waits for it).
    let weight: Vec<Vec<u8>> = threads
        .iter()
        .map(|(_, steps)| {
            steps
                .iter()
                .map(|s| match s.op {
                    Op::Create | Op::Truncate | Op::Rename | Op::Remove | Op::Mkdir => 2,
                    Op::Write => 1,
                    _ => 0,
                })
                .collect()
        })
        .collect();
    // Per key and thread, by end time: `by_key[c]` holds the steps that
    // change at least `c`.
    let mut by_key: [StepsByKey; 3] = Default::default();
    for (ti, (_, steps)) in threads.iter().enumerate() {
        for (si, s) in steps.iter().enumerate() {
            for &k in &step_keys[ti][si] {
                for map in &mut by_key[..=usize::from(weight[ti][si])] {
                    map.entry(k)
                        .or_default()
                        .entry(ti)
                        .or_default()
                        .push((s.t + s.dur, si));
                }
            }
        }
    }
    // Sorted by end, each entry with the latest step (in thread order)
    // among those ending by then: the wait a later step needs, found in
    // one binary search.
    for list in by_key
        .iter_mut()
        .flat_map(|m| m.values_mut())
        .flat_map(|m| m.values_mut())
    {
        list.sort_unstable();
        let mut latest = 0;
        for e in list.iter_mut() {
            latest = latest.max(e.1);
            e.1 = latest;
        }
    }
    let mut deps_total = 0u64;
    for (ti, keys_of) in step_keys.iter().enumerate() {
        for (si, keys) in keys_of.iter().enumerate() {
            let t = threads[ti].1[si].t;
            // What it must not overtake: anything, if it changes the path;
            // data and paths, if it reads; paths otherwise.
            let waits_for = match (weight[ti][si], threads[ti].1[si].op) {
                (2, _) => &by_key[0],
                (_, Op::Read) => &by_key[1],
                _ => &by_key[2],
            };
            let mut deps: Vec<(usize, usize)> = Vec::new();
            for k in keys {
                let Some(per_thread) = waits_for.get(k) else {
                    continue;
                };
                for (&other, list) in per_thread {
                    if other == ti {
                        continue;
                    }
                    let n = list.partition_point(|&(end, _)| end <= t);
                    if n > 0 {
                        // The latest such step; the thread's earlier ones
                        // come before it in its own order.
                        let latest = list[n - 1].1;
                        if (order_of[other][latest], other, latest) >= (order_of[ti][si], ti, si) {
                            continue;
                        }
                        add_dep(&mut deps, other, latest);
                    }
                }
            }
            deps_total += deps.len() as u64;
            threads[ti].1[si].deps = deps;
        }
    }
    deps_total
}

/// Make `deps` wait for step `step` of `thread`: one wait per thread, for
/// its latest step waited for (its earlier ones come before it).
fn add_dep(deps: &mut Vec<(usize, usize)>, thread: usize, step: usize) {
    match deps.iter_mut().find(|(th, _)| *th == thread) {
        Some(d) => d.1 = d.1.max(step),
        None => deps.push((thread, step)),
    }
}

/// Pair each receive with the send that supplied its last byte: per
/// stream, sends in the order they began and receives in the order they
/// ended each count the stream's bytes, and a receive of bytes up to
/// position P waits for the send whose bytes reach P. A receive of no
/// bytes is a woken wait (a futex, a join): it waits for the latest
/// wake-up on its key begun before it ended. A client's wait for
/// its database server's answer (and the server's for the next query) is
/// then a wait for the other's step, not think time that a faster device
/// could not shorten: caseload's own PostgreSQL-backed run, traced on
/// rotating disks, replayed on a flash lab as slowly as on the disks.
/// Waits go only backwards in `order_of`. Returns the receives paired and
/// those whose bytes no send in the trace supplied.
fn pair_messages(threads: &mut [(String, Vec<Step>)], order_of: &[Vec<u64>]) -> (u64, u64) {
    // Per stream: sends (begin, thread, step, bytes) and receives (end, ...).
    type Ends = Vec<(u64, usize, usize, u64)>;
    let mut streams: HashMap<u32, (Ends, Ends)> = HashMap::new();
    for (ti, (_, steps)) in threads.iter().enumerate() {
        for (si, s) in steps.iter().enumerate() {
            let Some(id) = s.stream else { continue };
            let (sends, recvs) = streams.entry(id).or_default();
            match s.op {
                Op::Send => sends.push((s.t, ti, si, s.len)),
                Op::Recv => recvs.push((s.t.saturating_add(s.dur), ti, si, s.len)),
                _ => {}
            }
        }
    }
    let (mut paired, mut unpaired) = (0u64, 0u64);
    for (_, (mut sends, mut recvs)) in streams {
        sends.sort_unstable();
        recvs.sort_unstable();
        // Each send's position after its bytes.
        let mut sent = 0u64;
        let reach: Vec<u64> = sends
            .iter()
            .map(|&(_, _, _, n)| {
                sent = sent.saturating_add(n);
                sent
            })
            .collect();
        let mut got = 0u64;
        for &(end, ti, si, n) in &recvs {
            // A wake-up (no bytes): the latest one begun before the wait
            // ended. Bytes: the send that reached the last one.
            let found = if n == 0 {
                sends
                    .partition_point(|s| s.0 <= end)
                    .checked_sub(1)
                    .and_then(|k| sends.get(k))
            } else {
                got = got.saturating_add(n);
                sends.get(reach.partition_point(|&p| p < got))
            };
            let Some(&(_, tj, sj, _)) = found else {
                unpaired += 1;
                continue;
            };
            paired += 1;
            if tj == ti || (order_of[tj][sj], tj, sj) >= (order_of[ti][si], ti, si) {
                continue;
            }
            threads[ti].1[si].sent_by = Some((tj, sj));
            add_dep(&mut threads[ti].1[si].deps, tj, sj);
        }
    }
    (paired, unpaired)
}

/// Leave out what only happened because the tracer made the run longer: a
/// timer (`Op::Timer`, on the tracer-free clock) that would have run out
/// after the plain run ended (`plain_ns`) never ran out in it, so what
/// its thread did next (until it next received something from an
/// operation that is kept) did not happen either, nor what that sent
/// others (from their receive of it to their next kept receive) or the
/// threads it spawned. Under strace caseload's PostgreSQL-backed run took
/// 55 s where it takes 24: the autovacuum launcher's 30 s nap ran out,
/// started a worker and the work it asked of the checkpointer, and a
/// replay on a faster lab waited for all of it. Taken in the recorded
/// order (a receive after its send). Waits on a step left out move to the
/// thread's latest kept step before it. A note of what was left out.
fn skip_unfired_timers(
    threads: &mut [(String, Vec<Step>)],
    order_of: &[Vec<u64>],
    plain_ns: u64,
) -> Option<String> {
    let mut order: Vec<(u64, usize, usize)> = threads
        .iter()
        .enumerate()
        .flat_map(|(ti, (_, steps))| (0..steps.len()).map(move |si| (ti, si)))
        .map(|(ti, si)| (order_of[ti][si], ti, si))
        .collect();
    order.sort_unstable();
    let mut tainted = vec![false; threads.len()];
    let (mut timers, mut skipped, mut bytes) = (0u64, 0u64, 0u64);
    for &(_, ti, si) in &order {
        let s = &threads[ti].1[si];
        if s.op == Op::Timer && !tainted[ti] && s.t.saturating_add(s.wall) > plain_ns {
            tainted[ti] = true;
            timers += 1;
        } else if s.op == Op::Recv {
            let from_skipped = s.sent_by.is_some_and(|(tj, sj)| threads[tj].1[sj].skip);
            tainted[ti] = from_skipped;
        }
        if tainted[ti] {
            let s = &mut threads[ti].1[si];
            s.skip = true;
            if s.is_io() {
                skipped += 1;
                if matches!(s.op, Op::Read | Op::Write) {
                    bytes += s.len;
                }
            }
        }
    }
    if timers == 0 {
        return None;
    }
    // The latest kept step at or before each step, per thread.
    let kept_before: Vec<Vec<Option<usize>>> = threads
        .iter()
        .map(|(_, steps)| {
            let mut last = None;
            steps
                .iter()
                .enumerate()
                .map(|(si, s)| {
                    if !s.skip {
                        last = Some(si);
                    }
                    last
                })
                .collect()
        })
        .collect();
    for (_, steps) in threads.iter_mut() {
        for s in steps.iter_mut().filter(|s| !s.skip) {
            s.deps = s
                .deps
                .iter()
                .filter_map(|&(tj, sj)| kept_before[tj][sj].map(|k| (tj, k)))
                .collect();
            s.trigger = s
                .trigger
                .and_then(|(tj, sj)| kept_before[tj][sj].map(|k| (tj, k)));
        }
    }
    Some(format!(
        "{timers} timers would have run out after the plain run's end ({:.3} s): {skipped} operations ({bytes} bytes read and written) that followed them, in their threads and in what they woke or started, left out (they happened only because the tracer made the run longer)",
        plain_ns as f64 / 1e9
    ))
}

/// Operations that began just after another thread's ended, their own
/// thread having been idle since its previous one: a client that sent a
/// database server a query and waited, through a socket the trace does
/// not show, until the server's last write and sync for it were done. The
/// client's recorded think time is then the server's work on the devices
/// the trace was taken on, which a replay on faster devices must not keep
/// (caseload's PostgreSQL-backed run on a PCIe database replayed 3.5x too
/// slow). Such a step waits for the other's and starts the recorded
/// latency after it. Found on the recorded clock, in the order the
/// cross-thread waits use (so no wait forms a circle). Returns how many.
fn find_triggers(threads: &mut [(String, Vec<Step>)], order_of: &[Vec<u64>]) -> u64 {
    /// Longest recorded time from the other's end to this start.
    const LATENCY_NS: u64 = 2_000_000;
    /// Most ends looked at behind a start.
    const LOOK: usize = 64;
    // Messages are paired exactly (`pair_messages`): they neither trigger
    // nor are triggered.
    let mut ends: Vec<(u64, usize, usize)> = threads
        .iter()
        .enumerate()
        .flat_map(|(ti, (_, steps))| {
            steps
                .iter()
                .enumerate()
                .filter(|(_, s)| s.is_io())
                .map(move |(si, s)| (s.t.saturating_add(s.dur), ti, si))
        })
        .collect();
    ends.sort_unstable();
    let mut found = 0u64;
    for ti in 0..threads.len() {
        for si in 1..threads[ti].1.len() {
            if !threads[ti].1[si].is_io() {
                continue;
            }
            let prev = &threads[ti].1[si - 1];
            let idle_from = prev.t.saturating_add(prev.dur);
            let t = threads[ti].1[si].t;
            if t <= idle_from {
                continue;
            }
            let n = ends.partition_point(|&(end, _, _)| end <= t);
            let trigger = ends[..n]
                .iter()
                .rev()
                .take(LOOK)
                .take_while(|&&(end, _, _)| end > idle_from)
                .find(|&&(_, tj, sj)| {
                    tj != ti && (order_of[tj][sj], tj, sj) < (order_of[ti][si], ti, si)
                });
            if let Some(&(end, tj, sj)) = trigger {
                let latency = t - end;
                // Mostly idle before it, and started soon after it.
                if latency <= LATENCY_NS && latency.saturating_mul(4) <= t - idle_from {
                    threads[ti].1[si].trigger = Some((tj, sj));
                    found += 1;
                }
            }
        }
    }
    found
}

/// Take the tracer's time out of the trace's clock: every stop of every
/// traced thread moves every later operation back by the tracer's cost
/// per stop. strace handles one stop at a time, so under it a thread that
/// waits for another (a client for its database server) waits for that
/// one's stops too: taking out only the thread's own stops left a
/// PostgreSQL-backed run replaying at its traced length, 8x its plain one.
/// The stops are those of every thread per millisecond (`stops`, an
/// import's `# stops` lines: threads and calls the trace left out
/// stopped too), else each record's `calls`, which are counted at the
/// thread's next kept record, later than they were made. The clock never
/// runs backwards: where stops came faster than one cost's worth of time
/// passed (the cost is an average), what could not be taken out is taken
/// out of the time that follows. (Taken out at once, a thread's later
/// operations got earlier times than its earlier ones, and the gaps that
/// followed counted the same time twice: caseload's own run replayed at
/// 1.8x its plain length.) With the plain run's length known (`plain-ns`,
/// from `trace import --plain-seconds`), the cost per stop is what makes
/// the clock end there; else the measured cost (`tracer-overhead-ns`).
/// Steps' starts and ends move to the corrected clock (a wait's recorded
/// length loses the stops made while it waited; cross-thread order was
/// taken from the recorded times before). Returns a note of what was
/// taken out.
fn take_out_tracer(
    threads: &mut [(String, Vec<Step>)],
    overhead_ns: u64,
    plain_ns: Option<u64>,
    stops: &[(u64, u64)],
) -> Option<String> {
    // When the tracer stopped threads, and how many times.
    let mut points: Vec<(u64, f64)> = if stops.is_empty() {
        threads
            .iter()
            .flat_map(|(_, steps)| steps.iter().map(|s| (s.t, f64::from(s.calls))))
            .collect()
    } else {
        stops.iter().map(|&(t, n)| (t, n as f64)).collect()
    };
    points.sort_unstable_by_key(|p| p.0);
    // A record's calls were made before it; a millisecond's stops in it.
    let before = stops.is_empty();
    let total_stops: f64 = points.iter().map(|p| p.1).sum();
    let first = points.first().map_or(0, |p| p.0);
    let span = threads
        .iter()
        .flat_map(|(_, steps)| steps.iter().map(|s| s.t.saturating_add(s.dur)))
        .max()
        .unwrap_or(0);
    // At each point, what is taken out by then and what is still owed,
    // at `cost` ns per stop; and in all, by the trace's end.
    let cut_at = |cost: f64| -> (Vec<(f64, f64)>, f64) {
        let (mut cut, mut owed, mut prev) = (0.0f64, 0.0f64, first);
        let at: Vec<(f64, f64)> = points
            .iter()
            .map(|&(t, n)| {
                if before {
                    owed += n * cost;
                }
                let pay = owed.min(t.saturating_sub(prev) as f64);
                cut += pay;
                owed -= pay;
                if !before {
                    owed += n * cost;
                }
                prev = t;
                (cut, owed)
            })
            .collect();
        let total = cut + owed.min(span.saturating_sub(prev) as f64);
        (at, total)
    };
    let cost = match plain_ns {
        Some(plain) if span > plain => {
            // The cost that takes out the difference (what is taken out
            // grows with the cost, to at most the trace's length).
            let want = (span - plain) as f64;
            let (mut lo, mut hi) = (0.0f64, span as f64);
            for _ in 0..64 {
                let mid = (lo + hi) / 2.0;
                if cut_at(mid).1 < want {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            hi
        }
        Some(_) => 0.0,
        None => overhead_ns as f64,
    };
    if cost <= 0.0 || total_stops == 0.0 {
        return None;
    }
    let (at, total) = cut_at(cost);
    // A time's cut: that at the last point before it, plus what was owed
    // there as far as the time since allows.
    let cut_of = |time: u64| -> u64 {
        let k = points.partition_point(|p| p.0 < time || (before && p.0 == time));
        if k == 0 {
            return 0;
        }
        let (cut, owed) = at[k - 1];
        (cut + owed.min(time.saturating_sub(points[k - 1].0) as f64)).round() as u64
    };
    for (_, steps) in threads.iter_mut() {
        for step in steps {
            let end = step.t.saturating_add(step.dur);
            let start = step.t.saturating_sub(cut_of(step.t));
            step.t = start;
            step.dur = end.saturating_sub(cut_of(end)).saturating_sub(start);
        }
    }
    Some(format!(
        "the tracer's time taken out: {:.3} s over {total_stops} stops ({} ns each{})",
        total / 1e9,
        cost.round() as u64,
        if plain_ns.is_some() {
            ", so that the trace lasts as long as the plain run"
        } else {
            ""
        }
    ))
}

/// One channel set per phase, so each phase's figures are its own.
struct PhaseChannels {
    channels: BTreeMap<ChannelKind, Channel>,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    ops: AtomicU64,
}

/// An open file shared by the replay's threads.
struct Handle {
    file: ChannelFile,
    opens: AtomicU64,
}

struct Shared<'a> {
    plan: &'a Plan,
    phases: Vec<PhaseChannels>,
    handles: Mutex<HashMap<(usize, u32, bool), Arc<Handle>>>,
    /// Steps done per thread.
    done: Vec<AtomicU64>,
    /// Per thread: woken when it finishes a step, and how many threads
    /// wait for it. (One wake-up for all once woke every waiting thread
    /// at every step of every thread: a PostgreSQL trace's 40 threads
    /// and million steps spent the replay's CPU on wake-ups.)
    wake: Vec<(Mutex<()>, Condvar)>,
    waiters: Vec<AtomicU64>,
    /// Threads spinning out a think time, and how many may.
    spinners: (AtomicU64, u64),
    /// When each step ended, nanoseconds after the start (for the steps
    /// that follow it as their trigger).
    ends: Vec<Vec<AtomicU64>>,
    errors: Mutex<Vec<String>>,
    error_count: AtomicU64,
    start: Instant,
    think_scale: f64,
    cancel: &'a AtomicBool,
}

const MAX_ERRORS_KEPT: usize = 20;

impl Shared<'_> {
    fn error(&self, what: String) {
        self.error_count.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut e) = self.errors.lock()
            && e.len() < MAX_ERRORS_KEPT
        {
            e.push(what);
        }
    }

    fn channel(&self, phase: usize, kind: ChannelKind) -> &Channel {
        // Every phase has all four channels.
        &self.phases[phase].channels[&kind]
    }

    /// The open file for `step`, opened (and counted) if it is not.
    fn handle(&self, step: &Step, direct: bool, count_open: bool) -> Result<Arc<Handle>, String> {
        let key = (step.phase, step.file, direct);
        let mut map = self
            .handles
            .lock()
            .map_err(|_| "a replay thread panicked".to_string())?;
        if let Some(h) = map.get(&key) {
            if count_open {
                h.opens.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(Arc::clone(h));
        }
        let f = &self.plan.files[&step.file];
        let ch = self.channel(step.phase, f.channel);
        let file = match (&f.in_place, f.channel) {
            (Some(p), ChannelKind::Evidence) => {
                if direct {
                    ch.open_path_unbuffered(p)
                } else {
                    ch.open_path_read_only(p)
                }
            }
            _ => {
                let rel = Path::new(REPLAY_DIR).join(&f.rel);
                match (f.channel, direct) {
                    (ChannelKind::Evidence, false) => ch.open(&rel),
                    (ChannelKind::Evidence, true) => ch.open_path_unbuffered(&ch.dir().join(&rel)),
                    (_, false) => ch.open_read_write(&rel).or_else(|_| ch.create(&rel)),
                    (_, true) => ch.open_unbuffered_read_write(&rel),
                }
            }
        }
        .map_err(|e| e.to_string())?;
        let h = Arc::new(Handle {
            file,
            opens: AtomicU64::new(u64::from(count_open)),
        });
        map.insert(key, Arc::clone(&h));
        Ok(h)
    }

    fn close(&self, step: &Step) {
        if let Ok(mut map) = self.handles.lock() {
            for direct in [false, true] {
                let key = (step.phase, step.file, direct);
                let last = map
                    .get(&key)
                    .is_some_and(|h| h.opens.fetch_sub(1, Ordering::Relaxed) <= 1);
                if last {
                    map.remove(&key);
                }
            }
        }
    }

    fn forget(&self, step: &Step) {
        if let Ok(mut map) = self.handles.lock() {
            map.remove(&(step.phase, step.file, false));
            map.remove(&(step.phase, step.file, true));
        }
    }

    fn wait_for(&self, deps: &[(usize, usize)]) {
        for &(thread, step) in deps {
            if self.done[thread].load(Ordering::Acquire) > step as u64 {
                continue;
            }
            let (lock, cv) = &self.wake[thread];
            let mut g = match lock.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            // Counted before the check, under the lock: a step finished
            // after the check finds the count and notifies under the same
            // lock, so no wake-up is lost.
            self.waiters[thread].fetch_add(1, Ordering::SeqCst);
            while self.done[thread].load(Ordering::SeqCst) <= step as u64
                && !self.cancel.load(Ordering::Relaxed)
            {
                g = match cv.wait_timeout(g, Duration::from_millis(50)) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
            }
            self.waiters[thread].fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// When step `step` of `thread` ended in this replay (once done).
    fn ended(&self, thread: usize, step: usize) -> Instant {
        self.start + Duration::from_nanos(self.ends[thread][step].load(Ordering::Acquire))
    }

    fn finished(&self, thread: usize) {
        self.done[thread].fetch_add(1, Ordering::SeqCst);
        if self.waiters[thread].load(Ordering::SeqCst) > 0 {
            let (lock, cv) = &self.wake[thread];
            let _g = lock.lock();
            cv.notify_all();
        }
    }

    /// Replay one thread's steps.
    fn run_thread(&self, ti: usize) {
        crate::os::precise_sleeps();
        let steps = &self.plan.threads[ti].1;
        let mut buf = AlignedBuffer::new();
        let mut prev_end_trace: Option<u64> = None;
        let mut prev_end_replay = self.start;
        // How late this thread's previous operation started for the
        // replay's own reasons (a sleep that woke late, a wake-up's
        // latency), made up in the think times that follow: a thread's
        // hundred thousand waits each woken tens of microseconds late
        // added seconds to a replay (caseload's own run, replayed at 1.8x
        // its plain length). Device time is never made up: it is in the
        // previous operation's end, which every think time counts from.
        let mut late = Duration::ZERO;
        let scaled = |ns: u64| Duration::from_nanos((ns as f64 * self.think_scale) as u64);
        for (si, step) in steps.iter().enumerate() {
            if self.cancel.load(Ordering::Relaxed) {
                break;
            }
            if step.skip {
                // Left out (a timer's doing that the plain run never saw):
                // done at once, in its place in the thread.
                let now = Instant::now();
                prev_end_trace = Some(step.t + step.dur);
                prev_end_replay = now;
                self.ends[ti][si].store(
                    now.duration_since(self.start).as_nanos() as u64,
                    Ordering::Release,
                );
                self.finished(ti);
                continue;
            }
            // Think time: the recorded gap since this thread's previous
            // operation ended (from the trace's start for its first), the
            // tracer's cost per call taken out. `ideal` is when the step
            // would start with no lateness, `floor` the earliest it may.
            // After another thread's step (waited for): its replayed end
            // plus the recorded latency from its end to this start, on the
            // tracer-free clock; and its end.
            let after = |(tj, sj): (usize, usize)| {
                let c = &self.plan.threads[tj].1[sj];
                let latency = step.t.saturating_sub(c.t.saturating_add(c.dur));
                let end = self.ended(tj, sj);
                (end + scaled(latency), end)
            };
            let (ideal, floor) = match (step.trigger, prev_end_trace) {
                (Some(trigger), Some(_)) => {
                    self.wait_for(&[trigger]);
                    let (ideal, end) = after(trigger);
                    (ideal.max(prev_end_replay), end.max(prev_end_replay))
                }
                // A thread's first step that waits for others (a child
                // for the call that made it) begins its recorded latency
                // after them, not at its recorded time: a process the
                // traced run started late started late for what came
                // before it, which a faster device shortens.
                (_, None) if !step.deps.is_empty() => {
                    self.wait_for(&step.deps);
                    step.deps
                        .iter()
                        .map(|&d| after(d))
                        .fold((self.start, self.start), |a, b| {
                            (a.0.max(b.0), a.1.max(b.1))
                        })
                }
                (_, None) => (self.start + scaled(step.t), self.start),
                (None, Some(prev)) => {
                    // Times are on the tracer-free clock (`take_out_tracer`).
                    // A gap the clock took more than all of is none:
                    // recorded durations hold tracer time too, which the
                    // replay's own operations do not (carrying the excess
                    // into later gaps replayed tsk_loaddb 12% short).
                    let gap = step.t.saturating_sub(prev);
                    (prev_end_replay + scaled(gap), prev_end_replay)
                }
            };
            // Lateness a short think time cannot absorb stays owed.
            let target = ideal.checked_sub(late).unwrap_or(floor);
            wait_until(target.max(floor), &self.spinners);
            self.wait_for(&step.deps);
            let began = Instant::now();
            // A dependency that ended after the target held this step for
            // the devices' sake, as it held the original; what is left past
            // both is the replay's own lateness.
            let held = step
                .deps
                .iter()
                .map(|&(tj, sj)| self.ended(tj, sj))
                .fold(target, Instant::max);
            late = began.saturating_duration_since(held);
            if let Err(e) = self.execute(step, &mut buf) {
                self.error(format!("{} {}: {e}", step.op.name(), self.describe(step)));
            }
            if step.op == Op::Timer {
                // A timer lasts as recorded, on the tracer-free clock (as
                // the think time it was before timers were kept: a pacing
                // loop's timers, a checkpointer's, are as long as the
                // run's pace made them, which the clock best reflects).
                wait_until(began + Duration::from_nanos(step.dur), &self.spinners);
            }
            let ended = Instant::now();
            let p = &self.phases[step.phase];
            let ns = |t: Instant| t.duration_since(self.start).as_nanos() as u64;
            // A message or a timer is a wait, not an operation of the phase.
            if step.is_io() {
                p.first_ns.fetch_min(ns(began), Ordering::Relaxed);
                p.last_ns.fetch_max(ns(ended), Ordering::Relaxed);
                p.ops.fetch_add(1, Ordering::Relaxed);
            }
            prev_end_trace = Some(step.t + step.dur);
            prev_end_replay = ended;
            self.ends[ti][si].store(ns(ended), Ordering::Release);
            self.finished(ti);
        }
    }

    fn describe(&self, step: &Step) -> String {
        match (self.plan.files.get(&step.file), &step.path) {
            (Some(f), _) => format!("{} {}", f.channel, f.rel.display()),
            (None, Some(p)) => format!("{} {}", step.channel, p.display()),
            _ => step.channel.to_string(),
        }
    }

    fn execute(&self, step: &Step, buf: &mut AlignedBuffer) -> Result<(), String> {
        let aligned =
            step.offset.is_multiple_of(4096) && step.len.is_multiple_of(4096) && step.len > 0;
        let direct = step.direct && aligned && cfg!(target_os = "linux");
        let ch = self.channel(step.phase, step.channel);
        let under = |p: &Path| Path::new(REPLAY_DIR).join(p);
        let folder = step.file != 0 && self.plan.files.get(&step.file).is_some_and(|f| f.folder);
        match step.op {
            // A folder opened or closed as a file is a lookup.
            Op::Open | Op::Create | Op::Close if folder => {
                let f = &self.plan.files[&step.file];
                if step.op != Op::Close {
                    ch.exists(under(&f.rel));
                }
                Ok(())
            }
            Op::Open => self.handle(step, false, true).map(|_| ()),
            Op::Create => {
                let f = &self.plan.files[&step.file];
                self.forget(step);
                let file = ch.create(under(&f.rel)).map_err(|e| e.to_string())?;
                let mut map = self
                    .handles
                    .lock()
                    .map_err(|_| "a replay thread panicked".to_string())?;
                map.insert(
                    (step.phase, step.file, false),
                    Arc::new(Handle {
                        file,
                        opens: AtomicU64::new(1),
                    }),
                );
                Ok(())
            }
            Op::Close => {
                self.close(step);
                Ok(())
            }
            Op::Read => {
                let h = self.handle(step, direct, false)?;
                let mut done = 0u64;
                while done < step.len {
                    let n = (step.len - done).min(BUFFER as u64) as usize;
                    let got = h
                        .file
                        .read_at(buf.get(n), step.offset + done)
                        .map_err(|e| e.to_string())?;
                    if got == 0 {
                        return Err(format!("read past the end at {}", step.offset + done));
                    }
                    done += got as u64;
                }
                Ok(())
            }
            Op::Write => {
                let h = self.handle(step, direct, false)?;
                let mut done = 0u64;
                while done < step.len {
                    let n = (step.len - done).min(BUFFER as u64) as usize;
                    h.file
                        .write_all_at(buf.noise(n), step.offset + done)
                        .map_err(|e| e.to_string())?;
                    done += n as u64;
                }
                Ok(())
            }
            Op::Sync => {
                let h = self.handle(step, false, false)?;
                h.file.sync_data().map_err(|e| e.to_string())
            }
            Op::Writeback => {
                let h = self.handle(step, false, false)?;
                h.file
                    .start_writeback(step.offset, step.len, step.wait)
                    .map_err(|e| e.to_string())
            }
            Op::Truncate => {
                let h = self.handle(step, false, false)?;
                h.file.set_len(step.len).map_err(|e| e.to_string())
            }
            Op::Rename => {
                let (Some(from), Some(to)) = (&step.path, &step.to) else {
                    return Err("a rename without its destination (a version 1 trace)".into());
                };
                ch.rename(under(from), under(to)).map_err(|e| e.to_string())
            }
            Op::Remove => {
                let p = step.path.as_deref().ok_or("a remove without a path")?;
                ch.remove_all(under(p)).map_err(|e| e.to_string())
            }
            Op::Mkdir => {
                let p = step.path.as_deref().ok_or("a mkdir without a path")?;
                ch.create_dir(under(p)).map_err(|e| e.to_string())
            }
            Op::DirSync => {
                let p = step.path.as_deref().unwrap_or(Path::new(""));
                ch.sync_dir(under(p)).map_err(|e| e.to_string())
            }
            Op::Stat => {
                if let Some(p) = &step.path
                    && !p.as_os_str().is_empty()
                {
                    ch.exists(under(p));
                }
                Ok(())
            }
            // A message's wait was its dependency (`pair_messages`).
            Op::Add | Op::Thread | Op::Phase | Op::Send | Op::Recv | Op::Timer => Ok(()),
        }
    }
}

/// Wait until `target`: asleep until shortly before it, then spinning, so a
/// think time of a few microseconds is not stretched to a sleep's
/// granularity (tens of microseconds, thousands of times over). Only
/// `spinners.1` threads spin at once, one fewer than the CPUs: the others
/// sleep the rest, so that a trace of many threads (a database server's)
/// does not spend the CPUs its own steps need on waiting.
fn wait_until(target: Instant, spinners: &(AtomicU64, u64)) {
    const SPIN: Duration = Duration::from_micros(100);
    loop {
        let now = Instant::now();
        if now >= target {
            return;
        }
        let left = target - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
            continue;
        }
        if spinners.0.fetch_add(1, Ordering::Relaxed) < spinners.1 {
            while Instant::now() < target {
                std::hint::spin_loop();
            }
            spinners.0.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        spinners.0.fetch_sub(1, Ordering::Relaxed);
        std::thread::sleep(left);
    }
}

/// A reusable buffer aligned for direct I/O, and incompressible bytes to
/// write.
struct AlignedBuffer {
    data: Vec<u8>,
    noise: Vec<u8>,
}

impl AlignedBuffer {
    fn new() -> Self {
        AlignedBuffer {
            data: Vec::new(),
            noise: Vec::new(),
        }
    }

    fn get(&mut self, n: usize) -> &mut [u8] {
        if self.data.len() < n + 4096 {
            self.data = vec![0; n + 4096];
        }
        let skip = self.data.as_ptr().align_offset(4096).min(4095);
        &mut self.data[skip..skip + n]
    }

    fn noise(&mut self, n: usize) -> &[u8] {
        if self.noise.len() < n + 4096 {
            self.noise = caseload_digests::select::noise(n.max(1 << 16) + 4096, 0x5eed);
        }
        let skip = self.noise.as_ptr().align_offset(4096).min(4095);
        &self.noise[skip..skip + n]
    }
}

/// Replay `spec` (see the module documentation); the report is also
/// written as `run.json` in the layout's case directory.
pub fn replay(spec: &ReplaySpec, cancel: &AtomicBool) -> Result<RunReport, ReplayError> {
    // Without an evidence directory in the layout, stand-ins go beside the
    // case (still counted on the evidence channel).
    let mut layout = spec.layout.clone();
    let mut evidence_beside_case = None;
    if !layout.channels.contains_key(&ChannelKind::Evidence)
        && let Some(case) = layout.channels.get(&ChannelKind::Case).cloned()
    {
        layout
            .channels
            .insert(ChannelKind::Evidence, case.join(STAND_IN_DIR));
        evidence_beside_case = Some(case);
    }
    let spec = &ReplaySpec {
        layout,
        ..spec.clone()
    };
    let started_at = crate::casedb::now_utc();
    let file = crate::channel::Channel::new(
        ChannelKind::Case,
        spec.trace.parent().unwrap_or(Path::new(".")),
        Vec::new(),
    )
    .open_path_read_only(&spec.trace)
    .map_err(|e| ReplayError::Refused(e.to_string()))?;
    let plan = plan(spec, std::io::BufReader::with_capacity(1 << 20, file))?;
    let dir = |k: ChannelKind| -> Result<PathBuf, ReplayError> {
        spec.layout.channels.get(&k).cloned().ok_or_else(|| {
            ReplayError::Refused(format!(
                "the layout has no {k} channel, which the trace uses"
            ))
        })
    };
    // Evidence: given files stand for the trace's, in first-use order.
    let mut files = plan.files.clone();
    let mut evidence_ids: Vec<(u64, u32)> = plan
        .threads
        .iter()
        .flat_map(|(_, s)| s.iter())
        .filter(|s| s.channel == ChannelKind::Evidence && s.file != 0)
        .map(|s| (s.t, s.file))
        .collect();
    evidence_ids.sort_unstable();
    let mut order: Vec<u32> = Vec::new();
    for (_, id) in evidence_ids {
        if !order.contains(&id) {
            order.push(id);
        }
    }
    let mut notes = plan.notes.clone();
    if !spec.evidence.is_empty() {
        if spec.evidence.len() != order.len() {
            return Err(ReplayError::Refused(format!(
                "--evidence gives {} file(s) for the trace's {} evidence file(s), which it reads in this order: {}",
                spec.evidence.len(),
                order.len(),
                order
                    .iter()
                    .map(|id| files[id].rel.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for (id, given) in order.iter().zip(&spec.evidence) {
            let need = furthest_read(&plan, *id);
            let len = std::fs::metadata(given).map(|m| m.len()).map_err(|e| {
                ReplayError::Refused(format!("--evidence {}: {e}", given.display()))
            })?;
            if len < need {
                return Err(ReplayError::Refused(format!(
                    "--evidence {} holds {len} bytes, but the trace reads its stand-in up to byte {need}",
                    given.display()
                )));
            }
            if let Some(f) = files.get_mut(id) {
                f.in_place = Some(given.clone());
            }
        }
    }
    // Trace evidence that is not there is made as a stand-in.
    let mut stand_ins: Vec<(u32, u64)> = Vec::new();
    for id in &order {
        let f = files
            .get_mut(id)
            .ok_or_else(|| ReplayError::Refused("lost an evidence file".into()))?;
        let exists = f
            .in_place
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.len() >= furthest_read(&plan, *id));
        if !exists {
            f.in_place = None;
            stand_ins.push((*id, furthest_read(&plan, *id)));
        }
    }
    if !stand_ins.is_empty() {
        notes.push(format!(
            "{} evidence file(s) not found where the trace read them: replayed from incompressible stand-ins of the size read",
            stand_ins.len()
        ));
    }
    let plan = Plan { files, ..plan };
    // The writable channels exist, are writable and are not the evidence.
    let protected: Vec<PathBuf> = plan
        .files
        .values()
        .filter_map(|f| f.in_place.as_ref())
        .map(|p| crate::os::resolve(p).unwrap_or_else(|_| p.clone()))
        .collect();
    spec.layout
        .check_writable(&protected)
        .map_err(|e| ReplayError::Refused(e.to_string()))?;
    // Room for the files before anything is written.
    let mut needs: BTreeMap<ChannelKind, u64> = plan.space.clone();
    for (_, size) in &stand_ins {
        *needs.entry(ChannelKind::Evidence).or_default() += size;
    }
    for (kind, need) in &needs {
        let d = dir(*kind)?;
        // The directory may not exist yet: its nearest existing folder.
        let existing = d.ancestors().find(|a| a.exists()).unwrap_or(&d);
        if let Some(free) = crate::os::free_bytes(existing)
            && free < *need
        {
            return Err(ReplayError::Refused(format!(
                "the {kind} channel ({}) has {free} bytes free, and the trace's files there need up to {need}: nothing was written",
                d.display()
            )));
        }
    }
    let case_dir = dir(ChannelKind::Case)?;
    let writable: Vec<ChannelKind> = [ChannelKind::Database, ChannelKind::Case, ChannelKind::Temp]
        .into_iter()
        .filter(|k| spec.layout.channels.contains_key(k))
        .collect();
    let earlier = case_dir.join("run.json").exists()
        || writable
            .iter()
            .chain(std::iter::once(&ChannelKind::Evidence))
            .any(|k| {
                spec.layout
                    .channels
                    .get(k)
                    .is_some_and(|d| d.join(REPLAY_DIR).exists())
            });
    if earlier && !spec.force {
        return Err(ReplayError::Refused(format!(
            "{} already holds a run or replay (run.json or replay/); give --force to replace it",
            case_dir.display()
        )));
    }
    if let Some(case) = &evidence_beside_case {
        Channel::new(ChannelKind::Case, case, Vec::new()).create_dir(STAND_IN_DIR)?;
    }
    // Set up on channels of their own: their I/O is not the replay's.
    let setup: BTreeMap<ChannelKind, Channel> = ChannelKind::ALL
        .into_iter()
        .filter_map(|k| {
            Some((
                k,
                Channel::new(k, spec.layout.channels.get(&k)?.clone(), Vec::new()),
            ))
        })
        .collect();
    for (k, ch) in &setup {
        ch.remove_all(REPLAY_DIR)?;
        if *k != ChannelKind::Evidence || !stand_ins.is_empty() {
            ch.create_dir(REPLAY_DIR)?;
        }
    }
    let mut buf = AlignedBuffer::new();
    let mut fill = |ch: &Channel, rel: &Path, size: u64| -> Result<(), ReplayError> {
        let file = ch.create(Path::new(REPLAY_DIR).join(rel))?;
        let mut at = 0u64;
        while at < size {
            let n = (size - at).min(BUFFER as u64) as usize;
            file.write_all_at(buf.noise(n), at)
                .map_err(|e| ReplayError::Refused(format!("making {}: {e}", rel.display())))?;
            at += n as u64;
        }
        file.sync_data()
            .map_err(|e| ReplayError::Refused(format!("making {}: {e}", rel.display())))?;
        Ok(())
    };
    for (id, size) in &stand_ins {
        fill(&setup[&ChannelKind::Evidence], &plan.files[id].rel, *size)?;
    }
    for f in plan
        .files
        .values()
        .filter(|f| f.channel != ChannelKind::Evidence && f.existed)
    {
        let ch = setup.get(&f.channel).ok_or_else(|| {
            ReplayError::Refused(format!("the layout has no {} channel", f.channel))
        })?;
        if f.folder {
            ch.create_dir(Path::new(REPLAY_DIR).join(&f.rel))?;
        } else {
            fill(ch, &f.rel, f.fill)?;
        }
    }
    // Files the trace creates have their folders; those it makes itself
    // with mkdir are left to it.
    let mkdirs: std::collections::HashSet<(ChannelKind, PathBuf)> = plan
        .threads
        .iter()
        .flat_map(|(_, s)| s.iter())
        .filter(|s| s.op == Op::Mkdir)
        .filter_map(|s| Some((s.channel, s.path.clone()?)))
        .collect();
    for f in plan
        .files
        .values()
        .filter(|f| f.channel != ChannelKind::Evidence && !f.existed)
    {
        if let Some(parent) = f.rel.parent().filter(|p| !p.as_os_str().is_empty())
            && !mkdirs.contains(&(f.channel, parent.to_path_buf()))
            && let Some(ch) = setup.get(&f.channel)
        {
            ch.create_dir(Path::new(REPLAY_DIR).join(parent))?;
        }
    }
    // The cache as asked.
    let evidence_files: Vec<PathBuf> = plan
        .files
        .values()
        .filter_map(|f| f.in_place.clone())
        .collect();
    let dirs: Vec<PathBuf> = setup.values().map(|c| c.dir().join(REPLAY_DIR)).collect();
    let cache_report = match spec.cache {
        CacheMode::Cold => cache::make_cold(&evidence_files, &dirs),
        CacheMode::Warm => CacheReport {
            mode: CacheMode::Warm,
            method: cache::CacheMethod::None,
            honoured: true,
            note: "page cache left as it was after the replay's files were made".into(),
        },
    };
    let model = match &spec.workstation {
        Some(w) => {
            let evidence_bytes: u64 = order.iter().map(|id| furthest_read(&plan, *id)).sum();
            let memory = w
                .plan(
                    evidence_bytes.max(1),
                    plan.threads.len(),
                    crate::workstation::Suite::Ftk,
                    false,
                    &BTreeMap::new(),
                )
                .map_err(|e| ReplayError::Refused(e.to_string()))?;
            notes.push(format!(
                "modelled page cache: {} bytes (--ram {} for {} bytes of evidence read)",
                memory.cache_budget_bytes, w.ram, evidence_bytes
            ));
            Some(Arc::new(crate::cache::model::PageCacheModel::new(
                memory.cache_budget_bytes,
            )))
        }
        None => None,
    };
    let phases: Vec<PhaseChannels> = plan
        .phase_names
        .iter()
        .map(|_| PhaseChannels {
            channels: ChannelKind::ALL
                .into_iter()
                .map(|k| {
                    let ch = Channel::new(
                        k,
                        spec.layout.channels.get(&k).cloned().unwrap_or_default(),
                        Vec::new(),
                    );
                    if let Some(m) = &model {
                        ch.set_page_cache(Arc::clone(m));
                    }
                    (k, ch)
                })
                .collect(),
            first_ns: AtomicU64::new(u64::MAX),
            last_ns: AtomicU64::new(0),
            ops: AtomicU64::new(0),
        })
        .collect();
    let before: Vec<Vec<ChannelSnapshot>> = phases
        .iter()
        .map(|p| p.channels.values().map(Channel::snapshot).collect())
        .collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if plan.threads.len() > cpus {
        notes.push(format!(
            "the trace has {} threads and this machine {cpus} CPUs: replayed with all its threads, which share the CPUs",
            plan.threads.len()
        ));
    }
    let scope = if metrics::reset_peak_rss() {
        PeakScope::Stage
    } else {
        PeakScope::Process
    };
    let cpu_before = CpuTimes::now();
    let shared = Shared {
        plan: &plan,
        phases,
        handles: Mutex::new(HashMap::new()),
        done: plan.threads.iter().map(|_| AtomicU64::new(0)).collect(),
        wake: plan
            .threads
            .iter()
            .map(|_| (Mutex::new(()), Condvar::new()))
            .collect(),
        waiters: plan.threads.iter().map(|_| AtomicU64::new(0)).collect(),
        spinners: (AtomicU64::new(0), (cpus as u64).saturating_sub(1).max(1)),
        ends: plan
            .threads
            .iter()
            .map(|(_, steps)| steps.iter().map(|_| AtomicU64::new(0)).collect())
            .collect(),
        errors: Mutex::new(Vec::new()),
        error_count: AtomicU64::new(0),
        start: Instant::now(),
        think_scale: spec.think_scale.max(0.0),
        cancel,
    };
    std::thread::scope(|s| {
        for ti in 0..plan.threads.len() {
            let shared = &shared;
            let _ = std::thread::Builder::new()
                .name(format!("replay-{ti}"))
                .spawn_scoped(s, move || shared.run_thread(ti));
        }
    });
    // Every handle closed before the figures are taken.
    if let Ok(mut m) = shared.handles.lock() {
        m.clear();
    }
    let total_wall = shared.start.elapsed().as_secs_f64();
    let cpu = CpuTimes::now().since(&cpu_before);
    let peak = metrics::peak_rss();
    let errors = shared.errors.lock().map(|e| e.clone()).unwrap_or_default();
    let error_count = shared.error_count.load(Ordering::Relaxed);
    let interrupted = cancel.load(Ordering::Relaxed);
    let single = shared.phases.len() == 1;
    let mut stages = Vec::new();
    let mut totals_channels: BTreeMap<ChannelKind, ChannelSnapshot> = BTreeMap::new();
    for (i, (p, b)) in shared.phases.iter().zip(&before).enumerate() {
        let ops = p.ops.load(Ordering::Relaxed);
        if ops == 0 {
            continue;
        }
        let wall = p
            .last_ns
            .load(Ordering::Relaxed)
            .saturating_sub(p.first_ns.load(Ordering::Relaxed)) as f64
            / 1e9;
        let mut channels = BTreeMap::new();
        for ((k, c), before) in p.channels.iter().zip(b) {
            let d = c.snapshot().since(before);
            let t = totals_channels.entry(*k).or_default();
            *t = t.plus(&d);
            channels.insert(*k, ChannelFigures::from_counters(d, wall));
        }
        let mut details = BTreeMap::new();
        details.insert("operations".to_string(), serde_json::json!(ops));
        let bytes: u64 = channels
            .values()
            .map(|f| f.counters.bytes_read + f.counters.bytes_written)
            .sum();
        stages.push(StageReport {
            name: plan.phase_names[i].clone(),
            status: if interrupted {
                "interrupted"
            } else {
                "completed"
            }
            .into(),
            error: None,
            wall_seconds: wall,
            // CPU and memory are the process's: one phase has them all.
            cpu_user_seconds: if single { cpu.user.as_secs_f64() } else { 0.0 },
            cpu_system_seconds: if single {
                cpu.system.as_secs_f64()
            } else {
                0.0
            },
            peak_rss_bytes: peak,
            peak_rss_scope: if single { scope } else { PeakScope::Process },
            process_io: None,
            summary: StageSummary {
                items: ops,
                bytes,
                details,
            },
            mb_per_s: if wall > 0.0 {
                bytes as f64 / wall / 1e6
            } else {
                0.0
            },
            recorded: Recorded::default(),
            bound_by: crate::report::bound_by(&channels),
            channels,
            machine: Default::default(),
            memory: Default::default(),
            database_work: Default::default(),
        });
    }
    if let Some(first) = stages.first_mut() {
        first.recorded.errors = error_count;
        if !errors.is_empty() {
            first.error = Some(format!(
                "{error_count} operation(s) failed in the replay; the first: {}",
                errors.join("; ")
            ));
        }
    }
    let evidence_info = SourceInfo {
        format: SourceFormat::Raw,
        files: plan
            .files
            .values()
            .filter(|f| f.channel == ChannelKind::Evidence)
            .map(|f| {
                f.in_place.clone().unwrap_or_else(|| {
                    dir(ChannelKind::Evidence)
                        .unwrap_or_default()
                        .join(REPLAY_DIR)
                        .join(&f.rel)
                })
            })
            .collect(),
        container_bytes: 0,
        media_size: 0,
        chunk_size: None,
        stored_hashes: Default::default(),
        metadata: vec![("trace".into(), spec.trace.display().to_string())],
        notes: notes.clone(),
        read_run_bytes: None,
    };
    let status = if interrupted {
        "interrupted"
    } else if error_count > 0 {
        "completed-with-errors"
    } else {
        "completed"
    };
    let report = RunReport {
        schema: RUN_SCHEMA.into(),
        schema_version: RUN_SCHEMA_VERSION,
        caseload_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        finished_at: crate::casedb::now_utc(),
        status: status.into(),
        workload: Some(format!("trace:{}", spec.trace.display())),
        instance: None,
        threads: plan.threads.len(),
        evidence: evidence_info,
        layout: spec.layout.clone(),
        channels: spec.layout.channels.iter().map(|(k, d)| (*k, ChannelInfo::at(d))).collect(),
        database: crate::casedb::DatabaseInfo {
            path: PathBuf::new(),
            engine: "none (a replayed trace: the database's files are replayed as the trace touched them)".into(),
            backend: Default::default(),
            options: Default::default(),
            url: None,
            settings: BTreeMap::new(),
            accounting: "the replay's own file operations, through the channels".into(),
            bytes_at_start: None,
            bytes_at_end: None,
            note: None,
            server_temp: None,
        },
        cache: cache_report,
        system: SystemContext::current(),
        totals: Totals {
            wall_seconds: if single { total_wall.min(stages.first().map_or(total_wall, |s| s.wall_seconds)) } else { stages.iter().map(|s| s.wall_seconds).sum() },
            channels: totals_channels,
            outside_stages: BTreeMap::new(),
            recorded: Recorded {
                errors: error_count,
                ..Recorded::default()
            },
        },
        stages,
        trace: None,
        preparation: Vec::new(),
        channel_fault: None,
        resumed: None,
        distributed: None,
        workstation: None,
    };
    let case = Channel::new(ChannelKind::Case, case_dir, Vec::new());
    let text =
        serde_json::to_vec_pretty(&report).map_err(|e| ReplayError::Refused(e.to_string()))?;
    let mut f = case.create_instrument("run.json")?;
    std::io::Write::write_all(&mut f, &text)
        .and_then(|()| f.sync_all())
        .map_err(|e| ReplayError::Refused(format!("writing run.json: {e}")))?;
    Ok(report)
}

/// The furthest byte the trace reads of file `id`.
fn furthest_read(plan: &Plan, id: u32) -> u64 {
    plan.threads
        .iter()
        .flat_map(|(_, s)| s.iter())
        .filter(|s| s.file == id && s.op == Op::Read)
        .map(|s| s.offset.saturating_add(s.len))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(t: u64, dur: u64, calls: u32) -> Step {
        Step {
            t,
            dur,
            file: 1,
            op: Op::Read,
            offset: 0,
            len: 1,
            direct: false,
            calls,
            channel: ChannelKind::Database,
            path: None,
            to: None,
            phase: 0,
            deps: Vec::new(),
            trigger: None,
            stream: None,
            wait: false,
            sent_by: None,
            wall: 0,
            skip: false,
        }
    }

    fn times(threads: &[(String, Vec<Step>)]) -> Vec<Vec<u64>> {
        threads
            .iter()
            .map(|(_, s)| s.iter().map(|s| s.t).collect())
            .collect()
    }

    fn client_and_server() -> Vec<(String, Vec<Step>)> {
        // A client waiting 10 ms for a server that made 90 stops meanwhile.
        vec![
            (
                "client".to_string(),
                vec![step(0, 0, 1), step(10_000_000, 0, 1)],
            ),
            (
                "server".to_string(),
                vec![step(1_000_000, 0, 40), step(5_000_000, 0, 50)],
            ),
        ]
    }

    #[test]
    fn every_threads_stops_move_every_later_step_back() {
        // The client's think time loses the server's stops too, not only
        // its own: 92 stops of 10 us before its second step.
        let mut threads = client_and_server();
        let note = take_out_tracer(&mut threads, 10_000, None, &[]).unwrap();
        assert_eq!(
            times(&threads),
            vec![vec![0, 9_080_000], vec![590_000, 4_090_000]],
            "{note}"
        );
        assert!(note.contains("92 stops"), "{note}");
    }

    #[test]
    fn steps_wait_only_for_what_could_change_them() {
        let at = |t: u64, op: Op, offset: u64, len: u64| Step {
            op,
            offset,
            len,
            ..step(t, 10, 1)
        };
        // One file of 8 KiB before the trace. A writes in place, then past
        // the end; B reads after each write, writes in place and syncs; C
        // opens late, then renames the file away after B's sync.
        let mut threads = vec![
            (
                "A".to_string(),
                vec![at(0, Op::Write, 0, 4096), at(100, Op::Write, 8192, 4096)],
            ),
            (
                "B".to_string(),
                vec![
                    at(50, Op::Read, 0, 4096),
                    at(60, Op::Write, 4096, 4096),
                    at(200, Op::Read, 8192, 4096),
                    at(250, Op::Sync, 0, 0),
                ],
            ),
            (
                "C".to_string(),
                vec![at(70, Op::Open, 0, 0), at(300, Op::Rename, 0, 0)],
            ),
        ];
        let keys: Vec<Vec<Vec<usize>>> = threads
            .iter()
            .map(|(_, s)| vec![vec![0]; s.len()])
            .collect();
        let order = times(&threads);
        let n = find_deps(&mut threads, &keys, &order);
        let deps = |ti: usize, si: usize| threads[ti].1[si].deps.clone();
        // A read waits for the write before it; an in-place write for
        // nothing; an open for nothing that changed the file.
        assert_eq!(deps(1, 0), vec![(0, 0)]);
        assert_eq!(deps(1, 1), vec![]);
        assert_eq!(deps(2, 0), vec![]);
        // A write past the end is waited for by the read of its bytes,
        // and itself waits for no one's write or open.
        assert_eq!(deps(1, 2), vec![(0, 1)]);
        assert_eq!(deps(0, 1), vec![]);
        // A sync waits for no other thread's write.
        assert_eq!(deps(1, 3), vec![]);
        // A rename waits for every earlier step of the others.
        let mut r = deps(2, 1);
        r.sort_unstable();
        assert_eq!(r, vec![(0, 1), (1, 3)]);
        assert_eq!(n, 4);
    }

    #[test]
    fn what_a_timer_the_plain_run_never_saw_run_out_did_is_left_out() {
        let at = |t: u64, op: Op| Step {
            op,
            stream: matches!(op, Op::Send | Op::Recv).then_some(0),
            ..step(t, 0, 1)
        };
        // The plain run lasted 10 ms. A launcher naps 30 ms from 2 ms: its
        // timer runs out after that, so its request to the server (a send,
        // then a write) never happened, nor the server's work for it (a
        // read, a send to a worker it starts, the worker's write), up to
        // the server's next receive, a client's query, which is kept with
        // what follows it. A 1 ms timer at 1 ms ran out in the plain run.
        let timer = |t: u64, wall: u64| Step {
            wall,
            ..at(t, Op::Timer)
        };
        let mut threads = vec![
            (
                "launcher".to_string(),
                vec![
                    timer(1_000_000, 1_000_000),
                    at(1_500_000, Op::Write),
                    timer(2_000_000, 30_000_000),
                    at(32_000_000, Op::Send),
                    at(32_100_000, Op::Write),
                ],
            ),
            (
                "server".to_string(),
                vec![
                    at(32_200_000, Op::Recv),
                    at(32_300_000, Op::Read),
                    at(32_400_000, Op::Send),
                    at(33_000_000, Op::Recv),
                    at(33_100_000, Op::Write),
                ],
            ),
            (
                "worker".to_string(),
                vec![at(32_500_000, Op::Recv), at(32_600_000, Op::Write)],
            ),
            (
                "client".to_string(),
                vec![at(32_900_000, Op::Send), at(34_000_000, Op::Read)],
            ),
        ];
        threads[1].1[0].sent_by = Some((0, 3));
        threads[2].1[0].sent_by = Some((1, 2));
        threads[1].1[3].sent_by = Some((3, 0));
        // The client's read waits (by the file rules) for the worker's
        // write: it moves to the worker's latest kept step, of which there
        // is none.
        threads[3].1[1].deps = vec![(2, 1), (1, 4)];
        let order = times(&threads);
        let note = skip_unfired_timers(&mut threads, &order, 10_000_000).unwrap();
        let skipped: Vec<Vec<bool>> = threads
            .iter()
            .map(|(_, s)| s.iter().map(|s| s.skip).collect())
            .collect();
        assert_eq!(
            skipped,
            vec![
                vec![false, false, true, true, true],
                vec![true, true, true, false, false],
                vec![true, true],
                vec![false, false],
            ]
        );
        assert_eq!(threads[3].1[1].deps, vec![(1, 4)]);
        assert!(
            note.starts_with("1 timers") && note.contains("3 operations (3 bytes"),
            "{note}"
        );
        // Without a timer past the end nothing is left out.
        let mut threads = vec![(
            "a".to_string(),
            vec![timer(0, 5_000_000), at(6_000_000, Op::Write)],
        )];
        let order = times(&threads);
        assert!(skip_unfired_timers(&mut threads, &order, 10_000_000).is_none());
        assert!(!threads[0].1[1].skip);
    }

    #[test]
    fn a_step_that_idled_until_another_threads_ended_follows_it() {
        // The client's second step begins 50 us after the server's sync
        // (3 ms after the client's own previous step): it follows the
        // sync. The server's second step began 1 ms after the client's
        // first, having been busy until just before: not idle enough.
        let mut threads = vec![
            (
                "client".to_string(),
                vec![step(0, 1_000, 1), step(3_051_000, 0, 1)],
            ),
            (
                "server".to_string(),
                vec![step(500, 900_000, 1), step(1_001_000, 2_000_000, 1)],
            ),
        ];
        let order: Vec<Vec<u64>> = threads
            .iter()
            .map(|(_, s)| s.iter().map(|s| s.t).collect())
            .collect();
        assert_eq!(find_triggers(&mut threads, &order), 1);
        assert_eq!(threads[0].1[1].trigger, Some((1, 1)));
        assert_eq!(threads[1].1[1].trigger, None);
        // Long after the other ended, it is the thread's own think time.
        threads[0].1[1].t = 9_000_000;
        threads[0].1[1].trigger = None;
        assert_eq!(find_triggers(&mut threads, &order), 0);
    }

    #[test]
    fn a_receive_waits_for_the_send_that_supplied_its_last_byte() {
        let msg = |t: u64, dur: u64, op: Op, stream: u32, len: u64| Step {
            op,
            len,
            file: 0,
            stream: Some(stream),
            ..step(t, dur, 1)
        };
        // A client sends 100 bytes in two sends; the server receives 60,
        // then 40 (waiting from 0 until the second send); then answers,
        // and the client receives it, having waited since its send. A
        // third thread receives on a stream no one in the trace sent on.
        let mut threads = vec![
            (
                "client".to_string(),
                vec![
                    msg(0, 10, Op::Send, 0, 60),
                    msg(5_000, 10, Op::Send, 0, 40),
                    msg(5_020, 20_000, Op::Recv, 1, 8),
                ],
            ),
            (
                "server".to_string(),
                vec![
                    msg(0, 100, Op::Recv, 0, 60),
                    msg(200, 4_900, Op::Recv, 0, 40),
                    msg(20_000, 10, Op::Send, 1, 8),
                ],
            ),
            ("other".to_string(), vec![msg(0, 10, Op::Recv, 2, 1)]),
        ];
        // Receives are ordered at their ends (see `plan`).
        let order: Vec<Vec<u64>> = threads
            .iter()
            .map(|(_, st)| {
                st.iter()
                    .map(|s| if s.op == Op::Recv { s.t + s.dur } else { s.t })
                    .collect()
            })
            .collect();
        assert_eq!(pair_messages(&mut threads, &order), (3, 1));
        assert_eq!(threads[1].1[0].deps, vec![(0, 0)]);
        assert_eq!(
            threads[1].1[1].deps,
            vec![(0, 1)],
            "its last byte came with the second send"
        );
        assert_eq!(
            threads[0].1[2].deps,
            vec![(1, 2)],
            "though it began waiting before the answer"
        );
        assert!(threads[2].1[0].deps.is_empty());
    }

    #[test]
    fn the_tracers_time_never_runs_the_clock_backwards() {
        // 200 stops in the first millisecond at 10 us each: 2 ms of tracer
        // time where 1 ms passed. The clock stands still until the rest is
        // taken out of the time that follows, and never goes back.
        let mut threads = vec![(
            "a".to_string(),
            vec![
                step(0, 0, 1),
                step(900_000, 0, 1),
                step(1_500_000, 0, 1),
                step(10_000_000, 0, 1),
            ],
        )];
        take_out_tracer(&mut threads, 10_000, None, &[(0, 200), (5_000_000, 10)]).unwrap();
        assert_eq!(times(&threads), vec![vec![0, 0, 0, 7_900_000]]);
        // Its stops counted per record instead: the same bound.
        let mut threads = vec![(
            "a".to_string(),
            vec![step(0, 0, 1), step(900_000, 0, 199), step(1_500_000, 0, 1)],
        )];
        take_out_tracer(&mut threads, 10_000, None, &[]).unwrap();
        let t = &times(&threads)[0];
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
        assert_eq!(t[1], 0);
    }

    #[test]
    fn with_the_plain_length_the_clock_ends_there() {
        let mut threads = client_and_server();
        let note = take_out_tracer(&mut threads, 10_000, Some(5_000_000), &[]).unwrap();
        assert!(times(&threads)[0][1].abs_diff(5_000_000) <= 1, "{note}");
        // Nothing to take out: the trace is left as it is.
        let mut threads = client_and_server();
        assert!(take_out_tracer(&mut threads, 0, None, &[]).is_none());
        assert_eq!(times(&threads), times(&client_and_server()));
    }
}
