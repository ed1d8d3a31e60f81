//! PDF text: the strings shown by text operators (`Tj`, `TJ`, `'`, `"`) in
//! content streams, raw or Flate-compressed, plus the document
//! information strings (title, author, subject, keywords).
//!
//! No PDF crate is used because the job is narrow and must survive broken
//! files: a stream that fails to inflate gives the text of its intact part
//! and a recorded problem, and every inflated byte counts against the
//! item's expansion cap. Fonts with custom encodings (CID fonts without a
//! ToUnicode lookup) give their raw codes, as any simple extractor does.

use super::Extraction;
use super::text::push_latin1;

/// Extract a PDF held in memory.
pub fn extract(x: &mut Extraction<'_>, data: &[u8], depth: u32) {
    let mut pos = 0;
    let mut outside_start = 0;
    while let Some(found) = memchr::memmem::find(&data[pos..], b"stream") {
        let kw = pos + found;
        // `endstream` also contains `stream`.
        if kw >= 3 && &data[kw - 3..kw] == b"end" {
            pos = kw + 6;
            continue;
        }
        let mut start = kw + 6;
        if data.get(start) == Some(&b'\r') {
            start += 1;
        }
        if data.get(start) == Some(&b'\n') {
            start += 1;
        } else if start == kw + 6 {
            // Not the keyword (no line break after it).
            pos = kw + 6;
            continue;
        }
        let dict_from = memchr::memmem::rfind(&data[outside_start..kw], b"obj")
            .map_or(outside_start, |i| outside_start + i);
        let dict = &data[dict_from..kw];
        info_strings(x, &data[outside_start..kw]);
        let end = match direct_length(dict) {
            Some(n) if start + n <= data.len() && ends_stream(&data[start + n..]) => start + n,
            _ => {
                memchr::memmem::find(&data[start..], b"endstream").map_or(data.len(), |i| start + i)
            }
        };
        let raw = &data[start..end];
        stream(x, dict, raw, start, depth);
        pos = end;
        outside_start = end;
        if x.expansion_left() == 0 {
            return;
        }
    }
    info_strings(x, &data[outside_start..]);
}

/// Whether what follows a stream's declared length is its `endstream`.
fn ends_stream(after: &[u8]) -> bool {
    let t = after.trim_ascii_start();
    t.starts_with(b"endstream")
}

/// `/Length N` when given directly (not as an indirect reference).
fn direct_length(dict: &[u8]) -> Option<usize> {
    let i = memchr::memmem::find(dict, b"/Length")?;
    let rest = dict[i + 7..].trim_ascii_start();
    let digits: Vec<u8> = rest
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    let after = rest[digits.len()..].trim_ascii_start();
    // `12 0 R` is a reference, not a length.
    if after.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Decode one stream and take text from it when it is a content stream.
fn stream(x: &mut Extraction<'_>, dict: &[u8], raw: &[u8], offset: usize, depth: u32) {
    let has = |name: &[u8]| memchr::memmem::find(dict, name).is_some();
    if has(b"/Subtype /Image") || has(b"/Subtype/Image") || has(b"/DCTDecode") || has(b"/JPXDecode")
    {
        return;
    }
    let flate = has(b"/FlateDecode") || has(b"/Fl ") || has(b"/Fl]") || has(b"/Fl/");
    let other_filter = has(b"/Filter") && !flate;
    if other_filter {
        // LZW, ASCII85 and the like are rare in text streams; not decoded.
        return;
    }
    let decoded;
    let content: &[u8] = if flate {
        let mut z = flate2::read::ZlibDecoder::new(raw);
        let what = format!("Flate stream at byte {offset}");
        let Some(out) = x.read_member(&mut z, depth + 1, &what) else {
            return;
        };
        decoded = out;
        &decoded
    } else {
        raw
    };
    if memchr::memmem::find(content, b"BT").is_some() {
        text_operators(x, content);
    }
}

/// Where text is drawn, enough to tell whether two pieces of text are
/// one run of a line: the current transformation (uniform scale and
/// translation; rotation and skew are rare in text and ignored) and the
/// text matrix.
#[derive(Clone, Copy)]
struct Ctm {
    scale: f64,
    e: f64,
    f: f64,
}

/// The last text shown, in user space.
struct Shown {
    y: f64,
    start_x: f64,
    end_x: f64,
    em: f64,
    /// In an earlier text object (`BT` ... `ET`) than the current one.
    closed: bool,
}

/// Average glyph advance as a share of the font size: text widths are
/// estimated without reading font metrics.
const AVERAGE_ADVANCE: f64 = 0.5;

/// The text shown by a content stream.
///
/// Producers split a line into several text objects (a run per style or
/// hyperlink: Word writes `(user_doc) Tj ET ... BT (@example.com) Tj`),
/// so a text object that starts about where the previous one ended on the
/// same baseline continues it without a separator, as `pdftotext` joins
/// them. Widths are estimated ([`AVERAGE_ADVANCE`]), not measured, so
/// only that case is joined: text repositioned inside one object (`Td`,
/// per-word placement) or further along the line gets a space, text on
/// another line a line break.
fn text_operators(x: &mut Extraction<'_>, content: &[u8]) {
    let mut out = String::new();
    let mut operands: Vec<Vec<u8>> = Vec::new();
    let mut nums: Vec<f64> = Vec::new();
    let mut array: Option<Vec<u8>> = None;
    let identity = Ctm {
        scale: 1.0,
        e: 0.0,
        f: 0.0,
    };
    let mut ctm = identity;
    let mut saved: Vec<Ctm> = Vec::new();
    let mut unsaved = 0usize;
    // Text line matrix (scale, x, y) and the x the next glyph goes to.
    let mut tm = (1.0f64, 0.0f64, 0.0f64);
    let mut cur_x = 0.0f64;
    // Whether the text position was set since the last text shown.
    let mut moved = true;
    let mut font_size = 1.0f64;
    let mut last: Option<Shown> = None;
    let mut i = 0;
    while i < content.len() {
        let c = content[i];
        match c {
            b'(' => {
                let (s, next) = literal(content, i + 1);
                match &mut array {
                    Some(a) => a.extend_from_slice(&s),
                    None => operands.push(s),
                }
                i = next;
            }
            b'<' if content.get(i + 1) != Some(&b'<') => {
                let end = memchr::memchr(b'>', &content[i..]).map_or(content.len(), |e| i + e);
                let s = hex_string(&content[i + 1..end]);
                match &mut array {
                    Some(a) => a.extend_from_slice(&s),
                    None => operands.push(s),
                }
                i = end + 1;
            }
            b'[' => {
                array = Some(Vec::new());
                i += 1;
            }
            b']' => {
                if let Some(a) = array.take() {
                    operands.push(a);
                }
                i += 1;
            }
            b'%' => {
                i = memchr::memchr2(b'\n', b'\r', &content[i..]).map_or(content.len(), |e| i + e);
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => {
                let start = i;
                while i < content.len() && matches!(content[i], b'-' | b'+' | b'.' | b'0'..=b'9') {
                    i += 1;
                }
                let n = std::str::from_utf8(&content[start..i])
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .filter(|n| n.is_finite())
                    .unwrap_or(0.0);
                match &mut array {
                    // A large negative kerning inside TJ is a word space.
                    Some(a) => {
                        if n <= -200.0 {
                            a.push(b' ');
                        }
                    }
                    None => {
                        if nums.len() >= 16 {
                            nums.remove(0);
                        }
                        nums.push(n);
                    }
                }
            }
            c if c.is_ascii_alphabetic() || c == b'\'' || c == b'"' || c == b'*' => {
                let start = i;
                i += 1;
                while i < content.len() && (content[i].is_ascii_alphabetic() || content[i] == b'*')
                {
                    i += 1;
                }
                let op = &content[start..i];
                // The last `n` numeric operands.
                let arg = |n: usize, k: usize| -> f64 {
                    nums.len()
                        .checked_sub(n)
                        .and_then(|b| nums.get(b + k))
                        .copied()
                        .unwrap_or(0.0)
                };
                match op {
                    // Nesting is capped; saves past the cap are counted so
                    // their restores do not pop an outer state.
                    b"q" if saved.len() < 64 => saved.push(ctm),
                    b"q" => unsaved += 1,
                    b"Q" if unsaved > 0 => unsaved -= 1,
                    b"Q" => ctm = saved.pop().unwrap_or(identity),
                    b"cm" if nums.len() >= 6 => {
                        let (a, e, f) = (arg(6, 0), arg(6, 4), arg(6, 5));
                        ctm = Ctm {
                            scale: a * ctm.scale,
                            e: e * ctm.scale + ctm.e,
                            f: f * ctm.scale + ctm.f,
                        };
                    }
                    b"BT" => {
                        tm = (1.0, 0.0, 0.0);
                        cur_x = 0.0;
                        moved = true;
                    }
                    b"ET" => {
                        if let Some(l) = &mut last {
                            l.closed = true;
                        }
                    }
                    b"Tm" if nums.len() >= 6 => {
                        tm = (arg(6, 0), arg(6, 4), arg(6, 5));
                        cur_x = tm.1;
                        moved = true;
                    }
                    b"Td" | b"TD" if nums.len() >= 2 => {
                        tm.1 += arg(2, 0) * tm.0;
                        tm.2 += arg(2, 1) * tm.0;
                        cur_x = tm.1;
                        moved = true;
                    }
                    b"Tf" if !nums.is_empty() => font_size = arg(1, 0),
                    b"T*" => {
                        // The next line: below, by an unknown leading.
                        tm.2 -= font_size.abs().max(1.0) * tm.0;
                        cur_x = tm.1;
                        moved = true;
                    }
                    b"Tj" | b"TJ" | b"'" | b"\"" => {
                        if op == b"'" || op == b"\"" {
                            tm.2 -= font_size.abs().max(1.0) * tm.0;
                            cur_x = tm.1;
                            moved = true;
                        }
                        if let Some(s) = operands.last() {
                            let em = (font_size * tm.0 * ctm.scale).abs();
                            let at_x = ctm.e + ctm.scale * cur_x;
                            let at_y = ctm.f + ctm.scale * tm.2;
                            if let Some(prev) = &last {
                                let tolerance = 0.3 * prev.em.max(em).max(0.01);
                                let same_line = (at_y - prev.y).abs() < tolerance;
                                let continues = at_x
                                    >= prev.start_x + (prev.end_x - prev.start_x) / 2.0
                                    && at_x <= prev.end_x + tolerance;
                                if !same_line {
                                    out.push('\n');
                                } else if !moved {
                                    // The next glyphs of the same run.
                                } else if !(prev.closed && continues) {
                                    out.push(' ');
                                }
                            }
                            push_pdf_string(s, &mut out);
                            let width = s.len() as f64 * AVERAGE_ADVANCE * em;
                            // The text matrix advances with the glyphs, so
                            // a following Tj in this object continues here.
                            if ctm.scale != 0.0 {
                                cur_x += width / ctm.scale;
                            }
                            moved = false;
                            last = Some(Shown {
                                y: at_y,
                                start_x: at_x,
                                end_x: at_x + width,
                                em,
                                closed: false,
                            });
                        }
                    }
                    _ => {}
                }
                operands.clear();
                nums.clear();
                if out.len() >= 64 * 1024 {
                    x.emit(&out);
                    out.clear();
                }
            }
            _ => i += 1,
        }
    }
    out.push('\n');
    x.emit(&out);
}

/// A PDF string's bytes as text: UTF-16BE with a BOM, else PDFDocEncoding
/// (close enough to Latin-1 for searching).
fn push_pdf_string(s: &[u8], out: &mut String) {
    if let Some(rest) = s.strip_prefix(&[0xFE, 0xFF]) {
        let units = rest
            .chunks_exact(2)
            .map(|p| u16::from_be_bytes([p[0], p[1]]));
        out.extend(char::decode_utf16(units).map(|c| c.unwrap_or('\u{FFFD}')));
    } else {
        push_latin1(s, out);
    }
}

/// A literal string starting after its `(`; returns the bytes and the
/// position after its `)`.
fn literal(data: &[u8], mut i: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut depth = 0usize;
    while i < data.len() {
        let c = data[i];
        i += 1;
        match c {
            b'\\' => {
                let Some(&e) = data.get(i) else { break };
                i += 1;
                match e {
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'\r' => {
                        if data.get(i) == Some(&b'\n') {
                            i += 1;
                        }
                    }
                    b'\n' => {}
                    b'0'..=b'7' => {
                        let mut v = u32::from(e - b'0');
                        for _ in 0..2 {
                            match data.get(i) {
                                Some(&d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    i += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push((v & 0xFF) as u8);
                    }
                    other => out.push(other),
                }
            }
            b'(' => {
                depth += 1;
                out.push(c);
            }
            b')' => {
                if depth == 0 {
                    return (out, i);
                }
                depth -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    (out, i)
}

fn hex_string(hex: &[u8]) -> Vec<u8> {
    let digits: Vec<u8> = hex
        .iter()
        .filter_map(|&c| (c as char).to_digit(16).map(|d| d as u8))
        .collect();
    digits
        .chunks(2)
        .map(|p| (p[0] << 4) | p.get(1).copied().unwrap_or(0))
        .collect()
}

/// Document information strings in the object part of the file.
fn info_strings(x: &mut Extraction<'_>, region: &[u8]) {
    let mut out = String::new();
    for key in [&b"/Title"[..], b"/Author", b"/Subject", b"/Keywords"] {
        for i in memchr::memmem::find_iter(region, key) {
            let rest = region[i + key.len()..].trim_ascii_start();
            if let Some(body) = rest.strip_prefix(b"(") {
                let (s, _) = literal(body, 0);
                push_pdf_string(&s, &mut out);
                out.push('\n');
            }
        }
    }
    x.emit(&out);
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Limits};
    use super::*;
    use std::io::Write;

    fn run(data: &[u8]) -> (String, Vec<String>) {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        extract(&mut x, data, 0);
        let p = x.problems.clone();
        (out, p)
    }

    fn pdf_with(content: &[u8], flate: bool) -> Vec<u8> {
        let body = if flate {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(content).unwrap();
            z.finish().unwrap()
        } else {
            content.to_vec()
        };
        let mut pdf =
            b"%PDF-1.4\n1 0 obj\n<< /Title (A \\(nice\\) title) >>\nendobj\n4 0 obj\n<< /Length "
                .to_vec();
        pdf.extend_from_slice(body.len().to_string().as_bytes());
        if flate {
            pdf.extend_from_slice(b" /Filter /FlateDecode");
        }
        pdf.extend_from_slice(b" >>\nstream\n");
        pdf.extend_from_slice(&body);
        pdf.extend_from_slice(b"\nendstream\nendobj\ntrailer\n%%EOF\n");
        pdf
    }

    #[test]
    fn raw_and_flate_content_streams() {
        let content = b"BT /F1 10 Tf 54 740 Td (Hello \\(PDF\\) world) Tj T* [(Ker)-30(ned)-300(split)] TJ (oct\\141l) ' ET";
        for flate in [false, true] {
            let (text, problems) = run(&pdf_with(content, flate));
            assert!(problems.is_empty(), "{problems:?}");
            let words: Vec<&str> = text.split_whitespace().collect();
            for w in ["Hello", "(PDF)", "Kerned", "split", "octal", "(nice)"] {
                assert!(
                    words.contains(&w),
                    "{w} missing from {words:?} (flate={flate})"
                );
            }
        }
    }

    #[test]
    fn runs_split_into_text_objects_join_words_do_not() {
        // As Word for Mac writes a hyperlink: one text object per run,
        // each placed by `cm` where the previous one ended.
        let word = b"q 0.24 0 0 0.24 90 708.96 cm BT 50 0 0 50 0 0 Tm /F1.0 1 Tf (mail: ) Tj ET Q \
            q 0.24 0 0 0.24 171.3227 708.96 cm BT 50 0 0 50 0 0 Tm /F1.0 1 Tf (user_doc) Tj ET Q \
            q 0.24 0 0 0.24 214.6423 708.96 cm BT 50 0 0 50 0 0 Tm /F1.0 1 Tf (_pdf) Tj ET Q \
            q 0.24 0 0 0.24 236.6382 708.96 cm BT 50 0 0 50 0 0 Tm /F1.0 1 Tf (@example.com) Tj ET Q \
            q 0.24 0 0 0.24 90 690 cm BT 50 0 0 50 0 0 Tm /F1.0 1 Tf (next) Tj ET Q";
        let (text, _) = run(&pdf_with(word, true));
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            words[3..],
            ["mail:", "user_doc_pdf@example.com", "next"],
            "{text:?}"
        );
        // Words placed one by one inside a text object stay apart, and
        // objects far apart on a line too.
        let placed = b"BT /F1 12 Tf 72 700 Td (alpha) Tj 40 0 Td (beta) Tj 0 -14 Td (gamma) Tj ET \
            BT /F1 12 Tf 300 686 Td (delta) Tj ET";
        let (text, _) = run(&pdf_with(placed, false));
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(words[3..], ["alpha", "beta", "gamma", "delta"], "{text:?}");
    }

    #[test]
    fn broken_flate_stream_is_recorded_and_survived() {
        let content = b"BT (intact words here) Tj ET ".repeat(200);
        let mut pdf = pdf_with(&content, true);
        // Corrupt the compressed data after its start.
        let s = memchr::memmem::find(&pdf, b"stream\n").unwrap() + 7;
        for b in &mut pdf[s + 40..s + 60] {
            *b ^= 0x5A;
        }
        let (_, problems) = run(&pdf);
        assert!(
            problems.iter().any(|p| p.contains("broken Flate")),
            "{problems:?}"
        );
    }
}
