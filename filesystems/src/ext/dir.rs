//! Directory blocks, parsed as The Sleuth Kit parses them: every 4-byte
//! position that could start an entry is tested, so names left in the
//! slack of a live entry (its `rec_len` reaching past its name) are found
//! and marked deleted.

use crate::bytes::{u16_at, u32_at};

use super::crc32c;

/// Longest name an entry holds.
pub const MAX_NAME_LEN: usize = 255;

/// Bytes an entry with a name of `name_len` bytes needs (8-byte header,
/// the name, rounded up to 4).
pub fn entry_size(name_len: usize) -> usize {
    (name_len + 8 + 3) & !3
}

/// One name found in a directory block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Byte offset of the entry in the block.
    pub offset: usize,
    /// Inode number (0: none).
    pub inode: u32,
    /// The name's bytes as stored.
    pub name: Vec<u8>,
    /// The entry's file type byte (0 without the `filetype` feature).
    pub file_type: u8,
    /// Whether the name is deleted: in the slack of another entry, with
    /// inode 0, or in a deleted directory.
    pub deleted: bool,
}

/// Directory-entry file types.
pub const FT_REG: u8 = 1;
/// Directory.
pub const FT_DIR: u8 = 2;
/// Symbolic link.
pub const FT_SYMLINK: u8 = 7;

/// Parses `buf` (one block, or an inline directory's bytes) as TSK's
/// `ext2fs_dent_parse_block` does. `typed` says whether entries carry a
/// file type byte (else the name length is 16 bits); `last_inum` is the
/// largest inode number an entry may name; `in_deleted_dir` marks every
/// name deleted. Calls `out` with each name, in block order.
pub fn parse_block(
    buf: &[u8],
    typed: bool,
    last_inum: u64,
    in_deleted_dir: bool,
    mut out: impl FnMut(DirEntry),
) {
    let len = buf.len();
    let min_entry = entry_size(1);
    let mut dellen = 0usize;
    let mut idx = 0usize;
    while idx + min_entry <= len {
        let inode = u32_at(buf, idx).unwrap_or(0);
        let reclen = usize::from(u16_at(buf, idx + 4).unwrap_or(0));
        let namelen = if typed {
            usize::from(buf[idx + 6])
        } else {
            usize::from(u16_at(buf, idx + 6).unwrap_or(0))
        };
        let need = entry_size(namelen);
        let valid = u64::from(inode) <= last_inum
            && namelen <= MAX_NAME_LEN
            && namelen != 0
            && reclen >= need
            && reclen % 4 == 0
            && idx + reclen <= len;
        if !valid {
            dellen = dellen.saturating_sub(4);
            idx += 4;
            continue;
        }
        // An entry in slack must end inside the slack.
        if dellen != 0 && dellen < need {
            dellen = dellen.saturating_sub(4);
            idx += 4;
            continue;
        }
        let deleted = dellen > 0 || inode == 0 || in_deleted_dir;
        if dellen > 0 {
            dellen -= need;
        }
        out(DirEntry {
            offset: idx,
            inode,
            name: buf[idx + 8..idx + 8 + namelen].to_vec(),
            file_type: if typed { buf[idx + 7] } else { 0 },
            deleted,
        });
        let mut step = need;
        if dellen == 0 {
            if reclen - need >= min_entry {
                dellen = reclen - need;
            } else {
                step = reclen;
            }
        }
        idx += step;
    }
}

/// Whether a block of a hashed (htree) directory is an index node rather
/// than a leaf of names: the root (block 0: `.`, then `..` whose
/// `rec_len` covers the rest, then the 8-byte `dx_root_info`) or an
/// interior node (a fake entry with inode 0, name length 0 and a
/// `rec_len` of the whole block). Their index entries are not names: TSK
/// parses them as slack and may list garbage; they are skipped here.
pub fn is_htree_node(block: &[u8], first: bool) -> bool {
    let bs = block.len();
    if first {
        let dot =
            u16_at(block, 4) == Some(12) && block.get(6) == Some(&1) && block.get(8) == Some(&b'.');
        let dotdot_len = usize::from(u16_at(block, 16).unwrap_or(0));
        let info_len = block.get(24 + 5).copied();
        dot && dotdot_len == bs - 12 && info_len == Some(8)
    } else {
        u32_at(block, 0) == Some(0)
            && usize::from(u16_at(block, 4).unwrap_or(0)) == bs
            && block.get(6) == Some(&0)
    }
}

/// Checks the `metadata_csum` tail of a leaf directory block (the 12-byte
/// fake entry ending it): `None` when the block has no tail (an htree
/// node, or a block without checksums), else `Some(Some((stored,
/// computed)))` on a mismatch and `Some(None)` when it holds.
pub fn leaf_checksum(block: &[u8], inode_seed: u32) -> Option<Option<(u32, u32)>> {
    let n = block.len();
    if n < 12 {
        return None;
    }
    let t = &block[n - 12..];
    let tail = u32_at(t, 0)? == 0 && u16_at(t, 4)? == 12 && t[6] == 0 && t[7] == 0xDE;
    if !tail {
        return None;
    }
    let stored = u32_at(t, 8)?;
    let computed = crc32c::update(inode_seed, &block[..n - 12]);
    Some((stored != computed).then_some((stored, computed)))
}

/// Checks the `metadata_csum` tail of an htree index block (`first`: the
/// root): the kernel's `ext4_dx_csum`, a CRC-32C from the inode's seed
/// over the block up to the last counted index entry, then the
/// `dx_tail`'s reserved word and a zero word in place of the checksum.
/// The tail follows `limit` entries. `None` when the block cannot hold
/// one (a volume without checksums leaves no room for it: `limit` fills
/// the block), else as [`leaf_checksum`].
pub fn node_checksum(block: &[u8], first: bool, inode_seed: u32) -> Option<Option<(u32, u32)>> {
    // The count/limit pair follows the root's `.`, `..` and root info
    // (`info_length` bytes), or an interior node's fake entry.
    let at = if first {
        24 + usize::from(*block.get(24 + 5)?)
    } else {
        8
    };
    let limit = usize::from(u16_at(block, at)?);
    let count = usize::from(u16_at(block, at + 2)?);
    let tail = at + 8 * limit;
    if count > limit || tail + 8 > block.len() || tail + 8 + 8 <= block.len() {
        return None;
    }
    let stored = u32_at(block, tail + 4)?;
    let mut crc = crc32c::update(inode_seed, &block[..at + 8 * count]);
    crc = crc32c::update(crc, &block[tail..tail + 4]);
    let computed = crc32c::update(crc, &[0u8; 4]);
    Some((stored != computed).then_some((stored, computed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(buf: &mut [u8], at: usize, inode: u32, reclen: u16, name: &[u8], ft: u8) {
        buf[at..at + 4].copy_from_slice(&inode.to_le_bytes());
        buf[at + 4..at + 6].copy_from_slice(&reclen.to_le_bytes());
        buf[at + 6] = name.len() as u8;
        buf[at + 7] = ft;
        buf[at + 8..at + 8 + name.len()].copy_from_slice(name);
    }

    #[test]
    fn slack_names_are_deleted_and_live_ones_are_not() {
        let mut b = vec![0u8; 1024];
        entry(&mut b, 0, 2, 12, b".", FT_DIR);
        entry(&mut b, 12, 2, 12, b"..", FT_DIR);
        // `a` swallowed the deleted `gone.txt` that followed it.
        entry(&mut b, 24, 12, 36, b"a", FT_REG);
        entry(&mut b, 36, 13, 24, b"gone.txt", FT_REG);
        entry(&mut b, 60, 14, 1024 - 60, b"last", FT_REG);
        let mut got = Vec::new();
        parse_block(&b, true, 100, false, |e| got.push(e));
        let names: Vec<(&[u8], bool)> = got.iter().map(|e| (&e.name[..], e.deleted)).collect();
        assert_eq!(
            names,
            vec![
                (&b"."[..], false),
                (&b".."[..], false),
                (&b"a"[..], false),
                (&b"gone.txt"[..], true),
                (&b"last"[..], false)
            ]
        );
    }

    #[test]
    fn rec_len_zero_and_overflow_do_not_hang_or_read_past_the_block() {
        let mut b = vec![0xFFu8; 64];
        entry(&mut b, 0, 5, 0, b"zero", FT_REG);
        entry(&mut b, 16, 5, 0xFFFC, b"over", FT_REG);
        let mut n = 0;
        parse_block(&b, true, 100, false, |_| n += 1);
        assert_eq!(n, 0);
    }
}
