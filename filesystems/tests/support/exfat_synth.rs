//! Small synthetic exFAT images built in memory, for crafted (including
//! hostile) test cases that need no mkfs or mount. Only `std` is used.
//!
//! The images are laid out as mkfs.exfat lays them out (boot and backup
//! boot regions with their checksum, one FAT, the allocation bitmap and
//! an up-case table in the first clusters, the root directory after them),
//! so TSK's `fls`/`icat` read them too.

#![allow(dead_code)]

use std::collections::BTreeMap;

/// 2021-06-15 12:34:56 in exFAT (DOS) encoding, used for every entry.
pub const EX_DATE: u16 = ((2021 - 1980) << 9) | (6 << 5) | 15;
pub const EX_TIME: u16 = (12 << 11) | (34 << 5) | 28;
/// That time in seconds since 1970 (read as UTC).
pub const EX_UNIX: i64 = 1_623_760_496;

/// A directory of an [`Exfat`] image: its clusters and used slots.
#[derive(Debug, Clone)]
struct DirState {
    clusters: Vec<u32>,
    used: usize,
}

/// Where an entry set was put.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    /// Byte offset of the File entry in the image.
    pub offset: usize,
    /// TSK inode number of the set.
    pub inode: u64,
    /// First data cluster (0 when empty).
    pub first: u32,
}

/// An exFAT image under construction (512-byte sectors).
pub struct Exfat {
    pub img: Vec<u8>,
    pub bps: usize,
    pub spc: usize,
    pub fat_offset: usize,
    pub fat_sectors: usize,
    pub heap_offset: usize,
    pub cluster_count: u32,
    pub fat: Vec<u32>,
    pub used: Vec<bool>,
    next_free: u32,
    pub root: u32,
    pub bitmap_cluster: u32,
    pub upcase_cluster: u32,
    pub upcase: Vec<u8>,
    /// Where the last entry set went.
    pub last: Placed,
    dirs: BTreeMap<u32, DirState>,
}

/// The up-case table written: ASCII letters fold, everything else maps to
/// itself (compressed).
pub fn upcase_table() -> Vec<u8> {
    let mut units: Vec<u16> = vec![0xFFFF, 0x61];
    units.extend(0x41u16..=0x5A);
    units.extend([0xFFFF, (0x1_0000u32 - 0x7B) as u16]);
    units.iter().flat_map(|u| u.to_le_bytes()).collect()
}

fn upcase_unit(u: u16) -> u16 {
    if (0x61..=0x7A).contains(&u) {
        u - 0x20
    } else {
        u
    }
}

/// The name hash of a name under [`upcase_table`].
pub fn name_hash(units: &[u16]) -> u16 {
    let mut h: u16 = 0;
    for &u in units {
        let [lo, hi] = upcase_unit(u).to_le_bytes();
        h = h.rotate_right(1).wrapping_add(u16::from(lo));
        h = h.rotate_right(1).wrapping_add(u16::from(hi));
    }
    h
}

/// The set checksum of consecutive entries.
pub fn set_checksum(set: &[u8]) -> u16 {
    let mut h: u16 = 0;
    for (i, &b) in set.iter().enumerate() {
        if i == 2 || i == 3 {
            continue;
        }
        h = h.rotate_right(1).wrapping_add(u16::from(b));
    }
    h
}

fn rot32(bytes: &[u8], skip: &[usize]) -> u32 {
    let mut h: u32 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if skip.contains(&i) {
            continue;
        }
        h = h.rotate_right(1).wrapping_add(u32::from(b));
    }
    h
}

/// A File + Stream + Name entry set for `units`.
pub fn entry_set(
    units: &[u16],
    attr: u16,
    first: u32,
    size: u64,
    valid: u64,
    no_fat_chain: bool,
) -> Vec<[u8; 32]> {
    let names = units.len().div_ceil(15).max(1);
    let mut set = Vec::with_capacity(names + 2);
    let mut f = [0u8; 32];
    f[0] = 0x85;
    f[1] = (names + 1) as u8;
    f[4..6].copy_from_slice(&attr.to_le_bytes());
    for o in [8, 12, 16] {
        f[o..o + 2].copy_from_slice(&EX_TIME.to_le_bytes());
        f[o + 2..o + 4].copy_from_slice(&EX_DATE.to_le_bytes());
    }
    f[22] = 0x80;
    f[23] = 0x80;
    f[24] = 0x80;
    set.push(f);
    let mut s = [0u8; 32];
    s[0] = 0xC0;
    s[1] = 0x01 | if no_fat_chain { 0x02 } else { 0 };
    s[3] = units.len() as u8;
    s[4..6].copy_from_slice(&name_hash(units).to_le_bytes());
    s[8..16].copy_from_slice(&valid.to_le_bytes());
    s[20..24].copy_from_slice(&first.to_le_bytes());
    s[24..32].copy_from_slice(&size.to_le_bytes());
    set.push(s);
    for k in 0..names {
        let mut n = [0u8; 32];
        n[0] = 0xC1;
        for (i, u) in units.iter().skip(15 * k).take(15).enumerate() {
            n[2 + 2 * i..4 + 2 * i].copy_from_slice(&u.to_le_bytes());
        }
        set.push(n);
    }
    seal(&mut set);
    set
}

/// Recomputes a set's checksum into its File entry.
pub fn seal(set: &mut [[u8; 32]]) {
    let flat: Vec<u8> = set.iter().flatten().copied().collect();
    let sum = set_checksum(&flat);
    set[0][2..4].copy_from_slice(&sum.to_le_bytes());
}

impl Exfat {
    /// A blank file system of `total_sectors` sectors, `spc` sectors per
    /// cluster, labelled `SYNTH`.
    pub fn new(total_sectors: usize, spc: usize) -> Exfat {
        let bps = 512;
        let fat_offset = 24;
        let mut fat_sectors = 1;
        let cluster_count = loop {
            let heap = fat_offset + fat_sectors;
            let cc = (total_sectors - heap) / spc;
            let need = ((cc + 2) * 4).div_ceil(bps);
            if need <= fat_sectors {
                break cc as u32;
            }
            fat_sectors = need;
        };
        let heap_offset = fat_offset + fat_sectors;
        let mut x = Exfat {
            img: vec![0u8; total_sectors * bps],
            bps,
            spc,
            fat_offset,
            fat_sectors,
            heap_offset,
            cluster_count,
            fat: vec![0; cluster_count as usize + 2],
            used: vec![false; cluster_count as usize + 2],
            next_free: 2,
            root: 0,
            bitmap_cluster: 0,
            upcase_cluster: 0,
            upcase: upcase_table(),
            last: Placed {
                offset: 0,
                inode: 0,
                first: 0,
            },
            dirs: BTreeMap::new(),
        };
        x.fat[0] = 0xFFFF_FFF8;
        x.fat[1] = 0xFFFF_FFFF;
        let cs = x.cluster_size();
        let bitmap = x.alloc((cluster_count as usize).div_ceil(8).div_ceil(cs));
        x.link(&bitmap);
        x.bitmap_cluster = bitmap[0];
        let up = x.alloc(x.upcase.len().div_ceil(cs));
        x.link(&up);
        x.upcase_cluster = up[0];
        let table = x.upcase.clone();
        x.write_data(&up, &table);
        // Eight clusters, so crafted volumes of small clusters have room.
        let root = x.alloc(8);
        x.link(&root);
        x.root = root[0];
        x.dirs.insert(
            x.root,
            DirState {
                clusters: root,
                used: 0,
            },
        );
        let mut label = [0u8; 32];
        label[0] = 0x83;
        label[1] = 5;
        for (i, u) in "SYNTH".encode_utf16().enumerate() {
            label[2 + 2 * i..4 + 2 * i].copy_from_slice(&u.to_le_bytes());
        }
        x.put_entry(x.root, label);
        let mut bm = [0u8; 32];
        bm[0] = 0x81;
        bm[20..24].copy_from_slice(&x.bitmap_cluster.to_le_bytes());
        bm[24..32].copy_from_slice(&(u64::from(cluster_count).div_ceil(8)).to_le_bytes());
        x.put_entry(x.root, bm);
        let mut uc = [0u8; 32];
        uc[0] = 0x82;
        uc[4..8].copy_from_slice(&rot32(&x.upcase, &[]).to_le_bytes());
        uc[20..24].copy_from_slice(&x.upcase_cluster.to_le_bytes());
        uc[24..32].copy_from_slice(&(x.upcase.len() as u64).to_le_bytes());
        x.put_entry(x.root, uc);
        x
    }

    pub fn cluster_size(&self) -> usize {
        self.bps * self.spc
    }

    /// Byte offset of cluster `c`.
    pub fn cluster_offset(&self, c: u32) -> usize {
        (self.heap_offset + (c as usize - 2) * self.spc) * self.bps
    }

    /// TSK inode number of the entry at byte `off`.
    pub fn inode_of(&self, off: usize) -> u64 {
        ((off / self.bps - self.heap_offset) * (self.bps / 32) + 3 + (off % self.bps) / 32) as u64
    }

    /// `n` consecutive free clusters from the allocation cursor, marked used.
    pub fn alloc(&mut self, n: usize) -> Vec<u32> {
        let v: Vec<u32> = (self.next_free..self.next_free + n as u32).collect();
        for &c in &v {
            self.used[c as usize] = true;
        }
        self.next_free += n as u32;
        v
    }

    /// Marks clusters used (to reuse the clusters of a deleted file).
    pub fn claim(&mut self, clusters: &[u32]) {
        for &c in clusters {
            self.used[c as usize] = true;
        }
    }

    /// Leaves `n` clusters free.
    pub fn skip(&mut self, n: u32) {
        self.next_free += n;
    }

    /// Writes a FAT chain through `chain`, ending it.
    pub fn link(&mut self, chain: &[u32]) {
        for w in chain.windows(2) {
            self.fat[w[0] as usize] = w[1];
        }
        if let Some(&last) = chain.last() {
            self.fat[last as usize] = 0xFFFF_FFFF;
        }
    }

    pub fn write_data(&mut self, clusters: &[u32], data: &[u8]) {
        let cs = self.cluster_size();
        for (i, chunk) in data.chunks(cs).enumerate() {
            let off = self.cluster_offset(clusters[i]);
            self.img[off..off + chunk.len()].copy_from_slice(chunk);
        }
    }

    /// Appends an entry to a directory; returns its byte offset.
    pub fn put_entry(&mut self, dir: u32, e: [u8; 32]) -> usize {
        let per = self.cluster_size() / 32;
        let st = self.dirs.get(&dir).expect("directory").clone();
        let idx = st.used;
        let c = st.clusters[idx / per];
        let off = self.cluster_offset(c) + (idx % per) * 32;
        self.img[off..off + 32].copy_from_slice(&e);
        self.dirs.get_mut(&dir).expect("directory").used += 1;
        off
    }

    /// Appends an entry set; returns where it went.
    pub fn put_set(&mut self, dir: u32, set: &[[u8; 32]]) -> Placed {
        let mut first = None;
        for e in set {
            let off = self.put_entry(dir, *e);
            first.get_or_insert(off);
        }
        let offset = first.expect("non-empty set");
        self.last = Placed {
            offset,
            inode: self.inode_of(offset),
            first: u32::from_le_bytes(set[1][20..24].try_into().expect("4")),
        };
        self.last
    }

    /// Slots left in the directory's last cluster position.
    pub fn used_slots(&self, dir: u32) -> usize {
        self.dirs[&dir].used
    }

    /// Skips slots of a directory (left zero).
    pub fn skip_slots(&mut self, dir: u32, n: usize) {
        self.dirs.get_mut(&dir).expect("directory").used += n;
    }

    /// A contiguous (`NoFatChain`) file.
    pub fn add_file(&mut self, dir: u32, name: &str, data: &[u8]) -> Placed {
        let n = data.len().div_ceil(self.cluster_size());
        let clusters = self.alloc(n);
        self.write_data(&clusters, data);
        let first = clusters.first().copied().unwrap_or(0);
        let units: Vec<u16> = name.encode_utf16().collect();
        let set = entry_set(
            &units,
            0x20,
            first,
            data.len() as u64,
            data.len() as u64,
            true,
        );
        self.put_set(dir, &set)
    }

    /// A file stored in `clusters` through a FAT chain.
    pub fn add_file_chained(
        &mut self,
        dir: u32,
        name: &str,
        data: &[u8],
        clusters: &[u32],
    ) -> Placed {
        self.write_data(clusters, data);
        self.link(clusters);
        let units: Vec<u16> = name.encode_utf16().collect();
        let set = entry_set(
            &units,
            0x20,
            clusters[0],
            data.len() as u64,
            data.len() as u64,
            false,
        );
        self.put_set(dir, &set)
    }

    /// A directory of `clusters` clusters (contiguous, `NoFatChain`, or a
    /// FAT chain); returns its first cluster.
    pub fn add_dir_sized(
        &mut self,
        parent: u32,
        name: &str,
        clusters: usize,
        contiguous: bool,
    ) -> u32 {
        let cl = self.alloc(clusters);
        if !contiguous {
            self.link(&cl);
        }
        let size = (clusters * self.cluster_size()) as u64;
        let units: Vec<u16> = name.encode_utf16().collect();
        let set = entry_set(&units, 0x10, cl[0], size, size, contiguous);
        self.put_set(parent, &set);
        self.dirs.insert(
            cl[0],
            DirState {
                clusters: cl.clone(),
                used: 0,
            },
        );
        cl[0]
    }

    /// A one-cluster directory.
    pub fn add_dir(&mut self, parent: u32, name: &str) -> u32 {
        self.add_dir_sized(parent, name, 1, true)
    }

    /// Registers clusters as a directory the builder can put entries in
    /// without any entry naming it (for orphans).
    pub fn loose_dir(&mut self, clusters: Vec<u32>) -> u32 {
        let first = clusters[0];
        self.dirs.insert(first, DirState { clusters, used: 0 });
        first
    }

    /// Deletes the set at byte `off` as a driver does: clears `InUse` on
    /// each entry and frees its clusters in the bitmap (the FAT and the
    /// entries' other bytes are left).
    pub fn delete(&mut self, off: usize) {
        let n = self.img[off + 1] as usize;
        let first = u32::from_le_bytes(self.img[off + 52..off + 56].try_into().expect("4"));
        let size = u64::from_le_bytes(self.img[off + 56..off + 64].try_into().expect("8"));
        for k in 0..=n {
            self.img[off + 32 * k] &= 0x7F;
        }
        let clusters = size.div_ceil(self.cluster_size() as u64) as u32;
        for c in first..first + clusters {
            if (c as usize) < self.used.len() && c >= 2 {
                self.used[c as usize] = false;
            }
        }
    }

    /// Recomputes the checksum of the set at byte `off` of `img`.
    pub fn reseal(img: &mut [u8], off: usize) {
        let n = img[off + 1] as usize;
        let mut set: Vec<u8> = img[off..off + 32 * (n + 1)].to_vec();
        for k in 0..=n {
            set[32 * k] |= 0x80;
        }
        let sum = set_checksum(&set);
        img[off + 2..off + 4].copy_from_slice(&sum.to_le_bytes());
    }

    /// Writes the FAT, the bitmap and the boot regions; returns the image.
    pub fn finish(mut self) -> Vec<u8> {
        let bps = self.bps;
        let fat_at = self.fat_offset * bps;
        for (i, v) in self.fat.iter().enumerate() {
            self.img[fat_at + 4 * i..fat_at + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let bm_at = self.cluster_offset(self.bitmap_cluster);
        for c in 2..self.used.len() {
            if self.used[c] {
                let bit = c - 2;
                self.img[bm_at + bit / 8] |= 1 << (bit % 8);
            }
        }
        let total = (self.img.len() / bps) as u64;
        let mut b = vec![0u8; 12 * bps];
        b[0..3].copy_from_slice(&[0xEB, 0x76, 0x90]);
        b[3..11].copy_from_slice(b"EXFAT   ");
        b[72..80].copy_from_slice(&total.to_le_bytes());
        b[80..84].copy_from_slice(&(self.fat_offset as u32).to_le_bytes());
        b[84..88].copy_from_slice(&(self.fat_sectors as u32).to_le_bytes());
        b[88..92].copy_from_slice(&(self.heap_offset as u32).to_le_bytes());
        b[92..96].copy_from_slice(&self.cluster_count.to_le_bytes());
        b[96..100].copy_from_slice(&self.root.to_le_bytes());
        b[100..104].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        b[104..106].copy_from_slice(&0x0100u16.to_le_bytes());
        b[108] = 9;
        b[109] = self.spc.trailing_zeros() as u8;
        b[110] = 1;
        b[111] = 0x80;
        b[510] = 0x55;
        b[511] = 0xAA;
        for s in 1..9 {
            b[s * bps + 510] = 0x55;
            b[s * bps + 511] = 0xAA;
        }
        let sum = rot32(&b[..11 * bps], &[106, 107, 112]);
        for k in 0..bps / 4 {
            b[11 * bps + 4 * k..11 * bps + 4 * k + 4].copy_from_slice(&sum.to_le_bytes());
        }
        self.img[..12 * bps].copy_from_slice(&b);
        self.img[12 * bps..24 * bps].copy_from_slice(&b);
        self.img
    }
}
