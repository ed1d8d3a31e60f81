//! FAT on-disk structures: boot sectors, FSInfo, directory entries with long
//! names, 8.3 short names and timestamps.
//!
//! Written by hand because the job is to *emit* a precisely planned volume
//! (deleted entries, chosen cluster runs, non-zero slack) as one sequential
//! stream; file-system crates such as `fatfs` build volumes through a
//! seekable device and choose allocation themselves.

pub mod layout;

use crate::names::{NameForm, Times};
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
    use crate::names::{Stamp, name_form};

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
}
