//! Plain text in UTF-8, UTF-16 (LE/BE, with or without BOM) and Latin-1
//! (read as Windows-1252, which Windows writes under that name), and
//! printable strings of binary content, all decoded as a stream: state
//! carries across pieces, so a character or a string split between two
//! reads is decoded whole and memory does not grow with the item.

use super::{Extraction, Limits};

/// How a text item is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextEncoding {
    /// UTF-8 (a BOM, if any, is dropped).
    Utf8,
    /// UTF-16 little-endian.
    Utf16Le,
    /// UTF-16 big-endian.
    Utf16Be,
    /// ISO-8859-1 / Windows-1252.
    Latin1,
}

impl TextEncoding {
    /// Whether ASCII appears as single bytes (so byte patterns like mail
    /// headers can be sniffed directly).
    pub fn is_byte_oriented(self) -> bool {
        matches!(self, TextEncoding::Utf8 | TextEncoding::Latin1)
    }
}

/// Bytes looked at to decide the encoding.
const SAMPLE: usize = 64 * 1024;

fn is_control(b: u8) -> bool {
    matches!(b, 0x00..=0x08 | 0x0B | 0x0E..=0x1A | 0x1C..=0x1F | 0x7F)
}

/// The text encoding of an item from its first bytes, or `None` when it
/// is binary.
pub fn classify(head: &[u8]) -> Option<TextEncoding> {
    if head.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Some(TextEncoding::Utf8);
    }
    if head.starts_with(&[0xFF, 0xFE]) {
        return Some(TextEncoding::Utf16Le);
    }
    if head.starts_with(&[0xFE, 0xFF]) {
        return Some(TextEncoding::Utf16Be);
    }
    let sample = &head[..head.len().min(SAMPLE)];
    if sample.is_empty() {
        return Some(TextEncoding::Utf8);
    }
    // UTF-16 without BOM: ASCII-range text has a zero in every other byte.
    if sample.len() >= 4 {
        let pairs = sample.len() / 2;
        let (mut even0, mut odd0, mut odd_ctrl, mut even_ctrl) = (0usize, 0usize, 0usize, 0usize);
        for p in sample.chunks_exact(2) {
            if p[0] == 0 {
                even0 += 1;
            } else if is_control(p[0]) {
                even_ctrl += 1;
            }
            if p[1] == 0 {
                odd0 += 1;
            } else if is_control(p[1]) {
                odd_ctrl += 1;
            }
        }
        if odd0 * 10 >= pairs * 4 && even0 * 50 <= pairs && even_ctrl * 50 <= pairs {
            return Some(TextEncoding::Utf16Le);
        }
        if even0 * 10 >= pairs * 4 && odd0 * 50 <= pairs && odd_ctrl * 50 <= pairs {
            return Some(TextEncoding::Utf16Be);
        }
    }
    let controls = sample.iter().filter(|&&b| is_control(b)).count();
    // Text files have essentially no control characters (a stray form feed
    // or escape at most); binary data has many.
    if controls * 200 > sample.len() {
        return None;
    }
    match std::str::from_utf8(sample) {
        Ok(_) => Some(TextEncoding::Utf8),
        // Only the sample's cut-off last character is invalid.
        Err(e) if e.error_len().is_none() => Some(TextEncoding::Utf8),
        Err(_) => Some(TextEncoding::Latin1),
    }
}

/// Windows-1252's characters for 0x80..=0x9F (undefined ones as U+FFFD).
const CP1252_HIGH: [char; 32] = [
    '€', '\u{FFFD}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{FFFD}', 'Ž',
    '\u{FFFD}', '\u{FFFD}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{FFFD}',
    'ž', 'Ÿ',
];

/// A Windows-1252 byte as a character.
pub fn cp1252(b: u8) -> char {
    match b {
        0x80..=0x9F => CP1252_HIGH[usize::from(b - 0x80)],
        _ => char::from(b),
    }
}

/// Decode Latin-1/Windows-1252 bytes into `out`.
pub fn push_latin1(bytes: &[u8], out: &mut String) {
    out.extend(bytes.iter().map(|&b| cp1252(b)));
}

/// Pieces of decoded text handed to the sink at most this large, so a
/// huge single-line item never builds one huge string.
const PIECE: usize = 64 * 1024;

/// A longest run kept for one string of a binary item before it is
/// handed on (the run continues in the next piece).
const MAX_RUN: usize = 64 * 1024;

/// A streaming decoder for one item.
pub struct StreamDecoder {
    mode: Mode,
    out: String,
    /// Replacement characters produced for invalid input.
    pub invalid: u64,
}

enum Mode {
    Utf8 {
        pending: Vec<u8>,
        first: bool,
    },
    Utf16 {
        big_endian: bool,
        odd: Option<u8>,
        high: Option<u16>,
        first: bool,
    },
    Latin1,
    Strings(Strings),
    /// Binary content with string extraction switched off.
    Nothing,
}

impl StreamDecoder {
    /// A decoder for `encoding` (`None`: binary, printable strings).
    pub fn new(encoding: Option<TextEncoding>, limits: &Limits) -> Self {
        let mode = match encoding {
            Some(TextEncoding::Utf8) => Mode::Utf8 {
                pending: Vec::new(),
                first: true,
            },
            Some(TextEncoding::Utf16Le) => Mode::Utf16 {
                big_endian: false,
                odd: None,
                high: None,
                first: true,
            },
            Some(TextEncoding::Utf16Be) => Mode::Utf16 {
                big_endian: true,
                odd: None,
                high: None,
                first: true,
            },
            Some(TextEncoding::Latin1) => Mode::Latin1,
            None if limits.binary_strings => Mode::Strings(Strings::new(limits.min_string)),
            None => Mode::Nothing,
        };
        StreamDecoder {
            mode,
            out: String::new(),
            invalid: 0,
        }
    }

    fn flush(&mut self, x: &mut Extraction<'_>) {
        if !self.out.is_empty() {
            x.emit(&self.out);
            self.out.clear();
        }
    }

    /// Decode the next piece of the item.
    pub fn feed(&mut self, x: &mut Extraction<'_>, data: &[u8]) {
        for piece in data.chunks(PIECE) {
            self.feed_piece(piece);
            self.flush(x);
        }
    }

    fn feed_piece(&mut self, data: &[u8]) {
        match &mut self.mode {
            Mode::Utf8 { pending, first } => {
                let mut joined;
                let bytes: &[u8] = if pending.is_empty() {
                    data
                } else {
                    joined = std::mem::take(pending);
                    joined.extend_from_slice(data);
                    &joined
                };
                let mut rest = bytes;
                let start = self.out.len();
                loop {
                    match std::str::from_utf8(rest) {
                        Ok(s) => {
                            self.out.push_str(s);
                            break;
                        }
                        Err(e) => {
                            let (ok, bad) = rest.split_at(e.valid_up_to());
                            // Valid by construction.
                            self.out
                                .push_str(std::str::from_utf8(ok).unwrap_or_default());
                            match e.error_len() {
                                Some(n) => {
                                    self.out.push('\u{FFFD}');
                                    self.invalid += 1;
                                    rest = &bad[n..];
                                }
                                None => {
                                    // An incomplete character at the end:
                                    // wait for the next piece.
                                    *pending = bad.to_vec();
                                    break;
                                }
                            }
                        }
                    }
                }
                // A byte-order mark is no text (it may arrive split).
                if *first && self.out.len() > start {
                    *first = false;
                    if self.out[start..].starts_with('\u{FEFF}') {
                        self.out.replace_range(start..start + 3, "");
                    }
                }
            }
            Mode::Utf16 {
                big_endian,
                odd,
                high,
                first,
            } => {
                let mut unit = |u: u16, out: &mut String, invalid: &mut u64| match u {
                    0xD800..=0xDBFF => {
                        if high.replace(u).is_some() {
                            out.push('\u{FFFD}');
                            *invalid += 1;
                        }
                    }
                    0xDC00..=0xDFFF => match high.take() {
                        Some(h) => {
                            let c =
                                0x10000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(u) - 0xDC00);
                            out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                        }
                        None => {
                            out.push('\u{FFFD}');
                            *invalid += 1;
                        }
                    },
                    _ => {
                        if high.take().is_some() {
                            out.push('\u{FFFD}');
                            *invalid += 1;
                        }
                        // NUL padding is no text.
                        if u != 0 {
                            out.push(char::from_u32(u32::from(u)).unwrap_or('\u{FFFD}'));
                        }
                    }
                };
                let mut bytes = data;
                let mut head = [0u8; 2];
                let mut has_head = false;
                if let Some(b) = odd.take() {
                    if let Some((&n, rest)) = bytes.split_first() {
                        head = [b, n];
                        has_head = true;
                        bytes = rest;
                    } else {
                        *odd = Some(b);
                    }
                }
                let mut chunks = bytes.chunks_exact(2);
                let units = has_head.then_some(&head[..]).into_iter().chain(&mut chunks);
                for p in units {
                    let u = if *big_endian {
                        u16::from_be_bytes([p[0], p[1]])
                    } else {
                        u16::from_le_bytes([p[0], p[1]])
                    };
                    if *first {
                        *first = false;
                        if u == 0xFEFF {
                            continue;
                        }
                    }
                    unit(u, &mut self.out, &mut self.invalid);
                }
                if let [b] = chunks.remainder() {
                    *odd = Some(*b);
                }
            }
            Mode::Latin1 => push_latin1(data, &mut self.out),
            Mode::Strings(s) => s.feed(data, &mut self.out),
            Mode::Nothing => {}
        }
    }

    /// The item ended: flush what is pending.
    pub fn finish(&mut self, x: &mut Extraction<'_>) {
        match &mut self.mode {
            Mode::Utf8 { pending, .. } => {
                if !pending.is_empty() {
                    pending.clear();
                    self.out.push('\u{FFFD}');
                    self.invalid += 1;
                }
            }
            Mode::Utf16 { odd, high, .. } => {
                if odd.take().is_some() || high.take().is_some() {
                    self.out.push('\u{FFFD}');
                    self.invalid += 1;
                }
            }
            Mode::Strings(s) => s.finish(&mut self.out),
            Mode::Latin1 | Mode::Nothing => {}
        }
        self.flush(x);
        if self.invalid > 0 && matches!(self.mode, Mode::Utf16 { .. }) {
            x.problem(format!(
                "invalid UTF-16: {} unpaired surrogates or odd trailing bytes replaced",
                self.invalid
            ));
        }
    }
}

/// Decode a whole in-memory text item to a string (for formats that parse
/// the text afterwards, such as HTML).
pub fn decode_all(x: &mut Extraction<'_>, data: &[u8]) -> String {
    let mut collect = String::new();
    let encoding = classify(data).unwrap_or(TextEncoding::Latin1);
    let limits = Limits {
        binary_strings: false,
        ..x.limits().clone()
    };
    let mut d = StreamDecoder::new(Some(encoding), &limits);
    {
        let mut inner = Extraction::new(&limits, &mut collect);
        d.feed(&mut inner, data);
        d.finish(&mut inner);
        for p in inner.problems {
            x.problem(p);
        }
    }
    collect
}

/// Printable strings of binary data: runs of at least `min` printable
/// ASCII characters, and runs of UTF-16LE ASCII characters (Windows
/// stores strings so) at either byte alignment, as `strings -a` and
/// `strings -el` would find them. Each string ends with a newline.
pub struct Strings {
    min: usize,
    ascii: Vec<u8>,
    /// UTF-16LE runs for the two byte alignments; `phase` is the alignment
    /// of the next byte.
    wide: [Vec<u8>; 2],
    /// Whether the last byte seen at each alignment was a printable
    /// character's low byte awaiting its zero high byte.
    wide_low: [Option<u8>; 2],
    phase: usize,
}

fn printable(b: u8) -> bool {
    (0x20..0x7F).contains(&b) || b == b'\t'
}

impl Strings {
    fn new(min: usize) -> Self {
        Strings {
            min: min.max(1),
            ascii: Vec::new(),
            wide: [Vec::new(), Vec::new()],
            wide_low: [None, None],
            phase: 0,
        }
    }

    fn end_run(run: &mut Vec<u8>, min: usize, out: &mut String) {
        if run.len() >= min {
            // Printable ASCII only, so valid UTF-8.
            out.push_str(std::str::from_utf8(run).unwrap_or_default());
            out.push('\n');
        }
        run.clear();
    }

    fn feed(&mut self, data: &[u8], out: &mut String) {
        for &b in data {
            if printable(b) {
                self.ascii.push(b);
                if self.ascii.len() >= MAX_RUN {
                    Self::end_run(&mut self.ascii, self.min, out);
                }
            } else {
                Self::end_run(&mut self.ascii, self.min, out);
            }
            let p = self.phase;
            // At alignment p, bytes alternate low (printable) / high (zero).
            match self.wide_low[p].take() {
                Some(low) if b == 0 => {
                    self.wide[p].push(low);
                    if self.wide[p].len() >= MAX_RUN {
                        Self::end_run(&mut self.wide[p], self.min, out);
                    }
                }
                Some(_) => {
                    Self::end_run(&mut self.wide[p], self.min, out);
                }
                None => {}
            }
            // This byte starts a new pair at the other alignment.
            let q = 1 - p;
            if printable(b) {
                self.wide_low[q] = Some(b);
            } else {
                self.wide_low[q] = None;
                Self::end_run(&mut self.wide[q], self.min, out);
            }
            self.phase = q;
        }
    }

    fn finish(&mut self, out: &mut String) {
        Self::end_run(&mut self.ascii, self.min, out);
        for p in 0..2 {
            // A pure-ASCII run also looks like nothing at the other
            // alignment, so only runs with real zero bytes are kept.
            Self::end_run(&mut self.wide[p], self.min, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(data: &[u8], piece: usize) -> (String, Vec<String>) {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        let mut d = StreamDecoder::new(classify(data), &limits);
        for p in data.chunks(piece.max(1)) {
            d.feed(&mut x, p);
        }
        d.finish(&mut x);
        let problems = x.problems.clone();
        (out, problems)
    }

    #[test]
    fn encodings_are_recognised() {
        assert_eq!(classify(b"plain ascii"), Some(TextEncoding::Utf8));
        assert_eq!(
            classify("caf\u{e9} na\u{ef}ve".as_bytes()),
            Some(TextEncoding::Utf8)
        );
        assert_eq!(classify(b"caf\xe9 na\xefve"), Some(TextEncoding::Latin1));
        let le: Vec<u8> = "hello wide world"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(classify(&le), Some(TextEncoding::Utf16Le));
        let be: Vec<u8> = "hello wide world"
            .encode_utf16()
            .flat_map(u16::to_be_bytes)
            .collect();
        assert_eq!(classify(&be), Some(TextEncoding::Utf16Be));
        assert_eq!(classify(&[0, 1, 2, 3, 4, 5, 6, 200]), None);
    }

    #[test]
    fn split_characters_decode_whole_at_any_piece_size() {
        let text = "Grüße, ☃ and 𝄞 end";
        let mut le = vec![0xFF, 0xFE];
        le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        let mut be = vec![0xFE, 0xFF];
        be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        for piece in [1, 2, 3, 5, 64] {
            assert_eq!(
                decode(text.as_bytes(), piece).0,
                text,
                "utf-8 piece {piece}"
            );
            assert_eq!(decode(&le, piece).0, text, "utf-16le piece {piece}");
            assert_eq!(decode(&be, piece).0, text, "utf-16be piece {piece}");
        }
        assert_eq!(decode(b"\xEF\xBB\xBFbom", 1).0, "bom");
        assert_eq!(decode(b"na\xefve \x80uro", 2).0, "naïve €uro");
    }

    #[test]
    fn invalid_utf16_is_replaced_and_reported() {
        let mut data = vec![0xFF, 0xFE];
        data.extend("ab".encode_utf16().flat_map(u16::to_le_bytes));
        data.extend(0xD800u16.to_le_bytes()); // unpaired high surrogate
        data.extend("cd".encode_utf16().flat_map(u16::to_le_bytes));
        data.push(b'x'); // odd trailing byte
        let (text, problems) = decode(&data, 3);
        assert_eq!(text, "ab\u{FFFD}cd\u{FFFD}");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("invalid UTF-16"));
    }

    #[test]
    fn strings_of_binary_data_ascii_and_wide() {
        let mut data = vec![0u8, 1, 2, 0xFF];
        data.extend_from_slice(b"first");
        data.extend_from_slice(&[0, 0, 0x90]);
        data.extend_from_slice(b"abc"); // too short
        data.push(0x01);
        data.push(0x07);
        // UTF-16LE at odd alignment.
        for c in b"wide one" {
            data.push(*c);
            data.push(0);
        }
        data.extend_from_slice(&[0xFE, 0xFE]);
        for piece in [1, 3, 1000] {
            let (text, _) = decode(&data, piece);
            let lines: Vec<&str> = text.lines().collect();
            assert!(lines.contains(&"first"), "{piece}: {lines:?}");
            assert!(lines.contains(&"wide one"), "{piece}: {lines:?}");
            assert!(!lines.contains(&"abc"), "{piece}: {lines:?}");
        }
    }

    #[test]
    fn a_huge_line_is_handed_on_in_bounded_pieces() {
        let data = vec![b'a'; 1_000_000];
        let limits = Limits::default();
        struct Max(usize, usize);
        impl super::super::Sink for Max {
            fn push(&mut self, t: &str) {
                self.0 = self.0.max(t.len());
                self.1 += t.len();
            }
        }
        let mut m = Max(0, 0);
        let mut x = Extraction::new(&limits, &mut m);
        let mut d = StreamDecoder::new(classify(&data), &limits);
        d.feed(&mut x, &data);
        d.finish(&mut x);
        assert_eq!(m.1, 1_000_000);
        assert!(m.0 <= PIECE);
    }
}
