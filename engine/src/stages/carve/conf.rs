//! Signature files in scalpel.conf / foremost.conf syntax.
//!
//! One signature per line: `extension case-sensitive max-size header
//! [footer] [REVERSE|NEXT|FORWARD|FORWARD_NEXT]`, whitespace-separated;
//! `#` starts a comment line; `wildcard C` changes the wildcard character
//! (default `?`). Headers and footers are decoded as both tools document:
//! `\xHH` hexadecimal, `\ooo` octal, `\s` a space, `\` before any other
//! character that character; after decoding, every byte equal to the
//! wildcard character matches any byte (so `\x3f` is a wildcard too, as
//! their documentation warns). `NONE` as the extension means none. The
//! case field is `y`/`yes`/`n`/`no`; the size is bytes (a decimal number,
//! up to 2^64-1).
//!
//! Anything else is an error naming the file and line, because a signature
//! silently skipped is a file silently not carved.

use super::pattern::Pattern;
use std::path::{Path, PathBuf};

/// How a footer ends an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FooterMode {
    /// The item runs to the end of the first footer after the header.
    Forward,
    /// The item runs to the end of the last footer within the maximum size.
    Reverse,
    /// The item stops just before the first footer (footer excluded).
    Next,
}

/// One signature read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSignature {
    /// Extension for carved files (empty for `NONE`).
    pub extension: String,
    /// Header pattern.
    pub header: Pattern,
    /// Footer pattern, if any.
    pub footer: Option<Pattern>,
    /// How the footer ends an item.
    pub mode: FooterMode,
    /// Maximum item size in bytes.
    pub max_size: u64,
    /// Line number in the file (1-based), for reports.
    pub line: usize,
}

/// A signature file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfError {
    /// The file could not be read.
    #[error("signature file `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line is wrong.
    #[error("signature file `{}`, line {line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file defines no signature at all.
    #[error("signature file `{}` defines no signature (every line is empty or a comment)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Largest signature file read: real ones are a few KiB; this bounds memory
/// whatever path is given.
const MAX_FILE: u64 = 4 << 20;

/// Read and parse a signature file.
pub fn load(path: &Path) -> Result<Vec<UserSignature>, ConfError> {
    let read_err = |source| ConfError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.len() > MAX_FILE {
        return Err(ConfError::Line {
            path: path.to_path_buf(),
            line: 1,
            message: format!(
                "file is {} bytes; signature files over {MAX_FILE} bytes are refused",
                meta.len()
            ),
        });
    }
    let bytes = std::fs::read(path).map_err(read_err)?;
    parse(&bytes, path)
}

/// Parse signature-file text; `path` is only used in errors.
pub fn parse(text: &[u8], path: &Path) -> Result<Vec<UserSignature>, ConfError> {
    let mut wildcard = b'?';
    let mut out = Vec::new();
    for (n, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = n + 1;
        let err = |message: String| ConfError::Line {
            path: path.to_path_buf(),
            line,
            message,
        };
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let tokens: Vec<&[u8]> = raw
            .split(|b| b.is_ascii_whitespace())
            .filter(|t| !t.is_empty())
            .collect();
        let Some(first) = tokens.first() else {
            continue;
        };
        if first.starts_with(b"#") {
            continue;
        }
        if first.eq_ignore_ascii_case(b"wildcard") {
            match tokens.as_slice() {
                [_, w] if w.len() == 1 => wildcard = w[0],
                _ => return Err(err("`wildcard` takes exactly one character".into())),
            }
            continue;
        }
        out.push(signature(&tokens, wildcard, line).map_err(err)?);
    }
    if out.is_empty() {
        return Err(ConfError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

fn text(token: &[u8]) -> String {
    String::from_utf8_lossy(token).into_owned()
}

fn signature(tokens: &[&[u8]], wildcard: u8, line: usize) -> Result<UserSignature, String> {
    if tokens.len() < 4 {
        return Err(format!(
            "expected `extension case-sensitive max-size header [footer] [REVERSE|NEXT]`, found {} field(s)",
            tokens.len()
        ));
    }
    if tokens.len() > 6 {
        return Err(format!(
            "too many fields ({}); a signature has at most 6",
            tokens.len()
        ));
    }
    let ext = tokens[0];
    let extension = if ext == b"NONE" {
        String::new()
    } else if ext
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
    {
        text(ext)
    } else {
        return Err(format!(
            "extension `{}` may hold only letters, digits, `_` and `-` (or be NONE)",
            text(ext)
        ));
    };
    let case_insensitive = match tokens[1].to_ascii_lowercase().as_slice() {
        b"y" | b"yes" => false,
        b"n" | b"no" => true,
        _ => {
            return Err(format!(
                "case-sensitive field `{}` must be y or n",
                text(tokens[1])
            ));
        }
    };
    let max_size = std::str::from_utf8(tokens[2])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .ok_or_else(|| {
            format!(
                "maximum size `{}` must be a whole number of bytes above 0 (at most 18446744073709551615)",
                text(tokens[2])
            )
        })?;
    let header =
        decode(tokens[3], wildcard, case_insensitive).map_err(|e| format!("header: {e}"))?;
    if header.all_wild() {
        return Err("header is only wildcards, which would match everywhere".into());
    }
    let keyword = |t: &[u8]| match t.to_ascii_uppercase().as_slice() {
        b"REVERSE" => Some(Ok(FooterMode::Reverse)),
        b"NEXT" => Some(Ok(FooterMode::Next)),
        b"FORWARD" | b"FORWARD_NEXT" => Some(Ok(FooterMode::Forward)),
        b"ASCII" => Some(Err(
            "the ASCII option (foremost) is not supported".to_string()
        )),
        _ => None,
    };
    let (footer, mode) = match (tokens.get(4), tokens.get(5)) {
        (None, _) => (None, FooterMode::Forward),
        (Some(f), None) => match keyword(f) {
            Some(_) => return Err(format!("`{}` needs a footer before it", text(f))),
            None => (Some(*f), FooterMode::Forward),
        },
        (Some(f), Some(k)) => match keyword(k) {
            Some(Ok(m)) => (Some(*f), m),
            Some(Err(e)) => return Err(e),
            None => {
                return Err(format!(
                    "unknown keyword `{}` after the footer (REVERSE, NEXT or FORWARD)",
                    text(k)
                ));
            }
        },
    };
    let footer = match footer {
        Some(f) => {
            let p = decode(f, wildcard, case_insensitive).map_err(|e| format!("footer: {e}"))?;
            if p.all_wild() {
                return Err("footer is only wildcards, which would match everywhere".into());
            }
            Some(p)
        }
        None => None,
    };
    Ok(UserSignature {
        extension,
        header,
        footer,
        mode,
        max_size,
        line,
    })
}

/// Decode a header or footer token into a pattern.
fn decode(token: &[u8], wildcard: u8, case_insensitive: bool) -> Result<Pattern, String> {
    let mut bytes = Vec::with_capacity(token.len());
    let mut i = 0;
    while i < token.len() {
        let c = token[i];
        if c != b'\\' {
            bytes.push(c);
            i += 1;
            continue;
        }
        let Some(&next) = token.get(i + 1) else {
            return Err("a lone `\\` ends the pattern".into());
        };
        match next {
            b'x' | b'X' => {
                let hex = token
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        format!(
                            "`\\x` at byte {} must be followed by two hexadecimal digits",
                            i + 1
                        )
                    })?;
                bytes.push(hex);
                i += 4;
            }
            b'0'..=b'3'
                if token
                    .get(i + 2..i + 4)
                    .is_some_and(|d| d.iter().all(|c| (b'0'..=b'7').contains(c))) =>
            {
                let v = (u32::from(next - b'0') << 6)
                    | (u32::from(token[i + 2] - b'0') << 3)
                    | u32::from(token[i + 3] - b'0');
                bytes.push(u8::try_from(v).unwrap_or(u8::MAX));
                i += 4;
            }
            b's' => {
                bytes.push(b' ');
                i += 2;
            }
            other => {
                bytes.push(other);
                i += 2;
            }
        }
    }
    if bytes.is_empty() {
        return Err("empty pattern".into());
    }
    let wild = bytes.iter().map(|&b| b == wildcard).collect();
    Ok(Pattern::new(bytes, wild, case_insensitive))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Vec<UserSignature>, ConfError> {
        parse(text.as_bytes(), Path::new("test.conf"))
    }

    #[test]
    fn scalpel_lines_parse() {
        let sigs = p(concat!(
            "# comment\n",
            "\n",
            "\tgif\ty\t5000000\t\t\\x47\\x49\\x46\\x38\\x37\\x61\t\\x00\\x3b\n",
            "jpg y 5242880 \\xff\\xd8\\xff???Exif \\xff\\xd9 REVERSE\n",
            "doc y 10000000 \\xd0\\xcf\\x11\\xe0 \\xd0\\xcf\\x11\\xe0 NEXT\r\n",
            "NONE n 1000 FOREMOST\n",
            "htm n 50000 <html </html>\n",
            "x y 10 \\x4F\\123\\I\\sCCI\n",
        ))
        .unwrap();
        assert_eq!(sigs.len(), 6);
        assert_eq!(sigs[0].extension, "gif");
        assert!(sigs[0].header.matches_at(b"GIF87a"));
        assert!(sigs[0].footer.as_ref().unwrap().matches_at(b"\x00\x3b"));
        assert_eq!(sigs[0].line, 3);
        assert_eq!(sigs[1].mode, FooterMode::Reverse);
        assert!(sigs[1].header.matches_at(b"\xff\xd8\xff\xe1\x12\x34Exif"));
        assert_eq!(sigs[2].mode, FooterMode::Next);
        assert_eq!(sigs[3].extension, "");
        assert!(sigs[3].header.matches_at(b"foremost"));
        assert!(sigs[3].footer.is_none());
        assert!(sigs[4].header.matches_at(b"<HTML"));
        // The example from both tools' documentation.
        assert!(sigs[5].header.matches_at(b"OSI CCI"));
    }

    #[test]
    fn wildcard_can_be_redefined() {
        let sigs = p("wildcard *\nmov y 100 ****moov\nq y 100 a?b\n").unwrap();
        assert!(sigs[0].header.matches_at(b"\0\0\0\x10moov"));
        assert!(sigs[1].header.matches_at(b"a?b"));
        assert!(!sigs[1].header.matches_at(b"axb"));
    }

    #[test]
    fn terabyte_sizes_are_accepted() {
        let sigs = p("big y 18446744073709551615 BIG\n").unwrap();
        assert_eq!(sigs[0].max_size, u64::MAX);
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, usize, &str)] = &[
            ("jpg y\n", 1, "found 2 field"),
            ("# c\njpg maybe 100 \\xff\n", 2, "must be y or n"),
            ("jpg y 0 \\xff\n", 1, "above 0"),
            ("jpg y 12x \\xff\n", 1, "whole number"),
            ("jpg y 99999999999999999999 \\xff\n", 1, "whole number"),
            ("jpg y 100 \\xZZ\n", 1, "two hexadecimal digits"),
            ("jpg y 100 ab\\\n", 1, "lone"),
            ("jpg y 100 ???\n", 1, "only wildcards"),
            ("jpg y 100 ab cd SIDEWAYS\n", 1, "unknown keyword"),
            ("jpg y 100 ab REVERSE\n", 1, "needs a footer"),
            ("jpg y 100 ab cd NEXT extra\n", 1, "at most 6"),
            ("j/../pg y 100 ab\n", 1, "extension"),
            ("wildcard ab\n", 1, "one character"),
            ("txt y 100 ab cd ASCII\n", 1, "ASCII"),
        ];
        for (text, line, needle) in cases {
            match p(text) {
                Err(ConfError::Line {
                    line: l, message, ..
                }) => {
                    assert_eq!(l, *line, "{text:?}: {message}");
                    assert!(message.contains(needle), "{text:?}: {message}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(matches!(p("# only\n\n"), Err(ConfError::Empty { .. })));
        let e = p("\n\njpg y 0 x\n").unwrap_err().to_string();
        assert!(e.contains("test.conf") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn installed_configuration_files_parse_when_uncommented() {
        // The example files shipped with scalpel and foremost: nearly every
        // signature line, uncommented, parses; the few that do not (a stray
        // trailing backslash in foremost's MP3 examples) fail with their
        // own line number.
        for path in ["/etc/scalpel/scalpel.conf", "/etc/foremost.conf"] {
            let Ok(text) = std::fs::read(path) else {
                eprintln!("SKIPPED {path}: not installed");
                continue;
            };
            let (mut ok, mut bad) = (0, 0);
            for (n, l) in text.split(|&b| b == b'\n').enumerate() {
                let t: Vec<u8> = l
                    .iter()
                    .skip_while(|b| b.is_ascii_whitespace())
                    .copied()
                    .collect();
                let body = t.strip_prefix(b"#").unwrap_or(&t);
                let fields: Vec<&[u8]> = body
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|f| !f.is_empty())
                    .collect();
                let looks_like_sig = fields.len() >= 4
                    && matches!(fields[1], b"y" | b"n" | b"Y" | b"N")
                    && fields[2].iter().all(u8::is_ascii_digit);
                if !looks_like_sig {
                    continue;
                }
                // Keep line numbers: pad with empty lines.
                let mut one = vec![b'\n'; n];
                one.extend_from_slice(body);
                match parse(&one, Path::new(path)) {
                    Ok(s) => {
                        assert_eq!(s[0].line, n + 1);
                        ok += 1;
                    }
                    Err(ConfError::Line { line, .. }) => {
                        assert_eq!(line, n + 1);
                        bad += 1;
                    }
                    Err(e) => panic!("{path}: {e}"),
                }
            }
            assert!(
                ok > 20 && bad * 10 < ok,
                "{path}: {ok} parsed, {bad} refused"
            );
        }
    }
}
