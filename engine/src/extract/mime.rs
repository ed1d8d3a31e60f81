//! E-mail: RFC 5322 messages with MIME bodies (multipart, base64,
//! quoted-printable, RFC 2047 encoded words) and mbox mailboxes. Address
//! and subject headers are indexed with the body; every attachment is
//! decoded and extracted recursively as an item of its own format.
//!
//! Written by hand rather than with a mail crate because malformed mail
//! must still give its text (a missing closing boundary, a bad base64
//! line, an unknown charset), every decoded byte must count against the
//! item's expansion cap, and nesting must stop at the depth cap.

use super::Extraction;
use super::markup;
use super::text::push_latin1;

/// Headers whose values are indexed.
const INDEXED_HEADERS: [&str; 9] = [
    "from", "to", "cc", "bcc", "reply-to", "sender", "subject", "date", "x-to",
];

/// Headers typical of a message, for sniffing.
const MAIL_HEADERS: [&str; 10] = [
    "from:",
    "to:",
    "subject:",
    "date:",
    "message-id:",
    "mime-version:",
    "received:",
    "return-path:",
    "content-type:",
    "delivered-to:",
];

/// Whether the start of an item looks like a message or an mbox.
pub fn looks_like_mail(head: &[u8]) -> bool {
    if crate::signature::is_from_line(head) {
        return true;
    }
    let mut known = 0;
    for line in head[..head.len().min(4096)].split(|&b| b == b'\n').take(40) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return false;
        };
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return false;
        }
        let lower: Vec<u8> = line[..=colon].to_ascii_lowercase();
        if MAIL_HEADERS
            .iter()
            .any(|h| h.as_bytes() == lower.as_slice())
        {
            known += 1;
        }
    }
    known >= 2
}

/// Extract a message or mailbox.
pub fn extract(x: &mut Extraction<'_>, data: &[u8], depth: u32) {
    if crate::signature::is_from_line(data) {
        for (k, message) in mbox_messages(data).into_iter().enumerate() {
            // Skip the envelope line.
            let body = match memchr::memchr(b'\n', message) {
                Some(i) => &message[i + 1..],
                None => &[][..],
            };
            x.enter_member("mbox", &format!("message {}", k + 1), body, true);
            entity(x, body, depth);
            x.leave_member();
            x.separate();
        }
    } else {
        entity(x, data, depth);
    }
}

/// Split an mbox at its "From_" lines (a body line that merely begins
/// with "From " does not start a message).
fn mbox_messages(data: &[u8]) -> Vec<&[u8]> {
    let mut starts = vec![0usize];
    for i in memchr::memmem::find_iter(data, b"\nFrom ") {
        if crate::signature::is_from_line(&data[i + 1..]) {
            starts.push(i + 1);
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| &data[s..starts.get(k + 1).copied().unwrap_or(data.len())])
        .collect()
}

/// One header: name (lower-case) and unfolded value.
struct Header {
    name: String,
    value: String,
}

/// Split an entity into headers and body at the first empty line.
fn split_entity(data: &[u8]) -> (Vec<Header>, &[u8], bool) {
    let mut headers: Vec<Header> = Vec::new();
    let mut pos = 0;
    let mut found_blank = false;
    while pos < data.len() {
        let end = memchr::memchr(b'\n', &data[pos..]).map_or(data.len(), |i| pos + i);
        let line = &data[pos..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let next = (end + 1).min(data.len());
        if line.is_empty() {
            found_blank = true;
            pos = next;
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            if let Some(h) = headers.last_mut() {
                h.value.push(' ');
                push_latin1_or_utf8(line.trim_ascii(), &mut h.value);
            }
        } else if let Some(colon) = line.iter().position(|&b| b == b':') {
            let mut value = String::new();
            push_latin1_or_utf8(line[colon + 1..].trim_ascii(), &mut value);
            headers.push(Header {
                name: String::from_utf8_lossy(&line[..colon])
                    .trim()
                    .to_ascii_lowercase(),
                value,
            });
        } else {
            // Not a header: the headers ended without a blank line.
            break;
        }
        pos = next;
    }
    if !found_blank && headers.is_empty() {
        return (headers, data, false);
    }
    (headers, &data[pos.min(data.len())..], found_blank)
}

fn push_latin1_or_utf8(bytes: &[u8], out: &mut String) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => push_latin1(bytes, out),
    }
}

/// A header value's main token (lower-case) and its parameters.
fn parse_params(value: &str) -> (String, Vec<(String, String)>) {
    let mut parts = split_unquoted(value, ';').into_iter();
    let main = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let params = parts
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            Some((k.trim().to_ascii_lowercase(), v.to_string()))
        })
        .collect();
    (main, params)
}

fn split_unquoted(s: &str, sep: char) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in s.chars() {
        if c == '"' {
            quoted = !quoted;
        }
        if c == sep && !quoted {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name || k.strip_suffix('*') == Some(name))
        .map(|(_, v)| v.as_str())
}

/// Decode RFC 2047 encoded words (`=?utf-8?B?...?=`) in a header value.
fn decode_words(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    let mut after_word = false;
    while let Some(start) = rest.find("=?") {
        let after = &rest[start + 2..];
        let parsed = (|| {
            let (charset, after) = after.split_once('?')?;
            let (enc, after) = after.split_once('?')?;
            let (text, after) = after.split_once("?=")?;
            let bytes = match enc {
                "B" | "b" => base64(text.as_bytes()).0,
                "Q" | "q" => quoted_printable(text.replace('_', " ").as_bytes()),
                _ => return None,
            };
            let mut s = String::new();
            decode_charset(&bytes, Some(charset), &mut s);
            Some((s, after))
        })();
        match parsed {
            Some((s, after)) => {
                let before = &rest[..start];
                // Whitespace between two encoded words is not text.
                if !(after_word && before.trim().is_empty()) {
                    out.push_str(before);
                }
                out.push_str(&s);
                rest = after;
                after_word = true;
            }
            None => {
                out.push_str(&rest[..start + 2]);
                rest = after;
                after_word = false;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Bytes in a declared charset to text (UTF-8, UTF-16, else Latin-1).
fn decode_charset(bytes: &[u8], charset: Option<&str>, out: &mut String) {
    let cs = charset.unwrap_or("us-ascii").to_ascii_lowercase();
    match cs.as_str() {
        "utf-16" | "utf-16le" | "utf-16be" => {
            let be = cs == "utf-16be" || bytes.starts_with(&[0xFE, 0xFF]);
            let units = bytes.chunks_exact(2).map(|p| {
                if be {
                    u16::from_be_bytes([p[0], p[1]])
                } else {
                    u16::from_le_bytes([p[0], p[1]])
                }
            });
            out.extend(char::decode_utf16(units).map(|c| c.unwrap_or('\u{FFFD}')));
        }
        "utf-8" | "utf8" | "us-ascii" | "ascii" => out.push_str(&String::from_utf8_lossy(bytes)),
        _ => push_latin1_or_utf8(bytes, out),
    }
}

/// Lenient base64: characters outside the alphabet are skipped (line
/// breaks, stray spaces); returns the bytes and whether anything odd was
/// seen.
pub fn base64(input: &[u8]) -> (Vec<u8>, bool) {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        })
    }
    let mut out = Vec::with_capacity(input.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    let mut odd = false;
    for &c in input {
        match val(c) {
            Some(v) => {
                acc = (acc << 6) | v;
                bits += 6;
                if bits >= 8 {
                    bits -= 8;
                    out.push((acc >> bits) as u8);
                    acc &= (1 << bits) - 1;
                }
            }
            None if c == b'=' || c.is_ascii_whitespace() => {}
            None => odd = true,
        }
    }
    (out, odd)
}

/// Quoted-printable decoding; a malformed escape is kept as is.
pub fn quoted_printable(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    let hex = |c: u8| (c as char).to_digit(16);
    while i < input.len() {
        let c = input[i];
        if c == b'=' {
            match (input.get(i + 1), input.get(i + 2)) {
                (Some(b'\r'), Some(b'\n')) => i += 3,
                (Some(b'\n'), _) => i += 2,
                (Some(&a), Some(&b)) => match (hex(a), hex(b)) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                    }
                    _ => {
                        out.push(c);
                        i += 1;
                    }
                },
                _ => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Parts of a multipart body; also whether the closing delimiter was seen.
fn multipart_parts<'a>(body: &'a [u8], boundary: &str) -> (Vec<&'a [u8]>, bool) {
    let delim = format!("--{boundary}");
    let d = delim.as_bytes();
    let mut parts = Vec::new();
    let mut closed = false;
    let mut current: Option<usize> = None;
    let mut pos = 0;
    while pos < body.len() {
        let end = memchr::memchr(b'\n', &body[pos..]).map_or(body.len(), |i| pos + i);
        let line = &body[pos..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let next = (end + 1).min(body.len());
        if line.starts_with(d) {
            let tail = &line[d.len()..];
            if let Some(start) = current.take() {
                // The line break before a delimiter belongs to it.
                let mut stop = pos;
                if stop > start && body[stop - 1] == b'\n' {
                    stop -= 1;
                    if stop > start && body[stop - 1] == b'\r' {
                        stop -= 1;
                    }
                }
                parts.push(&body[start..stop]);
            }
            if tail.starts_with(b"--") {
                closed = true;
                break;
            }
            current = Some(next);
        }
        pos = next;
    }
    if let Some(start) = current {
        parts.push(&body[start..]);
    }
    (parts, closed)
}

/// One MIME entity (a message, or a part of one).
fn entity(x: &mut Extraction<'_>, data: &[u8], depth: u32) {
    let (headers, body, blank) = split_entity(data);
    if !blank && !headers.is_empty() && !body.is_empty() {
        x.problem("malformed MIME: headers not followed by an empty line");
    }
    let mut content_type = String::from("text/plain");
    let mut params = Vec::new();
    let mut encoding = String::new();
    let mut filename: Option<String> = None;
    for h in &headers {
        match h.name.as_str() {
            "content-type" => (content_type, params) = parse_params(&h.value),
            "content-transfer-encoding" => encoding = h.value.trim().to_ascii_lowercase(),
            "content-disposition" => {
                let (_, p) = parse_params(&h.value);
                filename = param(&p, "filename").map(str::to_string);
            }
            name if INDEXED_HEADERS.contains(&name) => {
                let mut line = String::with_capacity(h.value.len() + 16);
                line.push_str(&h.name);
                line.push_str(": ");
                line.push_str(&decode_words(&h.value));
                line.push('\n');
                x.emit(&line);
            }
            _ => {}
        }
    }
    let attachment_name = filename
        .or_else(|| param(&params, "name").map(str::to_string))
        .map(|name| decode_words(&name));
    if let Some(name) = &attachment_name {
        x.emit(name);
        x.separate();
    }
    if content_type.starts_with("multipart/") {
        let Some(boundary) = param(&params, "boundary").filter(|b| !b.is_empty()) else {
            x.problem("malformed MIME: multipart without a boundary; body read as text");
            text_body(x, body, None);
            return;
        };
        let (parts, closed) = multipart_parts(body, boundary);
        if !closed {
            x.problem(format!(
                "malformed MIME: multipart boundary `{boundary}` is never closed"
            ));
        }
        if depth + 1 > x.limits().max_depth {
            x.problem("MIME parts nested too deeply; inner parts not extracted");
            return;
        }
        for part in parts {
            entity(x, part, depth + 1);
            x.separate();
        }
        return;
    }
    let decoded: std::borrow::Cow<'_, [u8]> = match encoding.as_str() {
        "base64" => {
            let (bytes, odd) = base64(body);
            if odd {
                x.problem("malformed MIME: characters outside base64 skipped");
            }
            bytes.into()
        }
        "quoted-printable" => quoted_printable(body).into(),
        _ => body.into(),
    };
    if matches!(encoding.as_str(), "base64" | "quoted-printable") && !x.expand(decoded.len() as u64)
    {
        return;
    }
    if content_type == "message/rfc822" || content_type == "message/global" {
        if depth + 1 > x.limits().max_depth {
            x.problem("messages nested too deeply; inner message not extracted");
            return;
        }
        x.enter_member(
            "mail",
            attachment_name.as_deref().unwrap_or("message"),
            &decoded,
            true,
        );
        entity(x, &decoded, depth + 1);
        x.leave_member();
    } else if content_type.starts_with("text/") {
        // A named text part is an attached file as well as text.
        if let Some(name) = &attachment_name {
            x.enter_member("mail", name, &decoded, true);
        }
        if content_type == "text/html" {
            let mut s = String::new();
            decode_charset(&decoded, param(&params, "charset"), &mut s);
            markup::html_to_text(x, &s);
        } else {
            text_body(x, &decoded, param(&params, "charset"));
        }
        if attachment_name.is_some() {
            x.leave_member();
        }
    } else {
        // An attachment: extract it as an item of its own format.
        let cap = x.member_cap(depth + 1);
        if decoded.len() > cap {
            x.problem(format!(
                "attachment of {} bytes is larger than the {cap}-byte cap; only its start is extracted",
                decoded.len()
            ));
        }
        let kept = &decoded[..decoded.len().min(cap)];
        x.enter_member(
            "mail",
            attachment_name.as_deref().unwrap_or("attachment"),
            kept,
            kept.len() == decoded.len(),
        );
        x.extract(kept, depth + 1);
        x.leave_member();
    }
}

fn text_body(x: &mut Extraction<'_>, body: &[u8], charset: Option<&str>) {
    let mut s = String::with_capacity(body.len());
    decode_charset(body, charset, &mut s);
    x.emit(&s);
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Limits};
    use super::*;

    fn run(data: &[u8]) -> (String, Vec<String>) {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        extract(&mut x, data, 0);
        let p = x.problems.clone();
        (out, p)
    }

    #[test]
    fn multipart_with_base64_qp_and_encoded_words() {
        let attachment = b"attached words inside";
        let b64: String = {
            const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut s = String::new();
            for c in attachment.chunks(3) {
                let n = (u32::from(c[0]) << 16)
                    | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                    | u32::from(*c.get(2).unwrap_or(&0));
                s.push(A[(n >> 18) as usize & 63] as char);
                s.push(A[(n >> 12) as usize & 63] as char);
                s.push(if c.len() > 1 {
                    A[(n >> 6) as usize & 63] as char
                } else {
                    '='
                });
                s.push(if c.len() > 2 {
                    A[n as usize & 63] as char
                } else {
                    '='
                });
            }
            s
        };
        let msg = format!(
            "From: Alice <alice@example.org>\r\nTo: bob@example.net\r\nSubject: =?utf-8?B?w6l0w6k=?= report\r\n\
             MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"XX\"\r\n\r\npreamble\r\n\
             --XX\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
             caf=E9 soft=\r\nbreak\r\n--XX\r\nContent-Type: application/octet-stream; name=\"a.txt\"\r\n\
             Content-Transfer-Encoding: base64\r\n\r\n{b64}\r\n--XX--\r\n"
        );
        let (text, problems) = run(msg.as_bytes());
        assert!(problems.is_empty(), "{problems:?}");
        for want in [
            "alice@example.org",
            "bob@example.net",
            "été report",
            "café softbreak",
            "attached words inside",
            "a.txt",
        ] {
            assert!(text.contains(want), "{want:?} not in {text:?}");
        }
        assert!(!text.contains("preamble"));
    }

    #[test]
    fn malformed_mime_is_reported_not_fatal() {
        let (text, problems) = run(
            b"From: x@y.example\nTo: z@y.example\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\
              Content-Type: text/plain\n\nunclosed part text\n",
        );
        assert!(text.contains("unclosed part text"));
        assert!(
            problems.iter().any(|p| p.contains("never closed")),
            "{problems:?}"
        );
        let (_, problems) =
            run(b"From: x@y.example\nTo: q@r.example\nContent-Type: multipart/mixed\n\nbody");
        assert!(problems.iter().any(|p| p.contains("without a boundary")));
    }

    #[test]
    fn text_beginning_with_from_is_not_a_mailbox() {
        // Found by a generated ZIP whose notes began "From the ...": taken
        // for an mbox, its first paragraph was read as headers and lost
        // from the index.
        let text = b"From the garden Amy Walker wrote qzwvbbbbxm.\r\n\r\nNext paragraph.\r\n";
        assert!(!looks_like_mail(text));
        let mbox =
            b"From a@b Thu Jan  1 00:00:00 2020\nSubject: one\n\nFrom the start, a body line.\n\
              From c@d Thu Jan  1 00:00:01 2020\nSubject: two\n\nsecond\n";
        assert!(looks_like_mail(mbox));
        // The body line beginning "From the" does not split the message.
        assert_eq!(mbox_messages(mbox).len(), 2);
    }

    #[test]
    fn mbox_messages_are_all_read() {
        let (text, _) = run(
            b"From a@b Thu Jan  1 00:00:00 2020\nFrom: a@b.example\nSubject: one\n\nfirst body\n\n\
              From c@d Thu Jan  1 00:00:00 2020\nFrom: c@d.example\nSubject: two\n\nsecond body\n",
        );
        assert!(text.contains("first body") && text.contains("second body"));
        assert!(text.contains("c@d.example"));
    }

    #[test]
    fn nested_messages_stop_at_the_depth_cap() {
        let mut msg = b"Subject: innermost\n\ndeep text\n".to_vec();
        for _ in 0..20 {
            let mut outer =
                b"From: a@b.example\nTo: c@d.example\nContent-Type: message/rfc822\n\n".to_vec();
            outer.extend_from_slice(&msg);
            msg = outer;
        }
        let (text, problems) = run(&msg);
        assert!(!text.contains("deep text"));
        assert!(
            problems.iter().any(|p| p.contains("nested")),
            "{problems:?}"
        );
    }
}
