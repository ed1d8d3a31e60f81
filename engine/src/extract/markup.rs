//! HTML and XML to text: tags dropped, character references decoded,
//! script and style bodies skipped, and block-level boundaries turned into
//! line breaks so words of two paragraphs or cells never join.
//!
//! Written by hand because only text is wanted, from possibly broken
//! markup, in one pass without building a tree (an HTML5 parser such as
//! html5ever builds a DOM, and XML parsers stop at the first error).

use super::Extraction;

/// Whether the start of an item looks like an HTML page.
pub fn looks_like_html(head: &[u8]) -> bool {
    let n = head.len().min(1024);
    let lower: Vec<u8> = head[..n].iter().map(u8::to_ascii_lowercase).collect();
    let start = lower
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(lower.len());
    let body = &lower[start..];
    body.starts_with(b"<!doctype html")
        || body.starts_with(b"<html")
        || (body.starts_with(b"<")
            && [&b"<html"[..], b"<head", b"<body", b"<title"]
                .iter()
                .any(|t| memchr::memmem::find(body, t).is_some()))
}

/// Elements whose content is not text.
const SKIP_CONTENT: [&str; 2] = ["script", "style"];

/// Inline elements: their tags do not separate words.
const INLINE: [&str; 16] = [
    "a", "abbr", "b", "bdi", "bdo", "code", "em", "font", "i", "mark", "q", "s", "small", "span",
    "strong", "u",
];

/// XML elements (OOXML) whose end separates text: paragraphs, cells,
/// rows, shared strings, line breaks and tabs.
const XML_BREAKS: [&str; 8] = ["p", "br", "tab", "c", "si", "row", "tc", "tr"];

/// Decode one character reference body (`amp`, `#233`, `#xE9`).
fn reference(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "eacute" => 'é',
        "egrave" => 'è',
        "agrave" => 'à',
        "uuml" => 'ü',
        "ouml" => 'ö',
        "auml" => 'ä',
        "szlig" => 'ß',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "laquo" => '«',
        "raquo" => '»',
        _ => return None,
    })
}

/// Append `text` with character references decoded.
fn push_decoded(text: &str, out: &mut String) {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let end = after
            .char_indices()
            .take(12)
            .find(|(_, c)| *c == ';')
            .map(|(i, _)| i);
        match end.and_then(|e| reference(&after[..e]).map(|c| (e, c))) {
            Some((e, c)) => {
                out.push(c);
                rest = &after[e + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
}

/// The element name of a tag body (`p class=x` -> `p`, `/w:p` -> `p`),
/// lower-cased, without namespace prefix; and whether it is an end tag.
fn tag_name(tag: &str) -> (String, bool) {
    let (closing, body) = match tag.strip_prefix('/') {
        Some(b) => (true, b),
        None => (false, tag),
    };
    let name: String = body
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '/' && *c != '>')
        .collect::<String>()
        .to_ascii_lowercase();
    let local = match name.rfind(':') {
        Some(i) => name[i + 1..].to_string(),
        None => name,
    };
    (local, closing)
}

/// Markup to text; `xml` selects the OOXML rules (only paragraph-like ends
/// separate, and runs of one word join without a space).
fn markup_to_text(x: &mut Extraction<'_>, src: &str, xml: bool) {
    let mut out = String::with_capacity(src.len().min(1 << 20) / 2);
    let mut rest = src;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            push_decoded(rest, &mut out);
            break;
        };
        push_decoded(&rest[..lt], &mut out);
        rest = &rest[lt + 1..];
        if let Some(after) = rest.strip_prefix("!--") {
            rest = match after.find("-->") {
                Some(e) => &after[e + 3..],
                None => "",
            };
            continue;
        }
        if let Some(after) = rest.strip_prefix("![CDATA[") {
            let (cdata, next) = match after.find("]]>") {
                Some(e) => (&after[..e], &after[e + 3..]),
                None => (after, ""),
            };
            out.push_str(cdata);
            rest = next;
            continue;
        }
        // Find the tag's end, skipping quoted attribute values.
        let mut quote: Option<char> = None;
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '"' || c == '\'' => quote = Some(c),
                None if c == '>' => {
                    end = Some(i);
                    break;
                }
                None => {}
            }
        }
        let Some(end) = end else {
            // An unterminated tag: the rest is not text.
            break;
        };
        let (name, closing) = tag_name(&rest[..end]);
        rest = &rest[end + 1..];
        if xml {
            if closing && XML_BREAKS.contains(&name.as_str()) || name == "br" || name == "tab" {
                out.push(if name == "c" || name == "tab" {
                    ' '
                } else {
                    '\n'
                });
            }
        } else if !closing && SKIP_CONTENT.contains(&name.as_str()) {
            let close = format!("</{name}");
            let lower_find = find_ci(rest, &close);
            rest = match lower_find {
                Some(i) => &rest[i..],
                None => "",
            };
        } else if !INLINE.contains(&name.as_str()) {
            out.push('\n');
        }
        if out.len() >= 64 * 1024 {
            x.emit(&out);
            out.clear();
        }
    }
    x.emit(&out);
}

/// Case-insensitive ASCII search.
fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    let n = needle.as_bytes();
    hay.as_bytes()
        .windows(n.len())
        .position(|w| w.eq_ignore_ascii_case(n))
}

/// HTML (already decoded to a string) to text.
pub fn html_to_text(x: &mut Extraction<'_>, html: &str) {
    markup_to_text(x, html, false);
}

/// OOXML part (UTF-8 XML) to text.
pub fn xml_to_text(x: &mut Extraction<'_>, xml: &[u8]) {
    let text = String::from_utf8_lossy(xml);
    markup_to_text(x, &text, true);
}

#[cfg(test)]
mod tests {
    use super::super::{Extraction, Limits};
    use super::*;

    fn html(src: &str) -> String {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        html_to_text(&mut x, src);
        out
    }

    #[test]
    fn tags_scripts_and_references() {
        let t = html(
            "<html><head><title>T&amp;C</title><script>var qz = '<p>';</script>\
             <STYLE>p{}</STYLE></head><body><p>caf&eacute; <b>bo</b>ld&#x21;</p>\
             <a href=\"x>y\">link</a><!-- hidden --><p>two&nbsp;words &bogus; &#0;</p>",
        );
        let words: Vec<&str> = t.split_whitespace().collect();
        assert_eq!(
            words,
            [
                "T&C", "café", "bold!", "link", "two", "words", "&bogus;", "&#0;"
            ]
        );
        assert!(!t.contains("var"));
        assert!(!t.contains("hidden"));
    }

    #[test]
    fn ooxml_runs_join_and_paragraphs_separate() {
        let limits = Limits::default();
        let mut out = String::new();
        let mut x = Extraction::new(&limits, &mut out);
        xml_to_text(
            &mut x,
            b"<w:document><w:body><w:p><w:r><w:t>Hel</w:t></w:r><w:r><w:t xml:space=\"preserve\">lo</w:t></w:r></w:p>\
              <w:p><w:r><w:t>world &lt;3</w:t></w:r></w:p></w:body></w:document>",
        );
        let words: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(words, ["Hello", "world", "<3"]);
    }

    #[test]
    fn broken_markup_does_not_panic() {
        for s in [
            "<",
            "<p",
            "<p class='x",
            "&",
            "&#xZZZZ;",
            "<!--",
            "<![CDATA[x",
            "<script>",
        ] {
            let _ = html(s);
        }
    }
}
