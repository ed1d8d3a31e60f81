//! Fills an empty `mkapfs` container with files for the tests: the volume's
//! file-system tree (one leaf node in a fresh container) is rebuilt with
//! added inodes, names, extents and attributes, file data goes to blocks
//! the space manager calls free (it is not updated: these images are for
//! the walk and TSK's `fls`/`icat`, not for the free-space comparison),
//! and checksums are recomputed. Also the byte-level helpers the hostile
//! cases use.

use caseload_fs::apfs::object::set_checksum;

pub const BS: usize = 4096;

pub fn u16le(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
pub fn u32le(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
pub fn u64le(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
pub fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
pub fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

/// Block `n` of `img`, mutable.
pub fn block(img: &mut [u8], n: u64) -> &mut [u8] {
    let s = n as usize * BS;
    &mut img[s..s + BS]
}

/// Recomputes the checksum of block `n`.
pub fn reseal(img: &mut [u8], n: u64) {
    set_checksum(block(img, n));
}

/// The entries (key, value) of a leaf node in `b` (fixed 16/16 when
/// `fixed`).
pub fn leaf_entries(b: &[u8], fixed: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let n = u32le(b, 36) as usize;
    let toc_off = u16le(b, 40) as usize;
    let toc_len = u16le(b, 42) as usize;
    let root = u16le(b, 32) & 1 != 0;
    let toc = 56 + toc_off;
    let keys = toc + toc_len;
    let vend = if root { BS - 40 } else { BS };
    (0..n)
        .map(|i| {
            if fixed {
                let k = u16le(b, toc + 4 * i) as usize;
                let v = u16le(b, toc + 4 * i + 2) as usize;
                (
                    b[keys + k..keys + k + 16].to_vec(),
                    b[vend - v..vend - v + 16].to_vec(),
                )
            } else {
                let e = toc + 8 * i;
                let (k, kl, v, vl) = (
                    u16le(b, e) as usize,
                    u16le(b, e + 2) as usize,
                    u16le(b, e + 4) as usize,
                    u16le(b, e + 6) as usize,
                );
                (
                    b[keys + k..keys + k + kl].to_vec(),
                    b[vend - v..vend - v + vl].to_vec(),
                )
            }
        })
        .collect()
}

/// Physical block of `oid` in the object map whose object is at block
/// `omap` (a one-leaf tree, as mkapfs writes), and the block and entry
/// index where the mapping is.
pub fn omap_find(img: &[u8], omap: u64, oid: u64) -> (u64, u64, usize) {
    let o = &img[omap as usize * BS..][..BS];
    let tree = u64le(o, 48);
    let t = &img[tree as usize * BS..][..BS];
    let e = leaf_entries(t, true);
    let i = e
        .iter()
        .position(|(k, _)| u64le(k, 0) == oid)
        .expect("oid mapped");
    (u64le(&e[i].1, 8), tree, i)
}

/// Where the first volume's pieces are.
pub struct Layout {
    pub apsb: u64,
    pub vol_omap: u64,
    pub fs_root_oid: u64,
    pub fs_root: u64,
}

pub fn layout(img: &[u8]) -> Layout {
    let nx = &img[..BS];
    let (apsb, _, _) = omap_find(img, u64le(nx, 160), u64le(nx, 184));
    let a = &img[apsb as usize * BS..][..BS];
    let vol_omap = u64le(a, 128);
    let fs_root_oid = u64le(a, 136);
    let (fs_root, _, _) = omap_find(img, vol_omap, fs_root_oid);
    Layout {
        apsb,
        vol_omap,
        fs_root_oid,
        fs_root,
    }
}

fn key(oid: u64, kind: u8) -> Vec<u8> {
    (oid | (u64::from(kind) << 60)).to_le_bytes().to_vec()
}

/// A file to add.
pub struct Apfs {
    pub img: Vec<u8>,
    pub lay: Layout,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    next_oid: u64,
    next_block: u64,
    pub time: u64,
}

pub const S_IFDIR: u16 = 0o040000;
pub const S_IFREG: u16 = 0o100000;
pub const S_IFLNK: u16 = 0o120000;

impl Apfs {
    /// An mkapfs image to fill; data goes from block `first_free` on.
    pub fn new(img: Vec<u8>, first_free: u64) -> Apfs {
        let lay = layout(&img);
        let records = leaf_entries(&img[lay.fs_root as usize * BS..][..BS], false);
        Apfs {
            img,
            lay,
            records,
            next_oid: 100,
            next_block: first_free,
            time: 1_700_000_000_123_456_789,
        }
    }

    fn inode(
        &mut self,
        oid: u64,
        parent: u64,
        mode: u16,
        size: Option<u64>,
        flags: u32,
        extra: &[(u8, Vec<u8>)],
    ) {
        let mut v = vec![0u8; 92];
        put64(&mut v, 0, parent);
        put64(&mut v, 8, oid);
        for (i, o) in [16, 24, 32, 40].iter().enumerate() {
            put64(&mut v, *o, self.time + i as u64 * 1_000_000_001);
        }
        put32(&mut v, 56, 1);
        put32(&mut v, 68, flags);
        put32(&mut v, 72, 501);
        put32(&mut v, 76, 20);
        v[80..82].copy_from_slice(&mode.to_le_bytes());
        let mut fields: Vec<(u8, Vec<u8>)> = extra.to_vec();
        if let Some(s) = size {
            let mut ds = vec![0u8; 40];
            put64(&mut ds, 0, s);
            put64(&mut ds, 8, s.div_ceil(BS as u64) * BS as u64);
            fields.push((8, ds));
        }
        if !fields.is_empty() {
            let used: usize = fields.iter().map(|f| f.1.len().div_ceil(8) * 8).sum();
            v.extend_from_slice(&(fields.len() as u16).to_le_bytes());
            v.extend_from_slice(&(used as u16).to_le_bytes());
            for (t, d) in &fields {
                v.extend_from_slice(&[*t, 0]);
                v.extend_from_slice(&(d.len() as u16).to_le_bytes());
            }
            for (_, d) in &fields {
                v.extend_from_slice(d);
                v.resize(v.len().div_ceil(8) * 8, 0);
            }
        }
        self.records.push((key(oid, 3), v));
    }

    /// A name `name` in `parent` for `oid`, of directory-record type `dtype`.
    pub fn name(&mut self, parent: u64, name: &str, oid: u64, dtype: u16) {
        let mut k = key(parent, 9);
        let len = name.len() as u32 + 1;
        k.extend_from_slice(&(len | (0x2a5 << 10)).to_le_bytes());
        k.extend_from_slice(name.as_bytes());
        k.push(0);
        let mut v = vec![0u8; 18];
        put64(&mut v, 0, oid);
        put64(&mut v, 8, self.time);
        v[16..18].copy_from_slice(&dtype.to_le_bytes());
        self.records.push((k, v));
    }

    fn xattr(&mut self, oid: u64, name: &str, val: Vec<u8>) {
        let mut k = key(oid, 4);
        k.extend_from_slice(&(name.len() as u16 + 1).to_le_bytes());
        k.extend_from_slice(name.as_bytes());
        k.push(0);
        self.records.push((k, val));
    }

    fn extent(&mut self, id: u64, logical: u64, len: u64, block: u64) {
        let mut k = key(id, 8);
        k.extend_from_slice(&logical.to_le_bytes());
        let mut v = vec![0u8; 24];
        put64(&mut v, 0, len);
        put64(&mut v, 8, block);
        self.records.push((k, v));
    }

    /// Data blocks for `data` (0 blocks for empty data); returns the first.
    fn store(&mut self, data: &[u8]) -> u64 {
        let first = self.next_block;
        let n = data.len().div_ceil(BS) as u64;
        for (i, c) in data.chunks(BS).enumerate() {
            let at = (first as usize + i) * BS;
            self.img[at..at + c.len()].copy_from_slice(c);
        }
        self.next_block += n;
        first
    }

    /// A directory in `parent`; returns its oid.
    pub fn dir(&mut self, parent: u64, name: &str) -> u64 {
        let oid = self.next_oid;
        self.next_oid += 1;
        self.inode(oid, parent, S_IFDIR | 0o755, None, 0, &[]);
        self.name(parent, name, oid, 4);
        oid
    }

    /// A regular file in one extent; returns its oid.
    pub fn file(&mut self, parent: u64, name: &str, data: &[u8]) -> u64 {
        let oid = self.next_oid;
        self.next_oid += 1;
        self.inode(
            oid,
            parent,
            S_IFREG | 0o644,
            Some(data.len() as u64),
            0,
            &[],
        );
        self.name(parent, name, oid, 8);
        if !data.is_empty() {
            let b = self.store(data);
            self.extent(oid, 0, data.len().div_ceil(BS) as u64 * BS as u64, b);
        }
        oid
    }

    /// A file in two extents with a hole of `hole` blocks between them
    /// and a gap of one block on disk.
    pub fn fragmented(&mut self, parent: u64, name: &str, a: &[u8], hole: u64, b: &[u8]) -> u64 {
        assert_eq!(a.len() % BS, 0);
        let oid = self.next_oid;
        self.next_oid += 1;
        let size = a.len() as u64 + hole * BS as u64 + b.len() as u64;
        self.inode(oid, parent, S_IFREG | 0o600, Some(size), 0, &[]);
        self.name(parent, name, oid, 8);
        let ba = self.store(a);
        self.next_block += 1;
        let bb = self.store(b);
        self.extent(oid, 0, a.len() as u64, ba);
        self.extent(
            oid,
            a.len() as u64 + hole * BS as u64,
            b.len().div_ceil(BS) as u64 * BS as u64,
            bb,
        );
        oid
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, parent: u64, name: &str, target: &str) -> u64 {
        let oid = self.next_oid;
        self.next_oid += 1;
        self.inode(oid, parent, S_IFLNK | 0o755, None, 0, &[]);
        self.name(parent, name, oid, 10);
        let mut v = vec![0x02, 0x00];
        let mut t = target.as_bytes().to_vec();
        t.push(0);
        v.extend_from_slice(&(t.len() as u16).to_le_bytes());
        v.extend_from_slice(&t);
        self.xattr(oid, "com.apple.fs.symlink", v);
        oid
    }

    /// A second name for `oid` in `parent`.
    pub fn hard_link(&mut self, parent: u64, name: &str, oid: u64) {
        self.name(parent, name, oid, 8);
    }

    /// A file compressed inline (decmpfs type 3) with `body` after the
    /// header, decoding to `size` bytes.
    pub fn compressed(
        &mut self,
        parent: u64,
        name: &str,
        kind: u32,
        size: u64,
        body: &[u8],
    ) -> u64 {
        let oid = self.next_oid;
        self.next_oid += 1;
        self.inode(oid, parent, S_IFREG | 0o644, None, 0x20, &[]);
        self.name(parent, name, oid, 8);
        let mut a = b"fpmc".to_vec();
        a.extend_from_slice(&kind.to_le_bytes());
        a.extend_from_slice(&size.to_le_bytes());
        a.extend_from_slice(body);
        let mut v = vec![0x02, 0x00];
        v.extend_from_slice(&(a.len() as u16).to_le_bytes());
        v.extend_from_slice(&a);
        self.xattr(oid, "com.apple.decmpfs", v);
        oid
    }

    /// A file compressed with zlib into its resource fork (decmpfs type
    /// 4): the fork's header, its block table, 64 KiB blocks each zlib
    /// (or stored where `stored` says), in a data stream of its own.
    pub fn compressed_fork(
        &mut self,
        parent: u64,
        name: &str,
        data: &[u8],
        stored: &[bool],
    ) -> u64 {
        use std::io::Write;
        let blocks: Vec<Vec<u8>> = data
            .chunks(65536)
            .enumerate()
            .map(|(i, c)| {
                if stored.get(i) == Some(&true) {
                    let mut b = vec![0xff];
                    b.extend_from_slice(c);
                    b
                } else {
                    let mut z =
                        flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                    z.write_all(c).expect("deflate");
                    z.finish().expect("deflate")
                }
            })
            .collect();
        let mut fork = vec![0u8; 0x104];
        fork[..4].copy_from_slice(&0x100u32.to_be_bytes());
        fork.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
        let mut off = 4 + 8 * blocks.len();
        for b in &blocks {
            fork.extend_from_slice(&(off as u32).to_le_bytes());
            fork.extend_from_slice(&(b.len() as u32).to_le_bytes());
            off += b.len();
        }
        for b in &blocks {
            fork.extend_from_slice(b);
        }
        self.fork_file(parent, name, 4, &fork, data.len() as u64)
    }

    /// A compressed file (decmpfs `kind`, `size` bytes decoded) whose data
    /// is `fork`, the resource fork, in a data stream of its own.
    pub fn fork_file(&mut self, parent: u64, name: &str, kind: u32, fork: &[u8], size: u64) -> u64 {
        let oid = self.next_oid;
        let stream = oid + 1;
        self.next_oid += 2;
        self.inode(oid, parent, S_IFREG | 0o644, None, 0x20, &[]);
        self.name(parent, name, oid, 8);
        let mut a = b"fpmc".to_vec();
        a.extend_from_slice(&kind.to_le_bytes());
        a.extend_from_slice(&size.to_le_bytes());
        let mut v = vec![0x02, 0x00];
        v.extend_from_slice(&(a.len() as u16).to_le_bytes());
        v.extend_from_slice(&a);
        self.xattr(oid, "com.apple.decmpfs", v);
        let mut v = vec![0x01, 0x00, 48, 0];
        v.extend_from_slice(&stream.to_le_bytes());
        let mut ds = vec![0u8; 40];
        put64(&mut ds, 0, fork.len() as u64);
        put64(&mut ds, 8, fork.len().div_ceil(BS) as u64 * BS as u64);
        v.extend_from_slice(&ds);
        self.xattr(oid, "com.apple.ResourceFork", v);
        let b = self.store(fork);
        self.extent(stream, 0, fork.len().div_ceil(BS) as u64 * BS as u64, b);
        oid
    }

    /// A raw extent record for `oid` (hostile cases).
    pub fn raw_extent(&mut self, oid: u64, logical: u64, len: u64, block: u64) {
        self.extent(oid, logical, len, block);
    }

    /// An inode with a data stream of `size` and no extents yet.
    pub fn bare_file(&mut self, parent: u64, name: &str, size: u64) -> u64 {
        let oid = self.next_oid;
        self.next_oid += 1;
        self.inode(oid, parent, S_IFREG | 0o644, Some(size), 0, &[]);
        self.name(parent, name, oid, 8);
        oid
    }

    /// The image with the file-system tree's leaf rebuilt.
    pub fn finish(self) -> Vec<u8> {
        self.finish_split(usize::MAX)
    }

    /// The image with the file-system tree rebuilt: one leaf, or where
    /// there are more than `per_leaf` records, a root index node over
    /// leaves of `per_leaf` records each (new virtual objects mapped in
    /// the volume's object map), so that one object's records straddle
    /// leaves.
    pub fn finish_split(mut self, per_leaf: usize) -> Vec<u8> {
        self.records.sort_by(|a, b| {
            let ka = u64le(&a.0, 0);
            let kb = u64le(&b.0, 0);
            (ka & 0x0fff_ffff_ffff_ffff, ka >> 60, &a.0[8..]).cmp(&(
                kb & 0x0fff_ffff_ffff_ffff,
                kb >> 60,
                &b.0[8..],
            ))
        });
        let root = self.lay.fs_root;
        if self.records.len() <= per_leaf {
            write_leaf(block(&mut self.img, root), &self.records, false);
        } else {
            let header = block(&mut self.img, root)[..56].to_vec();
            let mut index = Vec::new();
            let mut maps = Vec::new();
            for (i, chunk) in self.records.chunks(per_leaf).enumerate() {
                let oid = 5000 + i as u64;
                let at = self.next_block;
                self.next_block += 1;
                let b = block(&mut self.img, at);
                b[..56].copy_from_slice(&header);
                put64(b, 8, oid);
                put32(b, 24, 3);
                b[32..36].copy_from_slice(&[2, 0, 0, 0]);
                write_node(b, chunk, false, false);
                reseal(&mut self.img, at);
                index.push((chunk[0].0.clone(), oid.to_le_bytes().to_vec()));
                maps.push((oid, at));
            }
            let b = block(&mut self.img, root);
            b[32..36].copy_from_slice(&[1, 0, 1, 0]);
            write_node(b, &index, false, true);
            put64(b, BS - 40 + 24, self.records.len() as u64);
            omap_insert(&mut self.img, self.lay.vol_omap, &maps);
        }
        reseal(&mut self.img, root);
        // apfs_next_obj_id: TSK takes its last inode number from it.
        let apsb = self.lay.apsb;
        put64(block(&mut self.img, apsb), 176, self.next_oid);
        reseal(&mut self.img, apsb);
        self.img
    }
}

/// Points `oid`'s mapping in the object map at block `omap` to `paddr`.
pub fn omap_set(img: &mut [u8], omap: u64, oid: u64, paddr: u64) {
    let (_, tree, i) = omap_find(img, omap, oid);
    let b = block(img, tree);
    let toc_off = u16le(b, 40) as usize;
    let v = u16le(b, 56 + toc_off + 4 * i + 2) as usize;
    let at = BS - 40 - v + 8;
    put64(b, at, paddr);
    reseal(img, tree);
}

/// Rewrites the root leaf node in `b` to hold `records` (sorted), keeping
/// its header and tree info; `fixed` for 16-byte keys and values
/// (object maps). The caller reseals the block.
pub fn write_leaf(b: &mut [u8], records: &[(Vec<u8>, Vec<u8>)], fixed: bool) {
    write_node(b, records, fixed, true);
    put64(b, BS - 40 + 24, records.len() as u64);
}

/// Writes `records` into the node in `b` (keeping its object header and
/// flags), a root node (ending with tree info) or not.
pub fn write_node(b: &mut [u8], records: &[(Vec<u8>, Vec<u8>)], fixed: bool, root: bool) {
    let n = records.len();
    let te = if fixed { 4 } else { 8 };
    let toc_len = (n * te).div_ceil(64) * 64;
    let keys = 56 + toc_len;
    let vend = if root { BS - 40 } else { BS };
    b[56..vend].fill(0);
    let (mut ko, mut vo) = (0usize, 0usize);
    for (i, (k, v)) in records.iter().enumerate() {
        vo += v.len();
        let e = 56 + te * i;
        b[e..e + 2].copy_from_slice(&(ko as u16).to_le_bytes());
        if fixed {
            b[e + 2..e + 4].copy_from_slice(&(vo as u16).to_le_bytes());
        } else {
            b[e + 2..e + 4].copy_from_slice(&(k.len() as u16).to_le_bytes());
            b[e + 4..e + 6].copy_from_slice(&(vo as u16).to_le_bytes());
            b[e + 6..e + 8].copy_from_slice(&(v.len() as u16).to_le_bytes());
        }
        b[keys + ko..keys + ko + k.len()].copy_from_slice(k);
        b[vend - vo..vend - vo + v.len()].copy_from_slice(v);
        ko += k.len();
    }
    assert!(keys + ko <= vend - vo, "records do not fit one node");
    put32(b, 36, n as u32);
    b[40..42].copy_from_slice(&0u16.to_le_bytes());
    b[42..44].copy_from_slice(&(toc_len as u16).to_le_bytes());
    b[44..46].copy_from_slice(&(ko as u16).to_le_bytes());
    b[46..48].copy_from_slice(&((vend - vo - keys - ko) as u16).to_le_bytes());
    b[48..56].copy_from_slice(&[0xff, 0xff, 0, 0, 0xff, 0xff, 0, 0]);
}

/// Maps each (oid, block) at transaction 1 in the object map at block
/// `omap` (a one-leaf tree), keeping its entries in numeric order.
pub fn omap_insert(img: &mut [u8], omap: u64, maps: &[(u64, u64)]) {
    let tree = u64le(&img[omap as usize * BS..], 48);
    let mut entries = leaf_entries(&img[tree as usize * BS..][..BS], true);
    for &(oid, at) in maps {
        let mut k = oid.to_le_bytes().to_vec();
        k.extend_from_slice(&1u64.to_le_bytes());
        let mut v = vec![0u8; 8];
        v[4..8].copy_from_slice(&(BS as u32).to_le_bytes());
        v.extend_from_slice(&at.to_le_bytes());
        entries.push((k, v));
    }
    entries.sort_by_key(|(k, _)| (u64le(k, 0), u64le(k, 8)));
    write_leaf(block(img, tree), &entries, true);
    reseal(img, tree);
}

/// Adds a second volume: a copy of the first's superblock named `name`
/// at block `at`, mapped in the container's object map as oid `oid` and
/// listed second in `nx_fs_oid` (of block 0 and of the checkpoint's
/// superblock at block 2). It shares the first volume's object map and
/// tree: a read-only walk sees the same files in both.
pub fn add_volume(img: &mut [u8], name: &str, at: u64, oid: u64) {
    let lay = layout(img);
    let apsb = block(img, lay.apsb).to_vec();
    let b = block(img, at);
    b.copy_from_slice(&apsb);
    put64(b, 8, oid);
    put32(b, 36, 1);
    b[240] ^= 0xff;
    b[704..960].fill(0);
    b[704..704 + name.len()].copy_from_slice(name.as_bytes());
    reseal(img, at);
    let c_omap = u64le(&img[..BS], 160);
    omap_insert(img, c_omap, &[(oid, at)]);
    for sb in [0u64, 2] {
        // nx_max_file_systems: mkapfs allows one volume in 128 MiB.
        put32(block(img, sb), 180, 2);
        put64(block(img, sb), 184 + 8, oid);
        reseal(img, sb);
    }
}

/// Lists a snapshot named `name` of transaction `xid` in the first
/// volume's snapshot-metadata tree (a one-leaf physical tree).
pub fn add_snapshot(img: &mut [u8], name: &str, xid: u64) {
    let lay = layout(img);
    let tree = u64le(&img[lay.apsb as usize * BS..], 152);
    let mut entries = leaf_entries(&img[tree as usize * BS..][..BS], false);
    let k = (xid | (1u64 << 60)).to_le_bytes().to_vec();
    let mut v = vec![0u8; 50];
    put64(&mut v, 16, 1_600_000_000_000_000_000);
    v[48..50].copy_from_slice(&(name.len() as u16 + 1).to_le_bytes());
    v.extend_from_slice(name.as_bytes());
    v.push(0);
    entries.push((k, v));
    write_leaf(block(img, tree), &entries, false);
    reseal(img, tree);
    put64(block(img, lay.apsb), 216, 1);
    reseal(img, lay.apsb);
}

/// The LZVN opcode class of a first byte (Apple's table), for the test
/// encoder to pick only valid forms.
fn lzvn_class(opc: u8) -> &'static str {
    match opc {
        0x06 => "eos",
        0x0e | 0x16 => "nop",
        0x1e | 0x26 | 0x2e | 0x36 | 0x3e | 0x70..=0x7f | 0xd0..=0xdf => "udef",
        0xa0..=0xbf => "med_d",
        0xe0..=0xef => "lit",
        0xf0..=0xff => "match",
        _ => match opc & 7 {
            6 => "pre_d",
            7 => "lrg_d",
            _ => "sml_d",
        },
    }
}

/// An LZVN stream for a script of (literal, match distance, match length)
/// steps, using every opcode form where the step allows it (literals
/// inside distance opcodes, small, medium and large distances, the
/// previous distance, literal and match runs), and the bytes it decodes
/// to. A test encoder: TSK's decoder (Apple's) is the oracle.
pub fn lzvn_encode(script: &[(Vec<u8>, usize, usize)]) -> (Vec<u8>, Vec<u8>) {
    let mut s = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    let mut prev = 0usize;
    let lits = |s: &mut Vec<u8>, mut lit: &[u8]| {
        while !lit.is_empty() {
            let n = lit.len().min(271);
            if n <= 15 {
                s.push(0xe0 | n as u8);
            } else {
                s.extend_from_slice(&[0xe0, (n - 16) as u8]);
            }
            s.extend_from_slice(&lit[..n]);
            lit = &lit[n..];
        }
    };
    for (lit, d, m) in script {
        let (d, mut m) = (*d, *m);
        let l = lit.len();
        let mut folded = false;
        if m >= 3 && l <= 3 {
            let ll = (l as u8) << 6;
            if d == prev && m <= 10 && l >= 1 {
                let opc = ll | ((m - 3) as u8) << 3 | 6;
                if lzvn_class(opc) == "pre_d" {
                    s.push(opc);
                    folded = true;
                }
            }
            if !folded && m <= 10 && d < 1536 {
                let opc = ll | ((m - 3) as u8) << 3 | (d >> 8) as u8;
                if lzvn_class(opc) == "sml_d" {
                    s.extend_from_slice(&[opc, d as u8]);
                    folded = true;
                }
            }
            if !folded && m <= 34 && d < 16384 {
                let opc = 0xa0 | (l as u8) << 3 | ((m - 3) >> 2) as u8;
                let w = (d << 2) | ((m - 3) & 3);
                s.extend_from_slice(&[opc, w as u8, (w >> 8) as u8]);
                folded = true;
            }
            if folded {
                s.extend_from_slice(lit);
                out.extend_from_slice(lit);
                for _ in 0..m {
                    out.push(out[out.len() - d]);
                }
                prev = d;
                continue;
            }
        }
        lits(&mut s, lit);
        out.extend_from_slice(lit);
        if m == 0 {
            continue;
        }
        if d != prev {
            let first = m.min(10);
            assert!(first >= 3, "a new distance needs a match of 3 or more");
            let opc = ((first - 3) as u8) << 3 | 7;
            assert_eq!(lzvn_class(opc), "lrg_d");
            s.extend_from_slice(&[opc, d as u8, (d >> 8) as u8]);
            for _ in 0..first {
                out.push(out[out.len() - d]);
            }
            m -= first;
            prev = d;
        }
        while m > 0 {
            let n = m.min(271);
            if n <= 15 {
                s.push(0xf0 | n as u8);
            } else {
                s.extend_from_slice(&[0xf0, (n - 16) as u8]);
            }
            for _ in 0..n {
                out.push(out[out.len() - d]);
            }
            m -= n;
        }
    }
    s.extend_from_slice(&[0x06, 0, 0, 0, 0, 0, 0, 0]);
    (s, out)
}

impl Apfs {
    /// A file compressed with LZVN into its resource fork (decmpfs type
    /// 8): the fork's offset table, then `blocks` (each an LZVN stream or
    /// 0x06 and stored bytes) as they are; `size` is what they decode to.
    pub fn compressed_lzvn_fork(
        &mut self,
        parent: u64,
        name: &str,
        blocks: &[Vec<u8>],
        size: u64,
    ) -> u64 {
        let mut fork = Vec::new();
        let mut off = 4 * (blocks.len() + 1);
        fork.extend_from_slice(&(off as u32).to_le_bytes());
        for b in blocks {
            off += b.len();
            fork.extend_from_slice(&(off as u32).to_le_bytes());
        }
        for b in blocks {
            fork.extend_from_slice(b);
        }
        self.fork_file(parent, name, 8, &fork, size)
    }
}
