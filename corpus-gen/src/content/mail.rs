//! E-mail: RFC 5322 messages with MIME multipart bodies and base64
//! attachments, as single `.eml` files (CRLF) or an mboxrd mailbox (LF).

use super::{Attachment, Kind, Pool, hex};
use crate::CorpusError;
use crate::names::civil_from_days;
use crate::rng::Rng;
use crate::words;
use caseload_digests::Digest;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 in 76-character lines, each ended by `eol`.
fn base64_lines(data: &[u8], eol: &[u8], out: &mut Vec<u8>) {
    let mut col = 0;
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        let q = [
            B64[(n >> 18) as usize & 63],
            B64[(n >> 12) as usize & 63],
            if chunk.len() > 1 {
                B64[(n >> 6) as usize & 63]
            } else {
                b'='
            },
            if chunk.len() > 2 {
                B64[n as usize & 63]
            } else {
                b'='
            },
        ];
        out.extend_from_slice(&q);
        col += 4;
        if col == 76 {
            out.extend_from_slice(eol);
            col = 0;
        }
    }
    if col > 0 {
        out.extend_from_slice(eol);
    }
}

/// Length of `base64_lines` output for `n` bytes.
fn base64_len(n: usize, eol: usize) -> usize {
    let chars = n.div_ceil(3) * 4;
    chars + chars.div_ceil(76) * eol
}

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// (RFC 5322 date, asctime date) of a time in seconds since 1980.
fn dates(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64 + 3652;
    let (y, m, d) = civil_from_days(days);
    let wd = WEEKDAYS[days.rem_euclid(7) as usize];
    let mon = MONTHS[(m as usize).saturating_sub(1).min(11)];
    let r = secs % 86_400;
    let (h, mi, s) = (r / 3600, (r / 60) % 60, r % 60);
    (
        format!("{wd}, {d} {mon} {y} {h:02}:{mi:02}:{s:02} +0000"),
        format!("{wd} {mon} {d:>2} {h:02}:{mi:02}:{s:02} {y}"),
    )
}

/// Wrapped body text of exactly `len` bytes ending in `eol`, keywords in
/// its first lines. No line starts with `From ` (mbox-safe).
fn body_text(rng: &mut Rng, len: usize, keywords: &[String], eol: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 128);
    let mut line_len = 0;
    let mut pending: Vec<&String> = keywords.iter().collect();
    let mut sentence = Vec::new();
    while out.len() < len {
        sentence.clear();
        words::push_sentence(rng, &mut sentence);
        if let Some(k) = pending.pop() {
            sentence.push(b' ');
            sentence.extend_from_slice(k.as_bytes());
            sentence.push(b'.');
        }
        for w in sentence.split(|&c| c == b' ') {
            if line_len > 0 && line_len + 1 + w.len() > 72 {
                out.extend_from_slice(eol);
                line_len = 0;
            }
            if line_len > 0 {
                out.push(b' ');
                line_len += 1;
            }
            if line_len == 0 && w == b"From" {
                out.extend_from_slice(b"from");
            } else {
                out.extend_from_slice(w);
            }
            line_len += w.len();
        }
        if rng.below(4) == 0 {
            out.extend_from_slice(eol);
            out.extend_from_slice(eol);
            line_len = 0;
        }
    }
    let keep = len.saturating_sub(eol.len());
    out.truncate(keep);
    while out.last() == Some(&b'\r') {
        out.pop();
        out.push(b' ');
        if out.len() > keep {
            out.truncate(keep);
        }
    }
    out.extend_from_slice(eol);
    out.truncate(len);
    out
}

struct Att {
    name: String,
    mime: &'static str,
    data: Vec<u8>,
    members: u64,
}

fn make_attachment(
    rng: &mut Rng,
    budget: usize,
    pool: &Pool,
    when: u64,
) -> Result<Option<Att>, CorpusError> {
    let kinds = [
        Kind::Pdf,
        Kind::Jpeg,
        Kind::Docx,
        Kind::Text,
        Kind::Png,
        Kind::Xlsx,
    ];
    let kind = *rng.pick(&kinds);
    let min = kind.min_size(pool) as usize + 64;
    if budget < min.max(256) {
        return Ok(None);
    }
    let size = rng.range(min as u64, budget as u64) as usize;
    let key = rng.next_u64();
    let mut r = Rng::new(key);
    let plain = |bytes| super::zip::Zipped { bytes, members: 0 };
    let data = match kind {
        Kind::Pdf => plain(super::pdf::pdf(&mut r, size, &[], when)),
        Kind::Jpeg => {
            let v = pool.fit(Kind::Jpeg, size as u64, 64);
            plain(pool.jpeg(&mut r, v, size, &[], key)?)
        }
        Kind::Png => {
            let v = pool.fit(Kind::Png, size as u64, 64);
            plain(pool.png(&mut r, v, size, &[], key)?)
        }
        Kind::Docx => super::zip::docx(&mut r, size, &[], pool, when)?,
        Kind::Xlsx => super::zip::xlsx(&mut r, size, &[], pool, when)?,
        _ => plain(super::text::plain(&mut r, size, &[], &[])),
    };
    let stem = words::zipf_word(rng);
    let ext = kind.ext();
    Ok(Some(Att {
        name: format!("{stem}_{}.{ext}", rng.range(1, 999)),
        mime: kind.mime(),
        data: data.bytes,
        members: data.members,
    }))
}

/// One message of exactly `size` bytes (including, for mbox, its `From `
/// line and the blank line that ends it).
#[allow(clippy::too_many_arguments)]
fn message(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    pool: &Pool,
    when: u64,
    mbox: bool,
    index: u32,
    found: &mut Vec<Attachment>,
) -> Result<Vec<u8>, CorpusError> {
    let eol: &[u8] = if mbox { b"\n" } else { b"\r\n" };
    let mut e = String::new();
    let (rfc, asc) = dates(when);
    let mut from = Vec::new();
    words::push_email(rng, &mut from);
    let from = String::from_utf8_lossy(&from).into_owned();
    let mut to = Vec::new();
    words::push_email(rng, &mut to);
    let to = String::from_utf8_lossy(&to).into_owned();
    let (f, l) = words::person(rng);
    let mut subject = Vec::new();
    words::push_sentence(rng, &mut subject);
    subject.truncate(60);
    let subject = String::from_utf8_lossy(&subject).into_owned();
    let boundary = format!("----=_Part_{:016x}", rng.next_u64());
    let nl = if mbox { "\n" } else { "\r\n" };
    let mut head = String::new();
    if mbox {
        head.push_str(&format!("From {from} {asc}\n"));
    }
    for (k, v) in [
        ("Return-Path", format!("<{from}>")),
        (
            "Message-ID",
            format!("<{:016x}@{}>", rng.next_u64(), words::DOMAINS[0]),
        ),
        ("Date", rfc),
        ("From", format!("{f} {l} <{from}>")),
        ("To", to.clone()),
        ("Subject", subject),
        ("MIME-Version", "1.0".to_string()),
        (
            "Content-Type",
            format!("multipart/mixed; boundary=\"{boundary}\""),
        ),
    ] {
        e.push_str(&format!("{k}: {v}{nl}"));
    }
    head.push_str(&e);
    head.push_str(nl);
    head.push_str(&format!(
        "This is a multi-part message in MIME format.{nl}{nl}"
    ));
    let text_head = format!(
        "--{boundary}{nl}Content-Type: text/plain; charset=\"us-ascii\"{nl}Content-Transfer-Encoding: 7bit{nl}{nl}"
    );
    let closing = format!("--{boundary}--{nl}");
    let trailer = if mbox { nl } else { "" };
    let fixed = head.len() + text_head.len() + closing.len() + trailer.len();
    let min_body = 96 + keywords.iter().map(|k| k.len() + 2).sum::<usize>();
    if size < fixed + min_body {
        return Err(CorpusError::Encode {
            what: "e-mail",
            detail: format!("{size} bytes is too small for a message"),
        });
    }
    // Attachments take up to about 80% of what is left.
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut left = size - fixed - min_body;
    let n_att = if left > 4096 { rng.range(1, 2) } else { 0 };
    let mut atts = Vec::new();
    for _ in 0..n_att {
        let part_over = 200 + boundary.len() + 64;
        if left < part_over + 512 {
            break;
        }
        let budget = (left - part_over) * 3 / 4 * 4 / 5 / n_att as usize;
        if let Some(a) = make_attachment(rng, budget, pool, when)? {
            let mut p = format!(
                "{nl}--{boundary}{nl}Content-Type: {}; name=\"{}\"{nl}Content-Transfer-Encoding: base64{nl}Content-Disposition: attachment; filename=\"{}\"{nl}{nl}",
                a.mime, a.name, a.name
            )
            .into_bytes();
            p.reserve(base64_len(a.data.len(), eol.len()));
            base64_lines(&a.data, eol, &mut p);
            if p.len() > left {
                break;
            }
            left -= p.len();
            parts.push(p);
            atts.push(a);
        }
    }
    let attached: usize = parts.iter().map(|p| p.len()).sum();
    let body_len = size - fixed - attached;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(text_head.as_bytes());
    out.extend_from_slice(&body_text(rng, body_len, keywords, eol));
    for p in &parts {
        out.extend_from_slice(p);
    }
    // A part's closing delimiter must start on a new line.
    out.extend_from_slice(closing.as_bytes());
    out.extend_from_slice(trailer.as_bytes());
    for a in atts {
        found.push(Attachment {
            message: index,
            name: a.name,
            mime: a.mime.to_string(),
            size: a.data.len() as u64,
            md5: hex(&caseload_digests::Md5::digest(&a.data)),
            sha1: hex(&caseload_digests::Sha1::digest(&a.data)),
            sha256: hex(&caseload_digests::Sha256::digest(&a.data)),
            members: a.members,
        });
    }
    Ok(out)
}

/// A single `.eml` message of exactly `size` bytes.
pub fn eml(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    pool: &Pool,
    when: u64,
) -> Result<(Vec<u8>, Vec<Attachment>), CorpusError> {
    let mut found = Vec::new();
    let b = message(rng, size, keywords, pool, when, false, 0, &mut found)?;
    Ok((b, found))
}

/// Messages in a generated mailbox of `size` bytes (about one per 24 KB,
/// 1 to 60, each at least 1,500 bytes).
pub fn mbox_messages(size: usize) -> usize {
    (size / 24_000).clamp(1, 60).min(size / 1500).max(1)
}

/// An mboxrd mailbox of exactly `size` bytes holding several messages
/// ([`mbox_messages`] of them).
pub fn mbox(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    pool: &Pool,
    when: u64,
) -> Result<(Vec<u8>, Vec<Attachment>), CorpusError> {
    let per = 1500usize;
    let n = mbox_messages(size);
    let mut sizes = Vec::with_capacity(n);
    let mut left = size;
    for i in 0..n {
        let s = if i + 1 == n {
            left
        } else {
            let avg = left / (n - i);
            rng.range((avg / 2).max(per) as u64, (avg * 3 / 2).max(per) as u64) as usize
        };
        let s = s.min(left.saturating_sub(per * (n - i - 1)));
        sizes.push(s);
        left -= s;
    }
    let mut out = Vec::with_capacity(size);
    let mut found = Vec::new();
    let mut t = when.saturating_sub(86_400 * 90);
    for (i, s) in sizes.into_iter().enumerate() {
        t += rng.range(60, 86_400 * 2);
        let kw: &[String] = if i == 0 { keywords } else { &[] };
        out.extend_from_slice(&message(rng, s, kw, pool, t, true, i as u32, &mut found)?);
    }
    Ok((out, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_exact() {
        let pool = Pool::build(4).unwrap();
        let kw = vec!["qzbcdfghjk".to_string()];
        for size in [1024usize, 5000, 60_000, 400_000] {
            let mut r = Rng::new(size as u64);
            let (b, _) = eml(&mut r, size, &kw, &pool, 1 << 29).unwrap();
            assert_eq!(b.len(), size);
            assert!(b.windows(10).any(|w| w == b"qzbcdfghjk"));
            let (m, _) = mbox(&mut r, size * 2, &kw, &pool, 1 << 29).unwrap();
            assert_eq!(m.len(), size * 2);
            assert!(m.starts_with(b"From "));
            // mboxrd: a message starts with a line "From "; body lines that
            // would start so are quoted (">From "). The manifest's count
            // is the separators found.
            let separators = std::iter::once(&m[..])
                .chain(m.split(|&c| c == b'\n').skip(1))
                .filter(|line| line.starts_with(b"From "))
                .count();
            assert_eq!(separators, mbox_messages(size * 2), "size {}", size * 2);
        }
        let mut v = Vec::new();
        base64_lines(b"hello world, this is base64", b"\r\n", &mut v);
        assert_eq!(v.len(), base64_len(27, 2));
        assert_eq!(&v[..8], b"aGVsbG8g");
    }
}
