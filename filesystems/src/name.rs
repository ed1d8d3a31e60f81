//! Names from evidence: decoding, and an escaped form that is safe to show.
//!
//! Names are stored verbatim. Evidence can hold names such as `..`, names
//! with `/` or NUL inside, control characters or hundreds of characters;
//! none of that is altered in [`crate::FileRecord::name`]. Anything that
//! displays a name or builds a path from it must use [`escape_component`].

/// Code page 437, the OEM code page FAT short names are written in on most
/// systems, for bytes 0x80..=0xFF.
const CP437_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»\
░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀\
αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";

/// Decodes one OEM (code page 437) byte. Bytes below 0x80 are ASCII,
/// including control characters, which are kept as they are.
pub(crate) fn cp437(b: u8) -> char {
    if b < 0x80 {
        char::from(b)
    } else {
        CP437_HIGH
            .chars()
            .nth(usize::from(b - 0x80))
            .unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

/// Escapes one path component so that it is unambiguous and harmless to
/// display or to use as a single file-name component:
///
/// - `\` becomes `\\`, `/` becomes `\x2f`;
/// - control characters (C0, DEL, C1, including NUL) become `\xNN` or
///   `\u{NNNN}`;
/// - the names `.` and `..` become `\x2e` and `\x2e\x2e`;
/// - the empty name becomes `\x`.
///
/// Every other character is kept, so ordinary names are unchanged.
pub fn escape_component(name: &str) -> String {
    match name {
        "" => return "\\x".to_string(),
        "." => return "\\x2e".to_string(),
        ".." => return "\\x2e\\x2e".to_string(),
        _ => {}
    }
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\x2f"),
            c if c.is_control() => {
                let v = u32::from(c);
                if v < 0x100 {
                    out.push_str(&format!("\\x{v:02x}"));
                } else {
                    out.push_str(&format!("\\u{{{v:04x}}}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Longest name a FAT long name or an NTFS `$FILE_NAME` may legally hold.
pub(crate) const MAX_NAME_CHARS: usize = 255;

/// Why a name is hostile or unusual, if it is: the caller records this as a
/// processing error and keeps the name as it is.
pub(crate) fn hostile_reason(name: &str) -> Option<String> {
    let mut reasons = Vec::new();
    match name {
        "" => reasons.push("empty name".to_string()),
        "." | ".." => reasons.push(format!("name is `{name}`")),
        _ => {}
    }
    if name.contains('/') {
        reasons.push("contains `/`".to_string());
    }
    if name.contains('\0') {
        reasons.push("contains NUL".to_string());
    }
    if name.chars().any(|c| c.is_control() && c != '\0') {
        reasons.push("contains control characters".to_string());
    }
    let n = name.chars().count();
    if n > MAX_NAME_CHARS {
        reasons.push(format!("{n} characters long (limit {MAX_NAME_CHARS})"));
    }
    if reasons.is_empty() {
        None
    } else {
        Some(format!(
            "hostile name `{}`: {}",
            escape_component(&truncate_chars(name, 64)),
            reasons.join(", ")
        ))
    }
}

fn truncate_chars(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cp437_covers_the_high_half() {
        assert_eq!(CP437_HIGH.chars().count(), 128);
        assert_eq!(cp437(0x41), 'A');
        assert_eq!(cp437(0x80), 'Ç');
        assert_eq!(cp437(0xE5), 'σ');
        assert_eq!(cp437(0xFF), '\u{a0}');
    }

    #[test]
    fn escaping_makes_hostile_names_inert_and_keeps_plain_ones() {
        assert_eq!(escape_component("report.doc"), "report.doc");
        assert_eq!(escape_component("ünïcødé 文件"), "ünïcødé 文件");
        assert_eq!(escape_component(".."), "\\x2e\\x2e");
        assert_eq!(escape_component("a/b"), "a\\x2fb");
        assert_eq!(escape_component("a\\b"), "a\\\\b");
        assert_eq!(escape_component("a\0b\x07"), "a\\x00b\\x07");
        assert_eq!(escape_component("\u{85}"), "\\x85");
        assert_eq!(escape_component(""), "\\x");
        // The escaped form of a hostile name never contains a separator or
        // a control character.
        for hostile in ["../../etc/passwd", "\0", "x/\u{1b}[2J", "..."] {
            let e = escape_component(hostile);
            assert!(!e.contains('/') && !e.chars().any(char::is_control));
        }
    }

    #[test]
    fn hostile_reasons_name_each_problem() {
        assert!(hostile_reason("normal.txt").is_none());
        assert!(hostile_reason("..").unwrap().contains("`..`"));
        let r = hostile_reason("a/b\0c\x01").unwrap();
        assert!(r.contains("`/`") && r.contains("NUL") && r.contains("control"));
        let long = "x".repeat(3000);
        assert!(hostile_reason(&long).unwrap().contains("3000 characters"));
    }
}
