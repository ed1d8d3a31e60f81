//! Small synthetic FAT and NTFS images built in memory, for crafted
//! (including hostile) test cases and for the walk benchmarks. Only `std` is
//! used so the benchmarks can include this file as a module.
//!
//! The FAT images pass `fsck.fat` and list the same under TSK's `fls`; the
//! NTFS images hold only what a walker reads ($MFT, root, $Bitmap, $Volume
//! and the files added), which is enough to exercise the parser, not to be
//! mounted.

#![allow(dead_code)]

use std::collections::BTreeMap;

// ---------------------------------------------------------------- FAT

/// FAT variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FatType {
    Fat12,
    Fat16,
    Fat32,
}

/// A directory of a [`Fat`] image being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dir {
    /// The FAT12/16 root directory region.
    FixedRoot,
    /// A directory stored in clusters, named by its first cluster.
    Cluster(u32),
}

/// Date 2021-06-15 and time 12:34:56 in FAT encoding, used for every entry.
pub const FAT_DATE: u16 = ((2021 - 1980) << 9) | (6 << 5) | 15;
pub const FAT_TIME: u16 = (12 << 11) | (34 << 5) | 28;

/// A FAT image under construction.
pub struct Fat {
    pub kind: FatType,
    pub img: Vec<u8>,
    pub bps: usize,
    pub spc: usize,
    pub reserved: usize,
    pub nfats: usize,
    pub fat_sectors: usize,
    pub root_entries: usize,
    pub first_data_sector: usize,
    pub first_cluster_sector: usize,
    pub cluster_count: u32,
    pub fat: Vec<u32>,
    next_free: u32,
    /// Clusters and used slots of each directory.
    dirs: BTreeMap<Dir, (Vec<u32>, usize)>,
    pub label: [u8; 11],
}

impl Fat {
    /// A blank file system of `total_sectors` 512-byte sectors.
    pub fn new(kind: FatType, total_sectors: usize, spc: usize) -> Fat {
        let bps = 512;
        let (reserved, root_entries) = match kind {
            FatType::Fat32 => (32, 0),
            _ => (1, 512),
        };
        let nfats = 2;
        let root_sectors = root_entries * 32 / bps;
        let bits = match kind {
            FatType::Fat12 => 12,
            FatType::Fat16 => 16,
            FatType::Fat32 => 32,
        };
        let mut fat_sectors = 1;
        let clusters = loop {
            let data = total_sectors - reserved - nfats * fat_sectors - root_sectors;
            let clusters = data / spc;
            let need = ((clusters + 2) * bits).div_ceil(8).div_ceil(bps);
            if need <= fat_sectors {
                break clusters;
            }
            fat_sectors = need;
        };
        let first_data_sector = reserved + nfats * fat_sectors;
        let first_cluster_sector = first_data_sector + root_sectors;
        let mut fat = vec![0u32; clusters + 2];
        fat[0] = 0x0FFF_FFF8;
        fat[1] = 0x0FFF_FFFF;
        let mut f = Fat {
            kind,
            img: vec![0u8; total_sectors * bps],
            bps,
            spc,
            reserved,
            nfats,
            fat_sectors,
            root_entries,
            first_data_sector,
            first_cluster_sector,
            cluster_count: u32::try_from(clusters).expect("cluster count"),
            fat,
            next_free: 2,
            dirs: BTreeMap::new(),
            label: *b"NO NAME    ",
        };
        if kind == FatType::Fat32 {
            let c = f.alloc(1);
            f.link(&c);
            f.dirs.insert(Dir::Cluster(c[0]), (c, 0));
        } else {
            f.dirs.insert(Dir::FixedRoot, (Vec::new(), 0));
        }
        f
    }

    pub fn root(&self) -> Dir {
        match self.kind {
            FatType::Fat32 => Dir::Cluster(2),
            _ => Dir::FixedRoot,
        }
    }

    pub fn cluster_size(&self) -> usize {
        self.bps * self.spc
    }

    pub fn cluster_offset(&self, c: u32) -> usize {
        (self.first_cluster_sector + (c as usize - 2) * self.spc) * self.bps
    }

    /// `n` consecutive free clusters (not yet linked).
    pub fn alloc(&mut self, n: usize) -> Vec<u32> {
        let first = self.next_free;
        self.next_free += u32::try_from(n).expect("n");
        assert!(self.next_free <= self.cluster_count + 2, "image full");
        (first..self.next_free).collect()
    }

    /// Skips `n` clusters (left free, e.g. to make fragmentation).
    pub fn skip(&mut self, n: u32) {
        self.next_free += n;
    }

    /// Links a chain: each cluster to the next, the last to end-of-chain.
    pub fn link(&mut self, chain: &[u32]) {
        for w in chain.windows(2) {
            self.fat[w[0] as usize] = w[1];
        }
        if let Some(&l) = chain.last() {
            self.fat[l as usize] = 0x0FFF_FFFF;
        }
    }

    /// Writes a raw FAT entry (masked to the FAT width when written out).
    pub fn set_fat(&mut self, c: u32, v: u32) {
        self.fat[c as usize] = v;
    }

    /// Writes `data` across `clusters` in order.
    pub fn write_data(&mut self, clusters: &[u32], data: &[u8]) {
        let cs = self.cluster_size();
        for (i, chunk) in data.chunks(cs).enumerate() {
            let off = self.cluster_offset(clusters[i]);
            self.img[off..off + chunk.len()].copy_from_slice(chunk);
        }
    }

    /// Byte offset of slot `i` of a directory, growing a cluster directory
    /// by one cluster when needed.
    fn slot_offset(&mut self, dir: Dir, i: usize) -> usize {
        let per_cluster = self.cluster_size() / 32;
        match dir {
            Dir::FixedRoot => {
                assert!(i < self.root_entries, "root directory full");
                self.first_data_sector * self.bps + i * 32
            }
            Dir::Cluster(_) => {
                let ci = i / per_cluster;
                let needs = self.dirs[&dir].0.len() <= ci;
                if needs {
                    let c = self.alloc(1)[0];
                    let chain = &mut self.dirs.get_mut(&dir).expect("dir").0;
                    chain.push(c);
                    let chain = chain.clone();
                    self.link(&chain);
                }
                let c = self.dirs[&dir].0[ci];
                self.cluster_offset(c) + (i % per_cluster) * 32
            }
        }
    }

    /// Appends a raw entry to a directory; returns its byte offset.
    pub fn put_entry(&mut self, dir: Dir, raw: [u8; 32]) -> usize {
        let i = self.dirs[&dir].1;
        let off = self.slot_offset(dir, i);
        self.img[off..off + 32].copy_from_slice(&raw);
        self.dirs.get_mut(&dir).expect("dir").1 += 1;
        off
    }

    /// Adds a file stored contiguously; returns its first cluster (0 when
    /// empty) and the offset of its short entry.
    pub fn add_file(
        &mut self,
        dir: Dir,
        long: Option<&str>,
        short: &[u8; 11],
        data: &[u8],
    ) -> (u32, usize) {
        let n = data.len().div_ceil(self.cluster_size());
        let clusters = self.alloc(n);
        self.link(&clusters);
        self.write_data(&clusters, data);
        let first = clusters.first().copied().unwrap_or(0);
        let size = u32::try_from(data.len()).expect("size");
        let off = self.put_named(dir, long, short_entry(short, 0x20, first, size));
        (first, off)
    }

    /// Adds a file stored in the given clusters (any order: fragmented).
    pub fn add_file_in(
        &mut self,
        dir: Dir,
        long: Option<&str>,
        short: &[u8; 11],
        clusters: &[u32],
        data: &[u8],
    ) -> usize {
        self.link(clusters);
        self.write_data(clusters, data);
        let size = u32::try_from(data.len()).expect("size");
        self.put_named(dir, long, short_entry(short, 0x20, clusters[0], size))
    }

    /// Writes the long-name entries (if any) then the short entry; returns
    /// the short entry's offset.
    pub fn put_named(&mut self, dir: Dir, long: Option<&str>, entry: [u8; 32]) -> usize {
        if let Some(l) = long {
            let mut short = [0u8; 11];
            short.copy_from_slice(&entry[..11]);
            for e in lfn_entries(l, &short) {
                self.put_entry(dir, e);
            }
        }
        self.put_entry(dir, entry)
    }

    /// Adds a subdirectory with its `.` and `..` entries.
    pub fn add_dir(&mut self, parent: Dir, long: Option<&str>, short: &[u8; 11]) -> Dir {
        let c = self.alloc(1);
        self.link(&c);
        let d = Dir::Cluster(c[0]);
        self.dirs.insert(d, (c.clone(), 0));
        let parent_cluster = match parent {
            Dir::FixedRoot => 0,
            Dir::Cluster(p) if self.kind == FatType::Fat32 && p == 2 => 0,
            Dir::Cluster(p) => p,
        };
        self.put_entry(d, short_entry(b".          ", 0x10, c[0], 0));
        self.put_entry(d, short_entry(b"..         ", 0x10, parent_cluster, 0));
        self.put_named(parent, long, short_entry(short, 0x10, c[0], 0));
        d
    }

    /// Marks the entry at `off` (and the long-name pieces just before it)
    /// deleted and frees its chain, as Windows deletes a file.
    pub fn delete(&mut self, off: usize, first_cluster: u32) {
        self.img[off] = 0xE5;
        let mut p = off;
        while p >= 32 && self.img[p - 32 + 11] == 0x0F {
            p -= 32;
            self.img[p] = 0xE5;
        }
        let mut c = first_cluster;
        while (2..self.cluster_count + 2).contains(&c) {
            let next = self.fat[c as usize];
            self.fat[c as usize] = 0;
            c = next;
        }
    }

    /// Writes the boot sector(s) and the FAT copies and returns the image.
    pub fn finish(mut self) -> Vec<u8> {
        let bps = self.bps;
        let total = self.img.len() / bps;
        let mut b = [0u8; 512];
        b[0..3].copy_from_slice(&[0xEB, 0x3C, 0x90]);
        b[3..11].copy_from_slice(b"CASELOAD");
        b[11..13].copy_from_slice(&(bps as u16).to_le_bytes());
        b[13] = self.spc as u8;
        b[14..16].copy_from_slice(&(self.reserved as u16).to_le_bytes());
        b[16] = self.nfats as u8;
        b[17..19].copy_from_slice(&(self.root_entries as u16).to_le_bytes());
        if total < 65536 && self.kind != FatType::Fat32 {
            b[19..21].copy_from_slice(&(total as u16).to_le_bytes());
        } else {
            b[32..36].copy_from_slice(&(total as u32).to_le_bytes());
        }
        b[21] = 0xF8;
        b[24..26].copy_from_slice(&32u16.to_le_bytes());
        b[26..28].copy_from_slice(&64u16.to_le_bytes());
        let ext = if self.kind == FatType::Fat32 {
            b[36..40].copy_from_slice(&(self.fat_sectors as u32).to_le_bytes());
            b[44..48].copy_from_slice(&2u32.to_le_bytes());
            b[48..50].copy_from_slice(&1u16.to_le_bytes());
            b[50..52].copy_from_slice(&6u16.to_le_bytes());
            64
        } else {
            b[22..24].copy_from_slice(&(self.fat_sectors as u16).to_le_bytes());
            36
        };
        b[ext] = 0x80;
        b[ext + 2] = 0x29;
        b[ext + 3..ext + 7].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        b[ext + 7..ext + 18].copy_from_slice(&self.label);
        b[ext + 18..ext + 26].copy_from_slice(match self.kind {
            FatType::Fat12 => b"FAT12   ",
            FatType::Fat16 => b"FAT16   ",
            FatType::Fat32 => b"FAT32   ",
        });
        b[510] = 0x55;
        b[511] = 0xAA;
        self.img[..512].copy_from_slice(&b);
        if self.kind == FatType::Fat32 {
            self.img[6 * bps..6 * bps + 512].copy_from_slice(&b);
            let free = self.fat.iter().skip(2).filter(|&&v| v == 0).count() as u32;
            for base in [bps, 7 * bps] {
                let fsinfo = &mut self.img[base..base + 512];
                fsinfo[0..4].copy_from_slice(&0x4161_5252u32.to_le_bytes());
                fsinfo[484..488].copy_from_slice(&0x6141_7272u32.to_le_bytes());
                fsinfo[488..492].copy_from_slice(&free.to_le_bytes());
                fsinfo[492..496].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
                fsinfo[508..512].copy_from_slice(&0xAA55_0000u32.to_le_bytes());
            }
        }
        let fat_bytes = self.fat_sectors * bps;
        let mut fat = vec![0u8; fat_bytes];
        for (c, &v) in self.fat.iter().enumerate() {
            match self.kind {
                FatType::Fat12 => {
                    let v = (v & 0xFFF) as u16;
                    let off = c + c / 2;
                    let cur = u16::from_le_bytes([fat[off], fat[off + 1]]);
                    let new = if c & 1 == 1 {
                        (cur & 0x000F) | (v << 4)
                    } else {
                        (cur & 0xF000) | v
                    };
                    fat[off..off + 2].copy_from_slice(&new.to_le_bytes());
                }
                FatType::Fat16 => {
                    fat[c * 2..c * 2 + 2].copy_from_slice(&((v & 0xFFFF) as u16).to_le_bytes());
                }
                FatType::Fat32 => {
                    fat[c * 4..c * 4 + 4].copy_from_slice(&(v & 0x0FFF_FFFF).to_le_bytes());
                }
            }
        }
        for i in 0..self.nfats {
            let off = (self.reserved + i * self.fat_sectors) * bps;
            self.img[off..off + fat_bytes].copy_from_slice(&fat);
        }
        self.img
    }
}

/// A short directory entry with the fixed test date and time.
pub fn short_entry(name: &[u8; 11], attr: u8, cluster: u32, size: u32) -> [u8; 32] {
    let mut e = [0u8; 32];
    e[..11].copy_from_slice(name);
    e[11] = attr;
    e[13] = 100;
    e[14..16].copy_from_slice(&FAT_TIME.to_le_bytes());
    e[16..18].copy_from_slice(&FAT_DATE.to_le_bytes());
    e[18..20].copy_from_slice(&FAT_DATE.to_le_bytes());
    e[20..22].copy_from_slice(&((cluster >> 16) as u16).to_le_bytes());
    e[22..24].copy_from_slice(&FAT_TIME.to_le_bytes());
    e[24..26].copy_from_slice(&FAT_DATE.to_le_bytes());
    e[26..28].copy_from_slice(&(cluster as u16).to_le_bytes());
    e[28..32].copy_from_slice(&size.to_le_bytes());
    e
}

/// Checksum of an 8.3 name, as long-name entries carry it.
pub fn lfn_checksum(short: &[u8; 11]) -> u8 {
    short
        .iter()
        .fold(0u8, |s, &c| s.rotate_right(1).wrapping_add(c))
}

/// Long-name entries for `long`, in on-disk order (last piece first).
/// Any UTF-16 is written as given, hostile characters included.
pub fn lfn_entries(long: &str, short: &[u8; 11]) -> Vec<[u8; 32]> {
    lfn_entries_units(&long.encode_utf16().collect::<Vec<_>>(), short)
}

pub fn lfn_entries_units(units: &[u16], short: &[u8; 11]) -> Vec<[u8; 32]> {
    let mut u = units.to_vec();
    if !u.len().is_multiple_of(13) {
        u.push(0);
        while !u.len().is_multiple_of(13) {
            u.push(0xFFFF);
        }
    }
    let pieces = u.len() / 13;
    let chk = lfn_checksum(short);
    let offs = [1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30];
    let mut out = Vec::new();
    for p in (0..pieces).rev() {
        let mut e = [0u8; 32];
        e[0] = (p + 1) as u8 | if p == pieces - 1 { 0x40 } else { 0 };
        e[11] = 0x0F;
        e[13] = chk;
        for (i, &o) in offs.iter().enumerate() {
            e[o..o + 2].copy_from_slice(&u[p * 13 + i].to_le_bytes());
        }
        out.push(e);
    }
    out
}

// ---------------------------------------------------------------- NTFS

/// Cluster size of the synthetic NTFS volumes.
pub const NTFS_CS: usize = 512;
/// MFT record size.
pub const NTFS_RS: usize = 1024;
const INDEX_BLOCK: usize = 4096;
/// 2021-06-15 12:34:56 UTC as an NT timestamp.
pub const NT_TIME: u64 = 132_682_508_960_000_000;

/// Content of a synthetic NTFS stream.
pub enum NtfsData {
    Resident(Vec<u8>),
    /// Stored in fresh contiguous clusters.
    NonResident(Vec<u8>),
    /// LZNT1-compressed in units of 16 clusters (each unit stored
    /// compressed when that saves a cluster, else raw).
    Compressed(Vec<u8>),
    /// Explicit runs `(lcn or sparse, clusters)`, sizes given.
    Runs {
        runs: Vec<(Option<u64>, u64)>,
        data_size: u64,
        init_size: u64,
    },
}

struct Entry {
    record: u64,
    seq: u16,
    fname: Vec<u8>,
}

/// An NTFS volume under construction.
pub struct Ntfs {
    pub img: Vec<u8>,
    pub total_clusters: u64,
    pub mft_lcn: u64,
    pub mft_records: u64,
    next_lcn: u64,
    next_record: u64,
    bitmap: Vec<u8>,
    /// Directory record -> its index entries.
    dirs: BTreeMap<u64, Vec<Entry>>,
    /// Records written (raw, before fixups).
    pub records: BTreeMap<u64, Vec<u8>>,
    seqs: BTreeMap<u64, u16>,
    /// Clusters each record's streams were given, freed on delete.
    extents: BTreeMap<u64, Vec<(u64, u64)>>,
}

pub const NTFS_ROOT: u64 = 5;

impl Ntfs {
    /// A volume of `total_clusters` 512-byte clusters with room for
    /// `mft_records` MFT records.
    pub fn new(total_clusters: u64, mft_records: u64) -> Ntfs {
        let mft_lcn = 16;
        let mft_clusters = mft_records * (NTFS_RS / NTFS_CS) as u64;
        let mut n = Ntfs {
            img: vec![0u8; total_clusters as usize * NTFS_CS],
            total_clusters,
            mft_lcn,
            mft_records,
            next_lcn: mft_lcn + mft_clusters,
            next_record: 16,
            bitmap: vec![0u8; (total_clusters as usize).div_ceil(8)],
            dirs: BTreeMap::new(),
            records: BTreeMap::new(),
            seqs: BTreeMap::new(),
            extents: BTreeMap::new(),
        };
        for c in 0..n.next_lcn {
            n.mark(c);
        }
        n.dirs.insert(NTFS_ROOT, Vec::new());
        n.seqs.insert(NTFS_ROOT, 5);
        n
    }

    fn mark(&mut self, c: u64) {
        self.bitmap[(c / 8) as usize] |= 1 << (c % 8);
    }

    fn unmark(&mut self, c: u64) {
        self.bitmap[(c / 8) as usize] &= !(1 << (c % 8));
    }

    /// Allocates `n` contiguous clusters.
    pub fn alloc(&mut self, n: u64) -> u64 {
        let l = self.next_lcn;
        self.next_lcn += n;
        assert!(self.next_lcn <= self.total_clusters, "volume full");
        for c in l..l + n {
            self.mark(c);
        }
        l
    }

    pub fn write_clusters(&mut self, lcn: u64, data: &[u8]) {
        let off = lcn as usize * NTFS_CS;
        self.img[off..off + data.len()].copy_from_slice(data);
    }

    fn new_record(&mut self) -> u64 {
        let r = self.next_record;
        self.next_record += 1;
        assert!(r < self.mft_records, "MFT full");
        r
    }

    fn stream_attr(&mut self, record: u64, name: &str, instance: u16, data: NtfsData) -> Vec<u8> {
        match data {
            NtfsData::Resident(v) => attr_resident(0x80, name, instance, &v),
            NtfsData::NonResident(v) => {
                let clusters = (v.len() as u64).div_ceil(NTFS_CS as u64).max(1);
                let lcn = self.alloc(clusters);
                self.extents
                    .entry(record)
                    .or_default()
                    .push((lcn, clusters));
                self.write_clusters(lcn, &v);
                let len = v.len() as u64;
                attr_nonresident(0x80, name, instance, &[(Some(lcn), clusters)], len, len, 0)
            }
            NtfsData::Runs {
                runs,
                data_size,
                init_size,
            } => attr_nonresident(0x80, name, instance, &runs, data_size, init_size, 0),
            NtfsData::Compressed(v) => {
                let unit = 16 * NTFS_CS;
                let mut runs: Vec<(Option<u64>, u64)> = Vec::new();
                for part in v.chunks(unit) {
                    let packed = lznt1_compress(part);
                    let clusters = packed.len().div_ceil(NTFS_CS) as u64;
                    if clusters < 16 {
                        let lcn = self.alloc(clusters);
                        self.extents
                            .entry(record)
                            .or_default()
                            .push((lcn, clusters));
                        self.write_clusters(lcn, &packed);
                        runs.push((Some(lcn), clusters));
                        runs.push((None, 16 - clusters));
                    } else {
                        let lcn = self.alloc(16);
                        self.extents.entry(record).or_default().push((lcn, 16));
                        self.write_clusters(lcn, part);
                        runs.push((Some(lcn), 16));
                    }
                }
                let len = v.len() as u64;
                let mut a = attr_nonresident(0x80, name, instance, &runs, len, len, 0x0001);
                // Compressed attributes carry a unit exponent and a 72-byte
                // header (compressed size at 64).
                a[34] = 4;
                let stored: u64 = runs.iter().filter(|r| r.0.is_some()).map(|r| r.1).sum();
                let runs_off = u16::from_le_bytes([a[32], a[33]]) as usize;
                let mut b = a[..runs_off].to_vec();
                b.extend_from_slice(&(stored * NTFS_CS as u64).to_le_bytes());
                b[32..34].copy_from_slice(&((runs_off + 8) as u16).to_le_bytes());
                b.extend_from_slice(&a[runs_off..]);
                let len = b.len() as u32;
                b[4..8].copy_from_slice(&len.to_le_bytes());
                b
            }
        }
    }

    /// Adds a file in directory `parent` with an unnamed stream and optional
    /// named streams; returns its record number.
    pub fn add_file(
        &mut self,
        parent: u64,
        name: &str,
        data: NtfsData,
        streams: Vec<(&str, NtfsData)>,
    ) -> u64 {
        let r = self.new_record();
        let fname = file_name_value(parent, self.seqs[&parent], name, false);
        let mut attrs = vec![
            attr_resident(0x10, "", 0, &std_info_value()),
            attr_resident(0x30, "", 2, &fname),
        ];
        attrs.push(self.stream_attr(r, "", 3, data));
        for (i, (sname, sdata)) in streams.into_iter().enumerate() {
            attrs.push(self.stream_attr(r, sname, 4 + i as u16, sdata));
        }
        self.records.insert(r, record_bytes(1, 0x01, &attrs, 0));
        self.seqs.insert(r, 1);
        self.dirs.get_mut(&parent).expect("parent").push(Entry {
            record: r,
            seq: 1,
            fname,
        });
        r
    }

    /// A fresh record number, for records built by hand.
    pub fn reserve_record(&mut self) -> u64 {
        self.new_record()
    }

    /// Stores a hand-built record (no fixups yet).
    pub fn insert_record(&mut self, n: u64, rec: Vec<u8>) {
        self.records.insert(n, rec);
        self.seqs.entry(n).or_insert(1);
    }

    /// Lists record `n` (sequence 1) in directory `parent` under `name`;
    /// returns the `$FILE_NAME` value used, for the record itself.
    pub fn link_name(&mut self, parent: u64, n: u64, name: &str) -> Vec<u8> {
        let fname = file_name_value(parent, self.seqs[&parent], name, false);
        self.dirs.get_mut(&parent).expect("parent").push(Entry {
            record: n,
            seq: 1,
            fname: fname.clone(),
        });
        fname
    }

    /// Adds a directory; returns its record number.
    pub fn add_dir(&mut self, parent: u64, name: &str) -> u64 {
        let r = self.new_record();
        let fname = file_name_value(parent, self.seqs[&parent], name, true);
        self.records.insert(r, fname.clone());
        self.seqs.insert(r, 1);
        self.dirs.insert(r, Vec::new());
        self.dirs.get_mut(&parent).expect("parent").push(Entry {
            record: r,
            seq: 1,
            fname,
        });
        r
    }

    /// Deletes a file as NTFS does: the record is freed (in-use flag
    /// cleared, sequence number bumped), its clusters freed and its index
    /// entry removed.
    pub fn delete(&mut self, record: u64) {
        for entries in self.dirs.values_mut() {
            entries.retain(|e| e.record != record);
        }
        for (lcn, n) in self.extents.remove(&record).unwrap_or_default() {
            for c in lcn..lcn + n {
                self.unmark(c);
            }
        }
        let rec = self.records.get_mut(&record).expect("record");
        rec[22] &= !0x01;
        let seq = u16::from_le_bytes([rec[16], rec[17]]) + 1;
        rec[16..18].copy_from_slice(&seq.to_le_bytes());
        self.seqs.insert(record, seq);
    }

    /// Writes raw bytes over a record before fixups (for corrupting).
    pub fn record_mut(&mut self, record: u64) -> &mut Vec<u8> {
        self.records.get_mut(&record).expect("record")
    }

    /// Builds the directories' indexes and the system records, applies
    /// fixups and returns the image.
    pub fn finish(mut self) -> Vec<u8> {
        let dirs: Vec<(u64, Vec<Entry>)> = std::mem::take(&mut self.dirs).into_iter().collect();
        for (dir, mut entries) in dirs {
            entries.sort_by_key(|e| upper_name(&e.fname));
            let (seq, fname) = if dir == NTFS_ROOT {
                (5, file_name_value(NTFS_ROOT, 5, ".", true))
            } else {
                (1, self.records[&dir].clone())
            };
            let mut attrs = vec![
                attr_resident(0x10, "", 0, &std_info_value()),
                attr_resident(0x30, "", 1, &fname),
            ];
            attrs.extend(self.index_attrs(&entries));
            let mut rec = record_bytes(seq, 0x03, &attrs, 0);
            if rec.len() > NTFS_RS {
                panic!("directory record too large");
            }
            rec.resize(NTFS_RS, 0);
            self.records.insert(dir, rec);
        }
        // $Bitmap (6) and $Volume (3).
        let bitmap_clusters = (self.bitmap.len() as u64).div_ceil(NTFS_CS as u64);
        let blcn = self.alloc(bitmap_clusters);
        let blen = self.bitmap.len() as u64;
        let bitmap = self.bitmap.clone();
        self.write_clusters(blcn, &bitmap);
        let root_seq = 5;
        let attrs = vec![
            attr_resident(0x10, "", 0, &std_info_value()),
            attr_resident(
                0x30,
                "",
                1,
                &file_name_value(NTFS_ROOT, root_seq, "$Bitmap", false),
            ),
            attr_nonresident(0x80, "", 2, &[(Some(blcn), bitmap_clusters)], blen, blen, 0),
        ];
        self.records.insert(6, record_bytes(6, 0x01, &attrs, 0));
        let vname: Vec<u8> = "SYNTH".encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut vinfo = vec![0u8; 12];
        vinfo[8] = 3;
        vinfo[9] = 1;
        let attrs = vec![
            attr_resident(0x10, "", 0, &std_info_value()),
            attr_resident(
                0x30,
                "",
                1,
                &file_name_value(NTFS_ROOT, root_seq, "$Volume", false),
            ),
            attr_resident(0x60, "", 2, &vname),
            attr_resident(0x70, "", 3, &vinfo),
        ];
        self.records.insert(3, record_bytes(3, 0x01, &attrs, 0));
        // $MFT (0).
        let mft_clusters = self.mft_records * (NTFS_RS / NTFS_CS) as u64;
        let mft_bytes = self.mft_records * NTFS_RS as u64;
        let attrs = vec![
            attr_resident(0x10, "", 0, &std_info_value()),
            attr_resident(
                0x30,
                "",
                1,
                &file_name_value(NTFS_ROOT, root_seq, "$MFT", false),
            ),
            attr_nonresident(
                0x80,
                "",
                2,
                &[(Some(self.mft_lcn), mft_clusters)],
                mft_bytes,
                mft_bytes,
                0,
            ),
        ];
        self.records.insert(0, record_bytes(1, 0x01, &attrs, 0));
        let records = std::mem::take(&mut self.records);
        for (n, mut rec) in records {
            rec.resize(NTFS_RS, 0);
            apply_fixups(&mut rec, 48);
            let off = (self.mft_lcn as usize) * NTFS_CS + n as usize * NTFS_RS;
            self.img[off..off + NTFS_RS].copy_from_slice(&rec);
        }
        let mut b = [0u8; 512];
        b[0..3].copy_from_slice(&[0xEB, 0x52, 0x90]);
        b[3..11].copy_from_slice(b"NTFS    ");
        b[11..13].copy_from_slice(&512u16.to_le_bytes());
        b[13] = (NTFS_CS / 512) as u8;
        b[21] = 0xF8;
        b[40..48]
            .copy_from_slice(&(self.total_clusters * (NTFS_CS as u64 / 512) - 1).to_le_bytes());
        b[48..56].copy_from_slice(&self.mft_lcn.to_le_bytes());
        b[56..64].copy_from_slice(&(self.total_clusters / 2).to_le_bytes());
        b[64] = 0xF6; // 2^10-byte records
        b[68] = 0xF4; // 2^12-byte index blocks
        b[72..80].copy_from_slice(&0x0123_4567_89AB_CDEFu64.to_le_bytes());
        b[510] = 0x55;
        b[511] = 0xAA;
        self.img[..512].copy_from_slice(&b);
        self.img
    }

    /// Index root (and allocation blocks when the entries do not fit in the
    /// record) for a directory.
    fn index_attrs(&mut self, entries: &[Entry]) -> Vec<Vec<u8>> {
        let encoded: Vec<Vec<u8>> = entries
            .iter()
            .map(|e| index_entry(e.record | (u64::from(e.seq) << 48), &e.fname, None))
            .collect();
        let total: usize = encoded.iter().map(Vec::len).sum();
        if total + 16 + 16 + 200 < NTFS_RS - 300 {
            let mut node = encoded.concat();
            node.extend(index_entry(0, &[], None));
            return vec![attr_resident(
                0x90,
                "$I30",
                4,
                &index_root_value(&node, false),
            )];
        }
        // Spread entries over 4 KiB index blocks, all children of the root.
        let mut blocks: Vec<Vec<u8>> = vec![Vec::new()];
        for e in encoded {
            if blocks.last().expect("block").len() + e.len() + 16 + 64 > INDEX_BLOCK {
                blocks.push(Vec::new());
            }
            blocks.last_mut().expect("block").extend(e);
        }
        let per_block = (INDEX_BLOCK / NTFS_CS) as u64;
        let lcn = self.alloc(blocks.len() as u64 * per_block);
        for (i, body) in blocks.iter().enumerate() {
            let mut node = body.clone();
            node.extend(index_entry(0, &[], None));
            let blk = index_block(i as u64 * per_block, &node);
            self.write_clusters(lcn + i as u64 * per_block, &blk);
        }
        let root_node = index_entry(0, &[], Some(0));
        let alloc_bytes = blocks.len() as u64 * INDEX_BLOCK as u64;
        let bitmap = vec![0xFFu8; blocks.len().div_ceil(8)];
        vec![
            attr_resident(0x90, "$I30", 4, &index_root_value(&root_node, true)),
            attr_nonresident(
                0xA0,
                "$I30",
                5,
                &[(Some(lcn), blocks.len() as u64 * per_block)],
                alloc_bytes,
                alloc_bytes,
                0,
            ),
            attr_resident(0xB0, "$I30", 6, &bitmap),
        ]
    }
}

fn upper_name(fname: &[u8]) -> Vec<u16> {
    let n = fname[64] as usize;
    fname[66..66 + 2 * n]
        .chunks_exact(2)
        .map(|c| {
            let u = u16::from_le_bytes([c[0], c[1]]);
            if (u16::from(b'a')..=u16::from(b'z')).contains(&u) {
                u - 32
            } else {
                u
            }
        })
        .collect()
}

fn pad8(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
}

/// A resident attribute.
pub fn attr_resident(ty: u32, name: &str, instance: u16, value: &[u8]) -> Vec<u8> {
    let name16: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let name_off = 24;
    let mut value_off = name_off + name16.len();
    value_off = value_off.div_ceil(8) * 8;
    let mut a = vec![0u8; value_off];
    a[0..4].copy_from_slice(&ty.to_le_bytes());
    a[9] = (name16.len() / 2) as u8;
    a[10..12].copy_from_slice(&(name_off as u16).to_le_bytes());
    a[14..16].copy_from_slice(&instance.to_le_bytes());
    a[16..20].copy_from_slice(&(value.len() as u32).to_le_bytes());
    a[20..22].copy_from_slice(&(value_off as u16).to_le_bytes());
    a[name_off..name_off + name16.len()].copy_from_slice(&name16);
    a.extend_from_slice(value);
    pad8(&mut a);
    let len = a.len() as u32;
    a[4..8].copy_from_slice(&len.to_le_bytes());
    a
}

/// Encodes a run list.
pub fn encode_runs(runs: &[(Option<u64>, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev: i64 = 0;
    for &(lcn, len) in runs {
        let lb = bytes_for_unsigned(len);
        match lcn {
            None => {
                out.push(lb as u8);
                out.extend_from_slice(&len.to_le_bytes()[..lb]);
            }
            Some(l) => {
                let delta = l as i64 - prev;
                prev = l as i64;
                let ob = bytes_for_signed(delta);
                out.push((lb | (ob << 4)) as u8);
                out.extend_from_slice(&len.to_le_bytes()[..lb]);
                out.extend_from_slice(&delta.to_le_bytes()[..ob]);
            }
        }
    }
    out.push(0);
    out
}

fn bytes_for_unsigned(v: u64) -> usize {
    (1..=8)
        .find(|&n| n == 8 || v < 1u64 << (8 * n))
        .unwrap_or(8)
}

fn bytes_for_signed(v: i64) -> usize {
    (1..=8)
        .find(|&n| {
            n == 8 || {
                let lim = 1i64 << (8 * n - 1);
                (-lim..lim).contains(&v)
            }
        })
        .unwrap_or(8)
}

/// A non-resident attribute over `runs`.
pub fn attr_nonresident(
    ty: u32,
    name: &str,
    instance: u16,
    runs: &[(Option<u64>, u64)],
    data_size: u64,
    init_size: u64,
    flags: u16,
) -> Vec<u8> {
    let name16: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let name_off = 64;
    let runs_off = (name_off + name16.len()).div_ceil(8) * 8;
    let clusters: u64 = runs.iter().map(|r| r.1).sum();
    let mut a = vec![0u8; runs_off];
    a[0..4].copy_from_slice(&ty.to_le_bytes());
    a[8] = 1;
    a[9] = (name16.len() / 2) as u8;
    a[10..12].copy_from_slice(&(name_off as u16).to_le_bytes());
    a[12..14].copy_from_slice(&flags.to_le_bytes());
    a[14..16].copy_from_slice(&instance.to_le_bytes());
    a[24..32].copy_from_slice(&clusters.saturating_sub(1).to_le_bytes());
    a[32..34].copy_from_slice(&(runs_off as u16).to_le_bytes());
    a[40..48].copy_from_slice(&(clusters * NTFS_CS as u64).to_le_bytes());
    a[48..56].copy_from_slice(&data_size.to_le_bytes());
    a[56..64].copy_from_slice(&init_size.to_le_bytes());
    a[name_off..name_off + name16.len()].copy_from_slice(&name16);
    a.extend(encode_runs(runs));
    pad8(&mut a);
    let len = a.len() as u32;
    a[4..8].copy_from_slice(&len.to_le_bytes());
    a
}

/// A `$STANDARD_INFORMATION` value with every time at [`NT_TIME`].
pub fn std_info_value() -> Vec<u8> {
    let mut v = vec![0u8; 48];
    for i in 0..4 {
        v[i * 8..i * 8 + 8].copy_from_slice(&NT_TIME.to_le_bytes());
    }
    v[32..36].copy_from_slice(&0x20u32.to_le_bytes());
    v
}

/// A `$FILE_NAME` value (Win32 namespace).
pub fn file_name_value(parent: u64, parent_seq: u16, name: &str, dir: bool) -> Vec<u8> {
    let units: Vec<u16> = name.encode_utf16().collect();
    file_name_units(parent, parent_seq, &units, dir, 1)
}

pub fn file_name_units(
    parent: u64,
    parent_seq: u16,
    units: &[u16],
    dir: bool,
    namespace: u8,
) -> Vec<u8> {
    let mut v = vec![0u8; 66];
    v[0..8].copy_from_slice(&(parent | (u64::from(parent_seq) << 48)).to_le_bytes());
    for i in 0..4 {
        v[8 + i * 8..16 + i * 8].copy_from_slice(&NT_TIME.to_le_bytes());
    }
    let flags: u32 = if dir { 0x1000_0000 } else { 0x20 };
    v[56..60].copy_from_slice(&flags.to_le_bytes());
    v[64] = units.len() as u8;
    v[65] = namespace;
    for u in units {
        v.extend_from_slice(&u.to_le_bytes());
    }
    v
}

/// An index entry naming `file_ref` with key `fname`; an empty key makes
/// the last entry (with a subnode VCN when given).
pub fn index_entry(file_ref: u64, fname: &[u8], subnode: Option<u64>) -> Vec<u8> {
    let mut e = vec![0u8; 16];
    let mut flags = 0u16;
    if fname.is_empty() {
        flags |= 2;
    } else {
        e[0..8].copy_from_slice(&file_ref.to_le_bytes());
        e.extend_from_slice(fname);
        pad8(&mut e);
    }
    if let Some(vcn) = subnode {
        flags |= 1;
        e.extend_from_slice(&vcn.to_le_bytes());
    }
    let len = e.len() as u16;
    e[8..10].copy_from_slice(&len.to_le_bytes());
    e[10..12].copy_from_slice(&(fname.len() as u16).to_le_bytes());
    e[12..14].copy_from_slice(&flags.to_le_bytes());
    e
}

/// An `$INDEX_ROOT` value holding `node` (a run of index entries).
pub fn index_root_value(node: &[u8], large: bool) -> Vec<u8> {
    let mut v = vec![0u8; 32];
    v[0..4].copy_from_slice(&0x30u32.to_le_bytes());
    v[4..8].copy_from_slice(&1u32.to_le_bytes());
    v[8..12].copy_from_slice(&(INDEX_BLOCK as u32).to_le_bytes());
    v[12] = (INDEX_BLOCK / NTFS_CS) as u8;
    v[16..20].copy_from_slice(&16u32.to_le_bytes());
    let used = 16 + node.len() as u32;
    v[20..24].copy_from_slice(&used.to_le_bytes());
    v[24..28].copy_from_slice(&used.to_le_bytes());
    v[28] = u8::from(large);
    v.extend_from_slice(node);
    v
}

/// An `INDX` block at `vcn` holding `node`, fixups applied.
pub fn index_block(vcn: u64, node: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; INDEX_BLOCK];
    b[0..4].copy_from_slice(b"INDX");
    b[16..24].copy_from_slice(&vcn.to_le_bytes());
    let first = 0x28u32; // entries start at 24 + 0x28 = 64
    b[24..28].copy_from_slice(&first.to_le_bytes());
    let used = first + node.len() as u32;
    b[28..32].copy_from_slice(&used.to_le_bytes());
    b[32..36].copy_from_slice(&((INDEX_BLOCK - 24) as u32).to_le_bytes());
    b[64..64 + node.len()].copy_from_slice(node);
    apply_fixups(&mut b, 40);
    b
}

/// A `FILE` record holding `attrs` (no fixups yet).
pub fn record_bytes(seq: u16, flags: u16, attrs: &[Vec<u8>], base_ref: u64) -> Vec<u8> {
    let mut r = vec![0u8; 56];
    r[0..4].copy_from_slice(b"FILE");
    r[16..18].copy_from_slice(&seq.to_le_bytes());
    r[18..20].copy_from_slice(&1u16.to_le_bytes());
    r[20..22].copy_from_slice(&56u16.to_le_bytes());
    r[22..24].copy_from_slice(&flags.to_le_bytes());
    r[32..40].copy_from_slice(&base_ref.to_le_bytes());
    for a in attrs {
        r.extend_from_slice(a);
    }
    r.extend_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
    r.extend_from_slice(&[0u8; 4]);
    let used = r.len() as u32;
    r[24..28].copy_from_slice(&used.to_le_bytes());
    r[28..32].copy_from_slice(&(NTFS_RS as u32).to_le_bytes());
    r
}

/// Protects a multi-sector record: the update sequence array sits at
/// `usa_off` (count = sectors + 1) and each 512-byte stride's last two bytes
/// move into it.
pub fn apply_fixups(rec: &mut [u8], usa_off: usize) {
    let strides = rec.len() / 512;
    rec[4..6].copy_from_slice(&(usa_off as u16).to_le_bytes());
    rec[6..8].copy_from_slice(&((strides + 1) as u16).to_le_bytes());
    let usn = [0x2A, 0x00];
    rec[usa_off..usa_off + 2].copy_from_slice(&usn);
    for i in 1..=strides {
        let pos = i * 512 - 2;
        let (a, b) = (rec[pos], rec[pos + 1]);
        rec[usa_off + 2 * i] = a;
        rec[usa_off + 2 * i + 1] = b;
        rec[pos..pos + 2].copy_from_slice(&usn);
    }
}

/// LZNT1-compresses one compression unit: 4096-byte chunks, each stored
/// compressed (greedy longest matches) or raw when that is not smaller.
pub fn lznt1_compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(4096) {
        let body = lznt1_chunk(chunk);
        if body.len() < chunk.len() {
            out.extend_from_slice(&(0xB000u16 | (body.len() as u16 - 1)).to_le_bytes());
            out.extend_from_slice(&body);
        } else {
            out.extend_from_slice(&(0x3000u16 | (chunk.len() as u16 - 1)).to_le_bytes());
            out.extend_from_slice(chunk);
        }
    }
    out.extend_from_slice(&[0, 0]);
    out
}

fn lznt1_chunk(chunk: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut p = 0usize;
    while p < chunk.len() {
        let flag_at = out.len();
        out.push(0u8);
        for bit in 0..8 {
            if p >= chunk.len() {
                break;
            }
            let mut shift = 12;
            let mut x = p.saturating_sub(1);
            while x >= 0x10 {
                shift -= 1;
                x >>= 1;
            }
            let max_off = 1usize << (16 - shift);
            let max_len = ((1usize << shift) - 1 + 3).min(chunk.len() - p);
            let (mut best_len, mut best_off) = (0usize, 0usize);
            if p > 0 {
                for off in 1..=max_off.min(p) {
                    let mut l = 0;
                    while l < max_len && chunk[p + l] == chunk[p + l - off] {
                        l += 1;
                    }
                    if l > best_len {
                        best_len = l;
                        best_off = off;
                    }
                }
            }
            if best_len >= 3 {
                let token = ((best_off - 1) << shift) | (best_len - 3);
                out.extend_from_slice(&(token as u16).to_le_bytes());
                out[flag_at] |= 1 << bit;
                p += best_len;
            } else {
                out.push(chunk[p]);
                p += 1;
            }
        }
    }
    out
}
