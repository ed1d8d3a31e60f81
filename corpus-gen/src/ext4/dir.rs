//! ext4 directories: linear blocks of entries (`inode`, `rec_len`,
//! `name_len`, `file_type`, name) ending in a checksum tail, and hashed
//! (htree) directories whose first block is a `dx_root` indexing leaf
//! blocks by the half-MD4 hash of the names.
//!
//! A deleted entry stays where it was: the live entry before it in its
//! block grows its `rec_len` over it (what ext4's delete does), so its
//! name, inode number and type remain readable in the slack. A deleted
//! entry never opens a block here (ext4 would clear its inode number
//! there); it waits for a live entry to follow.

use super::{BLOCK, crc32c, put16, put32};

/// Bytes of the checksum tail at the end of every leaf block.
const TAIL: usize = 12;
/// Room for entries in a leaf block.
const ROOM: usize = BLOCK as usize - TAIL;
/// Bytes of `.` and `..` at a directory's start.
const DOTS: usize = 24;
/// Leaves one `dx_root` indexes (with its checksum tail).
const ROOT_LIMIT: usize = (BLOCK as usize - 0x20) / 8 - 1;

/// File type codes in directory entries.
pub mod ftype {
    /// Regular file.
    pub const FILE: u8 = 1;
    /// Directory.
    pub const DIR: u8 = 2;
    /// Symbolic link.
    pub const SYMLINK: u8 = 7;
}

/// Bytes an entry with an `n`-byte name takes.
pub fn rec_len(n: usize) -> usize {
    (8 + n).next_multiple_of(4)
}

/// One entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ent {
    /// Inode number.
    pub ino: u32,
    /// Name bytes (at most 255).
    pub name: Vec<u8>,
    /// File type code.
    pub ftype: u8,
    /// Deleted: left in the slack of the live entry before it.
    pub deleted: bool,
}

/// Add entry `i` to the last block.
fn push_last(blocks: &mut [Vec<usize>], i: usize) {
    if let Some(b) = blocks.last_mut() {
        b.push(i);
    }
}

/// Entries per block, in order (indices into the input), for entries of
/// the given (name length, deleted); `first` when the first block opens
/// with `.` and `..`.
fn pack(items: &[(usize, bool)], first: bool) -> Vec<Vec<usize>> {
    let mut blocks: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = if first { DOTS } else { 0 };
    let mut live = first;
    let mut pending: Vec<usize> = Vec::new();
    for (i, &(n, deleted)) in items.iter().enumerate() {
        let size = rec_len(n);
        if deleted {
            if live && used + size <= ROOM {
                push_last(&mut blocks, i);
                used += size;
            } else {
                pending.push(i);
            }
            continue;
        }
        if used + size > ROOM {
            blocks.push(Vec::new());
            used = 0;
        }
        push_last(&mut blocks, i);
        used += size;
        live = true;
        let mut keep = Vec::new();
        for p in pending.drain(..) {
            let s = rec_len(items[p].0);
            if used + s <= ROOM {
                push_last(&mut blocks, p);
                used += s;
            } else {
                keep.push(p);
            }
        }
        pending = keep;
    }
    // Deleted entries no live one followed: into any block with room
    // (each holds a live entry), else a block of their own.
    if !pending.is_empty() {
        let mut fill: Vec<usize> = blocks
            .iter()
            .enumerate()
            .map(|(b, ids)| {
                ids.iter().map(|&i| rec_len(items[i].0)).sum::<usize>()
                    + if b == 0 && first { DOTS } else { 0 }
            })
            .collect();
        for p in pending {
            let s = rec_len(items[p].0);
            match fill.iter().position(|&f| f + s <= ROOM) {
                Some(b) => {
                    blocks[b].push(p);
                    fill[b] += s;
                }
                None => {
                    blocks.push(vec![p]);
                    fill.push(s);
                }
            }
        }
    }
    if blocks.len() > 1 && blocks.last().is_some_and(|b| b.is_empty()) {
        blocks.pop();
    }
    blocks
}

/// Whether a directory of these entries is hashed (more than one block
/// of entries, as the kernel indexes a directory that grows past one).
fn hashed(items: &[(usize, bool)]) -> bool {
    pack(items, true).len() > 1
}

/// Blocks a directory of entries (name length, deleted) takes: its
/// linear blocks, or a `dx_root` and its leaves.
pub fn blocks_for(items: &[(usize, bool)], hashes: impl FnOnce() -> Vec<u32>) -> u64 {
    if !hashed(items) {
        return 1;
    }
    let leaves = hash_leaves(items, &hashes());
    match leaves {
        Some(l) => 1 + l.len() as u64,
        None => pack(items, true).len() as u64,
    }
}

/// Leaves of a hashed directory: live entries sorted by hash, each
/// deleted one after the last live entry hashing no higher (the deleted
/// ones are not indexed, only kept), packed so that no leaf opens with a
/// deleted entry; `None` (then the directory stays linear) when a leaf
/// boundary would split equal hashes or one index block cannot hold the
/// leaves.
fn hash_leaves(items: &[(usize, bool)], hashes: &[u32]) -> Option<Vec<(u32, Vec<usize>)>> {
    let mut live: Vec<usize> = (0..items.len()).filter(|&i| !items[i].1).collect();
    live.sort_by_key(|&i| (hashes[i], i));
    if live.is_empty() {
        return None;
    }
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); live.len()];
    for d in (0..items.len()).filter(|&i| items[i].1) {
        let pos = live.partition_point(|&l| hashes[l] <= hashes[d]).max(1);
        after[pos - 1].push(d);
    }
    let seq: Vec<usize> = live
        .iter()
        .zip(&after)
        .flat_map(|(&l, ds)| std::iter::once(l).chain(ds.iter().copied()))
        .collect();
    let seq_items: Vec<(usize, bool)> = seq.iter().map(|&i| items[i]).collect();
    let blocks = pack(&seq_items, false);
    let mut leaves = Vec::with_capacity(blocks.len());
    let mut prev_last: Option<u32> = None;
    for (n, blk) in blocks.iter().enumerate() {
        let ids: Vec<usize> = blk.iter().map(|&k| seq[k]).collect();
        let first = *ids.first()?;
        if items[first].1 {
            return None;
        }
        let h = hashes[first];
        if n > 0 && prev_last.is_some_and(|p| p >= h) {
            return None;
        }
        prev_last = ids
            .iter()
            .filter(|&&i| !items[i].1)
            .map(|&i| hashes[i])
            .max();
        leaves.push((if n == 0 { 0 } else { h }, ids));
    }
    (leaves.len() <= ROOT_LIMIT).then_some(leaves)
}

/// Write one leaf block: entries in order, each live entry's `rec_len`
/// reaching the next live one; `dots` the `.` and `..` inodes.
fn leaf(ents: &[&Ent], dots: Option<(u32, u32)>, seed: u32) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    // (offset, size, live) of every entry, dots included.
    let mut at: Vec<(usize, usize, bool)> = Vec::new();
    let mut pos = 0;
    if let Some((me, parent)) = dots {
        for (ino, name) in [(me, &b"."[..]), (parent, &b".."[..])] {
            put32(&mut b, pos, ino);
            b[pos + 6] = name.len() as u8;
            b[pos + 7] = ftype::DIR;
            b[pos + 8..pos + 8 + name.len()].copy_from_slice(name);
            at.push((pos, 12, true));
            pos += 12;
        }
    }
    for e in ents {
        let size = rec_len(e.name.len());
        // A deleted entry opening a block: ext4 clears its inode number.
        let opens = pos == 0 && e.deleted;
        put32(&mut b, pos, if opens { 0 } else { e.ino });
        b[pos + 6] = e.name.len() as u8;
        b[pos + 7] = e.ftype;
        b[pos + 8..pos + 8 + e.name.len()].copy_from_slice(&e.name);
        at.push((pos, size, !e.deleted || opens));
        pos += size;
    }
    if at.is_empty() {
        put16(&mut b, 4, ROOM as u16);
    }
    for i in 0..at.len() {
        let (off, size, live) = at[i];
        let len = if live {
            at[i + 1..]
                .iter()
                .find(|x| x.2)
                .map(|x| x.0)
                .unwrap_or(ROOM)
                - off
        } else {
            size
        };
        put16(&mut b, off + 4, len as u16);
    }
    put16(&mut b, ROOM + 4, TAIL as u16);
    b[ROOM + 7] = 0xDE;
    let crc = crc32c(seed, &b[..ROOM]);
    put32(&mut b, ROOM + 8, crc);
    b
}

/// Hash parameters of the volume.
#[derive(Debug, Clone, Copy)]
pub struct HashKey {
    /// The superblock's hash seed.
    pub seed: [u32; 4],
}

/// A directory's bytes, `blocks` blocks long (spare blocks are empty
/// leaves), and whether it is hashed (the inode's INDEX flag).
pub fn encode(
    me: u32,
    parent: u32,
    ents: &[Ent],
    blocks: u64,
    seed: u32,
    key: &HashKey,
) -> (Vec<u8>, bool) {
    let items: Vec<(usize, bool)> = ents.iter().map(|e| (e.name.len(), e.deleted)).collect();
    let mut out = Vec::with_capacity((blocks * BLOCK) as usize);
    let mut indexed = false;
    if hashed(&items) {
        let hashes: Vec<u32> = ents.iter().map(|e| half_md4(&e.name, key).0).collect();
        // Indexed only when the leaves fill the folder exactly: e2fsck
        // wants every block of a hashed folder referenced by its index
        // (a skeleton folder sized before its files are known may have
        // spare blocks; it stays linear, which ext4 allows).
        if let Some(leaves) = hash_leaves(&items, &hashes)
            && 1 + leaves.len() as u64 == blocks
        {
            indexed = true;
            out.extend_from_slice(&dx_root(me, parent, &leaves, seed));
            for (_, ids) in &leaves {
                let l: Vec<&Ent> = ids.iter().map(|&i| &ents[i]).collect();
                out.extend_from_slice(&leaf(&l, None, seed));
            }
        }
    }
    if !indexed {
        for (n, ids) in pack(&items, true).iter().enumerate() {
            let l: Vec<&Ent> = ids.iter().map(|&i| &ents[i]).collect();
            out.extend_from_slice(&leaf(&l, (n == 0).then_some((me, parent)), seed));
        }
    }
    while (out.len() as u64) < blocks * BLOCK {
        out.extend_from_slice(&leaf(&[], None, seed));
    }
    (out, indexed)
}

/// The `dx_root` block: `.` and `..` (the latter spanning the block),
/// the root info, and one index entry per leaf (the first with no hash),
/// checksummed in its tail.
fn dx_root(me: u32, parent: u32, leaves: &[(u32, Vec<usize>)], seed: u32) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    put32(&mut b, 0, me);
    put16(&mut b, 4, 12);
    b[6] = 1;
    b[7] = ftype::DIR;
    b[8] = b'.';
    put32(&mut b, 12, parent);
    put16(&mut b, 16, (BLOCK - 12) as u16);
    b[18] = 2;
    b[19] = ftype::DIR;
    b[20] = b'.';
    b[21] = b'.';
    // dx_root_info: hash version 1 (half-MD4), info length 8, depth 0.
    b[0x1C] = 1;
    b[0x1D] = 8;
    let count_at = 0x20;
    put16(&mut b, count_at, ROOT_LIMIT as u16);
    put16(&mut b, count_at + 2, leaves.len() as u16);
    for (i, (h, _)) in leaves.iter().enumerate() {
        let e = count_at + 8 * i;
        if i > 0 {
            put32(&mut b, e, *h);
        }
        put32(&mut b, e + 4, 1 + i as u32);
    }
    // dx_tail after `limit` entries: reserved word, then the checksum of
    // the counted entries and the whole tail with its checksum word zero
    // (the kernel's `ext4_dx_csum`; leaving out the zero word made every
    // root fail e2fsck's check, found once a corpus folder was hashed).
    let tail = count_at + 8 * ROOT_LIMIT;
    let size = count_at + 8 * leaves.len();
    let mut crc = crc32c(seed, &b[..size]);
    crc = crc32c(crc, &b[tail..tail + 4]);
    crc = crc32c(crc, &[0u8; 4]);
    put32(&mut b, tail + 4, crc);
    b
}

/// ext4's half-MD4 name hash (signed characters, as on x86), with the
/// superblock's seed: (hash, minor hash).
pub fn half_md4(name: &[u8], key: &HashKey) -> (u32, u32) {
    let mut buf = if key.seed.iter().any(|&w| w != 0) {
        key.seed
    } else {
        [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476]
    };
    let mut p = name;
    let mut len = name.len() as isize;
    loop {
        let mut input = [0u32; 8];
        str2hashbuf(p, len.max(0) as usize, &mut input);
        half_md4_transform(&mut buf, &input);
        len -= 32;
        if len <= 0 {
            break;
        }
        p = &p[32..];
    }
    let mut h = buf[1] & !1;
    if h == 0x7FFF_FFFF << 1 {
        h = (0x7FFF_FFFF - 1) << 1;
    }
    (h, buf[2])
}

fn str2hashbuf(msg: &[u8], len: usize, out: &mut [u32; 8]) {
    let pad = {
        let p = (len as u32) | ((len as u32) << 8);
        p | (p << 16)
    };
    let mut val = pad;
    let n = len.min(32);
    let mut k = 0;
    for (i, &c) in msg[..n].iter().enumerate() {
        val = ((c as i8) as i32 as u32).wrapping_add(val << 8);
        if i % 4 == 3 {
            out[k] = val;
            k += 1;
            val = pad;
        }
    }
    if k < 8 {
        out[k] = val;
        k += 1;
    }
    while k < 8 {
        out[k] = pad;
        k += 1;
    }
}

fn half_md4_transform(buf: &mut [u32; 4], x: &[u32; 8]) {
    let f = |x: u32, y: u32, z: u32| z ^ (x & (y ^ z));
    let g = |x: u32, y: u32, z: u32| (x & y).wrapping_add((x ^ y) & z);
    let h = |x: u32, y: u32, z: u32| x ^ y ^ z;
    const K2: u32 = 0o13240474631;
    const K3: u32 = 0o15666365641;
    let [mut a, mut b, mut c, mut d] = *buf;
    macro_rules! round {
        ($f:expr, $a:ident, $b:ident, $c:ident, $d:ident, $x:expr, $s:expr) => {
            $a = $a.wrapping_add($f($b, $c, $d)).wrapping_add($x);
            $a = $a.rotate_left($s);
        };
    }
    round!(f, a, b, c, d, x[0], 3);
    round!(f, d, a, b, c, x[1], 7);
    round!(f, c, d, a, b, x[2], 11);
    round!(f, b, c, d, a, x[3], 19);
    round!(f, a, b, c, d, x[4], 3);
    round!(f, d, a, b, c, x[5], 7);
    round!(f, c, d, a, b, x[6], 11);
    round!(f, b, c, d, a, x[7], 19);
    round!(g, a, b, c, d, x[1].wrapping_add(K2), 3);
    round!(g, d, a, b, c, x[3].wrapping_add(K2), 5);
    round!(g, c, d, a, b, x[5].wrapping_add(K2), 9);
    round!(g, b, c, d, a, x[7].wrapping_add(K2), 13);
    round!(g, a, b, c, d, x[0].wrapping_add(K2), 3);
    round!(g, d, a, b, c, x[2].wrapping_add(K2), 5);
    round!(g, c, d, a, b, x[4].wrapping_add(K2), 9);
    round!(g, b, c, d, a, x[6].wrapping_add(K2), 13);
    round!(h, a, b, c, d, x[3].wrapping_add(K3), 3);
    round!(h, d, a, b, c, x[7].wrapping_add(K3), 9);
    round!(h, c, d, a, b, x[2].wrapping_add(K3), 11);
    round!(h, b, c, d, a, x[6].wrapping_add(K3), 15);
    round!(h, a, b, c, d, x[1].wrapping_add(K3), 3);
    round!(h, d, a, b, c, x[5].wrapping_add(K3), 9);
    round!(h, c, d, a, b, x[0].wrapping_add(K3), 11);
    round!(h, b, c, d, a, x[4].wrapping_add(K3), 15);
    buf[0] = buf[0].wrapping_add(a);
    buf[1] = buf[1].wrapping_add(b);
    buf[2] = buf[2].wrapping_add(c);
    buf[3] = buf[3].wrapping_add(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_md4_matches_debugfs() {
        // debugfs 1.47.0: `dx_hash -h half_md4 [-s SEED] NAME`.
        let k = HashKey {
            seed: [0x1111_1111, 0x3333_2222, 0x5555_4444, 0x5555_5555],
        };
        assert_eq!(half_md4(b"hello.txt", &k), (0x8d4f_0414, 0x6b91_6974));
        assert_eq!(
            half_md4(b"a_much_longer_file_name_that_passes_32_bytes.docx", &k),
            (0xf61f_cece, 0xf52f_5bee)
        );
        let zero = HashKey { seed: [0; 4] };
        assert_eq!(half_md4(b"hello.txt", &zero), (0xa26e_1d86, 0x133b_3f98));
    }

    #[test]
    fn a_big_folder_is_hashed_as_e2fsck_expects() {
        use caseload_fs::ext::dir::{is_htree_node, leaf_checksum, parse_block};
        let key = HashKey { seed: [1, 2, 3, 4] };
        let ents: Vec<Ent> = (0..600u32)
            .map(|i| Ent {
                ino: 100 + i,
                name: format!("report {i:04} final version.txt").into_bytes(),
                ftype: ftype::FILE,
                deleted: i % 7 == 3,
            })
            .collect();
        let items: Vec<(usize, bool)> = ents.iter().map(|e| (e.name.len(), e.deleted)).collect();
        let blocks = blocks_for(&items, || {
            ents.iter().map(|e| half_md4(&e.name, &key).0).collect()
        });
        let (bytes, indexed) = encode(50, 2, &ents, blocks, 7, &key);
        assert!(indexed);
        assert_eq!(bytes.len() as u64, blocks * BLOCK);
        let b: Vec<&[u8]> = bytes.chunks(BLOCK as usize).collect();
        assert!(is_htree_node(b[0], true));
        let count = u16::from_le_bytes([b[0][0x22], b[0][0x23]]) as usize;
        assert_eq!(count as u64, blocks - 1);
        // Each leaf: a valid checksum tail, its live names hashing within
        // its index entry's range, every name found once.
        let mut seen = std::collections::BTreeMap::new();
        for leaf in 0..count {
            let lo = if leaf == 0 {
                0
            } else {
                u32::from_le_bytes(b[0][0x20 + 8 * leaf..0x24 + 8 * leaf].try_into().unwrap())
            };
            let hi = if leaf + 1 < count {
                u32::from_le_bytes(
                    b[0][0x20 + 8 * (leaf + 1)..0x24 + 8 * (leaf + 1)]
                        .try_into()
                        .unwrap(),
                )
            } else {
                u32::MAX
            };
            let blk = b[1 + leaf];
            assert_eq!(leaf_checksum(blk, 7), Some(None), "leaf {leaf}");
            parse_block(&blk[..BLOCK as usize - 12], true, 10_000, false, |e| {
                if !e.deleted {
                    let h = half_md4(&e.name, &key).0;
                    assert!(h >= lo && h < hi, "hash of {:?} out of its leaf", e.name);
                }
                assert!(seen.insert(e.name.clone(), e.deleted).is_none());
            });
        }
        assert_eq!(seen.len(), ents.len());
        for e in &ents {
            assert_eq!(seen.get(&e.name), Some(&e.deleted));
        }
    }

    #[test]
    fn deleted_entries_never_open_a_block() {
        let items = vec![(200, false); 30];
        let mut items = items;
        items.push((10, true));
        let b = pack(&items, true);
        for blk in &b[1..] {
            assert!(!items[blk[0]].1);
        }
        assert_eq!(b.iter().map(|x| x.len()).sum::<usize>(), 31);
    }
}
