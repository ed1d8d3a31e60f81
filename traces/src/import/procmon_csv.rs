//! Process Monitor's CSV export (`procmon-csv`): one [`RawEvent`] per row.
//!
//! Columns are found by their header name, because the order follows the
//! user's column layout in Procmon. Numbers and times follow the exporting
//! machine's locale, so the readers here accept the common group and
//! decimal separators rather than en-US alone. Rows are streamed: memory
//! holds one row at a time whatever the file's size.

use std::collections::VecDeque;
use std::io::Read;

use super::error::{FormatError, Location};
use crate::event::{RawEvent, RawOp};

const FORMAT: &str = "procmon-csv";

const NS_PER_SEC: u64 = 1_000_000_000;
const NS_PER_DAY: u64 = 86_400 * NS_PER_SEC;

/// What reading a Process Monitor CSV found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvInfo {
    /// Data rows read (the header is not counted); one event each.
    pub rows: u64,
    /// The header's column names in file order (byte-order mark removed).
    pub columns: Vec<String>,
}

/// Reads a Process Monitor CSV export from `input`, handing each row to
/// `sink` as it is read.
///
/// The header must name `Process Name`, `PID`, `Operation`, `Path`,
/// `Result`, `Detail` and a time column (`Relative Time`, else `Time of
/// Day`); `TID`, `Duration`, `Completion Time` and `Event Class` are used
/// when present. A malformed row stops the read with its line.
pub fn read(input: impl Read, sink: &mut dyn FnMut(RawEvent)) -> Result<CsvInfo, FormatError> {
    let mut watch = Watch::new(input);
    let mut rows = 0u64;
    let mut last_line = 1u64;
    let columns = {
        // The header is read as an ordinary record so that its line is known
        // and the byte-order mark is handled in one place (Watch).
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(false)
            .from_reader(&mut watch);
        let mut record = csv::StringRecord::new();
        let more = reader.read_record(&mut record);
        if !more.map_err(|e| csv_error(e, reader.get_mut(), 1))? {
            return Err(bad(1, "the file is empty: no header row"));
        }
        let names: Vec<String> = record.iter().map(|s| s.trim().to_string()).collect();
        let cols = Columns::find(&names)?;
        let mut clock = Clock::default();
        loop {
            let more = reader.read_record(&mut record);
            if !more.map_err(|e| csv_error(e, reader.get_mut(), last_line + 1))? {
                break;
            }
            let line = match record.position() {
                Some(p) => reader.get_mut().line_at(p.byte()),
                None => last_line + 1,
            };
            last_line = line;
            sink(cols.event(&record, line, &mut clock)?);
            rows += 1;
        }
        names
    };
    // The csv crate ends an open quoted field silently at the end of the
    // input, and reads a row cut just after a comma as ending in an empty
    // field, so either would pass as a whole row.
    if watch.in_quotes || watch.last == Some(b',') {
        return Err(bad(
            last_line,
            "the file ends inside a field: the last row is cut short",
        ));
    }
    Ok(CsvInfo { rows, columns })
}

fn bad(line: u64, reason: impl Into<String>) -> FormatError {
    FormatError::bad(FORMAT, Location::Line(line), reason)
}

/// A csv crate error at its record's line (`next_line` where it has none).
fn csv_error<R: Read>(e: csv::Error, watch: &mut Watch<R>, next_line: u64) -> FormatError {
    let line = e.position().map_or(next_line, |p| watch.line_at(p.byte()));
    match e.into_kind() {
        csv::ErrorKind::Io(source) => FormatError::Io {
            format: FORMAT,
            source,
        },
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => bad(
            line,
            format!(
                "the row has {len} fields where the header has {expected_len} (a cut or damaged row)"
            ),
        ),
        csv::ErrorKind::Utf8 { err, .. } => {
            bad(line, format!("field {} is not UTF-8 text", err.field() + 1))
        }
        other => bad(line, format!("{other:?}")),
    }
}

/// Passes the input through, dropping a leading UTF-8 byte-order mark
/// (Procmon writes one; the csv crate would keep it in the first field and
/// then see that field's quotes as data), noting whether the input ends
/// inside a quoted field, and numbering lines: the csv crate's own line
/// count lags one behind on CRLF files, Procmon's line ending.
struct Watch<R> {
    inner: R,
    /// Bytes read ahead to look for the byte-order mark, still to be served.
    head: Vec<u8>,
    head_done: bool,
    in_quotes: bool,
    last: Option<u8>,
    /// Bytes served so far.
    served: u64,
    /// Offsets of the newlines served but not yet passed by a record
    /// start: at most the csv reader's read-ahead and the current record.
    newlines: VecDeque<u64>,
    /// Newlines before the last record start asked about.
    lines_passed: u64,
}

impl<R: Read> Watch<R> {
    fn new(inner: R) -> Self {
        Watch {
            inner,
            head: Vec::with_capacity(3),
            head_done: false,
            in_quotes: false,
            last: None,
            served: 0,
            newlines: VecDeque::new(),
            lines_passed: 0,
        }
    }

    /// The 1-based line of the record the csv reader says starts at
    /// `byte`; asked in increasing order. A record may be reported as
    /// starting on the '\n' of the previous CRLF, so a newline at `byte`
    /// itself counts as passed.
    fn line_at(&mut self, byte: u64) -> u64 {
        while self.newlines.front().is_some_and(|&n| n <= byte) {
            self.newlines.pop_front();
            self.lines_passed += 1;
        }
        1 + self.lines_passed
    }
}

impl<R: Read> Read for Watch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.head_done {
            let mut byte = [0u8; 3];
            while self.head.len() < 3 {
                let want = 3 - self.head.len();
                let n = self.inner.read(&mut byte[..want])?;
                if n == 0 {
                    break;
                }
                self.head.extend_from_slice(&byte[..n]);
            }
            if self.head == [0xEF, 0xBB, 0xBF] {
                self.head.clear();
            }
            self.head_done = true;
        }
        let n = if self.head.is_empty() {
            self.inner.read(buf)?
        } else {
            let n = self.head.len().min(buf.len());
            buf[..n].copy_from_slice(&self.head[..n]);
            self.head.drain(..n);
            n
        };
        for (i, &b) in buf[..n].iter().enumerate() {
            match b {
                b'"' => self.in_quotes = !self.in_quotes,
                b'\n' => self.newlines.push_back(self.served + i as u64),
                _ => {}
            }
        }
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        self.served += n as u64;
        Ok(n)
    }
}

/// Where the columns this reader uses are in the file.
struct Columns {
    process: usize,
    pid: usize,
    operation: usize,
    path: usize,
    result: usize,
    detail: usize,
    time: TimeColumn,
    tid: Option<usize>,
    duration: Option<usize>,
    time_of_day: Option<usize>,
    completion: Option<usize>,
    event_class: Option<usize>,
}

#[derive(Clone, Copy)]
enum TimeColumn {
    /// `Relative Time`: since the capture's first event; no midnight.
    Relative(usize),
    /// `Time of Day`: a wall clock, which wraps at midnight.
    OfDay(usize),
}

impl Columns {
    fn find(names: &[String]) -> Result<Columns, FormatError> {
        let at = |name: &str| names.iter().position(|n| n == name);
        let need = |name: &str| {
            at(name).ok_or_else(|| bad(1, format!("the header has no \"{name}\" column")))
        };
        let time = match (at("Relative Time"), at("Time of Day")) {
            (Some(i), _) => TimeColumn::Relative(i),
            (None, Some(i)) => TimeColumn::OfDay(i),
            (None, None) => {
                return Err(bad(
                    1,
                    "the header has no time column (\"Relative Time\" or \"Time of Day\")",
                ));
            }
        };
        Ok(Columns {
            process: need("Process Name")?,
            pid: need("PID")?,
            operation: need("Operation")?,
            path: need("Path")?,
            result: need("Result")?,
            detail: need("Detail")?,
            time,
            tid: at("TID"),
            duration: at("Duration"),
            time_of_day: at("Time of Day"),
            completion: at("Completion Time"),
            event_class: at("Event Class"),
        })
    }

    fn event(
        &self,
        record: &csv::StringRecord,
        line: u64,
        clock: &mut Clock,
    ) -> Result<RawEvent, FormatError> {
        // Every row has the header's field count (the reader is not
        // flexible), so get() finds each column; "" keeps it panic-free.
        let field = |i: usize| record.get(i).unwrap_or("");
        let number = |i: usize, what: &str| {
            let v = field(i);
            v.trim()
                .parse::<u32>()
                .map_err(|_| bad(line, format!("{what} {v:?} is not a number")))
        };
        let pid = number(self.pid, "PID")?;
        let tid = match self.tid {
            Some(i) if !field(i).trim().is_empty() => number(i, "TID")?,
            _ => pid,
        };
        let t_ns = match self.time {
            TimeColumn::Relative(i) => parse_clock(field(i), ClockKind::Elapsed)
                .ok_or_else(|| bad(line, format!("Relative Time {:?} is not a time", field(i))))?,
            TimeColumn::OfDay(i) => {
                let tod = parse_clock(field(i), ClockKind::OfDay).ok_or_else(|| {
                    bad(line, format!("Time of Day {:?} is not a time", field(i)))
                })?;
                clock.advance(tod)
            }
        };
        let dur_ns = self.duration(&field, line)?;
        let result = field(self.result).to_string();
        let ok = result == "SUCCESS";
        let operation = field(self.operation);
        let class = self
            .event_class
            .map(field)
            .map(str::trim)
            .filter(|c| !c.is_empty());
        let not_file = match class {
            Some("File System") => None,
            Some(c) => Some(c.to_string()),
            None => non_fs_class(operation).map(str::to_string),
        };
        let (op, direct, paging) = match not_file {
            Some(c) => (RawOp::NotFile(c), false, false),
            None => fs_op(operation, field(self.detail), ok, line)?,
        };
        Ok(RawEvent {
            t_ns,
            dur_ns,
            process: field(self.process).to_string(),
            pid,
            tid,
            op,
            path: field(self.path).to_string(),
            ok,
            result,
            direct,
            paging,
            calls: 1,
        })
    }

    /// Duration in nanoseconds: the `Duration` column, else `Completion
    /// Time` less `Time of Day`; 0 where the row has none (a pending
    /// operation leaves both empty).
    fn duration<'r>(
        &self,
        field: &dyn Fn(usize) -> &'r str,
        line: u64,
    ) -> Result<u64, FormatError> {
        if let Some(i) = self.duration {
            let v = field(i).trim();
            if v.is_empty() {
                return Ok(0);
            }
            return parse_seconds(v)
                .ok_or_else(|| bad(line, format!("Duration {v:?} is not a number of seconds")));
        }
        let (Some(c), Some(t)) = (self.completion, self.time_of_day) else {
            return Ok(0);
        };
        let (cv, tv) = (field(c), field(t));
        if cv.trim().is_empty() {
            return Ok(0);
        }
        let done = parse_clock(cv, ClockKind::OfDay)
            .ok_or_else(|| bad(line, format!("Completion Time {cv:?} is not a time")))?;
        let start = parse_clock(tv, ClockKind::OfDay)
            .ok_or_else(|| bad(line, format!("Time of Day {tv:?} is not a time")))?;
        // Completion past midnight reads as earlier than the start.
        Ok(if done >= start {
            done - start
        } else {
            done + NS_PER_DAY - start
        })
    }
}

/// The class of an operation that is not a file-system one, judged by its
/// name, for a CSV without an `Event Class` column.
fn non_fs_class(operation: &str) -> Option<&'static str> {
    if operation.starts_with("Reg") {
        Some("Registry")
    } else if operation.starts_with("TCP ") || operation.starts_with("UDP ") {
        Some("Network")
    } else if operation.ends_with(" Profiling") {
        Some("Profiling")
    } else if operation.starts_with("Process ")
        || operation.starts_with("Thread ")
        || operation == "Load Image"
        || operation == "System Statistics"
    {
        Some("Process")
    } else {
        None
    }
}

/// What a file-system operation's name means to a replay, before its
/// details are read. Shared with the PML reader, which names each event as
/// Procmon prints it, so that both formats map an operation the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FsKind {
    Create,
    Read,
    Write,
    Close,
    Flush,
    EndOfFile,
    Disposition,
    DispositionEx,
    Rename,
    Stat,
    Map,
    Other,
}

/// The kind of the file-system operation Procmon names `name`.
pub(crate) fn fs_kind(name: &str) -> FsKind {
    match name {
        "CreateFile" => FsKind::Create,
        "ReadFile" => FsKind::Read,
        "WriteFile" => FsKind::Write,
        "CloseFile" => FsKind::Close,
        "FlushBuffersFile" => FsKind::Flush,
        "SetEndOfFileInformationFile" => FsKind::EndOfFile,
        "SetDispositionInformationFile" => FsKind::Disposition,
        "SetDispositionInformationEx" => FsKind::DispositionEx,
        "CreateFileMapping" => FsKind::Map,
        // A directory control whose sub-operation is 0 keeps this name; it
        // lists or watches a directory, reading metadata only.
        "DirectoryControl" => FsKind::Stat,
        n if n.starts_with("SetRenameInformation") => FsKind::Rename,
        // Query* covers QueryOpen, QueryDirectory and every information,
        // volume, EA and security query: all read metadata only.
        n if n.starts_with("Query") => FsKind::Stat,
        _ => FsKind::Other,
    }
}

/// Whether an OpenResult (Procmon's name) means the open wrote the file.
fn open_wrote(open_result: &str) -> bool {
    matches!(open_result, "Created" | "Overwritten" | "Superseded")
}

/// A file-system row's operation from its name and Detail; with whether it
/// is direct (non-cached) and paging I/O.
fn fs_op(
    name: &str,
    detail: &str,
    ok: bool,
    line: u64,
) -> Result<(RawOp, bool, bool), FormatError> {
    let get = |key: &str| detail_value(detail, key);
    let num = |key: &str| -> Result<u64, FormatError> {
        let v = get(key).ok_or_else(|| {
            bad(
                line,
                format!("{name} without \"{key}\" in its Detail {detail:?}"),
            )
        })?;
        parse_number(v).ok_or_else(|| bad(line, format!("Detail {key} {v:?} is not a number")))
    };
    let has_item =
        |key: &str, item: &str| get(key).is_some_and(|v| v.split(", ").any(|i| i.trim() == item));
    let op = match fs_kind(name) {
        // A failed open found nothing to open: to a replay it is a lookup.
        FsKind::Create if !ok => RawOp::Stat,
        FsKind::Create => RawOp::Open {
            created: get("OpenResult").is_some_and(open_wrote),
            // FILE_DIRECTORY_FILE prints as "Directory" (the real exports);
            // "Directory File" is accepted too. Exact items, so that
            // "Non-Directory File" does not count.
            directory: has_item("Options", "Directory") || has_item("Options", "Directory File"),
        },
        FsKind::Read | FsKind::Write => {
            let offset = num("Offset")?;
            let len = num("Length")?;
            let direct = has_item("I/O Flags", "Non-cached");
            let paging = has_item("I/O Flags", "Paging I/O");
            let op = if fs_kind(name) == FsKind::Read {
                RawOp::Read { offset, len }
            } else {
                RawOp::Write { offset, len }
            };
            return Ok((op, direct, paging));
        }
        FsKind::Close => RawOp::Close,
        FsKind::Flush => RawOp::Sync,
        FsKind::EndOfFile => RawOp::Truncate {
            size: num("EndOfFile")?,
        },
        FsKind::Disposition if get("Delete") == Some("True") => RawOp::Remove,
        FsKind::DispositionEx if disposition_ex_deletes(detail) => RawOp::Remove,
        FsKind::Rename => RawOp::Rename {
            to: get("FileName").unwrap_or("").to_string(),
        },
        FsKind::Stat => RawOp::Stat,
        FsKind::Map => RawOp::Map,
        FsKind::Disposition | FsKind::DispositionEx | FsKind::Other => {
            RawOp::Other(name.to_string())
        }
    };
    Ok((op, false, false))
}

/// Whether a SetDispositionInformationEx Detail asks for deletion: a
/// `Delete: True`, or a DELETE flag (not DO_NOT_DELETE) in its flags.
fn disposition_ex_deletes(detail: &str) -> bool {
    if detail_value(detail, "Delete") == Some("True") {
        return true;
    }
    let Some(flags) = detail_value(detail, "Flags") else {
        return false;
    };
    flags.split(", ").any(|item| {
        let item = item.trim().to_ascii_uppercase();
        item == "DELETE" || (item.ends_with("DELETE") && !item.contains("DO_NOT_DELETE"))
    })
}

/// The value of `key` in a Detail field (`Key: value, Key: value`).
///
/// Values may themselves hold ", " (`ShareMode: Read, Write`, I/O Flags
/// lists), so a new pair starts only where a ", "-separated piece begins
/// with a key: a short run of letters, digits, spaces, '/' or '&' before
/// ": " (`I/O Flags`, `Desired Access`). A path never looks like that (`C:`
/// is followed by '\'). `FileName` runs to the end of the Detail, because
/// a file name may hold ", " and it is the last pair Procmon writes.
pub(crate) fn detail_value<'a>(detail: &'a str, key: &str) -> Option<&'a str> {
    let mut start = 0;
    let mut found: Option<usize> = None;
    loop {
        let rest = detail.get(start..)?;
        let piece_end = rest.find(", ").unwrap_or(rest.len());
        let piece = rest.get(..piece_end)?;
        let key_here = piece.find(": ").and_then(|c| {
            let k = piece.get(..c)?;
            is_key(k).then_some(k)
        });
        if let Some(k) = key_here {
            if let Some(value_start) = found {
                return detail.get(value_start..start.checked_sub(2)?);
            }
            if k == key {
                let value_start = start + k.len() + 2;
                if k == "FileName" {
                    return detail.get(value_start..);
                }
                found = Some(value_start);
            }
        }
        if piece_end == rest.len() {
            return match found {
                Some(value_start) => detail.get(value_start..),
                None => None,
            };
        }
        start += piece_end + 2;
    }
}

fn is_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 40
        && k.starts_with(|c: char| c.is_ascii_alphabetic())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '/' | '&' | '_' | '-'))
}

/// The characters other locales group thousands with (en-US ',', de-DE
/// '.', fr-FR NBSP or narrow NBSP, de-CH apostrophe, plain space).
const GROUP_SEPARATORS: [char; 6] = [',', '.', '\u{a0}', '\u{202f}', '\'', ' '];

/// An integer as Procmon prints it in a Detail: digits, optionally grouped
/// by three with one of [`GROUP_SEPARATORS`] (the same one throughout). A
/// leading '-' gives the two's-complement value, as the PML's signed
/// offsets do (Windows' end-of-file write marker is -1).
pub(crate) fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let value = parse_grouped(digits)?;
    if negative {
        let v = i64::try_from(value).ok()?;
        // Deliberate reinterpretation: the offset keeps its bits.
        Some((-v) as u64)
    } else {
        Some(value)
    }
}

fn parse_grouped(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let sep = s.chars().find(|c| !c.is_ascii_digit());
    let Some(sep) = sep else {
        return s.parse().ok();
    };
    if !GROUP_SEPARATORS.contains(&sep) {
        return None;
    }
    let mut value: u64 = 0;
    for (i, group) in s.split(sep).enumerate() {
        let width_ok = if i == 0 {
            (1..=3).contains(&group.len())
        } else {
            group.len() == 3
        };
        if !width_ok || !group.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let g: u64 = group.parse().ok()?;
        value = value.checked_mul(1000)?.checked_add(g)?;
    }
    Some(value)
}

/// Seconds with a decimal fraction (`0.0000691`, `6,7724403`) in
/// nanoseconds; digits past the ninth are dropped.
fn parse_seconds(s: &str) -> Option<u64> {
    let (whole, frac) = match s.find(['.', ',']) {
        Some(i) => (s.get(..i)?, s.get(i + 1..)?),
        None => (s, ""),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = whole.parse().ok()?;
    secs.checked_mul(NS_PER_SEC)?
        .checked_add(parse_fraction(frac)?)
}

/// A decimal fraction's digits (`8939738`) in nanoseconds.
fn parse_fraction(frac: &str) -> Option<u64> {
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns = 0u64;
    let mut scale = NS_PER_SEC;
    for b in frac.bytes() {
        scale /= 10;
        ns += u64::from(b - b'0') * scale;
    }
    Some(ns)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ClockKind {
    /// `Relative Time`: hours may pass 23, no AM/PM.
    Elapsed,
    /// A time of day: 12-hour with AM/PM, or 24-hour.
    OfDay,
}

/// `H:MM:SS[.fffffff][ AM|PM]` in nanoseconds.
fn parse_clock(s: &str, kind: ClockKind) -> Option<u64> {
    let s = s.trim();
    let (clock, half) = match s.rsplit_once(' ') {
        Some((c, m)) if kind == ClockKind::OfDay => {
            let m = m.to_ascii_uppercase();
            let pm = match m.as_str() {
                "AM" | "A.M." => false,
                "PM" | "P.M." => true,
                _ => return None,
            };
            (c.trim_end(), Some(pm))
        }
        Some(_) => return None,
        None => (s, None),
    };
    let mut parts = clock.splitn(3, ':');
    let h = parts.next()?;
    let m = parts.next()?;
    let sec = parts.next()?;
    let (sec, frac) = match sec.find(['.', ',']) {
        Some(i) => (sec.get(..i)?, sec.get(i + 1..)?),
        None => (sec, ""),
    };
    let digits = |v: &str, max_len: usize| {
        (!v.is_empty() && v.len() <= max_len && v.bytes().all(|b| b.is_ascii_digit()))
            .then(|| v.parse::<u64>().ok())
            .flatten()
    };
    let mut h = digits(h, if kind == ClockKind::Elapsed { 9 } else { 2 })?;
    let m = digits(m, 2)?;
    let sec = digits(sec, 2)?;
    if m > 59 || sec > 59 {
        return None;
    }
    match half {
        Some(pm) => {
            if !(1..=12).contains(&h) {
                return None;
            }
            // 12 AM is midnight, 12 PM noon.
            h %= 12;
            if pm {
                h += 12;
            }
        }
        None if kind == ClockKind::OfDay && h > 23 => return None,
        None => {}
    }
    let secs = h.checked_mul(3600)?.checked_add(m * 60 + sec)?;
    secs.checked_mul(NS_PER_SEC)?
        .checked_add(parse_fraction(frac)?)
}

/// Turns times of day into a running clock: a time more than 12 hours
/// before the previous one is taken as the next day (the capture crossed
/// midnight), while smaller steps back (rows a little out of order) are
/// kept as they are.
#[derive(Default)]
struct Clock {
    day: u64,
    previous: Option<u64>,
}

impl Clock {
    fn advance(&mut self, time_of_day: u64) -> u64 {
        // Saturating: a crafted file alternating late and early times adds
        // a day every two rows, and must not overflow.
        let mut t = self
            .day
            .saturating_mul(NS_PER_DAY)
            .saturating_add(time_of_day);
        if let Some(p) = self.previous
            && t.saturating_add(NS_PER_DAY / 2) < p
        {
            self.day += 1;
            t = t.saturating_add(NS_PER_DAY);
        }
        self.previous = Some(t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_any_locale() {
        for s in [
            "2,275,840",
            "2.275.840",
            "2 275 840",
            "2\u{a0}275\u{a0}840",
            "2\u{202f}275\u{202f}840",
            "2'275'840",
            "2275840",
        ] {
            assert_eq!(parse_number(s), Some(2_275_840), "{s}");
        }
        assert_eq!(parse_number("0"), Some(0));
        assert_eq!(parse_number("-1"), Some(u64::MAX));
        for s in [
            "",
            "1,23",
            "12,345.678",
            "1,2345",
            "abc",
            "1;234",
            ",123",
            "1,,234",
        ] {
            assert_eq!(parse_number(s), None, "{s}");
        }
        assert_eq!(parse_number("99,999,999,999,999,999,999"), None, "overflow");
    }

    #[test]
    fn clocks() {
        let ns = |h: u64, m: u64, s: u64, f: u64| ((h * 60 + m) * 60 + s) * NS_PER_SEC + f;
        assert_eq!(
            parse_clock("1:18:10.8939738 AM", ClockKind::OfDay),
            Some(ns(1, 18, 10, 893_973_800))
        );
        assert_eq!(
            parse_clock("4:33:14.3076601 PM", ClockKind::OfDay),
            Some(ns(16, 33, 14, 307_660_100))
        );
        assert_eq!(parse_clock("12:00:00.0 AM", ClockKind::OfDay), Some(0));
        assert_eq!(
            parse_clock("12:00:01 PM", ClockKind::OfDay),
            Some(ns(12, 0, 1, 0))
        );
        assert_eq!(
            parse_clock("16:33:14.3076601", ClockKind::OfDay),
            Some(ns(16, 33, 14, 307_660_100))
        );
        assert_eq!(
            parse_clock("00:00:01.5380744", ClockKind::Elapsed),
            Some(ns(0, 0, 1, 538_074_400))
        );
        assert_eq!(
            parse_clock("30:00:00.0", ClockKind::Elapsed),
            Some(ns(30, 0, 0, 0))
        );
        for bad in [
            "",
            "1:2",
            "13:00:00.0 PM",
            "24:00:00.0",
            "1:60:00 AM",
            "x:00:00",
            "1:00:00.5x",
        ] {
            assert_eq!(parse_clock(bad, ClockKind::OfDay), None, "{bad}");
        }
        assert_eq!(parse_clock("1:00:00.0 AM", ClockKind::Elapsed), None);
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("0.0000691"), Some(69_100));
        assert_eq!(parse_seconds("168.7987784"), Some(168_798_778_400));
        assert_eq!(parse_seconds("6,5"), Some(6_500_000_000));
        assert_eq!(parse_seconds("3"), Some(3 * NS_PER_SEC));
        assert_eq!(parse_seconds("x"), None);
        assert_eq!(parse_seconds(".5"), None);
    }

    #[test]
    fn midnight_wraps_once() {
        let mut c = Clock::default();
        let late = parse_clock("11:59:59.0 PM", ClockKind::OfDay).unwrap();
        let early = parse_clock("12:00:01.0 AM", ClockKind::OfDay).unwrap();
        let t0 = c.advance(late);
        let t1 = c.advance(early);
        assert_eq!(t1 - t0, 2 * NS_PER_SEC);
        // A small step back stays on the same day.
        let t2 = c.advance(early - NS_PER_SEC);
        assert_eq!(t1 - t2, NS_PER_SEC);
    }

    #[test]
    fn detail_pairs() {
        let d = "Offset: 5,242,880, Length: 1,048,576, I/O Flags: Non-cached, Paging I/O, Synchronous Paging I/O, Priority: Very Low";
        assert_eq!(detail_value(d, "Offset"), Some("5,242,880"));
        assert_eq!(detail_value(d, "Length"), Some("1,048,576"));
        assert_eq!(
            detail_value(d, "I/O Flags"),
            Some("Non-cached, Paging I/O, Synchronous Paging I/O")
        );
        assert_eq!(detail_value(d, "Priority"), Some("Very Low"));
        assert_eq!(detail_value(d, "Delete"), None);
        let c = "Desired Access: Read Attributes, Disposition: Open, Options: Open Reparse Point, Attributes: n/a, ShareMode: Read, Write, Delete, AllocationSize: n/a, OpenResult: Opened";
        assert_eq!(detail_value(c, "ShareMode"), Some("Read, Write, Delete"));
        assert_eq!(detail_value(c, "OpenResult"), Some("Opened"));
        let r = "ReplaceIfExists: False, FileName: C:\\dir\\a, b: c.txt";
        assert_eq!(detail_value(r, "FileName"), Some("C:\\dir\\a, b: c.txt"));
        assert_eq!(detail_value(r, "ReplaceIfExists"), Some("False"));
        assert_eq!(detail_value("", "Offset"), None);
        assert_eq!(detail_value("Offset: ", "Offset"), Some(""));
    }

    #[test]
    fn operations() {
        let op = |name: &str, detail: &str, ok: bool| fs_op(name, detail, ok, 2).unwrap();
        assert_eq!(
            op("CreateFile", "Options: Synchronous IO Non-Alert, Non-Directory File, Attributes: n/a, OpenResult: Created", true).0,
            RawOp::Open { created: true, directory: false }
        );
        assert_eq!(
            op(
                "CreateFile",
                "Options: Directory File, Attributes: n/a, OpenResult: Opened",
                true
            )
            .0,
            RawOp::Open {
                created: false,
                directory: true
            }
        );
        assert_eq!(
            op("CreateFile", "Disposition: Open, Options: Directory, Synchronous IO Non-Alert, Attributes: n/a, ShareMode: Read, Write, AllocationSize: n/a, OpenResult: Opened", true).0,
            RawOp::Open { created: false, directory: true }
        );
        assert_eq!(
            op("CreateFile", "Options: Directory File", false).0,
            RawOp::Stat
        );
        assert_eq!(
            op(
                "ReadFile",
                "Offset: 0, Length: 16,022, I/O Flags: Non-cached, Paging I/O, Priority: Normal",
                true
            ),
            (
                RawOp::Read {
                    offset: 0,
                    len: 16_022
                },
                true,
                true
            )
        );
        assert_eq!(
            op(
                "WriteFile",
                "Offset: 1, Length: 2, I/O Flags: Synchronous Paging I/O",
                true
            ),
            (RawOp::Write { offset: 1, len: 2 }, false, false)
        );
        assert_eq!(
            op("SetEndOfFileInformationFile", "EndOfFile: 4,096", true).0,
            RawOp::Truncate { size: 4096 }
        );
        assert_eq!(
            op("SetAllocationInformationFile", "AllocationSize: 70", true).0,
            RawOp::Other("SetAllocationInformationFile".into())
        );
        assert_eq!(
            op("SetDispositionInformationFile", "Delete: True", true).0,
            RawOp::Remove
        );
        assert_eq!(
            op("SetDispositionInformationFile", "Delete: False", true).0,
            RawOp::Other("SetDispositionInformationFile".into())
        );
        assert_eq!(
            op(
                "SetDispositionInformationEx",
                "Flags: FILE_DISPOSITION_DELETE, FILE_DISPOSITION_POSIX_SEMANTICS",
                true
            )
            .0,
            RawOp::Remove
        );
        assert_eq!(
            op(
                "SetDispositionInformationEx",
                "Flags: FILE_DISPOSITION_DO_NOT_DELETE",
                true
            )
            .0,
            RawOp::Other("SetDispositionInformationEx".into())
        );
        assert_eq!(
            op(
                "SetRenameInformationFile",
                "ReplaceIfExists: False, FileName: C:\\new.txt",
                true
            )
            .0,
            RawOp::Rename {
                to: "C:\\new.txt".into()
            }
        );
        assert_eq!(
            op("SetRenameInformationEx", "", true).0,
            RawOp::Rename { to: String::new() }
        );
        assert_eq!(op("QueryDirectory", "Filter: *", true).0, RawOp::Stat);
        assert_eq!(op("QueryOpen", "", false).0, RawOp::Stat);
        assert_eq!(
            op("CreateFileMapping", "SyncType: SyncTypeOther", true).0,
            RawOp::Map
        );
        assert_eq!(op("CloseFile", "", true).0, RawOp::Close);
        assert_eq!(op("FlushBuffersFile", "", true).0, RawOp::Sync);
        assert_eq!(op("LockFile", "", true).0, RawOp::Other("LockFile".into()));
        assert!(fs_op("ReadFile", "Offset: 1,2, Length: 3", true, 7).is_err());
        assert!(fs_op("WriteFile", "Offset: 1", true, 7).is_err());
        assert_eq!(non_fs_class("RegQueryValue"), Some("Registry"));
        assert_eq!(non_fs_class("TCP Send"), Some("Network"));
        assert_eq!(non_fs_class("Process Profiling"), Some("Profiling"));
        assert_eq!(non_fs_class("Thread Create"), Some("Process"));
        assert_eq!(non_fs_class("Load Image"), Some("Process"));
        assert_eq!(non_fs_class("ReadFile"), None);
    }
}
