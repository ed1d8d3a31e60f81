//! MFT (`FILE`) records and their attributes, built as Windows lays them
//! out: attributes in type order, each 8-byte aligned, instance numbers in
//! creation order, the update sequence (fixup) array applied last.

use super::{RECORD_BYTES, SECTOR};

/// Attribute type `$STANDARD_INFORMATION`.
pub const AT_STANDARD_INFORMATION: u32 = 0x10;
/// Attribute type `$FILE_NAME`.
pub const AT_FILE_NAME: u32 = 0x30;
/// Attribute type `$SECURITY_DESCRIPTOR`.
pub const AT_SECURITY_DESCRIPTOR: u32 = 0x50;
/// Attribute type `$VOLUME_NAME`.
pub const AT_VOLUME_NAME: u32 = 0x60;
/// Attribute type `$VOLUME_INFORMATION`.
pub const AT_VOLUME_INFORMATION: u32 = 0x70;
/// Attribute type `$DATA`.
pub const AT_DATA: u32 = 0x80;
/// Attribute type `$INDEX_ROOT`.
pub const AT_INDEX_ROOT: u32 = 0x90;
/// Attribute type `$INDEX_ALLOCATION`.
pub const AT_INDEX_ALLOCATION: u32 = 0xA0;
/// Attribute type `$BITMAP`.
pub const AT_BITMAP: u32 = 0xB0;

/// Record flag: in use.
pub const MFT_IN_USE: u16 = 0x0001;
/// Record flag: a directory (has a `$I30` index).
pub const MFT_DIRECTORY: u16 = 0x0002;
/// Record flag set on `$Extend` files.
pub const MFT_IS_4: u16 = 0x0004;
/// Record flag: holds a view index (`$Secure`, `$ObjId`, ...).
pub const MFT_VIEW_INDEX: u16 = 0x0008;

/// Offset of the update sequence array in a `FILE` record.
const USA_OFFSET: usize = 0x30;
/// Offset of the first attribute.
const FIRST_ATTR: usize = 0x38;

/// A 48-bit record number and 16-bit sequence number, as references store
/// them.
pub fn file_ref(record: u64, seq: u16) -> u64 {
    (record & 0x0000_FFFF_FFFF_FFFF) | ((seq as u64) << 48)
}

/// A cluster run of a non-resident attribute: `lcn` `None` is sparse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRun {
    /// First logical cluster, or `None` for a sparse (unallocated) run.
    pub lcn: Option<u64>,
    /// Length in clusters.
    pub len: u64,
}

/// Bytes needed for `v` as a little-endian two's complement integer.
fn signed_len(v: i64) -> usize {
    let mut n = 1;
    while n < 8 {
        let lim = 1i64 << (8 * n - 1);
        if v >= -lim && v < lim {
            break;
        }
        n += 1;
    }
    n
}

/// Encode a run list (mapping pairs), terminated by a zero byte.
pub fn encode_runs(runs: &[DataRun]) -> Vec<u8> {
    let mut out = Vec::with_capacity(runs.len() * 6 + 1);
    let mut prev = 0i64;
    for r in runs {
        if r.len == 0 {
            continue;
        }
        // Lengths are stored like offsets, as signed numbers (ntfs-3g and
        // Windows refuse a length whose top bit is set).
        let ll = signed_len(r.len as i64);
        match r.lcn {
            Some(lcn) => {
                let delta = lcn as i64 - prev;
                let ol = signed_len(delta);
                out.push(((ol as u8) << 4) | ll as u8);
                out.extend_from_slice(&r.len.to_le_bytes()[..ll]);
                out.extend_from_slice(&delta.to_le_bytes()[..ol]);
                prev = lcn as i64;
            }
            None => {
                out.push(ll as u8);
                out.extend_from_slice(&r.len.to_le_bytes()[..ll]);
            }
        }
    }
    out.push(0);
    out
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

/// Sizes of a non-resident attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonResident {
    /// Bytes allocated (whole clusters).
    pub allocated: u64,
    /// Logical size.
    pub size: u64,
    /// Bytes written (valid data length).
    pub initialized: u64,
    /// Compressed or sparse stream: its header's extra facts.
    pub packed: Option<Packed>,
}

/// What a compressed or sparse non-resident attribute's header adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packed {
    /// [`ATTR_COMPRESSED`] and/or [`ATTR_SPARSE`].
    pub flags: u16,
    /// log2 of the compression unit in clusters (4 when compressed, 0 for
    /// a stream that is only sparse).
    pub unit_log2: u8,
    /// Bytes of clusters actually allocated (`allocated` counts the
    /// virtual clusters, holes included).
    pub stored: u64,
}

/// An attribute too large for the record it was added to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "MFT record {record}: attribute 0x{kind:x} does not fit ({need} bytes needed, {left} left)"
)]
pub struct RecordFull {
    /// Record number.
    pub record: u64,
    /// Attribute type.
    pub kind: u32,
    /// Bytes the attribute needs.
    pub need: usize,
    /// Bytes left in the record.
    pub left: usize,
}

/// A `FILE` record under construction.
#[derive(Debug, Clone)]
pub struct RecordBuf {
    buf: Vec<u8>,
    at: usize,
    instance: u16,
    record: u64,
}

impl RecordBuf {
    /// A record with its header (`seq`, hard-link count, flags).
    pub fn new(record: u64, seq: u16, links: u16, flags: u16) -> RecordBuf {
        let mut buf = vec![0u8; RECORD_BYTES];
        buf[0..4].copy_from_slice(b"FILE");
        buf[4..6].copy_from_slice(&(USA_OFFSET as u16).to_le_bytes());
        buf[6..8].copy_from_slice(&((RECORD_BYTES / SECTOR + 1) as u16).to_le_bytes());
        buf[0x10..0x12].copy_from_slice(&seq.to_le_bytes());
        buf[0x12..0x14].copy_from_slice(&links.to_le_bytes());
        buf[0x14..0x16].copy_from_slice(&(FIRST_ATTR as u16).to_le_bytes());
        buf[0x16..0x18].copy_from_slice(&flags.to_le_bytes());
        buf[0x1C..0x20].copy_from_slice(&(RECORD_BYTES as u32).to_le_bytes());
        buf[0x2C..0x30].copy_from_slice(&(record as u32).to_le_bytes());
        RecordBuf {
            buf,
            at: FIRST_ATTR,
            instance: 0,
            record,
        }
    }

    /// Bytes still free for attributes (the end marker is reserved).
    pub fn room(&self) -> usize {
        RECORD_BYTES - 8 - self.at
    }

    fn reserve(&mut self, kind: u32, len: usize) -> Result<usize, RecordFull> {
        if len > self.room() {
            return Err(RecordFull {
                record: self.record,
                kind,
                need: len,
                left: self.room(),
            });
        }
        let at = self.at;
        self.at += len;
        Ok(at)
    }

    fn header(
        &mut self,
        at: usize,
        kind: u32,
        len: usize,
        non_resident: bool,
        name: &[u8],
        flags: u16,
    ) {
        let b = &mut self.buf;
        b[at..at + 4].copy_from_slice(&kind.to_le_bytes());
        b[at + 4..at + 8].copy_from_slice(&(len as u32).to_le_bytes());
        b[at + 8] = non_resident as u8;
        b[at + 9] = (name.len() / 2) as u8;
        b[at + 12..at + 14].copy_from_slice(&flags.to_le_bytes());
        b[at + 14..at + 16].copy_from_slice(&self.instance.to_le_bytes());
        self.instance += 1;
    }

    /// Size a resident attribute with `name` and a `value_len`-byte value
    /// takes.
    pub fn resident_len(name: &str, value_len: usize) -> usize {
        align8(0x18 + name.encode_utf16().count() * 2) + align8(value_len)
    }

    /// Append a resident attribute (`indexed` marks a `$FILE_NAME` that is
    /// in an index).
    pub fn resident(
        &mut self,
        kind: u32,
        name: &str,
        value: &[u8],
        indexed: bool,
    ) -> Result<(), RecordFull> {
        let name = utf16(name);
        let value_at = align8(0x18 + name.len());
        let len = value_at + align8(value.len());
        let at = self.reserve(kind, len)?;
        self.header(at, kind, len, false, &name, 0);
        let b = &mut self.buf;
        if !name.is_empty() {
            b[at + 10..at + 12].copy_from_slice(&0x18u16.to_le_bytes());
            b[at + 0x18..at + 0x18 + name.len()].copy_from_slice(&name);
        }
        b[at + 0x10..at + 0x14].copy_from_slice(&(value.len() as u32).to_le_bytes());
        b[at + 0x14..at + 0x16].copy_from_slice(&(value_at as u16).to_le_bytes());
        b[at + 0x16] = indexed as u8;
        b[at + value_at..at + value_at + value.len()].copy_from_slice(value);
        Ok(())
    }

    /// Size a non-resident attribute with `name` and encoded `runs` takes.
    pub fn non_resident_len(name: &str, runs_len: usize) -> usize {
        align8(0x40 + name.encode_utf16().count() * 2) + align8(runs_len)
    }

    /// Append a non-resident attribute covering VCNs `0..` of `runs`.
    pub fn non_resident(
        &mut self,
        kind: u32,
        name: &str,
        runs: &[DataRun],
        sizes: NonResident,
    ) -> Result<(), RecordFull> {
        let name = utf16(name);
        let pairs = encode_runs(runs);
        // A compressed or sparse attribute's header is 8 bytes longer: it
        // ends with the size of the clusters actually allocated.
        let head = if sizes.packed.is_some() { 0x48 } else { 0x40 };
        let pairs_at = align8(head + name.len());
        let len = pairs_at + align8(pairs.len());
        let at = self.reserve(kind, len)?;
        let flags = sizes.packed.map_or(0, |p| p.flags);
        self.header(at, kind, len, true, &name, flags);
        let vcns: u64 = runs.iter().map(|r| r.len).sum();
        let b = &mut self.buf;
        if !name.is_empty() {
            b[at + 10..at + 12].copy_from_slice(&(head as u16).to_le_bytes());
            b[at + head..at + head + name.len()].copy_from_slice(&name);
        }
        if let Some(p) = sizes.packed {
            b[at + 0x22] = p.unit_log2;
            b[at + 0x40..at + 0x48].copy_from_slice(&p.stored.to_le_bytes());
        }
        // lowest VCN 0; highest VCN is the last cluster (-1 when empty).
        let highest = vcns as i64 - 1;
        b[at + 0x18..at + 0x20].copy_from_slice(&highest.to_le_bytes());
        b[at + 0x20..at + 0x22].copy_from_slice(&(pairs_at as u16).to_le_bytes());
        b[at + 0x28..at + 0x30].copy_from_slice(&sizes.allocated.to_le_bytes());
        b[at + 0x30..at + 0x38].copy_from_slice(&sizes.size.to_le_bytes());
        b[at + 0x38..at + 0x40].copy_from_slice(&sizes.initialized.to_le_bytes());
        b[at + pairs_at..at + pairs_at + pairs.len()].copy_from_slice(&pairs);
        Ok(())
    }

    /// Close the record: end marker, bytes in use, next instance, then the
    /// update sequence (`usn`) over each sector's last two bytes.
    pub fn finish(mut self, usn: u16) -> Vec<u8> {
        let at = self.at;
        self.buf[at..at + 4].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        let used = (at + 8) as u32;
        self.buf[0x18..0x1C].copy_from_slice(&used.to_le_bytes());
        self.buf[0x28..0x2A].copy_from_slice(&self.instance.to_le_bytes());
        protect(&mut self.buf, USA_OFFSET, usn);
        self.buf
    }
}

/// Apply the update sequence to a multi-sector structure whose array sits
/// at `usa_at`: each sector's last two bytes move into the array and are
/// replaced by `usn` (never 0 or 0xFFFF, which readers treat as unset).
pub fn protect(buf: &mut [u8], usa_at: usize, usn: u16) {
    let usn = if usn == 0 || usn == 0xFFFF { 1 } else { usn };
    buf[usa_at..usa_at + 2].copy_from_slice(&usn.to_le_bytes());
    for i in 1..=buf.len() / SECTOR {
        let end = i * SECTOR - 2;
        let fix = usa_at + 2 * i;
        buf[fix] = buf[end];
        buf[fix + 1] = buf[end + 1];
        buf[end..end + 2].copy_from_slice(&usn.to_le_bytes());
    }
}

/// A never-used record slot as `mkntfs` formats it: signature, update
/// sequence and an empty attribute list, flags clear.
pub fn blank(record: u64) -> Vec<u8> {
    RecordBuf::new(record, 0, 0, 0).finish(1)
}

/// NTFS time: 100 ns units since 1601-01-01 (UTC).
pub type FileTime = u64;

/// The four times NTFS keeps, as `$STANDARD_INFORMATION` and
/// `$FILE_NAME` order them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NtTimes {
    /// Creation.
    pub created: FileTime,
    /// Content modification.
    pub modified: FileTime,
    /// MFT record change.
    pub changed: FileTime,
    /// Last access.
    pub accessed: FileTime,
}

/// File attribute: read-only.
pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0001;
/// File attribute: hidden.
pub const FILE_ATTRIBUTE_HIDDEN: u32 = 0x0002;
/// File attribute: system.
pub const FILE_ATTRIBUTE_SYSTEM: u32 = 0x0004;
/// File attribute: archive (set on every file Windows writes).
pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0020;
/// File attribute: content indexing not wanted.
pub const FILE_ATTRIBUTE_NOT_CONTENT_INDEXED: u32 = 0x2000;
/// File attribute: compressed.
pub const FILE_ATTRIBUTE_COMPRESSED: u32 = 0x0800;
/// Attribute header flag: the stream is LZNT1-compressed.
pub const ATTR_COMPRESSED: u16 = 0x0001;
/// Attribute header flag: the stream is sparse.
pub const ATTR_SPARSE: u16 = 0x8000;
/// File attribute: sparse file.
pub const FILE_ATTRIBUTE_SPARSE_FILE: u32 = 0x0200;
/// `$FILE_NAME` flag: the file is a directory (has an `$I30` index).
pub const FILE_NAME_DIRECTORY: u32 = 0x1000_0000;

/// A `$STANDARD_INFORMATION` value (NTFS 3.x, 72 bytes).
pub fn standard_information(t: &NtTimes, attributes: u32, security_id: u32) -> Vec<u8> {
    let mut v = vec![0u8; 72];
    v[0..8].copy_from_slice(&t.created.to_le_bytes());
    v[8..16].copy_from_slice(&t.modified.to_le_bytes());
    v[16..24].copy_from_slice(&t.changed.to_le_bytes());
    v[24..32].copy_from_slice(&t.accessed.to_le_bytes());
    v[32..36].copy_from_slice(&attributes.to_le_bytes());
    v[52..56].copy_from_slice(&security_id.to_le_bytes());
    v
}

/// `$FILE_NAME` namespace: POSIX (case-sensitive, any name).
pub const NS_POSIX: u8 = 0;
/// `$FILE_NAME` namespace: the Win32 long name.
pub const NS_WIN32: u8 = 1;
/// `$FILE_NAME` namespace: the generated 8.3 alias.
pub const NS_DOS: u8 = 2;
/// `$FILE_NAME` namespace: one name valid as both.
pub const NS_WIN32_AND_DOS: u8 = 3;

/// What a `$FILE_NAME` (attribute or index key) records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName {
    /// Parent directory reference.
    pub parent: u64,
    /// Times (as of the last name change; Windows rarely updates them).
    pub times: NtTimes,
    /// Allocated bytes of the unnamed `$DATA` (0 for directories).
    pub allocated: u64,
    /// Size of the unnamed `$DATA`.
    pub size: u64,
    /// File attributes (with [`FILE_NAME_DIRECTORY`] for directories).
    pub flags: u32,
    /// The name.
    pub name: String,
    /// Namespace.
    pub namespace: u8,
}

impl FileName {
    /// The value as stored (66 bytes plus the UTF-16 name).
    pub fn value(&self) -> Vec<u8> {
        let name = utf16(&self.name);
        let mut v = vec![0u8; 0x42 + name.len()];
        v[0..8].copy_from_slice(&self.parent.to_le_bytes());
        v[8..16].copy_from_slice(&self.times.created.to_le_bytes());
        v[16..24].copy_from_slice(&self.times.modified.to_le_bytes());
        v[24..32].copy_from_slice(&self.times.changed.to_le_bytes());
        v[32..40].copy_from_slice(&self.times.accessed.to_le_bytes());
        v[40..48].copy_from_slice(&self.allocated.to_le_bytes());
        v[48..56].copy_from_slice(&self.size.to_le_bytes());
        v[56..60].copy_from_slice(&self.flags.to_le_bytes());
        v[0x40] = (name.len() / 2) as u8;
        v[0x41] = self.namespace;
        v[0x42..].copy_from_slice(&name);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lists_encode_deltas_and_sparse_runs() {
        let runs = [
            DataRun {
                lcn: Some(0x20),
                len: 8,
            },
            DataRun {
                lcn: Some(0x10),
                len: 0x100,
            },
            DataRun {
                lcn: Some(0x20),
                len: 0xDE,
            },
            DataRun { lcn: None, len: 4 },
            DataRun {
                lcn: Some(0x1_0000),
                len: 1,
            },
        ];
        let b = encode_runs(&runs);
        assert_eq!(
            b,
            [
                0x11, 0x08, 0x20, // 8 clusters at 0x20
                0x12, 0x00, 0x01, 0xF0, // 0x100 clusters at -0x10
                0x12, 0xDE, 0x00, 0x10, // 0xDE clusters (a sign byte) at +0x10
                0x01, 0x04, // 4 sparse
                0x31, 0x01, 0xE0, 0xFF, 0x00, // 1 at +0xFFE0
                0x00
            ]
        );
    }

    #[test]
    fn records_carry_fixups_and_parse_back() {
        let mut r = RecordBuf::new(30, 2, 1, MFT_IN_USE);
        r.resident(AT_DATA, "", &[0xAB; 600], false).unwrap();
        let mut b = r.finish(7);
        assert_eq!(&b[510..512], &7u16.to_le_bytes());
        caseload_fs::ntfs::mft::apply_fixups(&mut b, b"FILE").unwrap();
        assert_eq!(b[0x38 + 0x18 + 450], 0xAB);
        assert_eq!(b[510], 0xAB);
    }

    #[test]
    fn full_records_refuse_attributes() {
        let mut r = RecordBuf::new(40, 1, 1, MFT_IN_USE);
        assert!(r.resident(AT_DATA, "", &[0; 2000], false).is_err());
    }
}
