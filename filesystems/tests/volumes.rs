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

const BASIC_DATA: &str = "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7";

/// A GPT disk with two named partitions (the first a FAT16), primary and
/// backup headers and entry arrays, and a protective MBR.
fn gpt_disk() -> Vec<u8> {
    let mut d = gpt_disk_with(
        SECTORS,
        &[
            (2048, 22_047, "alpha", BASIC_DATA),
            (40_000, 99_999, "beta", BASIC_DATA),
        ],
    );
    let fat = Fat::new(FatType::Fat16, 20_000, 1).finish();
    d[2048 * 512..2048 * 512 + fat.len()].copy_from_slice(&fat);
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
