//! `caseload trace import`: another tool's trace into caseload's.
//!
//! Each source format has a reader that turns the file into
//! [`RawEvent`]s (`procmon_csv`, `pml`, `strace`); the [`Importer`] here
//! maps their paths to channels (`--map PREFIX=CHANNEL`), numbers threads
//! and files, keeps what a replay reproduces, and counts what it leaves
//! out and why, so the user sees what the import did not take.
//!
//! What is kept: the application's own calls. Process Monitor's Paging I/O
//! rows are the cache manager and memory manager moving pages; the
//! replaying machine's page cache makes its own, so replaying them too
//! would count those bytes twice (left out unless `--keep-paging`).
//! Failed reads and writes (`FAST IO DISALLOWED` is retried as an IRP with
//! the same offset and length; `END OF FILE` moved nothing) are left out;
//! a failed open is a lookup and is kept as a `stat`.

pub mod error;
pub mod pml;
pub mod procmon_csv;
pub mod strace;

use crate::event::{RawEvent, RawOp};
use crate::format::{self, Channel, Op, Record};
use error::FormatError;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// The source formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceFormat {
    /// Process Monitor's CSV export.
    ProcmonCsv,
    /// Process Monitor's native log.
    ProcmonPml,
    /// `strace -f -ttt -T [-y]` output.
    Strace,
    /// caseload's own trace (`run --trace`'s `trace.csv`, or an import).
    Caseload,
}

impl SourceFormat {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::ProcmonCsv => "procmon-csv",
            SourceFormat::ProcmonPml => "procmon-pml",
            SourceFormat::Strace => "strace",
            SourceFormat::Caseload => "caseload",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<SourceFormat> {
        [
            SourceFormat::ProcmonCsv,
            SourceFormat::ProcmonPml,
            SourceFormat::Strace,
            SourceFormat::Caseload,
        ]
        .into_iter()
        .find(|f| f.name() == name)
    }

    /// The format of a file that begins with `head` (its first few KiB).
    pub fn guess(head: &[u8]) -> Option<SourceFormat> {
        if head.starts_with(b"PML_") {
            return Some(SourceFormat::ProcmonPml);
        }
        if head.starts_with(format::HEADER_V1.as_bytes())
            || head.starts_with(format::HEADER_V2.as_bytes())
        {
            return Some(SourceFormat::Caseload);
        }
        let text = String::from_utf8_lossy(head);
        let text = text.trim_start_matches('\u{feff}');
        let first = text.lines().next().unwrap_or("");
        if first.contains("\"Process Name\"") || first.contains("Process Name,") {
            return Some(SourceFormat::ProcmonCsv);
        }
        if text.lines().take(20).any(strace::looks_like_line) {
            return Some(SourceFormat::Strace);
        }
        None
    }
}

/// `--map PREFIX=CHANNEL`: paths under the prefix belong to the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMap {
    /// The prefix as given.
    pub prefix: String,
    /// The channel.
    pub channel: Channel,
}

impl PathMap {
    /// Parse `PREFIX=CHANNEL` (the last `=` separates them: a prefix may
    /// hold one).
    pub fn parse(text: &str) -> Result<PathMap, String> {
        let (prefix, channel) = text
            .rsplit_once('=')
            .ok_or_else(|| format!("`{text}`: a map is PREFIX=CHANNEL, e.g. 'F:\\=evidence'"))?;
        let channel = Channel::parse(channel.trim()).ok_or_else(|| {
            format!("`{text}`: `{channel}` is not a channel (evidence, database, case, temp)")
        })?;
        if prefix.is_empty() {
            return Err(format!("`{text}`: the prefix is empty"));
        }
        Ok(PathMap {
            prefix: prefix.to_string(),
            channel,
        })
    }

    /// Windows paths (a drive letter, UNC or device path) compare without
    /// case, as Windows does; others byte for byte.
    fn windows(&self) -> bool {
        is_windows_path(&self.prefix)
    }
}

fn is_windows_path(p: &str) -> bool {
    let b = p.as_bytes();
    (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
        || p.starts_with("\\\\")
        || p.starts_with("\\Device\\")
}

/// The part of `path` under `map`'s prefix, as a relative path with `/`
/// between its components (empty: the prefix itself), or `None` when
/// `path` is not under it.
fn relative<'a>(map: &PathMap, path: &'a str) -> Option<String> {
    let prefix = map.prefix.as_str();
    let rest: &'a str = if map.windows() {
        let head = path.get(..prefix.len())?;
        if !head.eq_ignore_ascii_case(prefix) {
            return None;
        }
        &path[prefix.len()..]
    } else {
        path.strip_prefix(prefix)?
    };
    // `F:\` maps `F:\x`; `/mnt/ev` maps `/mnt/ev/x` and `/mnt/ev`, not `/mnt/evil`.
    let sep = |c: char| c == '/' || c == '\\';
    if !rest.is_empty() && !prefix.ends_with(sep) && !rest.starts_with(sep) {
        return None;
    }
    let parts: Vec<&str> = rest
        .split(sep)
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
        .collect();
    Some(parts.join("/"))
}

/// What an import takes and leaves.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Path prefixes and their channels; the longest matching prefix wins.
    pub maps: Vec<PathMap>,
    /// Keep only these processes (names, without case); empty: all.
    pub processes: Vec<String>,
    /// Keep Process Monitor's Paging I/O rows too.
    pub keep_paging: bool,
    /// A strace tracer's cost per call, in nanoseconds, recorded in the
    /// trace so the replay takes it out of the think time.
    pub tracer_overhead_ns: Option<u64>,
    /// The tracer's share of each recorded call duration, taken off every
    /// duration as it is imported (strace's `-T` includes its own
    /// handling; see `strace::StraceInfo::in_call_ns`).
    pub tracer_in_call_ns: u64,
    /// `# key value` comments to write into the trace's header.
    pub meta: Vec<(String, String)>,
    /// Leave out files whose name (last component) matches one of these
    /// (`*` at the end: a prefix; at the start: a suffix): a tool's own
    /// bookkeeping, such as
    /// caseload's `trace.csv` and `run.json` when the traced tool is
    /// caseload.
    pub exclude: Vec<String>,
    /// The source is a tracer that stopped the traced threads at every
    /// call (strace): when it stopped them is kept, per millisecond, for
    /// the replay to take the tracer's time out where it was spent.
    pub tracer_stops: bool,
}

/// Whether a path's last component matches a `--exclude` pattern.
fn excluded(patterns: &[String], path: &str) -> bool {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    patterns
        .iter()
        .any(|p| match (p.strip_suffix('*'), p.strip_prefix('*')) {
            (Some(prefix), _) => name.starts_with(prefix),
            (None, Some(suffix)) => name.ends_with(suffix),
            (None, None) => name == p,
        })
}

/// Operations and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Events or operations.
    pub events: u64,
    /// Bytes read or written by them.
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: u64) {
        self.events += 1;
        self.bytes += bytes;
    }
}

/// What one channel of the imported trace holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChannelTotals {
    /// Reads.
    pub read: Tally,
    /// Writes.
    pub write: Tally,
    /// Syncs.
    pub syncs: u64,
    /// Every other operation (open, create, close, truncate, rename,
    /// remove, mkdir, stat).
    pub other_ops: u64,
    /// Distinct files.
    pub files: u64,
}

/// What an import did: kept per channel, left out per reason.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ImportReport {
    /// Events the source held.
    pub events: u64,
    /// Records written (operations, threads, files).
    pub records: u64,
    /// Threads kept.
    pub threads: u64,
    /// What each channel holds.
    pub channels: BTreeMap<Channel, ChannelTotals>,
    /// What was left out, by reason.
    pub left_out: BTreeMap<String, Tally>,
    /// The folders holding the most bytes left out as unmapped (up to
    /// 10), with their events and bytes.
    pub top_unmapped: Vec<(String, Tally)>,
    /// The source's duration, first event to last, seconds.
    pub seconds: f64,
    /// Messages between threads and processes kept (sockets and pipes
    /// whose ends the source names: strace with `-yy`).
    pub messages: Messages,
}

/// Messages between threads kept by an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Messages {
    /// Sends, and their bytes.
    pub sent: Tally,
    /// Receives, and their bytes.
    pub received: Tally,
    /// Streams (a socket's direction, a pipe) and wake-up keys (a futex,
    /// a thread's exit) they went through.
    pub streams: u64,
    /// Wake-ups (a futex woken, a thread or process ended).
    pub wakes: u64,
    /// Waits that ended woken (a futex wait, a join, a child reaped).
    pub woken: u64,
    /// Timers that ran out (waits that timed out, after which the thread
    /// went on by itself).
    pub timers: u64,
}

impl ImportReport {
    /// Operations kept, on all channels.
    pub fn kept_ops(&self) -> u64 {
        self.channels
            .values()
            .map(|c| c.read.events + c.write.events + c.syncs + c.other_ops)
            .sum()
    }
}

/// An import that cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The source file is bad.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Nothing of the trace maps to a channel.
    #[error(
        "no operation of the trace maps to a channel ({kept} kept of {events} events); give --map PREFIX=CHANNEL for the paths it uses. The folders with the most bytes: {top}"
    )]
    NothingMapped {
        /// Events read.
        events: u64,
        /// Operations kept.
        kept: u64,
        /// The top unmapped folders, described.
        top: String,
    },
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Write(#[from] std::io::Error),
}

/// The width of the tracer-stop histogram's buckets (`# stops MS N`).
pub const STOP_BUCKET_NS: u64 = 1_000_000;

/// Turns [`RawEvent`]s into records (see the module documentation).
pub struct Importer<'a> {
    opts: &'a ImportOptions,
    out: &'a mut dyn Write,
    line: Vec<u8>,
    t0: Option<u64>,
    last_t: u64,
    threads: HashMap<(u32, u32), u32>,
    files: HashMap<(Channel, String), u32>,
    unmapped: HashMap<String, Tally>,
    report: ImportReport,
    error: Option<std::io::Error>,
    processes: Vec<String>,
    maps: Vec<PathMap>,
    /// Per source thread, calls of events left out since its last kept
    /// one: their tracer stops are in the next kept one's gap.
    carried: HashMap<(u32, u32), u32>,
    /// Windows paths compare without case: each folder and file as first
    /// spelled, by its lower-case form, so `C:\Users` and `C:\users` are
    /// one folder on a replaying machine whose names have case.
    spelling: HashMap<(Channel, String), String>,
    /// Streams messages went through.
    streams: std::collections::HashSet<String>,
    /// The tracer's stops of every thread, kept or not, per millisecond
    /// of the trace (`# stops MS N` at the trace's end).
    stops: BTreeMap<u64, u64>,
}

impl<'a> Importer<'a> {
    /// An importer writing a version 2 trace to `out`.
    pub fn new(opts: &'a ImportOptions, out: &'a mut dyn Write) -> Result<Self, std::io::Error> {
        let mut meta = opts.meta.clone();
        if let Some(ns) = opts.tracer_overhead_ns {
            meta.push(("tracer-overhead-ns".into(), ns.to_string()));
        }
        if opts.tracer_in_call_ns > 0 {
            meta.push((
                "tracer-in-call-ns".into(),
                opts.tracer_in_call_ns.to_string(),
            ));
        }
        format::write_header(out, &meta)?;
        let mut maps = opts.maps.clone();
        // Longest prefix first, so `F:\case\db` wins over `F:\`.
        maps.sort_by_key(|m| std::cmp::Reverse(m.prefix.len()));
        Ok(Importer {
            opts,
            out,
            line: Vec::with_capacity(256),
            t0: None,
            last_t: 0,
            threads: HashMap::new(),
            files: HashMap::new(),
            unmapped: HashMap::new(),
            report: ImportReport::default(),
            error: None,
            processes: opts.processes.iter().map(|p| p.to_lowercase()).collect(),
            maps,
            carried: HashMap::new(),
            spelling: HashMap::new(),
            streams: Default::default(),
            stops: BTreeMap::new(),
        })
    }

    fn emit(&mut self, r: &Record) {
        if self.error.is_some() {
            return;
        }
        self.line.clear();
        format::write_record(r, &mut self.line);
        if let Err(e) = self.out.write_all(&self.line) {
            self.error = Some(e);
        }
        self.report.records += 1;
    }

    fn leave(&mut self, reason: &str, bytes: u64) {
        self.report
            .left_out
            .entry(reason.to_string())
            .or_default()
            .add(bytes);
    }

    /// The channel and relative path of a source path, if mapped (a
    /// Windows path in its first-seen spelling).
    fn map(&mut self, path: &str) -> Option<(Channel, String)> {
        let (channel, rel, windows) = self
            .maps
            .iter()
            .find_map(|m| relative(m, path).map(|rel| (m.channel, rel, m.windows())))?;
        if !windows || rel.is_empty() {
            return Some((channel, rel));
        }
        let mut spelled = String::with_capacity(rel.len());
        for part in rel.split('/') {
            if !spelled.is_empty() {
                spelled.push('/');
            }
            spelled.push_str(part);
            let key = (channel, spelled.to_lowercase());
            let first = self.spelling.entry(key).or_insert_with(|| spelled.clone());
            spelled.clone_from(first);
        }
        Some((channel, spelled))
    }

    fn thread(&mut self, e: &RawEvent, t_ns: u64) -> u32 {
        let next = self.threads.len() as u32 + 1;
        if let Some(&id) = self.threads.get(&(e.pid, e.tid)) {
            return id;
        }
        self.threads.insert((e.pid, e.tid), next);
        self.report.threads += 1;
        let r = Record {
            t_ns,
            thread: next,
            op: Op::Thread,
            path: Some(format!("{}:{}:{}", e.process, e.pid, e.tid).into_bytes()),
            ..Record::default()
        };
        self.emit(&r);
        next
    }

    fn file(&mut self, channel: Channel, rel: &str, t_ns: u64, thread: u32) -> u32 {
        if let Some(&id) = self.files.get(&(channel, rel.to_string())) {
            return id;
        }
        let id = self.files.len() as u32 + 1;
        self.files.insert((channel, rel.to_string()), id);
        self.report.channels.entry(channel).or_default().files += 1;
        let r = Record {
            t_ns,
            thread,
            channel: Some(channel),
            file: id,
            op: Op::Add,
            path: Some(rel.as_bytes().to_vec()),
            ..Record::default()
        };
        self.emit(&r);
        id
    }

    /// Take one event.
    pub fn push(&mut self, e: RawEvent) {
        self.report.events += 1;
        // Its calls count towards the next event of its thread that is
        // kept (its own, if it is): left-out calls took tracer time too.
        let calls = {
            let c = self.carried.entry((e.pid, e.tid)).or_default();
            *c = c.saturating_add(e.calls.max(1));
            *c
        };
        let t0 = *self.t0.get_or_insert(e.t_ns);
        let t_ns = e.t_ns.saturating_sub(t0);
        if self.opts.tracer_stops && e.calls > 0 {
            *self.stops.entry(t_ns / STOP_BUCKET_NS).or_default() += u64::from(e.calls);
        }
        self.last_t = self.last_t.max(t_ns.saturating_add(e.dur_ns));
        let bytes = match e.op {
            RawOp::Read { len, .. } | RawOp::Write { len, .. } => len,
            _ => 0,
        };
        let kind = match &e.op {
            RawOp::NotFile(class) => {
                self.leave(&format!("not a file-system event ({class})"), 0);
                return;
            }
            RawOp::Other(name) => {
                self.leave(&format!("not replayed: {name}"), 0);
                return;
            }
            RawOp::Map => {
                self.leave("memory mapping (the I/O through it is not seen)", 0);
                return;
            }
            RawOp::Send { stream, len } | RawOp::Recv { stream, len } => {
                let send = matches!(e.op, RawOp::Send { .. });
                if *len == 0 {
                    // A receive of nothing is the stream's end; a send of
                    // nothing gives no one anything to wait for.
                    let what = if send { "send" } else { "receive" };
                    self.leave(&format!("{what} of no bytes"), 0);
                    return;
                }
                self.message(&e, t_ns, send, stream, *len);
                return;
            }
            RawOp::Wake { key } | RawOp::Woken { key } => {
                let wake = matches!(e.op, RawOp::Wake { .. });
                self.message(&e, t_ns, wake, key, 0);
                return;
            }
            RawOp::Timer => {
                self.timer(&e, t_ns);
                return;
            }
            op => op.clone(),
        };
        if !self.processes.is_empty() && !self.processes.contains(&e.process.to_lowercase()) {
            self.leave("another process (--process)", bytes);
            return;
        }
        if e.paging && !self.opts.keep_paging {
            self.leave(
                "paging I/O (the cache manager's; the replaying machine makes its own)",
                bytes,
            );
            return;
        }
        if !e.ok
            && matches!(
                kind,
                RawOp::Read { .. }
                    | RawOp::Write { .. }
                    | RawOp::Sync
                    | RawOp::Writeback { .. }
                    | RawOp::Truncate { .. }
            )
        {
            self.leave(&format!("failed {} ({})", raw_name(&kind), e.result), bytes);
            return;
        }
        if !e.ok
            && matches!(
                kind,
                RawOp::Close | RawOp::Rename { .. } | RawOp::Remove | RawOp::Mkdir
            )
        {
            self.leave(&format!("failed {} ({})", raw_name(&kind), e.result), 0);
            return;
        }
        if !self.opts.exclude.is_empty() && excluded(&self.opts.exclude, &e.path) {
            self.leave("excluded (--exclude)", bytes);
            return;
        }
        let Some((channel, rel)) = self.map(&e.path) else {
            let folder = parent_folder(&e.path);
            self.unmapped.entry(folder).or_default().add(bytes);
            self.leave("unmapped path", bytes);
            return;
        };
        let thread = self.thread(&e, t_ns);
        let mut r = Record {
            t_ns,
            dur_ns: e.dur_ns.saturating_sub(self.opts.tracer_in_call_ns),
            thread,
            channel: Some(channel),
            direct: e.direct,
            calls,
            ..Record::default()
        };
        if let RawOp::Read { offset, .. } | RawOp::Write { offset, .. } = kind
            && offset > i64::MAX as u64
        {
            // Windows' -1 (write at the end) and -2 (the current position):
            // where the bytes went was not recorded.
            self.leave(
                "I/O at the end of file or current position (offset not recorded)",
                bytes,
            );
            return;
        }
        match kind {
            RawOp::Open { created, directory } => {
                if directory || rel.is_empty() {
                    // A folder opened is a lookup; the replay stats it.
                    r.op = Op::Stat;
                    r.path = Some(rel.into_bytes());
                } else {
                    r.file = self.file(channel, &rel, t_ns, thread);
                    r.op = if created {
                        Op::Create
                    } else if e.ok {
                        Op::Open
                    } else {
                        Op::Stat
                    };
                    if r.op == Op::Stat {
                        r.file = 0;
                        r.path = Some(rel.into_bytes());
                    }
                }
            }
            RawOp::Stat => {
                r.op = Op::Stat;
                r.path = Some(rel.into_bytes());
            }
            RawOp::Mkdir => {
                r.op = Op::Mkdir;
                r.path = Some(rel.into_bytes());
            }
            RawOp::DirSync => {
                r.op = Op::DirSync;
                r.path = Some(rel.into_bytes());
            }
            RawOp::Remove => {
                r.op = Op::Remove;
                r.path = Some(rel.into_bytes());
            }
            RawOp::Rename { to } => {
                let Some((to_channel, to_rel)) = self.map(&to).filter(|(c, _)| *c == channel)
                else {
                    self.leave("rename out of its channel or to an unknown name", 0);
                    return;
                };
                let _ = to_channel;
                r.op = Op::Rename;
                r.path = Some(rel.into_bytes());
                r.to = Some(to_rel.into_bytes());
            }
            RawOp::Close
            | RawOp::Sync
            | RawOp::Writeback { .. }
            | RawOp::Truncate { .. }
            | RawOp::Read { .. }
            | RawOp::Write { .. } => {
                if rel.is_empty() {
                    self.leave("I/O on a channel's root (a volume, not a file)", bytes);
                    return;
                }
                r.file = self.file(channel, &rel, t_ns, thread);
                match kind {
                    RawOp::Close => r.op = Op::Close,
                    RawOp::Sync => r.op = Op::Sync,
                    RawOp::Writeback { offset, len, wait } => {
                        r.op = Op::Writeback;
                        r.offset = offset;
                        r.len = len;
                        r.wait = wait;
                    }
                    RawOp::Truncate { size } => {
                        r.op = Op::Truncate;
                        r.len = size;
                    }
                    RawOp::Read { offset, len } => {
                        r.op = Op::Read;
                        r.offset = offset;
                        r.len = len;
                    }
                    RawOp::Write { offset, len } => {
                        r.op = Op::Write;
                        r.offset = offset;
                        r.len = len;
                    }
                    _ => {}
                }
            }
            RawOp::Map
            | RawOp::Other(_)
            | RawOp::NotFile(_)
            | RawOp::Send { .. }
            | RawOp::Recv { .. }
            | RawOp::Wake { .. }
            | RawOp::Woken { .. }
            | RawOp::Timer => return,
        }
        self.carried.remove(&(e.pid, e.tid));
        let totals = self.report.channels.entry(channel).or_default();
        match r.op {
            Op::Read => totals.read.add(r.len),
            Op::Write => totals.write.add(r.len),
            Op::Sync => totals.syncs += 1,
            _ => totals.other_ops += 1,
        }
        self.emit(&r);
    }

    /// A message between threads: kept as a `send` or `recv` on no
    /// channel, named by its stream, for the replay to pair (a receive
    /// waits for the send that supplied its last byte).
    fn message(&mut self, e: &RawEvent, t_ns: u64, send: bool, stream: &str, len: u64) {
        let what = if send { "send" } else { "receive" };
        if !self.processes.is_empty() && !self.processes.contains(&e.process.to_lowercase()) {
            self.leave("another process (--process)", 0);
            return;
        }
        if !e.ok {
            self.leave(&format!("failed {what} ({})", e.result), 0);
            return;
        }
        let thread = self.thread(e, t_ns);
        let calls = self.carried.remove(&(e.pid, e.tid)).unwrap_or(1);
        let r = Record {
            t_ns,
            dur_ns: e.dur_ns.saturating_sub(self.opts.tracer_in_call_ns),
            thread,
            op: if send { Op::Send } else { Op::Recv },
            len,
            path: Some(stream.as_bytes().to_vec()),
            calls,
            ..Record::default()
        };
        let m = &mut self.report.messages;
        match (send, len) {
            (true, 0) => m.wakes += 1,
            (false, 0) => m.woken += 1,
            (true, _) => m.sent.add(len),
            (false, _) => m.received.add(len),
        }
        if self.streams.insert(stream.to_string()) {
            m.streams += 1;
        }
        self.emit(&r);
    }

    /// A timer that ran out: kept on no channel, for the replay to wait
    /// out in wall time (and to know what followed it).
    fn timer(&mut self, e: &RawEvent, t_ns: u64) {
        if !self.processes.is_empty() && !self.processes.contains(&e.process.to_lowercase()) {
            self.leave("another process (--process)", 0);
            return;
        }
        let thread = self.thread(e, t_ns);
        let calls = self.carried.remove(&(e.pid, e.tid)).unwrap_or(1);
        self.report.messages.timers += 1;
        self.emit(&Record {
            t_ns,
            dur_ns: e.dur_ns,
            thread,
            op: Op::Timer,
            calls,
            ..Record::default()
        });
    }

    /// End the import: the report, or why there is nothing to replay.
    pub fn finish(mut self) -> Result<ImportReport, ImportError> {
        if self.error.is_none() {
            // When the tracer stopped threads, those left out included:
            // a replay takes its time out where it was spent.
            for (ms, n) in &self.stops {
                if let Err(e) = writeln!(self.out, "# stops {ms} {n}") {
                    self.error = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = self.error.take() {
            return Err(ImportError::Write(e));
        }
        self.out.flush()?;
        let mut top: Vec<(String, Tally)> = self.unmapped.into_iter().collect();
        top.sort_by(|a, b| {
            b.1.bytes
                .cmp(&a.1.bytes)
                .then(b.1.events.cmp(&a.1.events))
                .then(a.0.cmp(&b.0))
        });
        top.truncate(10);
        self.report.top_unmapped = top;
        self.report.seconds = self.last_t as f64 / 1e9;
        if self.report.kept_ops() == 0 {
            let top = self
                .report
                .top_unmapped
                .iter()
                .map(|(f, t)| format!("{f} ({} events, {} bytes)", t.events, t.bytes))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ImportError::NothingMapped {
                events: self.report.events,
                kept: 0,
                top: if top.is_empty() { "none".into() } else { top },
            });
        }
        Ok(self.report)
    }
}

fn raw_name(op: &RawOp) -> &'static str {
    match op {
        RawOp::Open { .. } => "open",
        RawOp::Close => "close",
        RawOp::Read { .. } => "read",
        RawOp::Write { .. } => "write",
        RawOp::Sync => "sync",
        RawOp::Writeback { .. } => "writeback",
        RawOp::DirSync => "directory sync",
        RawOp::Truncate { .. } => "truncate",
        RawOp::Rename { .. } => "rename",
        RawOp::Remove => "remove",
        RawOp::Mkdir => "mkdir",
        RawOp::Stat => "stat",
        RawOp::Map => "map",
        RawOp::Other(_) => "other",
        RawOp::NotFile(_) => "not a file",
        RawOp::Send { .. } => "send",
        RawOp::Recv { .. } => "receive",
        RawOp::Wake { .. } => "wake-up",
        RawOp::Woken { .. } => "wait woken",
        RawOp::Timer => "timer",
    }
}

/// The folder a path is in, for the unmapped report (the path itself when
/// it has no folder).
fn parent_folder(path: &str) -> String {
    match path.rfind(['\\', '/']) {
        Some(0) => path[..1].to_string(),
        Some(i) => path[..i].to_string(),
        None => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(op: RawOp, path: &str) -> RawEvent {
        RawEvent {
            t_ns: 1_000,
            dur_ns: 10,
            process: "FTK.exe".into(),
            pid: 10,
            tid: 11,
            op,
            path: path.into(),
            ok: true,
            result: "SUCCESS".into(),
            direct: false,
            paging: false,
            calls: 1,
        }
    }

    #[test]
    fn prefixes_map_without_case_on_windows_and_by_component() {
        let m = PathMap::parse("F:\\=evidence").unwrap();
        assert_eq!(
            relative(&m, "f:\\Case\\a.E01").as_deref(),
            Some("Case/a.E01")
        );
        assert_eq!(relative(&m, "G:\\a"), None);
        let m = PathMap::parse("/mnt/ev=evidence").unwrap();
        assert_eq!(relative(&m, "/mnt/ev/x/../y").as_deref(), Some("x/y"));
        assert_eq!(relative(&m, "/mnt/evil"), None);
        assert_eq!(relative(&m, "/MNT/ev/x"), None);
        let m = PathMap::parse("\\\\nas\\cases=case").unwrap();
        assert_eq!(
            relative(&m, "\\\\NAS\\Cases\\c1\\x.db").as_deref(),
            Some("c1/x.db")
        );
        assert!(PathMap::parse("F:\\").is_err());
        assert!(
            PathMap::parse("F:\\=disk")
                .unwrap_err()
                .contains("not a channel")
        );
    }

    #[test]
    fn paging_failed_and_unmapped_events_are_left_out_and_counted() {
        let opts = ImportOptions {
            maps: vec![
                PathMap::parse("F:\\=evidence").unwrap(),
                PathMap::parse("G:\\db=database").unwrap(),
            ],
            ..ImportOptions::default()
        };
        let mut out = Vec::new();
        let mut imp = Importer::new(&opts, &mut out).unwrap();
        imp.push(event(
            RawOp::Open {
                created: false,
                directory: false,
            },
            "F:\\a.E01",
        ));
        imp.push(event(
            RawOp::Read {
                offset: 0,
                len: 4096,
            },
            "F:\\a.E01",
        ));
        let mut paging = event(
            RawOp::Read {
                offset: 0,
                len: 65536,
            },
            "F:\\a.E01",
        );
        paging.paging = true;
        imp.push(paging);
        let mut failed = event(
            RawOp::Write {
                offset: 0,
                len: 512,
            },
            "G:\\db\\case.db",
        );
        failed.ok = false;
        failed.result = "FAST IO DISALLOWED".into();
        imp.push(failed);
        imp.push(event(
            RawOp::Write {
                offset: 0,
                len: 512,
            },
            "G:\\db\\case.db",
        ));
        imp.push(event(
            RawOp::Write {
                offset: 0,
                len: 100,
            },
            "C:\\Windows\\x.log",
        ));
        imp.push(event(RawOp::NotFile("Registry".into()), "HKLM\\x"));
        let report = imp.finish().unwrap();
        assert_eq!(report.events, 7);
        assert_eq!(
            report.channels[&Channel::Evidence].read,
            Tally {
                events: 1,
                bytes: 4096
            }
        );
        assert_eq!(
            report.channels[&Channel::Database].write,
            Tally {
                events: 1,
                bytes: 512
            }
        );
        assert_eq!(report.left_out["paging I/O (the cache manager's; the replaying machine makes its own)"].bytes, 65536);
        assert_eq!(
            report.left_out["failed write (FAST IO DISALLOWED)"].events,
            1
        );
        assert_eq!(report.left_out["unmapped path"].bytes, 100);
        assert_eq!(report.top_unmapped[0].0, "C:\\Windows");
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(",evidence,1,add,0,0,,a.E01,"), "{text}");
        assert!(text.contains(",database,2,add,0,0,,case.db,"), "{text}");
    }

    #[test]
    fn a_trace_that_maps_nothing_is_refused_with_its_folders() {
        let opts = ImportOptions {
            maps: vec![PathMap::parse("Z:\\=evidence").unwrap()],
            ..ImportOptions::default()
        };
        let mut out = Vec::new();
        let mut imp = Importer::new(&opts, &mut out).unwrap();
        imp.push(event(
            RawOp::Write {
                offset: 0,
                len: 100,
            },
            "C:\\Users\\x\\a.txt",
        ));
        let err = imp.finish().unwrap_err().to_string();
        assert!(err.contains("C:\\Users\\x (1 events, 100 bytes)"), "{err}");
    }
}
