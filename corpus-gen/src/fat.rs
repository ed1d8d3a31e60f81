//! FAT on-disk structures: boot sectors, FSInfo, directory entries with long
//! names, 8.3 short names and timestamps.
//!
//! Written by hand because the job is to *emit* a precisely planned volume
//! (deleted entries, chosen cluster runs, non-zero slack) as one sequential
//! stream; file-system crates such as `fatfs` build volumes through a
//! seekable device and choose allocation themselves.

use serde::{Deserialize, Serialize};

/// FAT variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FatType {
    /// 12-bit FAT (at most 4084 clusters).
    #[serde(rename = "FAT12")]
    Fat12,
    /// 16-bit FAT (4085..=65524 clusters).
    #[serde(rename = "FAT16")]
    Fat16,
    /// 32-bit FAT (at least 65525 clusters).
    #[serde(rename = "FAT32")]
    Fat32,
}

impl FatType {
    /// End-of-chain marker written in the FAT.
    pub fn eoc(self) -> u32 {
        match self {
            FatType::Fat12 => 0xFFF,
            FatType::Fat16 => 0xFFFF,
            FatType::Fat32 => 0x0FFF_FFFF,
        }
    }

    /// Name as `fsstat` and the manifest print it.
    pub fn name(self) -> &'static str {
        match self {
            FatType::Fat12 => "FAT12",
            FatType::Fat16 => "FAT16",
            FatType::Fat32 => "FAT32",
        }
    }
}

/// Attribute bits of a directory entry.
pub mod attr {
    /// Read-only.
    pub const READ_ONLY: u8 = 0x01;
    /// Hidden.
    pub const HIDDEN: u8 = 0x02;
    /// System.
    pub const SYSTEM: u8 = 0x04;
    /// Directory.
    pub const DIRECTORY: u8 = 0x10;
    /// Archive (set on every file Windows writes).
    pub const ARCHIVE: u8 = 0x20;
    /// The combination marking a long-name slot.
    pub const LFN: u8 = 0x0F;
}

/// First byte of a deleted slot.
pub const DELETED: u8 = 0xE5;

/// A local wall-clock time with FAT's 10 ms creation resolution.
/// FAT stores local time with no zone; so does the manifest.
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

    fn parts(&self) -> (i64, u32, u32, u32, u32, u32) {
        let days = (self.secs / 86_400) as i64 + DOS_EPOCH_DAYS;
        let (y, m, d) = civil_from_days(days);
        let rem = (self.secs % 86_400) as u32;
        (y, m, d, rem / 3600, (rem / 60) % 60, rem % 60)
    }

    /// FAT date word.
    pub fn dos_date(&self) -> u16 {
        let (y, m, d, ..) = self.parts();
        ((((y - 1980).clamp(0, 127)) as u16) << 9) | ((m as u16) << 5) | d as u16
    }

    /// FAT time word (2-second resolution).
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

    /// This time rounded down to FAT's 2-second modification resolution.
    pub fn even(self) -> Stamp {
        Stamp {
            secs: self.secs & !1,
            centis: 0,
        }
    }
}

/// The three timestamps FAT keeps.
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

/// The checksum of an 8.3 name that ties long-name slots to it (the
/// reader's own, so writer and parser cannot disagree).
pub fn lfn_checksum(short: &[u8; 11]) -> u8 {
    caseload_fs::fat::dir::lfn_checksum(short)
}

/// Number of 32-byte slots the name takes (long-name slots plus the 8.3 slot).
pub fn slots(form: &NameForm) -> usize {
    1 + form
        .long
        .as_ref()
        .map(|l| l.encode_utf16().count().div_ceil(13))
        .unwrap_or(0)
}

/// One directory record to encode.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// The stored name.
    pub form: &'a NameForm,
    /// Attribute byte.
    pub attr: u8,
    /// First cluster (0 for empty files).
    pub cluster: u32,
    /// Size in bytes (0 for directories).
    pub size: u32,
    /// Timestamps.
    pub times: Times,
    /// Whether the slots are marked deleted.
    pub deleted: bool,
}

fn short_slot(out: &mut Vec<u8>, name: &[u8; 11], r: &Record<'_>, nt: u8) {
    let start = out.len();
    out.extend_from_slice(name);
    if r.deleted {
        out[start] = DELETED;
    }
    out.push(r.attr);
    out.push(nt);
    out.push(r.times.created.dos_tenths());
    out.extend_from_slice(&r.times.created.dos_time().to_le_bytes());
    out.extend_from_slice(&r.times.created.dos_date().to_le_bytes());
    out.extend_from_slice(&r.times.accessed.dos_date().to_le_bytes());
    out.extend_from_slice(&((r.cluster >> 16) as u16).to_le_bytes());
    out.extend_from_slice(&r.times.modified.dos_time().to_le_bytes());
    out.extend_from_slice(&r.times.modified.dos_date().to_le_bytes());
    out.extend_from_slice(&(r.cluster as u16).to_le_bytes());
    out.extend_from_slice(&r.size.to_le_bytes());
}

/// Append the slots of one record: long-name slots (last part first, as on
/// disk) then the 8.3 slot.
pub fn encode(out: &mut Vec<u8>, r: &Record<'_>) {
    if let Some(long) = &r.form.long {
        let units: Vec<u16> = long.encode_utf16().collect();
        let n = units.len().div_ceil(13);
        let sum = lfn_checksum(&r.form.short);
        for seq in (1..=n).rev() {
            let mut part = [0xFFFFu16; 13];
            for (i, slot) in part.iter_mut().enumerate() {
                let idx = (seq - 1) * 13 + i;
                if idx < units.len() {
                    *slot = units[idx];
                } else if idx == units.len() {
                    *slot = 0;
                }
            }
            let mut ord = seq as u8;
            if seq == n {
                ord |= 0x40;
            }
            if r.deleted {
                ord = DELETED;
            }
            out.push(ord);
            for u in &part[0..5] {
                out.extend_from_slice(&u.to_le_bytes());
            }
            out.push(attr::LFN);
            out.push(0);
            out.push(sum);
            for u in &part[5..11] {
                out.extend_from_slice(&u.to_le_bytes());
            }
            out.extend_from_slice(&[0, 0]);
            for u in &part[11..13] {
                out.extend_from_slice(&u.to_le_bytes());
            }
        }
    }
    short_slot(out, &r.form.short, r, r.form.nt_flags);
}

/// Append the `.` and `..` slots that open every subdirectory.
pub fn encode_dots(out: &mut Vec<u8>, own: u32, parent: u32, times: Times) {
    let dot = NameForm {
        short: *b".          ",
        long: None,
        nt_flags: 0,
    };
    let dotdot = NameForm {
        short: *b"..         ",
        long: None,
        nt_flags: 0,
    };
    for (form, cl) in [(&dot, own), (&dotdot, parent)] {
        // `.` and `..` keep their names even inside a deleted directory:
        // deletion marks only the directory's own entry in its parent.
        let r = Record {
            form,
            attr: attr::DIRECTORY,
            cluster: cl,
            size: 0,
            times,
            deleted: false,
        };
        short_slot(out, &form.short, &r, 0);
    }
}

/// The name The Sleuth Kit's `fls` prints for an entry: the long name when
/// there is one (TSK reads deleted long-name slots too), otherwise the 8.3
/// name with NT case flags applied and, for a deleted entry, `_` in place
/// of the first character (its byte was overwritten by 0xE5).
pub fn tsk_name(form: &NameForm, deleted: bool) -> String {
    if let Some(l) = &form.long {
        return l.clone();
    }
    let mut s = String::new();
    for (i, &c) in form.short[..8].iter().enumerate() {
        if c == b' ' {
            continue;
        }
        if i == 0 && deleted {
            s.push('_');
        } else if form.nt_flags & 0x08 != 0 {
            s.push(c.to_ascii_lowercase() as char);
        } else {
            s.push(c as char);
        }
    }
    let ext: Vec<u8> = form.short[8..]
        .iter()
        .copied()
        .filter(|&c| c != b' ')
        .collect();
    if !ext.is_empty() {
        s.push('.');
        for c in ext {
            if form.nt_flags & 0x10 != 0 {
                s.push(c.to_ascii_lowercase() as char);
            } else {
                s.push(c as char);
            }
        }
    }
    s
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
        assert_eq!(slots(&f), 1 + 2);
    }

    #[test]
    fn lfn_checksum_matches_reference() {
        // Reference value computed with the algorithm in Microsoft's FAT
        // specification for "README  TXT".
        let mut sum: u8 = 0;
        for &c in b"README  TXT" {
            sum = (if sum & 1 != 0 { 0x80u8 } else { 0 })
                .wrapping_add(sum >> 1)
                .wrapping_add(c);
        }
        assert_eq!(lfn_checksum(b"README  TXT"), sum);
    }

    #[test]
    fn entries_encode_to_slots() {
        let none = |_: &[u8; 11]| false;
        let f = name_form("A long file name.txt", &none).unwrap();
        let t = Stamp::from_civil(2019, 4, 12, 10, 22, 31);
        let times = Times {
            created: t,
            modified: t.even(),
            accessed: t,
        };
        let mut out = Vec::new();
        encode(
            &mut out,
            &Record {
                form: &f,
                attr: attr::ARCHIVE,
                cluster: 0x12345,
                size: 999,
                times,
                deleted: false,
            },
        );
        assert_eq!(out.len(), 32 * slots(&f));
        assert_eq!(out[0], 0x42);
        assert_eq!(out[32], 0x01);
        let s = &out[64..96];
        assert_eq!(u16::from_le_bytes([s[20], s[21]]), 1);
        assert_eq!(u16::from_le_bytes([s[26], s[27]]), 0x2345);
        assert_eq!(u32::from_le_bytes([s[28], s[29], s[30], s[31]]), 999);
        assert_eq!(t.iso(), "2019-04-12T10:22:31");
        assert_eq!(t.dos_tenths(), 100);
        let mut del = Vec::new();
        encode(
            &mut del,
            &Record {
                form: &f,
                attr: attr::ARCHIVE,
                cluster: 5,
                size: 1,
                times,
                deleted: true,
            },
        );
        assert_eq!(del[0], DELETED);
        assert_eq!(del[64], DELETED);
        assert_eq!(tsk_name(&f, true), "A long file name.txt");
        let g = name_form("notes.txt", &none).unwrap();
        assert_eq!(tsk_name(&g, true), "_otes.txt");
        assert_eq!(tsk_name(&g, false), "notes.txt");
    }

    #[test]
    fn civil_round_trip() {
        for d in [-1000i64, 0, 3652, 18_000, 20_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
