//! The operation trace of a run (`caseload run --trace`): every operation
//! on every channel, one line each, streamed to a file while the run goes.
//!
//! Recording is one bounded queue push per operation (no lock, no
//! allocation for reads, writes and syncs); one writer thread formats and
//! writes. When the writer falls behind, the queue fills and operations
//! wait for it: memory stays bounded (the queue's records) and the cost
//! shows in the run's times instead of being hidden. A run with `--trace`
//! is an observation of the workload, not a timing run: `docs/trace.md`.
//!
//! The trace file's own writes are not counted on any channel: they are
//! the instrument, not the workload.
//!
//! Format: `caseload-trace 2` (`caseload_traces::format`, docs/trace.md):
//! each record carries the thread that made the call (numbered in the
//! order threads first appear, each introduced by a `thread` record), the
//! call's start and duration, and `phase` records mark where each stage
//! began, so a replay runs thread by thread with the recorded think time.
//! The header names each channel's directory (`# channel-root NAME DIR`),
//! so a replay can place the files relative to another layout.

use crate::channel::kind::ChannelKind;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

/// Records the queue holds before an operation waits for the writer:
/// about 4 MiB.
const QUEUE_RECORDS: usize = 1 << 16;

/// The header line of a trace file.
pub const TRACE_HEADER: &str = caseload_traces::format::HEADER_V2;

/// What an operation did (the trace format's operations).
pub use caseload_traces::format::Op as TraceOp;

/// One record of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Nanoseconds since the trace started, when the operation began.
    pub t_ns: u64,
    /// How long it took (0 for records that are not calls).
    pub dur_ns: u64,
    /// The thread that made it (see the module documentation).
    pub thread: u32,
    /// The channel.
    pub channel: Option<ChannelKind>,
    /// The file's number (0: none).
    pub file: u32,
    /// The operation.
    pub op: TraceOp,
    /// Byte offset (reads and writes; else 0).
    pub offset: u64,
    /// Bytes (reads and writes; else 0).
    pub len: u64,
    /// The path, on `add` and path operations; a thread's or phase's name.
    pub path: Option<PathBuf>,
    /// A rename's destination.
    pub to: Option<PathBuf>,
}

enum Message {
    Record(TraceRecord),
    End,
}

/// What the writer did, when the trace is finished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSummary {
    /// Records written.
    pub records: u64,
    /// Bytes of the trace file.
    pub bytes: u64,
    /// Records lost after a write error (the trace is then incomplete).
    pub dropped: u64,
    /// The write error that stopped the trace, if one did.
    pub error: Option<String>,
}

/// A trace being recorded. Shared by every channel of a run.
#[derive(Debug)]
pub struct Trace {
    /// Tells this trace from an earlier one in the same process (a thread
    /// announces itself once per trace).
    id: u64,
    start: Instant,
    tx: Sender<Message>,
    next_file: AtomicU32,
    next_thread: AtomicU32,
    /// Operations that found the queue full and waited.
    waits: AtomicU64,
    writer: Mutex<Option<JoinHandle<TraceSummary>>>,
}

impl Trace {
    /// Start a trace written to `file` (opened by the channel that holds
    /// it, [`crate::channel::Channel::create_instrument`]), its header
    /// carrying `meta` as `# key value` comments.
    pub fn start(file: File, meta: Vec<(String, String)>) -> io::Result<Trace> {
        static TRACES: AtomicU64 = AtomicU64::new(1);
        let (tx, rx) = crossbeam_channel::bounded(QUEUE_RECORDS);
        let writer = std::thread::Builder::new()
            .name("caseload-trace".into())
            .spawn(move || write_records(file, &meta, rx))?;
        Ok(Trace {
            id: TRACES.fetch_add(1, Ordering::Relaxed),
            start: Instant::now(),
            tx,
            next_file: AtomicU32::new(1),
            next_thread: AtomicU32::new(1),
            waits: AtomicU64::new(0),
            writer: Mutex::new(Some(writer)),
        })
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The calling thread's number in this trace, announced by a `thread`
    /// record the first time it appears.
    fn thread(&self) -> u32 {
        thread_local! {
            static SEEN: std::cell::Cell<(u64, u32)> = const { std::cell::Cell::new((0, 0)) };
        }
        let (trace, id) = SEEN.with(std::cell::Cell::get);
        if trace == self.id {
            return id;
        }
        let id = self.next_thread.fetch_add(1, Ordering::Relaxed);
        SEEN.with(|s| s.set((self.id, id)));
        let name = std::thread::current().name().map_or_else(
            || format!("caseload:{}:{id}", std::process::id()),
            |n| format!("caseload:{}:{n}", std::process::id()),
        );
        self.send(TraceRecord {
            t_ns: self.now_ns(),
            dur_ns: 0,
            thread: id,
            channel: None,
            file: 0,
            op: TraceOp::Thread,
            offset: 0,
            len: 0,
            path: Some(PathBuf::from(name)),
            to: None,
        });
        id
    }

    /// A phase (a stage) begins.
    pub fn phase(&self, name: &str) {
        let thread = self.thread();
        self.send(TraceRecord {
            t_ns: self.now_ns(),
            dur_ns: 0,
            thread,
            channel: None,
            file: 0,
            op: TraceOp::Phase,
            offset: 0,
            len: 0,
            path: Some(PathBuf::from(name)),
            to: None,
        });
    }

    fn send(&self, record: TraceRecord) {
        match self.tx.try_send(Message::Record(record)) {
            Ok(()) => {}
            Err(TrySendError::Full(m)) => {
                self.waits.fetch_add(1, Ordering::Relaxed);
                // The writer has stopped only after End: nothing to do then.
                let _ = self.tx.send(m);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// A file is opened or created: number it and record its path.
    pub(crate) fn file(&self, channel: ChannelKind, path: &Path, created: bool) -> u32 {
        let id = self.next_file.fetch_add(1, Ordering::Relaxed);
        let thread = self.thread();
        let t_ns = self.now_ns();
        for op in [
            TraceOp::Add,
            if created {
                TraceOp::Create
            } else {
                TraceOp::Open
            },
        ] {
            self.send(TraceRecord {
                t_ns,
                dur_ns: 0,
                thread,
                channel: Some(channel),
                file: id,
                op,
                offset: 0,
                len: 0,
                path: (op == TraceOp::Add).then(|| path.to_path_buf()),
                to: None,
            });
        }
        id
    }

    /// An operation on a numbered file that just ended after `took`.
    pub(crate) fn op(
        &self,
        channel: ChannelKind,
        file: u32,
        op: TraceOp,
        offset: u64,
        len: u64,
        took: std::time::Duration,
    ) {
        let thread = self.thread();
        let dur_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.send(TraceRecord {
            t_ns: self.now_ns().saturating_sub(dur_ns),
            dur_ns,
            thread,
            channel: Some(channel),
            file,
            op,
            offset,
            len,
            path: None,
            to: None,
        });
    }

    /// An operation on a path (rename, remove, directory sync, stat);
    /// `to` is a rename's destination.
    pub(crate) fn path_op(
        &self,
        channel: ChannelKind,
        op: TraceOp,
        path: &Path,
        to: Option<&Path>,
    ) {
        let thread = self.thread();
        self.send(TraceRecord {
            t_ns: self.now_ns(),
            dur_ns: 0,
            thread,
            channel: Some(channel),
            file: 0,
            op,
            offset: 0,
            len: 0,
            path: Some(path.to_path_buf()),
            to: to.map(Path::to_path_buf),
        });
    }

    /// Operations that waited for the writer.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Stop recording: everything recorded so far is written and the file
    /// synced. Later operations are not recorded. Idempotent.
    pub fn finish(&self) -> TraceSummary {
        let handle = match self.writer.lock() {
            Ok(mut g) => g.take(),
            Err(p) => p.into_inner().take(),
        };
        let Some(handle) = handle else {
            return TraceSummary::default();
        };
        let _ = self.tx.send(Message::End);
        handle.join().unwrap_or_else(|_| TraceSummary {
            error: Some("the trace writer panicked".into()),
            ..TraceSummary::default()
        })
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        self.finish();
    }
}

fn write_records(file: File, meta: &[(String, String)], rx: Receiver<Message>) -> TraceSummary {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut summary = TraceSummary::default();
    let mut line = Vec::with_capacity(256);
    let failed = |summary: &mut TraceSummary, e: io::Error| {
        if summary.error.is_none() {
            summary.error = Some(e.to_string());
        }
    };
    // Cannot fail: a Vec.
    let _ = caseload_traces::format::write_header(&mut line, meta);
    if let Err(e) = out.write_all(&line) {
        failed(&mut summary, e);
    }
    summary.bytes += line.len() as u64;
    // Keep draining after an error so that no operation ever waits on a
    // writer that has given up; count what is lost.
    while let Ok(Message::Record(r)) = rx.recv() {
        if summary.error.is_some() {
            summary.dropped += 1;
            continue;
        }
        line.clear();
        format_record(&r, &mut line);
        match out.write_all(&line) {
            Ok(()) => {
                summary.records += 1;
                summary.bytes += line.len() as u64;
            }
            Err(e) => {
                failed(&mut summary, e);
                summary.dropped += 1;
            }
        }
    }
    match out.into_inner() {
        Ok(f) => {
            if let Err(e) = f.sync_all() {
                failed(&mut summary, e);
            }
        }
        Err(e) => failed(&mut summary, e.into_error()),
    }
    summary
}

/// One record as a line of the trace file (with its newline).
pub fn format_record(r: &TraceRecord, line: &mut Vec<u8>) {
    let bytes = |p: &Option<PathBuf>| p.as_deref().map(|p| crate::os::path_bytes(p).into_owned());
    caseload_traces::format::write_record(
        &caseload_traces::format::Record {
            t_ns: r.t_ns,
            dur_ns: r.dur_ns,
            thread: r.thread,
            channel: r.channel,
            file: r.file,
            op: r.op,
            offset: r.offset,
            len: r.len,
            direct: false,
            wait: false,
            path: bytes(&r.path),
            to: bytes(&r.to),
            calls: 0,
        },
        line,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use caseload_traces::format::TraceReader;

    // Unix names are any bytes; Windows names are UTF-16 and cannot hold these.
    #[cfg(unix)]
    #[test]
    fn hostile_names_round_trip_on_one_line() {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"/case/a,b \"c\"\n%d\xff\xfe.txt");
        let r = TraceRecord {
            t_ns: 42,
            dur_ns: 5,
            thread: 2,
            channel: Some(ChannelKind::Case),
            file: 3,
            op: TraceOp::Add,
            offset: 0,
            len: 0,
            path: Some(PathBuf::from(name)),
            to: None,
        };
        let mut text = format!("{TRACE_HEADER}\n").into_bytes();
        let mut line = Vec::new();
        format_record(&r, &mut line);
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(line.is_ascii());
        text.extend_from_slice(&line);
        let back = TraceReader::new(&text[..])
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(back.path.as_deref(), Some(name.as_bytes()));
        assert_eq!(
            (back.t_ns, back.dur_ns, back.thread, back.file),
            (42, 5, 2, 3)
        );
        assert_eq!(back.channel, Some(ChannelKind::Case));
    }

    #[test]
    fn everything_recorded_is_written_in_order_and_a_full_queue_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        let meta = vec![("channel-root".to_string(), "temp /t".to_string())];
        let trace = Trace::start(File::create(&path).unwrap(), meta).unwrap();
        let n = QUEUE_RECORDS as u64 * 3;
        let id = trace.file(ChannelKind::Temp, Path::new("/t/x"), true);
        let took = std::time::Duration::from_micros(3);
        for i in 0..n {
            trace.op(ChannelKind::Temp, id, TraceOp::Write, i * 4096, 4096, took);
        }
        let s = trace.finish();
        // The thread's record, add, create, the writes.
        assert_eq!(s.records, n + 3);
        assert_eq!(s.dropped, 0);
        assert!(s.error.is_none());
        let text = std::fs::read(&path).unwrap();
        assert_eq!(s.bytes, text.len() as u64);
        let mut reader = TraceReader::new(&text[..]).unwrap();
        assert_eq!(reader.header().get("channel-root"), Some("temp /t"));
        let records: Vec<_> = reader.by_ref().map(|r| r.unwrap()).collect();
        assert_eq!(records.len() as u64, n + 3);
        assert_eq!(records[0].op, TraceOp::Thread);
        assert_eq!(records[2].op, TraceOp::Create);
        assert!(records.iter().all(|r| r.thread == 1));
        assert!(records[3..].iter().all(|r| r.dur_ns == 3000));
        assert!(records.windows(2).all(|w| w[0].t_ns <= w[1].t_ns + 3000));
        assert_eq!(records.last().unwrap().offset, (n - 1) * 4096);
        // Recording after the end is a no-op, and finishing twice is too.
        trace.op(ChannelKind::Temp, id, TraceOp::Sync, 0, 0, took);
        assert_eq!(trace.finish(), TraceSummary::default());
    }

    #[test]
    fn a_full_device_is_reported_and_nothing_waits_forever() {
        // /dev/full fails every write with ENOSPC.
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("skipped: no /dev/full");
            return;
        };
        let trace = Trace::start(full, Vec::new()).unwrap();
        for i in 0..(QUEUE_RECORDS as u64 * 2) {
            trace.op(
                ChannelKind::Case,
                1,
                TraceOp::Read,
                i,
                1,
                std::time::Duration::ZERO,
            );
        }
        let s = trace.finish();
        assert!(s.error.is_some(), "{s:?}");
        assert!(s.dropped > 0);
    }
}
