//! PDF 1.4 documents with uncompressed text content streams (so both
//! `pdftotext` and raw keyword search find the planted words), sized
//! exactly by comment lines before the cross-reference table.

use crate::names::Stamp;
use crate::rng::Rng;
use crate::words;

const LINES_PER_PAGE: usize = 54;
const LINE_CHARS: usize = 92;

/// Escape a text line for a PDF literal string.
fn escape(line: &[u8], out: &mut Vec<u8>) {
    for &c in line {
        if matches!(c, b'(' | b')' | b'\\') {
            out.push(b'\\');
        }
        out.push(c);
    }
}

/// Build the whole file from page content streams, with `pad` bytes of
/// comment lines before `xref`.
/// `pad` bytes of comment lines go before the cross-reference table (they
/// move it), `tail` spaces into the trailer dictionary (after it).
fn assemble(pages: &[Vec<u8>], info: &[u8], pad: usize, tail: usize) -> Vec<u8> {
    let n = pages.len();
    let total_objs = 4 + 2 * n; // 1 catalog, 2 pages, 3 font, 4 info, then page+content pairs
    let mut out =
        Vec::with_capacity(pages.iter().map(|p| p.len() + 200).sum::<usize>() + 1024 + pad);
    let mut offsets = Vec::with_capacity(total_objs);
    out.extend_from_slice(b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n");
    offsets.push(out.len());
    out.extend_from_slice(b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    offsets.push(out.len());
    out.extend_from_slice(b"2 0 obj\n<< /Type /Pages /Kids [");
    for i in 0..n {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(format!("{} 0 R", 5 + 2 * i).as_bytes());
    }
    out.extend_from_slice(format!("] /Count {n} >>\nendobj\n").as_bytes());
    offsets.push(out.len());
    out.extend_from_slice(b"3 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>\nendobj\n");
    offsets.push(out.len());
    out.extend_from_slice(b"4 0 obj\n");
    out.extend_from_slice(info);
    out.extend_from_slice(b"\nendobj\n");
    for (i, content) in pages.iter().enumerate() {
        let page = 5 + 2 * i;
        offsets.push(out.len());
        out.extend_from_slice(format!(
            "{page} 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>\nendobj\n",
            page + 1
        ).as_bytes());
        offsets.push(out.len());
        out.extend_from_slice(
            format!(
                "{} 0 obj\n<< /Length {} >>\nstream\n",
                page + 1,
                content.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(content);
        out.extend_from_slice(b"\nendstream\nendobj\n");
    }
    // Padding: comment lines, which every PDF reader skips.
    let mut left = pad;
    while left > 0 {
        if left == 1 {
            out.push(b'\n');
            left = 0;
        } else {
            let take = left.min(120);
            out.push(b'%');
            out.extend(std::iter::repeat_n(b' ', take - 2));
            out.push(b'\n');
            left -= take;
        }
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", total_objs + 1).as_bytes());
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R{} >>\nstartxref\n{xref}\n%%EOF\n",
            total_objs + 1,
            " ".repeat(tail)
        )
        .as_bytes(),
    );
    out
}

/// A PDF of exactly `size` bytes (`size` ≥ 2048) whose text carries
/// `keywords`.
pub fn pdf(rng: &mut Rng, size: usize, keywords: &[String], when: u64) -> Vec<u8> {
    let stamp = Stamp {
        secs: when,
        centis: 0,
    };
    let d = stamp.iso().replace(['-', 'T', ':'], "");
    let mut title = Vec::new();
    words::push_sentence(rng, &mut title);
    title.truncate(48);
    let (f, l) = words::person(rng);
    let mut info = Vec::new();
    info.extend_from_slice(b"<< /Title (");
    escape(&title, &mut info);
    info.extend_from_slice(
        format!(") /Author ({f} {l}) /Producer (caseload corpus-gen) /CreationDate (D:{d}) >>")
            .as_bytes(),
    );

    // Fixed costs per page and overall, generous so the first assembly
    // almost never overshoots.
    let budget = size.saturating_sub(700 + info.len());
    let mut pages: Vec<Vec<u8>> = Vec::new();
    let mut used = 0usize;
    let mut text = Vec::new();
    let mut pending: Vec<&String> = keywords.iter().collect();
    'outer: loop {
        let mut page = Vec::new();
        page.extend_from_slice(b"BT\n/F1 10 Tf\n12 TL\n54 740 Td\n");
        let page_overhead = 230 + page.len();
        if used + page_overhead + 40 > budget {
            if pages.is_empty() {
                page.extend_from_slice(b"ET");
                pages.push(page);
            }
            break;
        }
        used += page_overhead;
        for _ in 0..LINES_PER_PAGE {
            if text.len() < LINE_CHARS {
                words::push_sentence(rng, &mut text);
                text.push(b' ');
                if rng.below(2) == 0
                    && let Some(k) = pending.pop()
                {
                    text.extend_from_slice(k.as_bytes());
                    text.extend_from_slice(b" ");
                }
            }
            let cut = text[..LINE_CHARS.min(text.len())]
                .iter()
                .rposition(|&c| c == b' ')
                .unwrap_or(LINE_CHARS.min(text.len()));
            let mut line = Vec::with_capacity(cut + 8);
            line.push(b'(');
            escape(&text[..cut], &mut line);
            line.extend_from_slice(b") '\n");
            if used + line.len() + 3 > budget {
                page.extend_from_slice(b"ET");
                pages.push(page);
                break 'outer;
            }
            used += line.len();
            page.extend_from_slice(&line);
            text.drain(..(cut + 1).min(text.len()));
        }
        page.extend_from_slice(b"ET");
        pages.push(page);
    }
    // Any keyword not yet placed goes on the last page.
    if !pending.is_empty()
        && let Some(last) = pages.last_mut()
    {
        last.truncate(last.len() - 2);
        for k in pending {
            last.extend_from_slice(format!("({k}) '\n").as_bytes());
        }
        last.extend_from_slice(b"ET");
    }
    // Fit exactly: the padding changes `startxref` digits, so iterate.
    // Where `startxref` crosses a power of ten, one byte of padding more
    // overshoots by one and one less falls short by one, for ever: a
    // shortfall then goes into the trailer, after the table, which moves
    // nothing.
    let (mut pad, mut tail, mut rounds) = (0usize, 0usize, 0u32);
    loop {
        rounds += 1;
        let doc = assemble(&pages, &info, pad, tail);
        if doc.len() == size {
            return doc;
        }
        if doc.len() > size {
            if pad > 0 {
                pad -= (doc.len() - size).min(pad);
                continue;
            }
            // Overshoot without padding: drop the last line of the last page.
            let shrunk = pages.last_mut().and_then(|p| {
                let body_end = p.len().checked_sub(2)?;
                let prev = p[..body_end.checked_sub(1)?]
                    .iter()
                    .rposition(|&c| c == b'\n')?;
                if prev < 30 {
                    return None;
                }
                p.truncate(prev + 1);
                p.extend_from_slice(b"ET");
                Some(())
            });
            if shrunk.is_none() && pages.len() > 1 {
                pages.pop();
            } else if shrunk.is_none() {
                return doc; // cannot shrink further; caller reports the size mismatch
            }
            continue;
        }
        if rounds > 8 {
            tail += size - doc.len();
        } else {
            pad += size - doc.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes where `startxref` lands on a power of ten used to loop for
    /// ever (found generating a 4 GiB corpus: an mbox's PDF attachment).
    #[test]
    fn exact_sizes_where_startxref_gains_a_digit() {
        let mut hit = 0;
        for size in 99_000usize..101_500 {
            let mut r = Rng::new(3);
            let p = pdf(&mut r, size, &[], 1_200_000_000);
            assert_eq!(p.len(), size, "size {size}");
            let text = String::from_utf8_lossy(&p);
            let xref: usize = text
                .rsplit("startxref\n")
                .next()
                .and_then(|t| t.lines().next())
                .and_then(|v| v.parse().ok())
                .expect("startxref");
            assert_eq!(&p[xref..xref + 4], b"xref", "size {size}");
            if xref == 100_000 {
                hit += 1;
            }
        }
        assert!(hit > 0, "no size put startxref at 100000");
    }

    #[test]
    fn exact_sizes() {
        let kw = vec!["qzbcdfghjk".to_string()];
        for size in [2048usize, 3000, 4097, 65_536, 300_001] {
            let mut r = Rng::new(size as u64);
            let p = pdf(&mut r, size, &kw, 1_200_000_000);
            assert_eq!(p.len(), size, "size {size}");
            assert!(p.starts_with(b"%PDF-1.4"));
            assert!(p.ends_with(b"%%EOF\n"));
            assert!(p.windows(10).any(|w| w == b"qzbcdfghjk"));
        }
    }
}
