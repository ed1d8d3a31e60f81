//! The container superblock (`nx_superblock_t`), the checkpoint
//! descriptor area and its checkpoint maps, and the volume superblocks
//! (`apfs_superblock_t`). Offsets are those of Apple's reference.
//!
//! The checkpoint used is the newest (highest transaction id) whose
//! superblock copy in the descriptor area verifies (magic, checksum, sane
//! geometry) and whose checkpoint-map blocks all verify (type, checksum,
//! the same transaction id); older ones are tried in turn, each rejection
//! recorded. None verifying is [`crate::FsError::NotRecognised`] "no valid
//! checkpoint".

use crate::bytes::{slice_at, u16_at, u32_at, u64_at};

use super::object::{ObjHeader, TYPE_CHECKPOINT_MAP, TYPE_NX_SUPERBLOCK, checksum_ok};

/// `nx_magic`: "NXSB".
pub const NX_MAGIC: u32 = 0x4253_584e;
/// `apfs_magic`: "APSB".
pub const APSB_MAGIC: u32 = 0x4253_5041;
/// Most volumes a container holds.
pub const MAX_FILE_SYSTEMS: usize = 100;
/// `apfs_fs_flags`: the volume is not encrypted.
pub const FS_UNENCRYPTED: u64 = 0x1;
/// `apfs_incompatible_features`: case-insensitive names.
pub const INCOMPAT_CASE_INSENSITIVE: u64 = 0x1;
/// `apfs_incompatible_features`: a sealed (signed, read-only) volume.
pub const INCOMPAT_SEALED: u64 = 0x20;
/// `apfs_incompatible_features`: normalization-insensitive names.
pub const INCOMPAT_NORMALIZATION_INSENSITIVE: u64 = 0x8;

/// The fields of a container superblock this reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NxSuperblock {
    /// Transaction id of this checkpoint.
    pub xid: u64,
    /// Bytes per block (4 KiB to 64 KiB, a power of two).
    pub block_size: u64,
    /// Blocks in the container.
    pub block_count: u64,
    /// Container UUID.
    pub uuid: [u8; 16],
    /// First block of the checkpoint descriptor area.
    pub xp_desc_base: u64,
    /// Blocks in the descriptor area (high bit: the area is a B-tree).
    pub xp_desc_blocks: u32,
    /// First block of the checkpoint data area.
    pub xp_data_base: u64,
    /// Blocks in the data area.
    pub xp_data_blocks: u32,
    /// Index in the descriptor area of this checkpoint's first block.
    pub xp_desc_index: u32,
    /// Blocks this checkpoint takes in the descriptor area.
    pub xp_desc_len: u32,
    /// Ephemeral oid of the space manager.
    pub spaceman_oid: u64,
    /// Physical address of the container's object map.
    pub omap_oid: u64,
    /// Virtual oids of the volumes, in `nx_fs_oid` order (zeros dropped).
    pub fs_oids: Vec<u64>,
}

impl NxSuperblock {
    /// Parses and checks a container superblock object (checksum not
    /// checked here).
    pub fn parse(b: &[u8]) -> Result<NxSuperblock, String> {
        let hdr = ObjHeader::parse(b).ok_or("block shorter than an object header")?;
        if u32_at(b, 32) != Some(NX_MAGIC) {
            return Err("no NXSB magic".into());
        }
        if hdr.kind() != TYPE_NX_SUPERBLOCK {
            return Err(format!(
                "object type {:#x}, not a container superblock",
                hdr.kind()
            ));
        }
        let f32 = |o| u32_at(b, o).ok_or("short container superblock");
        let f64 = |o| u64_at(b, o).ok_or("short container superblock");
        let block_size = u64::from(f32(36)?);
        if !(4096..=65536).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(format!(
                "block size {block_size} is not a power of two from 4 KiB to 64 KiB"
            ));
        }
        let block_count = f64(40)?;
        if block_count == 0 {
            return Err("container of 0 blocks".into());
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(slice_at(b, 72, 16).ok_or("short container superblock")?);
        let max_fs = (f32(180)? as usize).min(MAX_FILE_SYSTEMS);
        let mut fs_oids = Vec::new();
        for i in 0..max_fs {
            let oid = f64(184 + 8 * i)?;
            if oid != 0 {
                fs_oids.push(oid);
            }
        }
        let sb = NxSuperblock {
            xid: hdr.xid,
            block_size,
            block_count,
            uuid,
            xp_desc_blocks: f32(104)?,
            xp_data_blocks: f32(108)?,
            xp_desc_base: f64(112)?,
            xp_data_base: f64(120)?,
            xp_desc_index: f32(136)?,
            xp_desc_len: f32(140)?,
            spaceman_oid: f64(152)?,
            omap_oid: f64(160)?,
            fs_oids,
        };
        if sb.xp_desc_blocks & 0x8000_0000 == 0
            && u64::from(sb.xp_desc_blocks)
                .checked_add(sb.xp_desc_base)
                .is_none_or(|e| e > block_count)
        {
            return Err(format!(
                "checkpoint descriptor area (block {}, {} blocks) lies outside the {block_count} blocks",
                sb.xp_desc_base, sb.xp_desc_blocks
            ));
        }
        if sb.omap_oid == 0 || sb.omap_oid >= block_count {
            return Err(format!(
                "object map at block {} outside the container",
                sb.omap_oid
            ));
        }
        Ok(sb)
    }

    /// The blocks of the descriptor area this checkpoint uses, in order
    /// (the ring wraps around); the last is the superblock itself. At most
    /// [`MAX_DESC_BLOCKS`], whatever the superblock claims.
    pub fn checkpoint_blocks(&self) -> Vec<u64> {
        let n = u64::from(self.xp_desc_blocks & 0x7fff_ffff);
        if n == 0 {
            return Vec::new();
        }
        (0..u64::from(self.xp_desc_len).min(n).min(MAX_DESC_BLOCKS))
            .map(|i| self.xp_desc_base + (u64::from(self.xp_desc_index) + i) % n)
            .collect()
    }
}

/// Most checkpoint-descriptor blocks read: mkapfs makes tens and macOS a
/// few hundred; an area a damaged superblock claims past this (up to 2^31
/// blocks) is cut here, so opening stays bounded in time and memory.
pub const MAX_DESC_BLOCKS: u64 = 1 << 16;

/// One checkpoint-map entry: where an ephemeral object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// Object type.
    pub kind: u32,
    /// Ephemeral object id.
    pub oid: u64,
    /// Block address.
    pub paddr: u64,
}

/// The entries of a checkpoint-map object, checked: its type, checksum
/// and transaction id `xid`.
pub fn parse_checkpoint_map(b: &[u8], xid: u64) -> Result<Vec<Mapping>, String> {
    let hdr = ObjHeader::parse(b).ok_or("short checkpoint map")?;
    if hdr.kind() != TYPE_CHECKPOINT_MAP {
        return Err(format!(
            "object type {:#x}, not a checkpoint map",
            hdr.kind()
        ));
    }
    if !checksum_ok(b) {
        return Err("checkpoint map checksum mismatch".into());
    }
    if hdr.xid != xid {
        return Err(format!(
            "checkpoint map of transaction {}, not {xid}",
            hdr.xid
        ));
    }
    let count = u32_at(b, 36).ok_or("short checkpoint map")? as usize;
    let mut out = Vec::new();
    for i in 0..count {
        let at = 40 + 40 * i;
        let e =
            slice_at(b, at, 40).ok_or_else(|| format!("{count} mappings do not fit the block"))?;
        out.push(Mapping {
            kind: u32_at(e, 0).unwrap_or(0) & 0xffff,
            oid: u64_at(e, 24).unwrap_or(0),
            paddr: u64_at(e, 32).unwrap_or(0),
        });
    }
    Ok(out)
}

/// The fields of a volume superblock this reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSuperblock {
    /// Index of the volume in the container (`apfs_fs_index`).
    pub fs_index: u32,
    /// Incompatible features (case and normalization insensitivity).
    pub incompat: u64,
    /// Physical address of the volume's object map.
    pub omap_oid: u64,
    /// Oid of the file-system tree's root: virtual, or physical where
    /// `root_tree_type` says so (sealed volumes).
    pub root_tree_oid: u64,
    /// `apfs_root_tree_type`: the tree's object type and storage flags.
    pub root_tree_type: u32,
    /// Physical address of a sealed volume's file-extent tree (0: none).
    pub fext_tree_oid: u64,
    /// Physical address of the snapshot-metadata tree.
    pub snap_meta_tree_oid: u64,
    /// Number of snapshots.
    pub num_snapshots: u64,
    /// `apfs_fs_flags`.
    pub fs_flags: u64,
    /// Volume UUID.
    pub uuid: [u8; 16],
    /// Volume name.
    pub name: String,
    /// Role bits.
    pub role: u16,
}

impl VolumeSuperblock {
    /// Parses a volume superblock (checksum not checked here).
    pub fn parse(b: &[u8]) -> Result<VolumeSuperblock, String> {
        if u32_at(b, 32) != Some(APSB_MAGIC) {
            return Err("no APSB magic".into());
        }
        let f64 = |o| u64_at(b, o).ok_or("short volume superblock");
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(slice_at(b, 240, 16).ok_or("short volume superblock")?);
        let raw = slice_at(b, 704, 256).ok_or("short volume superblock")?;
        let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        Ok(VolumeSuperblock {
            fs_index: u32_at(b, 36).ok_or("short volume superblock")?,
            incompat: f64(56)?,
            omap_oid: f64(128)?,
            root_tree_oid: f64(136)?,
            root_tree_type: u32_at(b, 116).ok_or("short volume superblock")?,
            fext_tree_oid: u64_at(b, 1032).unwrap_or(0),
            snap_meta_tree_oid: f64(152)?,
            num_snapshots: f64(216)?,
            fs_flags: f64(264)?,
            uuid,
            name: String::from_utf8_lossy(&raw[..end]).into_owned(),
            role: u16_at(b, 964).ok_or("short volume superblock")?,
        })
    }

    /// Whether the file-system tree's nodes are addressed physically
    /// (sealed volumes) rather than through the volume's object map.
    pub fn physical_tree(&self) -> bool {
        self.root_tree_type & super::object::OBJ_PHYSICAL != 0
    }

    /// A sealed volume's file-extent tree, where its extents are.
    pub fn sealed_extent_tree(&self) -> Option<u64> {
        (self.incompat & INCOMPAT_SEALED != 0 && self.fext_tree_oid != 0)
            .then_some(self.fext_tree_oid)
    }

    /// Whether the volume is encrypted (its `FS_UNENCRYPTED` flag clear).
    pub fn encrypted(&self) -> bool {
        self.fs_flags & FS_UNENCRYPTED == 0
    }
}
