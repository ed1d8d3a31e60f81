//! Per-format item parsers.
//!
//! Each carved item is followed by two streaming parsers fed the same bytes
//! in order, never the whole item at once (items can be gigabytes):
//!
//! - a [`Delimiter`], on the scan's single ordered thread, decides where
//!   the item ends (footer, structure-derived length, maximum size) and
//!   gives a first verdict. It must be cheap: it sees every byte of every
//!   open item on one core, so it skips what it can (segment, chunk and
//!   entry lengths) rather than reading it.
//! - an optional [`Verifier`], on a sink worker beside the hashers, checks
//!   what the format allows beyond the structure (JPEG entropy-coded data,
//!   PNG chunk CRCs, ZIP member CRCs, SQLite b-tree pages, PDF
//!   cross-reference offsets). Its verdict can only lower the delimiter's.
//!
//! Delimiters start in probation: until they call the item real
//! ([`Delimiter::accepted`]) they may [`Step::Reject`] it, and nothing is
//! written. After acceptance the item is always reported, with its
//! validation.

pub mod bmp;
pub mod gif;
pub mod jpeg;
pub mod pdf;
pub mod png;
pub mod sqlite;
pub mod text;
pub mod user;
pub mod zip;

/// How far a carved item could be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Validation {
    /// Malformed: the bytes are not (all) a file of the type.
    Invalid,
    /// The structure was cut by the end of the scanned range or the
    /// maximum size before it completed.
    Truncated,
    /// The format gives nothing to check the content against.
    Unchecked,
    /// Every check the format allows passed.
    Valid,
}

impl Validation {
    /// The value stored in `carved_items.validation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Validation::Valid => "valid",
            Validation::Invalid => "invalid",
            Validation::Truncated => "truncated",
            Validation::Unchecked => "unchecked",
        }
    }
}

/// A verdict with the reason when it is not plainly valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The status.
    pub validation: Validation,
    /// Why (for the `detail` column), when there is something to say.
    pub note: Option<String>,
}

impl Verdict {
    /// A verdict with a reason.
    pub fn new(validation: Validation, note: impl Into<String>) -> Self {
        Verdict {
            validation,
            note: Some(note.into()),
        }
    }

    /// Plainly valid.
    pub fn valid() -> Self {
        Verdict {
            validation: Validation::Valid,
            note: None,
        }
    }

    /// The lower of two verdicts (the verifier can only lower the
    /// delimiter's); notes of both are kept.
    pub fn lower(self, other: Option<Verdict>) -> Verdict {
        let Some(other) = other else { return self };
        let (mut low, high) = if other.validation < self.validation {
            (other, self)
        } else {
            (self, other)
        };
        if let Some(n) = high.note {
            low.note = Some(match low.note {
                Some(l) if l != n => format!("{l}; {n}"),
                Some(l) => l,
                None => n,
            });
        }
        low
    }
}

/// What a delimiter says after a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// All bytes fed are part of the item (so far); send more.
    More,
    /// The item is `len` bytes long. `len` is either at least the length
    /// fed before this call, or equal to the last [`Delimiter::mark`].
    End {
        /// Item length.
        len: u64,
        /// The delimiter's verdict.
        verdict: Verdict,
    },
    /// Not an item of this type after all (only while in probation).
    Reject,
}

/// Why the bytes stopped before the delimiter ended the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The end of the scanned range (free run, partition, image).
    RangeEnd,
    /// The signature's maximum size.
    MaxSize,
    /// Another header of the same format, in a format whose files never
    /// hold their own header (see [`Format::ends_at_own_header`]).
    NextHeader,
}

impl Step {
    /// The step of a delimiter whose structure walker returned `walked`
    /// (`Ok(Some(len))` at the end, `Ok(None)` for more, `Err((at, why))`
    /// on a structure error), given whether the item is accepted by now:
    /// an error rejects a candidate still in probation and otherwise ends
    /// the item as invalid where the error is.
    pub fn from_walk(walked: Result<Option<u64>, (u64, String)>, accepted: bool) -> Step {
        match walked {
            Ok(Some(len)) => Step::End {
                len,
                verdict: Verdict::valid(),
            },
            Ok(None) => Step::More,
            Err(_) if !accepted => Step::Reject,
            Err((at, msg)) => Step::End {
                len: at,
                verdict: Verdict::new(Validation::Invalid, msg),
            },
        }
    }

    /// An item cut short before its end marker (by the end of the scanned
    /// range or its maximum size): rejected while still in probation,
    /// otherwise truncated at what was fed, with `why`.
    pub fn cut_short(accepted: bool, fed: u64, why: &str) -> Step {
        if !accepted {
            return Step::Reject;
        }
        Step::End {
            len: fed,
            verdict: Verdict::new(Validation::Truncated, why),
        }
    }
}

/// Finds where an item ends, on the scan thread.
pub trait Delimiter: Send {
    /// The next bytes of the item, in order.
    fn feed(&mut self, data: &[u8]) -> Step;

    /// No more bytes: end the item (or reject it while in probation).
    fn finish(&mut self, cut: Cut, fed: u64) -> Step;

    /// Whether the item is real (probation is over).
    fn accepted(&self) -> bool;

    /// Whether an item whose probation buffer is full, but not yet
    /// proved, should be accepted rather than dropped: its structure has
    /// held so far and only runs long before it can be proved (a JPEG's
    /// megabytes of APPn/COM segments before its frame header). If it
    /// breaks later, it ends `invalid`.
    fn outlasts_probation(&self) -> bool {
        false
    }

    /// The latest length at which the item may end, when the end can only
    /// be confirmed by looking further (PDF incremental updates, a line end
    /// after `</html>`, scalpel's REVERSE footers).
    fn mark(&self) -> Option<u64> {
        None
    }

    /// The type to record when it is only known at the end (ZIP → DOCX).
    fn final_type(&self) -> Option<(&'static str, &'static str)> {
        None
    }
}

/// Checks an item's content beside the hashers.
pub trait Verifier: Send {
    /// The next bytes of the item, in order (possibly past its final end
    /// when the delimiter looked ahead).
    fn update(&mut self, data: &[u8]);

    /// The item is `len` bytes long: a verdict, or `None` for no opinion.
    fn finish(self: Box<Self>, len: u64) -> Option<Verdict>;
}

/// The built-in formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// JPEG.
    Jpeg,
    /// PNG.
    Png,
    /// GIF.
    Gif,
    /// Windows bitmap.
    Bmp,
    /// PDF.
    Pdf,
    /// ZIP, DOCX, XLSX, PPTX.
    Zip,
    /// SQLite 3 database.
    Sqlite,
    /// RFC 5322 message.
    Eml,
    /// HTML page.
    Html,
}

impl Format {
    /// Every built-in format.
    pub const ALL: [Format; 9] = [
        Format::Jpeg,
        Format::Png,
        Format::Gif,
        Format::Bmp,
        Format::Pdf,
        Format::Zip,
        Format::Sqlite,
        Format::Eml,
        Format::Html,
    ];

    /// The type name (`carved_items.type`) and option value.
    pub fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "jpeg",
            Format::Png => "png",
            Format::Gif => "gif",
            Format::Bmp => "bmp",
            Format::Pdf => "pdf",
            Format::Zip => "zip",
            Format::Sqlite => "sqlite",
            Format::Eml => "eml",
            Format::Html => "html",
        }
    }

    /// File extension of carved files.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Jpeg => "jpg",
            Format::Png => "png",
            Format::Gif => "gif",
            Format::Bmp => "bmp",
            Format::Pdf => "pdf",
            Format::Zip => "zip",
            Format::Sqlite => "sqlite",
            Format::Eml => "eml",
            Format::Html => "html",
        }
    }

    /// Whether a header of this format inside an open item of it means the
    /// open item is cut short there. True where a file cannot hold the
    /// header raw (PNG's 8-byte signature, GIF's, PDF's `%PDF-`, which
    /// compressed or binary content does not spell): a deleted, partly
    /// overwritten file then no longer swallows the next intact one up to
    /// that one's end marker. False where nesting is normal (JPEG
    /// thumbnails, ZIP local headers, quoted e-mail, HTML in HTML) or the
    /// header is short enough to occur in data (BMP's `BM`).
    pub fn ends_at_own_header(self) -> bool {
        matches!(self, Format::Png | Format::Gif | Format::Pdf)
    }

    /// Largest item carved, in bytes: well above real files of the type,
    /// small enough that a header in noise does not write gigabytes.
    pub fn max_size(self) -> u64 {
        match self {
            Format::Jpeg | Format::Png | Format::Gif => 64 << 20,
            Format::Bmp => 256 << 20,
            Format::Pdf => 512 << 20,
            Format::Zip | Format::Sqlite => 1 << 30,
            Format::Eml => 64 << 20,
            Format::Html => 16 << 20,
        }
    }

    /// Header patterns (literal, and whether ASCII case is folded).
    pub fn headers(self) -> &'static [(&'static [u8], bool)] {
        match self {
            Format::Jpeg => &[(b"\xFF\xD8\xFF", false)],
            Format::Png => &[(b"\x89PNG\r\n\x1a\n", false)],
            Format::Gif => &[(b"GIF87a", false), (b"GIF89a", false)],
            Format::Bmp => &[(b"BM", false)],
            Format::Pdf => &[(b"%PDF-", false)],
            Format::Zip => &[(b"PK\x03\x04", false)],
            Format::Sqlite => &[(b"SQLite format 3\0", false)],
            Format::Eml => &[
                (b"Return-Path:", true),
                (b"Received:", true),
                (b"Delivered-To:", true),
                (b"Message-ID:", true),
                (b"From:", true),
                (b"Date:", true),
                (b"MIME-Version:", true),
            ],
            Format::Html => &[(b"<!DOCTYPE html", true), (b"<html", true)],
        }
    }

    /// A new delimiter for an item starting with a header of this format.
    pub fn delimiter(self) -> Box<dyn Delimiter> {
        match self {
            Format::Jpeg => Box::new(jpeg::JpegDelimiter::new()),
            Format::Png => Box::new(png::PngDelimiter::new()),
            Format::Gif => Box::new(gif::GifDelimiter::new()),
            Format::Bmp => Box::new(bmp::BmpDelimiter::new()),
            Format::Pdf => Box::new(pdf::PdfDelimiter::new()),
            Format::Zip => Box::new(zip::ZipDelimiter::new()),
            Format::Sqlite => Box::new(sqlite::SqliteDelimiter::new()),
            Format::Eml => Box::new(text::EmlDelimiter::new()),
            Format::Html => Box::new(text::HtmlDelimiter::new()),
        }
    }

    /// A new verifier, for formats with checks beyond their structure.
    pub fn verifier(self) -> Option<Box<dyn Verifier>> {
        match self {
            Format::Jpeg => Some(Box::new(jpeg::JpegVerifier::new())),
            Format::Png => Some(Box::new(png::PngVerifier::new())),
            Format::Zip => Some(Box::new(zip::ZipVerifier::new())),
            Format::Sqlite => Some(Box::new(sqlite::SqliteVerifier::new())),
            Format::Pdf => Some(Box::new(pdf::PdfVerifier::new())),
            Format::Gif => Some(Box::new(gif::GifVerifier::new())),
            Format::Bmp | Format::Eml | Format::Html => None,
        }
    }

    /// The format of a type name, if built in.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// The format whose verifier can check content identified as `kind`
    /// by the engine's signature analysis (meta-carved content).
    pub fn from_identified(kind: &str) -> Option<Format> {
        match kind {
            "jpeg" => Some(Format::Jpeg),
            "png" => Some(Format::Png),
            "gif" => Some(Format::Gif),
            "bmp" => Some(Format::Bmp),
            "pdf" => Some(Format::Pdf),
            "zip" | "ooxml" => Some(Format::Zip),
            "sqlite" => Some(Format::Sqlite),
            "email" => Some(Format::Eml),
            "html" => Some(Format::Html),
            _ => None,
        }
    }
}

/// Collects a small fixed-size structure that may arrive split across
/// feeds.
#[derive(Debug, Default)]
pub(crate) struct Gather {
    buf: Vec<u8>,
    want: usize,
}

impl Gather {
    /// Start collecting `want` bytes.
    pub(crate) fn start(&mut self, want: usize) {
        self.buf.clear();
        self.want = want;
    }

    /// Take what is needed from `data[*at..]`, advancing `at`; the whole
    /// structure once complete.
    pub(crate) fn fill(&mut self, data: &[u8], at: &mut usize) -> Option<&[u8]> {
        let need = self.want.saturating_sub(self.buf.len());
        let take = need.min(data.len().saturating_sub(*at));
        self.buf.extend_from_slice(&data[*at..*at + take]);
        *at += take;
        (self.buf.len() >= self.want).then_some(&self.buf[..])
    }
}

/// Big-endian u16 at `o` (callers check the length first).
pub(crate) fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// Big-endian u32 at `o`.
pub(crate) fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Little-endian u16 at `o`.
pub(crate) fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// Little-endian u32 at `o`.
pub(crate) fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Little-endian u64 at `o`.
pub(crate) fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// The last bytes seen before the current feed, for looking back across
/// feed boundaries.
#[derive(Debug)]
pub(crate) struct Recent {
    bytes: Vec<u8>,
    keep: usize,
}

impl Recent {
    /// Remember up to `keep` bytes.
    pub(crate) fn new(keep: usize) -> Self {
        Recent {
            bytes: Vec::with_capacity(keep),
            keep,
        }
    }

    /// Up to `keep` bytes ending just before `data[end]`: remembered bytes
    /// followed by `data[..end]`.
    pub(crate) fn before(&self, data: &[u8], end: usize) -> Vec<u8> {
        let from_data = &data[..end.min(data.len())];
        let mut v = Vec::with_capacity(self.keep * 2);
        if from_data.len() < self.keep {
            let need = self.keep - from_data.len();
            let have = self.bytes.len().min(need);
            v.extend_from_slice(&self.bytes[self.bytes.len() - have..]);
        }
        let take = from_data.len().min(self.keep);
        v.extend_from_slice(&from_data[from_data.len() - take..]);
        v
    }

    /// Remember `data` (its last `keep` bytes).
    pub(crate) fn push(&mut self, data: &[u8]) {
        if data.len() >= self.keep {
            self.bytes.clear();
            self.bytes
                .extend_from_slice(&data[data.len() - self.keep..]);
        } else {
            self.bytes.extend_from_slice(data);
            let excess = self.bytes.len().saturating_sub(self.keep);
            self.bytes.drain(..excess);
        }
    }
}

/// A streaming search for one literal needle across feeds: remembers the
/// tail of the previous feed so a needle split between two is found.
#[derive(Debug)]
pub(crate) struct StreamFind {
    finder: memchr::memmem::Finder<'static>,
    carry: Vec<u8>,
}

impl StreamFind {
    /// Search for `needle`.
    pub(crate) fn new(needle: &'static [u8]) -> Self {
        StreamFind {
            finder: memchr::memmem::Finder::new(needle),
            carry: Vec::new(),
        }
    }

    /// Length of the needle.
    pub(crate) fn len(&self) -> usize {
        self.finder.needle().len()
    }

    /// Ends of every occurrence within `carry + data`, as offsets relative
    /// to `data[0]` (an occurrence straddling the previous feed ends at a
    /// small positive offset). `data` is then remembered for the next call.
    pub(crate) fn ends(&mut self, data: &[u8], mut found: impl FnMut(usize)) {
        let n = self.len();
        let keep = n.saturating_sub(1);
        if !self.carry.is_empty() {
            let mut joint = std::mem::take(&mut self.carry);
            let from_data = keep.min(data.len());
            joint.extend_from_slice(&data[..from_data]);
            let carried = joint.len() - from_data;
            for p in self.finder.find_iter(&joint) {
                // Only occurrences that straddle into `data`.
                if p < carried && p + n > carried {
                    found(p + n - carried);
                }
            }
            joint.truncate(carried);
            self.carry = joint;
        }
        for p in self.finder.find_iter(data) {
            found(p + n);
        }
        // Keep the last `keep` bytes seen (from the old carry and data).
        if data.len() >= keep {
            self.carry.clear();
            self.carry.extend_from_slice(&data[data.len() - keep..]);
        } else {
            self.carry.extend_from_slice(data);
            let excess = self.carry.len().saturating_sub(keep);
            self.carry.drain(..excess);
        }
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    /// Feed `data` in chunks of `chunk` bytes; the end step and the bytes
    /// fed before it, or the step at `finish` with a range end.
    pub(crate) fn delimit(d: &mut dyn Delimiter, data: &[u8], chunk: usize) -> (Step, bool) {
        let mut fed = 0u64;
        for c in data.chunks(chunk.max(1)) {
            match d.feed(c) {
                Step::More => fed += c.len() as u64,
                other => return (other, d.accepted()),
            }
        }
        (d.finish(Cut::RangeEnd, fed), d.accepted())
    }

    /// The length and validation a delimiter gives `data` fed in chunks.
    pub(crate) fn end_of(d: &mut dyn Delimiter, data: &[u8], chunk: usize) -> (u64, Validation) {
        match delimit(d, data, chunk).0 {
            Step::End { len, verdict } => (len, verdict.validation),
            other => panic!("expected an end, got {other:?}"),
        }
    }

    /// A verifier's verdict on `data` fed in chunks.
    pub(crate) fn verify(mut v: Box<dyn Verifier>, data: &[u8], chunk: usize) -> Option<Verdict> {
        for c in data.chunks(chunk.max(1)) {
            v.update(c);
        }
        v.finish(data.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_find_sees_needles_across_feeds() {
        let hay = b"..%%EOF....%%EOF%%EOF.";
        for chunk in 1..hay.len() + 1 {
            let mut f = StreamFind::new(b"%%EOF");
            let mut ends = Vec::new();
            let mut base = 0usize;
            for c in hay.chunks(chunk) {
                f.ends(c, |e| ends.push(base + e));
                base += c.len();
            }
            assert_eq!(ends, vec![7, 16, 21], "chunk {chunk}");
        }
    }

    #[test]
    fn verdicts_only_go_down() {
        let v = Verdict::valid().lower(Some(Verdict::new(Validation::Invalid, "crc")));
        assert_eq!(v.validation, Validation::Invalid);
        assert_eq!(v.note.as_deref(), Some("crc"));
        let v = Verdict::new(Validation::Truncated, "cut").lower(Some(Verdict::valid()));
        assert_eq!(v.validation, Validation::Truncated);
        assert_eq!(Verdict::valid().lower(None), Verdict::valid());
    }
}
