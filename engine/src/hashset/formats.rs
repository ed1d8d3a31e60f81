//! Hash-set source formats: detection and streaming readers.
//!
//! Every reader works on bytes, never on decoded text: NSRL files mix
//! encodings in their file-name column (Latin-1, UTF-8, odd bytes), and only
//! the ASCII hash fields matter here. A line is either taken whole (all its
//! hash fields valid) or reported as malformed with its line number; lines
//! are read through a bounded buffer, so a file without newlines cannot make
//! memory grow.

use super::{HashKind, HashSetError, decode_hex, shown};
use memchr::memchr;
use rusqlite::OpenFlags;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// A source format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// NSRL RDS v3: SQLite with a `FILE` table or view (`sha256`, `sha1`,
    /// `md5`, ...).
    NsrlRds3,
    /// NSRL RDS 2.x `NSRLFile.txt`: quoted CSV with a header naming
    /// `"SHA-1"`, `"MD5"` (and any other) columns.
    NsrlRds2,
    /// hashdeep output: `%%%% HASHDEEP-1.0`, a `%%%% size,md5,...` column
    /// line, `##` comments, then CSV rows ending with the file name.
    Hashdeep,
    /// `md5sum` output (`<hex>  <name>`, `<hex> *<name>`, BSD `MD5 (name) =
    /// <hex>`, or bare hashes).
    Md5sum,
    /// `sha1sum` output, as for `md5sum`.
    Sha1sum,
    /// `sha256sum` output, as for `md5sum`.
    Sha256sum,
}

impl Format {
    /// Every format, for help texts.
    pub const ALL: [Format; 6] = [
        Format::NsrlRds3,
        Format::NsrlRds2,
        Format::Hashdeep,
        Format::Md5sum,
        Format::Sha1sum,
        Format::Sha256sum,
    ];

    /// The name used on the command line and in the library.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::NsrlRds3 => "nsrl-rds3",
            Format::NsrlRds2 => "nsrl-rds2",
            Format::Hashdeep => "hashdeep",
            Format::Md5sum => "md5sum",
            Format::Sha1sum => "sha1sum",
            Format::Sha256sum => "sha256sum",
        }
    }

    /// Parse a format name.
    pub fn parse(text: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == text)
    }

    fn sum_kind(self) -> Option<HashKind> {
        match self {
            Format::Md5sum => Some(HashKind::Md5),
            Format::Sha1sum => Some(HashKind::Sha1),
            Format::Sha256sum => Some(HashKind::Sha256),
            _ => None,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a reader delivers what it finds.
pub(crate) trait Sink {
    /// One entry (line or row) and its hashes, all valid.
    fn entry(&mut self, line: u64, hashes: &[(HashKind, &[u8])]) -> Result<(), HashSetError>;
    /// A line that could not be used, and why.
    fn malformed(&mut self, line: u64, message: String) -> Result<(), HashSetError>;
    /// Work done so far in this source (bytes for text, rows for SQLite).
    fn progress(&mut self, done: u64);
    /// Whether to stop.
    fn cancelled(&self) -> bool;
}

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// Lines longer than this are malformed (no hash-set line is near it), and
/// are skipped without being held in memory.
const MAX_LINE: usize = 64 << 10;
const READ_BLOCK: usize = 4 << 20;

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> HashSetError + '_ {
    move |source| HashSetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Tell a source's format from its first bytes and first data line.
pub fn detect_format(path: &Path) -> Result<Format, HashSetError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut head = vec![0u8; MAX_LINE.min(16 << 10)];
    let mut got = 0;
    while got < head.len() {
        let n = file.read(&mut head[got..]).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    head.truncate(got);
    if head.is_empty() {
        return Err(HashSetError::Empty(path.to_path_buf()));
    }
    if head.starts_with(SQLITE_MAGIC) {
        return Ok(Format::NsrlRds3);
    }
    check_not_utf16(path, &head)?;
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
    let first = first_line(text);
    if first.starts_with(b"%%%% HASHDEEP") {
        return Ok(Format::Hashdeep);
    }
    if first.starts_with(b"\"SHA-1\"") || first.starts_with(b"\"MD5\"") {
        return Ok(Format::NsrlRds2);
    }
    let mut seen_data = false;
    for line in text.split(|&b| b == b'\n') {
        let line = trim_cr(line);
        if line.iter().all(u8::is_ascii_whitespace) || line.starts_with(b"#") {
            continue;
        }
        seen_data = true;
        if let Some(token) = sum_token(line)
            && let Some(kind) = HashKind::from_hex_len(token.len())
            && token.iter().all(u8::is_ascii_hexdigit)
        {
            return Ok(match kind {
                HashKind::Md5 => Format::Md5sum,
                HashKind::Sha1 => Format::Sha1sum,
                HashKind::Sha256 => Format::Sha256sum,
            });
        }
        break;
    }
    let reason = if seen_data {
        format!("first line: `{}`", shown(first))
    } else {
        "only blank or comment lines at the start".into()
    };
    Err(HashSetError::UnknownFormat {
        path: path.to_path_buf(),
        reason,
    })
}

fn check_not_utf16(path: &Path, head: &[u8]) -> Result<(), HashSetError> {
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        return Err(HashSetError::UnknownFormat {
            path: path.to_path_buf(),
            reason: "it is UTF-16 text; convert it to UTF-8 or ASCII (e.g. with iconv)".into(),
        });
    }
    Ok(())
}

fn first_line(text: &[u8]) -> &[u8] {
    trim_cr(text.split(|&b| b == b'\n').next().unwrap_or(text))
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Read a whole source into `sink`.
pub(crate) fn read_source(
    path: &Path,
    format: Format,
    sink: &mut dyn Sink,
) -> Result<(), HashSetError> {
    match format {
        Format::NsrlRds3 => read_rds3(path, sink),
        Format::NsrlRds2 => read_text(path, sink, &mut Nsrl2::default()),
        Format::Hashdeep => read_text(path, sink, &mut Hashdeep::default()),
        Format::Md5sum | Format::Sha1sum | Format::Sha256sum => read_text(
            path,
            sink,
            &mut SumList {
                kind: format.sum_kind().unwrap_or(HashKind::Md5),
            },
        ),
    }
}

/// Decoded hashes of one line (at most one per kind).
#[derive(Default)]
struct Decoded {
    bufs: [[u8; 32]; 3],
    have: [bool; 3],
}

impl Decoded {
    fn decode(&mut self, kind: HashKind, field: &[u8]) -> Result<(), String> {
        let i = kind.index();
        decode_hex(field, &mut self.bufs[i][..kind.digest_len()])
            .map_err(|e| e.describe(kind, field))?;
        self.have[i] = true;
        Ok(())
    }

    fn emit(&self, line: u64, sink: &mut dyn Sink) -> Result<(), HashSetError> {
        let mut list: [(HashKind, &[u8]); 3] = [(HashKind::Md5, &[]); 3];
        let mut n = 0;
        for kind in HashKind::ALL {
            let i = kind.index();
            if self.have[i] {
                list[n] = (kind, &self.bufs[i][..kind.digest_len()]);
                n += 1;
            }
        }
        sink.entry(line, &list[..n])
    }
}

/// A text format's per-line logic.
trait LineFormat {
    /// Handle one line (without its end-of-line bytes). `Ok(None)`: nothing
    /// to import on it (header, comment, blank); `Ok(Some(d))`: an entry;
    /// `Err(message)`: malformed.
    fn line(
        &mut self,
        path: &Path,
        line_no: u64,
        line: &[u8],
        decoded: &mut Decoded,
    ) -> Result<Option<()>, LineError>;

    /// Called at the end, to refuse a file whose structure never appeared
    /// (e.g. a hashdeep file without its column line).
    fn finish(&self, _path: &Path) -> Result<(), HashSetError> {
        Ok(())
    }
}

/// A line's problem: malformed (skip it) or fatal for the whole file.
enum LineError {
    Malformed(String),
    Fatal(HashSetError),
}

fn read_text(
    path: &Path,
    sink: &mut dyn Sink,
    fmt: &mut dyn LineFormat,
) -> Result<(), HashSetError> {
    let file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    if len == 0 {
        return Err(HashSetError::Empty(path.to_path_buf()));
    }
    let mut lines = Lines::new(file);
    let mut decoded = Decoded::default();
    let mut line_no = 0u64;
    loop {
        if line_no.is_multiple_of(65_536) {
            if sink.cancelled() {
                return Err(HashSetError::Interrupted);
            }
            sink.progress(lines.consumed);
        }
        let Some(line) = lines.next().map_err(io_err(path))? else {
            break;
        };
        line_no += 1;
        let line = match line {
            Line::Text(t) => t,
            Line::TooLong(n) => {
                sink.malformed(
                    line_no,
                    format!("line is {n} bytes long (more than {MAX_LINE}); skipped"),
                )?;
                continue;
            }
        };
        let mut line = trim_cr(line);
        if line_no == 1 {
            check_not_utf16(path, line)?;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        decoded.have = [false; 3];
        match fmt.line(path, line_no, line, &mut decoded) {
            Ok(Some(())) => decoded.emit(line_no, sink)?,
            Ok(None) => {}
            Err(LineError::Malformed(m)) => sink.malformed(line_no, m)?,
            Err(LineError::Fatal(e)) => return Err(e),
        }
    }
    sink.progress(lines.consumed);
    fmt.finish(path)
}

enum Line<'a> {
    Text(&'a [u8]),
    /// A line over [`MAX_LINE`] bytes, skipped; its length.
    TooLong(u64),
}

/// Lines of a file through one fixed buffer.
struct Lines {
    file: File,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// Bytes handed out as lines so far (for progress).
    consumed: u64,
}

impl Lines {
    fn new(file: File) -> Self {
        Lines {
            file,
            buf: vec![0u8; READ_BLOCK],
            start: 0,
            end: 0,
            eof: false,
            consumed: 0,
        }
    }

    fn fill(&mut self) -> std::io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end < self.buf.len() {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.end += n;
                    // One large read is enough per fill; do not spin on
                    // short reads from pipes.
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn next(&mut self) -> std::io::Result<Option<Line<'_>>> {
        let mut skipped: u64 = 0;
        loop {
            if let Some(i) = memchr(b'\n', &self.buf[self.start..self.end]) {
                let s = self.start;
                self.start += i + 1;
                self.consumed += (i + 1) as u64;
                if skipped > 0 {
                    return Ok(Some(Line::TooLong(skipped + i as u64)));
                }
                return Ok(Some(Line::Text(&self.buf[s..s + i])));
            }
            if self.eof {
                if self.start == self.end {
                    if skipped > 0 {
                        return Ok(Some(Line::TooLong(skipped)));
                    }
                    return Ok(None);
                }
                let s = self.start;
                let n = self.end - s;
                self.start = self.end;
                self.consumed += n as u64;
                if skipped > 0 {
                    return Ok(Some(Line::TooLong(skipped + n as u64)));
                }
                return Ok(Some(Line::Text(&self.buf[s..s + n])));
            }
            if self.end - self.start >= MAX_LINE {
                // Drop what is buffered of this overlong line and keep
                // reading until its end.
                let n = self.end - self.start;
                skipped += n as u64;
                self.consumed += n as u64;
                self.start = self.end;
            }
            self.fill()?;
        }
    }
}

/// NSRL RDS 2.x `NSRLFile.txt`.
#[derive(Default)]
struct Nsrl2 {
    /// Column index of each hash kind, from the header.
    columns: Option<Vec<(usize, HashKind)>>,
    /// Number of columns the header names.
    width: usize,
    /// Field bounds of the current line (reused between lines).
    fields: Vec<(usize, usize)>,
}

/// The standard RDS 2.x column order, for files given as `nsrl-rds2`
/// without a header line.
const NSRL2_DEFAULT: &[(usize, HashKind)] = &[(0, HashKind::Sha1), (1, HashKind::Md5)];
const NSRL2_DEFAULT_WIDTH: usize = 8;

/// Split a quoted-CSV line into fields. Quotes inside a quoted field are
/// either doubled or (leniently, as NSRL names sometimes have them) taken
/// literally when not followed by a comma.
fn csv_fields(line: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut i = 0;
    let n = line.len();
    loop {
        if i < n && line[i] == b'"' {
            let start = i + 1;
            let mut j = start;
            loop {
                match memchr(b'"', &line[j..]) {
                    None => {
                        // Unterminated quote: the rest is the field.
                        out.push((start, n));
                        return;
                    }
                    Some(k) => {
                        let q = j + k;
                        if q + 1 == n || line[q + 1] == b',' {
                            out.push((start, q));
                            i = q + 1;
                            break;
                        }
                        j = q + 1;
                    }
                }
            }
        } else {
            let end = memchr(b',', &line[i..]).map_or(n, |k| i + k);
            out.push((i, end));
            i = end;
        }
        if i >= n {
            return;
        }
        // line[i] is the comma.
        i += 1;
        if i == n {
            out.push((n, n));
            return;
        }
    }
}

impl LineFormat for Nsrl2 {
    fn line(
        &mut self,
        _path: &Path,
        line_no: u64,
        line: &[u8],
        decoded: &mut Decoded,
    ) -> Result<Option<()>, LineError> {
        if line.is_empty() {
            return Ok(None);
        }
        let mut fields = std::mem::take(&mut self.fields);
        csv_fields(line, &mut fields);
        let result = self.fields_line(line_no, line, &fields, decoded);
        self.fields = fields;
        result
    }
}

impl Nsrl2 {
    fn fields_line(
        &mut self,
        line_no: u64,
        line: &[u8],
        fields: &[(usize, usize)],
        decoded: &mut Decoded,
    ) -> Result<Option<()>, LineError> {
        if self.columns.is_none() {
            if line_no == 1 && line.starts_with(b"\"") {
                let names: Vec<&[u8]> = fields.iter().map(|&(a, b)| &line[a..b]).collect();
                let cols: Vec<(usize, HashKind)> = names
                    .iter()
                    .enumerate()
                    .filter_map(|(i, name)| {
                        std::str::from_utf8(name)
                            .ok()
                            .and_then(HashKind::parse)
                            .map(|k| (i, k))
                    })
                    .collect();
                if !cols.is_empty() {
                    self.columns = Some(cols);
                    self.width = names.len();
                    return Ok(None);
                }
            }
            self.columns = Some(NSRL2_DEFAULT.to_vec());
            self.width = NSRL2_DEFAULT_WIDTH;
        }
        let columns = self.columns.as_deref().unwrap_or(NSRL2_DEFAULT);
        if fields.len() < self.width {
            return Err(LineError::Malformed(format!(
                "{} fields, the header names {} (truncated line?)",
                fields.len(),
                self.width
            )));
        }
        let mut any = false;
        for &(col, kind) in columns {
            let (a, b) = fields[col];
            let field = &line[a..b];
            if field.is_empty() {
                continue;
            }
            decoded.decode(kind, field).map_err(LineError::Malformed)?;
            any = true;
        }
        if any {
            Ok(Some(()))
        } else {
            Err(LineError::Malformed("no hash on the line".into()))
        }
    }
}

/// hashdeep files.
#[derive(Default)]
struct Hashdeep {
    /// Index of each hash kind among the columns, and the column count.
    columns: Option<(Vec<(usize, HashKind)>, usize)>,
}

impl LineFormat for Hashdeep {
    fn line(
        &mut self,
        path: &Path,
        _line_no: u64,
        line: &[u8],
        decoded: &mut Decoded,
    ) -> Result<Option<()>, LineError> {
        if line.is_empty() || line.starts_with(b"##") {
            return Ok(None);
        }
        if let Some(rest) = line.strip_prefix(b"%%%% ") {
            if rest.starts_with(b"HASHDEEP") {
                return Ok(None);
            }
            let names: Vec<&[u8]> = rest.split(|&b| b == b',').collect();
            let cols: Vec<(usize, HashKind)> = names
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    std::str::from_utf8(n)
                        .ok()
                        .and_then(|s| HashKind::parse(s.trim()))
                        .map(|k| (i, k))
                })
                .collect();
            if cols.is_empty() {
                return Err(LineError::Fatal(HashSetError::BadFormat {
                    path: path.to_path_buf(),
                    format: Format::Hashdeep,
                    reason: format!(
                        "the column line `{}` names no md5, sha1 or sha256 column",
                        shown(rest)
                    ),
                }));
            }
            self.columns = Some((cols, names.len()));
            return Ok(None);
        }
        let Some((cols, width)) = &self.columns else {
            return Err(LineError::Fatal(HashSetError::BadFormat {
                path: path.to_path_buf(),
                format: Format::Hashdeep,
                reason: "a data line comes before the `%%%% size,md5,...` column line".into(),
            }));
        };
        // The file name is last and may hold commas: split off the others.
        let fields: Vec<&[u8]> = line.splitn(*width, |&b| b == b',').collect();
        if fields.len() < *width {
            return Err(LineError::Malformed(format!(
                "{} fields, the column line names {width}",
                fields.len()
            )));
        }
        for &(i, kind) in cols {
            decoded
                .decode(kind, fields[i])
                .map_err(LineError::Malformed)?;
        }
        Ok(Some(()))
    }

    fn finish(&self, path: &Path) -> Result<(), HashSetError> {
        if self.columns.is_none() {
            return Err(HashSetError::BadFormat {
                path: path.to_path_buf(),
                format: Format::Hashdeep,
                reason: "no `%%%% size,md5,...` column line".into(),
            });
        }
        Ok(())
    }
}

/// The hash token of an md5sum-style line: `<hex>  name`, `<hex> *name`,
/// `\<hex>  name` (escaped name), BSD `MD5 (name) = <hex>`, or `<hex>` alone.
fn sum_token(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_prefix(b"\\").unwrap_or(line);
    for tag in [
        &b"MD5 ("[..],
        b"SHA1 (",
        b"SHA256 (",
        b"SHA-1 (",
        b"SHA-256 (",
    ] {
        if line.starts_with(tag) {
            let pos = line.windows(3).rposition(|w| w == b" = ")?;
            return Some(line[pos + 3..].trim_ascii());
        }
    }
    let end = line
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(line.len());
    Some(&line[..end])
}

/// md5sum/sha1sum/sha256sum lists.
struct SumList {
    kind: HashKind,
}

impl LineFormat for SumList {
    fn line(
        &mut self,
        _path: &Path,
        _line_no: u64,
        line: &[u8],
        decoded: &mut Decoded,
    ) -> Result<Option<()>, LineError> {
        if line.iter().all(u8::is_ascii_whitespace) || line.starts_with(b"#") {
            return Ok(None);
        }
        let Some(token) = sum_token(line) else {
            return Err(LineError::Malformed(format!(
                "no hash found in `{}`",
                shown(line)
            )));
        };
        decoded
            .decode(self.kind, token)
            .map_err(LineError::Malformed)?;
        Ok(Some(()))
    }
}

/// Check an SQLite file's header against its length, so a truncated RDS v3
/// download is named as such instead of failing somewhere in the middle.
fn check_sqlite_header(path: &Path) -> Result<(), HashSetError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    let damaged = |reason: String| HashSetError::DamagedSqlite {
        path: path.to_path_buf(),
        reason,
    };
    if len < 100 {
        return Err(damaged(format!(
            "{len} bytes is shorter than the 100-byte SQLite header"
        )));
    }
    let mut h = [0u8; 100];
    file.read_exact(&mut h).map_err(io_err(path))?;
    if &h[..16] != SQLITE_MAGIC {
        return Err(damaged("no SQLite header".into()));
    }
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65_536u64,
        n if n >= 512 && n.is_power_of_two() => u64::from(n),
        n => return Err(damaged(format!("invalid page size {n} in the header"))),
    };
    if len % page_size != 0 {
        return Err(damaged(format!(
            "{len} bytes is not a whole number of {page_size}-byte pages (truncated?)"
        )));
    }
    let change = u32::from_be_bytes([h[24], h[25], h[26], h[27]]);
    let pages = u32::from_be_bytes([h[28], h[29], h[30], h[31]]);
    let valid_for = u32::from_be_bytes([h[92], h[93], h[94], h[95]]);
    // The in-header size is only trustworthy when written by a SQLite that
    // keeps it (version-valid-for equals the change counter).
    if change == valid_for && pages > 0 {
        let expected = u64::from(pages) * page_size;
        if len < expected {
            return Err(damaged(format!(
                "the header says {pages} pages of {page_size} bytes ({expected} bytes) but the file has {len} bytes: it is truncated"
            )));
        }
    }
    Ok(())
}

fn read_rds3(path: &Path, sink: &mut dyn Sink) -> Result<(), HashSetError> {
    check_sqlite_header(path)?;
    let sql = |source: rusqlite::Error| classify_sqlite(path, source);
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    let bad = |reason: String| HashSetError::BadFormat {
        path: path.to_path_buf(),
        format: Format::NsrlRds3,
        reason,
    };
    let object: Option<(String, String)> = conn
        .query_row(
            "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') AND name = 'FILE' COLLATE NOCASE",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .map_err(sql)?;
    let Some((table, kind)) = object else {
        return Err(bad("it has no `FILE` table or view".into()));
    };
    let quoted = format!("\"{}\"", table.replace('"', "\"\""));
    let mut columns: Vec<(HashKind, String)> = Vec::new();
    {
        let mut stmt = conn
            .prepare(&format!("PRAGMA table_info({quoted})"))
            .map_err(sql)?;
        let names = stmt.query_map([], |r| r.get::<_, String>(1)).map_err(sql)?;
        for name in names {
            let name = name.map_err(sql)?;
            if let Some(k) = HashKind::parse(&name)
                && !columns.iter().any(|(c, _)| *c == k)
            {
                columns.push((k, name));
            }
        }
    }
    if columns.is_empty() {
        return Err(bad(format!(
            "its `{table}` {kind} has no md5, sha1 or sha256 column"
        )));
    }
    columns.sort_by_key(|(k, _)| *k);
    let list = columns
        .iter()
        .map(|(_, n)| format!("\"{}\"", n.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(", ");
    let mut stmt = conn
        .prepare(&format!("SELECT {list} FROM {quoted}"))
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    let mut decoded = Decoded::default();
    let mut row_no = 0u64;
    loop {
        let row = match rows.next() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                return Err(HashSetError::DamagedSqlite {
                    path: path.to_path_buf(),
                    reason: format!("reading row {}: {e}", row_no + 1),
                });
            }
        };
        row_no += 1;
        if row_no.is_multiple_of(65_536) {
            if sink.cancelled() {
                return Err(HashSetError::Interrupted);
            }
            sink.progress(row_no);
        }
        decoded.have = [false; 3];
        let mut problem = None;
        for (i, (kind, _)) in columns.iter().enumerate() {
            match row.get_ref(i) {
                Ok(rusqlite::types::ValueRef::Null) => {}
                Ok(rusqlite::types::ValueRef::Text(b"")) => {}
                Ok(rusqlite::types::ValueRef::Text(t)) => {
                    if let Err(m) = decoded.decode(*kind, t) {
                        problem = Some(m);
                        break;
                    }
                }
                Ok(other) => {
                    problem = Some(format!(
                        "{} column holds a {:?} value, expected hex text",
                        kind.label(),
                        other.data_type()
                    ));
                    break;
                }
                Err(e) => {
                    problem = Some(e.to_string());
                    break;
                }
            }
        }
        match problem {
            Some(m) => sink.malformed(row_no, m)?,
            None if decoded.have.iter().any(|&h| h) => decoded.emit(row_no, sink)?,
            None => sink.malformed(row_no, "no hash in the row".into())?,
        }
    }
    sink.progress(row_no);
    Ok(())
}

/// Name SQLite's corruption codes as damage rather than a generic error.
fn classify_sqlite(path: &Path, source: rusqlite::Error) -> HashSetError {
    if let rusqlite::Error::SqliteFailure(e, _) = &source
        && matches!(
            e.code,
            rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
        )
    {
        return HashSetError::DamagedSqlite {
            path: path.to_path_buf(),
            reason: source.to_string(),
        };
    }
    HashSetError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// Rows in an RDS v3 `FILE` table (its largest rowid: no full scan), for a
/// progress total; `None` for a view or when SQLite cannot tell.
pub(crate) fn rds3_row_estimate(path: &Path) -> Option<u64> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    let n: Option<i64> = conn
        .query_row("SELECT max(rowid) FROM FILE", [], |r| r.get(0))
        .ok()?;
    n.and_then(|n| u64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// (line, [(kind, digest)]) of each entry.
    type Entries = Vec<(u64, Vec<(HashKind, Vec<u8>)>)>;

    #[derive(Default)]
    struct Collect {
        entries: Entries,
        malformed: Vec<(u64, String)>,
        strict: bool,
    }

    impl Sink for Collect {
        fn entry(&mut self, line: u64, hashes: &[(HashKind, &[u8])]) -> Result<(), HashSetError> {
            self.entries
                .push((line, hashes.iter().map(|(k, h)| (*k, h.to_vec())).collect()));
            Ok(())
        }
        fn malformed(&mut self, line: u64, message: String) -> Result<(), HashSetError> {
            if self.strict {
                return Err(HashSetError::Strict {
                    path: "x".into(),
                    line,
                    message,
                });
            }
            self.malformed.push((line, message));
            Ok(())
        }
        fn progress(&mut self, _: u64) {}
        fn cancelled(&self) -> bool {
            false
        }
    }

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    fn read(path: &Path) -> (Format, Collect) {
        let format = detect_format(path).unwrap();
        let mut c = Collect::default();
        read_source(path, format, &mut c).unwrap();
        (format, c)
    }

    #[test]
    fn nsrl2_with_crlf_quotes_commas_and_latin1_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = Vec::new();
        text.extend_from_slice(b"\xEF\xBB\xBF\"SHA-1\",\"MD5\",\"CRC32\",\"FileName\",\"FileSize\",\"ProductCode\",\"OpSystemCode\",\"SpecialCode\"\r\n");
        text.extend_from_slice(b"\"0000000F8527DCCAB6642252BBCFA1B8072D33EE\",\"68CE322D8A896B6E4E7E3F18339EC85C\",\"E39149E4\",\"Blended_Coolers_Vanilla_NL.png\",30439,31682,\"WIN\",\"\"\r\n");
        // A Latin-1 name with a comma and a doubled quote.
        text.extend_from_slice(b"\"00000142988AFA836117B1B572FAE4713F200567\",\"9B3702B0E788C6D62996392FE3C9786A\",\"05E566DF\",\"caf\xE9, \"\"menu\"\".gif\",4136,31432,\"WIN\",\"\"\r\n");
        // Wrong MD5 length, then a non-hex SHA-1, then a truncated line.
        text.extend_from_slice(b"\"0000014DA5C68D2C2E1E3F7B5B8E1F5A1C1D1E1F\",\"9B3702B0E788C6D62996392FE3C978\",\"05E566DF\",\"a\",1,1,\"WIN\",\"\"\r\n");
        text.extend_from_slice(b"\"0000014DA5C68D2C2E1E3F7B5B8E1F5A1C1D1EZF\",\"9B3702B0E788C6D62996392FE3C9786A\",\"05E566DF\",\"a\",1,1,\"WIN\",\"\"\r\n");
        text.extend_from_slice(b"\"0000014DA5C68D2C2E1E3F7B5B8E1F5A1C1D1E1F\",\"9B3702B0E7");
        let p = file(dir.path(), "NSRLFile.txt", &text);
        let (format, c) = read(&p);
        assert_eq!(format, Format::NsrlRds2);
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.entries[0].0, 2);
        assert_eq!(c.entries[0].1[0].0, HashKind::Md5);
        assert_eq!(c.entries[0].1[0].1[..2], [0x68, 0xCE]);
        assert_eq!(c.entries[0].1[1].0, HashKind::Sha1);
        assert_eq!(c.entries[1].0, 3);
        let lines: Vec<u64> = c.malformed.iter().map(|m| m.0).collect();
        assert_eq!(lines, vec![4, 5, 6], "{:?}", c.malformed);
        assert!(c.malformed[0].1.contains("MD5"), "{:?}", c.malformed);
        assert!(
            c.malformed[0].1.contains("30 characters"),
            "{:?}",
            c.malformed
        );
        assert!(c.malformed[1].1.contains("non-hex character `Z`"));
        assert!(c.malformed[2].1.contains("truncated"), "{:?}", c.malformed);
        // Strict mode stops at the first malformed line.
        let mut strict = Collect {
            strict: true,
            ..Collect::default()
        };
        let err = read_source(&p, Format::NsrlRds2, &mut strict).unwrap_err();
        assert!(matches!(err, HashSetError::Strict { line: 4, .. }), "{err}");
    }

    #[test]
    fn csv_fields_split_like_nsrl() {
        let mut f = Vec::new();
        let line = b"\"a\",\"b,c\",3,\"d\"\"e\",\"\"";
        csv_fields(line, &mut f);
        let got: Vec<&[u8]> = f.iter().map(|&(a, b)| &line[a..b]).collect();
        assert_eq!(got, vec![&b"a"[..], b"b,c", b"3", b"d\"\"e", b""]);
        csv_fields(b"x,", &mut f);
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn sum_lists_in_gnu_bsd_and_bare_forms() {
        let dir = tempfile::tempdir().unwrap();
        let p = file(
            dir.path(),
            "bad.md5",
            b"# comment\n\nd41d8cd98f00b204e9800998ecf8427e  empty.txt\n\\D41D8CD98F00B204E9800998ECF8427F *we\\\\ird\nMD5 (x y) = 0123456789abcdef0123456789abcdef\n0123456789abcdef0123456789abcde0\nda39a3ee5e6b4b0d3255bfef95601890afd80709  a sha1\nnot a hash\n",
        );
        let (format, c) = read(&p);
        assert_eq!(format, Format::Md5sum);
        assert_eq!(
            c.entries.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![3, 4, 5, 6]
        );
        assert_eq!(c.entries[1].1[0].1[15], 0x7F);
        assert_eq!(
            c.malformed.iter().map(|m| m.0).collect::<Vec<_>>(),
            vec![7, 8]
        );
        assert!(c.malformed[0].1.contains("40 characters, expected 32"));
        let p = file(
            dir.path(),
            "x.sha256",
            b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  e\n",
        );
        assert_eq!(read(&p).0, Format::Sha256sum);
        let p = file(
            dir.path(),
            "x.sha1",
            b"da39a3ee5e6b4b0d3255bfef95601890afd80709\n",
        );
        assert_eq!(read(&p).0, Format::Sha1sum);
    }

    #[test]
    fn hashdeep_columns_come_from_the_header() {
        let dir = tempfile::tempdir().unwrap();
        let p = file(
            dir.path(),
            "h.txt",
            b"%%%% HASHDEEP-1.0\n%%%% size,md5,sha256,filename\n## Invoked from: /home\n## $ hashdeep -r .\n##\n0,d41d8cd98f00b204e9800998ecf8427e,e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855,/a,b.txt\n5,d41d8cd98f00b204e9800998ecf8427e,e3b0\n",
        );
        let (format, c) = read(&p);
        assert_eq!(format, Format::Hashdeep);
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.entries[0].0, 6);
        assert_eq!(c.entries[0].1.len(), 2);
        assert_eq!(c.malformed.len(), 1);
        assert_eq!(c.malformed[0].0, 7);
        let p = file(dir.path(), "h2.txt", b"%%%% HASHDEEP-1.0\n0,abc,/x\n");
        let mut c = Collect::default();
        assert!(matches!(
            read_source(&p, Format::Hashdeep, &mut c),
            Err(HashSetError::BadFormat { .. })
        ));
    }

    #[test]
    fn empty_unknown_and_utf16_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = file(dir.path(), "empty.txt", b"");
        assert!(matches!(detect_format(&p), Err(HashSetError::Empty(_))));
        let p = file(dir.path(), "prose.txt", b"hello world\n");
        let e = detect_format(&p).unwrap_err();
        assert!(e.to_string().contains("hello world"), "{e}");
        let p = file(dir.path(), "u16.txt", b"\xFF\xFEd\x004\x001\x00");
        let e = detect_format(&p).unwrap_err();
        assert!(e.to_string().contains("UTF-16"), "{e}");
    }

    #[test]
    fn overlong_lines_are_skipped_in_bounded_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = b"d41d8cd98f00b204e9800998ecf8427e  a\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 3 * READ_BLOCK));
        text.extend_from_slice(b"\nd41d8cd98f00b204e9800998ecf8427f  b");
        let p = file(dir.path(), "long.md5", &text);
        let (_, c) = read(&p);
        assert_eq!(
            c.entries.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(c.malformed.len(), 1);
        assert_eq!(c.malformed[0].0, 2);
        assert!(c.malformed[0].1.contains(&format!("{}", 3 * READ_BLOCK)));
    }

    #[test]
    fn rds3_rows_and_a_truncated_copy() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("RDSv3.db");
        {
            let c = rusqlite::Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE FILE (sha256 VARCHAR, sha1 VARCHAR, md5 VARCHAR, crc32 VARCHAR, file_name VARCHAR, file_size INTEGER, package_id INTEGER);",
            )
            .unwrap();
            c.execute_batch("BEGIN").unwrap();
            let mut st = c
                .prepare("INSERT INTO FILE VALUES (?1, ?2, ?3, '0', 'n', 1, 1)")
                .unwrap();
            for i in 0..3000u32 {
                let md5 = format!("{i:032X}");
                let sha1 = format!("{i:040X}");
                let sha256 = if i == 7 {
                    "XYZ".to_string()
                } else {
                    format!("{i:064X}")
                };
                st.execute(rusqlite::params![sha256, sha1, md5]).unwrap();
            }
            drop(st);
            c.execute_batch("COMMIT").unwrap();
        }
        let (format, c) = read(&p);
        assert_eq!(format, Format::NsrlRds3);
        assert_eq!(c.entries.len(), 2999);
        assert_eq!(c.entries[0].1.len(), 3);
        assert_eq!(c.malformed.len(), 1);
        assert_eq!(c.malformed[0].0, 8);
        assert!(c.malformed[0].1.contains("SHA-256"));
        assert_eq!(rds3_row_estimate(&p), Some(3000));
        // Cut it in half.
        let bytes = std::fs::read(&p).unwrap();
        let cut = file(dir.path(), "cut.db", &bytes[..bytes.len() / 2]);
        let mut c = Collect::default();
        let e = read_source(&cut, Format::NsrlRds3, &mut c).unwrap_err();
        assert!(
            matches!(e, HashSetError::DamagedSqlite { .. }),
            "{e}: {:?}",
            c.entries.len()
        );
        assert!(e.to_string().contains("truncated"), "{e}");
        // Not an RDS: no FILE table.
        let other = dir.path().join("other.db");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        let e = read_source(&other, Format::NsrlRds3, &mut Collect::default()).unwrap_err();
        assert!(e.to_string().contains("no `FILE` table"), "{e}");
    }
}
