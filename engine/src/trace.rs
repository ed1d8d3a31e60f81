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
//! Format (`caseload-trace 1`), one record per line, fields separated by a
//! comma: `t_ns,channel,file,op,offset,len,path`. `t_ns` counts from the
//! start of the trace; `file` numbers each file the run touched (from 1;
//! 0 for operations on a path, such as a rename); `path` is given on the
//! record that introduces a file (`add`) and on path operations, with every
//! byte outside printable ASCII, and `%`, `,` and `"`, written as `%XX`, so
//! any name (non-UTF-8, with newlines) fits on one line and reads back
//! exactly. The first line is the header `# caseload-trace 1`.

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
pub const TRACE_HEADER: &str = "# caseload-trace 1";

/// What an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceOp {
    /// A file is first seen (its path is on the record).
    Add,
    /// A file opened (an existing one).
    Open,
    /// A file created (or truncated).
    Create,
    /// A file closed.
    Close,
    /// A read of `len` bytes at `offset`.
    Read,
    /// A write of `len` bytes at `offset`.
    Write,
    /// An fsync/fdatasync of the file.
    Sync,
    /// A directory synced.
    DirSync,
    /// A rename (path: the source).
    Rename,
    /// A file or tree removed.
    Remove,
    /// A directory created.
    Mkdir,
    /// Metadata read (stat, listing).
    Stat,
}

impl TraceOp {
    /// The name in the trace file.
    pub fn name(self) -> &'static str {
        match self {
            TraceOp::Add => "add",
            TraceOp::Open => "open",
            TraceOp::Create => "create",
            TraceOp::Close => "close",
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Sync => "sync",
            TraceOp::DirSync => "dirsync",
            TraceOp::Rename => "rename",
            TraceOp::Remove => "remove",
            TraceOp::Mkdir => "mkdir",
            TraceOp::Stat => "stat",
        }
    }

    /// The operation named `name` in a trace file.
    pub fn parse(name: &str) -> Option<TraceOp> {
        [
            TraceOp::Add,
            TraceOp::Open,
            TraceOp::Create,
            TraceOp::Close,
            TraceOp::Read,
            TraceOp::Write,
            TraceOp::Sync,
            TraceOp::DirSync,
            TraceOp::Rename,
            TraceOp::Remove,
            TraceOp::Mkdir,
            TraceOp::Stat,
        ]
        .into_iter()
        .find(|op| op.name() == name)
    }
}

/// One record of the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Nanoseconds since the trace started.
    pub t_ns: u64,
    /// The channel.
    pub channel: ChannelKind,
    /// The file's number (0: none).
    pub file: u32,
    /// The operation.
    pub op: TraceOp,
    /// Byte offset (reads and writes; else 0).
    pub offset: u64,
    /// Bytes (reads and writes; else 0).
    pub len: u64,
    /// The path, on `add` and path operations.
    pub path: Option<PathBuf>,
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
    start: Instant,
    tx: Sender<Message>,
    next_file: AtomicU32,
    /// Operations that found the queue full and waited.
    waits: AtomicU64,
    writer: Mutex<Option<JoinHandle<TraceSummary>>>,
}

impl Trace {
    /// Start a trace written to `file` (opened by the channel that holds
    /// it, [`crate::channel::Channel::create_instrument`]).
    pub fn start(file: File) -> io::Result<Trace> {
        let (tx, rx) = crossbeam_channel::bounded(QUEUE_RECORDS);
        let writer = std::thread::Builder::new()
            .name("caseload-trace".into())
            .spawn(move || write_records(file, rx))?;
        Ok(Trace {
            start: Instant::now(),
            tx,
            next_file: AtomicU32::new(1),
            waits: AtomicU64::new(0),
            writer: Mutex::new(Some(writer)),
        })
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
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
                channel,
                file: id,
                op,
                offset: 0,
                len: 0,
                path: (op == TraceOp::Add).then(|| path.to_path_buf()),
            });
        }
        id
    }

    /// An operation on a numbered file.
    pub(crate) fn op(&self, channel: ChannelKind, file: u32, op: TraceOp, offset: u64, len: u64) {
        self.send(TraceRecord {
            t_ns: self.now_ns(),
            channel,
            file,
            op,
            offset,
            len,
            path: None,
        });
    }

    /// An operation on a path (rename, remove, directory sync, stat).
    pub(crate) fn path_op(&self, channel: ChannelKind, op: TraceOp, path: &Path) {
        self.send(TraceRecord {
            t_ns: self.now_ns(),
            channel,
            file: 0,
            op,
            offset: 0,
            len: 0,
            path: Some(path.to_path_buf()),
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

fn write_records(file: File, rx: Receiver<Message>) -> TraceSummary {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut summary = TraceSummary::default();
    let mut line = Vec::with_capacity(256);
    let failed = |summary: &mut TraceSummary, e: io::Error| {
        if summary.error.is_none() {
            summary.error = Some(e.to_string());
        }
    };
    line.extend_from_slice(TRACE_HEADER.as_bytes());
    line.push(b'\n');
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
    // Writing to a Vec cannot fail.
    let _ = write!(
        line,
        "{},{},{},{},{},{},",
        r.t_ns,
        r.channel.name(),
        r.file,
        r.op.name(),
        r.offset,
        r.len
    );
    if let Some(p) = &r.path {
        for &b in crate::os::path_bytes(p).iter() {
            if (0x21..=0x7e).contains(&b) && !matches!(b, b'%' | b',' | b'"') {
                line.push(b);
            } else {
                let _ = write!(line, "%{b:02X}");
            }
        }
    }
    line.push(b'\n');
}

/// A line of a trace file that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("trace line {line}: {reason}")]
pub struct TraceParseError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub reason: String,
}

/// Parse one record line (without its newline); `line_no` for errors.
pub fn parse_record(text: &[u8], line_no: u64) -> Result<TraceRecord, TraceParseError> {
    let bad = |reason: String| TraceParseError {
        line: line_no,
        reason,
    };
    let mut fields = text.splitn(7, |&b| b == b',');
    let mut next = |name: &str| fields.next().ok_or_else(|| bad(format!("no {name} field")));
    let num = |name: &str, f: &[u8]| -> Result<u64, TraceParseError> {
        std::str::from_utf8(f)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                bad(format!(
                    "{name} `{}` is not a number",
                    String::from_utf8_lossy(f)
                ))
            })
    };
    let t_ns = num("t_ns", next("t_ns")?)?;
    let channel_field = next("channel")?;
    let channel = ChannelKind::ALL
        .into_iter()
        .find(|k| k.name().as_bytes() == channel_field)
        .ok_or_else(|| {
            bad(format!(
                "unknown channel `{}`",
                String::from_utf8_lossy(channel_field)
            ))
        })?;
    let file = u32::try_from(num("file", next("file")?)?)
        .map_err(|_| bad("file number too large".into()))?;
    let op_field = next("op")?;
    let op = std::str::from_utf8(op_field)
        .ok()
        .and_then(TraceOp::parse)
        .ok_or_else(|| {
            bad(format!(
                "unknown operation `{}`",
                String::from_utf8_lossy(op_field)
            ))
        })?;
    let offset = num("offset", next("offset")?)?;
    let len = num("len", next("len")?)?;
    let path_field = next("path")?;
    let path = if path_field.is_empty() {
        None
    } else {
        let mut bytes = Vec::with_capacity(path_field.len());
        let mut i = 0;
        while i < path_field.len() {
            if path_field[i] == b'%' {
                let hex = path_field
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| bad("bad %XX escape in path".into()))?;
                bytes.push(hex);
                i += 3;
            } else {
                bytes.push(path_field[i]);
                i += 1;
            }
        }
        Some(crate::os::path_from_bytes(&bytes))
    };
    Ok(TraceRecord {
        t_ns,
        channel,
        file,
        op,
        offset,
        len,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Unix names are any bytes; Windows names are UTF-16 and cannot hold these.
    #[cfg(unix)]
    #[test]
    fn hostile_names_round_trip_on_one_line() {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"/case/a,b \"c\"\n%d\xff\xfe.txt");
        let r = TraceRecord {
            t_ns: 42,
            channel: ChannelKind::Case,
            file: 3,
            op: TraceOp::Add,
            offset: 0,
            len: 0,
            path: Some(PathBuf::from(name)),
        };
        let mut line = Vec::new();
        format_record(&r, &mut line);
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(line.is_ascii());
        let back = parse_record(&line[..line.len() - 1], 1).unwrap();
        assert_eq!(back, r);
        assert!(parse_record(b"1,nowhere,0,read,0,0,", 2).is_err());
        assert!(parse_record(b"1,case,0,read,x,0,", 3).is_err());
        assert!(parse_record(b"1,case,0,read,0,0,%G1", 4).is_err());
        assert!(parse_record(b"1,case", 5).is_err());
    }

    #[test]
    fn everything_recorded_is_written_in_order_and_a_full_queue_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        let trace = Trace::start(File::create(&path).unwrap()).unwrap();
        let n = QUEUE_RECORDS as u64 * 3;
        let id = trace.file(ChannelKind::Temp, Path::new("/t/x"), true);
        for i in 0..n {
            trace.op(ChannelKind::Temp, id, TraceOp::Write, i * 4096, 4096);
        }
        let s = trace.finish();
        assert_eq!(s.records, n + 2);
        assert_eq!(s.dropped, 0);
        assert!(s.error.is_none());
        let text = std::fs::read(&path).unwrap();
        assert_eq!(s.bytes, text.len() as u64);
        let mut lines = text.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        assert_eq!(lines.next().unwrap(), TRACE_HEADER.as_bytes());
        let records: Vec<_> = lines
            .enumerate()
            .map(|(i, l)| parse_record(l, i as u64 + 2).unwrap())
            .collect();
        assert_eq!(records.len() as u64, n + 2);
        assert_eq!(records[1].op, TraceOp::Create);
        assert!(records.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        assert_eq!(records.last().unwrap().offset, (n - 1) * 4096);
        // Recording after the end is a no-op, and finishing twice is too.
        trace.op(ChannelKind::Temp, id, TraceOp::Sync, 0, 0);
        assert_eq!(trace.finish(), TraceSummary::default());
    }

    #[test]
    fn a_full_device_is_reported_and_nothing_waits_forever() {
        // /dev/full fails every write with ENOSPC.
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("skipped: no /dev/full");
            return;
        };
        let trace = Trace::start(full).unwrap();
        for i in 0..(QUEUE_RECORDS as u64 * 2) {
            trace.op(ChannelKind::Case, 1, TraceOp::Read, i, 1);
        }
        let s = trace.finish();
        assert!(s.error.is_some(), "{s:?}");
        assert!(s.dropped > 0);
    }
}
