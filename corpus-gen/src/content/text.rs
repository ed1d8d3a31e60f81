//! Plain text, logs and HTML, sized exactly.

use crate::names::Stamp;
use crate::rng::Rng;
use crate::words;

/// Overwrite `buf[at..]` with ` token ` so the token stands as its own word;
/// positions are clamped to stay inside the buffer.
fn put_token(buf: &mut [u8], at: usize, token: &str) {
    let t = token.as_bytes();
    if buf.len() < t.len() + 2 {
        return;
    }
    let at = at.clamp(1, buf.len() - t.len() - 1);
    buf[at - 1] = b' ';
    buf[at..at + t.len()].copy_from_slice(t);
    buf[at + t.len()] = b' ';
}

/// Place keywords: keyword `i` centred on `straddle[i]` when given (so it
/// crosses that offset, typically a cluster boundary), otherwise at a
/// random offset; `lo` keeps them clear of a header.
pub(super) fn place(
    rng: &mut Rng,
    buf: &mut [u8],
    lo: usize,
    keywords: &[String],
    straddle: &[u64],
) {
    for (i, k) in keywords.iter().enumerate() {
        let at = match straddle.get(i) {
            Some(&s) => (s as usize).saturating_sub(k.len() / 2),
            None => {
                let hi = buf.len().saturating_sub(k.len() + 2);
                rng.range(lo as u64 + 1, hi.max(lo + 1) as u64) as usize
            }
        };
        put_token(buf, at.max(lo + 1), k);
    }
}

/// A plain-text document of exactly `size` bytes.
pub fn plain(rng: &mut Rng, size: usize, keywords: &[String], straddle: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(size);
    words::fill_text(rng, &mut out, size);
    place(rng, &mut out, 0, keywords, straddle);
    out
}

const LEVELS: &[&str] = &["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"];
const MODULES: &[&str] = &[
    "updater",
    "sync",
    "net.http",
    "auth",
    "scheduler",
    "db.pool",
    "ui.main",
    "spooler",
    "backup",
];

/// Cut drawn lines to exactly `size` bytes, the last one a line end, and
/// plant the keywords.
fn finish_lines(
    rng: &mut Rng,
    mut out: Vec<u8>,
    size: usize,
    keywords: &[String],
    straddle: &[u64],
) -> Vec<u8> {
    out.truncate(size);
    if size > 0 {
        out[size - 1] = b'\n';
    }
    place(rng, &mut out, 0, keywords, straddle);
    out
}

/// An application log of exactly `size` bytes: timestamped lines.
pub fn log(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    straddle: &[u64],
    when: u64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 256);
    let mut t = when.saturating_sub(86_400 * 30);
    while out.len() < size {
        t += rng.range(0, 900);
        let s = Stamp { secs: t, centis: 0 };
        let iso = s.iso();
        out.extend_from_slice(iso.replacen('T', " ", 1).as_bytes());
        out.extend_from_slice(format!(".{:03} ", rng.below(1000)).as_bytes());
        out.extend_from_slice(rng.pick(LEVELS).as_bytes());
        out.extend_from_slice(b" [");
        out.extend_from_slice(rng.pick(MODULES).as_bytes());
        out.extend_from_slice(b"] ");
        words::push_sentence(rng, &mut out);
        out.extend_from_slice(b"\r\n");
    }
    finish_lines(rng, out, size, keywords, straddle)
}

/// Programs whose messages fill a server's syslog, with how often each
/// speaks.
const DAEMONS: &[(&str, u64)] = &[
    ("sshd", 6),
    ("CRON", 5),
    ("systemd", 5),
    ("kernel", 3),
    ("postfix/smtpd", 3),
    ("nginx", 2),
    ("dovecot", 2),
    ("sudo", 1),
    ("rsyslogd", 1),
];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A server's log as rsyslog writes it, exactly `size` bytes: `Mmm dd
/// hh:mm:ss host program[pid]: message` lines ending in `\n`, the last
/// `when`.
pub fn syslog(
    rng: &mut Rng,
    size: usize,
    keywords: &[String],
    straddle: &[u64],
    when: u64,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 256);
    let host = words::zipf_word(rng);
    let weights: Vec<f64> = DAEMONS.iter().map(|(_, w)| *w as f64).collect();
    let mut t = when.saturating_sub(86_400 * 7);
    while out.len() < size {
        t += rng.range(0, 300);
        let (_, mo, d, h, mi, s) = Stamp { secs: t, centis: 0 }.parts();
        let month = MONTHS[(mo as usize).clamp(1, 12) - 1];
        let (daemon, _) = DAEMONS[rng.weighted(&weights)];
        let line = format!("{month} {d:>2} {h:02}:{mi:02}:{s:02} {host} {daemon}");
        out.extend_from_slice(line.as_bytes());
        if daemon != "kernel" {
            out.extend_from_slice(format!("[{}]", rng.range(300, 65_000)).as_bytes());
        }
        out.extend_from_slice(b": ");
        match daemon {
            "sshd" => {
                let (first, _) = words::person(rng);
                let verb = *rng.pick(&["Accepted publickey", "Failed password", "Disconnected"]);
                out.extend_from_slice(
                    format!(
                        "{verb} for {} from 10.{}.{}.{} port {} ssh2",
                        first.to_ascii_lowercase(),
                        rng.below(256),
                        rng.below(256),
                        rng.range(1, 255),
                        rng.range(1024, 65_535)
                    )
                    .as_bytes(),
                );
            }
            "CRON" => out.extend_from_slice(
                format!("(root) CMD (/usr/local/bin/{}.sh)", words::zipf_word(rng)).as_bytes(),
            ),
            _ => words::push_sentence(rng, &mut out),
        }
        out.push(b'\n');
    }
    finish_lines(rng, out, size, keywords, straddle)
}

/// A configuration file as `/etc` holds them, exactly `size` bytes:
/// comment paragraphs and `key value` or `key = value` settings.
pub fn config(rng: &mut Rng, size: usize, keywords: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 256);
    let equals = rng.below(2) == 0;
    while out.len() < size {
        if rng.below(4) == 0 {
            out.extend_from_slice(b"# ");
            words::push_sentence(rng, &mut out);
            out.push(b'\n');
        }
        let key = words::zipf_word(rng);
        let value = match rng.below(4) {
            0 => rng.range(0, 65_536).to_string(),
            1 => (*rng.pick(&["yes", "no", "on", "off"])).to_string(),
            2 => format!("/var/lib/{}", words::zipf_word(rng)),
            _ => words::zipf_word(rng).to_string(),
        };
        let sep = if equals { " = " } else { " " };
        out.extend_from_slice(format!("{key}{sep}{value}\n").as_bytes());
    }
    finish_lines(rng, out, size, keywords, &[])
}

/// A PHP session file of exactly `size` bytes: `name|type:value;` pairs
/// as PHP's default serializer writes them (`user_id|i:42;` ,
/// `username|s:7:"dmartin";`, `logged_in|b:1;`), no line ends; the last
/// pair cut at the size.
pub fn php_session(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 128);
    while out.len() < size {
        let key = words::zipf_word(rng).to_ascii_lowercase();
        let pair = match rng.below(4) {
            0 => format!("{key}|i:{};", rng.range(0, 2_000_000_000)),
            1 => format!("{key}|b:{};", rng.below(2)),
            2 => {
                let token: String = (0..32)
                    .map(|_| char::from(b"0123456789abcdef"[rng.below(16) as usize]))
                    .collect();
                format!("{key}|s:32:\"{token}\";")
            }
            _ => {
                let v = words::zipf_word(rng);
                format!("{key}|s:{}:\"{v}\";", v.len())
            }
        };
        out.extend_from_slice(pair.as_bytes());
    }
    out.truncate(size);
    out
}

/// An HTML page of exactly `size` bytes (`size` ≥ 256).
pub fn html(rng: &mut Rng, size: usize, keywords: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 512);
    out.extend_from_slice(
        b"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
    );
    let mut title = Vec::new();
    words::push_sentence(rng, &mut title);
    title.retain(|c| *c != b'<' && *c != b'>' && *c != b'&');
    title.truncate(60);
    out.extend_from_slice(&title);
    out.extend_from_slice(b"</title>\n</head>\n<body>\n");
    let footer = b"</body>\n</html>\n";
    let mut pending: Vec<&String> = keywords.iter().collect();
    let mut para = Vec::new();
    loop {
        para.clear();
        para.extend_from_slice(b"<p>");
        let mut sentence = Vec::new();
        words::push_sentence(rng, &mut sentence);
        sentence.retain(|c| *c != b'<' && *c != b'>' && *c != b'&');
        para.extend_from_slice(&sentence);
        if let Some(k) = pending.pop() {
            para.push(b' ');
            para.extend_from_slice(k.as_bytes());
            para.push(b'.');
        }
        if rng.below(3) == 0 {
            para.extend_from_slice(b" <a href=\"");
            words::push_url(rng, &mut para);
            para.extend_from_slice(b"\">");
            para.extend_from_slice(words::zipf_word(rng).as_bytes());
            para.extend_from_slice(b"</a>");
        }
        para.extend_from_slice(b"</p>\n");
        if out.len() + para.len() + footer.len() > size {
            break;
        }
        out.extend_from_slice(&para);
    }
    // Whitespace between elements is insignificant in HTML.
    while out.len() + footer.len() < size {
        out.push(if out.len() % 80 == 0 { b'\n' } else { b' ' });
    }
    out.extend_from_slice(footer);
    out.truncate(size);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_exact_and_keywords_present() {
        let kw = vec!["qzbcdfghjk".to_string(), "qzlmnpstvw".to_string()];
        for size in [0usize, 1, 30, 511, 512, 4096, 100_000] {
            let mut r = Rng::new(size as u64);
            let t = plain(&mut r, size, &kw, &[]);
            assert_eq!(t.len(), size);
            let l = log(&mut r, size, &kw, &[], 1_000_000_000);
            assert_eq!(l.len(), size);
        }
        let mut r = Rng::new(3);
        let t = plain(&mut r, 4096, &kw, &[2048, 1024]);
        let at = t.windows(10).position(|w| w == b"qzbcdfghjk").unwrap();
        assert!(at < 2048 && at + 10 > 2048);
        for size in [256usize, 300, 5000, 80_000] {
            let h = html(&mut r, size, &kw);
            assert_eq!(h.len(), size);
            assert!(h.ends_with(b"</html>\n"));
        }
        let h = html(&mut r, 20_000, &kw);
        assert!(h.windows(10).any(|w| w == b"qzlmnpstvw"));
    }
}
