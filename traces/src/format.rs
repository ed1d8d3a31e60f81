//! caseload's trace file (`docs/trace.md`): what `run --trace` records and
//! `trace import` writes, read back by `replay`, `trace compare` and the
//! fio export.
//!
//! Version 2, one record per line after the header and its `#` comments:
//! `t_ns,dur_ns,thread,channel,file,op,offset,len,flags,path,to`.
//! Version 1 (`t_ns,channel,file,op,offset,len,path`, caseload's traces
//! before threads were recorded) is still read: its operations get one
//! thread per channel, as fio replayed them.
//!
//! Paths are bytes with everything outside printable ASCII, and `%`, `,`
//! and `"`, written as `%XX`, so any name (non-UTF-8, newlines, commas)
//! stays on one line and reads back exactly.

use crate::import::error::{FormatError, Location};
use std::io::{BufRead, Write};

/// The first line of a version 1 trace.
pub const HEADER_V1: &str = "# caseload-trace 1";
/// The first line of a version 2 trace.
pub const HEADER_V2: &str = "# caseload-trace 2";
/// The column line after the header (for readers; ignored when read).
pub const COLUMNS_V2: &str = "# t_ns,dur_ns,thread,channel,file,op,offset,len,flags,path,to,calls";

const FORMAT: &str = "caseload";

/// A channel: where a file lives by its role. The engine's `ChannelKind`
/// is this type (the names are part of the layout-file interface).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// The evidence (read-only).
    Evidence,
    /// The case database.
    Database,
    /// Carved and exported files, index segments, the run report.
    Case,
    /// Spills, sort runs, staging copies.
    Temp,
}

impl Channel {
    /// All four, in the order reports list them.
    pub const ALL: [Channel; 4] = [
        Channel::Evidence,
        Channel::Database,
        Channel::Case,
        Channel::Temp,
    ];

    /// The name in traces, layouts and reports.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Evidence => "evidence",
            Channel::Database => "database",
            Channel::Case => "case",
            Channel::Temp => "temp",
        }
    }

    /// The channel named `name`.
    pub fn parse(name: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Op {
    /// A file is first seen: its number and path (`path`).
    Add,
    /// A thread is first seen: its number and name (`path`:
    /// `process:pid:tid`).
    Thread,
    /// A phase (a stage of a traced run) begins; its name is `path`.
    Phase,
    /// A file opened (it existed).
    Open,
    /// A file created (or truncated).
    Create,
    /// A file closed.
    Close,
    /// `len` bytes read at `offset`.
    Read,
    /// `len` bytes written at `offset`.
    Write,
    /// The file's data synced (fsync, fdatasync, FlushBuffersFile).
    Sync,
    /// The file's dirty pages in `len` bytes from `offset` (0: to its end)
    /// handed to the device, with no device cache flush and no metadata
    /// (`sync_file_range`): started only, or, with the `wait` flag, waited
    /// for. Not a sync: PostgreSQL and initdb start writeback this way
    /// ahead of their fsyncs, which then find little left to do.
    Writeback,
    /// The file's size set to `len`.
    Truncate,
    /// A directory synced (`path`).
    DirSync,
    /// `path` renamed to `to`.
    Rename,
    /// `path` removed.
    Remove,
    /// Directory `path` created.
    Mkdir,
    /// Metadata of `path` read (stat, query, listing, a failed lookup).
    #[default]
    Stat,
    /// `len` bytes sent into the stream named `path` (a socket's one
    /// direction, a pipe), on no channel: what another thread's `recv`
    /// of them waits for in a replay.
    Send,
    /// `len` bytes received from the stream named `path` (no channel):
    /// it waits in a replay for the `send` that supplied its last byte.
    Recv,
    /// A timer that ran out (no channel, no file): the thread waited
    /// `dur` ns from `t` in calls that timed out (a poll, a sleep) and
    /// then went on by itself. A replay waits it out in wall time, as
    /// the timer did, whatever the tracer cost; what follows it happened
    /// because the time ran out.
    Timer,
}

impl Op {
    const ALL: [Op; 19] = [
        Op::Add,
        Op::Thread,
        Op::Phase,
        Op::Open,
        Op::Create,
        Op::Close,
        Op::Read,
        Op::Write,
        Op::Sync,
        Op::Writeback,
        Op::Truncate,
        Op::DirSync,
        Op::Rename,
        Op::Remove,
        Op::Mkdir,
        Op::Stat,
        Op::Send,
        Op::Recv,
        Op::Timer,
    ];

    /// The name in the trace file.
    pub fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Thread => "thread",
            Op::Phase => "phase",
            Op::Open => "open",
            Op::Create => "create",
            Op::Close => "close",
            Op::Read => "read",
            Op::Write => "write",
            Op::Sync => "sync",
            Op::Writeback => "writeback",
            Op::Truncate => "truncate",
            Op::DirSync => "dirsync",
            Op::Rename => "rename",
            Op::Remove => "remove",
            Op::Mkdir => "mkdir",
            Op::Stat => "stat",
            Op::Send => "send",
            Op::Recv => "recv",
            Op::Timer => "timer",
        }
    }

    /// The operation named `name`.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Records that describe the trace rather than do I/O.
    pub fn is_meta(self) -> bool {
        matches!(self, Op::Add | Op::Thread | Op::Phase)
    }

    /// Messages between threads (`send`, `recv`): no file, no channel.
    pub fn is_message(self) -> bool {
        matches!(self, Op::Send | Op::Recv)
    }
}

/// One record of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// Nanoseconds since the trace began.
    pub t_ns: u64,
    /// How long the operation took, in nanoseconds (0: not recorded).
    pub dur_ns: u64,
    /// The thread that did it (introduced by a `thread` record; 0 for
    /// records that belong to none).
    pub thread: u32,
    /// The channel (none for thread and phase records).
    pub channel: Option<Channel>,
    /// The file (introduced by an `add` record; 0: none, as for path
    /// operations).
    pub file: u32,
    /// The operation.
    pub op: Op,
    /// Byte offset (reads, writes).
    pub offset: u64,
    /// Bytes (reads, writes; the new size of a truncate).
    pub len: u64,
    /// Non-cached (direct) I/O.
    pub direct: bool,
    /// A `writeback` that waited for the writes it started (flag `wait`).
    pub wait: bool,
    /// The path: of an `add` (relative to its channel's directory in an
    /// imported trace, absolute in a run's own), of a path operation, or a
    /// thread's or phase's name.
    pub path: Option<Vec<u8>>,
    /// A rename's destination.
    pub to: Option<Vec<u8>>,
    /// The traced tool's system calls this record ends since the thread's
    /// previous record (itself included): the tracer's stops in the gap
    /// before it, which a replay takes out of the trace's clock (`#
    /// tracer-overhead-ns` each, or the cost that makes the clock end at `#
    /// plain-ns`).
    /// 0 (or 1) where not counted: a run's own trace has no tracer.
    pub calls: u32,
}

/// Append `bytes` escaped for a trace field.
fn escape(bytes: &[u8], line: &mut Vec<u8>) {
    for &b in bytes {
        if (0x21..=0x7e).contains(&b) && !matches!(b, b'%' | b',' | b'"') {
            line.push(b);
        } else {
            let _ = write!(line, "%{b:02X}");
        }
    }
}

/// One record as a version 2 line, with its newline.
pub fn write_record(r: &Record, line: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = write!(
        line,
        "{},{},{},{},{},{},{},{},{},",
        r.t_ns,
        r.dur_ns,
        r.thread,
        r.channel.map_or("", Channel::name),
        r.file,
        r.op.name(),
        r.offset,
        r.len,
        match (r.direct, r.wait) {
            (false, false) => "",
            (true, false) => "direct",
            (false, true) => "wait",
            (true, true) => "direct|wait",
        }
    );
    if let Some(p) = &r.path {
        escape(p, line);
    }
    line.push(b',');
    if let Some(p) = &r.to {
        escape(p, line);
    }
    // One call per record is the rule: written only where more.
    if r.calls > 1 {
        let _ = write!(line, ",{}", r.calls);
    }
    line.push(b'\n');
}

/// The header of a version 2 trace with `meta` comments (`# key value`).
pub fn write_header(
    out: &mut (impl Write + ?Sized),
    meta: &[(String, String)],
) -> std::io::Result<()> {
    writeln!(out, "{HEADER_V2}")?;
    writeln!(out, "{COLUMNS_V2}")?;
    for (k, v) in meta {
        // One line each: a newline in a value would end the comment.
        writeln!(out, "# {k} {}", v.replace(['\n', '\r'], " "))?;
    }
    Ok(())
}

fn unescape(field: &[u8], line: u64) -> Result<Vec<u8>, FormatError> {
    let mut bytes = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'%' {
            let hex = field
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    FormatError::bad(FORMAT, Location::Line(line), "bad %XX escape in a path")
                })?;
            bytes.push(hex);
            i += 3;
        } else {
            bytes.push(field[i]);
            i += 1;
        }
    }
    Ok(bytes)
}

/// Parse one record line (without its newline) of a trace of `version`.
pub fn parse_record(text: &[u8], version: u32, line: u64) -> Result<Record, FormatError> {
    let bad = |reason: String| FormatError::bad(FORMAT, Location::Line(line), reason);
    let fields: Vec<&[u8]> = if version == 1 {
        text.splitn(7, |&b| b == b',').collect()
    } else {
        text.splitn(12, |&b| b == b',').collect()
    };
    let want = if version == 1 { 7 } else { 11 };
    // Version 2's `calls` is written where counted.
    if fields.len() != want && !(version == 2 && fields.len() == 12) {
        return Err(bad(format!(
            "{} fields where a version {version} record has {want}",
            fields.len()
        )));
    }
    let num = |name: &str, f: &[u8]| -> Result<u64, FormatError> {
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
    let channel = |f: &[u8]| -> Result<Option<Channel>, FormatError> {
        if f.is_empty() {
            return Ok(None);
        }
        std::str::from_utf8(f)
            .ok()
            .and_then(Channel::parse)
            .map(Some)
            .ok_or_else(|| bad(format!("unknown channel `{}`", String::from_utf8_lossy(f))))
    };
    let op = |f: &[u8]| -> Result<Op, FormatError> {
        std::str::from_utf8(f)
            .ok()
            .and_then(Op::parse)
            .ok_or_else(|| {
                bad(format!(
                    "unknown operation `{}`",
                    String::from_utf8_lossy(f)
                ))
            })
    };
    let file = |f: &[u8]| -> Result<u32, FormatError> {
        u32::try_from(num("file", f)?).map_err(|_| bad("file number too large".into()))
    };
    let path = |f: &[u8]| -> Result<Option<Vec<u8>>, FormatError> {
        if f.is_empty() {
            Ok(None)
        } else {
            unescape(f, line).map(Some)
        }
    };
    if version == 1 {
        let channel = channel(fields[1])?;
        let op = op(fields[3])?;
        // Version 1's `rename` and `stat` are on paths, its files are
        // handles (a new number per open): the same meaning here.
        return Ok(Record {
            t_ns: num("t_ns", fields[0])?,
            dur_ns: 0,
            // One thread per channel: all version 1 says.
            thread: channel.map_or(0, |c| c as u32 + 1),
            channel,
            file: file(fields[2])?,
            op,
            offset: num("offset", fields[4])?,
            len: num("len", fields[5])?,
            direct: false,
            wait: false,
            path: path(fields[6])?,
            to: None,
            calls: 0,
        });
    }
    let flags = fields[8];
    let (mut direct, mut wait) = (false, false);
    for flag in flags.split(|&b| b == b'|').filter(|f| !f.is_empty()) {
        match flag {
            b"direct" => direct = true,
            b"wait" => wait = true,
            other => {
                return Err(bad(format!(
                    "unknown flag `{}`",
                    String::from_utf8_lossy(other)
                )));
            }
        }
    }
    Ok(Record {
        t_ns: num("t_ns", fields[0])?,
        dur_ns: num("dur_ns", fields[1])?,
        thread: u32::try_from(num("thread", fields[2])?)
            .map_err(|_| bad("thread number too large".into()))?,
        channel: channel(fields[3])?,
        file: file(fields[4])?,
        op: op(fields[5])?,
        offset: num("offset", fields[6])?,
        len: num("len", fields[7])?,
        direct,
        wait,
        path: path(fields[9])?,
        to: path(fields[10])?,
        calls: match fields.get(11) {
            Some(c) => {
                u32::try_from(num("calls", c)?).map_err(|_| bad("calls too large".into()))?
            }
            None => 0,
        },
    })
}

/// A trace file's version and its `# key value` comments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// 1 or 2.
    pub version: u32,
    /// The comments after the header, in order.
    pub meta: Vec<(String, String)>,
}

impl Header {
    /// The value of the first comment named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a trace one record at a time (memory does not grow with it).
pub struct TraceReader<R> {
    input: R,
    header: Header,
    line: u64,
    buf: Vec<u8>,
    /// A record line read while looking for the end of the header.
    pending: Option<Vec<u8>>,
    /// `# key value` comments after the first record (an import's figures
    /// known only at its end, such as `stops`).
    trailer: Vec<(String, String)>,
}

impl<R: BufRead> TraceReader<R> {
    /// Read the header; fails on anything but a caseload trace.
    pub fn new(mut input: R) -> Result<Self, FormatError> {
        let io = |source| FormatError::Io {
            format: FORMAT,
            source,
        };
        let mut buf = Vec::new();
        input.read_until(b'\n', &mut buf).map_err(io)?;
        let first = trim_line(&buf);
        let version = if first == HEADER_V1.as_bytes() {
            1
        } else if first == HEADER_V2.as_bytes() {
            2
        } else {
            return Err(FormatError::bad(
                FORMAT,
                Location::Line(1),
                format!(
                    "not a caseload trace (the first line is not `{HEADER_V2}` or `{HEADER_V1}`)"
                ),
            ));
        };
        let mut reader = TraceReader {
            input,
            header: Header {
                version,
                meta: Vec::new(),
            },
            line: 1,
            buf: Vec::new(),
            pending: None,
            trailer: Vec::new(),
        };
        loop {
            reader.buf.clear();
            let n = reader
                .input
                .read_until(b'\n', &mut reader.buf)
                .map_err(io)?;
            if n == 0 {
                break;
            }
            reader.line += 1;
            let l = trim_line(&reader.buf);
            if let Some(comment) = l.strip_prefix(b"# ") {
                let text = String::from_utf8_lossy(comment);
                if let Some((k, v)) = text.split_once(' ')
                    && !k.contains(',')
                {
                    reader.header.meta.push((k.to_string(), v.to_string()));
                }
            } else if l.is_empty() {
                continue;
            } else {
                reader.pending = Some(l.to_vec());
                break;
            }
        }
        Ok(reader)
    }

    /// The trace's version and comments.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The `# key value` comments read after the first record so far
    /// (all of them once `next_record` has returned `None`).
    pub fn trailer(&self) -> &[(String, String)] {
        &self.trailer
    }

    /// The next record, `None` at the end.
    pub fn next_record(&mut self) -> Option<Result<Record, FormatError>> {
        if let Some(l) = self.pending.take() {
            return Some(parse_record(&l, self.header.version, self.line));
        }
        loop {
            self.buf.clear();
            match self.input.read_until(b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(source) => {
                    return Some(Err(FormatError::Io {
                        format: FORMAT,
                        source,
                    }));
                }
            }
            self.line += 1;
            // A last line without its newline was cut short mid-write.
            if self.buf.last() != Some(&b'\n') {
                return Some(Err(FormatError::bad(
                    FORMAT,
                    Location::Line(self.line),
                    "the last line is incomplete (the trace was cut short)",
                )));
            }
            let l = trim_line(&self.buf);
            if let Some(comment) = l.strip_prefix(b"# ") {
                let text = String::from_utf8_lossy(comment);
                if let Some((k, v)) = text.split_once(' ')
                    && !k.contains(',')
                {
                    self.trailer.push((k.to_string(), v.to_string()));
                }
                continue;
            }
            if l.is_empty() || l.starts_with(b"#") {
                continue;
            }
            return Some(parse_record(l, self.header.version, self.line));
        }
    }

    /// The line of the record last returned.
    pub fn line(&self) -> u64 {
        self.line
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Record, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

fn trim_line(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_hostile_names() {
        let r = Record {
            t_ns: 42,
            dur_ns: 7,
            thread: 3,
            channel: Some(Channel::Case),
            file: 9,
            op: Op::Rename,
            offset: 0,
            len: 0,
            direct: true,
            wait: false,
            path: Some(b"/case/a,b \"c\"\n%d\xff.txt".to_vec()),
            to: Some(b"C:\\x y\\z".to_vec()),
            calls: 3,
        };
        let mut text = Vec::new();
        write_header(&mut text, &[("source".into(), "test\nline".into())]).unwrap();
        write_record(&r, &mut text);
        write_record(
            &Record {
                op: Op::Thread,
                channel: None,
                path: Some(b"a.exe:1:2".to_vec()),
                ..Record::default()
            },
            &mut text,
        );
        // A waiting writeback and a timer (on no channel).
        let wb = Record {
            op: Op::Writeback,
            channel: Some(Channel::Database),
            file: 9,
            offset: 4096,
            len: 8192,
            wait: true,
            direct: true,
            ..Record::default()
        };
        let timer = Record {
            t_ns: 5,
            dur_ns: 30_000_000_000,
            thread: 3,
            op: Op::Timer,
            ..Record::default()
        };
        write_record(&wb, &mut text);
        write_record(&timer, &mut text);
        let mut reader = TraceReader::new(&text[..]).unwrap();
        assert_eq!(reader.header().version, 2);
        assert_eq!(reader.header().get("source"), Some("test line"));
        let back: Vec<Record> = reader.by_ref().map(|r| r.unwrap()).collect();
        assert_eq!(back[0], r);
        assert_eq!(back[1].op, Op::Thread);
        assert_eq!(back[1].channel, None);
        assert_eq!(back[2], wb);
        assert_eq!(back[3], timer);
    }

    #[test]
    fn version_1_reads_with_a_thread_per_channel() {
        let text = b"# caseload-trace 1\n5,database,1,add,0,0,/db/case.sqlite\n6,database,1,read,0,100,\n7,temp,2,write,8,9,\n";
        let records: Vec<Record> = TraceReader::new(&text[..])
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].path.as_deref(), Some(&b"/db/case.sqlite"[..]));
        assert_eq!(records[1].thread, records[0].thread);
        assert_ne!(records[2].thread, records[1].thread);
        assert_eq!((records[2].offset, records[2].len), (8, 9));
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, want) in [
            (
                &b"# caseload-trace 2\n1,0,1,nowhere,0,read,0,0,,,\n"[..],
                "line 2: unknown channel",
            ),
            (
                &b"# caseload-trace 2\n# c\n1,0,1,case,0,read,x,0,,,\n"[..],
                "line 3: offset `x`",
            ),
            (
                &b"# caseload-trace 2\n1,0,1,case,0,read,0,0,,%G1,\n"[..],
                "line 2: bad %XX",
            ),
            (&b"# caseload-trace 2\n1,0,1,case\n"[..], "line 2: 4 fields"),
            (
                &b"# caseload-trace 2\n1,0,1,case,0,read,0,0,fast,,\n"[..],
                "unknown flag `fast`",
            ),
            (
                &b"# caseload-trace 2\n1,0,1,case,0,read,0,0,,,\n2,0,1,case,0,re"[..],
                "line 3: the last line is incomplete",
            ),
        ] {
            let err = TraceReader::new(text)
                .and_then(|r| r.collect::<Result<Vec<_>, _>>())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        assert!(TraceReader::new(&b"t_ns,channel\n"[..]).is_err());
    }
}
