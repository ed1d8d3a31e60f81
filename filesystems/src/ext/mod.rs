//! ext2, ext3 and ext4, parsed here rather than with a crate. The ext
//! readers on crates.io are path-based file APIs: `ext4-view` (0.9) opens
//! files and directories by path and returns bytes, never the physical
//! blocks behind them, and lists only live entries; `ext4fs-core` (0.2)
//! reads whole files into memory through `Read + Seek` (`&mut self`) and
//! finds deleted inodes by `dtime`, not names in directory slack; `ext2`
//! (0.1) is a read-write driver over libc; `efs` and `mkfs-ext2` are
//! no_std drivers or superblock parsers. None exposes extents as physical
//! runs, names left in directory slack, or The Sleuth Kit's numbering of
//! deleted names, `$OrphanFiles` and orphan inodes, nor reads through this
//! crate's bounded positioned reads. Those are what a walk here must give,
//! so that records line up with `fls`/`icat`.
//!
//! # The model (TSK 4.11.1's `ext2fs`)
//!
//! - Inode numbers are ext's own; the root is 2. `$OrphanFiles` is a
//!   virtual directory numbered `s_inodes_count + 1`, listed last in the
//!   root.
//! - Each directory is read block by block (an inline one as its bytes)
//!   and every 4-byte position that could start an entry is tested as
//!   TSK's `ext2fs_dent_parse_block` does: names in the slack of a live
//!   entry's `rec_len`, entries with inode 0 and everything in a deleted
//!   directory are deleted names. Hashed (htree) directories are read the
//!   same way, all leaf blocks as linear ones; the index blocks
//!   (`dx_root`, `dx_node`) are skipped (see below). A name repeated with the same inode in one directory is
//!   listed once, the live copy winning. `.` and `..` are not listed.
//! - A name's metadata is its inode as it stands now, allocated or not (by
//!   the inode bitmap). A deleted name whose inode is allocated again
//!   shows that inode (TSK's "realloc"); its recovery is
//!   [`Recovery::Overwritten`](crate::Recovery::Overwritten). A deleted directory is entered when its
//!   inode is unallocated too; all it holds is deleted.
//! - Content is physical runs for every file: block maps (direct, single,
//!   double and triple indirect; zero pointers are holes read as zeros),
//!   extent trees of any depth (uninitialized extents read as zeros, gaps
//!   are holes), inline data (`i_block` then the `system.data` attribute)
//!   as resident bytes. Directories' content is their blocks, as `icat`
//!   gives it. Sizes use `i_size_high` for regular files with `large_file`
//!   (TSK's rule), so files over 4 GiB are whole.
//! - Deleted files: what the inode still maps is their content, as `icat`
//!   reads it. The Linux kernel empties an ext4 inode's extent tree and
//!   size when it frees it, and ext3 zeroes block pointers, so files
//!   deleted by a kernel normally have no content here or in TSK; ext2
//!   (and e2fsprogs' `debugfs rm`/`kill_file`) leave the map, and that
//!   content is given, [`Recovery::Unallocated`](crate::Recovery::Unallocated) when every block is still
//!   free, [`Recovery::Overwritten`](crate::Recovery::Overwritten) when some are allocated again.
//! - Orphans: unallocated inodes with a change time that no name reached
//!   (TSK's inode walk with its "used" test) are listed under
//!   `$OrphanFiles` as `OrphanFile-<inode>`; orphan directories are walked
//!   and what they hold is listed under them only.
//!   [`ExtFs::set_orphan_search`] turns the search (a read of every inode
//!   table with free inodes) off.
//! - The journal is not replayed: the file system is read as it stands on
//!   disk (a volume needing recovery is reported). The journal inode (8)
//!   has no name, so it is not listed, as in TSK.
//! - Times: ext4 volumes (those with `extents`, TSK's test) get
//!   nanoseconds and the creation time; ext2/ext3 volumes get neither, as
//!   TSK reads them. Times are UTC.
//!
//! # Deliberate differences from TSK
//!
//! - A fast symlink's content is its target (resident bytes); TSK's `icat`
//!   gives as many zero bytes.
//! - Checks TSK does not make are made and reported, never fatal:
//!   superblock and inode checksums, directory-leaf checksums and htree
//!   index-block checksums (`metadata_csum`, crc32c), block numbers past the volume (the map
//!   stops there; TSK drops the whole content), extent trees that loop or
//!   whose depths do not descend, absurd inline sizes.
//! - An extent-mapped file with a hole longer than the volume has blocks
//!   (a sparse file larger than the file system) is read whole; TSK
//!   4.11.1's `icat` stops with "Invalid address in run" (the filler run
//!   it makes for the hole fails its block-number check) and its `istat`
//!   block list is cut short.
//! - htree index blocks (`dx_root` past `..`, `dx_node` blocks) are not
//!   parsed for names; TSK scans them as slack and lists garbage deleted
//!   names from the hash entries (seen with `e2fsck -D` directories).
//! - Block groups flagged `INODE_UNINIT` are not searched for orphans
//!   (their inode tables may hold anything); `BLOCK_UNINIT` groups' free
//!   blocks are worked out from the group's own metadata, as the kernel
//!   does, rather than read from a bitmap block mkfs never wrote (TSK
//!   reads that block, usually zeros, and so counts a backup superblock as
//!   free).
//! - Names are kept verbatim up to their first NUL (TSK shows control
//!   characters as `^`); bytes that are not UTF-8 are shown as U+FFFD and
//!   reported.
//! - Times past 2038 use the `_extra` epoch bits (TSK reads 32 bits).
//! - Work is bounded whatever the input: at most 2^20 names per
//!   directory, extent trees of at most 2^20 extents, block maps of at
//!   most the volume's block count of indirect blocks per file, directory
//!   reads of four times the volume in all, and at most 2^20 inode numbers
//!   remembered for the orphan search.

mod crc32c;
pub mod dir;
pub mod inode;
pub mod superblock;
mod walk;

use std::collections::HashSet;
use std::io;
use std::ops::ControlFlow;

use crate::cache::ChunkCache;
use crate::detect::FsKind;
use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::read::{ReadAt, read_exact_at, read_full};
use crate::record::{Content, Extent, FileRecord, Run, push_run};
use crate::walk::WalkSummary;

use self::inode::{FL_EXTENTS, FL_INLINE_DATA, I_BLOCK_LEN, Inode, S_IFDIR, S_IFLNK, S_IFREG};
use self::superblock::{
    INCOMPAT_CSUM_SEED, INCOMPAT_EXTENTS, INCOMPAT_RECOVER, RO_COMPAT_LARGE_FILE, SUPERBLOCK_LEN,
    SUPERBLOCK_OFFSET, Superblock,
};

/// The root directory's inode.
pub const ROOT_INODE: u32 = 2;
/// Most extents one file's tree may list.
const MAX_EXTENTS: usize = 1 << 20;
/// Deepest extent tree followed (the kernel makes at most 5 levels).
const MAX_EXTENT_DEPTH: u16 = 8;
/// Most bytes of inline content held (an inline file cannot hold more
/// than an inode; a larger size is reported and cut here).
const MAX_INLINE: u64 = 64 * 1024;
/// `bg_flags`: inode table and bitmap not initialized.
const BG_INODE_UNINIT: u16 = 0x1;
/// `bg_flags`: block bitmap not initialized.
const BG_BLOCK_UNINIT: u16 = 0x2;

/// A block group descriptor's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupDesc {
    /// Block of the block bitmap.
    pub block_bitmap: u64,
    /// Block of the inode bitmap.
    pub inode_bitmap: u64,
    /// First block of the inode table.
    pub inode_table: u64,
    /// `bg_flags`.
    pub flags: u16,
    /// Inodes at the end of the table never used (with group checksums).
    pub itable_unused: u32,
}

/// An opened ext2, ext3 or ext4 file system.
pub struct ExtFs<R> {
    src: R,
    base: u64,
    sb: Superblock,
    kind: FsKind,
    open_errors: Vec<ProcessingError>,
    /// Group descriptor blocks.
    gdt: ChunkCache,
    /// Block bitmaps (key `2g`) and inode bitmaps (key `2g + 1`).
    bitmaps: ChunkCache,
    /// `metadata_csum` seed (crc32c of the UUID, or `s_checksum_seed`).
    csum_seed: u32,
    find_orphans: bool,
}

/// What an inode's content is, for a record.
pub(crate) struct InodeContent {
    /// The content, clipped to the size.
    pub content: Content,
    /// Slack after the content in its last block.
    pub slack: Vec<Extent>,
    /// Stored runs up to the size rounded up to a block (a directory is
    /// parsed from these).
    pub stored: Content,
}

impl<R: ReadAt> ExtFs<R> {
    /// Opens the ext file system whose volume starts at byte `base` of
    /// `src` and is `len` bytes long. Only a superblock that cannot
    /// describe a volume is an error; damage found beyond it is in
    /// [`ExtFs::open_errors`].
    pub fn open(src: R, base: u64, len: u64) -> Result<Self, FsError> {
        let mut raw = vec![0u8; SUPERBLOCK_LEN];
        let at = base + SUPERBLOCK_OFFSET;
        read_exact_at(&src, &mut raw, at).map_err(|e| FsError::io(at, SUPERBLOCK_LEN, e))?;
        let sb = Superblock::parse(&raw).map_err(|r| FsError::not("ext superblock", r))?;
        let mut open_errors = Vec::new();
        let avail = len.min(src.len().saturating_sub(base));
        let present = avail / sb.block_size;
        if present < sb.blocks_count {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                at,
                format!(
                    "superblock claims {} blocks but only {present} are present",
                    sb.blocks_count
                ),
            ));
        }
        let csum_seed = if sb.has_incompat(INCOMPAT_CSUM_SEED) {
            sb.checksum_seed
        } else {
            crc32c::update(!0, &sb.uuid)
        };
        if sb.metadata_csum() {
            let c = crc32c::update(!0, &raw[..0x3FC]);
            if c != sb.checksum {
                open_errors.push(ProcessingError::at(
                    ErrorKind::ChecksumMismatch,
                    at + 0x3FC,
                    format!(
                        "superblock checksum {c:#010x} does not match the stored {:#010x}",
                        sb.checksum
                    ),
                ));
            }
        }
        if sb.has_incompat(INCOMPAT_RECOVER) {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                at + 0x60,
                "the journal needs recovery; it is not replayed: the file system is read as it stands",
            ));
        }
        let kind = if sb.has_incompat(INCOMPAT_EXTENTS) {
            FsKind::Ext4
        } else {
            crate::detect::detect_filesystem(&src, base, len).unwrap_or(FsKind::Ext2)
        };
        let kind = match kind {
            FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4 => kind,
            _ => FsKind::Ext2,
        };
        let bs = sb.block_size;
        Ok(Self {
            src,
            base,
            kind,
            open_errors,
            gdt: ChunkCache::new(bs, 8),
            bitmaps: ChunkCache::new(bs, 16),
            csum_seed,
            find_orphans: true,
            sb,
        })
    }

    /// Whether the walk searches the inode tables for orphan inodes (on by
    /// default, as `fls` does). Off, `$OrphanFiles` is listed empty.
    pub fn set_orphan_search(&mut self, on: bool) {
        self.find_orphans = on;
    }

    /// The validated superblock.
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// Ext2, Ext3 or Ext4, as detection tells them apart.
    pub fn kind(&self) -> FsKind {
        self.kind
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u64 {
        self.sb.block_size
    }

    /// Problems found when opening (truncated volume, superblock checksum,
    /// a journal needing recovery).
    pub fn open_errors(&self) -> &[ProcessingError] {
        &self.open_errors
    }

    /// The source the file system is read from.
    pub fn source(&self) -> &R {
        &self.src
    }

    /// TSK's number for `$OrphanFiles`.
    pub fn orphan_dir_inode(&self) -> u64 {
        u64::from(self.sb.inodes_count) + 1
    }

    /// Absolute byte offset of block `b`.
    fn block_offset(&self, b: u64) -> u64 {
        self.base
            .saturating_add(b.saturating_mul(self.sb.block_size))
    }

    /// Whether TSK reads this volume as ext4 (nanoseconds, creation time).
    fn tsk_ext4(&self) -> bool {
        self.sb.has_incompat(INCOMPAT_EXTENTS)
    }

    fn large_file(&self) -> bool {
        self.sb.has_ro_compat(RO_COMPAT_LARGE_FILE)
    }

    // ------------------------------------------------------------ groups

    /// Group descriptor `g`, its block numbers checked against the volume.
    pub fn group_desc(&self, g: u64) -> Result<GroupDesc, ProcessingError> {
        if g >= self.sb.group_count {
            return Err(ProcessingError::new(
                ErrorKind::CorruptFileSystem,
                format!("group {g} past the {} groups", self.sb.group_count),
            ));
        }
        let (block, within) = self.sb.desc_location(g);
        let at = self.block_offset(block) + within;
        let buf = self
            .gdt
            .get(block, |b| self.read_block_vec(b))
            .map_err(|e| ProcessingError::at(ErrorKind::Io, at, e.to_string()))?;
        let w = usize::try_from(within).unwrap_or(usize::MAX);
        let d = buf
            .get(w..w.saturating_add(self.sb.desc_size as usize))
            .ok_or_else(|| {
                ProcessingError::at(ErrorKind::Io, at, "group descriptor past the source end")
            })?;
        let u32f = |o| u64::from(crate::bytes::u32_at(d, o).unwrap_or(0));
        let wide = self.sb.desc_size >= 64;
        let hi = |o| if wide { u32f(o) << 32 } else { 0 };
        let gd = GroupDesc {
            block_bitmap: u32f(0x0) | hi(0x20),
            inode_bitmap: u32f(0x4) | hi(0x24),
            inode_table: u32f(0x8) | hi(0x28),
            flags: crate::bytes::u16_at(d, 0x12).unwrap_or(0),
            itable_unused: (crate::bytes::u16_at(d, 0x1C).unwrap_or(0) as u32)
                | if wide {
                    u32::from(crate::bytes::u16_at(d, 0x32).unwrap_or(0)) << 16
                } else {
                    0
                },
        };
        let table_blocks = (u64::from(self.sb.inodes_per_group) * u64::from(self.sb.inode_size))
            .div_ceil(self.sb.block_size);
        let n = self.sb.blocks_count;
        if gd.block_bitmap >= n
            || gd.inode_bitmap >= n
            || gd.inode_table.saturating_add(table_blocks) > n
            || gd.inode_table == 0
        {
            return Err(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                at,
                format!(
                    "group {g}: bitmaps at blocks {} and {}, inode table at {} ({table_blocks} blocks): outside the {n} blocks",
                    gd.block_bitmap, gd.inode_bitmap, gd.inode_table
                ),
            ));
        }
        Ok(gd)
    }

    fn read_block_vec(&self, b: u64) -> io::Result<Vec<u8>> {
        let mut v = vec![0u8; usize::try_from(self.sb.block_size).unwrap_or(1024)];
        let n = read_full(&self.src, &mut v, self.block_offset(b))?;
        if n < v.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("block {b} runs past the end of the source"),
            ));
        }
        Ok(v)
    }

    /// The block bitmap of group `g` (BLOCK_UNINIT groups worked out from
    /// their own metadata).
    fn block_bitmap(&self, g: u64) -> Result<std::sync::Arc<[u8]>, ProcessingError> {
        let gd = self.group_desc(g)?;
        let at = self.block_offset(gd.block_bitmap);
        self.bitmaps
            .get(2 * g, |_| {
                if gd.flags & BG_BLOCK_UNINIT != 0 && self.sb.group_count > 1 {
                    Ok(self.uninit_block_bitmap(g, &gd))
                } else {
                    self.read_block_vec(gd.block_bitmap)
                }
            })
            .map_err(|e| ProcessingError::at(ErrorKind::Io, at, e.to_string()))
    }

    fn uninit_block_bitmap(&self, g: u64, gd: &GroupDesc) -> Vec<u8> {
        let mut bits = vec![0u8; usize::try_from(self.sb.block_size).unwrap_or(1024)];
        let first = self.sb.group_first_block(g);
        let count = self.sb.group_blocks(g);
        let mut set = |b: u64| {
            if b >= first && b < first + count {
                let i = usize::try_from(b - first).unwrap_or(0);
                if let Some(x) = bits.get_mut(i / 8) {
                    *x |= 1 << (i % 8);
                }
            }
        };
        for b in first..first + self.sb.group_header_blocks(g).min(count) {
            set(b);
        }
        set(gd.block_bitmap);
        set(gd.inode_bitmap);
        let table_blocks = (u64::from(self.sb.inodes_per_group) * u64::from(self.sb.inode_size))
            .div_ceil(self.sb.block_size);
        for b in gd.inode_table..gd.inode_table + table_blocks {
            set(b);
        }
        bits
    }

    /// The inode bitmap of group `g` (all free in INODE_UNINIT groups).
    fn inode_bitmap(&self, g: u64) -> Result<std::sync::Arc<[u8]>, ProcessingError> {
        let gd = self.group_desc(g)?;
        let at = self.block_offset(gd.inode_bitmap);
        self.bitmaps
            .get(2 * g + 1, |_| {
                if gd.flags & BG_INODE_UNINIT != 0 {
                    Ok(vec![
                        0u8;
                        usize::try_from(self.sb.block_size).unwrap_or(1024)
                    ])
                } else {
                    self.read_block_vec(gd.inode_bitmap)
                }
            })
            .map_err(|e| ProcessingError::at(ErrorKind::Io, at, e.to_string()))
    }

    /// Whether inode `ino` is allocated by its group's bitmap.
    pub fn inode_allocated(&self, ino: u32) -> Result<bool, ProcessingError> {
        let i = u64::from(ino.saturating_sub(1));
        let ipg = u64::from(self.sb.inodes_per_group);
        let bits = self.inode_bitmap(i / ipg)?;
        let k = usize::try_from(i % ipg).unwrap_or(0);
        Ok(bits.get(k / 8).is_some_and(|b| b & (1 << (k % 8)) != 0))
    }

    /// Whether any of `count` blocks from `first` is allocated (blocks
    /// past the volume count as allocated).
    fn any_block_allocated(&self, first: u64, count: u64) -> Result<bool, ProcessingError> {
        let end = first.saturating_add(count);
        if end > self.sb.blocks_count {
            return Ok(true);
        }
        let bpg = u64::from(self.sb.blocks_per_group);
        let fdb = u64::from(self.sb.first_data_block);
        let mut b = first.max(fdb);
        if first < fdb {
            return Ok(true);
        }
        while b < end {
            let g = (b - fdb) / bpg;
            let bits = self.block_bitmap(g)?;
            let gfirst = self.sb.group_first_block(g);
            let gend = (gfirst + bpg).min(end);
            while b < gend {
                let k = usize::try_from(b - gfirst).unwrap_or(0);
                if bits.get(k / 8).is_none_or(|x| x & (1 << (k % 8)) != 0) {
                    return Ok(true);
                }
                b += 1;
            }
        }
        Ok(false)
    }

    // ------------------------------------------------------------ inodes

    /// The raw bytes of inode `ino` (`s_inode_size` of them).
    pub fn read_inode_raw(&self, ino: u32) -> Result<Vec<u8>, ProcessingError> {
        if ino == 0 || ino > self.sb.inodes_count {
            return Err(ProcessingError::new(
                ErrorKind::CorruptFileSystem,
                format!("inode {ino} outside 1..={}", self.sb.inodes_count),
            ));
        }
        let i = u64::from(ino - 1);
        let ipg = u64::from(self.sb.inodes_per_group);
        let gd = self.group_desc(i / ipg)?;
        let at = self.block_offset(gd.inode_table) + (i % ipg) * u64::from(self.sb.inode_size);
        let mut raw = vec![0u8; self.sb.inode_size as usize];
        read_exact_at(&self.src, &mut raw, at)
            .map_err(|e| ProcessingError::at(ErrorKind::Io, at, e.to_string()))?;
        Ok(raw)
    }

    /// Absolute byte offset of inode `ino` (for error positions).
    fn inode_offset(&self, ino: u32) -> u64 {
        let i = u64::from(ino.saturating_sub(1));
        let ipg = u64::from(self.sb.inodes_per_group);
        self.group_desc(i / ipg).map_or(self.base, |gd| {
            self.block_offset(gd.inode_table) + (i % ipg) * u64::from(self.sb.inode_size)
        })
    }

    /// Inode `ino`, parsed.
    pub fn read_inode(&self, ino: u32) -> Result<Inode, ProcessingError> {
        let raw = self.read_inode_raw(ino)?;
        Inode::parse(&raw).ok_or_else(|| {
            ProcessingError::new(ErrorKind::CorruptRecord, format!("inode {ino} too short"))
        })
    }

    /// The `metadata_csum` seed of one inode (for its directory blocks).
    fn inode_seed(&self, ino: u32, generation: u32) -> u32 {
        let c = crc32c::update(self.csum_seed, &ino.to_le_bytes());
        crc32c::update(c, &generation.to_le_bytes())
    }

    /// Reads one file's content of inode `ino` through its runs into a
    /// vector, at most `max` bytes (for tests and small structures).
    pub fn read_content(&self, ino: u32, max: usize) -> Result<Vec<u8>, ProcessingError> {
        let raw = self.read_inode_raw(ino)?;
        let inode = Inode::parse(&raw).ok_or_else(|| {
            ProcessingError::new(ErrorKind::CorruptRecord, format!("inode {ino} too short"))
        })?;
        let mut errors = Vec::new();
        let c = self.inode_content(ino, &raw, &inode, &mut errors);
        let r = crate::ContentReader::new(&self.src, &c.content);
        let mut out = vec![0u8; usize::try_from(c.content.len()).unwrap_or(max).min(max)];
        let n = r
            .read_at(&mut out, 0)
            .map_err(|e| ProcessingError::new(ErrorKind::Io, e.to_string()))?;
        out.truncate(n);
        Ok(out)
    }

    // ----------------------------------------------------------- content

    /// An inode's content: inline bytes, a fast symlink's target, or the
    /// runs of its extent tree or block map. Problems go to `errors`.
    pub(crate) fn inode_content(
        &self,
        ino: u32,
        raw: &[u8],
        inode: &Inode,
        errors: &mut Vec<ProcessingError>,
    ) -> InodeContent {
        let size = inode.size(self.large_file());
        let bs = self.sb.block_size;
        let at = self.inode_offset(ino);
        let none = || InodeContent {
            content: Content::None,
            slack: Vec::new(),
            stored: Content::None,
        };
        let ft = inode.file_type();
        if !matches!(ft, S_IFREG | S_IFDIR | S_IFLNK) {
            // Devices, FIFOs and sockets hold no data (`i_block` holds a
            // device number).
            return none();
        }
        if inode.flags & FL_INLINE_DATA != 0 {
            let content = self.inline_content(raw, inode, size, at, errors);
            return InodeContent {
                stored: content.clone(),
                content,
                slack: Vec::new(),
            };
        }
        if ft == S_IFLNK && inode.flags & FL_EXTENTS == 0 && size < I_BLOCK_LEN as u64 {
            let target = inode.block[..usize::try_from(size).unwrap_or(0)].to_vec();
            let content = if target.is_empty() {
                Content::None
            } else {
                Content::Resident(target)
            };
            return InodeContent {
                stored: content.clone(),
                content,
                slack: Vec::new(),
            };
        }
        if size == 0 {
            return none();
        }
        let blocks = size.div_ceil(bs);
        // Physical block runs in file order: (logical first, physical or
        // None for a hole, count).
        let mut map: Vec<(u64, Option<u64>, u64)> = Vec::new();
        if inode.flags & FL_EXTENTS != 0 {
            self.extent_map(inode, at, &mut map, errors);
        } else {
            self.block_map(inode, blocks, at, &mut map, errors);
        }
        // Runs up to the size rounded up to a block, holes as zeros.
        let mut stored_runs = Vec::new();
        let mut pos = 0u64;
        for &(logical, phys, count) in &map {
            if logical < pos || logical >= blocks {
                continue;
            }
            if logical > pos {
                push_run(
                    &mut stored_runs,
                    Run::Zeros {
                        len: (logical - pos) * bs,
                    },
                );
            }
            let count = count.min(blocks - logical);
            match phys {
                Some(p) => push_run(
                    &mut stored_runs,
                    Run::Data {
                        offset: self.block_offset(p),
                        len: count * bs,
                    },
                ),
                None => push_run(&mut stored_runs, Run::Zeros { len: count * bs }),
            }
            pos = logical + count;
        }
        if pos < blocks {
            push_run(
                &mut stored_runs,
                Run::Zeros {
                    len: (blocks - pos) * bs,
                },
            );
        }
        let runs = crate::record::clip_runs(&stored_runs, 0, size);
        let mut slack = Vec::new();
        if let Some(Run::Data { offset, len }) = runs.last() {
            let tail = size % bs;
            if tail != 0 {
                slack.push(Extent {
                    offset: offset + len,
                    len: bs - tail,
                });
            }
        }
        InodeContent {
            content: Content::Runs(runs),
            slack,
            stored: Content::Runs(stored_runs),
        }
    }

    fn inline_content(
        &self,
        raw: &[u8],
        inode: &Inode,
        size: u64,
        at: u64,
        errors: &mut Vec<ProcessingError>,
    ) -> Content {
        let mut bytes = inode.block.to_vec();
        if let Some(v) = inode::inline_xattr(raw, 7, b"data") {
            bytes.extend_from_slice(v);
        }
        let avail = bytes.len() as u64;
        if size > avail {
            errors.push(ProcessingError::at(
                ErrorKind::AbsurdSize,
                at,
                format!(
                    "inline data of {size} bytes but the inode holds {avail}: the rest reads as zeros (at most {MAX_INLINE} bytes are given)"
                ),
            ));
        }
        bytes.resize(usize::try_from(size.min(MAX_INLINE)).unwrap_or(0), 0);
        if bytes.is_empty() {
            Content::None
        } else {
            Content::Resident(bytes)
        }
    }

    /// Adds the extents of an extent tree (rooted in `i_block`) to `map`.
    fn extent_map(
        &self,
        inode: &Inode,
        at: u64,
        map: &mut Vec<(u64, Option<u64>, u64)>,
        errors: &mut Vec<ProcessingError>,
    ) {
        let mut visited = HashSet::new();
        let mut err = |e: ProcessingError| {
            if errors.len() < 16 {
                errors.push(e);
            }
        };
        self.extent_node(&inode.block, None, at + 0x28, &mut visited, map, &mut err);
        map.sort_by_key(|&(l, _, _)| l);
    }

    fn extent_node(
        &self,
        node: &[u8],
        want_depth: Option<u16>,
        at: u64,
        visited: &mut HashSet<u64>,
        map: &mut Vec<(u64, Option<u64>, u64)>,
        err: &mut dyn FnMut(ProcessingError),
    ) {
        use crate::bytes::{u16_at, u32_at};
        let magic = u16_at(node, 0).unwrap_or(0);
        let entries = usize::from(u16_at(node, 2).unwrap_or(0));
        let depth = u16_at(node, 6).unwrap_or(0);
        if magic != 0xF30A {
            err(ProcessingError::at(
                ErrorKind::CorruptAttribute,
                at,
                format!("extent header magic {magic:#06x} is not 0xf30a"),
            ));
            return;
        }
        if want_depth.is_some_and(|d| d != depth) || depth > MAX_EXTENT_DEPTH {
            err(ProcessingError::at(
                ErrorKind::CorruptAttribute,
                at,
                format!(
                    "extent node of depth {depth} where {} was expected",
                    want_depth.map_or("at most 8".to_string(), |d| d.to_string())
                ),
            ));
            return;
        }
        let fit = (node.len() - 12) / 12;
        if entries > fit {
            err(ProcessingError::at(
                ErrorKind::CorruptAttribute,
                at,
                format!("extent node lists {entries} entries; {fit} fit"),
            ));
        }
        for i in 0..entries.min(fit) {
            let e = &node[12 + 12 * i..24 + 12 * i];
            let logical = u64::from(u32_at(e, 0).unwrap_or(0));
            if depth == 0 {
                let raw_len = u16_at(e, 4).unwrap_or(0);
                let phys = (u64::from(u16_at(e, 6).unwrap_or(0)) << 32)
                    | u64::from(u32_at(e, 8).unwrap_or(0));
                let (len, init) = if raw_len > 32768 {
                    (u64::from(raw_len - 32768), false)
                } else {
                    (u64::from(raw_len), true)
                };
                if len == 0 {
                    continue;
                }
                if map.len() >= MAX_EXTENTS {
                    err(ProcessingError::at(
                        ErrorKind::WalkLimit,
                        at,
                        format!("more than {MAX_EXTENTS} extents: the rest are not read"),
                    ));
                    return;
                }
                if !init {
                    map.push((logical, None, len));
                } else if phys.saturating_add(len) > self.sb.blocks_count || phys == 0 {
                    err(ProcessingError::at(
                        ErrorKind::ChainOutOfRange,
                        at + 12 + 12 * i as u64,
                        format!(
                            "extent of {len} blocks at block {phys} is outside the {} blocks: read as a hole",
                            self.sb.blocks_count
                        ),
                    ));
                    map.push((logical, None, len));
                } else {
                    map.push((logical, Some(phys), len));
                }
            } else {
                let child = (u64::from(u16_at(e, 8).unwrap_or(0)) << 32)
                    | u64::from(u32_at(e, 4).unwrap_or(0));
                let child_at = self.block_offset(child);
                if child == 0 || child >= self.sb.blocks_count {
                    err(ProcessingError::at(
                        ErrorKind::ChainOutOfRange,
                        at,
                        format!("extent index points at block {child}, outside the volume"),
                    ));
                    continue;
                }
                if !visited.insert(child) {
                    err(ProcessingError::at(
                        ErrorKind::ChainLoop,
                        child_at,
                        format!("extent tree reaches block {child} twice"),
                    ));
                    continue;
                }
                match self.read_block_vec(child) {
                    Ok(buf) => self.extent_node(&buf, Some(depth - 1), child_at, visited, map, err),
                    Err(e) => err(ProcessingError::at(ErrorKind::Io, child_at, e.to_string())),
                }
            }
        }
    }

    /// Adds the blocks of a block map (12 direct pointers, then single,
    /// double and triple indirect) to `map`, up to `blocks` blocks.
    fn block_map(
        &self,
        inode: &Inode,
        blocks: u64,
        at: u64,
        map: &mut Vec<(u64, Option<u64>, u64)>,
        errors: &mut Vec<ProcessingError>,
    ) {
        let ptr = |i: usize| u64::from(crate::bytes::u32_at(&inode.block, 4 * i).unwrap_or(0));
        let mut st = MapState {
            logical: 0,
            blocks,
            budget: self.sb.blocks_count.saturating_add(4),
            map,
            errors,
            stop: false,
        };
        for i in 0..12 {
            if st.logical >= blocks {
                return;
            }
            self.map_leaf(&mut st, ptr(i), at);
        }
        let per = self.sb.block_size / 4;
        for level in 1..=3u32 {
            if st.logical >= blocks || st.stop {
                return;
            }
            self.map_indirect(&mut st, ptr(11 + level as usize), level, per, at);
        }
    }

    fn map_leaf(&self, st: &mut MapState<'_>, p: u64, at: u64) {
        let phys = if p == 0 {
            None
        } else if p >= self.sb.blocks_count {
            st.error(ProcessingError::at(
                ErrorKind::ChainOutOfRange,
                at,
                format!(
                    "block pointer {p} is outside the {} blocks: read as a hole",
                    self.sb.blocks_count
                ),
            ));
            None
        } else {
            Some(p)
        };
        let l = st.logical;
        if st.map.len() >= MAX_EXTENTS {
            st.error(ProcessingError::at(
                ErrorKind::WalkLimit,
                at,
                format!("block map of more than {MAX_EXTENTS} runs: the rest is not read"),
            ));
            st.stop = true;
            return;
        }
        match st.map.last_mut() {
            Some((ll, Some(pp), n))
                if phys.is_some_and(|x| Some(x) == pp.checked_add(*n)) && *ll + *n == l =>
            {
                *n += 1
            }
            Some((ll, None, n)) if phys.is_none() && *ll + *n == l => *n += 1,
            _ => st.map.push((l, phys, 1)),
        }
        st.logical += 1;
    }

    fn map_indirect(&self, st: &mut MapState<'_>, p: u64, level: u32, per: u64, at: u64) {
        // Blocks this pointer covers.
        let span = per.saturating_pow(level);
        let remaining = st.blocks - st.logical;
        if p == 0 || p >= self.sb.blocks_count {
            if p != 0 {
                st.error(ProcessingError::at(
                    ErrorKind::ChainOutOfRange,
                    at,
                    format!("indirect block pointer {p} is outside the volume: read as a hole"),
                ));
            }
            let n = span.min(remaining);
            match st.map.last_mut() {
                Some((ll, None, c)) if *ll + *c == st.logical => *c += n,
                _ => st.map.push((st.logical, None, n)),
            }
            st.logical += n;
            return;
        }
        if st.budget == 0 {
            st.error(ProcessingError::at(
                ErrorKind::WalkLimit,
                at,
                "more indirect blocks than the volume has blocks: the rest is not read",
            ));
            st.stop = true;
            return;
        }
        st.budget -= 1;
        let buf = match self.read_block_vec(p) {
            Ok(b) => b,
            Err(e) => {
                st.error(ProcessingError::at(
                    ErrorKind::Io,
                    self.block_offset(p),
                    e.to_string(),
                ));
                st.stop = true;
                return;
            }
        };
        let here = self.block_offset(p);
        for i in 0..per as usize {
            if st.logical >= st.blocks || st.stop {
                return;
            }
            let q = u64::from(crate::bytes::u32_at(&buf, 4 * i).unwrap_or(0));
            if level == 1 {
                self.map_leaf(st, q, here + 4 * i as u64);
            } else {
                self.map_indirect(st, q, level - 1, per, here + 4 * i as u64);
            }
        }
    }

    // ---------------------------------------------------------- free space

    /// Calls `f` with each run of unallocated blocks as absolute extents
    /// in disk order (free by the block bitmaps), clipped to the source.
    pub fn unallocated_runs(&self, mut f: impl FnMut(Extent)) -> Result<(), FsError> {
        let bs = self.sb.block_size;
        let end = self.src.len().min(self.block_offset(self.sb.blocks_count));
        let mut pending: Option<Extent> = None;
        let mut emit = |first: u64, count: u64, f: &mut dyn FnMut(Extent)| {
            let offset = self.block_offset(first);
            let len = (count * bs).min(end.saturating_sub(offset));
            if len == 0 {
                return;
            }
            match pending.as_mut() {
                Some(p) if p.offset + p.len == offset => p.len += len,
                _ => {
                    if let Some(p) = pending.replace(Extent { offset, len }) {
                        f(p);
                    }
                }
            }
        };
        for g in 0..self.sb.group_count {
            let bits = self.block_bitmap(g).map_err(|e| {
                FsError::io(
                    e.offset.unwrap_or(self.base),
                    0,
                    io::Error::other(e.detail.clone()),
                )
            })?;
            let first = self.sb.group_first_block(g);
            let count = self.sb.group_blocks(g);
            let mut run: Option<u64> = None;
            for k in 0..count {
                let i = usize::try_from(k).unwrap_or(0);
                let free = bits.get(i / 8).is_some_and(|x| x & (1 << (i % 8)) == 0);
                match (free, run) {
                    (true, None) => run = Some(k),
                    (false, Some(s)) => {
                        emit(first + s, k - s, &mut f);
                        run = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = run {
                emit(first + s, count - s, &mut f);
            }
        }
        if let Some(p) = pending {
            f(p);
        }
        Ok(())
    }

    /// Walks the whole file system depth-first, calling `visit` with one
    /// record per name (TSK's order within a directory, each subdirectory
    /// walked right after its name), then `$OrphanFiles` and the orphans.
    /// Returning `ControlFlow::Break` from `visit` stops the walk. Memory
    /// holds the names of one directory per level of the current path,
    /// plus the inode numbers the orphan search needs.
    pub fn walk<F>(&self, visit: F) -> Result<WalkSummary, FsError>
    where
        F: FnMut(FileRecord) -> ControlFlow<()>,
    {
        Ok(walk::walk(self, visit))
    }
}

/// The state of a block-map walk.
struct MapState<'a> {
    logical: u64,
    blocks: u64,
    budget: u64,
    map: &'a mut Vec<(u64, Option<u64>, u64)>,
    errors: &'a mut Vec<ProcessingError>,
    stop: bool,
}

impl MapState<'_> {
    fn error(&mut self, e: ProcessingError) {
        if self.errors.len() < 16 {
            self.errors.push(e);
        }
    }
}

/// The type of an ext record from the mode kept in
/// [`FileRecord::attributes`]: the `S_IF*` bits.
pub fn mode_type(attributes: u32) -> u16 {
    (attributes as u16) & inode::S_IFMT
}
