//! File types from content (magic bytes), and whether a name's extension
//! agrees with them: the signature analysis a suite runs in pre-processing.

/// How many leading bytes [`identify`] looks at.
pub const HEAD_LEN: usize = 4096;

/// Identify a type from the first bytes of a file (up to [`HEAD_LEN`]).
/// Returns a short lower-case type name, or `None` when nothing matches.
pub fn identify(head: &[u8]) -> Option<&'static str> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    let at = |offset: usize, magic: &[u8]| head.get(offset..offset + magic.len()) == Some(magic);
    if head.is_empty() {
        return None;
    }
    let binary = [
        (starts(b"\xFF\xD8\xFF"), "jpeg"),
        (starts(b"\x89PNG\r\n\x1a\n"), "png"),
        (starts(b"GIF87a") || starts(b"GIF89a"), "gif"),
        (starts(b"%PDF-"), "pdf"),
        (starts(b"SQLite format 3\0"), "sqlite"),
        (starts(b"\x1f\x8b\x08"), "gzip"),
        (
            starts(b"BZh") && head.get(3).is_some_and(|b| (b'1'..=b'9').contains(b)),
            "bzip2",
        ),
        (starts(b"7z\xBC\xAF\x27\x1C"), "7z"),
        (starts(b"Rar!\x1a\x07"), "rar"),
        (starts(b"\xFD7zXZ\0"), "xz"),
        (starts(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), "ole2"),
        (starts(b"\x7fELF"), "elf"),
        (starts(b"{\\rtf"), "rtf"),
        (starts(b"ID3") || starts(b"\xFF\xFB"), "mp3"),
        (at(4, b"ftyp"), "mp4"),
        (starts(b"RIFF") && at(8, b"WAVE"), "wav"),
        (starts(b"RIFF") && at(8, b"AVI "), "avi"),
        (starts(b"OggS"), "ogg"),
        (starts(b"fLaC"), "flac"),
        (starts(b"II*\0") || starts(b"MM\0*"), "tiff"),
        (starts(b"\0\0\x01\0") && head.len() >= 6, "ico"),
        (starts(b"LUKS\xBA\xBE"), "luks"),
        (starts(b"-FVE-FS-") || at(3, b"-FVE-FS-"), "bitlocker"),
        (starts(b"EVF\x09\x0d\x0a\xff\x00"), "ewf"),
        (starts(b"\x28\xB5\x2F\xFD"), "zstd"),
    ];
    if let Some((_, kind)) = binary.iter().find(|(hit, _)| *hit) {
        return Some(kind);
    }
    if starts(b"PK\x03\x04") {
        // OOXML packages are ZIPs whose entries name the Office parts.
        let window = &head[..head.len().min(HEAD_LEN)];
        let has = |needle: &[u8]| memchr_find(window, needle);
        if has(b"[Content_Types].xml") || has(b"word/") || has(b"xl/") || has(b"ppt/") {
            return Some("ooxml");
        }
        return Some("zip");
    }
    if starts(b"PK\x05\x06") {
        return Some("zip");
    }
    if starts(b"BM") && head.len() >= 26 && at(6, b"\0\0\0\0") {
        return Some("bmp");
    }
    if starts(b"MZ") {
        return Some("exe");
    }
    if starts(b"\xFF\xFE") || starts(b"\xFE\xFF") {
        return Some("text-utf16");
    }
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    if !looks_like_text(text) {
        return None;
    }
    let trimmed = trim_ascii_start(text);
    let lower: Vec<u8> = trimmed
        .iter()
        .take(64)
        .map(u8::to_ascii_lowercase)
        .collect();
    if lower.starts_with(b"<!doctype html") || lower.starts_with(b"<html") {
        return Some("html");
    }
    if lower.starts_with(b"<?xml") {
        return Some("xml");
    }
    if is_from_line(text) {
        return Some("mbox");
    }
    if looks_like_mail(text) {
        return Some("email");
    }
    Some("text")
}

fn trim_ascii_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Mostly printable UTF-8 (or ASCII) with no NULs.
fn looks_like_text(b: &[u8]) -> bool {
    if b.is_empty() || b.contains(&0) {
        return false;
    }
    // A multi-byte character may be cut at the end of the head.
    let valid = match std::str::from_utf8(b) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && e.valid_up_to() + 4 >= b.len(),
    };
    if !valid {
        return false;
    }
    let control = b
        .iter()
        .filter(|&&c| c < 0x20 && !matches!(c, b'\n' | b'\r' | b'\t' | 0x0c))
        .count();
    control * 100 <= b.len()
}

/// Whether `text` begins with an mbox separator, the "From_" line of RFC
/// 4155: `From `, the sender (one word) and an asctime date with a time
/// and a year, as `From a@b.example Mon Jan  1 00:00:00 2024`. Text that
/// merely begins with the word "From" (a letter, a note) is not a mailbox.
pub fn is_from_line(text: &[u8]) -> bool {
    let Some(rest) = text.strip_prefix(b"From ") else {
        return false;
    };
    let end = rest
        .iter()
        .take(256)
        .position(|&c| c == b'\n')
        .unwrap_or(rest.len().min(256));
    let line = &rest[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(space) = line.iter().position(|&c| c == b' ') else {
        return false;
    };
    let date = &line[space + 1..];
    let digits = |w: &[u8]| w.iter().all(u8::is_ascii_digit);
    let time = date
        .windows(5)
        .any(|w| digits(&w[..2]) && w[2] == b':' && digits(&w[3..]));
    let year = date.windows(4).any(digits);
    space > 0 && time && year
}

/// RFC 5322 header lines at the top.
fn looks_like_mail(b: &[u8]) -> bool {
    const FIELDS: [&[u8]; 9] = [
        b"received:",
        b"return-path:",
        b"from:",
        b"to:",
        b"subject:",
        b"date:",
        b"message-id:",
        b"mime-version:",
        b"delivered-to:",
    ];
    let mut known = 0;
    for line in b.split(|&c| c == b'\n').take(12) {
        let line: Vec<u8> = line.iter().map(u8::to_ascii_lowercase).collect();
        if line.is_empty() || line == b"\r" {
            break;
        }
        if FIELDS.iter().any(|f| line.starts_with(f)) {
            known += 1;
        }
    }
    known >= 2
}

/// Types a file with this extension may legitimately have, or `None` when
/// the extension is not one caseload knows (no verdict then).
fn expected_for(extension: &str) -> Option<&'static [&'static str]> {
    const TEXTUAL: &[&str] = &["text", "text-utf16", "html", "xml", "email", "mbox"];
    Some(match extension {
        "jpg" | "jpeg" | "jpe" | "jfif" => &["jpeg"],
        "png" => &["png"],
        "gif" => &["gif"],
        "bmp" | "dib" => &["bmp"],
        "tif" | "tiff" => &["tiff"],
        "ico" => &["ico", "png"],
        "pdf" => &["pdf"],
        "zip" | "jar" | "apk" | "odt" | "ods" | "odp" | "epub" => &["zip", "ooxml"],
        "docx" | "xlsx" | "pptx" | "docm" | "xlsm" => &["ooxml", "zip"],
        "doc" | "xls" | "ppt" | "msg" => &["ole2"],
        "sqlite" | "sqlite3" | "db" => &["sqlite"],
        "gz" | "tgz" => &["gzip"],
        "bz2" => &["bzip2"],
        "xz" => &["xz"],
        "7z" => &["7z"],
        "rar" => &["rar"],
        "exe" | "dll" | "sys" | "scr" => &["exe"],
        "mp3" => &["mp3"],
        "mp4" | "m4a" | "m4v" | "mov" => &["mp4"],
        "wav" => &["wav"],
        "avi" => &["avi"],
        "ogg" => &["ogg"],
        "flac" => &["flac"],
        "rtf" => &["rtf"],
        "txt" | "log" | "csv" | "md" | "ini" | "cfg" | "conf" | "json" | "js" | "css" | "vcf"
        | "ics" => TEXTUAL,
        "htm" | "html" | "xhtml" => &["html", "xml", "text"],
        "xml" => &["xml", "text"],
        "eml" => &["email", "text", "mbox"],
        "mbox" | "mbx" => &["mbox", "email", "text"],
        _ => return None,
    })
}

/// Whether `name`'s extension contradicts the identified type: `Some(true)`
/// for a mismatch, `Some(false)` when they agree, `None` when there is no
/// verdict (no or unknown extension, empty content).
pub fn extension_mismatch(name: &str, identified: Option<&str>, size: u64) -> Option<bool> {
    if size == 0 {
        return None;
    }
    let (stem, ext) = name.rsplit_once('.')?;
    if stem.is_empty() {
        return None;
    }
    let ext = ext.to_ascii_lowercase();
    let expected = expected_for(&ext)?;
    Some(match identified {
        Some(kind) => !expected.contains(&kind),
        // Content matches nothing, but the extension promises a format
        // with a signature: that is what renaming to hide a file looks like.
        None => true,
    })
}

/// Byte counts of a stream, for its entropy.
///
/// Counting goes to four interleaved tables: a single table makes runs of
/// one byte value (zeros, fills) a chain of dependent increments of the
/// same counter, which made counting cost as much as SHA-1 per byte in
/// the carve stage.
#[derive(Clone)]
pub struct ByteHistogram {
    lanes: Box<[[u64; 256]; 4]>,
}

impl Default for ByteHistogram {
    fn default() -> Self {
        ByteHistogram {
            lanes: Box::new([[0; 256]; 4]),
        }
    }
}

impl std::fmt::Debug for ByteHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteHistogram")
            .field("total", &self.counts().iter().sum::<u64>())
            .finish()
    }
}

impl ByteHistogram {
    /// Count `data`.
    pub fn add(&mut self, data: &[u8]) {
        let (quads, rest) = data.as_chunks::<4>();
        let [l0, l1, l2, l3] = &mut *self.lanes;
        for q in quads {
            l0[usize::from(q[0])] += 1;
            l1[usize::from(q[1])] += 1;
            l2[usize::from(q[2])] += 1;
            l3[usize::from(q[3])] += 1;
        }
        for &b in rest {
            l0[usize::from(b)] += 1;
        }
    }

    /// The count of each byte value.
    pub fn counts(&self) -> [u64; 256] {
        let mut out = [0u64; 256];
        for lane in self.lanes.iter() {
            for (o, c) in out.iter_mut().zip(lane) {
                *o += c;
            }
        }
        out
    }

    /// Shannon entropy in bits per byte of what was counted.
    pub fn entropy(&self) -> f64 {
        entropy(&self.counts())
    }
}

/// Shannon entropy in bits per byte of a byte histogram.
pub fn entropy(histogram: &[u64; 256]) -> f64 {
    let total: u64 = histogram.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let t = total as f64;
    let bits: f64 = histogram
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / t;
            -p * p.log2()
        })
        .sum();
    // One byte value throughout gives -1 * log2(1) = -0.0: report 0.
    bits + 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_histogram_counts_every_byte() {
        let data: Vec<u8> = (0..10_007u32).map(|i| (i * 7 % 13) as u8).collect();
        let mut h = ByteHistogram::default();
        h.add(&data[..5]);
        h.add(&data[5..]);
        let mut want = [0u64; 256];
        for &b in &data {
            want[usize::from(b)] += 1;
        }
        assert_eq!(h.counts(), want);
        assert_eq!(h.entropy(), entropy(&want));
    }

    #[test]
    fn common_types_are_identified() {
        assert_eq!(identify(b"\xFF\xD8\xFF\xE0\0\x10JFIF"), Some("jpeg"));
        assert_eq!(identify(b"\x89PNG\r\n\x1a\n...."), Some("png"));
        assert_eq!(identify(b"%PDF-1.4\n"), Some("pdf"));
        assert_eq!(
            identify(b"PK\x03\x04\x14\0\0\0\0\0[Content_Types].xml"),
            Some("ooxml")
        );
        assert_eq!(identify(b"PK\x03\x04\x14\0\0\0\0\0notes.txt"), Some("zip"));
        assert_eq!(identify(b"SQLite format 3\0\x10\0"), Some("sqlite"));
        assert_eq!(identify(b"<!DOCTYPE html><html>"), Some("html"));
        assert_eq!(
            identify(b"Return-Path: <a@b.c>\r\nReceived: from x\r\nSubject: hi\r\n\r\nbody"),
            Some("email")
        );
        assert_eq!(
            identify(b"From a@b.c Mon Jan  1 00:00:00 2024\nFrom: a\n"),
            Some("mbox")
        );
        assert_eq!(identify(b"plain words and more words\n"), Some("text"));
        // A paragraph beginning with the word is text, not a mailbox.
        assert_eq!(
            identify(b"From the garden, Amy Walker wrote a note.\r\n\r\nMore.\n"),
            Some("text")
        );
        assert_eq!(identify(&[0u8, 1, 2, 3, 200, 201, 7, 9]), None);
    }

    #[test]
    fn extensions_are_checked_against_content() {
        assert_eq!(extension_mismatch("a.jpg", Some("jpeg"), 10), Some(false));
        assert_eq!(extension_mismatch("a.JPG", Some("png"), 10), Some(true));
        assert_eq!(extension_mismatch("a.jpg", None, 10), Some(true));
        assert_eq!(extension_mismatch("a.docx", Some("zip"), 10), Some(false));
        assert_eq!(extension_mismatch("a.txt", Some("jpeg"), 10), Some(true));
        assert_eq!(extension_mismatch("a.weird", Some("jpeg"), 10), None);
        assert_eq!(extension_mismatch("README", Some("text"), 10), None);
        assert_eq!(extension_mismatch(".bashrc", Some("text"), 10), None);
        assert_eq!(extension_mismatch("a.jpg", None, 0), None);
    }

    #[test]
    fn entropy_ranges_from_zero_to_eight() {
        let mut h = [0u64; 256];
        h[65] = 100;
        assert_eq!(entropy(&h), 0.0);
        let h = [10u64; 256];
        assert!((entropy(&h) - 8.0).abs() < 1e-9);
    }
}
