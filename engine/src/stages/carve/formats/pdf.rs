//! PDF: from `%PDF-x.y` to the `%%EOF` of the last revision.
//!
//! The delimiter ends a document at a `%%EOF` preceded by a `startxref`
//! offset that lies inside it, plus the line end; it then looks at what
//! follows, and only an incremental update (an object or a new `xref`
//! section) extends the document to a later `%%EOF`. The verifier checks
//! the trailer: `startxref` must point at an `xref` table or an object,
//! and every in-use entry of every cross-reference table must point at
//! the start of an `N G obj` header — offsets that a fragment boundary
//! shifts.

use super::{Cut, Delimiter, Gather, Recent, Step, StreamFind, Validation, Verdict, Verifier};

/// The format's row in [`super::FORMATS`].
pub const SPEC: super::FormatSpec = super::FormatSpec {
    name: "pdf",
    extension: "pdf",
    headers: &[super::Header::exact(b"%PDF-")],
    max_size: 512 << 20,
    ends_at_own_header: true,
    identified_as: &["pdf"],
    delimiter: || Box::new(PdfDelimiter::new()),
    verifier: Some(|| Box::new(PdfVerifier::new())),
};

/// Bytes remembered before each feed, for parsing `startxref N` before a
/// `%%EOF` and `N G obj` before an `obj` split across feeds.
const WINDOW: usize = 64;

/// PDF whitespace (ISO 32000 7.2.2).
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0C | 0x00)
}

/// Parse `startxref <N> ` at the end of `b` (before `%%EOF`): N.
fn startxref_before(b: &[u8]) -> Option<u64> {
    let mut end = b.len();
    while end > 0 && is_ws(b[end - 1]) {
        end -= 1;
    }
    let digits_end = end;
    while end > 0 && b[end - 1].is_ascii_digit() {
        end -= 1;
    }
    if end == digits_end || digits_end - end > 19 {
        return None;
    }
    let n: u64 = std::str::from_utf8(&b[end..digits_end])
        .ok()?
        .parse()
        .ok()?;
    let mut k = end;
    while k > 0 && is_ws(b[k - 1]) {
        k -= 1;
    }
    (k < end && b[..k].ends_with(b"startxref")).then_some(n)
}

/// The digits after leading whitespace of `text`.
fn leading_digits(text: &[u8]) -> Vec<u8> {
    text.iter()
        .copied()
        .skip_while(|&c| is_ws(c))
        .take_while(u8::is_ascii_digit)
        .collect()
}

/// A decimal number of at most 19 digits.
fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// When `b` ends with `N G ` (the bytes before an `obj` keyword), the
/// offset in `b` where `N` starts.
fn object_header_before(b: &[u8]) -> Option<usize> {
    let mut k = b.len();
    for _ in 0..2 {
        let ws_end = k;
        while k > 0 && is_ws(b[k - 1]) {
            k -= 1;
        }
        if k == ws_end {
            return None;
        }
        let d_end = k;
        while k > 0 && b[k - 1].is_ascii_digit() {
            k -= 1;
        }
        if k == d_end {
            return None;
        }
    }
    // The first number starts a line or follows a delimiter.
    let ok = k == 0 || is_ws(b[k - 1]) || matches!(b[k - 1], b'>' | b')' | b']' | b'}');
    ok.then_some(k)
}

/// Whether `b` (bytes after a `%%EOF`, line end and whitespace skipped)
/// begins an incremental update.
fn starts_update(b: &[u8]) -> bool {
    if b.starts_with(b"xref") {
        return true;
    }
    // `N G obj`
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > s
    };
    let spaces = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && is_ws(b[*i]) {
            *i += 1;
        }
        *i > s
    };
    digits(&mut i)
        && spaces(&mut i)
        && digits(&mut i)
        && spaces(&mut i)
        && b[i..].starts_with(b"obj")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Version,
    Scan,
    /// After a `%%EOF` ending a revision at `mark`: the line end, then a
    /// look at what follows.
    Eol,
    Peek,
}

/// The PDF delimiter.
#[derive(Debug)]
pub struct PdfDelimiter {
    state: State,
    gather: Gather,
    eof: StreamFind,
    obj: StreamFind,
    window: Recent,
    pos: u64,
    mark: Option<u64>,
    peek: Vec<u8>,
    seen_obj: bool,
}

/// Bytes examined after a `%%EOF` before deciding it ends the document.
const PEEK: usize = 24;
/// Whitespace skipped after a `%%EOF` while looking for an update.
const PEEK_WS: u64 = 1024;

impl PdfDelimiter {
    /// A delimiter for an item starting at `%PDF-`.
    pub fn new() -> Self {
        let mut gather = Gather::default();
        gather.start(8);
        PdfDelimiter {
            state: State::Version,
            gather,
            eof: StreamFind::new(b"%%EOF"),
            obj: StreamFind::new(b"obj"),
            window: Recent::new(WINDOW),
            pos: 0,
            mark: None,
            peek: Vec::new(),
            seen_obj: false,
        }
    }

    fn end_at_mark(&self) -> Step {
        match self.mark {
            Some(len) => Step::End {
                len,
                verdict: Verdict::valid(),
            },
            None => Step::Reject,
        }
    }
}

impl Default for PdfDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Delimiter for PdfDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let mut i = 0usize;
        while i < data.len() {
            match self.state {
                State::Version => {
                    if let Some(v) = self.gather.fill(data, &mut i) {
                        let ok = v.starts_with(b"%PDF-")
                            && v[5].is_ascii_digit()
                            && v[6] == b'.'
                            && v[7].is_ascii_digit();
                        if !ok {
                            return Step::Reject;
                        }
                        self.state = State::Scan;
                    }
                }
                State::Scan => {
                    let rest = &data[i..];
                    if !self.seen_obj {
                        let mut ends = Vec::new();
                        self.obj.ends(rest, |e| ends.push(e));
                        let window = &self.window;
                        self.seen_obj = ends.iter().any(|&e| {
                            let mut b = window.before(data, i + e);
                            b.truncate(b.len().saturating_sub(3));
                            object_header_before(&b).is_some()
                        });
                    }
                    let mut first: Option<usize> = None;
                    let window = &self.window;
                    let base = self.pos + i as u64;
                    self.eof.ends(rest, |e| {
                        if first.is_some() {
                            return;
                        }
                        // `startxref N` must end just before `%%EOF`, N
                        // inside the document.
                        let mut b = window_before(window, data, i + e);
                        b.truncate(b.len().saturating_sub(5));
                        if let Some(n) = startxref_before(&b)
                            && n < base + e as u64
                        {
                            first = Some(e);
                        }
                    });
                    match first {
                        Some(e) => {
                            self.window.push(&data[..i + e]);
                            self.pos += (i + e) as u64;
                            self.mark = Some(self.pos);
                            self.peek.clear();
                            self.state = State::Eol;
                            // Restart the searches after this point.
                            self.eof = StreamFind::new(b"%%EOF");
                            let consumed = i + e;
                            return self.continue_after(data, consumed);
                        }
                        None => {
                            self.window.push(data);
                            self.pos += data.len() as u64;
                            return Step::More;
                        }
                    }
                }
                State::Eol | State::Peek => return self.continue_after(data, i),
            }
        }
        self.window.push(&data[..i.min(data.len())]);
        self.pos += i as u64;
        Step::More
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        if self.mark.is_some() {
            return self.end_at_mark();
        }
        let why = match cut {
            Cut::RangeEnd => "the scanned range ends before a trailer and %%EOF",
            Cut::MaxSize => "no trailer and %%EOF within the maximum size",
            Cut::NextHeader => "another PDF header begins before a trailer and %%EOF",
        };
        Step::cut_short(self.accepted(), fed, why)
    }

    fn accepted(&self) -> bool {
        self.seen_obj || self.mark.is_some()
    }

    fn mark(&self) -> Option<u64> {
        self.mark
    }
}

/// `window_before` as a free function so the closure above can call it
/// while `self.eof` is borrowed mutably.
fn window_before(w: &Recent, data: &[u8], end: usize) -> Vec<u8> {
    w.before(data, end)
}

impl PdfDelimiter {
    /// Process `data[from..]` after a `%%EOF`: extend the mark over its
    /// line end, then peek for an incremental update.
    fn continue_after(&mut self, data: &[u8], from: usize) -> Step {
        let mut i = from;
        while i < data.len() {
            let b = data[i];
            match self.state {
                State::Eol => {
                    // `%%EOF` then CR, LF or CR LF belongs to the file.
                    let mark = self.mark.unwrap_or(self.pos);
                    let after = self.pos + (i - from) as u64;
                    if b == b'\n' || (b == b'\r' && after == mark) {
                        self.mark = Some(after + 1);
                        i += 1;
                        if b == b'\n' {
                            self.state = State::Peek;
                        }
                    } else {
                        self.state = State::Peek;
                    }
                }
                State::Peek => {
                    let mark = self.mark.unwrap_or(self.pos);
                    let after = self.pos + (i - from) as u64;
                    if self.peek.is_empty() && is_ws(b) {
                        if after - mark > PEEK_WS {
                            return self.end_at_mark();
                        }
                        i += 1;
                        continue;
                    }
                    self.peek.push(b);
                    i += 1;
                    if self.peek.len() >= PEEK {
                        if starts_update(&self.peek) {
                            // An incremental update: look for its %%EOF,
                            // scanning from here.
                            self.window.push(&data[from..i]);
                            self.pos += (i - from) as u64;
                            self.state = State::Scan;
                            return self.feed(&data[i..]);
                        }
                        return self.end_at_mark();
                    }
                }
                _ => break,
            }
        }
        self.window.push(&data[from..i]);
        self.pos += (i - from) as u64;
        Step::More
    }
}

/// Parses cross-reference tables and records object positions.
pub struct PdfVerifier {
    pos: u64,
    window: Recent,
    obj: StreamFind,
    xref: StreamFind,
    startxref: StreamFind,
    /// Offsets of `N G obj` headers (their first digit), ascending.
    objects: Vec<u64>,
    /// Offsets of `xref` keywords that start tables.
    tables: Vec<u64>,
    /// In-use entries: (table offset, object offset).
    entries: Vec<(u64, u64)>,
    /// Each `startxref` value with the offset it was read at.
    startxrefs: Vec<(u64, u64)>,
    /// The table being read: its offset and the text not yet parsed.
    table: Option<(u64, Vec<u8>)>,
    /// Pending `startxref` value text.
    sx: Option<(u64, Vec<u8>)>,
    overflow: bool,
    problem: Option<String>,
}

/// Most objects and entries tracked; beyond, no opinion is given.
const MAX_TRACKED: usize = 1 << 20;
/// Longest text of one table kept at a time.
const TABLE_CHUNK: usize = 4096;

impl PdfVerifier {
    /// A verifier for one item.
    pub fn new() -> Self {
        PdfVerifier {
            pos: 0,
            window: Recent::new(WINDOW),
            obj: StreamFind::new(b"obj"),
            xref: StreamFind::new(b"xref"),
            startxref: StreamFind::new(b"startxref"),
            objects: Vec::new(),
            tables: Vec::new(),
            entries: Vec::new(),
            startxrefs: Vec::new(),
            table: None,
            sx: None,
            overflow: false,
            problem: None,
        }
    }

    /// An `obj` keyword ended at `end` of `data`: record `N G obj` if the
    /// bytes before it are that.
    fn object_at(&mut self, data: &[u8], end: usize) {
        let mut b = self.window.before(data, end);
        b.truncate(b.len().saturating_sub(3));
        let Some(s) = object_header_before(&b) else {
            return;
        };
        let at = (self.pos + end as u64).saturating_sub(3 + (b.len() - s) as u64);
        if self.objects.len() >= MAX_TRACKED {
            self.overflow = true;
        } else if self.objects.last().is_none_or(|&l| l < at) {
            self.objects.push(at);
        }
    }

    /// Parse what is buffered of the current table: subsection headers
    /// and 20-byte entries, until `trailer`.
    fn parse_table(&mut self, done: bool) {
        let Some((offset, text)) = self.table.as_mut() else {
            return;
        };
        let offset = *offset;
        let mut i = 0usize;
        let mut finished = false;
        let mut bad: Option<String> = None;
        loop {
            while i < text.len() && is_ws(text[i]) {
                i += 1;
            }
            if text[i..].starts_with(b"trailer") {
                finished = true;
                break;
            }
            // Subsection header `first count` then its entries.
            let line_end = match text[i..].iter().position(|&c| c == b'\n' || c == b'\r') {
                Some(p) => i + p,
                None => break,
            };
            let header = String::from_utf8_lossy(&text[i..line_end]).into_owned();
            let mut parts = header.split_ascii_whitespace();
            let (Some(Ok(_first)), Some(Ok(count)), None) = (
                parts.next().map(str::parse::<u64>),
                parts.next().map(str::parse::<u64>),
                parts.next(),
            ) else {
                bad = Some(format!("unreadable cross-reference subsection `{header}`"));
                break;
            };
            let mut j = line_end;
            while j < text.len() && (text[j] == b'\n' || text[j] == b'\r') && j < line_end + 2 {
                j += 1;
            }
            let need = usize::try_from(count)
                .unwrap_or(usize::MAX)
                .saturating_mul(20);
            if text.len() - j < need {
                break;
            }
            for e in text[j..j + need].chunks_exact(20) {
                let off = std::str::from_utf8(&e[..10])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                match (off, e[17]) {
                    (Some(o), b'n') if o > 0 => {
                        if self.entries.len() >= MAX_TRACKED {
                            self.overflow = true;
                        } else {
                            self.entries.push((offset, o));
                        }
                    }
                    (Some(_), b'n' | b'f') => {}
                    _ => {
                        bad = Some("malformed cross-reference entry".into());
                        break;
                    }
                }
            }
            if bad.is_some() {
                break;
            }
            i = j + need;
        }
        if let Some(b) = bad {
            self.problem.get_or_insert(b);
            self.table = None;
            return;
        }
        if finished || done {
            self.table = None;
        } else if let Some((_, text)) = self.table.as_mut() {
            text.drain(..i);
            if text.len() > TABLE_CHUNK * 1024 {
                // A subsection far too large to be real.
                self.problem
                    .get_or_insert("cross-reference subsection too large".into());
                self.table = None;
            }
        }
    }
}

impl Default for PdfVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier for PdfVerifier {
    fn update(&mut self, data: &[u8]) {
        if self.problem.is_some() || self.overflow {
            self.pos += data.len() as u64;
            return;
        }
        if let Some((_, text)) = self.table.as_mut() {
            text.extend_from_slice(data);
            self.parse_table(false);
        }
        if let Some((at, text)) = self.sx.as_mut() {
            text.extend_from_slice(&data[..data.len().min(32)]);
            let digits = leading_digits(text);
            let complete = text
                .iter()
                .skip_while(|&&c| is_ws(c))
                .nth(digits.len())
                .is_some();
            if complete || text.len() >= 32 {
                if let Some(n) = parse_digits(&digits) {
                    self.startxrefs.push((*at, n));
                }
                self.sx = None;
            }
        }
        let mut objs = Vec::new();
        self.obj.ends(data, |e| objs.push(e));
        for e in objs {
            self.object_at(data, e);
        }
        let mut sxs = Vec::new();
        self.startxref.ends(data, |e| sxs.push(e));
        let mut xrefs = Vec::new();
        self.xref.ends(data, |e| xrefs.push(e));
        for e in xrefs {
            let at = (self.pos + e as u64).saturating_sub(4);
            // Not the tail of `startxref`, and on a line of its own.
            if sxs.contains(&e) {
                continue;
            }
            let mut before = self.window.before(data, e);
            before.truncate(before.len().saturating_sub(4));
            let line_start = before.last().is_none_or(|&c| c == b'\n' || c == b'\r');
            if line_start && self.table.is_none() {
                self.tables.push(at);
                let rest = &data[e.min(data.len())..];
                self.table = Some((at, rest.to_vec()));
                self.parse_table(false);
            }
        }
        for e in sxs {
            let rest = &data[e.min(data.len())..];
            let text = rest[..rest.len().min(32)].to_vec();
            self.sx = Some((self.pos + e as u64, text));
            if rest.len() >= 32 {
                // Complete within this feed: parse now.
                let t = std::mem::take(&mut self.sx);
                if let Some((at, text)) = t
                    && let Some(n) = parse_digits(&leading_digits(&text))
                {
                    self.startxrefs.push((at, n));
                }
            }
        }
        self.window.push(data);
        self.pos += data.len() as u64;
    }

    fn finish(mut self: Box<Self>, len: u64) -> Option<Verdict> {
        // A `startxref` value still waiting for more bytes when the item
        // ended (`startxref\nN\n%%EOF\n` are its last bytes): the end
        // is the delimiter it waited for.
        if let Some((at, text)) = self.sx.take()
            && let Some(n) = parse_digits(&leading_digits(&text))
        {
            self.startxrefs.push((at, n));
        }
        if self.table.is_some() {
            self.parse_table(true);
        }
        if let Some(p) = self.problem {
            return Some(Verdict::new(Validation::Invalid, p));
        }
        if self.overflow {
            return None;
        }
        let Some(&(_, last)) = self.startxrefs.iter().rev().find(|(at, _)| *at < len) else {
            return Some(Verdict::new(Validation::Invalid, "no startxref"));
        };
        let target_ok =
            self.tables.binary_search(&last).is_ok() || self.objects.binary_search(&last).is_ok();
        if !target_ok {
            return Some(Verdict::new(
                Validation::Invalid,
                format!("startxref {last} points at neither a cross-reference table nor an object"),
            ));
        }
        for &(table, off) in &self.entries {
            if table >= len {
                continue;
            }
            if off >= len || self.objects.binary_search(&off).is_err() {
                return Some(Verdict::new(
                    Validation::Invalid,
                    format!("cross-reference entry points at byte {off}, where no object starts"),
                ));
            }
        }
        Some(Verdict::valid())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::test_util::{end_of, verify};
    use super::*;

    /// A small PDF with a correct cross-reference table.
    pub(crate) fn tiny_pdf() -> Vec<u8> {
        let mut out = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
        let mut offs = Vec::new();
        for (n, body) in [
            (1, "<< /Type /Catalog /Pages 2 0 R >>"),
            (2, "<< /Type /Pages /Kids [] /Count 0 >>"),
        ] {
            offs.push(out.len());
            out.extend_from_slice(format!("{n} 0 obj\n{body}\nendobj\n").as_bytes());
        }
        let xref = out.len();
        out.extend_from_slice(b"xref\n0 3\n0000000000 65535 f \n");
        for o in offs {
            out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
        }
        out.extend_from_slice(
            format!("trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n").as_bytes(),
        );
        out
    }

    #[test]
    fn ends_after_eof_and_its_line_end() {
        let p = tiny_pdf();
        let mut data = p.clone();
        data.extend_from_slice(&[0x8A; 100]);
        for chunk in [1, 2, 3, 5, 17, 1000] {
            let (len, v) = end_of(&mut PdfDelimiter::new(), &data, chunk);
            assert_eq!(
                (len, v),
                (p.len() as u64, Validation::Valid),
                "chunk {chunk}"
            );
            assert_eq!(
                verify(Box::new(PdfVerifier::new()), &data, chunk),
                Some(Verdict::valid()),
                "chunk {chunk}"
            );
            // The item alone, ending right after `%%EOF\n`: the verifier
            // never sees a byte past the `startxref` value's line.
            assert_eq!(
                verify(Box::new(PdfVerifier::new()), &p, chunk),
                Some(Verdict::valid()),
                "exact, chunk {chunk}"
            );
        }
    }

    #[test]
    fn incremental_updates_extend_the_document() {
        let p = tiny_pdf();
        let mut data = p.clone();
        let upd = data.len();
        data.extend_from_slice(b"3 0 obj\n(x)\nendobj\n");
        let xref = data.len();
        data.extend_from_slice(
            format!("xref\n3 1\n{upd:010} 00000 n \ntrailer\n<< /Prev 0 >>\nstartxref\n{xref}\n%%EOF\r\n")
                .as_bytes(),
        );
        let full = data.len();
        data.extend_from_slice(&[0u8; 50]);
        data.extend_from_slice(b"%PDF-1.4 another");
        for chunk in [1, 4, 64, 4096] {
            let (len, v) = end_of(&mut PdfDelimiter::new(), &data, chunk);
            assert_eq!((len, v), (full as u64, Validation::Valid), "chunk {chunk}");
        }
        assert_eq!(
            verify(Box::new(PdfVerifier::new()), &data[..full], 7),
            Some(Verdict::valid())
        );
    }

    #[test]
    fn shifted_offsets_fail_verification() {
        let p = tiny_pdf();
        // Drop 10 bytes from the middle of object 2: offsets after it shift.
        let at = p.windows(7).position(|w| w == b"2 0 obj").unwrap() + 12;
        let mut broken = p[..at].to_vec();
        broken.extend_from_slice(&p[at + 10..]);
        let v = verify(Box::new(PdfVerifier::new()), &broken, 9).unwrap();
        assert_eq!(v.validation, Validation::Invalid, "{v:?}");
    }

    #[test]
    fn no_trailer_is_truncated_and_no_object_is_rejected() {
        let p = tiny_pdf();
        let (len, v) = end_of(&mut PdfDelimiter::new(), &p[..p.len() - 12], 8);
        assert_eq!((len, v), (p.len() as u64 - 12, Validation::Truncated));
        let mut d = PdfDelimiter::new();
        assert_eq!(d.feed(b"%PDF-x.y"), Step::Reject);
        let mut d = PdfDelimiter::new();
        assert_eq!(d.feed(b"%PDF-1.4 talks of objects, no obj"), Step::More);
        assert_eq!(d.finish(Cut::RangeEnd, 33), Step::Reject);
        assert!(starts_update(b"12 0 obj <<"));
        assert!(!starts_update(b"12 x obj"));
        assert_eq!(startxref_before(b"\nstartxref\n1234\n"), Some(1234));
        assert_eq!(startxref_before(b"\nstartref\n1234\n"), None);
    }
}
