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

/// Checks on the bytes just before a header hit, for formats whose header
/// words also occur inside their own items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// None.
    Any,
    /// `<html` right after a `<!DOCTYPE html>` belongs to that page.
    HtmlRoot,
    /// A header field right after another header line is inside a header
    /// block, not the start of a message.
    MessageStart,
}

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

/// A header pattern of a format.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// The literal bytes.
    pub bytes: &'static [u8],
    /// Whether ASCII case is folded.
    pub fold: bool,
    /// Where in the surrounding bytes the header may start an item.
    pub context: Context,
}

impl Header {
    /// Exact bytes, anywhere.
    pub const fn exact(bytes: &'static [u8]) -> Header {
        Header {
            bytes,
            fold: false,
            context: Context::Any,
        }
    }

    /// Bytes in any ASCII case, anywhere.
    pub const fn folded(bytes: &'static [u8]) -> Header {
        Header {
            bytes,
            fold: true,
            context: Context::Any,
        }
    }

    /// The same header, only where `context` allows.
    pub const fn within(self, context: Context) -> Header {
        Header { context, ..self }
    }
}

/// Everything the carver knows of one built-in format: one row each in
/// [`FORMATS`], defined in the format's own file (`pub const SPEC`).
pub struct FormatSpec {
    /// The type name (`carved_items.type`) and option value.
    pub name: &'static str,
    /// File extension of carved files.
    pub extension: &'static str,
    /// Header patterns.
    pub headers: &'static [Header],
    /// Largest item carved, in bytes: well above real files of the type,
    /// small enough that a header in noise does not write gigabytes.
    pub max_size: u64,
    /// Whether a header of this format inside an open item of it means the
    /// open item is cut short there: true where a file cannot hold the
    /// header raw (PNG's 8-byte signature, GIF's, PDF's `%PDF-`, which
    /// compressed or binary content does not spell), so a deleted, partly
    /// overwritten file no longer swallows the next intact one; false where
    /// nesting is normal (JPEG thumbnails, ZIP local headers, quoted
    /// e-mail, HTML in HTML) or the header is short enough to occur in
    /// data (BMP's `BM`).
    pub ends_at_own_header: bool,
    /// The engine's signature-analysis kinds (`signature::identify`) whose
    /// content this format's verifier can check (meta-carved content).
    pub identified_as: &'static [&'static str],
    /// A new delimiter for an item starting with one of the headers.
    pub delimiter: fn() -> Box<dyn Delimiter>,
    /// A new verifier, for formats with checks beyond their structure.
    pub verifier: Option<fn() -> Box<dyn Verifier>>,
}

impl std::fmt::Debug for FormatSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormatSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every built-in format, in header-family order. Adding a format: its
/// file with its `SPEC`, a `pub mod` line above, and a row here.
pub const FORMATS: &[&FormatSpec] = &[
    &jpeg::SPEC,
    &png::SPEC,
    &gif::SPEC,
    &bmp::SPEC,
    &pdf::SPEC,
    &zip::SPEC,
    &sqlite::SPEC,
    &text::EML_SPEC,
    &text::HTML_SPEC,
];

/// A built-in format: a row of [`FORMATS`].
#[derive(Clone, Copy)]
pub struct Format(&'static FormatSpec);

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl std::hash::Hash for Format {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl Format {
    /// Every built-in format, in [`FORMATS`] order.
    pub fn all() -> Vec<Format> {
        FORMATS.iter().map(|s| Format(s)).collect()
    }

    /// The type name (`carved_items.type`) and option value.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// File extension of carved files.
    pub fn extension(self) -> &'static str {
        self.0.extension
    }

    /// See [`FormatSpec::ends_at_own_header`].
    pub fn ends_at_own_header(self) -> bool {
        self.0.ends_at_own_header
    }

    /// See [`FormatSpec::max_size`].
    pub fn max_size(self) -> u64 {
        self.0.max_size
    }

    /// Header patterns.
    pub fn headers(self) -> &'static [Header] {
        self.0.headers
    }

    /// A new delimiter for an item starting with a header of this format.
    pub fn delimiter(self) -> Box<dyn Delimiter> {
        (self.0.delimiter)()
    }

    /// A new verifier, for formats with checks beyond their structure.
    pub fn verifier(self) -> Option<Box<dyn Verifier>> {
        self.0.verifier.map(|v| v())
    }

    /// The format of a type name, if built in.
    pub fn from_name(name: &str) -> Option<Format> {
        FORMATS.iter().find(|f| f.name == name).map(|s| Format(s))
    }

    /// The format whose verifier can check content identified as `kind`
    /// by the engine's signature analysis (meta-carved content).
    pub fn from_identified(kind: &str) -> Option<Format> {
        FORMATS
            .iter()
            .find(|f| f.identified_as.contains(&kind))
            .map(|s| Format(s))
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
    fn every_format_is_one_documented_row() {
        let schema = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema.md"),
        )
        .unwrap();
        let type_row = schema
            .lines()
            .find(|l| l.starts_with("| `type` |"))
            .expect("docs/schema.md documents carved_items.type");
        let mut names = std::collections::HashSet::new();
        for f in Format::all() {
            assert!(names.insert(f.name()), "{} twice", f.name());
            assert!(!f.headers().is_empty(), "{}", f.name());
            assert!(f.max_size() > 0);
            assert_eq!(Format::from_name(f.name()), Some(f));
            assert!(
                type_row.contains(&format!("`{}`", f.name())),
                "`{}` is not in docs/schema.md's carved_items.type row",
                f.name()
            );
        }
        assert_eq!(
            Format::from_identified("ooxml").map(Format::name),
            Some("zip")
        );
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
