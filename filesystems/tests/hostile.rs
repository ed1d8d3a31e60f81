//! Hostile and damaged file systems, built in memory: every case gives a
//! recorded processing error on the record or the walk, the rest of the
//! file system is still listed (a witness file is checked each time), and
//! nothing panics or loops.

mod support;

use caseload_fs::{ErrorKind, FileRecord, FileSystem, Recovery, WalkSummary, open_filesystem};
use support::synth::{
    self, Dir, Fat, FatType, NTFS_ROOT, NTFS_RS, Ntfs, NtfsData, lfn_entries, lfn_entries_units,
    short_entry,
};
use support::*;

const WITNESS: &[u8] = b"the rest of the file system is still read";

fn walk(img: &[u8]) -> (Vec<FileRecord>, WalkSummary) {
    let fs = open_filesystem(img, 0, img.len() as u64).expect("open");
    assert!(!matches!(fs, FileSystem::Unsupported(_)));
    walk_all(&fs)
}

fn has(errors: &[caseload_fs::ProcessingError], kind: ErrorKind) -> bool {
    errors.iter().any(|e| e.kind == kind)
}

/// The witness file is listed with its bytes.
fn witness_ok(img: &[u8], records: &[FileRecord]) {
    let w = records
        .iter()
        .find(|r| r.name.eq_ignore_ascii_case("witness.txt"))
        .expect("witness listed");
    assert_eq!(md5_of(img, w), md5_bytes(WITNESS));
    assert!(w.errors.is_empty(), "{:?}", w.errors);
}

fn fat16() -> Fat {
    let mut f = Fat::new(FatType::Fat16, 20_000, 1);
    let root = f.root();
    f.add_file(root, None, b"WITNESS TXT", WITNESS);
    f
}

fn record<'a>(records: &'a [FileRecord], name: &str) -> &'a FileRecord {
    records
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name} not listed"))
}

#[test]
fn fat_chain_loop() {
    let mut f = fat16();
    let root = f.root();
    let c = f.alloc(2);
    f.put_entry(root, short_entry(b"LOOP    BIN", 0x20, c[0], 5 * 512));
    f.set_fat(c[0], c[1]);
    f.set_fat(c[1], c[0]);
    let img = f.finish();
    let (records, _) = walk(&img);
    let r = record(&records, "LOOP.BIN");
    assert!(has(&r.errors, ErrorKind::ChainLoop), "{:?}", r.errors);
    assert_eq!(r.content.len(), 2 * 512);
    witness_ok(&img, &records);
}

#[test]
fn fat_chain_out_of_range_free_and_short() {
    let mut f = fat16();
    let root = f.root();
    let c = f.alloc(3);
    f.put_entry(root, short_entry(b"RANGE   BIN", 0x20, c[0], 3 * 512));
    f.set_fat(c[0], 0xFFF0);
    f.put_entry(root, short_entry(b"FREE    BIN", 0x20, c[1], 3 * 512));
    f.set_fat(c[1], c[2]);
    f.set_fat(c[2], 0);
    let d = f.alloc(1);
    f.link(&d);
    f.put_entry(root, short_entry(b"SHORT   BIN", 0x20, d[0], 4 * 512));
    let img = f.finish();
    let (records, _) = walk(&img);
    assert!(has(
        &record(&records, "RANGE.BIN").errors,
        ErrorKind::ChainOutOfRange
    ));
    assert!(has(
        &record(&records, "FREE.BIN").errors,
        ErrorKind::ChainBroken
    ));
    let short = record(&records, "SHORT.BIN");
    assert!(has(&short.errors, ErrorKind::ChainTooShort));
    assert_eq!(short.content.len(), 512);
    witness_ok(&img, &records);
}

#[test]
fn fat_entry_with_absurd_size_and_start_cluster_is_kept_and_flagged() {
    let mut f = fat16();
    let root = f.root();
    f.put_entry(root, short_entry(b"HUGE    BIN", 0x20, 3, u32::MAX));
    f.put_entry(root, short_entry(b"NOWHERE BIN", 0x20, 60_000, 10));
    let img = f.finish();
    let (records, _) = walk(&img);
    let huge = record(&records, "HUGE.BIN");
    assert_eq!(huge.size, u64::from(u32::MAX));
    assert!(has(&huge.errors, ErrorKind::AbsurdSize));
    let nowhere = record(&records, "NOWHERE.BIN");
    assert!(has(&nowhere.errors, ErrorKind::ChainOutOfRange));
    assert!(has(&nowhere.errors, ErrorKind::CorruptFileSystem));
    witness_ok(&img, &records);
}

#[test]
fn fat_directories_that_contain_themselves() {
    // FAT16: a subdirectory listing itself, and one listing its parent.
    let mut f = fat16();
    let root = f.root();
    let a = f.add_dir(root, None, b"A          ");
    let Dir::Cluster(ac) = a else { panic!() };
    f.put_entry(a, short_entry(b"SELF       ", 0x10, ac, 0));
    let b = f.add_dir(a, None, b"B          ");
    f.put_entry(b, short_entry(b"UP         ", 0x10, ac, 0));
    f.add_file(b, None, b"INNER   TXT", b"inner");
    let img = f.finish();
    let (records, summary) = walk(&img);
    let loops = summary
        .errors
        .errors
        .iter()
        .filter(|e| e.kind == ErrorKind::DirectoryLoop)
        .count();
    assert_eq!(loops, 2, "{:?}", summary.errors);
    assert!(records.iter().any(|r| r.path() == "A/B/INNER.TXT"));
    witness_ok(&img, &records);
    // FAT32: a directory pointing back at the root cluster.
    let mut f = Fat::new(FatType::Fat32, 140_000, 1);
    let root = f.root();
    f.add_file(root, None, b"WITNESS TXT", WITNESS);
    let d = f.add_dir(root, None, b"D          ");
    f.put_entry(d, short_entry(b"ROOT       ", 0x10, 2, 0));
    let img = f.finish();
    let (records, summary) = walk(&img);
    assert!(has(&summary.errors.errors, ErrorKind::DirectoryLoop));
    witness_ok(&img, &records);
}

#[test]
fn fat_directory_reached_twice_and_fan_out_is_bounded() {
    let mut f = fat16();
    let root = f.root();
    let shared = f.add_dir(root, None, b"SHARED     ");
    let Dir::Cluster(sc) = shared else { panic!() };
    for i in 0..20u8 {
        f.put_entry(shared, short_entry(b"FILE    TXT", 0x20, 0, 0));
        let mut name = *b"ALIAS      ";
        name[5] = b'A' + i;
        f.put_entry(root, short_entry(&name, 0x10, sc, 0));
    }
    let img = f.finish();
    let (records, summary) = walk(&img);
    let twice = summary
        .errors
        .errors
        .iter()
        .filter(|e| e.kind == ErrorKind::DirectoryLoop)
        .count();
    assert_eq!(twice, 20);
    // The shared directory's entries are listed once only.
    assert_eq!(records.iter().filter(|r| r.name == "FILE.TXT").count(), 20);
    witness_ok(&img, &records);
}

#[test]
fn fat_deep_nesting_stops_at_the_depth_limit() {
    let mut f = fat16();
    let mut d = f.root();
    for _ in 0..300 {
        d = f.add_dir(d, None, b"DEEP       ");
    }
    let img = f.finish();
    let (records, summary) = walk(&img);
    assert!(has(&summary.errors.errors, ErrorKind::WalkLimit));
    assert!(records.iter().filter(|r| r.name == "DEEP").count() < 300);
    witness_ok(&img, &records);
}

#[test]
fn fat_hostile_long_names_are_kept_raw_and_flagged() {
    let mut f = fat16();
    let root = f.root();
    let names = [
        ("..", *b"DOTDOT  TXT"),
        ("a/b", *b"SLASH   TXT"),
        ("ctl\u{1b}[2J\u{7}", *b"CTL     TXT"),
        ("../../etc/passwd", *b"PASSWD  TXT"),
    ];
    for (long, short) in &names {
        f.add_file(root, Some(long), short, b"x");
    }
    let long = "L".repeat(255);
    f.add_file(root, Some(&long), b"LONG    TXT", b"x");
    // 62 pieces: 806 characters, far past the 255 a long name may hold.
    let huge = "H".repeat(806);
    f.add_file(root, Some(&huge), b"HUGE    TXT", b"x");
    // A NUL inside: the name ends there, the rest is kept in the raw bytes.
    let mut units: Vec<u16> = "nul".encode_utf16().collect();
    units.push(0);
    units.extend("hidden".encode_utf16());
    let short = *b"NUL     TXT";
    for e in lfn_entries_units(&units, &short) {
        f.put_entry(root, e);
    }
    f.put_entry(root, short_entry(&short, 0x20, 0, 0));
    let img = f.finish();
    let (records, _) = walk(&img);
    for (long, _) in &names {
        let r = record(&records, long);
        assert!(
            has(&r.errors, ErrorKind::HostileName),
            "{long}: {:?}",
            r.errors
        );
        let shown = r.display_path();
        assert!(
            !shown.contains('/') && !shown.chars().any(char::is_control),
            "{shown}"
        );
    }
    assert_eq!(record(&records, "..").display_path(), "\\x2e\\x2e");
    assert_eq!(record(&records, "a/b").display_path(), "a\\x2fb");
    let l = record(&records, &long);
    assert!(
        l.errors.is_empty(),
        "255 characters is legal: {:?}",
        l.errors
    );
    let h = record(&records, &huge);
    assert!(has(&h.errors, ErrorKind::HostileName) && has(&h.errors, ErrorKind::LongName));
    let n = record(&records, "nul");
    assert!(has(&n.errors, ErrorKind::NameEncoding));
    let raw: Vec<u16> = n
        .raw_name
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(raw, units);
    witness_ok(&img, &records);
}

#[test]
fn fat_long_name_checksum_mismatch_and_orphan_pieces() {
    let mut f = fat16();
    let root = f.root();
    // Pieces made for another short name: checksum mismatch.
    for e in lfn_entries("Mismatched Name.txt", b"OTHER   TXT") {
        f.put_entry(root, e);
    }
    f.put_entry(root, short_entry(b"REAL    TXT", 0x20, 0, 0));
    // Orphan pieces: a sequence cut short, then a label.
    let pieces = lfn_entries("An orphan long name that is long.txt", b"ORPHAN  TXT");
    f.put_entry(root, pieces[0]);
    f.put_entry(root, short_entry(b"MYLABEL    ", 0x08, 0, 0));
    let img = f.finish();
    let (records, summary) = walk(&img);
    let real = record(&records, "REAL.TXT");
    assert!(has(&real.errors, ErrorKind::LongName), "{:?}", real.errors);
    assert!(has(&summary.errors.errors, ErrorKind::LongName));
    let label = record(&records, "MYLABEL    ");
    assert_eq!(label.kind, caseload_fs::FileKind::VolumeLabel);
    assert_eq!(label.tsk_name(), "MYLABEL     (Volume Label Entry)");
    witness_ok(&img, &records);
}

#[test]
fn fat_deleted_file_whose_first_cluster_was_reused() {
    let mut f = fat16();
    let root = f.root();
    let (first, off) = f.add_file(root, None, b"GONE    BIN", &[7u8; 1500]);
    f.delete(off, first);
    // Its first cluster now belongs to a live file.
    f.set_fat(first, 0xFFFF);
    f.put_entry(root, short_entry(b"NEWER   BIN", 0x20, first, 100));
    // A deleted entry whose start cluster is past the end is not an entry
    // (TSK's in-depth test drops it too).
    let mut e = short_entry(b"XFAR    BIN", 0x20, 60_000, 100);
    e[0] = 0xE5;
    f.put_entry(root, e);
    let img = f.finish();
    let (records, _) = walk(&img);
    let gone = record(&records, "_ONE.BIN");
    assert_eq!(gone.recovery, Recovery::Overwritten);
    assert!(has(&gone.errors, ErrorKind::Recovery));
    assert!(!gone.recoverable());
    assert!(!records.iter().any(|r| r.name == "_FAR.BIN"));
    witness_ok(&img, &records);
}

#[test]
fn fat_truncated_image_is_reported_and_walked_as_far_as_it_goes() {
    let mut f = fat16();
    let root = f.root();
    let far = f.alloc(10);
    f.add_file_in(root, None, b"FAR     BIN", &far, &[1u8; 10 * 512]);
    let mut img = f.finish();
    img.truncate(img.len() / 2);
    let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
    assert!(has(fs.open_errors(), ErrorKind::CorruptFileSystem));
    let (records, _) = walk_all(&fs);
    witness_ok(&img, &records);
}

// ---------------------------------------------------------------- NTFS

fn ntfs_base() -> Ntfs {
    let mut n = Ntfs::new(4096, 64);
    n.add_file(
        NTFS_ROOT,
        "witness.txt",
        NtfsData::Resident(WITNESS.to_vec()),
        vec![],
    );
    n
}

/// Byte offset of record `r` in a finished synthetic image.
fn rec_off(n: &Ntfs, r: u64) -> usize {
    n.mft_lcn as usize * synth::NTFS_CS + r as usize * NTFS_RS
}

/// Offset within a record of its attribute of type `ty`.
fn attr_off(rec: &[u8], ty: u32) -> usize {
    let mut off = usize::from(u16::from_le_bytes([rec[20], rec[21]]));
    loop {
        let t = u32::from_le_bytes(rec[off..off + 4].try_into().expect("4"));
        assert_ne!(t, 0xFFFF_FFFF, "attribute {ty:#x} not found");
        if t == ty {
            return off;
        }
        off += u32::from_le_bytes(rec[off + 4..off + 8].try_into().expect("4")) as usize;
    }
}

#[test]
fn ntfs_corrupt_record_is_reported_and_listed_by_name() {
    let mut n = ntfs_base();
    let bad = n.add_file(
        NTFS_ROOT,
        "torn.txt",
        NtfsData::Resident(b"x".to_vec()),
        vec![],
    );
    let off = rec_off(&n, bad);
    let mut img = n.finish();
    // Break the update sequence at the end of the first sector.
    img[off + 510] ^= 0xFF;
    let (records, _) = walk(&img);
    let torn = record(&records, "torn.txt");
    assert!(
        has(&torn.errors, ErrorKind::CorruptRecord),
        "{:?}",
        torn.errors
    );
    assert_eq!(torn.content, caseload_fs::Content::None);
    witness_ok(&img, &records);
}

#[test]
fn ntfs_attribute_lengths_that_do_not_fit() {
    let mut n = ntfs_base();
    let a = n.add_file(
        NTFS_ROOT,
        "short.txt",
        NtfsData::Resident(b"abc".to_vec()),
        vec![],
    );
    let b = n.add_file(
        NTFS_ROOT,
        "long.txt",
        NtfsData::Resident(b"abc".to_vec()),
        vec![],
    );
    let c = n.add_file(
        NTFS_ROOT,
        "value.txt",
        NtfsData::Resident(b"abc".to_vec()),
        vec![],
    );
    let (oa, ob, oc) = (rec_off(&n, a), rec_off(&n, b), rec_off(&n, c));
    let mut img = n.finish();
    // $DATA length below its header; length past the record; value outside.
    let d = attr_off(&img[oa..oa + NTFS_RS], 0x80);
    img[oa + d + 4..oa + d + 8].copy_from_slice(&8u32.to_le_bytes());
    let d = attr_off(&img[ob..ob + NTFS_RS], 0x80);
    img[ob + d + 4..ob + d + 8].copy_from_slice(&60_000u32.to_le_bytes());
    let d = attr_off(&img[oc..oc + NTFS_RS], 0x80);
    img[oc + d + 16..oc + d + 20].copy_from_slice(&5000u32.to_le_bytes());
    let (records, _) = walk(&img);
    for name in ["short.txt", "long.txt", "value.txt"] {
        let r = record(&records, name);
        assert!(
            has(&r.errors, ErrorKind::CorruptAttribute),
            "{name}: {:?}",
            r.errors
        );
        // The attributes before the damaged one are still read.
        assert!(r.times.modified.is_some(), "{name}");
    }
    witness_ok(&img, &records);
}

#[test]
fn ntfs_runs_outside_the_volume_and_absurd_sizes() {
    let mut n = ntfs_base();
    n.add_file(
        NTFS_ROOT,
        "outside.bin",
        NtfsData::Runs {
            runs: vec![(Some(100), 2), (Some(1_000_000), 4)],
            data_size: 6 * 512,
            init_size: 6 * 512,
        },
        vec![],
    );
    n.add_file(
        NTFS_ROOT,
        "huge.bin",
        NtfsData::Runs {
            runs: vec![(Some(100), 2)],
            data_size: 1 << 60,
            init_size: 1 << 60,
        },
        vec![],
    );
    let img = n.finish();
    let (records, _) = walk(&img);
    let o = record(&records, "outside.bin");
    assert!(
        has(&o.errors, ErrorKind::CorruptAttribute),
        "{:?}",
        o.errors
    );
    assert_eq!(o.content.len(), 2 * 512);
    let h = record(&records, "huge.bin");
    assert!(has(&h.errors, ErrorKind::AbsurdSize), "{:?}", h.errors);
    assert!(has(&h.errors, ErrorKind::ChainTooShort));
    witness_ok(&img, &records);
}

#[test]
fn ntfs_hostile_names_are_kept_raw_and_flagged() {
    let mut n = ntfs_base();
    for name in ["..", "a/b", "x\0y", "bell\u{7}", "../../../etc/shadow"] {
        n.add_file(NTFS_ROOT, name, NtfsData::Resident(b"1".to_vec()), vec![]);
    }
    n.add_file(
        NTFS_ROOT,
        "plain.txt",
        NtfsData::Resident(b"1".to_vec()),
        vec![("evil/\0stream", NtfsData::Resident(b"2".to_vec()))],
    );
    let img = n.finish();
    let (records, _) = walk(&img);
    for name in ["..", "a/b", "x\0y", "bell\u{7}", "../../../etc/shadow"] {
        let r = record(&records, name);
        assert!(has(&r.errors, ErrorKind::HostileName), "{name:?}");
        let shown = r.display_path();
        assert!(
            !shown.contains('/') && !shown.chars().any(char::is_control),
            "{shown}"
        );
    }
    assert_eq!(record(&records, "x\0y").display_path(), "x\\x00y");
    let s = records
        .iter()
        .find(|r| r.stream.as_deref() == Some("evil/\0stream"))
        .expect("stream");
    assert!(has(&s.errors, ErrorKind::HostileName));
    assert_eq!(s.display_path(), "plain.txt:evil\\x2f\\x00stream");
    witness_ok(&img, &records);
}

/// Offset of the entries of the root's `$I30` index root in the image.
fn root_index_entries(n: &Ntfs, img: &[u8]) -> usize {
    let o = rec_off(n, NTFS_ROOT);
    let a = attr_off(&img[o..o + NTFS_RS], 0x90);
    let voff = usize::from(u16::from_le_bytes([img[o + a + 20], img[o + a + 21]]));
    o + a + voff + 32
}

#[test]
fn ntfs_index_entry_of_length_zero_does_not_hang() {
    let mut n = ntfs_base();
    n.add_file(
        NTFS_ROOT,
        "zz-after.txt",
        NtfsData::Resident(b"z".to_vec()),
        vec![],
    );
    let probe = ntfs_base();
    let mut img = n.finish();
    let e = root_index_entries(&probe, &img);
    // The first entry (witness.txt sorts first) keeps its key; the second
    // gets length 0.
    let first_len = usize::from(u16::from_le_bytes([img[e + 8], img[e + 9]]));
    img[e + first_len + 8..e + first_len + 10].copy_from_slice(&0u16.to_le_bytes());
    let (records, summary) = walk(&img);
    assert!(
        has(&summary.errors.errors, ErrorKind::CorruptIndex),
        "{:?}",
        summary.errors
    );
    // The file the broken entry named is still found by the MFT scan.
    let z = record(&records, "zz-after.txt");
    assert!(has(&z.errors, ErrorKind::CorruptIndex));
    witness_ok(&img, &records);
}

#[test]
fn ntfs_directory_listing_an_ancestor() {
    let mut n = ntfs_base();
    let d = n.add_dir(NTFS_ROOT, "sub");
    n.add_file(d, "inner.txt", NtfsData::Resident(b"i".to_vec()), vec![]);
    let img = n.finish();
    // Rebuild with the subdirectory's index also naming the root: patch the
    // entry for inner.txt to point at record 5 (sequence 5).
    let mut n2 = ntfs_base();
    let d2 = n2.add_dir(NTFS_ROOT, "sub");
    n2.add_file(d2, "inner.txt", NtfsData::Resident(b"i".to_vec()), vec![]);
    let o = rec_off(&n2, d2);
    let mut img2 = n2.finish();
    let a = attr_off(&img2[o..o + NTFS_RS], 0x90);
    let voff = usize::from(u16::from_le_bytes([img2[o + a + 20], img2[o + a + 21]]));
    let e = o + a + voff + 32;
    img2[e..e + 8].copy_from_slice(&(5u64 | (5u64 << 48)).to_le_bytes());
    // The entry's key must say directory for the walk to descend.
    img2[e + 16 + 56..e + 16 + 60].copy_from_slice(&0x1000_0000u32.to_le_bytes());
    let (records, summary) = walk(&img2);
    assert!(
        has(&summary.errors.errors, ErrorKind::DirectoryLoop),
        "{:?}",
        summary.errors
    );
    witness_ok(&img2, &records);
    let (records, _) = walk(&img);
    assert!(records.iter().any(|r| r.path() == "sub/inner.txt"));
}

#[test]
fn ntfs_deleted_records_with_looping_parents_become_orphans() {
    let mut n = ntfs_base();
    let a = n.add_dir(NTFS_ROOT, "a");
    let b = n.add_dir(a, "b");
    let f = n.add_file(b, "lost.txt", NtfsData::Resident(b"l".to_vec()), vec![]);
    n.delete(f);
    let (ra, rb) = (rec_off(&n, a), rec_off(&n, b));
    let mut img = n.finish();
    // Make a's parent b and b's parent a, both deleted (sequence bumped).
    for (off, parent) in [(ra, b), (rb, a)] {
        let fa = attr_off(&img[off..off + NTFS_RS], 0x30);
        let voff = usize::from(u16::from_le_bytes([img[off + fa + 20], img[off + fa + 21]]));
        img[off + fa + voff..off + fa + voff + 8]
            .copy_from_slice(&(parent | (1u64 << 48)).to_le_bytes());
        img[off + 22] &= !1;
        img[off + 16] = 2;
    }
    let (records, summary) = walk(&img);
    assert!(
        has(&summary.errors.errors, ErrorKind::DirectoryLoop),
        "{:?}",
        summary.errors
    );
    let lost = record(&records, "lost.txt");
    assert!(lost.deleted());
    assert!(lost.path().starts_with("$OrphanFiles/"), "{}", lost.path());
    witness_ok(&img, &records);
}

#[test]
fn ntfs_broken_mft_record_zero_is_an_error_not_a_panic() {
    let n = ntfs_base();
    let off = rec_off(&n, 0);
    let mut img = n.finish();
    img[off..off + 4].copy_from_slice(b"JUNK");
    assert!(open_filesystem(&img[..], 0, img.len() as u64).is_err());
}

// ---------------------------------------------------------------- fuzz

#[test]
fn fuzzed_fat_images_never_panic() {
    for kind in [FatType::Fat12, FatType::Fat16, FatType::Fat32] {
        let (sectors, spc) = match kind {
            FatType::Fat12 => (4096, 1),
            FatType::Fat16 => (20_000, 1),
            FatType::Fat32 => (70_000, 1),
        };
        let mut f = Fat::new(kind, sectors, spc);
        let root = f.root();
        f.add_file(
            root,
            Some("Long Name One.txt"),
            b"LONGNA~1TXT",
            &[1u8; 3000],
        );
        let d = f.add_dir(root, Some("A Directory"), b"ADIREC~1   ");
        let e = f.add_dir(d, None, b"SUB        ");
        let (c, off) = f.add_file(e, None, b"GONE    BIN", &[2u8; 1500]);
        f.delete(off, c);
        f.add_file(e, Some("kept.bin"), b"KEPT    BIN", &[3u8; 700]);
        let meta_end = (f.first_cluster_sector + 12 * spc) * 512;
        let img = f.finish();
        fuzz(
            &img,
            &[(0, 512), (512, meta_end - 512)],
            0x5EED ^ kind as u64,
            1500,
        );
    }
}

#[test]
fn fuzzed_ntfs_images_never_panic() {
    let mut n = ntfs_base();
    n.add_file(
        NTFS_ROOT,
        "data.bin",
        NtfsData::NonResident(vec![9u8; 5000]),
        vec![("ads", NtfsData::Resident(b"s".to_vec()))],
    );
    let d = n.add_dir(NTFS_ROOT, "dir");
    for i in 0..12 {
        n.add_file(
            d,
            &format!("f{i}.txt"),
            NtfsData::Resident(vec![i; 10]),
            vec![],
        );
    }
    let g = n.add_file(
        d,
        "gone.txt",
        NtfsData::NonResident(vec![7u8; 2000]),
        vec![],
    );
    n.delete(g);
    let text: Vec<u8> = (0..3000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
    n.add_file(d, "packed.bin", NtfsData::Compressed(text), vec![]);
    let mft = (n.mft_lcn as usize * synth::NTFS_CS, 64 * NTFS_RS);
    // File data and index blocks follow the MFT.
    let data = (mft.0 + mft.1, 64 * 1024);
    let img = n.finish();
    fuzz(&img, &[(0, 512), mft, data], 0xF00D, 2000);
}
