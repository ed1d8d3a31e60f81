//! Process Monitor's native log (`procmon-pml`, version 9): one
//! [`RawEvent`] per event, 32- and 64-bit captures.
//!
//! The layout is reverse-engineered (procmon-parser's `docs/PML Format.md`),
//! checked byte for byte against the real captures in
//! `../shared/real-traces` and their CSV exports. In short, all
//! little-endian, P the capturing system's pointer size:
//!
//! - header (0x3A8 bytes): `PML_`, version 9, 64-bit flag, computer name,
//!   event count (0x234), offsets of the event offsets table (0x248), the
//!   process table (0x250) and the string table (0x258), OS version
//!   (0x274);
//! - event offsets table: one u32 offset and a flags byte per event (events
//!   are not always packed, so they are found only through it);
//! - string table: count, u32 offsets from the table start, each string a
//!   u32 byte size and UTF-16LE;
//! - process table: count, indexes, offsets; each record keyed by the
//!   index stored in it (events use that), PID at +4, name string at +0x40;
//! - event: 0x34-byte header (process index, thread, class, operation,
//!   duration and FILETIME in 100 ns, NTSTATUS, stack depth, detail size,
//!   extra-detail offset), the stack (depth × P), the detail, and an
//!   optional extra detail (u16 size, then data; e.g. bytes transferred);
//! - file-system detail: sub-operation byte, the FLT_PARAMETERS union
//!   (read/write length at 0x10, offset at 0x18/0x20; create options at
//!   0x14/0x18), the path at 0x18 + 5P (u16 info: ASCII flag and length),
//!   then the operation's data (SetInformationFile's buffer).
//!
//! Every offset and count in the file is untrusted: each is checked
//! against the file's length with checked arithmetic before it is used,
//! and an error names the byte where the bad structure starts. Memory
//! holds the process table (index, PID and name only) and one event at a
//! time: events are read in the offsets table's order through one buffered
//! window.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::{Read, Seek, SeekFrom};

use super::error::{FormatError, Location};
use super::procmon_csv::{FsKind, fs_kind};
use crate::event::{RawEvent, RawOp};

const FORMAT: &str = "procmon-pml";

/// The header's size, and where the first event starts, in every version 9
/// log.
const HEADER_LEN: usize = 0x3A8;
/// An event's fixed part.
const EVENT_HEAD: u64 = 0x34;
/// STATUS_PENDING: the operation had not completed when the log was saved.
const STATUS_PENDING: u32 = 0x103;
/// The file-system event class.
const CLASS_FS: u32 = 3;
/// How much of a file-system detail is read: the path (at most 32,767
/// UTF-16 units) and the operation's data after it fit with room to spare,
/// so a detail size claimed by a corrupt event never sets an allocation.
const DETAIL_CAP: u64 = 256 * 1024;
/// The buffered window events are read through; larger than DETAIL_CAP so
/// a detail is always one borrowed slice.
const WINDOW: usize = 1024 * 1024;
/// Process names longer than this (in bytes of UTF-16) are cut: Windows
/// names are far shorter, and a corrupt size must not set an allocation.
const NAME_CAP: u32 = 2048;
/// Offsets-table entries read at a time.
const OFFSETS_CHUNK: u64 = 8192;

/// What reading a PML found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmlInfo {
    /// Events read (all classes), one [`RawEvent`] each.
    pub events: u64,
    /// The capturing system's pointer size in bytes: 4 for a 32-bit
    /// Windows, 8 for a 64-bit one (whatever each process was).
    pub pointer_size: u8,
    /// The capturing system, e.g. `Windows 10.0.18362`.
    pub os: String,
    /// The capturing computer's name.
    pub computer: String,
}

/// Reads a Process Monitor log from `input`, handing each event to `sink`
/// in the file's order.
///
/// File-system events become file operations; events of the other classes
/// become [`RawOp::NotFile`] named by their class (`Registry`, `Process`,
/// `Network`, `Profiling`) with an empty path.
pub fn read<R: Read + Seek>(
    input: R,
    sink: &mut dyn FnMut(RawEvent),
) -> Result<PmlInfo, FormatError> {
    let mut src = Source::new(input)?;
    let header = Header::read(&mut src)?;
    let strings = Strings::read(&mut src, header.strings)?;
    let processes = Processes::read(&mut src, &header, &strings)?;
    let events = read_events(&mut src, &header, &processes, sink)?;
    Ok(PmlInfo {
        events,
        pointer_size: header.pointer,
        os: header.os,
        computer: header.computer,
    })
}

fn bad(at: u64, reason: impl Into<String>) -> FormatError {
    FormatError::bad(FORMAT, Location::Byte(at), reason)
}

/// Positioned reads through one buffered window, every one checked
/// against the file's length first.
struct Source<R> {
    inner: R,
    len: u64,
    window: Vec<u8>,
    /// The file offset of `window[0]`.
    at: u64,
}

impl<R: Read + Seek> Source<R> {
    fn new(mut inner: R) -> Result<Self, FormatError> {
        let len = inner.seek(SeekFrom::End(0)).map_err(io)?;
        Ok(Source {
            inner,
            len,
            window: Vec::new(),
            at: 0,
        })
    }

    /// `n` bytes at `pos` (`n` ≤ WINDOW), or an error naming `what`.
    fn bytes(&mut self, pos: u64, n: u64, what: &str) -> Result<&[u8], FormatError> {
        let end = pos
            .checked_add(n)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                bad(
                    pos,
                    format!(
                        "{what}: {n} bytes at byte {pos} run past the end of the {}-byte file",
                        self.len
                    ),
                )
            })?;
        let window_end = self.at + self.window.len() as u64;
        if pos < self.at || end > window_end {
            // `n` ≤ WINDOW, and the window never reaches past the file.
            let fill = (self.len - pos).min(WINDOW as u64).max(n);
            let fill = usize::try_from(fill).map_err(|_| bad(pos, format!("{what}: too large")))?;
            self.window.resize(fill, 0);
            self.inner.seek(SeekFrom::Start(pos)).map_err(io)?;
            self.inner.read_exact(&mut self.window).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    bad(
                        pos,
                        format!("{what}: the file ended early while reading it"),
                    )
                } else {
                    io(e)
                }
            })?;
            self.at = pos;
        }
        let from = usize::try_from(pos - self.at).map_err(|_| bad(pos, "offset too large"))?;
        let to = usize::try_from(end - self.at).map_err(|_| bad(pos, "offset too large"))?;
        self.window
            .get(from..to)
            .ok_or_else(|| bad(pos, format!("{what}: outside the read window")))
    }

    fn u16(&mut self, pos: u64, what: &str) -> Result<u16, FormatError> {
        let b = self.bytes(pos, 2, what)?;
        le_u16(b, 0).ok_or_else(|| bad(pos, what.to_string()))
    }

    fn u32(&mut self, pos: u64, what: &str) -> Result<u32, FormatError> {
        let b = self.bytes(pos, 4, what)?;
        le_u32(b, 0).ok_or_else(|| bad(pos, what.to_string()))
    }
}

fn io(source: std::io::Error) -> FormatError {
    FormatError::Io {
        format: FORMAT,
        source,
    }
}

fn le_u16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn le_u32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn le_u64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// UTF-16LE up to the first NUL (an odd last byte is dropped).
fn utf16z(b: &[u8]) -> String {
    let units = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&u| u != 0);
    char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// What the reader needs from the file header.
struct Header {
    pointer: u8,
    events: u32,
    offsets_table: u64,
    processes: u64,
    strings: u64,
    os: String,
    computer: String,
}

impl Header {
    fn read<R: Read + Seek>(src: &mut Source<R>) -> Result<Header, FormatError> {
        let len = src.len;
        let h = src.bytes(0, HEADER_LEN as u64, "file header")?;
        let field32 = |off| le_u32(h, off).unwrap_or(0);
        let field64 = |off| le_u64(h, off).unwrap_or(0);
        if h.get(..4) != Some(b"PML_".as_slice()) {
            return Err(bad(0, "no PML_ signature: not a Process Monitor log"));
        }
        let version = field32(4);
        if version != 9 {
            return Err(bad(
                4,
                format!("version {version}; only version 9 is known"),
            ));
        }
        let pointer = if field32(8) != 0 { 8 } else { 4 };
        let computer = utf16z(h.get(0x0C..0x2C).unwrap_or_default());
        let os = format!(
            "Windows {}.{}.{}",
            field32(0x274),
            field32(0x278),
            field32(0x27C)
        );
        let header_size = field64(0x398);
        if header_size != HEADER_LEN as u64 {
            return Err(bad(
                0x398,
                format!("header size {header_size:#x}, not 0x3A8: corrupt"),
            ));
        }
        let offset = |at: usize, what: &str| -> Result<u64, FormatError> {
            let v = field64(at);
            if v == 0 {
                return Err(bad(
                    at as u64,
                    format!("no {what} offset: the log was not closed cleanly"),
                ));
            }
            if v >= len {
                return Err(bad(
                    at as u64,
                    format!("{what} offset {v} is past the end of the {len}-byte file"),
                ));
            }
            Ok(v)
        };
        offset(0x240, "first event")?;
        let offsets_table = offset(0x248, "event offsets table")?;
        let processes = offset(0x250, "process table")?;
        let strings = offset(0x258, "string table")?;
        offset(0x260, "icon table")?;
        let hosts = field64(0x3A0);
        if hosts == 0 || hosts > len {
            return Err(bad(
                0x3A0,
                format!("hosts table offset {hosts} is not inside the {len}-byte file: corrupt"),
            ));
        }
        let events = field32(0x234);
        // Each entry is a u32 offset and a flags byte.
        let table_end = offsets_table
            .checked_add(5 * u64::from(events))
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                bad(
                    offsets_table,
                    format!("the offsets table of {events} events runs past the end of the file"),
                )
            })?;
        if processes > offsets_table && table_end > processes {
            return Err(bad(
                offsets_table,
                format!("the offsets table of {events} events overlaps the process table"),
            ));
        }
        Ok(Header {
            pointer,
            events,
            offsets_table,
            processes,
            strings,
            os,
            computer,
        })
    }
}

/// The string table's place; strings are read when needed.
struct Strings {
    start: u64,
    count: u32,
}

impl Strings {
    fn read<R: Read + Seek>(src: &mut Source<R>, start: u64) -> Result<Strings, FormatError> {
        let count = src.u32(start, "string count")?;
        let offsets_end = start
            .checked_add(4)
            .and_then(|p| p.checked_add(4 * u64::from(count)));
        if offsets_end.is_none_or(|e| e > src.len) {
            return Err(bad(
                start,
                format!("the string table's {count} offsets run past the end of the file"),
            ));
        }
        Ok(Strings { start, count })
    }

    /// String `index`: a u32 byte size, then UTF-16LE.
    fn get<R: Read + Seek>(&self, src: &mut Source<R>, index: u32) -> Result<String, FormatError> {
        if index >= self.count {
            return Err(bad(
                self.start,
                format!("string {index} asked for, the table holds {}", self.count),
            ));
        }
        let slot = self.start + 4 + 4 * u64::from(index);
        let offset = src.u32(slot, "string offset")?;
        let at = self.start + u64::from(offset);
        let size = src.u32(at, "string size")?;
        let body = at + 4;
        if body
            .checked_add(u64::from(size))
            .is_none_or(|e| e > src.len)
        {
            return Err(bad(
                at,
                format!("string {index} of {size} bytes runs past the end of the file"),
            ));
        }
        let b = src.bytes(body, u64::from(size.min(NAME_CAP)), "string")?;
        Ok(utf16z(b))
    }
}

/// The processes events refer to, by the index stored in each record
/// (never the record's position in the table).
struct Processes {
    by_index: HashMap<u32, (u32, u32)>,
    names: HashMap<u32, String>,
}

impl Processes {
    fn read<R: Read + Seek>(
        src: &mut Source<R>,
        header: &Header,
        strings: &Strings,
    ) -> Result<Processes, FormatError> {
        let start = header.processes;
        let p = u64::from(header.pointer);
        let count = src.u32(start, "process count")?;
        let arrays_end = start
            .checked_add(4)
            .and_then(|x| x.checked_add(8 * u64::from(count)));
        if arrays_end.is_none_or(|e| e > src.len) {
            return Err(bad(
                start,
                format!("the process table's {count} entries run past the end of the file"),
            ));
        }
        let fixed = 0x64 + p;
        let module = 2 * p + 0x30;
        let mut by_index = HashMap::new();
        let mut names: HashMap<u32, String> = HashMap::new();
        let mut name_bytes = 0u64;
        let offsets = start + 4 + 4 * u64::from(count);
        for i in 0..u64::from(count) {
            let off = src.u32(offsets + 4 * i, "process offset")?;
            let at = start + u64::from(off);
            let r = src.bytes(at, fixed, "process record")?;
            let (Some(index), Some(pid), Some(module_count)) = (
                le_u32(r, 0),
                le_u32(r, 4),
                le_u32(r, usize::try_from(0x60 + p).unwrap_or(usize::MAX)),
            ) else {
                return Err(bad(at, "process record cut short"));
            };
            let mut string_ids = [0u32; 8];
            for (k, id) in string_ids.iter_mut().enumerate() {
                *id = le_u32(r, 0x38 + 4 * k).unwrap_or(u32::MAX);
            }
            let modules_end = u64::from(module_count)
                .checked_mul(module)
                .and_then(|m| m.checked_add(at + fixed));
            if modules_end.is_none_or(|e| e > src.len) {
                return Err(bad(
                    at,
                    format!(
                        "process {index}'s {module_count} modules run past the end of the file"
                    ),
                ));
            }
            if let Some(&bad_id) = string_ids.iter().find(|&&s| s >= strings.count) {
                return Err(bad(
                    at,
                    format!(
                        "process {index} names string {bad_id}; the table holds {}",
                        strings.count
                    ),
                ));
            }
            let name_id = string_ids[2];
            if let Entry::Vacant(slot) = names.entry(name_id) {
                let name = strings.get(src, name_id)?;
                // Genuine logs store each string once, so the names kept
                // never exceed the file; overlapping strings in a corrupt
                // one could multiply them.
                name_bytes += name.len() as u64;
                if name_bytes > src.len {
                    return Err(bad(start, "process names overlap: corrupt string table"));
                }
                slot.insert(name);
            }
            // A repeated index: the last record wins, as in procmon-parser.
            by_index.insert(index, (pid, name_id));
        }
        Ok(Processes { by_index, names })
    }

    /// The PID and name of process `index`, or an unknown process.
    fn get(&self, index: u32) -> (u32, &str) {
        match self.by_index.get(&index) {
            Some(&(pid, name_id)) => (
                pid,
                self.names.get(&name_id).map_or("<unknown>", String::as_str),
            ),
            None => (0, "<unknown>"),
        }
    }
}

/// Every event in the offsets table's order, to `sink`; returns how many.
fn read_events<R: Read + Seek>(
    src: &mut Source<R>,
    header: &Header,
    processes: &Processes,
    sink: &mut dyn FnMut(RawEvent),
) -> Result<u64, FormatError> {
    let total = u64::from(header.events);
    let mut entries = Vec::new();
    let mut done = 0u64;
    while done < total {
        let n = (total - done).min(OFFSETS_CHUNK);
        let at = header.offsets_table + 5 * done;
        entries.clear();
        entries.extend_from_slice(src.bytes(at, 5 * n, "event offsets table")?);
        for entry in entries.chunks_exact(5) {
            let offset = u64::from(u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]));
            sink(read_event(src, header, processes, offset)?);
        }
        done += n;
    }
    Ok(total)
}

/// The event at `e`.
fn read_event<R: Read + Seek>(
    src: &mut Source<R>,
    header: &Header,
    processes: &Processes,
    e: u64,
) -> Result<RawEvent, FormatError> {
    let p = u64::from(header.pointer);
    let h = src.bytes(e, EVENT_HEAD, "event header")?;
    let f32 = |off| le_u32(h, off).unwrap_or(0);
    let f64 = |off| le_u64(h, off).unwrap_or(0);
    let process_index = f32(0x00);
    let tid = f32(0x04);
    let class = f32(0x08);
    let operation = le_u16(h, 0x0C).unwrap_or(0);
    let duration = f64(0x14);
    let filetime = f64(0x1C);
    let status = f32(0x24);
    let depth = u64::from(le_u16(h, 0x28).unwrap_or(0));
    let detail_size = u64::from(f32(0x2C));
    let extra_at = u64::from(f32(0x30));

    // The stack trace (depth pointers) sits between the header and the
    // detail; both sizes are untrusted.
    let detail_rel = EVENT_HEAD + depth * p;
    let detail_end = detail_rel + detail_size;
    let detail_at = e + detail_rel;
    if e.checked_add(detail_end).is_none_or(|x| x > src.len) {
        return Err(bad(
            e,
            format!(
                "event: its stack of {depth} frames and detail of {detail_size} bytes run past the end of the file"
            ),
        ));
    }
    let mut extra_u32 = None;
    if extra_at != 0 {
        if extra_at < detail_end {
            return Err(bad(
                e,
                format!(
                    "event: extra detail at +{extra_at} overlaps its detail (ends at +{detail_end})"
                ),
            ));
        }
        let x = e + extra_at;
        let size = src.u16(x, "extra detail size")?;
        let body = src.bytes(x + 2, u64::from(size), "extra detail")?;
        // The transferred count and the OpenResult are a u32 (the low half
        // of a u64 on 64-bit systems); a shorter extra detail has neither.
        extra_u32 = le_u32(body, 0);
    }
    let t_ns = filetime
        .checked_mul(100)
        .ok_or_else(|| bad(e + 0x1C, format!("event time {filetime} is out of range")))?;
    // A pending operation (STATUS_PENDING) had not completed when the log
    // was saved: its duration field holds no duration (the samples have
    // garbage there, and Procmon's CSV leaves Duration empty).
    let dur_ns = if status == STATUS_PENDING {
        0
    } else {
        duration.checked_mul(100).ok_or_else(|| {
            bad(
                e + 0x14,
                format!("event duration {duration} is out of range"),
            )
        })?
    };
    let (pid, process) = processes.get(process_index);
    let process = process.to_string();
    let result = status_text(status);
    let ok = status == 0;

    let (op, path, direct, paging) = if class == CLASS_FS {
        let detail = src.bytes(detail_at, detail_size.min(DETAIL_CAP), "event detail")?;
        fs_event(
            detail,
            detail_size,
            detail_at,
            header.pointer,
            operation,
            status,
            extra_u32,
        )?
    } else {
        (
            RawOp::NotFile(class_name(class)),
            String::new(),
            false,
            false,
        )
    };
    Ok(RawEvent {
        t_ns,
        dur_ns,
        process,
        pid,
        tid,
        op,
        path,
        ok,
        result,
        direct,
        paging,
        calls: 1,
    })
}

/// A file-system event's operation, path, and direct and paging flags,
/// from its detail (`d`: the first DETAIL_CAP bytes of `size`, at file
/// offset `at`).
fn fs_event(
    d: &[u8],
    size: u64,
    at: u64,
    pointer: u8,
    operation: u16,
    status: u32,
    extra_u32: Option<u32>,
) -> Result<(RawOp, String, bool, bool), FormatError> {
    let p = usize::from(pointer);
    let wide = p == 8;
    // The path's info word follows the FLT_PARAMETERS union, whose size
    // follows the pointer size.
    let name_info = 0x18 + 5 * p;
    let path_at = name_info + 4;
    let info = le_u16(d, name_info).filter(|_| d.len() >= path_at).ok_or_else(|| {
        bad(
            at,
            format!("file-system detail of {size} bytes is shorter than its {path_at}-byte fixed part"),
        )
    })?;
    let ascii = info & 0x8000 != 0;
    let chars = usize::from(info & 0x7FFF);
    let path_len = if ascii { chars } else { 2 * chars };
    let after = path_at + path_len;
    let raw = d.get(path_at..after).ok_or_else(|| {
        bad(
            at,
            format!(
                "the path of {path_len} bytes runs past the file-system detail of {size} bytes"
            ),
        )
    })?;
    let mut path = detail_string(raw, ascii);
    let sub = d.first().copied().unwrap_or(0);
    let name = fs_op_name(operation, sub);
    if name == "QueryDirectory" {
        // Procmon shows a listing's filter (`*`, or one name) as part of
        // the path; the CSV has it so, and both formats must agree.
        let filter = query_filter(d, after).ok_or_else(|| {
            bad(
                at,
                format!("QueryDirectory: the filter runs past the detail of {size} bytes"),
            )
        })?;
        if !filter.is_empty() {
            if !path.ends_with('\\') {
                path.push('\\');
            }
            path.push_str(&filter);
        }
    }
    let missing = |what: &str| {
        bad(
            at,
            format!("{name}: the detail of {size} bytes has no {what}"),
        )
    };
    let mut direct = false;
    let mut paging = false;
    let op = match fs_kind(&name) {
        FsKind::Create => {
            // DesiredAccess and the impersonation SID follow the path; a
            // detail that cannot hold them is damaged.
            let sid_len = d
                .get(after + 4)
                .copied()
                .ok_or_else(|| missing("access mask"))?;
            if d.len() < after + 8 + usize::from(sid_len) {
                return Err(missing("impersonation SID"));
            }
            let options =
                le_u32(d, if wide { 0x18 } else { 0x14 }).ok_or_else(|| missing("options"))?;
            if status != 0 {
                // A failed open found nothing to open: a lookup.
                RawOp::Stat
            } else {
                RawOp::Open {
                    // OpenResult: 0 Superseded, 2 Created, 3 Overwritten.
                    created: matches!(extra_u32, Some(0 | 2 | 3)),
                    // FILE_DIRECTORY_FILE.
                    directory: options & 0x1 != 0,
                }
            }
        }
        kind @ (FsKind::Read | FsKind::Write) => {
            let word = le_u32(d, 0x08).ok_or_else(|| missing("I/O flags"))?;
            let requested = le_u32(d, 0x10).ok_or_else(|| missing("length"))?;
            let offset =
                le_u64(d, if wide { 0x20 } else { 0x18 }).ok_or_else(|| missing("offset"))?;
            let io_flags = word & 0x00E0_00FF;
            direct = io_flags & 0x01 != 0;
            paging = io_flags & 0x02 != 0;
            // The extra detail, when present, is the count transferred.
            let len = u64::from(extra_u32.unwrap_or(requested));
            // The signed offset keeps its bits (-1 is Windows' end-of-file
            // marker), as the CSV reader does with "-1".
            if kind == FsKind::Read {
                RawOp::Read { offset, len }
            } else {
                RawOp::Write { offset, len }
            }
        }
        FsKind::Close => RawOp::Close,
        FsKind::Flush => RawOp::Sync,
        FsKind::EndOfFile => RawOp::Truncate {
            size: le_u64(d, after).ok_or_else(|| missing("end-of-file value"))?,
        },
        FsKind::Disposition => match d.get(after) {
            Some(0) => RawOp::Other(name.into_owned()),
            Some(_) => RawOp::Remove,
            None => return Err(missing("delete flag")),
        },
        // Not seen in any sample: a missing buffer reads as no deletion
        // rather than an error.
        FsKind::DispositionEx => match le_u32(d, after) {
            Some(flags) if flags & 0x1 != 0 => RawOp::Remove,
            _ => RawOp::Other(name.into_owned()),
        },
        FsKind::Rename => RawOp::Rename {
            to: rename_target(d, after, p),
        },
        FsKind::Stat => RawOp::Stat,
        FsKind::Map => RawOp::Map,
        FsKind::Other => RawOp::Other(name.into_owned()),
    };
    Ok((op, path, direct, paging))
}

/// A detail string: ASCII-flagged ones are one byte a character (decoded
/// as Latin-1, which cannot fail on a stray high byte), others UTF-16LE.
fn detail_string(raw: &[u8], ascii: bool) -> String {
    if ascii {
        raw.iter().map(|&b| char::from(b)).collect()
    } else {
        utf16z(raw)
    }
}

/// QueryDirectory's filter after the path: an info word (ASCII flag and
/// character count) and the string. None when the count runs past the
/// detail; an empty filter when the detail ends at the path.
fn query_filter(d: &[u8], after: usize) -> Option<String> {
    let Some(info) = le_u16(d, after) else {
        return Some(String::new());
    };
    let ascii = info & 0x8000 != 0;
    let chars = usize::from(info & 0x7FFF);
    let len = if ascii { chars } else { 2 * chars };
    let at = after + 2;
    let raw = d.get(at..at.checked_add(len)?)?;
    Some(detail_string(raw, ascii))
}

/// The new name in a FILE_RENAME_INFORMATION(_EX) buffer at `after`:
/// flags (pointer-aligned), RootDirectory, u32 FileNameLength, UTF-16
/// FileName. No sample holds a rename, so a buffer that does not fit gives
/// "" (unknown) rather than an error. The `\??\` prefix of an NT path is
/// dropped to read like Procmon's `C:\...`.
fn rename_target(d: &[u8], after: usize, p: usize) -> String {
    let name_len = after
        .checked_add(2 * p)
        .and_then(|o| le_u32(d, o).map(|n| (o + 4, n)));
    let Some((name_at, n)) = name_len else {
        return String::new();
    };
    let Some(raw) = usize::try_from(n)
        .ok()
        .and_then(|n| d.get(name_at..name_at.checked_add(n)?))
    else {
        return String::new();
    };
    let name = utf16z(raw);
    match name.strip_prefix("\\??\\") {
        Some(rest) => rest.to_string(),
        None => name,
    }
}

/// An event class's name as Procmon's CSV writes it.
fn class_name(class: u32) -> String {
    match class {
        0 => "Unknown".into(),
        1 => "Process".into(),
        2 => "Registry".into(),
        CLASS_FS => "File System".into(),
        4 => "Profiling".into(),
        5 => "Network".into(),
        6 => "IPC".into(),
        n => format!("Class {n}"),
    }
}

/// The name Procmon prints for file-system operation `op` with
/// sub-operation `sub` (detail byte 0). Only some operations are refined
/// by their sub-operation; a sub-operation this table does not know prints
/// as `<Unknown>`, as Procmon does, and 0 keeps the operation's own name.
fn fs_op_name(op: u16, sub: u8) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    let refined = match op {
        25 => Some(query_information_name(sub)),
        26 => Some(set_information_name(sub)),
        30 => Some(match sub {
            1 => Some("QueryInformationVolume"),
            2 => Some("QueryLabelInformationVolume"),
            3 => Some("QuerySizeInformationVolume"),
            4 => Some("QueryDeviceInformationVolume"),
            5 => Some("QueryAttributeInformationVolume"),
            6 => Some("QueryControlInformationVolume"),
            7 => Some("QueryFullSizeInformationVolume"),
            8 => Some("QueryObjectIdInformationVolume"),
            _ => None,
        }),
        31 => Some(match sub {
            1 => Some("SetControlInformationVolume"),
            2 => Some("SetLabelInformationVolume"),
            8 => Some("SetObjectIdInformationVolume"),
            _ => None,
        }),
        32 => Some(match sub {
            1 => Some("QueryDirectory"),
            2 => Some("NotifyChangeDirectory"),
            _ => None,
        }),
        37 => Some(match sub {
            1 => Some("LockFile"),
            2 => Some("UnlockFileSingle"),
            3 => Some("UnlockFileAll"),
            4 => Some("UnlockFileByKey"),
            _ => None,
        }),
        47 => Some(pnp_name(sub)),
        _ => None,
    };
    match refined {
        Some(name) if sub != 0 => Cow::Borrowed(name.unwrap_or("<Unknown>")),
        _ => match FS_OPERATIONS.get(usize::from(op)) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Borrowed("<Unknown>"),
        },
    }
}

/// File-system operations by code (the IRP major function or fast I/O
/// call Procmon saw).
const FS_OPERATIONS: [&str; 48] = [
    "VolumeDismount",
    "VolumeMount",
    "FASTIO_MDL_WRITE_COMPLETE",
    "WriteFile2",
    "FASTIO_MDL_READ_COMPLETE",
    "ReadFile2",
    "QueryOpen",
    "FASTIO_CHECK_IF_POSSIBLE",
    "IRP_MJ_12",
    "IRP_MJ_11",
    "IRP_MJ_10",
    "IRP_MJ_9",
    "IRP_MJ_8",
    "FASTIO_NOTIFY_STREAM_FO_CREATION",
    "FASTIO_RELEASE_FOR_CC_FLUSH",
    "FASTIO_ACQUIRE_FOR_CC_FLUSH",
    "FASTIO_RELEASE_FOR_MOD_WRITE",
    "FASTIO_ACQUIRE_FOR_MOD_WRITE",
    "FASTIO_RELEASE_FOR_SECTION_SYNCHRONIZATION",
    "CreateFileMapping",
    "CreateFile",
    "CreatePipe",
    "IRP_MJ_CLOSE",
    "ReadFile",
    "WriteFile",
    "QueryInformationFile",
    "SetInformationFile",
    "QueryEAFile",
    "SetEAFile",
    "FlushBuffersFile",
    "QueryVolumeInformation",
    "SetVolumeInformation",
    "DirectoryControl",
    "FileSystemControl",
    "DeviceIoControl",
    "InternalDeviceIoControl",
    "Shutdown",
    "LockUnlockFile",
    "CloseFile",
    "CreateMailSlot",
    "QuerySecurityFile",
    "SetSecurityFile",
    "Power",
    "SystemControl",
    "DeviceChange",
    "QueryFileQuota",
    "SetFileQuota",
    "PlugAndPlay",
];

/// QueryInformationFile's sub-operations (the FILE_INFORMATION_CLASS), as
/// Procmon names them.
fn query_information_name(sub: u8) -> Option<&'static str> {
    Some(match sub {
        0x04 => "QueryBasicInformationFile",
        0x05 => "QueryStandardInformationFile",
        0x06 => "QueryFileInternalInformationFile",
        0x07 => "QueryEaInformationFile",
        0x09 => "QueryNameInformationFile",
        0x0E => "QueryPositionInformationFile",
        0x12 => "QueryAllInformationFile",
        0x14 => "QueryEndOfFile",
        0x16 => "QueryStreamInformationFile",
        0x1C => "QueryCompressionInformationFile",
        0x1D => "QueryId",
        0x1F => "QueryMoveClusterInformationFile",
        0x22 => "QueryNetworkOpenInformationFile",
        0x23 => "QueryAttributeTagFile",
        0x25 => "QueryIdBothDirectory",
        0x27 => "QueryValidDataLength",
        0x28 => "QueryShortNameInformationFile",
        0x2B => "QueryIoPiorityHint",
        0x2E => "QueryLinks",
        0x30 => "QueryNormalizedNameInformationFile",
        0x31 => "QueryNetworkPhysicalNameInformationFile",
        0x32 => "QueryIdGlobalTxDirectoryInformation",
        0x33 => "QueryIsRemoteDeviceInformation",
        0x34 => "QueryAttributeCacheInformation",
        0x35 => "QueryNumaNodeInformation",
        0x36 => "QueryStandardLinkInformation",
        0x37 => "QueryRemoteProtocolInformation",
        0x38 => "QueryRenameInformationBypassAccessCheck",
        0x39 => "QueryLinkInformationBypassAccessCheck",
        0x3A => "QueryVolumeNameInformation",
        0x3B => "QueryIdInformation",
        0x3C => "QueryIdExtdDirectoryInformation",
        0x3E => "QueryHardLinkFullIdInformation",
        0x3F => "QueryIdExtdBothDirectoryInformation",
        0x43 => "QueryDesiredStorageClassInformation",
        0x44 => "QueryStatInformation",
        0x45 => "QueryMemoryPartitionInformation",
        0x46 => "QuerySatLxInformation",
        0x47 => "QueryCaseSensitiveInformation",
        0x48 => "QueryLinkInformationEx",
        0x49 => "QueryLinkInfomraitonBypassAccessCheck",
        0x4A => "QueryStorageReservedIdInformation",
        0x4B => "QueryCaseSensitiveInformationForceAccessCheck",
        _ => return None,
    })
}

/// SetInformationFile's sub-operations (the FILE_INFORMATION_CLASS).
fn set_information_name(sub: u8) -> Option<&'static str> {
    Some(match sub {
        0x04 => "SetBasicInformationFile",
        0x0A => "SetRenameInformationFile",
        0x0B => "SetLinkInformationFile",
        0x0D => "SetDispositionInformationFile",
        0x0E => "SetPositionInformationFile",
        0x13 => "SetAllocationInformationFile",
        0x14 => "SetEndOfFileInformationFile",
        0x16 => "SetFileStreamInformation",
        0x17 => "SetPipeInformation",
        0x27 => "SetValidDataLengthInformationFile",
        0x28 => "SetShortNameInformation",
        0x3D => "SetReplaceCompletionInformation",
        0x40 => "SetDispositionInformationEx",
        0x41 => "SetRenameInformationEx",
        0x42 => "SetRenameInformationExBypassAccessCheck",
        0x4A => "SetStorageReservedIdInformation",
        _ => return None,
    })
}

/// PlugAndPlay's sub-operations (the IRP minor function).
fn pnp_name(sub: u8) -> Option<&'static str> {
    Some(match sub {
        0x00 => "StartDevice",
        0x01 => "QueryRemoveDevice",
        0x02 => "RemoveDevice",
        0x03 => "CancelRemoveDevice",
        0x04 => "StopDevice",
        0x05 => "QueryStopDevice",
        0x06 => "CancelStopDevice",
        0x07 => "QueryDeviceRelations",
        0x08 => "QueryInterface",
        0x09 => "QueryCapabilities",
        0x0A => "QueryResources",
        0x0B => "QueryResourceRequirements",
        0x0C => "QueryDeviceText",
        0x0D => "FilterResourceRequirements",
        0x0F => "ReadConfig",
        0x10 => "WriteConfig",
        0x11 => "Eject",
        0x12 => "SetLock",
        0x13 => "QueryId2",
        0x14 => "QueryPnpDeviceState",
        0x15 => "QueryBusInformation",
        0x16 => "DeviceUsageNotification",
        0x17 => "SurpriseRemoval",
        0x18 => "QueryLegacyBusInformation",
        _ => return None,
    })
}

/// An NTSTATUS as Procmon's Result column prints it: the names Procmon
/// uses, 0x103 (pending) as empty, any other code as `0x%X`. The table is
/// procmon-parser's (MIT), which matches the CSV exports of the samples.
fn status_text(status: u32) -> String {
    let name = match status {
        0 => "SUCCESS",
        STATUS_PENDING => "",
        0x104 => "REPARSE",
        0x105 => "MORE ENTRIES",
        0x108 => "OPLOCK BREAK IN PROGRESS",
        0x10B => "NOTIFY CLEANUP",
        0x10C => "NOTIFY ENUM DIR",
        0x12A => "FILE LOCKED WITH ONLY READERS",
        0x12B => "FILE LOCKED WITH WRITERS",
        0x215 => "OPLOCK SWITCHED TO NEW HANDLE",
        0x216 => "OPLOCK HANDLE CLOSED",
        0x367 => "WAIT FOR OPLOCK",
        0x368 => "REPARSE GLOBAL",
        0x4000_0016 => "PREDEFINED HANDLE",
        0x8000_0002 => "DATATYPE MISALIGNMENT",
        0x8000_0005 => "BUFFER OVERFLOW",
        0x8000_0006 => "NO MORE FILES",
        0x8000_0015 => "INVALID EA FLAG",
        0x8000_001A => "NO MORE ENTRIES",
        0x8009_0322 => "E_WRONG_PRINCIPAL",
        0xC000_0001 => "UNSUCCESSFUL",
        0xC000_0002 => "NOT IMPLEMENTED",
        0xC000_0003 => "INVALID INFO CLASS",
        0xC000_0004 => "INFO LENGTH MISMATCH",
        0xC000_0005 => "ACCESS VIOLATION",
        0xC000_0006 => "IN PAGE ERROR",
        0xC000_0008 => "INVALID HANDLE",
        0xC000_000D => "INVALID PARAMETER",
        0xC000_000E => "NO SUCH DEVICE",
        0xC000_000F => "NO SUCH FILE",
        0xC000_0010 => "INVALID DEVICE REQUEST",
        0xC000_0011 => "END OF FILE",
        0xC000_0012 => "WRONG VOLUME",
        0xC000_0013 => "NO MEDIA",
        0xC000_0015 => "NONEXISTENT SECTOR",
        0xC000_0017 => "NO MEMORY",
        0xC000_0021 => "ALREADY COMMITTED",
        0xC000_0022 => "ACCESS DENIED",
        0xC000_0023 => "BUFFER TOO SMALL",
        0xC000_0024 => "OBJECT TYPE MISMATCH",
        0xC000_0032 => "DISK CORRUPT",
        0xC000_0033 => "NAME INVALID",
        0xC000_0034 => "NAME NOT FOUND",
        0xC000_0035 => "NAME COLLISION",
        0xC000_0039 => "OBJECT PATH INVALID",
        0xC000_003A => "PATH NOT FOUND",
        0xC000_003B => "PATH SYNTAX BAD",
        0xC000_003C => "DATA OVERRUN",
        0xC000_003F => "CRC ERROR",
        0xC000_0043 => "SHARING VIOLATION",
        0xC000_0044 => "QUOTA EXCEEDED",
        0xC000_004F => "EAS NOT SUPPORTED",
        0xC000_0050 => "EA TOO LARGE",
        0xC000_0051 => "NONEXISTENT EA ENTRY",
        0xC000_0052 => "NO EAS ON FILE",
        0xC000_0053 => "EA CORRUPT ERROR",
        0xC000_0054 => "FILE LOCK CONFLICT",
        0xC000_0055 => "NOT GRANTED",
        0xC000_0056 => "DELETE PENDING",
        0xC000_005A => "INVALID OWNER",
        0xC000_0061 => "PRIVILEGE NOT HELD",
        0xC000_006D => "LOGON FAILURE",
        0xC000_007E => "RANGE NOT LOCKED",
        0xC000_007F => "DISK FULL",
        0xC000_0098 => "FILE INVALID",
        0xC000_009A => "INSUFFICIENT RESOURCES",
        0xC000_009C => "DEVICE DATA ERROR",
        0xC000_009D => "DEVICE NOT CONNECTED",
        0xC000_00A2 => "MEDIA WRITE PROTECTED",
        0xC000_00A5 => "BAD IMPERSONATION",
        0xC000_00AB => "INSTANCE NOT AVAILABLE",
        0xC000_00AC => "PIPE NOT AVAILABLE",
        0xC000_00AD => "INVALID PIPE STATE",
        0xC000_00AE => "PIPE BUSY",
        0xC000_00B0 => "PIPE DISCONNECTED",
        0xC000_00B1 => "PIPE CLOSING",
        0xC000_00B2 => "PIPE CONNECTED",
        0xC000_00B3 => "PIPE LISTENING",
        0xC000_00B4 => "INVALID READ MODE",
        0xC000_00B5 => "IO TIMEOUT",
        0xC000_00BA => "IS DIRECTORY",
        0xC000_00BB => "NOT SUPPORTED",
        0xC000_00BD => "DUPLICATE NAME",
        0xC000_00BE => "BAD NETWORK PATH",
        0xC000_00C1 => "TOO MANY COMMANDS",
        0xC000_00C3 => "INVALID NETWORK RESPONSE",
        0xC000_00C4 => "NETWORK ERROR",
        0xC000_00CC => "BAD NETWORK NAME",
        0xC000_00D4 => "NOT SAME DEVICE",
        0xC000_00D8 => "CANT WAIT",
        0xC000_00D9 => "PIPE EMPTY",
        0xC000_00DB => "CSC OBJECT PATH NOT FOUND",
        0xC000_00E2 => "OPLOCK NOT GRANTED",
        0xC000_00EF => "INVALID PARAMETER 1",
        0xC000_00F0 => "INVALID PARAMETER 2",
        0xC000_00F1 => "INVALID PARAMETER 3",
        0xC000_00F2 => "INVALID PARAMETER 4",
        0xC000_00FB => "REDIRECTOR NOT STARTED",
        0xC000_0101 => "NOT EMPTY",
        0xC000_0102 => "FILE CORRUPT",
        0xC000_0103 => "NOT A DIRECTORY",
        0xC000_0107 => "FILES OPEN",
        0xC000_010D => "CANNOT IMPERSONATE",
        0xC000_0120 => "CANCELLED",
        0xC000_0121 => "CANNOT DELETE",
        0xC000_0123 => "FILE DELETED",
        0xC000_0128 => "FILE CLOSED",
        0xC000_012A => "THREAD NOT IN PROCESS",
        0xC000_0148 => "INVALID LEVEL",
        0xC000_014B => "PIPE BROKEN",
        0xC000_014C => "REGISTRY CORRUPT",
        0xC000_014D => "IO FAILED",
        0xC000_017C => "KEY DELETED",
        0xC000_0181 => "CHILD MUST BE VOLATILE",
        0xC000_0184 => "INVALID DEVICE STATE",
        0xC000_0185 => "IO DEVICE ERROR",
        0xC000_0188 => "LOG FILE FULL",
        0xC000_019C => "FS DRIVER REQUIRED",
        0xC000_0203 => "USER SESSION DELETED",
        0xC000_0205 => "INSUFFICIENT SERVER RESOURCES",
        0xC000_0207 => "INVALID ADDRESS COMPONENT",
        0xC000_020C => "DISCONNECTED",
        0xC000_0225 => "NOT FOUND",
        0xC000_0243 => "USER MAPPED FILE",
        0xC000_0248 => "LOGIN WKSTA RESTRICTION",
        0xC000_0257 => "PATH NOT COVERED",
        0xC000_026D => "DFS UNAVAILABLE",
        0xC000_0273 => "NO MORE MATCHES",
        0xC000_0275 => "NOT REPARSE POINT",
        0xC000_02EA => "CANNOT MAKE",
        0xC000_02F0 => "OBJECTID NOT FOUND",
        0xC000_0388 => "DOWNGRADE DETECTED",
        0xC000_0425 => "HIVE UNLOADED",
        0xC000_0427 => "FILE SYSTEM LIMITATION",
        0xC000_0463 => "DEVICE FEATURE NOT SUPPORTED",
        0xC000_046D => "OBJECT NOT EXTERNALLY BACKED",
        0xC000_04AD => "STORAGE RESERVE ID INVALID",
        0xC000_04AE => "STORAGE RESERVE DOES NOT EXIST",
        0xC000_04AF => "STORAGE RESERVE ALREADY EXISTS",
        0xC000_04B0 => "STORAGE RESERVE NOT EMPTY",
        0xC000_04B1 => "NOT A DAX VOLUME",
        0xC000_0909 => "CANNOT BREAK OPLOCK",
        0xC000_A2A1 => "STATUS_OFFLOAD_READ_FLT_NOT_SUPPORTED",
        0xC000_A2A2 => "STATUS_OFFLOAD_WRITE_FLT_NOT_SUPPORTED",
        0xC000_A2A3 | 0xC000_A2A4 => "OFFLOAD READ FILE NOT SUPPORTED",
        0xC019_0001 => "TRANSACTIONAL CONFLICT",
        0xC019_0002 => "INVALID TRANSACTION",
        0xC019_0003 => "TRANSACTION_NOT_ACTIVE",
        0xC019_003E => "EFS NOT ALLOWED IN TRANSACTION",
        0xC019_003F => "TRANSACTIONAL OPEN NOT ALLOWED",
        0xC019_0040 => "TRANSACTED MAPPING UNSUPPORTED REMOTE",
        0xC019_0044 => "CANNOT EXECUTE FILE IN TRANSACTION",
        0xC019_0049 => "SPARSE NOT ALLOWED IN TRANSACTION",
        0xC01C_0004 => "FAST IO DISALLOWED",
        other => return format!("0x{other:X}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One synthetic event: a file-system one unless `class` says not.
    struct Ev {
        class: u32,
        op: u16,
        sub: u8,
        status: u32,
        process: u32,
        path: &'static str,
        /// Little-endian fields at fixed detail offsets.
        fields: Vec<(usize, Vec<u8>)>,
        /// Bytes after the path.
        after: Vec<u8>,
        extra: Option<Vec<u8>>,
    }

    fn fs(op: u16, sub: u8, path: &'static str) -> Ev {
        Ev {
            class: 3,
            op,
            sub,
            status: 0,
            process: 7,
            path,
            fields: Vec::new(),
            after: Vec::new(),
            extra: None,
        }
    }

    fn put(f: &mut [u8], at: usize, v: &[u8]) {
        f[at..at + v.len()].copy_from_slice(v);
    }

    /// A minimal version 9 log: header, events, offsets table, one process
    /// (index 7, PID 1234, `tool.exe`), strings, icon and hosts tables.
    fn build(pointer: usize, events: &[Ev]) -> Vec<u8> {
        let mut f = vec![0u8; HEADER_LEN];
        put(&mut f, 0, b"PML_");
        put(&mut f, 4, &9u32.to_le_bytes());
        put(&mut f, 8, &u32::from(pointer == 8).to_le_bytes());
        for (i, c) in "TESTPC".encode_utf16().enumerate() {
            put(&mut f, 0x0C + 2 * i, &c.to_le_bytes());
        }
        let mut offsets = Vec::new();
        for ev in events {
            offsets.push(f.len() as u32);
            let mut d = vec![0u8; 0x18 + 5 * pointer + 4];
            d[0] = ev.sub;
            for (at, v) in &ev.fields {
                put(&mut d, *at, v);
            }
            let info = 0x8000u16 | ev.path.len() as u16;
            put(&mut d, 0x18 + 5 * pointer, &info.to_le_bytes());
            d.extend_from_slice(ev.path.as_bytes());
            d.extend_from_slice(&ev.after);
            let depth = 1usize;
            let detail_end = 0x34 + depth * pointer + d.len();
            let mut h = vec![0u8; 0x34];
            put(&mut h, 0, &ev.process.to_le_bytes());
            put(&mut h, 4, &11u32.to_le_bytes());
            put(&mut h, 8, &ev.class.to_le_bytes());
            put(&mut h, 0x0C, &ev.op.to_le_bytes());
            put(&mut h, 0x14, &5u64.to_le_bytes());
            put(&mut h, 0x1C, &132_400_000_000_000_000u64.to_le_bytes());
            put(&mut h, 0x24, &ev.status.to_le_bytes());
            put(&mut h, 0x28, &(depth as u16).to_le_bytes());
            put(&mut h, 0x2C, &(d.len() as u32).to_le_bytes());
            if ev.extra.is_some() {
                put(&mut h, 0x30, &(detail_end as u32).to_le_bytes());
            }
            f.extend_from_slice(&h);
            f.extend(std::iter::repeat_n(0xAA, depth * pointer));
            f.extend_from_slice(&d);
            if let Some(x) = &ev.extra {
                f.extend_from_slice(&(x.len() as u16).to_le_bytes());
                f.extend_from_slice(x);
            }
        }
        let table = f.len();
        for o in &offsets {
            f.extend_from_slice(&o.to_le_bytes());
            f.push(0);
        }
        let procs = f.len();
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&7u32.to_le_bytes());
        f.extend_from_slice(&12u32.to_le_bytes());
        let mut r = vec![0u8; 0x64 + pointer];
        put(&mut r, 0, &7u32.to_le_bytes());
        put(&mut r, 4, &1234u32.to_le_bytes());
        put(&mut r, 0x40, &1u32.to_le_bytes());
        f.extend_from_slice(&r);
        let strings = f.len();
        let names = ["x", "tool.exe"];
        f.extend_from_slice(&(names.len() as u32).to_le_bytes());
        let mut at = 4 + 4 * names.len();
        let mut bodies = Vec::new();
        for n in names {
            f.extend_from_slice(&(at as u32).to_le_bytes());
            let units: Vec<u8> = n
                .encode_utf16()
                .chain([0])
                .flat_map(u16::to_le_bytes)
                .collect();
            bodies.extend_from_slice(&(units.len() as u32).to_le_bytes());
            bodies.extend_from_slice(&units);
            at += 4 + units.len();
        }
        f.extend_from_slice(&bodies);
        let icons = f.len();
        f.extend_from_slice(&[0; 8]);
        let hosts = f.len();
        f.extend_from_slice(&[0; 8]);
        put(&mut f, 0x234, &(events.len() as u32).to_le_bytes());
        put(&mut f, 0x240, &(HEADER_LEN as u64).to_le_bytes());
        put(&mut f, 0x248, &(table as u64).to_le_bytes());
        put(&mut f, 0x250, &(procs as u64).to_le_bytes());
        put(&mut f, 0x258, &(strings as u64).to_le_bytes());
        put(&mut f, 0x260, &(icons as u64).to_le_bytes());
        put(&mut f, 0x274, &10u32.to_le_bytes());
        put(&mut f, 0x278, &0u32.to_le_bytes());
        put(&mut f, 0x27C, &19041u32.to_le_bytes());
        put(&mut f, 0x398, &(HEADER_LEN as u64).to_le_bytes());
        put(&mut f, 0x3A0, &(hosts as u64).to_le_bytes());
        f
    }

    fn parse(bytes: &[u8]) -> Result<(PmlInfo, Vec<RawEvent>), FormatError> {
        let mut out = Vec::new();
        let info = read(std::io::Cursor::new(bytes), &mut |e| out.push(e))?;
        Ok((info, out))
    }

    fn byte_error(bytes: &[u8]) -> (u64, String) {
        match parse(bytes) {
            Err(FormatError::Bad {
                at: Location::Byte(b),
                reason,
                ..
            }) => (b, reason),
            other => panic!("expected a byte error, got {other:?}"),
        }
    }

    /// The events every layout test reads, for a pointer size.
    fn sample(p: usize) -> Vec<Ev> {
        let wide = p == 8;
        let mut read = fs(23, 0, "C:\\a.bin");
        read.fields = vec![
            (0x08, 0x60043u32.to_le_bytes().to_vec()),
            (0x10, 4096u32.to_le_bytes().to_vec()),
            (
                if wide { 0x20 } else { 0x18 },
                8192u64.to_le_bytes().to_vec(),
            ),
        ];
        read.extra = Some(if wide {
            100u64.to_le_bytes().to_vec()
        } else {
            100u32.to_le_bytes().to_vec()
        });
        let mut write = fs(24, 0, "C:\\a.bin");
        write.fields = vec![
            (0x08, 0x60a00u32.to_le_bytes().to_vec()),
            (0x10, 512u32.to_le_bytes().to_vec()),
            (if wide { 0x20 } else { 0x18 }, 1u64.to_le_bytes().to_vec()),
        ];
        let mut dir = fs(20, 0, "C:\\dir");
        dir.fields = vec![(
            if wide { 0x18 } else { 0x14 },
            0x0100_0021u32.to_le_bytes().to_vec(),
        )];
        dir.after = vec![0x80, 0, 0, 0, 2, 0, 0, 0, 1, 2];
        dir.extra = Some(1u64.to_le_bytes().to_vec());
        let mut created = fs(20, 0, "C:\\new");
        created.fields = vec![(
            if wide { 0x18 } else { 0x14 },
            0x0200_0040u32.to_le_bytes().to_vec(),
        )];
        created.after = vec![0; 8];
        created.extra = Some(2u32.to_le_bytes().to_vec());
        let mut missing = fs(20, 0, "C:\\gone");
        missing.status = 0xC000_0034;
        missing.after = vec![0; 8];
        let mut eof = fs(26, 0x14, "C:\\a.bin");
        eof.after = 4096u64.to_le_bytes().to_vec();
        let mut delete = fs(26, 0x0D, "C:\\a.bin");
        delete.after = vec![1, 0, 0, 0];
        let mut keep = fs(26, 0x0D, "C:\\a.bin");
        keep.after = vec![0, 0, 0, 0];
        let mut delete_ex = fs(26, 0x40, "C:\\a.bin");
        delete_ex.after = 3u32.to_le_bytes().to_vec();
        let mut rename = fs(26, 0x0A, "C:\\a.bin");
        let target: Vec<u8> = "\\??\\C:\\b.bin"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        rename.after = vec![0; 2 * p];
        rename
            .after
            .extend_from_slice(&(target.len() as u32).to_le_bytes());
        rename.after.extend_from_slice(&target);
        let mut registry = fs(5, 0, "");
        registry.class = 2;
        let mut stranger = fs(38, 0, "C:\\a.bin");
        stranger.process = 99;
        stranger.status = 0xC000_0999;
        vec![
            read,
            write,
            dir,
            created,
            missing,
            eof,
            delete,
            keep,
            delete_ex,
            rename,
            fs(26, 0x13, "C:\\a.bin"),
            fs(26, 0x48, "C:\\a.bin"),
            fs(25, 0x47, "C:\\a.bin"),
            fs(32, 1, "C:\\dir"),
            fs(32, 2, "C:\\dir"),
            fs(29, 1, "C:\\a.bin"),
            fs(19, 0, "C:\\a.dll"),
            fs(37, 1, "C:\\a.bin"),
            fs(200, 0, "C:\\a.bin"),
            registry,
            stranger,
        ]
    }

    #[test]
    fn reads_both_pointer_sizes() {
        for p in [4, 8] {
            let (info, ev) = parse(&build(p, &sample(p))).unwrap();
            assert_eq!(info.pointer_size as usize, p);
            assert_eq!(info.events, 21);
            assert_eq!(info.os, "Windows 10.0.19041");
            assert_eq!(info.computer, "TESTPC");
            let ops: Vec<&RawOp> = ev.iter().map(|e| &e.op).collect();
            let other = |s: &str| RawOp::Other(s.to_string());
            assert_eq!(
                ops,
                [
                    &RawOp::Read {
                        offset: 8192,
                        len: 100
                    },
                    &RawOp::Write {
                        offset: 1,
                        len: 512
                    },
                    &RawOp::Open {
                        created: false,
                        directory: true
                    },
                    &RawOp::Open {
                        created: true,
                        directory: false
                    },
                    &RawOp::Stat,
                    &RawOp::Truncate { size: 4096 },
                    &RawOp::Remove,
                    &other("SetDispositionInformationFile"),
                    &RawOp::Remove,
                    &RawOp::Rename {
                        to: "C:\\b.bin".into()
                    },
                    &other("SetAllocationInformationFile"),
                    &other("<Unknown>"),
                    &RawOp::Stat,
                    &RawOp::Stat,
                    &other("NotifyChangeDirectory"),
                    &RawOp::Sync,
                    &RawOp::Map,
                    &other("LockFile"),
                    &other("<Unknown>"),
                    &RawOp::NotFile("Registry".into()),
                    &RawOp::Close,
                ],
                "pointer size {p}"
            );
            let r = &ev[0];
            assert_eq!((r.pid, r.tid, r.process.as_str()), (1234, 11, "tool.exe"));
            assert_eq!(r.path, "C:\\a.bin");
            assert_eq!((r.direct, r.paging, r.ok), (true, true, true));
            assert_eq!(r.result, "SUCCESS");
            assert_eq!(r.t_ns, 13_240_000_000_000_000_000);
            assert_eq!(r.dur_ns, 500);
            assert_eq!((ev[1].direct, ev[1].paging), (false, false));
            assert_eq!((ev[4].ok, ev[4].result.as_str()), (false, "NAME NOT FOUND"));
            assert_eq!(ev[19].path, "");
            let s = &ev[20];
            assert_eq!(
                (s.pid, s.process.as_str(), s.result.as_str()),
                (0, "<unknown>", "0xC0000999")
            );
        }
    }

    #[test]
    fn query_directory_shows_its_filter() {
        let mut star = fs(32, 1, "C:\\dir");
        star.after = vec![1, 0x80, b'*'];
        let mut root = fs(32, 1, "C:\\");
        root.after = vec![3, 0, b'a', 0, b'b', 0, b'c', 0];
        let mut cut = fs(32, 1, "C:\\dir");
        cut.after = vec![9, 0x80, b'*'];
        let (_, ev) = parse(&build(8, &[star, root])).unwrap();
        assert_eq!(ev[0].path, "C:\\dir\\*");
        assert_eq!(ev[1].path, "C:\\abc");
        byte_error(&build(8, &[cut]));
    }

    #[test]
    fn empty_log() {
        let (info, ev) = parse(&build(8, &[])).unwrap();
        assert_eq!(info.events, 0);
        assert!(ev.is_empty());
    }

    #[test]
    fn header_checks() {
        let good = build(8, &sample(8));
        let mut f = good.clone();
        f[0] = b'X';
        assert_eq!(byte_error(&f).0, 0);
        let mut f = good.clone();
        f[4] = 8;
        assert_eq!(byte_error(&f).0, 4);
        for at in [0x240, 0x248, 0x250, 0x258, 0x260] {
            let mut f = good.clone();
            put(&mut f, at, &0u64.to_le_bytes());
            let (b, reason) = byte_error(&f);
            assert_eq!(b, at as u64);
            assert!(reason.contains("not closed cleanly"), "{reason}");
            let mut f = good.clone();
            put(&mut f, at, &u64::MAX.to_le_bytes());
            assert_eq!(byte_error(&f).0, at as u64);
        }
        let mut f = good.clone();
        put(&mut f, 0x398, &0x3A0u64.to_le_bytes());
        assert_eq!(byte_error(&f).0, 0x398);
        let mut f = good.clone();
        put(&mut f, 0x3A0, &0u64.to_le_bytes());
        assert_eq!(byte_error(&f).0, 0x3A0);
        // More events than the table can hold.
        let mut f = good.clone();
        put(&mut f, 0x234, &u32::MAX.to_le_bytes());
        byte_error(&f);
        assert_eq!(byte_error(&good[..0x100]).0, 0);
    }

    #[test]
    fn event_checks() {
        let good = build(8, &sample(8));
        let first = HEADER_LEN;
        // Detail size past the end of the file.
        let mut f = good.clone();
        put(&mut f, first + 0x2C, &u32::MAX.to_le_bytes());
        assert_eq!(byte_error(&f).0, first as u64);
        // A stack deeper than the file.
        let mut f = good.clone();
        put(&mut f, first + 0x28, &u16::MAX.to_le_bytes());
        put(&mut f, first + 0x2C, &(u32::MAX - 0x1000).to_le_bytes());
        byte_error(&f);
        // Extra detail overlapping the detail.
        let mut f = good.clone();
        put(&mut f, first + 0x30, &0x35u32.to_le_bytes());
        let (b, reason) = byte_error(&f);
        assert_eq!(b, first as u64);
        assert!(reason.contains("overlaps"), "{reason}");
        // Extra detail size past the end.
        let mut f = good.clone();
        let x = u32::from_le_bytes(f[first + 0x30..first + 0x34].try_into().unwrap()) as usize;
        put(&mut f, first + x, &u16::MAX.to_le_bytes());
        assert_eq!(byte_error(&f).0, (first + x + 2) as u64);
        // Path longer than the detail.
        let mut f = good.clone();
        let info_at = first + 0x34 + 8 + 0x18 + 5 * 8;
        put(&mut f, info_at, &(0x8000u16 | 0x7FFF).to_le_bytes());
        let (b, reason) = byte_error(&f);
        assert_eq!(b, (first + 0x34 + 8) as u64);
        assert!(reason.contains("path"), "{reason}");
        // A detail too short for its fixed part.
        let mut f = good.clone();
        put(&mut f, first + 0x2C, &8u32.to_le_bytes());
        put(&mut f, first + 0x30, &0u32.to_le_bytes());
        byte_error(&f);
        // An offsets-table entry past the end.
        let mut f = good.clone();
        let table = u64::from_le_bytes(f[0x248..0x250].try_into().unwrap()) as usize;
        put(&mut f, table + 5, &u32::MAX.to_le_bytes());
        assert_eq!(byte_error(&f).0, u64::from(u32::MAX));
        // SetEndOfFile without its value.
        let mut eof = fs(26, 0x14, "C:\\a");
        eof.after = vec![1, 2];
        byte_error(&build(4, &[eof]));
    }

    #[test]
    fn table_checks() {
        let good = build(8, &sample(8));
        let procs = u64::from_le_bytes(good[0x250..0x258].try_into().unwrap()) as usize;
        let strings = u64::from_le_bytes(good[0x258..0x260].try_into().unwrap()) as usize;
        for count in [u32::MAX, 0, 1] {
            let mut f = good.clone();
            put(&mut f, strings, &count.to_le_bytes());
            byte_error(&f);
        }
        let mut f = good.clone();
        put(&mut f, strings + 8, &u32::MAX.to_le_bytes());
        byte_error(&f);
        let mut f = good.clone();
        put(&mut f, procs, &u32::MAX.to_le_bytes());
        assert_eq!(byte_error(&f).0, procs as u64);
        let mut f = good.clone();
        put(&mut f, procs + 8, &0xFFFF_FFF0u32.to_le_bytes());
        byte_error(&f);
        // Module count past the end.
        let mut f = good.clone();
        put(&mut f, procs + 12 + 0x68, &u32::MAX.to_le_bytes());
        byte_error(&f);
        // Truncated anywhere before the icon table (which the reader does
        // not use): an error, never a panic.
        let icons = u64::from_le_bytes(good[0x260..0x268].try_into().unwrap()) as usize;
        for cut in (0..=icons).step_by(3) {
            assert!(parse(&good[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(fs_op_name(26, 0x14), "SetEndOfFileInformationFile");
        assert_eq!(fs_op_name(26, 0), "SetInformationFile");
        assert_eq!(fs_op_name(29, 1), "FlushBuffersFile");
        assert_eq!(fs_op_name(30, 0x0B), "<Unknown>");
        assert_eq!(fs_op_name(47, 0), "PlugAndPlay");
        assert_eq!(fs_op_name(47, 0x17), "SurpriseRemoval");
        assert_eq!(fs_op_name(u16::MAX, 0), "<Unknown>");
        assert_eq!(status_text(0), "SUCCESS");
        assert_eq!(status_text(0x103), "");
        assert_eq!(status_text(0xC01C_0004), "FAST IO DISALLOWED");
        assert_eq!(status_text(0xC000_046F), "0xC000046F");
        assert_eq!(class_name(9), "Class 9");
    }
}
