//! exFAT directory entries: the 32-byte record types, their fields, the
//! set and name checksums, and TSK's tests of whether 32 bytes are an entry
//! (`exfatfs_is_dentry`), which decide what a walk lists.
//!
//! An entry's first byte is its type: bit 7 is `InUse` (cleared when the
//! entry is deleted), bits 0-6 the type proper. A file is an entry set: a
//! File entry (0x85), a Stream Extension (0xC0) and 1 to 17 File Name
//! entries (0xC1), the File entry counting the others and checksumming the
//! whole set.

use crate::fat::dir::dos_time;
use crate::record::Timestamp;

/// Bytes in one directory entry.
pub const ENTRY_SIZE: usize = 32;
/// The `InUse` bit of the type byte.
pub const IN_USE: u8 = 0x80;
/// Type codes with `InUse` masked off (TSK's `EXFATFS_DIR_ENTRY_TYPE_ENUM`).
pub const TYPE_ALLOC_BITMAP: u8 = 0x01;
/// Up-case table.
pub const TYPE_UPCASE: u8 = 0x02;
/// Volume label.
pub const TYPE_LABEL: u8 = 0x03;
/// File (first entry of a file's set).
pub const TYPE_FILE: u8 = 0x05;
/// Volume GUID.
pub const TYPE_GUID: u8 = 0x20;
/// TexFAT padding.
pub const TYPE_TEXFAT: u8 = 0x21;
/// Stream Extension.
pub const TYPE_STREAM: u8 = 0x40;
/// File Name.
pub const TYPE_NAME: u8 = 0x41;
/// Access control table (never listed: TSK 4.11.1 tests it as TexFAT).
pub const TYPE_ACT: u8 = 0x62;

/// File attribute: read-only.
pub const ATTR_READ_ONLY: u16 = 0x01;
/// File attribute: hidden.
pub const ATTR_HIDDEN: u16 = 0x02;
/// File attribute: directory.
pub const ATTR_DIRECTORY: u16 = 0x10;
/// Stream flag: the clusters are contiguous and the FAT holds no chain.
pub const FLAG_NO_FAT_CHAIN: u8 = 0x02;

/// Name characters one File Name entry holds.
pub const NAME_CHARS_PER_ENTRY: usize = 15;
/// Fewest and most secondary entries a File entry may count.
pub const MIN_SECONDARY: u8 = 2;
/// See [`MIN_SECONDARY`].
pub const MAX_SECONDARY: u8 = 18;
/// Longest volume label TSK accepts (the specification says 11).
pub const MAX_LABEL_CHARS: usize = 15;

/// One 32-byte directory entry: typed access to its fields. Every
/// accessor reads inside the 32 bytes the type guarantees.
#[derive(Clone, Copy)]
pub struct Entry<'a>(pub &'a [u8; ENTRY_SIZE]);

impl<'a> Entry<'a> {
    /// The entry at the start of `bytes`, if there are 32 of them.
    pub fn at(bytes: &'a [u8]) -> Option<Entry<'a>> {
        bytes.get(..ENTRY_SIZE)?.try_into().ok().map(Entry)
    }
}

impl Entry<'_> {
    fn u16(&self, o: usize) -> u16 {
        u16::from_le_bytes([self.0[o], self.0[o + 1]])
    }
    fn u32(&self, o: usize) -> u32 {
        u32::from_le_bytes([self.0[o], self.0[o + 1], self.0[o + 2], self.0[o + 3]])
    }
    fn u64(&self, o: usize) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.0[o..o + 8]);
        u64::from_le_bytes(a)
    }

    /// The raw type byte.
    pub fn type_byte(&self) -> u8 {
        self.0[0]
    }
    /// The type with `InUse` masked off.
    pub fn kind(&self) -> u8 {
        self.0[0] & 0x7F
    }
    /// Whether `InUse` is set (not deleted).
    pub fn in_use(&self) -> bool {
        self.0[0] & IN_USE != 0
    }

    // --- File entry ---

    /// File: secondary entries that follow.
    pub fn secondary_count(&self) -> u8 {
        self.0[1]
    }
    /// File: the stored set checksum.
    pub fn set_checksum(&self) -> u16 {
        self.u16(2)
    }
    /// File: attributes (read-only 0x01, hidden 0x02, system 0x04,
    /// directory 0x10, archive 0x20).
    pub fn attributes(&self) -> u16 {
        self.u16(4)
    }
    /// File: (date, time, 10 ms increments, UTC offset byte) of the
    /// creation, modification and access times. The access time has no
    /// 10 ms field.
    pub fn raw_times(&self) -> [(u16, u16, u8, u8); 3] {
        [
            (self.u16(10), self.u16(8), self.0[20], self.0[22]),
            (self.u16(14), self.u16(12), self.0[21], self.0[23]),
            (self.u16(18), self.u16(16), 0, self.0[24]),
        ]
    }

    // --- Stream Extension ---

    /// Stream: general secondary flags (0x01 allocation possible, 0x02 no
    /// FAT chain).
    pub fn stream_flags(&self) -> u8 {
        self.0[1]
    }
    /// Stream: name length in UTF-16 units.
    pub fn name_length(&self) -> u8 {
        self.0[3]
    }
    /// Stream: hash of the up-cased name.
    pub fn name_hash(&self) -> u16 {
        self.u16(4)
    }
    /// Stream: valid data length (bytes written; the rest reads as zeros).
    pub fn valid_data_length(&self) -> u64 {
        self.u64(8)
    }
    /// Stream, allocation bitmap, up-case table: first cluster.
    pub fn first_cluster(&self) -> u32 {
        self.u32(20)
    }
    /// Stream, allocation bitmap, up-case table: data length in bytes.
    pub fn data_length(&self) -> u64 {
        self.u64(24)
    }

    // --- File Name ---

    /// File Name: the 15 UTF-16 units it holds.
    pub fn name_units(&self) -> [u16; NAME_CHARS_PER_ENTRY] {
        let mut u = [0u16; NAME_CHARS_PER_ENTRY];
        for (i, v) in u.iter_mut().enumerate() {
            *v = self.u16(2 + 2 * i);
        }
        u
    }

    // --- Volume label, allocation bitmap, up-case table ---

    /// Label: its length in characters.
    pub fn label_length(&self) -> u8 {
        self.0[1]
    }
    /// Label: the first `n` (at most 15) UTF-16 units.
    pub fn label_units(&self, n: usize) -> Vec<u16> {
        (0..n.min(MAX_LABEL_CHARS))
            .map(|i| self.u16(2 + 2 * i))
            .collect()
    }
    /// Allocation bitmap: flags (bit 0: which bitmap of a TexFAT pair).
    pub fn bitmap_flags(&self) -> u8 {
        self.0[1]
    }
    /// Up-case table: the stored table checksum.
    pub fn table_checksum(&self) -> u32 {
        self.u32(4)
    }
}

/// The entry-set checksum over `set` (the File entry and its secondaries,
/// 32 bytes each), skipping the checksum field itself. A deleted set had
/// `InUse` set on every entry when it was summed, so the bit is put back
/// before summing: a deleted set checks out as long as nothing else
/// changed.
pub fn entry_set_checksum(set: &[u8]) -> u16 {
    set.iter().enumerate().fold(0u16, |sum, (i, &b)| {
        if i == 2 || i == 3 {
            return sum;
        }
        let b = if i % ENTRY_SIZE == 0 { b | IN_USE } else { b };
        sum.rotate_right(1).wrapping_add(u16::from(b))
    })
}

/// The name hash a Stream entry stores: a rotating sum over the bytes of
/// the up-cased name.
pub fn name_hash(upcased: &[u16]) -> u16 {
    upcased.iter().fold(0u16, |sum, &c| {
        let [lo, hi] = c.to_le_bytes();
        let sum = sum.rotate_right(1).wrapping_add(u16::from(lo));
        sum.rotate_right(1).wrapping_add(u16::from(hi))
    })
}

/// Converts an exFAT timestamp as TSK does (the DOS date and time read as
/// if UTC, 10 ms units above 100 adding a second). The UTC offset is
/// returned beside it: `Some(minutes east of UTC)` when its valid bit is
/// set.
pub fn timestamp(date: u16, time: u16, ten_ms: u8, utc: u8) -> (Option<Timestamp>, Option<i64>) {
    let offset = (utc & 0x80 != 0).then(|| {
        // A 7-bit two's complement count of 15-minute steps.
        let steps = i64::from(utc & 0x7F);
        let steps = if steps >= 64 { steps - 128 } else { steps };
        steps * 15
    });
    (dos_time(date, time, ten_ms), offset)
}

/// Whether the allocation state of the data unit holding an entry is
/// known, as TSK's `FATFS_DATA_UNIT_ALLOC_STATUS_ENUM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitState {
    /// The sector is in an unallocated cluster.
    Unallocated,
    /// The sector is allocated.
    Allocated,
}

/// What the volume tells the entry tests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Clusters in the heap.
    pub cluster_count: u64,
    /// Bytes in the heap.
    pub heap_bytes: u64,
}

impl Limits {
    fn cluster_ok(&self, c: u32) -> bool {
        (2..=self.cluster_count + 1).contains(&u64::from(c))
    }
}

/// TSK's test of whether 32 bytes are a directory entry of a kind it lists
/// (`exfatfs_is_dentry`). `bitmap_check` answers whether a cluster is
/// allocated, for the allocation-bitmap and up-case tests (`None` before
/// the bitmap is known).
pub fn is_entry(
    e: &Entry<'_>,
    unit: UnitState,
    limits: &Limits,
    bitmap_check: &dyn Fn(u32) -> Option<bool>,
) -> bool {
    let allocated = unit == UnitState::Allocated;
    match e.kind() {
        TYPE_LABEL => {
            if !allocated {
                return false;
            }
            if e.in_use() {
                (1..=MAX_LABEL_CHARS).contains(&usize::from(e.label_length()))
            } else {
                e.label_length() == 0 && e.0[2..2 + 2 * MAX_LABEL_CHARS].iter().all(|&b| b == 0)
            }
        }
        TYPE_GUID | TYPE_TEXFAT => allocated,
        TYPE_ALLOC_BITMAP => {
            allocated
                && e.data_length() == limits.cluster_count.div_ceil(8)
                && limits.cluster_ok(e.first_cluster())
                && bitmap_check(e.first_cluster()) != Some(false)
        }
        TYPE_UPCASE => {
            let len = e.data_length();
            allocated
                && len != 0
                && len <= limits.heap_bytes
                && limits.cluster_ok(e.first_cluster())
                && bitmap_check(e.first_cluster()) != Some(false)
        }
        TYPE_FILE => is_file_entry(e),
        TYPE_STREAM => is_stream_entry(e, limits),
        TYPE_NAME => true,
        _ => false,
    }
}

/// TSK's File-entry test: 2..=18 secondaries and not every time zero.
pub fn is_file_entry(e: &Entry<'_>) -> bool {
    if e.kind() != TYPE_FILE {
        return false;
    }
    let n = e.secondary_count();
    if !(MIN_SECONDARY..=MAX_SECONDARY).contains(&n) {
        return false;
    }
    // Dates, times and the 10 ms fields: bytes 8..22.
    e.0[8..22].iter().any(|&b| b != 0)
}

/// TSK's Stream-entry test: a non-empty stream must fit the heap and start
/// at a heap cluster.
pub fn is_stream_entry(e: &Entry<'_>, limits: &Limits) -> bool {
    if e.kind() != TYPE_STREAM {
        return false;
    }
    let len = e.data_length();
    len == 0 || (len <= limits.heap_bytes && limits.cluster_ok(e.first_cluster()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_checksum_matches_a_set_written_by_mkfs_and_survives_deletion() {
        // File "one" (1 byte) as exfat-fuse wrote it; checksum 0xba63.
        let hex = concat!(
            "850263ba200000007290865d7290865d7290865d000080808000000000000000",
            "c00300032eb800000100000000000000000000000b0000000100000000000000",
            "c1006f006e006500000000000000000000000000000000000000000000000000",
        );
        let mut set = [0u8; 96];
        for (i, b) in set.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        let stored = Entry::at(&set).unwrap().set_checksum();
        assert_eq!(entry_set_checksum(&set), stored);
        for i in [0, 32, 64] {
            set[i] &= !IN_USE;
        }
        assert_eq!(entry_set_checksum(&set), stored);
        set[70] ^= 1;
        assert_ne!(entry_set_checksum(&set), stored);
        let units: Vec<u16> = "ONE".encode_utf16().collect();
        assert_eq!(name_hash(&units), 0xb82e);
    }

    #[test]
    fn utc_offsets_are_seven_bit_quarter_hours() {
        let date = ((2024 - 1980) << 9) | (10 << 5) | 27;
        let (t, off) = timestamp(date, 8 << 11, 150, 0x80 | 8);
        assert_eq!(off, Some(120));
        assert_eq!(t.unwrap().nanos, 500_000_000);
        assert_eq!(timestamp(date, 0, 0, 0x80 | 0x7C).1, Some(-60));
        assert_eq!(timestamp(date, 0, 0, 0x7C).1, None);
    }
}
