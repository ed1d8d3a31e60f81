//! The header every APFS object starts with (`obj_phys_t`) and its
//! Fletcher-64 checksum. Object types and flags are those of Apple's "Apple
//! File System Reference" (also in libfsapfs's format document and
//! apfsprogs' `raw.h`).

use crate::bytes::{u32_at, u64_at};

/// Bytes of the object header.
pub const HEADER_LEN: usize = 32;
/// `o_type`: container superblock.
pub const TYPE_NX_SUPERBLOCK: u32 = 0x01;
/// `o_type`: B-tree root node.
pub const TYPE_BTREE: u32 = 0x02;
/// `o_type`: B-tree non-root node.
pub const TYPE_BTREE_NODE: u32 = 0x03;
/// `o_type`: space manager.
pub const TYPE_SPACEMAN: u32 = 0x05;
/// `o_type`: space manager chunk-info address block.
pub const TYPE_SPACEMAN_CAB: u32 = 0x06;
/// `o_type`: space manager chunk-info block.
pub const TYPE_SPACEMAN_CIB: u32 = 0x07;
/// `o_type`: object map.
pub const TYPE_OMAP: u32 = 0x0b;
/// `o_type`: checkpoint map.
pub const TYPE_CHECKPOINT_MAP: u32 = 0x0c;
/// `o_type`: volume superblock.
pub const TYPE_FS: u32 = 0x0d;
/// `o_type` storage flag: a physical object (its oid is its block).
pub const OBJ_PHYSICAL: u32 = 0x4000_0000;
/// The low 16 bits of `o_type` are the type; the high ones are flags.
pub const TYPE_MASK: u32 = 0xffff;

/// An object header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjHeader {
    /// Stored Fletcher-64 checksum.
    pub cksum: u64,
    /// Object id.
    pub oid: u64,
    /// Transaction id of the last change.
    pub xid: u64,
    /// Type (low 16 bits) and flags (high 16 bits).
    pub type_and_flags: u32,
    /// Subtype (for B-tree nodes: what the tree holds).
    pub subtype: u32,
}

impl ObjHeader {
    /// The header at the start of `b`, if `b` holds one.
    pub fn parse(b: &[u8]) -> Option<ObjHeader> {
        Some(ObjHeader {
            cksum: u64_at(b, 0)?,
            oid: u64_at(b, 8)?,
            xid: u64_at(b, 16)?,
            type_and_flags: u32_at(b, 24)?,
            subtype: u32_at(b, 28)?,
        })
    }

    /// The object type without its flags.
    pub fn kind(&self) -> u32 {
        self.type_and_flags & TYPE_MASK
    }
}

/// APFS's Fletcher-64 over `block[8..]` (the checksum field excluded), as
/// stored in `o_cksum`. Words are little-endian 32-bit; a trailing partial
/// word is ignored (blocks are multiples of 4 KiB).
pub fn fletcher64(block: &[u8]) -> u64 {
    const M: u64 = 0xffff_ffff;
    let (mut s1, mut s2) = (0u64, 0u64);
    for w in block.get(8..).unwrap_or(&[]).chunks_exact(4) {
        s1 = (s1 + u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))) % M;
        s2 = (s2 + s1) % M;
    }
    let lo = M - ((s1 + s2) % M);
    let hi = M - ((s1 + lo) % M);
    (hi << 32) | lo
}

/// Whether the object in `block` carries the right checksum. An all-zero
/// block does not (its checksum would be 0, which no real object has).
pub fn checksum_ok(block: &[u8]) -> bool {
    match u64_at(block, 0) {
        Some(c) => c != 0 && c == fletcher64(block),
        None => false,
    }
}

/// Writes the right checksum into `block` (tests build hostile objects with
/// it; a reader never writes).
pub fn set_checksum(block: &mut [u8]) {
    let c = fletcher64(block);
    if let Some(f) = block.get_mut(..8) {
        f.copy_from_slice(&c.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_round_trips_and_catches_a_flipped_bit() {
        let mut b = vec![0u8; 4096];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i * 7 % 251) as u8;
        }
        set_checksum(&mut b);
        assert!(checksum_ok(&b));
        b[100] ^= 1;
        assert!(!checksum_ok(&b));
        assert!(!checksum_ok(&[0u8; 4096]));
        assert!(!checksum_ok(&[1u8; 3]));
    }
}
