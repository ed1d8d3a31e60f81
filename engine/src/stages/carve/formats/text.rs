//! Text formats: HTML pages and RFC 5322 messages.
//!
//! Both must be text throughout (no NUL or other C0 controls besides tab,
//! line feed, form feed and carriage return): where binary bytes start,
//! the text has been cut by something else. An HTML page ends after
//! `</html>` and its line end; a MIME multipart message after the closing
//! delimiter of the boundary its header declares, and each base64 part
//! must be base64. A single-part message has no end marker: it runs to
//! where the text stops and is `unchecked`.

use super::{Cut, Delimiter, Step, Validation, Verdict};

use super::{Context, FormatSpec, Header};

/// The e-mail format's row in [`super::FORMATS`]: an RFC 5322 message
/// starts at one of its header fields, but not inside a header block.
pub const EML_SPEC: FormatSpec = FormatSpec {
    name: "eml",
    extension: "eml",
    headers: &[
        Header::folded(b"Return-Path:").within(Context::MessageStart),
        Header::folded(b"Received:").within(Context::MessageStart),
        Header::folded(b"Delivered-To:").within(Context::MessageStart),
        Header::folded(b"Message-ID:").within(Context::MessageStart),
        Header::folded(b"From:").within(Context::MessageStart),
        Header::folded(b"Date:").within(Context::MessageStart),
        Header::folded(b"MIME-Version:").within(Context::MessageStart),
    ],
    max_size: 64 << 20,
    ends_at_own_header: false,
    identified_as: &["email"],
    delimiter: || Box::new(EmlDelimiter::new()),
    verifier: None,
};

/// The HTML format's row: `<html` right after a doctype belongs to it.
pub const HTML_SPEC: FormatSpec = FormatSpec {
    name: "html",
    extension: "html",
    headers: &[
        Header::folded(b"<!DOCTYPE html"),
        Header::folded(b"<html").within(Context::HtmlRoot),
    ],
    max_size: 16 << 20,
    ends_at_own_header: false,
    identified_as: &["html"],
    delimiter: || Box::new(HtmlDelimiter::new()),
    verifier: None,
};

/// Whether a byte can appear in text.
const fn text_table() -> [bool; 256] {
    let mut t = [true; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = matches!(b, 0x09 | 0x0A | 0x0C | 0x0D);
        b += 1;
    }
    t[0x7F] = false;
    t
}

static TEXT: [bool; 256] = text_table();

/// Bytes judged at once by the block tests below: a fixed-size fold that
/// the compiler turns into a few vector compares, where a byte-by-byte
/// search branches on every byte (the e-mail delimiter's body scan was
/// 4% of a whole-image carve).
const BLOCK: usize = 32;

/// Whether a byte is printable: text, and neither a line end nor one of
/// the other allowed controls.
fn printable(c: u8) -> bool {
    c >= 0x20 && c != 0x7F
}

/// The length of the leading whole blocks that hold only bytes passing
/// `plain`.
fn plain_blocks(data: &[u8], plain: impl Fn(u8) -> bool) -> usize {
    data.chunks_exact(BLOCK)
        .take_while(|block| block.iter().fold(true, |ok, &c| ok & plain(c)))
        .count()
        * BLOCK
}

/// Offset of the first byte that cannot be text.
fn first_binary(data: &[u8]) -> Option<usize> {
    let skip = plain_blocks(data, |c| TEXT[usize::from(c)]);
    data[skip..]
        .iter()
        .position(|&b| !TEXT[usize::from(b)])
        .map(|p| skip + p)
}

/// Offset of the first line feed or byte that cannot be text.
fn first_line_end_or_binary(data: &[u8]) -> Option<usize> {
    let skip = plain_blocks(data, printable);
    data[skip..]
        .iter()
        .position(|&c| c == b'\n' || !TEXT[usize::from(c)])
        .map(|p| skip + p)
}

/// Bytes of text an HTML candidate must show before it is believed.
const HTML_PROBATION: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HtmlState {
    Body,
    /// After `</html>`: a CR and/or LF may follow.
    AfterClose,
}

/// The HTML delimiter.
#[derive(Debug)]
pub struct HtmlDelimiter {
    state: HtmlState,
    pos: u64,
    /// The last bytes seen, lower-cased, for tags split across feeds.
    tail: Vec<u8>,
    mark: Option<u64>,
    /// The page's own `<html` tag was met.
    root: bool,
}

impl HtmlDelimiter {
    /// A delimiter for an item starting at `<!DOCTYPE html` or `<html`.
    pub fn new() -> Self {
        HtmlDelimiter {
            state: HtmlState::Body,
            pos: 0,
            tail: Vec::new(),
            mark: None,
            root: false,
        }
    }
}

impl Default for HtmlDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

const CLOSE: &[u8] = b"</html>";
/// Tags that start a document: meeting one inside a page means another
/// page's bytes follow this one's.
const STARTS: [&[u8]; 2] = [b"<!doctype html", b"<html"];

impl Delimiter for HtmlDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let mut i = 0usize;
        if self.state == HtmlState::AfterClose {
            let mark = self.mark.unwrap_or(self.pos);
            while i < data.len() {
                let at = self.pos + i as u64;
                match data[i] {
                    b'\r' if at == mark => {
                        self.mark = Some(at + 1);
                        i += 1;
                    }
                    b'\n' => {
                        return Step::End {
                            len: at + 1,
                            verdict: Verdict::valid(),
                        };
                    }
                    _ => break,
                }
            }
            if i < data.len() {
                return Step::End {
                    len: self.mark.unwrap_or(mark),
                    verdict: Verdict::valid(),
                };
            }
            self.pos += i as u64;
            return Step::More;
        }
        let binary = first_binary(data);
        let text = &data[..binary.unwrap_or(data.len())];
        // Tags, searched lower-cased over the tail of the last feed plus
        // this text.
        let keep = self.tail.len();
        let mut joint = std::mem::take(&mut self.tail);
        joint.extend(text.iter().map(u8::to_ascii_lowercase));
        let mut k = 0;
        while let Some(p) = memchr::memchr(b'<', &joint[k..]) {
            let at_joint = k + p;
            let abs = self.pos + at_joint as u64 - keep as u64;
            let rest = &joint[at_joint..];
            if rest.starts_with(CLOSE) && at_joint + CLOSE.len() > keep {
                let end = abs + CLOSE.len() as u64;
                self.mark = Some(end);
                self.state = HtmlState::AfterClose;
                let used = usize::try_from(end - self.pos).unwrap_or(data.len());
                self.pos = end;
                return match self.feed(&data[used.min(data.len())..]) {
                    Step::More => Step::More,
                    other => other,
                };
            }
            if let Some(s) = STARTS.iter().find(|s| rest.starts_with(s))
                && at_joint + s.len() > keep
            {
                // The page's own doctype (at its start) and first <html> tag
                // are its root; any further one starts another page.
                let own = if s.starts_with(b"<!") {
                    abs == 0
                } else {
                    !std::mem::replace(&mut self.root, true)
                };
                if !own {
                    return self.cut(abs, "another HTML document starts inside this one");
                }
            }
            k = at_joint + 1;
        }
        if let Some(b) = binary {
            return self.cut(self.pos + b as u64, "binary data before </html>");
        }
        self.pos += data.len() as u64;
        let tail_from = joint.len().saturating_sub(16);
        joint.drain(..tail_from);
        self.tail = joint;
        Step::More
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        if let Some(len) = self.mark {
            return Step::End {
                len,
                verdict: Verdict::valid(),
            };
        }
        if !self.accepted() {
            return Step::Reject;
        }
        Step::End {
            len: fed,
            verdict: Verdict::new(
                Validation::Truncated,
                match cut {
                    Cut::RangeEnd | Cut::NextHeader => "the scanned range ends before </html>",
                    Cut::MaxSize => "no </html> within the maximum size",
                },
            ),
        }
    }

    fn accepted(&self) -> bool {
        self.pos >= HTML_PROBATION || self.mark.is_some()
    }

    fn mark(&self) -> Option<u64> {
        self.mark
    }
}

impl HtmlDelimiter {
    fn cut(&mut self, at: u64, why: &str) -> Step {
        if !self.accepted() && at < HTML_PROBATION {
            return Step::Reject;
        }
        Step::End {
            len: at,
            verdict: Verdict::new(Validation::Invalid, why),
        }
    }
}

/// Longest header line accepted (RFC 5322 allows 998 characters).
const MAX_HEADER_LINE: usize = 998;
/// Longest header block accepted.
const MAX_HEADER: usize = 64 << 10;

/// Header fields that identify a message.
const KNOWN_FIELDS: [&str; 12] = [
    "from",
    "to",
    "cc",
    "date",
    "subject",
    "message-id",
    "return-path",
    "received",
    "delivered-to",
    "mime-version",
    "content-type",
    "reply-to",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum MailState {
    Header,
    /// Body of a multipart message: looking for `--boundary--`.
    Body,
    /// After the closing delimiter: its line end.
    AfterClose,
    /// Single-part body: runs while the text does.
    Plain,
}

/// The RFC 5322 delimiter.
#[derive(Debug)]
pub struct EmlDelimiter {
    state: MailState,
    pos: u64,
    line: Vec<u8>,
    /// Unfolded header fields seen (lower-cased names) and the last one's
    /// value, for continuation lines.
    fields: Vec<(String, String)>,
    known: u32,
    boundary: Option<Vec<u8>>,
    /// Current body line (for delimiter and base64 checks), capped.
    body_line: Vec<u8>,
    body_line_long: bool,
    /// Whether the current part's content is base64 (from its headers).
    part_base64: bool,
    /// Inside a part's header block.
    part_header: bool,
    mark: Option<u64>,
    accepted: bool,
    problem: Option<(u64, String)>,
}

impl EmlDelimiter {
    /// A delimiter for an item starting at a header field name.
    pub fn new() -> Self {
        EmlDelimiter {
            state: MailState::Header,
            pos: 0,
            line: Vec::new(),
            fields: Vec::new(),
            known: 0,
            boundary: None,
            body_line: Vec::new(),
            body_line_long: false,
            part_base64: false,
            part_header: false,
            mark: None,
            accepted: false,
            problem: None,
        }
    }

    /// One complete header line (without its line end). `Err` rejects.
    fn header_line(&mut self, line: &[u8]) -> Result<bool, String> {
        if line.is_empty() {
            // End of the header block.
            let has_origin = self
                .fields
                .iter()
                .any(|(n, _)| n == "from" || n == "date" || n == "received" || n == "return-path");
            if self.known < 3 || !has_origin {
                return Err("too few message header fields".into());
            }
            return Ok(true);
        }
        if line.len() > MAX_HEADER_LINE {
            return Err("header line too long".into());
        }
        if line[0] == b' ' || line[0] == b'\t' {
            return match self.fields.last_mut() {
                Some((_, v)) => {
                    v.push(' ');
                    v.push_str(String::from_utf8_lossy(line).trim());
                    Ok(false)
                }
                None => Err("continuation line before any field".into()),
            };
        }
        let colon = line
            .iter()
            .position(|&c| c == b':')
            .ok_or("header line without a colon")?;
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|&c| (33..=126).contains(&c)) {
            return Err("invalid header field name".into());
        }
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if KNOWN_FIELDS.contains(&name.as_str()) {
            self.known += 1;
        }
        let value = String::from_utf8_lossy(&line[colon + 1..])
            .trim()
            .to_string();
        self.fields.push((name, value));
        Ok(false)
    }

    /// The boundary parameter of a multipart Content-Type.
    fn find_boundary(&self) -> Option<Vec<u8>> {
        let (_, v) = self.fields.iter().find(|(n, _)| n == "content-type")?;
        let lower = v.to_ascii_lowercase();
        if !lower.trim_start().starts_with("multipart/") {
            return None;
        }
        let at = lower.find("boundary=")? + "boundary=".len();
        let rest = &v[at..];
        let b = if let Some(q) = rest.strip_prefix('"') {
            q.split('"').next()?
        } else {
            rest.split(|c: char| c == ';' || c.is_ascii_whitespace())
                .next()?
        };
        (!b.is_empty() && b.len() <= 70).then(|| b.as_bytes().to_vec())
    }

    /// One complete body line (without its line end), at `line_start`.
    fn body_line_done(&mut self, line_start: u64, line_end: u64) -> Option<Step> {
        let line = std::mem::take(&mut self.body_line);
        let long = std::mem::replace(&mut self.body_line_long, false);
        let b = self.boundary.as_deref()?;
        if !long && line.len() >= 2 + b.len() && line.starts_with(b"--") && line[2..].starts_with(b)
        {
            let after = &line[2 + b.len()..];
            if after.starts_with(b"--") {
                self.mark = Some(line_end);
                self.state = MailState::AfterClose;
                let _ = line_start;
                return None;
            }
            if after.iter().all(|c| *c == b' ' || *c == b'\t') {
                self.part_header = true;
                self.part_base64 = false;
            }
        } else if self.part_header {
            if line.is_empty() {
                self.part_header = false;
            } else if line
                .to_ascii_lowercase()
                .starts_with(b"content-transfer-encoding:")
                && String::from_utf8_lossy(&line)
                    .to_ascii_lowercase()
                    .contains("base64")
            {
                self.part_base64 = true;
            }
        } else if self.part_base64 && !line.is_empty() {
            let ok = !long
                && line.len() <= 998
                && line
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='));
            if !ok {
                self.problem = Some((line_start, "a base64 part holds non-base64 text".into()));
            }
        }
        self.body_line = line;
        self.body_line.clear();
        None
    }
}

impl Default for EmlDelimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Delimiter for EmlDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let mut i = 0usize;
        while i < data.len() {
            let at = self.pos + i as u64;
            let b = data[i];
            match self.state {
                MailState::Header => {
                    if !TEXT[usize::from(b)] {
                        return Step::Reject;
                    }
                    i += 1;
                    if b == b'\n' {
                        let mut line = std::mem::take(&mut self.line);
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                        match self.header_line(&line) {
                            Err(_) => return Step::Reject,
                            Ok(true) => {
                                self.accepted = true;
                                self.boundary = self.find_boundary();
                                self.state = if self.boundary.is_some() {
                                    MailState::Body
                                } else {
                                    MailState::Plain
                                };
                            }
                            Ok(false) => {}
                        }
                        self.line = line;
                        self.line.clear();
                    } else {
                        self.line.push(b);
                        if self.line.len() > MAX_HEADER_LINE + 1 || at as usize > MAX_HEADER {
                            return Step::Reject;
                        }
                    }
                }
                MailState::Body => {
                    let rest = &data[i..];
                    let stop = first_line_end_or_binary(rest).unwrap_or(rest.len());
                    let room = 1000usize.saturating_sub(self.body_line.len());
                    let take = stop.min(room);
                    self.body_line.extend_from_slice(&rest[..take]);
                    if stop > room {
                        self.body_line_long = true;
                    }
                    i += stop;
                    if i < data.len() {
                        let c = data[i];
                        let here = self.pos + i as u64;
                        if c != b'\n' {
                            return Step::End {
                                len: here,
                                verdict: Verdict::new(
                                    Validation::Invalid,
                                    "binary data before the closing MIME boundary",
                                ),
                            };
                        }
                        i += 1;
                        if self.body_line.last() == Some(&b'\r') {
                            self.body_line.pop();
                        }
                        let line_start = here.saturating_sub(self.body_line.len() as u64);
                        self.body_line_done(line_start, here + 1);
                        if let Some((p, msg)) = self.problem.take() {
                            return Step::End {
                                len: p,
                                verdict: Verdict::new(Validation::Invalid, msg),
                            };
                        }
                        if self.state == MailState::AfterClose {
                            // The closing delimiter line ends with its LF.
                            return Step::End {
                                len: here + 1,
                                verdict: Verdict::valid(),
                            };
                        }
                    }
                }
                MailState::AfterClose => {
                    // Unreachable in practice: the LF ends the item above.
                    return Step::End {
                        len: self.mark.unwrap_or(at),
                        verdict: Verdict::valid(),
                    };
                }
                MailState::Plain => {
                    if let Some(p) = first_binary(&data[i..]) {
                        return Step::End {
                            len: at + p as u64,
                            verdict: Verdict::new(
                                Validation::Unchecked,
                                "single-part message: it ends where the text stops",
                            ),
                        };
                    }
                    i = data.len();
                }
            }
        }
        self.pos += data.len() as u64;
        Step::More
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        if !self.accepted {
            return Step::Reject;
        }
        if self.state == MailState::Plain {
            return Step::End {
                len: fed,
                verdict: Verdict::new(
                    Validation::Unchecked,
                    "single-part message: it ends where the text stops",
                ),
            };
        }
        Step::End {
            len: fed,
            verdict: Verdict::new(
                Validation::Truncated,
                match cut {
                    Cut::RangeEnd | Cut::NextHeader => {
                        "the scanned range ends before the closing MIME boundary"
                    }
                    Cut::MaxSize => "no closing MIME boundary within the maximum size",
                },
            ),
        }
    }

    fn accepted(&self) -> bool {
        self.accepted
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::end_of;
    use super::*;

    fn page() -> Vec<u8> {
        let mut p = b"<!DOCTYPE html>\n<html lang=\"en\">\n<head><title>t</title></head>\n<body>\n"
            .to_vec();
        for i in 0..40 {
            p.extend_from_slice(
                format!("<p>paragraph {i} with <a href=\"x\">a link</a></p>\n").as_bytes(),
            );
        }
        p.extend_from_slice(b"</body>\n</HTML>\n");
        p
    }

    #[test]
    fn block_scans_agree_with_byte_scans() {
        let mut data: Vec<u8> = (0..4000u32).map(|i| b' ' + (i * 7 % 90) as u8).collect();
        for (at, byte) in [
            (37, b'\n'),
            (700, 0x7F),
            (1301, 0x00),
            (2050, b'\t'),
            (3999, 0x01),
        ] {
            data[at] = byte;
            for from in [0, 1, 31, 32, 33, 699, 701, 2049] {
                let d = &data[from..];
                assert_eq!(
                    first_binary(d),
                    d.iter().position(|&b| !TEXT[usize::from(b)]),
                    "binary, from {from}"
                );
                assert_eq!(
                    first_line_end_or_binary(d),
                    d.iter().position(|&c| c == b'\n' || !TEXT[usize::from(c)]),
                    "line end, from {from}"
                );
            }
        }
    }

    #[test]
    fn html_ends_after_the_closing_tag_and_its_line_end() {
        let p = page();
        for tail in [&b"\x00\x01binary"[..], b"more text after", b""] {
            let mut data = p.clone();
            data.extend_from_slice(tail);
            for chunk in [1, 3, 7, 64, 100_000] {
                let (len, v) = end_of(&mut HtmlDelimiter::new(), &data, chunk);
                assert_eq!(
                    (len, v),
                    (p.len() as u64, Validation::Valid),
                    "chunk {chunk}"
                );
            }
        }
        // CR LF after the tag.
        let mut crlf = p[..p.len() - 1].to_vec();
        crlf.extend_from_slice(b"\r\nX");
        let (len, _) = end_of(&mut HtmlDelimiter::new(), &crlf, 5);
        assert_eq!(len, p.len() as u64 + 1);
    }

    #[test]
    fn html_cut_by_binary_or_another_page_is_invalid() {
        let p = page();
        let mut data = p[..600].to_vec();
        data.extend_from_slice(&[0, 1, 2, 3]);
        let (len, v) = end_of(&mut HtmlDelimiter::new(), &data, 50);
        assert_eq!((len, v), (600, Validation::Invalid));
        let mut data = p[..600].to_vec();
        data.extend_from_slice(&p);
        let (len, v) = end_of(&mut HtmlDelimiter::new(), &data, 50);
        assert_eq!((len, v), (600, Validation::Invalid));
        // Binary right away: not a page.
        assert_eq!(HtmlDelimiter::new().feed(b"<html>\x00\x00"), Step::Reject);
    }

    fn message(body_crlf: bool) -> Vec<u8> {
        let nl = if body_crlf { "\r\n" } else { "\n" };
        let b = "----=_Part_0123456789abcdef";
        let mut m = String::new();
        for (k, v) in [
            ("Return-Path", "<a@example.com>"),
            ("Message-ID", "<1@example.com>"),
            ("Date", "Mon, 1 Jan 2024 10:00:00 +0000"),
            ("From", "A <a@example.com>"),
            ("To", "b@example.com"),
            ("Subject", "hello"),
            ("MIME-Version", "1.0"),
        ] {
            m.push_str(&format!("{k}: {v}{nl}"));
        }
        m.push_str(&format!(
            "Content-Type: multipart/mixed;{nl}\tboundary=\"{b}\"{nl}{nl}"
        ));
        m.push_str(&format!(
            "preamble{nl}{nl}--{b}{nl}Content-Type: text/plain{nl}{nl}"
        ));
        m.push_str(&format!("Body text --{b}x is not a delimiter{nl}"));
        m.push_str(&format!(
            "--{b}{nl}Content-Type: image/png{nl}Content-Transfer-Encoding: base64{nl}{nl}"
        ));
        m.push_str(&format!("iVBORw0KGgo={nl}"));
        m.push_str(&format!("--{b}--{nl}"));
        m.into_bytes()
    }

    #[test]
    fn multipart_messages_end_after_the_closing_delimiter() {
        for crlf in [true, false] {
            let m = message(crlf);
            let mut data = m.clone();
            data.extend_from_slice(b"Return-Path: <next@example.com>\r\n");
            for chunk in [1, 2, 13, 4096] {
                let (len, v) = end_of(&mut EmlDelimiter::new(), &data, chunk);
                assert_eq!(
                    (len, v),
                    (m.len() as u64, Validation::Valid),
                    "chunk {chunk}"
                );
            }
        }
    }

    #[test]
    fn damaged_or_fake_messages() {
        let m = message(true);
        // Non-base64 text inside the base64 part.
        let s = String::from_utf8(m.clone())
            .unwrap()
            .replace("iVBORw0KGgo=", "not base64 !");
        let (_, v) = end_of(&mut EmlDelimiter::new(), s.as_bytes(), 16);
        assert_eq!(v, Validation::Invalid);
        // Cut before the closing delimiter.
        let (len, v) = end_of(&mut EmlDelimiter::new(), &m[..m.len() - 10], 16);
        assert_eq!((len, v), (m.len() as u64 - 10, Validation::Truncated));
        // A lone `From:` line in prose is not a message.
        let mut d = EmlDelimiter::new();
        assert_eq!(
            super::super::test_util::delimit(&mut d, b"From: me\nand then some prose\n\n", 4).0,
            Step::Reject
        );
    }
}
