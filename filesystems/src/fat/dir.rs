//! FAT directory entries: field access, TSK's validity tests, 8.3 and long
//! names, timestamps.

use crate::bytes::decode_utf16;
use crate::name::cp437;
use crate::record::Timestamp;

/// Attribute: read-only.
pub const ATTR_READ_ONLY: u8 = 0x01;
/// Attribute: volume label.
pub const ATTR_VOLUME: u8 = 0x08;
/// Attribute: directory.
pub const ATTR_DIRECTORY: u8 = 0x10;
/// Attribute: archive.
pub const ATTR_ARCHIVE: u8 = 0x20;
/// Attribute bits of a long-name piece.
pub const ATTR_LFN: u8 = 0x0F;
/// Every attribute bit FAT defines.
const ATTR_ALL: u8 = 0x3F;
const CASE_LOWER_BASE: u8 = 0x08;
const CASE_LOWER_EXT: u8 = 0x10;
/// First byte of a deleted entry.
pub const SLOT_DELETED: u8 = 0xE5;
/// A short name whose first character really is 0xE5 stores 0x05 there.
const SLOT_E5: u8 = 0x05;

/// One 32-byte directory entry: typed access to its fields. Every
/// accessor reads inside the 32 bytes the type guarantees.
#[derive(Clone, Copy)]
pub struct Dentry<'a>(pub &'a [u8; 32]);

impl<'a> Dentry<'a> {
    /// The entry at the start of `bytes`, if there are 32 of them.
    pub fn at(bytes: &'a [u8]) -> Option<Dentry<'a>> {
        bytes.get(..32)?.try_into().ok().map(Dentry)
    }
}

impl Dentry<'_> {
    fn u16(&self, o: usize) -> u16 {
        u16::from_le_bytes([self.0[o], self.0[o + 1]])
    }

    /// The 11 bytes of the 8.3 name (base and extension, space-padded).
    pub fn name_bytes(&self) -> &[u8] {
        &self.0[0..11]
    }
    /// Attribute byte.
    pub fn attr(&self) -> u8 {
        self.0[11]
    }
    /// Whether this is a long-name piece.
    pub fn is_lfn(&self) -> bool {
        self.attr() & ATTR_LFN == ATTR_LFN
    }
    /// Whether the entry is marked deleted (first byte 0xE5).
    pub fn is_deleted(&self) -> bool {
        self.0[0] == SLOT_DELETED
    }
    /// NT case flags (lower-case base 0x08, extension 0x10).
    pub fn lowercase(&self) -> u8 {
        self.0[12]
    }
    /// Creation time, hundredths of a second (0..199).
    pub fn ctime_tenths(&self) -> u8 {
        self.0[13]
    }
    /// Creation time.
    pub fn ctime(&self) -> u16 {
        self.u16(14)
    }
    /// Creation date.
    pub fn cdate(&self) -> u16 {
        self.u16(16)
    }
    /// Access date.
    pub fn adate(&self) -> u16 {
        self.u16(18)
    }
    /// High half of the start cluster (FAT32; zero elsewhere).
    pub fn cluster_high(&self) -> u16 {
        self.u16(20)
    }
    /// Modification time.
    pub fn wtime(&self) -> u16 {
        self.u16(22)
    }
    /// Modification date.
    pub fn wdate(&self) -> u16 {
        self.u16(24)
    }
    /// Start cluster; the high half is only meaningful on FAT32.
    pub fn cluster(&self, fat32: bool) -> u32 {
        let lo = u32::from(self.u16(26));
        if fat32 {
            lo | (u32::from(self.u16(20)) << 16)
        } else {
            lo
        }
    }
    /// Recorded size in bytes.
    pub fn size(&self) -> u32 {
        u32::from_le_bytes([self.0[28], self.0[29], self.0[30], self.0[31]])
    }

    /// Whether this is a `.` or `..` entry (a directory named by dots only).
    pub fn is_dot(&self) -> bool {
        self.attr() & ATTR_DIRECTORY != 0
            && !self.is_lfn()
            && (self.name_bytes() == b".          " || self.name_bytes() == b"..         ")
    }

    /// Modified, accessed and created times (FAT has no change time).
    pub fn times(&self) -> (Option<Timestamp>, Option<Timestamp>, Option<Timestamp>) {
        let m = dos_time(self.wdate(), self.wtime(), 0);
        let a = dos_time(self.adate(), 0, 0);
        let c = dos_time(self.cdate(), self.ctime(), self.ctime_tenths());
        (m, a, c)
    }

    // --- long-name entry fields ---

    /// A long-name piece's sequence byte (0x40: the last piece, stored first).
    pub fn lfn_seq(&self) -> u8 {
        self.0[0]
    }
    /// The checksum of the 8.3 name a long-name piece belongs to.
    pub fn lfn_checksum(&self) -> u8 {
        self.0[13]
    }
    /// The 13 UTF-16 units of a long-name piece.
    pub fn lfn_units(&self) -> [u16; 13] {
        let mut u = [0u16; 13];
        let offs = [1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30];
        for (i, &o) in offs.iter().enumerate() {
            u[i] = self.u16(o);
        }
        u
    }
}

/// TSK's character test for short names (`FATXXFS_IS_83_NAME`).
pub fn is_83_char(c: u8) -> bool {
    !(c < 0x20
        || c == 0x22
        || (0x2a..=0x2c).contains(&c)
        || c == 0x2e
        || c == 0x2f
        || (0x3a..=0x3f).contains(&c)
        || (0x5b..=0x5d).contains(&c)
        || c == 0x7c)
}

/// TSK's short-name validity test (`is_83_name`).
fn is_83_name(d: &Dentry<'_>) -> bool {
    let n = &d.0[0..8];
    let e = &d.0[8..11];
    if n[0] != SLOT_E5 && n[0] != b'.' && !is_83_char(n[0]) {
        return false;
    }
    if n[0] == 0x20 {
        return false;
    }
    if n[1] == b'.' {
        if n[0] != b'.' {
            return false;
        }
    } else if !is_83_char(n[1]) {
        return false;
    }
    if !n[2..].iter().chain(e.iter()).all(|&c| is_83_char(c)) {
        return false;
    }
    if d.attr() & ATTR_VOLUME != ATTR_VOLUME {
        // A space must be followed by spaces only (how Windows writes them).
        for w in n[1..].windows(2) {
            if w[0] == 0x20 && w[1] != 0x20 {
                return false;
            }
        }
        if e[1] == 0x20 && e[2] != 0x20 {
            return false;
        }
    }
    true
}

/// Whether a FAT date has a valid day and month.
pub fn is_date(x: u16) -> bool {
    let day = x & 0x1f;
    let mon = (x >> 5) & 0x0f;
    (1..=31).contains(&day) && (1..=12).contains(&mon)
}

/// Whether a FAT time has valid seconds/2, minutes and hours.
pub fn is_time(x: u16) -> bool {
    (x & 0x1f) <= 30 && ((x >> 5) & 0x3f) <= 59 && (x >> 11) <= 23
}

/// How strictly to test whether 32 bytes are a directory entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// TSK's basic test, used in allocated directory sectors.
    Basic,
    /// TSK's in-depth test, used in unallocated sectors (deleted directories)
    /// and in directories whose first entries are all invalid.
    Full,
}

/// What the validity test concluded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// A directory entry.
    Valid,
    /// Not a directory entry (free slot, end marker, garbage).
    Invalid,
    /// An entry TSK would skip but that sits in an allocated directory sector
    /// and is structurally an entry: it is reported, with this reason, so a
    /// damaged or hostile entry is not silently dropped.
    Suspect(&'static str),
}

/// Whether a 32-byte slot is a directory entry, following TSK's
/// `fatxxfs_is_dentry`. `last_cluster` and `data_bytes` bound the start
/// cluster and size. In [`Strictness::Basic`] mode the checks TSK applies
/// even to allocated sectors (start cluster, size, 8.3 characters) turn an
/// otherwise plausible entry into [`Verdict::Suspect`] instead of dropping it.
pub fn test_dentry(
    d: &Dentry<'_>,
    strictness: Strictness,
    fat32: bool,
    last_cluster: u32,
    data_bytes: u64,
    cluster_is_eof: impl Fn(u32) -> bool,
) -> Verdict {
    if d.is_lfn() {
        let seq = d.lfn_seq();
        // Ordinals 1..=63 with the optional last-piece flag, or a deleted piece.
        let ok = seq == SLOT_DELETED || (seq & 0x80 == 0 && seq & 0x3f != 0);
        return if ok { Verdict::Valid } else { Verdict::Invalid };
    }
    if d.0[0] == 0 {
        return Verdict::Invalid;
    }
    let full = strictness == Strictness::Full;
    if full {
        if d.lowercase() & !(CASE_LOWER_BASE | CASE_LOWER_EXT) != 0 || d.attr() & !ATTR_ALL != 0 {
            return Verdict::Invalid;
        }
        if d.attr() & ATTR_VOLUME != 0
            && d.attr() & (ATTR_DIRECTORY | ATTR_READ_ONLY | ATTR_ARCHIVE) != 0
        {
            return Verdict::Invalid;
        }
        if (d.ctime() != 0 && !is_time(d.ctime()))
            || (d.wtime() != 0 && !is_time(d.wtime()))
            || (d.cdate() != 0 && !is_date(d.cdate()))
            || d.ctime_tenths() > 200
            || (d.adate() != 0 && !is_date(d.adate()))
            || (d.wdate() != 0 && !is_date(d.wdate()))
        {
            return Verdict::Invalid;
        }
    }
    let clust = d.cluster(fat32);
    // TSK's "nearly all values zero" test: a slot with no date, cluster or
    // size is never an entry, whatever its name bytes.
    if d.ctime() == 0
        && d.wtime() == 0
        && d.cdate() == 0
        && d.adate() == 0
        && d.wdate() == 0
        && clust == 0
        && d.size() == 0
    {
        return Verdict::Invalid;
    }
    let reason = if clust > last_cluster && !cluster_is_eof(clust) {
        Some("start cluster past the last cluster")
    } else if u64::from(d.size()) > data_bytes {
        Some("size larger than the data area")
    } else if d.size() > 0 && clust == 0 {
        Some("non-zero size but no start cluster")
    } else if !is_83_name(d) {
        Some("invalid characters in the short name")
    } else {
        None
    };
    match reason {
        None => Verdict::Valid,
        Some(_) if full => Verdict::Invalid,
        // A live (not deleted) entry that is structurally an entry (no
        // undefined attribute or case bits): keep it, flagged. Deleted slots
        // failing a test are usually remnants (a deleted long-name piece
        // whose attribute byte was cleared), so they are dropped as TSK
        // drops them.
        Some(r)
            if !d.is_deleted()
                && d.attr() & !ATTR_ALL == 0
                && d.lowercase() & !(CASE_LOWER_BASE | CASE_LOWER_EXT) == 0 =>
        {
            Verdict::Suspect(r)
        }
        Some(_) => Verdict::Invalid,
    }
}

/// The short name as TSK builds it: spaces, NULs and 0xFF dropped, a
/// deleted entry's first character shown as `_`, the NT lower-case flags
/// applied, `.` before the extension. Bytes above 0x7F are decoded as code
/// page 437 (TSK shows `^`).
pub fn short_name(d: &Dentry<'_>) -> String {
    let mut s = String::new();
    let lower_base = d.lowercase() & CASE_LOWER_BASE != 0;
    let lower_ext = d.lowercase() & CASE_LOWER_EXT != 0;
    for (i, &c) in d.0[0..8].iter().enumerate() {
        if c == 0 || c == 0xff || c == 0x20 {
            continue;
        }
        if i == 0 && c == SLOT_DELETED {
            s.push('_');
        } else if i == 0 && c == SLOT_E5 {
            s.push(cp437(0xE5));
        } else if lower_base && c.is_ascii_uppercase() {
            s.push(char::from(c.to_ascii_lowercase()));
        } else {
            s.push(cp437(c));
        }
    }
    for (i, &c) in d.0[8..11].iter().enumerate() {
        if c == 0 || c == 0xff || c == 0x20 {
            continue;
        }
        if i == 0 {
            s.push('.');
        }
        if lower_ext && c.is_ascii_uppercase() {
            s.push(char::from(c.to_ascii_lowercase()));
        } else {
            s.push(cp437(c));
        }
    }
    s
}

/// A volume label's 11 characters, kept as they are (spaces included).
pub fn label_name(d: &Dentry<'_>) -> String {
    d.0[0..11].iter().map(|&c| cp437(c)).collect()
}

/// The checksum of an 8.3 name that long-name pieces carry.
pub fn lfn_checksum(name11: &[u8]) -> u8 {
    name11
        .iter()
        .fold(0u8, |sum, &c| sum.rotate_right(1).wrapping_add(c))
}

/// Long name assembled from pieces (given in name order): the decoded name
/// up to the NUL terminator, the raw units (padding trimmed), and problems.
pub struct LongName {
    /// The name (unpaired surrogates replaced).
    pub name: String,
    /// Its UTF-16LE bytes as stored, padding trimmed.
    pub raw: Vec<u8>,
    /// What is odd about it.
    pub problems: Vec<String>,
}

pub fn assemble_long_name(pieces: &[[u16; 13]]) -> LongName {
    let units: Vec<u16> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
    let mut problems = Vec::new();
    let end = units.iter().position(|&u| u == 0);
    let name_units = &units[..end.unwrap_or(units.len())];
    // Trailing 0xFFFF is padding when there is no terminator.
    let name_units = if end.is_none() {
        let keep = name_units
            .iter()
            .rposition(|&u| u != 0xFFFF)
            .map_or(0, |p| p + 1);
        &name_units[..keep]
    } else {
        name_units
    };
    // Raw units: everything stored, less the padding and the final
    // terminator.
    let mut raw_units = units.clone();
    while matches!(raw_units.last(), Some(0xFFFF)) {
        raw_units.pop();
    }
    if raw_units.last() == Some(&0) {
        raw_units.pop();
    }
    if let Some(e) = end {
        if units[e + 1..].iter().any(|&u| u != 0 && u != 0xFFFF) {
            problems.push("characters after the long name's NUL terminator".to_string());
        } else {
            raw_units.truncate(e);
        }
    }
    let (name, exact) = decode_utf16(name_units);
    if !exact {
        problems.push("long name holds unpaired UTF-16 surrogates".to_string());
    }
    let raw = raw_units.iter().flat_map(|u| u.to_le_bytes()).collect();
    LongName {
        name,
        raw,
        problems,
    }
}

/// A FAT date/time as TSK converts it with `TZ=UTC`: invalid dates give
/// `None`; out-of-range time fields are zeroed; creation tenths above 100
/// add a second; the tenths remainder gives the nanoseconds.
pub fn dos_time(date: u16, time: u16, tenths: u8) -> Option<Timestamp> {
    if !is_date(date) {
        return None;
    }
    let day = u32::from(date & 0x1f);
    let mon = u32::from((date >> 5) & 0x0f);
    let year = 1980 + i64::from(date >> 9);
    let mut sec = i64::from(time & 0x1f) * 2;
    if sec > 60 {
        sec = 0;
    }
    if tenths > 100 {
        sec += 1;
    }
    let mut min = i64::from((time >> 5) & 0x3f);
    if min > 59 {
        min = 0;
    }
    let mut hour = i64::from(time >> 11);
    if hour > 23 {
        hour = 0;
    }
    let days = crate::calendar::days_from_civil(year, mon, day);
    Some(Timestamp {
        secs: days * 86_400 + hour * 3600 + min * 60 + sec,
        nanos: u32::from(tenths % 100) * 10_000_000,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::days_from_civil;

    #[test]
    fn dos_times_match_tsk_for_the_daylight_image() {
        // winter.txt in DFTT #5: 2004-01-01 14:00:02 local, created 14:00:00
        // with 100+ tenths -> 14:00:01 (TSK bodyfile: 1072965602/1072965601).
        let date = ((2004 - 1980) << 9) | (1 << 5) | 1;
        let t = (14 << 11) | 1;
        assert_eq!(dos_time(date, t, 0).unwrap().secs, 1_072_965_602);
        assert_eq!(dos_time(date, 14 << 11, 150).unwrap().secs, 1_072_965_601);
        assert_eq!(dos_time(date, 14 << 11, 150).unwrap().nanos, 500_000_000);
        assert_eq!(dos_time(0, 0, 0), None);
        assert_eq!(dos_time(date & !0x1f, 0, 0), None);
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(
            days_from_civil(2004, 2, 29) + 1,
            days_from_civil(2004, 3, 1)
        );
        // Day 31 of February rolls into March, as mktime does.
        assert_eq!(days_from_civil(2003, 2, 31), days_from_civil(2003, 3, 3));
    }

    #[test]
    fn checksum_matches_the_specification_example() {
        // Checksum of "FILENA~1TXT" computed per the Microsoft FAT spec.
        let mut sum: u8 = 0;
        for &c in b"FILENA~1TXT" {
            sum = (if sum & 1 != 0 { 0x80u8 } else { 0 })
                .wrapping_add(sum >> 1)
                .wrapping_add(c);
        }
        assert_eq!(lfn_checksum(b"FILENA~1TXT"), sum);
    }

    #[test]
    fn long_names_stop_at_nul_and_report_what_follows() {
        let mut p = [0xFFFFu16; 13];
        for (i, c) in "ab".encode_utf16().enumerate() {
            p[i] = c;
        }
        p[2] = 0;
        let n = assemble_long_name(&[p]);
        assert_eq!(n.name, "ab");
        assert!(n.problems.is_empty());
        assert_eq!(n.raw, vec![b'a', 0, b'b', 0]);
        p[3] = u16::from(b'c');
        let n = assemble_long_name(&[p]);
        assert_eq!(n.name, "ab");
        assert_eq!(n.problems.len(), 1);
        assert_eq!(n.raw.len(), 8);
    }
}
