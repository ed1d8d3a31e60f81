//! The names and times of a Windows disk, whichever file system holds
//! them: local timestamps, long names and the 8.3 aliases Windows makes
//! (FAT stores them in its directory slots, NTFS in a DOS-namespace
//! `$FILE_NAME`). The logical plan speaks this vocabulary; each file
//! system's writer encodes it.

/// A local wall-clock time with 10 ms resolution (FAT's creation time;
/// NTFS keeps finer). Windows' FAT stores local time with no zone; so
/// does the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    /// Seconds since 1980-01-01 00:00:00 (local).
    pub secs: u64,
    /// Hundredths of a second (0..100).
    pub centis: u8,
}

pub use caseload_fs::calendar::{civil_from_days, days_from_civil};

/// Days between 1970-01-01 and 1980-01-01.
const DOS_EPOCH_DAYS: i64 = 3652;

impl Stamp {
    /// Seconds since 1980 of a civil date and time.
    pub fn from_civil(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Stamp {
        let days = days_from_civil(y, mo, d) - DOS_EPOCH_DAYS;
        Stamp {
            secs: (days.max(0) as u64) * 86_400 + (h * 3600 + mi * 60 + s) as u64,
            centis: 0,
        }
    }

    /// (year, month, day, hour, minute, second).
    pub fn parts(&self) -> (i64, u32, u32, u32, u32, u32) {
        let days = (self.secs / 86_400) as i64 + DOS_EPOCH_DAYS;
        let (y, m, d) = civil_from_days(days);
        let rem = (self.secs % 86_400) as u32;
        (y, m, d, rem / 3600, (rem / 60) % 60, rem % 60)
    }

    /// DOS date word (FAT entries, ZIP headers).
    pub fn dos_date(&self) -> u16 {
        let (y, m, d, ..) = self.parts();
        ((((y - 1980).clamp(0, 127)) as u16) << 9) | ((m as u16) << 5) | d as u16
    }

    /// DOS time word (2-second resolution).
    pub fn dos_time(&self) -> u16 {
        let (_, _, _, h, mi, s) = self.parts();
        ((h as u16) << 11) | ((mi as u16) << 5) | (s as u16 / 2)
    }

    /// The creation-time fine field: 10 ms units in 0..200 (odd second and
    /// hundredths).
    pub fn dos_tenths(&self) -> u8 {
        let (.., s) = self.parts();
        ((s % 2) * 100) as u8 + self.centis.min(99)
    }

    /// ISO-8601 local time as the manifest records it, e.g.
    /// `2019-04-12T10:22:31.47` (hundredths only when non-zero).
    pub fn iso(&self) -> String {
        let (y, m, d, h, mi, s) = self.parts();
        if self.centis == 0 {
            format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
        } else {
            format!(
                "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:02}",
                self.centis
            )
        }
    }

    /// The date alone, `YYYY-MM-DD` (FAT keeps only the date of last access).
    pub fn iso_date(&self) -> String {
        let (y, m, d, ..) = self.parts();
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// This time rounded down to FAT's 2-second modification resolution
    /// (the planner dates files so on either file system).
    pub fn even(self) -> Stamp {
        Stamp {
            secs: self.secs & !1,
            centis: 0,
        }
    }
}

/// The three timestamps both file systems keep (NTFS adds the MFT
/// change time, written as the modification time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// Creation (10 ms resolution).
    pub created: Stamp,
    /// Last modification (2 s resolution).
    pub modified: Stamp,
    /// Last access (date only).
    pub accessed: Stamp,
}

/// How one name is stored: the 8.3 slot, the optional long name and the
/// NT lower-case flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameForm {
    /// Padded 8.3 name as stored (upper case).
    pub short: [u8; 11],
    /// Long name, when the name does not fit 8.3.
    pub long: Option<String>,
    /// NT case flags (0x08 lower-case base, 0x10 lower-case extension).
    pub nt_flags: u8,
}

/// Whether the writer puts `c` in an 8.3 name as it is: upper-case
/// letters, digits and the punctuation Windows keeps (stricter than the
/// characters a reader accepts, `caseload_fs::fat::dir::is_83_char`).
fn writes_in_83(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit() || b"!#$%&'()-@^_`{}~".contains(&c) || c >= 0x80
}

/// Split `name` into (base, extension) at the last dot.
fn split_ext(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i + 1..]),
        _ => (name, ""),
    }
}

/// Whether `part` is non-empty 8.3 material once upper-cased, and whether it
/// was entirely lower or upper case (mixed case needs a long name).
fn fits_83(part: &str, max: usize) -> Option<bool> {
    if part.len() > max || !part.is_ascii() {
        return None;
    }
    let lower = part.bytes().any(|c| c.is_ascii_lowercase());
    let upper = part.bytes().any(|c| c.is_ascii_uppercase());
    if lower && upper {
        return None;
    }
    if part.bytes().all(|c| writes_in_83(c.to_ascii_uppercase())) {
        Some(lower)
    } else {
        None
    }
}

/// The 11-byte padded form of `BASE.EXT` (caller guarantees 8.3 chars).
fn pad83(base: &str, ext: &str) -> [u8; 11] {
    let mut out = [b' '; 11];
    for (i, c) in base.bytes().take(8).enumerate() {
        out[i] = c.to_ascii_uppercase();
    }
    for (i, c) in ext.bytes().take(3).enumerate() {
        out[8 + i] = c.to_ascii_uppercase();
    }
    out
}

/// Display form of an 11-byte short name: `REPORT~1.DOC`.
pub fn short_display(s: &[u8; 11]) -> String {
    let base: String = s[..8]
        .iter()
        .filter(|&&c| c != b' ')
        .map(|&c| c as char)
        .collect();
    let ext: String = s[8..]
        .iter()
        .filter(|&&c| c != b' ')
        .map(|&c| c as char)
        .collect();
    if ext.is_empty() {
        base
    } else {
        format!("{base}.{ext}")
    }
}

/// The name a stored form stands for: its long name, or its 8.3 name with
/// the NT lower-case flags applied (what a file system keeping one name
/// stores).
pub fn stored_name(form: &NameForm) -> String {
    if let Some(l) = &form.long {
        return l.clone();
    }
    let part = |b: &[u8], lower: bool| -> String {
        b.iter()
            .filter(|&&c| c != b' ')
            .map(|&c| {
                if lower {
                    c.to_ascii_lowercase() as char
                } else {
                    c as char
                }
            })
            .collect()
    };
    let base = part(&form.short[..8], form.nt_flags & 0x08 != 0);
    let ext = part(&form.short[8..], form.nt_flags & 0x10 != 0);
    if ext.is_empty() {
        base
    } else {
        format!("{base}.{ext}")
    }
}

/// Choose how to store `name` in a directory, as Windows does: a plain 8.3
/// name when it fits (using the NT lower-case flags for all-lower parts),
/// otherwise a long name plus a generated `BASIS~N.EXT` alias that
/// `taken` reports free. Returns `None` when no alias is free.
pub fn name_form(name: &str, taken: &dyn Fn(&[u8; 11]) -> bool) -> Option<NameForm> {
    let (base, ext) = split_ext(name);
    if !base.is_empty()
        && !name.starts_with('.')
        && name.matches('.').count() <= 1
        && let (Some(bl), Some(el)) = (fits_83(base, 8), fits_83(ext, 3))
    {
        let short = pad83(base, ext);
        if !taken(&short) {
            let nt = if bl { 0x08 } else { 0 } | if el { 0x10 } else { 0 };
            return Some(NameForm {
                short,
                long: None,
                nt_flags: nt,
            });
        }
    }
    let clean = |s: &str, max: usize| -> String {
        s.chars()
            .filter(|c| *c != ' ' && *c != '.')
            .map(|c| {
                let u = c.to_ascii_uppercase();
                if u.is_ascii() && writes_in_83(u as u8) && u != '~' {
                    u
                } else {
                    '_'
                }
            })
            .take(max)
            .collect()
    };
    let mut b = clean(base, 8);
    if b.is_empty() {
        b.push('F');
    }
    let e = clean(ext, 3);
    for n in 1..=999_999u32 {
        let tail = format!("~{n}");
        let keep = 8usize.saturating_sub(tail.len()).min(b.len());
        let short = pad83(&format!("{}{tail}", &b[..keep]), &e);
        if !taken(&short) {
            return Some(NameForm {
                short,
                long: Some(name.to_string()),
                nt_flags: 0,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_follow_windows_rules() {
        let none = |_: &[u8; 11]| false;
        let f = name_form("REPORT.TXT", &none).unwrap();
        assert_eq!(&f.short, b"REPORT  TXT");
        assert!(f.long.is_none());
        let f = name_form("notes.txt", &none).unwrap();
        assert_eq!(f.nt_flags, 0x18);
        assert!(f.long.is_none());
        let f = name_form("Quarterly report 2019.docx", &none).unwrap();
        assert_eq!(short_display(&f.short), "QUARTE~1.DOC");
        assert_eq!(f.long.as_deref(), Some("Quarterly report 2019.docx"));
        let taken = |s: &[u8; 11]| s == b"QUARTE~1DOC";
        let f = name_form("Quarterly report 2020.docx", &taken).unwrap();
        assert_eq!(short_display(&f.short), "QUARTE~2.DOC");
    }

    #[test]
    fn civil_round_trip() {
        for d in [-1000i64, 0, 3652, 18_000, 20_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
