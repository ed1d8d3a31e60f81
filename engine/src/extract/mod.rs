//! Content extraction: from an item's bytes to the text that is indexed
//! (the index stage) and to the members of compound items (file-hash's
//! expansion). One room for every format's parser, which no stage owns.
//!
//! The format is found from the bytes (never the name): ZIP (and OOXML
//! inside it), gzip, PDF, JPEG/PNG/GIF comments, e-mail (RFC 5322/MIME, mbox),
//! HTML, plain text in UTF-8, UTF-16 (with or without BOM) or Latin-1
//! (Windows-1252), and otherwise printable strings of a binary item.
//! Containers recurse: e-mail attachments, ZIP members, gzip content and
//! their members.
//!
//! Memory is bounded per item: structured formats are parsed from a buffer
//! of at most [`Limits::max_item_bytes`]; every byte produced by
//! decompression or transfer decoding (Flate, ZIP members, gzip, base64,
//! quoted-printable) counts against [`Limits::max_expansion`], and nesting
//! stops at [`Limits::max_depth`], so a zip bomb or a recursive archive
//! costs a bounded amount and is recorded as a problem. Plain text and
//! binary strings are decoded as a stream ([`StreamDecoder`]), so their
//! size is not limited at all.

mod gzip;
mod markup;
mod media;
mod mime;
mod pdf;
mod sqlite;
mod text;
mod zipx;

pub use text::{StreamDecoder, TextEncoding, classify};

/// Where extracted text goes (the stage's document builder, a test's
/// string). Text arrives in pieces; a piece never splits a character.
pub trait Sink {
    /// Append text.
    fn push(&mut self, text: &str);
}

impl Sink for String {
    fn push(&mut self, text: &str) {
        self.push_str(text);
    }
}

/// Caps that bound the work and memory spent on one item.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest buffer a structured format is parsed from (the item itself
    /// or a member/attachment inside it).
    pub max_item_bytes: usize,
    /// Bytes all decompression and decoding inside one item may produce.
    pub max_expansion: u64,
    /// Deepest nesting of containers (attachment in a message in a ZIP...).
    pub max_depth: u32,
    /// Extract printable strings from binary content.
    pub binary_strings: bool,
    /// Shortest run of printable characters taken as a string.
    pub min_string: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_item_bytes: 32 << 20,
            max_expansion: 256 << 20,
            max_depth: 6,
            binary_strings: true,
            min_string: 4,
        }
    }
}

/// What was found in an item, by format; for the stage summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// Plain text.
    Text,
    /// HTML.
    Html,
    /// E-mail message or mailbox.
    Mail,
    /// ZIP archive.
    Zip,
    /// Word, Excel or PowerPoint (OOXML).
    Ooxml,
    /// gzip-compressed content (decompressed and extracted in turn).
    Gzip,
    /// PDF.
    Pdf,
    /// JPEG, PNG or GIF (comments and text chunks).
    Image,
    /// SQLite database (text values of its records).
    Sqlite,
    /// Printable strings of a binary item.
    Strings,
}

impl Format {
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Html => "html",
            Format::Mail => "mail",
            Format::Zip => "zip",
            Format::Ooxml => "ooxml",
            Format::Gzip => "gzip",
            Format::Pdf => "pdf",
            Format::Image => "image",
            Format::Sqlite => "sqlite",
            Format::Strings => "strings",
        }
    }

    /// Whether the format is parsed structurally (its content is decoded,
    /// so an entropy test says nothing about whether it holds text).
    pub fn structured(self) -> bool {
        !matches!(self, Format::Text | Format::Strings)
    }
}

/// The format of an item from its first bytes.
pub fn sniff(head: &[u8]) -> Format {
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Format::Zip;
    }
    if gzip::is_gzip(head) {
        return Format::Gzip;
    }
    if memchr::memmem::find(&head[..head.len().min(1024)], b"%PDF-").is_some() {
        return Format::Pdf;
    }
    if media::is_image(head) {
        return Format::Image;
    }
    if sqlite::is_sqlite(head) {
        return Format::Sqlite;
    }
    match classify(head) {
        None => Format::Strings,
        Some(encoding) => {
            if encoding.is_byte_oriented() {
                if mime::looks_like_mail(head) {
                    return Format::Mail;
                }
                if markup::looks_like_html(head) {
                    return Format::Html;
                }
            }
            Format::Text
        }
    }
}

/// A member of a compound item as extraction meets it: a ZIP or OOXML
/// member, a message of a mailbox, an e-mail attachment.
#[derive(Debug, Clone, Copy)]
pub struct Member<'m> {
    /// What it came out of: `zip`, `ooxml`, `mbox` or `mail`.
    pub container: &'static str,
    /// Its names from the item down, `/`-joined.
    pub path: &'m str,
    /// Its own name.
    pub name: &'m str,
    /// Its bytes (decoded).
    pub data: &'m [u8],
    /// Whether `data` is all of it (not cut at a cap, nor broken off by
    /// a read error).
    pub complete: bool,
    /// How deep it is: 1 for a member of the item, 2 for a member of
    /// that member...
    pub depth: usize,
}

/// Extraction of one item: its caps, what is left of them, and the
/// problems met (recorded by the stage as processing errors).
pub struct Extraction<'a> {
    limits: &'a Limits,
    sink: &'a mut dyn Sink,
    /// Told of every member met (compound-file expansion), if set.
    members: Option<&'a mut dyn FnMut(Member<'_>)>,
    /// Names of the members being extracted, outermost first.
    member_path: Vec<String>,
    /// Whether the last [`Self::read_member`] gave less than the member.
    last_member_cut: bool,
    expansion_left: u64,
    expansion_hit: bool,
    depth_hit: bool,
    /// Problems, in the order met.
    pub problems: Vec<String>,
    /// Text characters emitted (bytes of UTF-8).
    pub text_bytes: u64,
}

/// Problems kept per item; further ones are counted in one last line.
const MAX_PROBLEMS: usize = 16;

impl<'a> Extraction<'a> {
    /// Start extracting into `sink`.
    pub fn new(limits: &'a Limits, sink: &'a mut dyn Sink) -> Self {
        Extraction {
            limits,
            sink,
            expansion_left: limits.max_expansion,
            expansion_hit: false,
            depth_hit: false,
            problems: Vec::new(),
            text_bytes: 0,
            members: None,
            member_path: Vec::new(),
            last_member_cut: false,
        }
    }

    /// Start extracting into `sink`, telling `members` of every member of
    /// a compound item (all of an OOXML document's parts, not only those
    /// holding text).
    pub fn with_members(
        limits: &'a Limits,
        sink: &'a mut dyn Sink,
        members: &'a mut dyn FnMut(Member<'_>),
    ) -> Self {
        Extraction {
            members: Some(members),
            ..Extraction::new(limits, sink)
        }
    }

    /// Whether members are being listed.
    pub fn lists_members(&self) -> bool {
        self.members.is_some()
    }

    /// A member begins: tell the listener, and name what is met inside it
    /// after it until [`Self::leave_member`].
    pub fn enter_member(
        &mut self,
        container: &'static str,
        name: &str,
        data: &[u8],
        complete: bool,
    ) {
        // Without a listener (text extraction alone) nothing is kept.
        let Some(listener) = self.members.as_mut() else {
            return;
        };
        self.member_path.push(name.to_string());
        let path = self.member_path.join("/");
        listener(Member {
            container,
            path: &path,
            name,
            data,
            complete,
            depth: self.member_path.len(),
        });
    }

    /// Whether the last [`Self::read_member`] gave less than the whole
    /// member (cut at the cap, or a read error).
    pub fn last_member_cut(&self) -> bool {
        self.last_member_cut
    }

    /// The member entered last has been extracted.
    pub fn leave_member(&mut self) {
        self.member_path.pop();
    }

    /// The caps in force.
    pub fn limits(&self) -> &Limits {
        self.limits
    }

    /// Emit text.
    pub fn emit(&mut self, text: &str) {
        if !text.is_empty() {
            self.text_bytes += text.len() as u64;
            self.sink.push(text);
        }
    }

    /// Emit a separator so words of two pieces never join.
    pub fn separate(&mut self) {
        self.emit("\n");
    }

    /// Note a problem with the item.
    pub fn problem(&mut self, message: impl Into<String>) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(message.into());
        } else if self.problems.len() == MAX_PROBLEMS {
            self.problems
                .push("further problems in this item were not kept".into());
        }
    }

    /// How many more decoded bytes may be produced (0 once the cap is hit).
    pub fn expansion_left(&self) -> u64 {
        self.expansion_left
    }

    /// Count `n` decoded bytes against the expansion cap; false (and a
    /// recorded problem, once) when the cap is exceeded.
    pub fn expand(&mut self, n: u64) -> bool {
        if n > self.expansion_left {
            self.expansion_left = 0;
            if !self.expansion_hit {
                self.expansion_hit = true;
                let cap = self.limits.max_expansion;
                self.problem(format!(
                    "decompressed/decoded content exceeds the cap of {cap} bytes (possible decompression bomb); the rest is not extracted"
                ));
            }
            return false;
        }
        self.expansion_left -= n;
        true
    }

    /// Whether the expansion cap was hit.
    pub fn expansion_capped(&self) -> bool {
        self.expansion_hit
    }

    /// The largest buffer a member at nesting `depth` may be read into:
    /// halved per level, so the buffers held along a nesting chain add up
    /// to at most twice [`Limits::max_item_bytes`].
    pub fn member_cap(&self, depth: u32) -> usize {
        let cap = self.limits.max_item_bytes >> depth.min(30);
        cap.min(usize::try_from(self.expansion_left).unwrap_or(usize::MAX))
    }

    /// Decode a member (ZIP member, gzip content, PDF stream) at nesting
    /// `depth` into a buffer of at most [`Self::member_cap`] bytes, counted
    /// against the expansion cap. A read error (broken deflate data, a CRC
    /// mismatch) and a member larger than the cap are recorded with `what`
    /// named; what was decoded before either is returned. `None` once the
    /// expansion cap is exhausted.
    pub fn read_member(
        &mut self,
        reader: &mut dyn std::io::Read,
        depth: u32,
        what: &str,
    ) -> Option<Vec<u8>> {
        let cap = self.member_cap(depth);
        let mut buf = Vec::new();
        let read = std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut *reader, cap as u64 + 1),
            &mut buf,
        );
        self.last_member_cut = read.is_err() || buf.len() > cap;
        if let Err(e) = read {
            self.problem(format!(
                "broken {what}: {e}; text of its intact part is kept"
            ));
        }
        let over = buf.len() > cap;
        buf.truncate(cap);
        if !self.expand(buf.len() as u64) {
            return None;
        }
        if over {
            self.problem(format!(
                "{what} inflates beyond the {cap}-byte member cap (possible decompression bomb); only its start is extracted"
            ));
        }
        Some(buf)
    }

    /// Extract an in-memory item (or member) at nesting `depth`; returns the
    /// format found.
    pub fn extract(&mut self, data: &[u8], depth: u32) -> Format {
        if depth > self.limits.max_depth {
            if !self.depth_hit {
                self.depth_hit = true;
                let max = self.limits.max_depth;
                self.problem(format!(
                    "containers nested deeper than {max} levels (recursive archive?); inner content not extracted"
                ));
            }
            return Format::Strings;
        }
        let format = sniff(data);
        match format {
            Format::Zip | Format::Ooxml => {
                let f = zipx::extract(self, data, depth);
                self.separate();
                f
            }
            Format::Gzip => {
                gzip::extract(self, data, depth);
                self.separate();
                Format::Gzip
            }
            Format::Pdf => {
                pdf::extract(self, data, depth);
                self.separate();
                Format::Pdf
            }
            Format::Image => {
                media::extract(self, data, depth);
                self.separate();
                Format::Image
            }
            Format::Sqlite => {
                sqlite::extract(self, data);
                self.separate();
                Format::Sqlite
            }
            Format::Mail => {
                mime::extract(self, data, depth);
                self.separate();
                Format::Mail
            }
            Format::Html => {
                let text = text::decode_all(self, data);
                markup::html_to_text(self, &text);
                self.separate();
                Format::Html
            }
            Format::Text | Format::Strings => {
                let mut decoder = StreamDecoder::new(classify(data), self.limits);
                decoder.feed(self, data);
                decoder.finish(self);
                self.separate();
                format
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(data: &[u8]) -> (String, Vec<String>, Format) {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        let f = x.extract(data, 0);
        let problems = x.problems.clone();
        (out, problems, f)
    }

    #[test]
    fn formats_are_sniffed_from_content() {
        assert_eq!(sniff(b"PK\x03\x04rest"), Format::Zip);
        assert_eq!(sniff(b"%PDF-1.4\n"), Format::Pdf);
        assert_eq!(sniff(b"\x1f\x8b\x08\0\0\0\0\0"), Format::Gzip);
        assert_eq!(sniff(b"\xFF\xD8\xFF\xE0"), Format::Image);
        assert_eq!(sniff(b"hello world, plain text\n"), Format::Text);
        assert_eq!(
            sniff(b"<!DOCTYPE html>\n<html><body>x</body></html>"),
            Format::Html
        );
        assert_eq!(
            sniff(b"From: a@b.example\r\nTo: c@d.example\r\nSubject: hi\r\n\r\nbody"),
            Format::Mail
        );
        assert_eq!(
            sniff(&[0u8, 1, 2, 3, 200, 201, 7, 8, 0, 0]),
            Format::Strings
        );
    }

    #[test]
    fn nothing_panics_on_garbage_of_every_format() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let heads: [&[u8]; 9] = [
            b"PK\x03\x04",
            b"\x1f\x8b\x08\0\0\0\0\0\0\x03",
            b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode /Length 99 >>\nstream\n",
            b"\xFF\xD8\xFF\xFE\x00\x10",
            b"\x89PNG\r\n\x1a\n",
            b"GIF89a",
            b"From: x@y.example\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n",
            b"<html><body><script>",
            b"\xFF\xFE",
        ];
        for head in heads {
            for len in [0usize, 1, 7, 100, 3000] {
                let mut data = head.to_vec();
                for _ in 0..len {
                    data.push(next() as u8);
                }
                let _ = run(&data);
                // Truncations of a valid prefix too.
                for cut in 0..data.len().min(40) {
                    let _ = run(&data[..cut]);
                }
            }
        }
    }
}
