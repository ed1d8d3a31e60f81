//! Crafted partition tables: MBR with an extended chain and GPT match TSK's
//! `mmls`; damaged tables (loops, entries outside the disk, bad CRCs) are
//! reported and the rest still listed.

mod support;

use std::io::Write;
use std::process::Command;

use caseload_fs::{ErrorKind, FsKind, PartitionType, Scheme, open_volume_system};
use support::synth::{Fat, FatType};
use support::*;

const SECTORS: usize = 131_072; // 64 MiB

fn mbr_entry(disk: &mut [u8], sector: usize, slot: usize, ty: u8, start: u32, count: u32) {
    let o = sector * 512 + 446 + 16 * slot;
    disk[o + 4] = ty;
    disk[o + 8..o + 12].copy_from_slice(&start.to_le_bytes());
    disk[o + 12..o + 16].copy_from_slice(&count.to_le_bytes());
    disk[sector * 512 + 510] = 0x55;
    disk[sector * 512 + 511] = 0xAA;
}

/// A disk with a primary FAT16 partition, an extended partition holding a
/// chain of three logical partitions (the first a real FAT16), and a
/// primary Linux partition after it.
fn mbr_disk() -> Vec<u8> {
    let mut d = vec![0u8; SECTORS * 512];
    let fat = Fat::new(FatType::Fat16, 20_000, 1).finish();
    d[63 * 512..63 * 512 + fat.len()].copy_from_slice(&fat);
    mbr_entry(&mut d, 0, 0, 0x06, 63, 20_000);
    let ext = 20_480u32;
    mbr_entry(&mut d, 0, 1, 0x05, ext, 60_000);
    mbr_entry(&mut d, 0, 2, 0x83, 90_000, 30_000);
    // EBR 1 at ext: logical at +63 (a FAT16), next EBR at ext+20000.
    let l1 = Fat::new(FatType::Fat16, 10_000, 1).finish();
    let at = (ext as usize + 63) * 512;
    d[at..at + l1.len()].copy_from_slice(&l1);
    mbr_entry(&mut d, ext as usize, 0, 0x06, 63, 10_000);
    mbr_entry(&mut d, ext as usize, 1, 0x05, 20_000, 20_000);
    // EBR 2 at ext+20000: logical at +63, next at ext+40000.
    let e2 = (ext + 20_000) as usize;
    mbr_entry(&mut d, e2, 0, 0x0b, 63, 15_000);
    mbr_entry(&mut d, e2, 1, 0x05, 40_000, 20_000);
    // EBR 3: one logical, end of chain.
    let e3 = (ext + 40_000) as usize;
    mbr_entry(&mut d, e3, 0, 0x83, 2048, 10_000);
    d
}

fn temp(img: &[u8]) -> tempfile::NamedTempFile {
    let mut t = tempfile::NamedTempFile::new().expect("temp");
    t.write_all(img).expect("write");
    t
}

fn mmls(path: &std::path::Path) -> Option<Vec<(String, u64, u64, String)>> {
    let out = Command::new("mmls").arg(path).output().ok()?;
    out.status
        .success()
        .then(|| parse_mmls(&String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn mbr_with_extended_chain_matches_mmls() {
    let d = mbr_disk();
    let vs = open_volume_system(&d).expect("volume system");
    assert_eq!(vs.scheme, Scheme::Mbr);
    assert!(vs.errors.is_empty(), "{:?}", vs.errors);
    let starts: Vec<(u64, bool, FsKind)> = vs
        .partitions
        .iter()
        .map(|p| (p.start_sector, p.logical, p.filesystem))
        .collect();
    assert_eq!(
        starts,
        vec![
            (63, false, FsKind::Fat16),
            (90_000, false, FsKind::Unknown),
            (20_543, true, FsKind::Fat16),
            (40_543, true, FsKind::Unknown),
            (62_528, true, FsKind::Unknown),
        ]
    );
    for p in &vs.partitions {
        assert!(p.errors.is_empty(), "{:?}", p.errors);
    }
    let f = temp(&d);
    if have_tool("mbr_with_extended_chain_matches_mmls", "mmls") {
        let rows = mmls(f.path()).expect("mmls");
        assert_mmls_agrees(&vs, &rows, "crafted MBR");
    }
}

#[test]
fn extended_partition_loop_is_reported_and_ends() {
    let mut d = mbr_disk();
    // EBR 3 points back to EBR 1.
    let ext = 20_480usize;
    mbr_entry(&mut d, ext + 40_000, 1, 0x05, 0, 20_000);
    let vs = open_volume_system(&d).expect("volume system");
    assert!(
        vs.errors
            .iter()
            .any(|e| e.kind == ErrorKind::ExtendedPartitionLoop),
        "{:?}",
        vs.errors
    );
    // Each logical partition is listed once.
    assert_eq!(vs.partitions.iter().filter(|p| p.logical).count(), 3);
    // A table pointing at itself.
    let mut d = mbr_disk();
    mbr_entry(&mut d, ext, 1, 0x05, 0, 20_000);
    let vs = open_volume_system(&d).expect("volume system");
    assert!(
        vs.errors
            .iter()
            .any(|e| e.kind == ErrorKind::ExtendedPartitionLoop)
    );
    assert_eq!(vs.partitions.iter().filter(|p| p.logical).count(), 1);
}

#[test]
fn entries_outside_the_disk_are_reported_and_clipped() {
    let mut d = mbr_disk();
    // Slot 3: starts past the end; slot 2 now runs past the end.
    mbr_entry(&mut d, 0, 3, 0x07, 200_000, 1000);
    mbr_entry(&mut d, 0, 2, 0x83, 120_000, 30_000);
    // A logical partition outside its extended partition, and an extended
    // table outside the disk.
    mbr_entry(&mut d, 20_480 + 40_000, 0, 0x83, 50_000, 100);
    mbr_entry(&mut d, 20_480 + 40_000, 1, 0x05, 1_000_000, 100);
    let vs = open_volume_system(&d).expect("volume system");
    let past = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == 200_000)
        .expect("past");
    assert!(
        past.errors
            .iter()
            .any(|e| e.kind == ErrorKind::PartitionOutsideDisk)
    );
    assert_eq!(past.length, 0);
    assert_eq!(past.filesystem, FsKind::Unknown);
    let partly = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == 120_000)
        .expect("partly");
    assert!(
        partly
            .errors
            .iter()
            .any(|e| e.kind == ErrorKind::PartitionOutsideDisk)
    );
    assert_eq!(partly.length, (SECTORS as u64 - 120_000) * 512);
    let logical = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == 20_480 + 40_000 + 50_000)
        .expect("logical");
    assert!(
        logical
            .errors
            .iter()
            .any(|e| e.kind == ErrorKind::PartitionInvalid)
    );
    assert!(
        vs.errors
            .iter()
            .any(|e| e.kind == ErrorKind::PartitionOutsideDisk)
    );
    // Overlap: the partly-outside primary overlaps nothing; make one that does.
    let mut d = mbr_disk();
    mbr_entry(&mut d, 0, 3, 0x07, 100, 50);
    let vs = open_volume_system(&d).expect("volume system");
    let o = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == 100)
        .expect("overlap");
    assert!(
        o.errors
            .iter()
            .any(|e| e.kind == ErrorKind::PartitionInvalid)
    );
}

fn guid_bytes(s: &str) -> [u8; 16] {
    let h: Vec<u8> = s
        .replace('-', "")
        .as_bytes()
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).expect("hex"), 16).expect("hex"))
        .collect();
    let mut g = [0u8; 16];
    g[0..4].copy_from_slice(&[h[3], h[2], h[1], h[0]]);
    g[4..6].copy_from_slice(&[h[5], h[4]]);
    g[6..8].copy_from_slice(&[h[7], h[6]]);
    g[8..16].copy_from_slice(&h[8..16]);
    g
}

const BASIC_DATA: &str = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7";

/// A GPT disk with two named partitions (the first a FAT16), primary and
/// backup headers and entry arrays, and a protective MBR.
fn gpt_disk() -> Vec<u8> {
    let mut d = vec![0u8; SECTORS * 512];
    let last = SECTORS as u64 - 1;
    mbr_entry(&mut d, 0, 0, 0xEE, 1, (SECTORS - 1) as u32);
    let mut entries = vec![0u8; 128 * 128];
    for (i, (first, lastl, name)) in [(2048u64, 22_047u64, "alpha"), (40_000, 99_999, "beta")]
        .iter()
        .enumerate()
    {
        let e = &mut entries[i * 128..(i + 1) * 128];
        e[0..16].copy_from_slice(&guid_bytes(BASIC_DATA));
        e[16..32].copy_from_slice(&[i as u8 + 1; 16]);
        e[32..40].copy_from_slice(&first.to_le_bytes());
        e[40..48].copy_from_slice(&lastl.to_le_bytes());
        for (j, u) in name.encode_utf16().enumerate() {
            e[56 + 2 * j..58 + 2 * j].copy_from_slice(&u.to_le_bytes());
        }
    }
    let fat = Fat::new(FatType::Fat16, 20_000, 1).finish();
    d[2048 * 512..2048 * 512 + fat.len()].copy_from_slice(&fat);
    let ecrc = crc32fast::hash(&entries);
    let header = |my: u64, alt: u64, entries_lba: u64| {
        let mut h = vec![0u8; 92];
        h[0..8].copy_from_slice(b"EFI PART");
        h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&my.to_le_bytes());
        h[32..40].copy_from_slice(&alt.to_le_bytes());
        h[40..48].copy_from_slice(&34u64.to_le_bytes());
        h[48..56].copy_from_slice(&(last - 33).to_le_bytes());
        h[56..72].copy_from_slice(&[0x42; 16]);
        h[72..80].copy_from_slice(&entries_lba.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        h[88..92].copy_from_slice(&ecrc.to_le_bytes());
        let crc = crc32fast::hash(&h);
        h[16..20].copy_from_slice(&crc.to_le_bytes());
        h
    };
    let p = header(1, last, 2);
    d[512..512 + 92].copy_from_slice(&p);
    d[1024..1024 + entries.len()].copy_from_slice(&entries);
    let b = header(last, 1, last - 32);
    let at = (last as usize) * 512;
    d[at..at + 92].copy_from_slice(&b);
    let eat = (last as usize - 32) * 512;
    d[eat..eat + entries.len()].copy_from_slice(&entries);
    d
}

#[test]
fn gpt_matches_mmls() {
    let d = gpt_disk();
    let vs = open_volume_system(&d).expect("volume system");
    assert_eq!(vs.scheme, Scheme::Gpt);
    assert!(vs.errors.is_empty(), "{:?}", vs.errors);
    assert_eq!(vs.partitions.len(), 2);
    assert_eq!(vs.partitions[0].filesystem, FsKind::Fat16);
    assert_eq!(vs.partitions[0].description, "alpha");
    let PartitionType::Gpt { type_guid, .. } = &vs.partitions[1].ptype else {
        panic!("gpt type");
    };
    assert_eq!(type_guid, BASIC_DATA);
    let f = temp(&d);
    if have_tool("gpt_matches_mmls", "mmls") {
        let rows = mmls(f.path()).expect("mmls");
        assert_mmls_agrees(&vs, &rows, "crafted GPT");
    }
}

#[test]
fn gpt_damage_is_reported_and_the_backup_used() {
    // Primary header CRC broken: the backup header is used.
    let mut d = gpt_disk();
    d[512 + 56] ^= 0xFF;
    let vs = open_volume_system(&d).expect("volume system");
    assert_eq!(vs.scheme, Scheme::Gpt);
    assert!(
        vs.errors
            .iter()
            .any(|e| e.kind == ErrorKind::GptCorrupt && e.detail.contains("primary"))
    );
    assert_eq!(vs.partitions.len(), 2);
    // Entry array damaged: reported, entries still listed.
    let mut d = gpt_disk();
    d[1024 + 56] = b'X';
    let vs = open_volume_system(&d).expect("volume system");
    assert!(
        vs.errors
            .iter()
            .any(|e| e.detail.contains("entry array CRC32"))
    );
    assert_eq!(vs.partitions[0].description, "Xlpha");
    // Both headers broken: reported; the protective MBR's entry is all that
    // is left.
    let mut d = gpt_disk();
    d[512 + 56] ^= 0xFF;
    let last = (SECTORS - 1) * 512;
    d[last + 56] ^= 0xFF;
    let vs = open_volume_system(&d).expect("volume system");
    assert_eq!(vs.scheme, Scheme::Mbr);
    assert!(
        vs.errors
            .iter()
            .any(|e| e.detail.contains("no valid GPT header"))
    );
    // An entry that ends before it starts, and one outside the disk.
    let mut d = gpt_disk();
    d[1024 + 128 + 40..1024 + 128 + 48].copy_from_slice(&10u64.to_le_bytes());
    let vs = open_volume_system(&d).expect("volume system");
    assert!(
        vs.partitions[1]
            .errors
            .iter()
            .any(|e| e.kind == ErrorKind::PartitionInvalid)
    );
}

#[test]
fn tiny_and_empty_sources_are_one_unknown_volume() {
    for len in [0usize, 100, 511, 512, 1024] {
        let d = vec![0u8; len];
        let vs = open_volume_system(&d).expect("volume system");
        assert_eq!(vs.scheme, Scheme::None);
        assert_eq!(vs.partitions.len(), 1);
        assert_eq!(vs.partitions[0].filesystem, FsKind::Unknown);
        let fs = caseload_fs::open_filesystem(&d, 0, len as u64).expect("open");
        assert!(matches!(
            fs,
            caseload_fs::FileSystem::Unsupported(FsKind::Unknown)
        ));
    }
}
