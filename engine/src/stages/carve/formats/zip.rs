//! ZIP archives (and OOXML packages, which are ZIPs): local entries, the
//! central directory and the end-of-central-directory record (ZIP64
//! included), walked by their lengths (APPNOTE 6.3).
//!
//! The delimiter ends the item after the end record and its comment, and
//! calls it valid when the central directory agrees with what was walked:
//! entry count, directory size and offset, and every entry's local header
//! offset. A DOCX, XLSX or PPTX is recognised by its part names. The
//! verifier checks member data: the CRC-32 of stored members, and for
//! deflated ones that the stream inflates to exactly the recorded size
//! and CRC.

use super::{
    Cut, Delimiter, Gather, Recent, Step, StreamFind, Validation, Verdict, Verifier, le16, le32,
    le64,
};

/// The format's row in [`super::FORMATS`].
pub const SPEC: super::FormatSpec = super::FormatSpec {
    name: "zip",
    extension: "zip",
    headers: &[super::Header::exact(b"PK\x03\x04")],
    max_size: 1 << 30,
    ends_at_own_header: false,
    identified_as: &["zip", "ooxml"],
    delimiter: || Box::new(ZipDelimiter::new()),
    verifier: Some(|| Box::new(ZipVerifier::new())),
};

const LOCAL: &[u8; 4] = b"PK\x03\x04";
const CENTRAL: &[u8; 4] = b"PK\x01\x02";
const EOCD: &[u8; 4] = b"PK\x05\x06";
const ZIP64_EOCD: &[u8; 4] = b"PK\x06\x06";
const ZIP64_LOCATOR: &[u8; 4] = b"PK\x06\x07";
const DESCRIPTOR: &[u8; 4] = b"PK\x07\x08";

/// A local entry's header.
#[derive(Debug, Clone)]
struct Local {
    flags: u16,
    method: u16,
    crc: u32,
    /// Compressed size, unless it follows the data (flag bit 3, size 0).
    csize: Option<u64>,
    usize: u64,
}

/// Structure events.
enum Event<'a> {
    Local(&'a Local, &'a [u8], u64),
    Data(&'a [u8]),
    LocalEnd,
    Central {
        offset: u64,
        at: u64,
    },
    Eocd {
        entries: u64,
        size: u64,
        offset: u64,
        at: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Sig,
    LocalFixed,
    LocalVar,
    Data(u64),
    /// Data of unknown length: find the next header and the descriptor
    /// before it.
    DataScan,
    /// The descriptor after data of known length: its first word.
    Descriptor,
    Skip(u64),
    CentralFixed,
    CentralVar,
    Zip64Eocd,
    EocdFixed,
    Done,
}

#[derive(Debug)]
struct Walker {
    state: State,
    gather: Gather,
    pos: u64,
    local: Option<Local>,
    /// Name and extra lengths of the current header.
    var: (usize, usize, usize),
    fixed: Vec<u8>,
    data_start: u64,
    zip64_sizes: bool,
    recent: Recent,
    find_local: StreamFind,
    find_central: StreamFind,
    /// The item's end (after the end record's comment), once known.
    end: Option<u64>,
}

/// Parse the ZIP64 extended-information extra field for (usize, csize).
fn zip64_extra(extra: &[u8], need_u: bool, need_c: bool) -> (Option<u64>, Option<u64>) {
    let mut e = extra;
    while e.len() >= 4 {
        let (id, len) = (le16(e, 0), usize::from(le16(e, 2)));
        if e.len() < 4 + len {
            break;
        }
        if id == 1 {
            let body = &e[4..4 + len];
            let mut at = 0;
            let mut next = |wanted: bool| {
                if wanted && body.len() >= at + 8 {
                    let v = le64(body, at);
                    at += 8;
                    Some(v)
                } else {
                    None
                }
            };
            let u = next(need_u);
            let c = next(need_c);
            return (u, c);
        }
        e = &e[4 + len..];
    }
    (None, None)
}

impl Walker {
    fn new() -> Self {
        let mut gather = Gather::default();
        gather.start(4);
        Walker {
            state: State::Sig,
            gather,
            pos: 0,
            local: None,
            var: (0, 0, 0),
            fixed: Vec::new(),
            data_start: 0,
            zip64_sizes: false,
            recent: Recent::new(32),
            find_local: StreamFind::new(LOCAL),
            find_central: StreamFind::new(CENTRAL),
            end: None,
        }
    }

    /// Advance over `data`; `Ok(Some(len))` after the end record.
    fn feed(
        &mut self,
        data: &[u8],
        on: &mut dyn FnMut(Event<'_>) -> Result<(), String>,
    ) -> Result<Option<u64>, (u64, String)> {
        let mut i = 0usize;
        while i < data.len() {
            let at = self.pos + i as u64;
            let fail = |m: String| (at, m);
            match self.state {
                State::Done => break,
                State::Sig => {
                    let Some(sig) = self.gather.fill(data, &mut i) else {
                        continue;
                    };
                    let mut s = [0u8; 4];
                    s.copy_from_slice(sig);
                    self.signature(&s).map_err(|m| (at, m))?;
                }
                State::LocalFixed => {
                    if let Some(f) = self.gather.fill(data, &mut i) {
                        self.fixed = f.to_vec();
                        let f = &self.fixed;
                        let (n, m) = (usize::from(le16(f, 22)), usize::from(le16(f, 24)));
                        if n == 0 || n > 4096 {
                            return Err(fail(format!("entry name length {n}")));
                        }
                        self.var = (n, m, 0);
                        self.gather.start(n + m);
                        self.state = State::LocalVar;
                    }
                }
                State::LocalVar => {
                    if let Some(v) = self.gather.fill(data, &mut i) {
                        let v = v.to_vec();
                        let f = &self.fixed;
                        let (n, _) = (self.var.0, self.var.1);
                        let flags = le16(f, 2);
                        let c32 = le32(f, 14);
                        let u32_ = le32(f, 18);
                        let (zu, zc) = zip64_extra(&v[n..], u32_ == u32::MAX, c32 == u32::MAX);
                        self.zip64_sizes = zu.is_some() || zc.is_some();
                        let csize = if c32 == u32::MAX {
                            zc
                        } else if flags & 8 != 0 && c32 == 0 {
                            None
                        } else {
                            Some(u64::from(c32))
                        };
                        let local = Local {
                            flags,
                            method: le16(f, 4),
                            crc: le32(f, 10),
                            csize,
                            usize: if u32_ == u32::MAX {
                                zu.unwrap_or(u64::MAX)
                            } else {
                                u64::from(u32_)
                            },
                        };
                        let header_at = self.pos + i as u64 - (30 + v.len()) as u64;
                        on(Event::Local(&local, &v[..n], header_at)).map_err(fail)?;
                        self.data_start = self.pos + i as u64;
                        self.state = match local.csize {
                            Some(0) => self.after_data(&local),
                            Some(c) => State::Data(c),
                            None => State::DataScan,
                        };
                        self.local = Some(local);
                    }
                }
                State::Data(left) => {
                    let take = (left.min((data.len() - i) as u64)) as usize;
                    on(Event::Data(&data[i..i + take])).map_err(fail)?;
                    i += take;
                    let left = left - take as u64;
                    if left > 0 {
                        self.state = State::Data(left);
                    } else {
                        on(Event::LocalEnd).map_err(|m| (self.pos + i as u64, m))?;
                        let local = self.local.clone();
                        self.state = match &local {
                            Some(l) => self.after_data(l),
                            None => State::Sig,
                        };
                        if self.state == State::Sig {
                            self.gather.start(4);
                        }
                    }
                }
                State::DataScan => {
                    let rest = &data[i..];
                    let mut hits: Vec<(usize, &'static [u8; 4])> = Vec::new();
                    self.find_local.ends(rest, |e| hits.push((e, LOCAL)));
                    self.find_central.ends(rest, |e| hits.push((e, CENTRAL)));
                    hits.sort_unstable_by_key(|h| h.0);
                    let base = self.pos + i as u64;
                    let mut found = None;
                    for (e, sig) in hits {
                        let sig_at = (base + e as u64).saturating_sub(4);
                        let mut before = self.recent.before(rest, e.saturating_sub(4));
                        if e < 4 {
                            // The signature began in the previous feed.
                            before.truncate(before.len().saturating_sub(4 - e));
                        }
                        if self.descriptor_before(&before, sig_at) {
                            found = Some((e, sig));
                            break;
                        }
                    }
                    match found {
                        Some((e, sig)) => {
                            on(Event::LocalEnd).map_err(fail)?;
                            self.recent.push(&rest[..e]);
                            i += e;
                            self.find_local = StreamFind::new(LOCAL);
                            self.find_central = StreamFind::new(CENTRAL);
                            self.signature(sig).map_err(|m| (at, m))?;
                        }
                        None => {
                            self.recent.push(rest);
                            i = data.len();
                        }
                    }
                }
                State::Descriptor => {
                    if let Some(w) = self.gather.fill(data, &mut i) {
                        let sized = if self.zip64_sizes { 16 } else { 8 };
                        // With its optional signature the descriptor is
                        // four bytes longer.
                        let left = if w == DESCRIPTOR { 4 + sized } else { sized };
                        self.state = State::Skip(left);
                    }
                }
                State::Skip(left) => {
                    let take = (left.min((data.len() - i) as u64)) as usize;
                    i += take;
                    let left = left - take as u64;
                    if left > 0 {
                        self.state = State::Skip(left);
                    } else if self.end.is_some() {
                        self.state = State::Done;
                        self.pos += i as u64;
                        return Ok(self.end);
                    } else {
                        self.gather.start(4);
                        self.state = State::Sig;
                    }
                }
                State::CentralFixed => {
                    if let Some(f) = self.gather.fill(data, &mut i) {
                        self.fixed = f.to_vec();
                        let f = &self.fixed;
                        let (n, m, k) = (
                            usize::from(le16(f, 24)),
                            usize::from(le16(f, 26)),
                            usize::from(le16(f, 28)),
                        );
                        if le16(f, 30) != 0 {
                            return Err(fail("central entry on another disk".into()));
                        }
                        self.var = (n, m, k);
                        self.gather.start(n + m + k);
                        self.state = State::CentralVar;
                    }
                }
                State::CentralVar => {
                    if let Some(v) = self.gather.fill(data, &mut i) {
                        let v = v.to_vec();
                        let f = &self.fixed;
                        let (n, m, _) = self.var;
                        let off32 = le32(f, 38);
                        let offset = if off32 == u32::MAX {
                            // The offset is the last ZIP64 field present.
                            let need_u = le32(f, 20) == u32::MAX;
                            let need_c = le32(f, 16) == u32::MAX;
                            zip64_offset(&v[n..n + m], need_u, need_c).unwrap_or(u64::MAX)
                        } else {
                            u64::from(off32)
                        };
                        let entry_at = self.pos + i as u64 - (46 + v.len()) as u64;
                        on(Event::Central {
                            offset,
                            at: entry_at,
                        })
                        .map_err(fail)?;
                        self.gather.start(4);
                        self.state = State::Sig;
                    }
                }
                State::Zip64Eocd => {
                    if let Some(f) = self.gather.fill(data, &mut i) {
                        // Size of the rest of the record, then the fields.
                        let f = f.to_vec();
                        let rec_at = self.pos + i as u64 - 56;
                        let rest = le64(&f, 0).saturating_sub(44);
                        on(Event::Eocd {
                            entries: le64(&f, 28),
                            size: le64(&f, 36),
                            offset: le64(&f, 44),
                            at: rec_at,
                        })
                        .map_err(fail)?;
                        self.state = State::Skip(rest);
                    }
                }
                State::EocdFixed => {
                    if let Some(f) = self.gather.fill(data, &mut i) {
                        let f = f.to_vec();
                        let rec_at = self.pos + i as u64 - 22;
                        if le16(&f, 0) != 0 || le16(&f, 2) != 0 {
                            return Err(fail("end record of a multi-disk archive".into()));
                        }
                        on(Event::Eocd {
                            entries: u64::from(le16(&f, 6)),
                            size: u64::from(le32(&f, 8)),
                            offset: u64::from(le32(&f, 12)),
                            at: rec_at,
                        })
                        .map_err(fail)?;
                        let comment = u64::from(le16(&f, 16));
                        let end = self.pos + i as u64 + comment;
                        self.end = Some(end);
                        if comment == 0 {
                            self.state = State::Done;
                            self.pos += i as u64;
                            return Ok(Some(end));
                        }
                        self.state = State::Skip(comment);
                    }
                }
            }
        }
        self.pos += i as u64;
        Ok(None)
    }

    /// What follows an entry's data: its descriptor, or the next header.
    fn after_data(&mut self, local: &Local) -> State {
        if local.flags & 8 != 0 && local.csize.is_some() {
            self.gather.start(4);
            State::Descriptor
        } else {
            self.gather.start(4);
            State::Sig
        }
    }

    /// Dispatch on a record signature.
    fn signature(&mut self, s: &[u8; 4]) -> Result<(), String> {
        match s {
            LOCAL => {
                self.gather.start(26);
                self.state = State::LocalFixed;
            }
            CENTRAL => {
                self.gather.start(42);
                self.state = State::CentralFixed;
            }
            ZIP64_EOCD => {
                self.gather.start(52);
                self.state = State::Zip64Eocd;
            }
            ZIP64_LOCATOR => self.state = State::Skip(16),
            EOCD => {
                self.gather.start(18);
                self.state = State::EocdFixed;
            }
            _ => return Err(format!("unexpected record signature {s:02X?}")),
        }
        Ok(())
    }

    /// Whether the bytes just before the signature at `sig_at` are a data
    /// descriptor closing the current entry's data.
    fn descriptor_before(&self, before: &[u8], sig_at: u64) -> bool {
        let d = sig_at.saturating_sub(self.data_start);
        let n = before.len();
        let tail = |k: usize| (n >= k).then(|| &before[n - k..]);
        // Signature, CRC, 32-bit sizes.
        if let Some(t) = tail(16)
            && &t[..4] == DESCRIPTOR
            && d >= 16
            && u64::from(le32(t, 8)) == d - 16
        {
            return true;
        }
        if let Some(t) = tail(12)
            && d >= 12
            && u64::from(le32(t, 4)) == d - 12
        {
            return true;
        }
        if let Some(t) = tail(24)
            && &t[..4] == DESCRIPTOR
            && d >= 24
            && le64(t, 8) == d - 24
        {
            return true;
        }
        if let Some(t) = tail(20)
            && d >= 20
            && le64(t, 4) == d - 20
        {
            return true;
        }
        false
    }
}

/// The local header offset from a central entry's ZIP64 extra field.
fn zip64_offset(extra: &[u8], need_u: bool, need_c: bool) -> Option<u64> {
    let mut e = extra;
    while e.len() >= 4 {
        let (id, len) = (le16(e, 0), usize::from(le16(e, 2)));
        if e.len() < 4 + len {
            return None;
        }
        if id == 1 {
            let at = 8 * (usize::from(need_u) + usize::from(need_c));
            let body = &e[4..4 + len];
            return (body.len() >= at + 8).then(|| le64(body, at));
        }
        e = &e[4 + len..];
    }
    None
}

/// The delimiter's consistency checks.
#[derive(Debug, Default)]
struct Checks {
    locals: Vec<u64>,
    central: u64,
    central_start: Option<u64>,
    central_end: u64,
    ooxml: Option<(&'static str, &'static str)>,
    content_types: bool,
    problem: Option<String>,
    locals_overflow: bool,
}

/// Most local headers remembered for the offset check.
const MAX_ENTRIES: usize = 1 << 20;

impl Checks {
    fn event(&mut self, e: Event<'_>) -> Result<(), String> {
        match e {
            Event::Local(l, name, at) => {
                if self.central_start.is_some() {
                    return Err("local entry after the central directory".into());
                }
                if l.method > 20 && !(93..=99).contains(&l.method) {
                    return Err(format!("compression method {}", l.method));
                }
                if name.iter().any(|&c| c < 0x20) {
                    return Err("control characters in an entry name".into());
                }
                if self.locals.len() < MAX_ENTRIES {
                    self.locals.push(at);
                } else {
                    self.locals_overflow = true;
                }
                match name {
                    b"word/document.xml" => self.ooxml = Some(("docx", "docx")),
                    b"xl/workbook.xml" => self.ooxml = Some(("xlsx", "xlsx")),
                    b"ppt/presentation.xml" => self.ooxml = Some(("pptx", "pptx")),
                    b"[Content_Types].xml" => self.content_types = true,
                    _ => {}
                }
                Ok(())
            }
            Event::Central { offset, at, .. } => {
                if self.central_start.is_none() {
                    self.central_start = Some(at);
                }
                self.central += 1;
                if !self.locals_overflow && self.locals.binary_search(&offset).is_err() {
                    self.problem.get_or_insert(format!(
                        "central directory names a local header at {offset} that is not there"
                    ));
                }
                Ok(())
            }
            Event::Eocd {
                entries,
                size,
                offset,
                at,
            } => {
                if self.central_start.is_none() {
                    return Err("end record without a central directory".into());
                }
                let start = self.central_start.unwrap_or(0);
                if self.central_end == 0 {
                    self.central_end = at;
                }
                let dir = self.central_end - start;
                let mismatch = (entries != 0xFFFF && entries != self.central)
                    .then(|| {
                        format!(
                            "end record counts {entries} entries, directory has {}",
                            self.central
                        )
                    })
                    .or_else(|| {
                        (size != 0xFFFF_FFFF && size != dir).then(|| {
                            format!("end record says the directory is {size} bytes, it is {dir}")
                        })
                    })
                    .or_else(|| {
                        (offset != 0xFFFF_FFFF && offset != start).then(|| {
                            format!("end record puts the directory at {offset}, it is at {start}")
                        })
                    });
                if let Some(m) = mismatch {
                    self.problem.get_or_insert(m);
                }
                Ok(())
            }
            Event::Data(_) | Event::LocalEnd => Ok(()),
        }
    }
}

/// The ZIP delimiter.
#[derive(Debug)]
pub struct ZipDelimiter {
    walker: Walker,
    checks: Checks,
}

impl ZipDelimiter {
    /// A delimiter for an item starting at a local file header.
    pub fn new() -> Self {
        ZipDelimiter {
            walker: Walker::new(),
            checks: Checks::default(),
        }
    }
}

impl Default for ZipDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Delimiter for ZipDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let c = &mut self.checks;
        match self.walker.feed(data, &mut |e| c.event(e)) {
            Ok(Some(len)) => Step::End {
                len,
                verdict: match c.problem.take() {
                    Some(p) => Verdict::new(Validation::Invalid, p),
                    None => Verdict::valid(),
                },
            },
            Ok(None) => Step::More,
            Err(_) if !self.accepted() => Step::Reject,
            Err((at, msg)) => Step::End {
                len: at,
                verdict: Verdict::new(Validation::Invalid, msg),
            },
        }
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        let why = match cut {
            Cut::RangeEnd | Cut::NextHeader => {
                "the scanned range ends before the end of central directory"
            }
            Cut::MaxSize => "no end of central directory within the maximum size",
        };
        Step::cut_short(self.accepted(), fed, why)
    }

    fn accepted(&self) -> bool {
        // The first local header and its name were read and made sense.
        !self.checks.locals.is_empty()
    }

    fn final_type(&self) -> Option<(&'static str, &'static str)> {
        self.checks.ooxml
    }
}

/// Member checks of the verifier.
struct Members {
    current: Option<Local>,
    crc: crc32fast::Hasher,
    inflate: Option<flate2::Decompress>,
    out: Vec<u8>,
    produced: u64,
    stream_end: bool,
    problem: Option<String>,
    checked: u64,
}

impl Members {
    fn event(&mut self, e: Event<'_>) -> Result<(), String> {
        match e {
            Event::Local(l, _, _) => {
                let checkable = l.flags & 1 == 0 && l.csize.is_some() && matches!(l.method, 0 | 8);
                self.current = checkable.then(|| l.clone());
                self.crc = crc32fast::Hasher::new();
                self.produced = 0;
                self.stream_end = false;
                self.inflate = (checkable && l.method == 8).then(|| flate2::Decompress::new(false));
            }
            Event::Data(d) => {
                if self.problem.is_some() {
                    return Ok(());
                }
                let Some(l) = &self.current else {
                    return Ok(());
                };
                if l.method == 0 {
                    self.crc.update(d);
                    self.produced += d.len() as u64;
                } else if let Some(z) = self.inflate.as_mut() {
                    let mut input = d;
                    while !input.is_empty() && !self.stream_end {
                        let (before_in, before_out) = (z.total_in(), z.total_out());
                        let status =
                            z.decompress(input, &mut self.out, flate2::FlushDecompress::None);
                        let used = (z.total_in() - before_in) as usize;
                        let made = (z.total_out() - before_out) as usize;
                        self.crc.update(&self.out[..made]);
                        self.produced += made as u64;
                        input = &input[used..];
                        match status {
                            Ok(flate2::Status::StreamEnd) => self.stream_end = true,
                            Ok(_) if used == 0 && made == 0 => break,
                            Ok(_) => {}
                            Err(e) => {
                                self.problem = Some(format!("deflate data: {e}"));
                                return Ok(());
                            }
                        }
                        if self.produced > l.usize {
                            self.problem = Some("member inflates past its recorded size".into());
                            return Ok(());
                        }
                    }
                    if !input.is_empty() && self.stream_end {
                        self.problem = Some("data after the end of a deflate stream".into());
                    }
                }
            }
            Event::LocalEnd => {
                if let Some(l) = self.current.take() {
                    let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
                    // With a data descriptor the header may hold zeros.
                    let deferred = l.flags & 8 != 0 && l.crc == 0;
                    let size_ok = deferred || self.produced == l.usize;
                    let end_ok = l.method == 0 || self.stream_end;
                    let crc_ok = deferred || crc == l.crc;
                    if self.problem.is_none() && !(size_ok && end_ok && crc_ok) {
                        self.problem = Some(format!(
                            "member data does not match its header (CRC {}, size {})",
                            if crc_ok { "ok" } else { "differs" },
                            if size_ok { "ok" } else { "differs" }
                        ));
                    }
                    self.checked += 1;
                }
            }
            Event::Central { .. } | Event::Eocd { .. } => {}
        }
        Ok(())
    }
}

/// The ZIP verifier.
pub struct ZipVerifier {
    walker: Walker,
    members: Members,
    broken: bool,
}

impl ZipVerifier {
    /// A verifier for one item.
    pub fn new() -> Self {
        ZipVerifier {
            walker: Walker::new(),
            members: Members {
                current: None,
                crc: crc32fast::Hasher::new(),
                inflate: None,
                out: vec![0u8; 64 << 10],
                produced: 0,
                stream_end: false,
                problem: None,
                checked: 0,
            },
            broken: false,
        }
    }
}

impl Default for ZipVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier for ZipVerifier {
    fn update(&mut self, data: &[u8]) {
        if self.broken || self.walker.state == State::Done {
            return;
        }
        let m = &mut self.members;
        if self.walker.feed(data, &mut |e| m.event(e)).is_err() {
            self.broken = true;
        }
    }

    fn finish(self: Box<Self>, _len: u64) -> Option<Verdict> {
        if let Some(p) = self.members.problem {
            return Some(Verdict::new(Validation::Invalid, p));
        }
        (!self.broken && self.walker.state == State::Done).then(Verdict::valid)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{end_of, verify};
    use super::*;
    use std::io::Write;

    fn crc(d: &[u8]) -> u32 {
        crc32fast::hash(d)
    }

    /// A ZIP with one stored and one deflated member, written by hand
    /// following APPNOTE (the corpus generator's archives are checked by
    /// the root tests with `unzip -t`).
    pub(crate) fn archive(names: &[&str], descriptor: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let data = format!("contents of {name} ")
                .repeat(20 + i * 7)
                .into_bytes();
            let (method, stored) = if i % 2 == 0 {
                (0u16, data.clone())
            } else {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(&data).unwrap();
                (8u16, e.finish().unwrap())
            };
            let offset = out.len() as u32;
            let flags: u16 = if descriptor { 8 } else { 0 };
            let (hcrc, hc, hu) = if descriptor {
                (0, 0, 0)
            } else {
                (crc(&data), stored.len() as u32, data.len() as u32)
            };
            out.extend_from_slice(LOCAL);
            out.extend_from_slice(&20u16.to_le_bytes());
            out.extend_from_slice(&flags.to_le_bytes());
            out.extend_from_slice(&method.to_le_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&hcrc.to_le_bytes());
            out.extend_from_slice(&hc.to_le_bytes());
            out.extend_from_slice(&hu.to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&stored);
            if descriptor {
                out.extend_from_slice(DESCRIPTOR);
                out.extend_from_slice(&crc(&data).to_le_bytes());
                out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            }
            central.extend_from_slice(CENTRAL);
            central.extend_from_slice(&20u16.to_le_bytes());
            central.extend_from_slice(&20u16.to_le_bytes());
            central.extend_from_slice(&flags.to_le_bytes());
            central.extend_from_slice(&method.to_le_bytes());
            central.extend_from_slice(&[0; 4]);
            central.extend_from_slice(&crc(&data).to_le_bytes());
            central.extend_from_slice(&(stored.len() as u32).to_le_bytes());
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(name.len() as u16).to_le_bytes());
            central.extend_from_slice(&[0; 12]);
            central.extend_from_slice(&offset.to_le_bytes());
            central.extend_from_slice(name.as_bytes());
        }
        let cd_at = out.len() as u32;
        out.extend_from_slice(&central);
        out.extend_from_slice(EOCD);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(names.len() as u16).to_le_bytes());
        out.extend_from_slice(&(names.len() as u16).to_le_bytes());
        out.extend_from_slice(&(central.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_at.to_le_bytes());
        out.extend_from_slice(&5u16.to_le_bytes());
        out.extend_from_slice(b"hello");
        out
    }

    #[test]
    fn archives_end_after_the_end_record_and_comment() {
        for descriptor in [false, true] {
            let z = archive(&["a.txt", "b.txt", "c.txt"], descriptor);
            let mut data = z.clone();
            data.extend_from_slice(b"PK\x03\x04 not part of it");
            for chunk in [1, 3, 29, 4096] {
                let mut d = ZipDelimiter::new();
                let (len, v) = end_of(&mut d, &data, chunk);
                assert_eq!(
                    (len, v),
                    (z.len() as u64, Validation::Valid),
                    "{descriptor} {chunk}"
                );
                assert_eq!(d.final_type(), None);
            }
            // Members with descriptors are not inflated, the rest are.
            let v = verify(Box::new(ZipVerifier::new()), &z, 17);
            assert_eq!(v, Some(Verdict::valid()), "descriptor {descriptor}");
        }
    }

    #[test]
    fn ooxml_parts_name_the_type() {
        let z = archive(&["[Content_Types].xml", "word/document.xml"], false);
        let mut d = ZipDelimiter::new();
        let (_, v) = end_of(&mut d, &z, 100);
        assert_eq!(v, Validation::Valid);
        assert_eq!(d.final_type(), Some(("docx", "docx")));
    }

    #[test]
    fn damage_is_found() {
        let z = archive(&["a.txt", "b.txt"], false);
        // A flipped byte in the deflated member: CRC or inflate fails.
        let second = z.windows(5).position(|w| w == b"b.txt").unwrap() + 5;
        let mut bad = z.clone();
        bad[second + 10] ^= 0x55;
        let v = verify(Box::new(ZipVerifier::new()), &bad, 64).unwrap();
        assert_eq!(v.validation, Validation::Invalid, "{v:?}");
        // A shifted directory offset.
        let mut shifted = z.clone();
        let n = shifted.len();
        shifted[n - 11] ^= 1;
        let (_, v) = end_of(&mut ZipDelimiter::new(), &shifted, 64);
        assert_eq!(v, Validation::Invalid);
        // Garbage after the first header is rejected.
        assert_eq!(
            ZipDelimiter::new().feed(b"PK\x03\x04\x14\x00\x00\x00\xff\xff"),
            Step::More
        );
    }
}
