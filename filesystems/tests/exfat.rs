//! exFAT: crafted images built in memory (known content, hostile and
//! damaged cases, mutations), and images made by `mkfs.exfat` and filled
//! through `exfat-fuse`, compared entry by entry with The Sleuth Kit's
//! `fls -r -m` and `icat`. Tools, root, `/dev/fuse` and loop devices are
//! optional: each part prints `SKIPPED ...` when what it needs is absent.

mod support;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;

use caseload_fs::{
    Content, ErrorKind, ExfatFs, FileKind, FileRecord, FileSystem, FsKind, Recovery, Run, TimeBase,
    WalkSummary, open_filesystem, open_volume_system,
};
use support::exfat_synth::{EX_UNIX, Exfat, entry_set, seal};
use support::*;

const WITNESS: &[u8] = b"the rest of the file system is still read";

use support::filler as bytes;

fn units(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

fn walk(img: &[u8]) -> (Vec<FileRecord>, WalkSummary) {
    let fs = open_filesystem(img, 0, img.len() as u64).expect("open");
    assert_eq!(fs.kind(), FsKind::ExFat);
    walk_all(&fs)
}

fn has(errors: &[caseload_fs::ProcessingError], kind: ErrorKind) -> bool {
    errors.iter().any(|e| e.kind == kind)
}

fn record<'a>(records: &'a [FileRecord], path: &str) -> &'a FileRecord {
    records
        .iter()
        .find(|r| r.path() == path)
        .unwrap_or_else(|| panic!("{path} not listed"))
}

/// The witness file is listed with its bytes and no error.
fn witness_ok(img: &[u8], records: &[FileRecord]) {
    let w = record(records, "witness.txt");
    assert_eq!(md5_of(img, w), md5_bytes(WITNESS));
    assert!(w.errors.is_empty(), "{:?}", w.errors);
}

/// A small volume (4 MiB, 512-byte clusters) holding the witness file.
fn base() -> Exfat {
    let mut x = Exfat::new(8192, 1);
    let root = x.root;
    x.add_file(root, "witness.txt", WITNESS);
    x
}

fn write_temp(img: &[u8]) -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut t = tempfile::NamedTempFile::new().expect("temp file");
    t.write_all(img).expect("write image");
    t.flush().expect("flush");
    t
}

/// The MD5 TSK's content gives once the bytes past the valid data length
/// are zeroed (the one deliberate content difference), or the oracle's.
fn md5_allowing_valid_length(image: &Path, r: &FileRecord, l: &BodyLine) -> String {
    let zeros = match &r.content {
        Content::Runs(runs) => match runs.last() {
            Some(Run::Zeros { len }) => *len,
            _ => 0,
        },
        _ => 0,
    };
    if zeros == 0 {
        return l.md5.clone();
    }
    let out = Command::new("icat")
        .arg(image)
        .arg(&l.inode)
        .output()
        .expect("icat");
    let mut b = out.stdout;
    let keep = b.len().saturating_sub(usize::try_from(zeros).expect("len"));
    b[keep..].fill(0);
    md5_bytes(&b)
}

/// Walks `img` and compares every entry with TSK's `fls`/`icat`, when they
/// are installed.
fn compare_with_tsk(test: &str, img: &[u8], records: &[FileRecord]) {
    if !(have_tool(test, "fls") && have_tool(test, "icat")) {
        return;
    }
    let file = write_temp(img);
    let lines = live_bodyfile(file.path(), 0).expect("fls");
    let failures = compare_every_line(img, records, &lines, &|r, l| {
        md5_allowing_valid_length(file.path(), r, l)
    });
    assert!(
        failures.is_empty(),
        "{test}: {} differences with TSK:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------- crafted

/// What the crafted sample holds: path -> (content, deleted).
type Expected = BTreeMap<String, (Vec<u8>, bool)>;

/// A volume with contiguous and chained files, a directory whose clusters
/// are not adjacent (an entry set straddles them), non-ASCII and long
/// names, a stream valid only to part of its length, deleted files (one
/// recoverable, one whose first cluster was reused), a deleted directory,
/// and orphans: a deleted set in a free cluster, and a deleted directory
/// in a free cluster whose own cluster holds a deleted file.
fn sample() -> (Vec<u8>, Expected) {
    let mut x = Exfat::new(8192, 1);
    let cs = x.cluster_size();
    let root = x.root;
    let mut exp = Expected::new();
    let mut add = |x: &mut Exfat, dir: u32, path: &str, name: &str, data: Vec<u8>| {
        x.add_file(dir, name, &data);
        exp.insert(path.to_string(), (data, false));
    };
    add(&mut x, root, "Read Me.txt", "Read Me.txt", bytes(1, 3000));
    add(&mut x, root, "one", "one", bytes(2, 1));
    add(&mut x, root, "empty", "empty", Vec::new());
    add(&mut x, root, "cluster", "cluster", bytes(3, cs));
    add(&mut x, root, "é日本.txt", "é日本.txt", bytes(4, cs + 1));
    let long = "a name that needs three name entries.bin";
    add(&mut x, root, long, long, bytes(5, cs - 1));
    // A FAT-chained directory in two clusters with a gap between them, and
    // six three-entry sets: the sixth starts in the first cluster's last
    // slot.
    let d1 = x.alloc(1);
    x.skip(2);
    let d2 = x.alloc(1);
    let dirc = [d1[0], d2[0]];
    x.link(&dirc);
    let size = (2 * cs) as u64;
    let set = entry_set(&units("Chained Dir"), 0x10, dirc[0], size, size, false);
    x.put_set(root, &set);
    x.loose_dir(dirc.to_vec());
    for i in 0..7 {
        let name = format!("in dir {i}");
        add(
            &mut x,
            dirc[0],
            &format!("Chained Dir/{name}"),
            &name,
            bytes(10 + i, 100 + i as usize),
        );
    }
    // A file in three fragments.
    let frag = bytes(20, 3 * cs + 77);
    let a = x.alloc(1);
    x.skip(1);
    let b = x.alloc(2);
    x.skip(3);
    let c = x.alloc(1);
    let chain: Vec<u32> = [a, b, c].concat();
    x.add_file_chained(root, "fragmented.dat", &frag, &chain);
    exp.insert("fragmented.dat".into(), (frag, false));
    // Valid for 700 of its 2000 bytes: the rest reads as zeros.
    let half = bytes(21, 2000);
    let cl = x.alloc(4);
    x.write_data(&cl, &half);
    let set = entry_set(&units("halfvalid.bin"), 0x20, cl[0], 2000, 700, true);
    x.put_set(root, &set);
    let mut shown = half[..700].to_vec();
    shown.resize(2000, 0);
    exp.insert("halfvalid.bin".into(), (shown, false));
    // Deleted, contiguous and still free: recoverable.
    let gone = bytes(22, 2 * cs + 9);
    let p = x.add_file(root, "deleted.doc", &gone);
    x.delete(p.offset);
    exp.insert("deleted.doc".into(), (gone, true));
    // Deleted, its first cluster since taken by another file.
    let p = x.add_file(root, "reused.doc", &bytes(23, 2 * cs));
    x.delete(p.offset);
    x.claim(&[p.first]);
    let mut taker = bytes(24, cs);
    x.write_data(&[p.first], &taker);
    let set = entry_set(&units("taker"), 0x20, p.first, cs as u64, cs as u64, true);
    x.put_set(root, &set);
    exp.insert("taker".into(), (taker.clone(), false));
    taker.truncate(cs);
    exp.insert("reused.doc".into(), (taker, true));
    // A deleted directory with a file in it.
    let old = x.add_dir(root, "old dir");
    let dir_entry = x.last.offset;
    let inner = bytes(25, 333);
    let p = x.add_file(old, "inner.txt", &inner);
    x.delete(p.offset);
    x.delete(dir_entry);
    exp.insert("old dir".into(), (Vec::new(), true));
    exp.insert("old dir/inner.txt".into(), (inner, true));
    // Orphans: a deleted set alone in a free cluster...
    let lost_data = bytes(26, 600);
    let lc = x.alloc(2);
    x.write_data(&lc, &lost_data);
    let holder = x.alloc(1);
    x.loose_dir(holder.clone());
    let set = entry_set(&units("lost.txt"), 0x20, lc[0], 600, 600, true);
    let p = x.put_set(holder[0], &set);
    x.delete(p.offset);
    x.used[holder[0] as usize] = false;
    exp.insert("$OrphanFiles/lost.txt".into(), (lost_data, true));
    // ...and a deleted directory in a free cluster, holding a deleted file.
    let holder2 = x.alloc(1);
    x.loose_dir(holder2.clone());
    let od = x.alloc(1);
    x.loose_dir(od.clone());
    let set = entry_set(&units("lost dir"), 0x10, od[0], cs as u64, cs as u64, true);
    let p = x.put_set(holder2[0], &set);
    let in_lost = bytes(27, 50);
    let q = x.add_file(od[0], "in lost dir.txt", &in_lost);
    x.delete(q.offset);
    x.delete(p.offset);
    x.used[holder2[0] as usize] = false;
    exp.insert("$OrphanFiles/lost dir".into(), (Vec::new(), true));
    exp.insert(
        "$OrphanFiles/lost dir/in lost dir.txt".into(),
        (in_lost, true),
    );
    (x.finish(), exp)
}

fn check_expected(img: &[u8], records: &[FileRecord], exp: &Expected) {
    for (path, (data, deleted)) in exp {
        let r = record(records, path);
        assert_eq!(r.deleted(), *deleted, "{path}");
        if r.kind == FileKind::File {
            assert_eq!(md5_of(img, r), md5_bytes(data), "{path}: {:?}", r.content);
            // An overwritten file keeps its size; one cluster is shown.
            if r.recovery != Recovery::Overwritten {
                assert_eq!(r.size, data.len() as u64, "{path}");
            }
        }
    }
}

#[test]
fn crafted_volume_lists_every_name_size_state_and_byte() {
    let (img, exp) = sample();
    let vs = open_volume_system(&img).expect("volume system");
    assert_eq!(vs.partitions[0].filesystem, FsKind::ExFat);
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    let FileSystem::ExFat(x) = &fs else {
        panic!("not exFAT")
    };
    assert_eq!(x.label(), Some("SYNTH"));
    let (records, summary) = walk_all(&fs);
    assert!(summary.errors.is_empty(), "{:#?}", summary.errors);
    check_expected(&img, &records, &exp);
    // Live entries carry no error; TSK's names for the metadata files.
    for r in records.iter().filter(|r| r.allocated) {
        assert!(r.errors.is_empty(), "{}: {:?}", r.path(), r.errors);
    }
    let label = record(&records, "SYNTH (Volume Label Entry)");
    assert_eq!(label.kind, FileKind::VolumeLabel);
    for name in [
        "$ALLOC_BITMAP",
        "$UPCASE_TABLE",
        "$MBR",
        "$FAT1",
        "$OrphanFiles",
    ] {
        record(&records, name);
    }
    let f = record(&records, "Read Me.txt");
    assert_eq!(f.time_base, TimeBase::Utc);
    assert_eq!(f.times.modified.expect("mtime").secs, EX_UNIX);
    assert_eq!(f.times.changed, None);
    assert_eq!(
        f.raw_name,
        units("Read Me.txt")
            .iter()
            .flat_map(|u| u.to_le_bytes())
            .collect::<Vec<u8>>()
    );
    assert_eq!(
        record(&records, "reused.doc").recovery,
        Recovery::Overwritten
    );
    assert_eq!(
        record(&records, "deleted.doc").recovery,
        Recovery::Unallocated
    );
    assert_eq!(f.slack.len(), 1);
    // The crafted volume lists under TSK exactly as here.
    compare_with_tsk(
        "crafted_volume_lists_every_name_size_state_and_byte",
        &img,
        &records,
    );
}

#[test]
fn orphan_search_can_be_turned_off() {
    let (img, _) = sample();
    let mut fs = ExfatFs::open(&img[..], 0, img.len() as u64).expect("open");
    fs.set_orphan_search(false);
    let mut orphans = 0;
    fs.walk(|r| {
        if r.parent.first().is_some_and(|p| p == "$OrphanFiles") {
            orphans += 1;
        }
        ControlFlow::Continue(())
    })
    .expect("walk");
    assert_eq!(orphans, 0);
}

#[test]
fn unallocated_runs_are_the_free_clusters_and_the_tail() {
    let (img, _) = sample();
    let fs = ExfatFs::open(&img[..], 0, img.len() as u64).expect("open");
    let mut runs = Vec::new();
    fs.unallocated_runs(|e| runs.push(e)).expect("runs");
    assert!(!runs.is_empty());
    for w in runs.windows(2) {
        assert!(w[0].offset + w[0].len < w[1].offset, "{runs:?}");
    }
    let last = runs.last().expect("run");
    assert_eq!(last.offset + last.len, img.len() as u64);
    let test = "unallocated_runs_are_the_free_clusters_and_the_tail";
    if have_tool(test, "blkls") {
        let file = write_temp(&img);
        let tsk = blkls_unallocated(file.path(), 0).expect("blkls");
        let ours: std::collections::BTreeSet<u64> = runs
            .iter()
            .flat_map(|e| e.offset / 512..(e.offset + e.len) / 512)
            .collect();
        assert!(ours == tsk, "unallocated sectors differ from blkls");
    }
}

// ---------------------------------------------------------------- hostile

#[test]
fn corrupted_boot_checksum_is_reported_not_fatal() {
    let mut img = base().finish();
    img[700] ^= 0x40; // inside the checksummed extended boot sectors
    let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
    let e = fs
        .open_errors()
        .iter()
        .find(|e| e.kind == ErrorKind::ChecksumMismatch)
        .expect("checksum error");
    assert_eq!(e.offset, Some(11 * 512));
    assert!(
        e.detail.contains("backup boot region's checksum holds"),
        "{e}"
    );
    let (records, summary) = walk_all(&fs);
    assert!(has(&summary.errors.errors, ErrorKind::ChecksumMismatch));
    witness_ok(&img, &records);
    // Both regions damaged.
    img[12 * 512 + 700] ^= 0x40;
    let fs = ExfatFs::open(&img[..], 0, img.len() as u64).expect("open");
    assert!(fs.open_errors()[0].detail.contains("fails too"));
}

#[test]
fn wrong_set_checksum_names_the_entry_offset_and_the_rest_is_walked() {
    let mut x = base();
    let root = x.root;
    let p = x.add_file(root, "tampered.txt", b"tampered");
    x.add_file(root, "after.txt", b"after");
    let mut img = x.finish();
    img[p.offset + 32 + 24] ^= 1; // the data length, checksum left stale
    let (records, _) = walk(&img);
    let r = record(&records, "tampered.txt");
    let e = r
        .errors
        .iter()
        .find(|e| e.kind == ErrorKind::ChecksumMismatch)
        .expect("set checksum error");
    assert_eq!(e.offset, Some(p.offset as u64));
    assert_eq!(r.size, 9);
    record(&records, "after.txt");
    witness_ok(&img, &records);
}

#[test]
fn name_hash_mismatch_is_reported() {
    let mut x = base();
    let root = x.root;
    let mut set = entry_set(&units("hashed.txt"), 0x20, 0, 0, 0, true);
    set[1][4] ^= 0xFF;
    seal(&mut set);
    x.put_set(root, &set);
    let img = x.finish();
    let (records, _) = walk(&img);
    let r = record(&records, "hashed.txt");
    assert!(
        has(&r.errors, ErrorKind::ChecksumMismatch),
        "{:?}",
        r.errors
    );
    witness_ok(&img, &records);
}

#[test]
fn looping_fat_chain_is_cut_and_reported() {
    let mut x = base();
    let root = x.root;
    let c = x.alloc(2);
    let data = bytes(30, 5 * 512);
    x.write_data(&c, &data[..1024]);
    let set = entry_set(
        &units("loop.bin"),
        0x20,
        c[0],
        data.len() as u64,
        data.len() as u64,
        false,
    );
    x.put_set(root, &set);
    x.fat[c[0] as usize] = c[1];
    x.fat[c[1] as usize] = c[0];
    // A looping directory chain too.
    let d = x.alloc(1);
    x.fat[d[0] as usize] = d[0];
    let set = entry_set(&units("loopdir"), 0x10, d[0], 4096, 4096, false);
    x.put_set(root, &set);
    let img = x.finish();
    let (records, _) = walk(&img);
    let r = record(&records, "loop.bin");
    assert!(has(&r.errors, ErrorKind::ChainLoop), "{:?}", r.errors);
    assert_eq!(r.content.len(), 1024);
    let d = record(&records, "loopdir");
    assert!(has(&d.errors, ErrorKind::ChainLoop), "{:?}", d.errors);
    witness_ok(&img, &records);
}

#[test]
fn cluster_numbers_past_the_end_are_reported() {
    let mut x = base();
    let root = x.root;
    let past = x.cluster_count + 10;
    // First cluster past the heap: TSK's stream test rejects the entry, so
    // the set has no name; a live one is reported on the walk.
    let set = entry_set(&units("past.bin"), 0x20, past, 100, 100, true);
    x.put_set(root, &set);
    // A contiguous run that starts inside and ends past the heap.
    let near = x.cluster_count; // second-to-last cluster
    let set = entry_set(&units("overhang.bin"), 0x20, near, 4 * 512, 4 * 512, true);
    x.put_set(root, &set);
    // A chain that links past the heap.
    let c = x.alloc(1);
    x.fat[c[0] as usize] = past;
    let set = entry_set(&units("badlink.bin"), 0x20, c[0], 3 * 512, 3 * 512, false);
    x.put_set(root, &set);
    let img = x.finish();
    let (records, summary) = walk(&img);
    assert!(records.iter().all(|r| r.name != "past.bin"));
    assert!(
        summary
            .errors
            .errors
            .iter()
            .any(|e| e.detail.contains("no name entry")),
        "{:#?}",
        summary.errors
    );
    let r = record(&records, "overhang.bin");
    assert!(has(&r.errors, ErrorKind::ChainOutOfRange), "{:?}", r.errors);
    assert_eq!(r.content.len(), 2 * 512);
    let r = record(&records, "badlink.bin");
    assert!(has(&r.errors, ErrorKind::ChainOutOfRange), "{:?}", r.errors);
    witness_ok(&img, &records);
}

#[test]
fn truncated_images_are_reported_and_walked_as_far_as_they_go() {
    let mut x = base();
    let root = x.root;
    let far = x.alloc(4050);
    let tail_data = bytes(31, 512);
    x.write_data(&far[4049..], &tail_data);
    let set = entry_set(&units("far.bin"), 0x20, far[4049], 512, 512, true);
    x.put_set(root, &set);
    let img = x.finish();
    let cut = &img[..img.len() / 2];
    let fs = open_filesystem(cut, 0, cut.len() as u64).expect("open");
    assert!(
        fs.open_errors()[0].detail.contains("only"),
        "{:?}",
        fs.open_errors()
    );
    let (records, _) = walk_all(&fs);
    witness_ok(cut, &records);
    let far = record(&records, "far.bin");
    assert!(far.content.is_empty());
    // Cut inside the boot region: opens, the checksum cannot be checked.
    let cut = &img[..4096];
    let fs = open_filesystem(cut, 0, cut.len() as u64).expect("open");
    assert!(has(fs.open_errors(), ErrorKind::ChecksumMismatch));
    let _ = walk_all(&fs);
    // Cut inside the boot sector: a clear error.
    let cut = &img[..100];
    assert!(ExfatFs::open(cut, 0, cut.len() as u64).is_err());
}

#[test]
fn name_length_past_the_entries_and_sets_past_the_directory() {
    let mut x = base();
    let root = x.root;
    let mut set = entry_set(&units("short"), 0x20, 0, 0, 0, true);
    set[1][3] = 40; // 40 units claimed, one name entry present
    seal(&mut set);
    x.put_set(root, &set);
    // A set whose File entry counts more entries than the directory holds.
    let d = x.add_dir(root, "small dir");
    let per = x.cluster_size() / 32;
    x.skip_slots(d, per - 3);
    let mut set = entry_set(&units("cut off"), 0x20, 0, 0, 0, true);
    set[0][1] = 5;
    seal(&mut set);
    x.put_set(d, &set);
    let img = x.finish();
    let (records, _) = walk(&img);
    let r = record(&records, "short");
    assert!(has(&r.errors, ErrorKind::LongName), "{:?}", r.errors);
    let r = record(&records, "small dir/cut off");
    assert!(
        r.errors
            .iter()
            .any(|e| e.detail.contains("past the end of the directory")),
        "{:?}",
        r.errors
    );
    witness_ok(&img, &records);
}

#[test]
fn directories_that_contain_themselves_are_not_reentered() {
    let mut x = base();
    let root = x.root;
    let d = x.add_dir(root, "selfish");
    let set = entry_set(&units("me again"), 0x10, d, 512, 512, true);
    x.put_set(d, &set);
    let set = entry_set(&units("root again"), 0x10, root, 512, 512, false);
    x.put_set(d, &set);
    let img = x.finish();
    let (records, summary) = walk(&img);
    assert!(
        has(&summary.errors.errors, ErrorKind::DirectoryLoop),
        "{:#?}",
        summary.errors
    );
    record(&records, "selfish/me again");
    assert!(records.iter().all(|r| r.parent.len() < 3));
    witness_ok(&img, &records);
}

#[test]
fn missing_bitmap_and_damaged_upcase_table_are_open_errors() {
    let x = base();
    let up = x.cluster_offset(x.upcase_cluster);
    let root_off = x.cluster_offset(x.root);
    let mut img = x.finish();
    img[up + 4] ^= 1;
    let fs = ExfatFs::open(&img[..], 0, img.len() as u64).expect("open");
    assert!(
        has(fs.open_errors(), ErrorKind::ChecksumMismatch),
        "{:?}",
        fs.open_errors()
    );
    img[up + 4] ^= 1;
    img[root_off + 32] = 0; // the allocation bitmap entry
    let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
    assert!(fs.open_errors()[0].detail.contains("allocation bitmap"));
    let (records, _) = walk_all(&fs);
    witness_ok(&img, &records);
    let mut free = 0;
    fs.unallocated_runs(|_| free += 1).expect("runs");
    assert_eq!(free, 0);
}

#[test]
fn hostile_names_are_kept_raw_and_flagged() {
    let mut x = base();
    let root = x.root;
    for name in ["../../etc/passwd", "a\0b", ".."] {
        let set = entry_set(&units(name), 0x20, 0, 0, 0, true);
        x.put_set(root, &set);
    }
    let set = entry_set(&[0x61, 0xD800, 0x62], 0x20, 0, 0, 0, true);
    x.put_set(root, &set);
    let img = x.finish();
    let (records, _) = walk(&img);
    for name in ["../../etc/passwd", ".."] {
        let r = records.iter().find(|r| r.name == name).expect(name);
        assert!(
            has(&r.errors, ErrorKind::HostileName),
            "{name}: {:?}",
            r.errors
        );
        assert!(!r.display_path().contains('/'));
    }
    // A name ends at its first NUL; what follows is reported, and kept raw.
    let r = records.iter().find(|r| r.name == "a").expect("a");
    assert!(has(&r.errors, ErrorKind::NameEncoding), "{:?}", r.errors);
    assert_eq!(r.raw_name, vec![b'a', 0, 0, 0, b'b', 0]);
    let r = records
        .iter()
        .find(|r| r.name == "a\u{FFFD}b")
        .expect("surrogate");
    assert!(has(&r.errors, ErrorKind::NameEncoding));
    assert_eq!(r.raw_name, vec![0x61, 0, 0x00, 0xD8, 0x62, 0]);
    witness_ok(&img, &records);
}

#[test]
fn utc_offsets_and_ten_millisecond_fields() {
    let mut x = base();
    let root = x.root;
    let mut set = entry_set(&units("east.txt"), 0x20, 0, 0, 0, true);
    set[0][20] = 150; // created 1.5 s later
    set[0][22] = 0x80 | 8; // +2 h
    set[0][23] = 0x80 | 8;
    set[0][24] = 0x80 | 8;
    seal(&mut set);
    x.put_set(root, &set);
    let mut set = entry_set(&units("unknown zone.txt"), 0x20, 0, 0, 0, true);
    set[0][23] = 0x08; // one offset not valid: the wall clock is kept
    seal(&mut set);
    x.put_set(root, &set);
    let mut set = entry_set(&units("west.txt"), 0x20, 0, 0, 0, true);
    set[0][22] = 0x80 | 0x7C; // -1 h
    set[0][23] = 0x80 | 0x7C;
    set[0][24] = 0x80 | 0x7C;
    seal(&mut set);
    x.put_set(root, &set);
    let img = x.finish();
    let (records, _) = walk(&img);
    let east = record(&records, "east.txt");
    assert_eq!(east.time_base, TimeBase::Utc);
    let created = east.times.created.expect("created");
    assert_eq!(created.secs, EX_UNIX + 1 - 7200);
    assert_eq!(created.nanos, 500_000_000);
    assert_eq!(east.times.modified.expect("m").secs, EX_UNIX - 7200);
    let unknown = record(&records, "unknown zone.txt");
    assert_eq!(unknown.time_base, TimeBase::LocalWallClock);
    assert_eq!(unknown.times.modified.expect("m").secs, EX_UNIX);
    let west = record(&records, "west.txt");
    assert_eq!(west.times.accessed.expect("a").secs, EX_UNIX + 3600);
}

#[test]
fn absurd_sizes_and_bad_valid_lengths() {
    let mut x = base();
    let root = x.root;
    let c = x.alloc(1);
    let set = entry_set(&units("valid past size"), 0x20, c[0], 100, 5000, true);
    x.put_set(root, &set);
    let set = entry_set(&units("huge"), 0x20, 2, u64::MAX, u64::MAX, true);
    x.put_set(root, &set);
    let img = x.finish();
    let (records, _) = walk(&img);
    let r = record(&records, "valid past size");
    assert!(has(&r.errors, ErrorKind::AbsurdSize));
    assert_eq!(r.content.len(), 100);
    // TSK's stream test rejects a stream larger than the heap.
    assert!(records.iter().all(|r| r.name != "huge"));
    witness_ok(&img, &records);
}

#[test]
fn fuzzed_exfat_images_never_panic() {
    let (img, _) = sample();
    let x = Exfat::new(8192, 1);
    let fat = x.fat_offset * 512;
    let heap = x.heap_offset * 512;
    // Boot region, FAT, and the first 80 clusters (metadata, root and the
    // directories).
    fuzz(
        &img,
        &[(0, 12 * 512), (fat, 512), (heap, 80 * 512)],
        0xE8FA7,
        600,
    );
}

// ---------------------------------------------------------------- mkfs + fuse

/// Whether the mkfs + FUSE tests can run here, with a notice if not.
fn can_mount(test: &str) -> bool {
    match Command::new("id").arg("-u").output() {
        Ok(o) if String::from_utf8_lossy(&o.stdout).trim() == "0" => {}
        Ok(_) => {
            eprintln!("SKIPPED {test}: not root (mounting needs root)");
            return false;
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: cannot tell whether this is root (`id -u`: {e})");
            return false;
        }
    }
    if !Path::new("/dev/fuse").exists() {
        eprintln!("SKIPPED {test}: no /dev/fuse");
        return false;
    }
    ["mkfs.exfat", "mount.exfat-fuse", "losetup", "umount"]
        .iter()
        .all(|t| have_tool(test, t))
}

/// A volume mounted with exfat-fuse through a loop device; unmounted and
/// detached on drop, also when a test fails half-way.
struct FuseMount {
    dir: PathBuf,
    loop_dev: Option<String>,
    mounted: bool,
}

impl FuseMount {
    /// Attaches `image` to a loop device (exfat-fuse run as root mounts
    /// block devices only) and mounts it on `dir`. `Err` says why not.
    fn new(image: &Path, dir: &Path) -> Result<FuseMount, String> {
        let mut m = FuseMount {
            dir: dir.to_path_buf(),
            loop_dev: None,
            mounted: false,
        };
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(image)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        m.loop_dev = Some(dev.clone());
        let out = Command::new("mount.exfat-fuse")
            .env("TZ", "UTC")
            .arg(&dev)
            .arg(dir)
            .output()
            .map_err(|e| format!("mount.exfat-fuse: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount.exfat-fuse: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        m.mounted = true;
        Ok(m)
    }

    /// Unmounts (which makes exfat-fuse write everything back) and
    /// detaches the loop device.
    fn release(&mut self) {
        if self.mounted {
            let ok = ["fusermount", "fusermount3"].iter().any(|t| {
                Command::new(t)
                    .arg("-u")
                    .arg(&self.dir)
                    .status()
                    .is_ok_and(|s| s.success())
            }) || Command::new("umount")
                .arg(&self.dir)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            }
            self.mounted = false;
        }
        if let Some(dev) = self.loop_dev.take() {
            let _ = Command::new("losetup").arg("-d").arg(&dev).status();
        }
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        self.release();
    }
}

/// What a mounted volume was filled with: live files (path -> content) and
/// deleted names.
struct Filled {
    live: BTreeMap<String, Vec<u8>>,
    deleted: Vec<String>,
}

/// Fills a mounted volume: nested folders, a folder of hundreds of
/// entries, files of sizes 0, 1, cluster-1, cluster, cluster+1 and several
/// MiB, fragmented files (a file appended past a neighbour, two files
/// written in turns), a deleted file's clusters taken by a new one,
/// non-ASCII names, a directory grown in pieces, and deletions (files, and
/// directories with `rm -r`).
fn fill(mnt: &Path, cs: usize) -> Filled {
    use std::io::Write;
    let mut live = BTreeMap::new();
    let mut deleted = Vec::new();
    let put = |rel: &str, data: Vec<u8>, live: &mut BTreeMap<String, Vec<u8>>| {
        let p = mnt.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, &data).expect("write");
        live.insert(rel.to_string(), data);
    };
    put("nested/a/b/c/deep.txt", bytes(1, 777), &mut live);
    put("nested/a/side.bin", bytes(2, 3 * cs), &mut live);
    for (i, len) in [0, 1, cs - 1, cs, cs + 1, 5 * 1024 * 1024 + 3]
        .into_iter()
        .enumerate()
    {
        put(
            &format!("sizes/size-{len}"),
            bytes(10 + i as u32, len),
            &mut live,
        );
    }
    for i in 0..300u32 {
        put(
            &format!("many/file number {i:03}.txt"),
            bytes(100 + i, (i as usize * 37) % 3000),
            &mut live,
        );
    }
    put("é.txt", bytes(3, 1234), &mut live);
    put("日本/語 ファイル.txt", bytes(4, 4321), &mut live);
    // Fragmentation: A, B, C in a row; A deleted, B grown past C. (No
    // entry is made in a directory after a deletion in it: exfat-fuse would
    // reuse the deleted entry's slots.)
    put("frag/A", bytes(5, 3 * cs), &mut live);
    put("frag/B", bytes(6, 3 * cs), &mut live);
    put("frag/C", bytes(7, cs), &mut live);
    std::fs::remove_file(mnt.join("frag/A")).expect("rm A");
    live.remove("frag/A");
    deleted.push("frag/A".to_string());
    let more = bytes(8, 5 * cs + 11);
    std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("frag/B"))
        .expect("open B")
        .write_all(&more)
        .expect("append");
    live.get_mut("frag/B").expect("B").extend_from_slice(&more);
    // Two files written a cluster at a time in turns.
    {
        std::fs::create_dir(mnt.join("turns")).expect("mkdir");
        let mut x = std::fs::File::create(mnt.join("turns/X")).expect("X");
        let mut y = std::fs::File::create(mnt.join("turns/Y")).expect("Y");
        let (dx, dy) = (bytes(9, 6 * cs), bytes(10, 6 * cs));
        for k in 0..6 {
            x.write_all(&dx[k * cs..(k + 1) * cs]).expect("x");
            x.sync_all().expect("sync");
            y.write_all(&dy[k * cs..(k + 1) * cs]).expect("y");
            y.sync_all().expect("sync");
        }
        live.insert("turns/X".into(), dx);
        live.insert("turns/Y".into(), dy);
    }
    // A deleted file whose clusters a new file (elsewhere) may take.
    put("reuse/old.bin", bytes(11, 2 * cs), &mut live);
    std::fs::remove_file(mnt.join("reuse/old.bin")).expect("rm");
    live.remove("reuse/old.bin");
    deleted.push("reuse/old.bin".into());
    put("reused/new.bin", bytes(12, 2 * cs), &mut live);
    // A directory that grows while other files are written.
    for i in 0..12u32 {
        put(
            &format!("olddir/inner {i}.txt"),
            bytes(200 + i, 50 + i as usize),
            &mut live,
        );
        put(&format!("filler/f{i}"), bytes(300 + i, cs), &mut live);
    }
    put("olddir/sub/inner2.txt", bytes(13, 99), &mut live);
    put("gone.bin", bytes(14, 3 * cs + 5), &mut live);
    // Deletions last: the root's and `many`'s slots are not reused.
    std::fs::remove_dir_all(mnt.join("olddir")).expect("rm -r");
    live.retain(|k, _| !k.starts_with("olddir/"));
    deleted.push("olddir".into());
    std::fs::remove_file(mnt.join("gone.bin")).expect("rm");
    live.remove("gone.bin");
    deleted.push("gone.bin".into());
    for i in (0..300u32).step_by(10) {
        let rel = format!("many/file number {i:03}.txt");
        std::fs::remove_file(mnt.join(&rel)).expect("rm");
        live.remove(&rel);
        deleted.push(rel);
    }
    Filled { live, deleted }
}

/// Makes, fills and compares one volume of `cs`-byte clusters.
fn mkfs_fuse_volume_matches_tsk(test: &str, cs: usize) {
    if !can_mount(test) {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let image = tmp.path().join("exfat.img");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mnt");
    std::fs::File::create(&image)
        .expect("image")
        .set_len(64 * 1024 * 1024)
        .expect("sparse");
    let out = Command::new("mkfs.exfat")
        .args(["-c", &cs.to_string(), "-L", "CASELOAD"])
        .arg(&image)
        .output()
        .expect("mkfs.exfat");
    assert!(
        out.status.success(),
        "mkfs.exfat: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let filled = {
        let mut m = match FuseMount::new(&image, &mnt) {
            Ok(m) => m,
            Err(why) => {
                eprintln!("SKIPPED {test}: cannot mount here: {why}");
                return;
            }
        };
        let filled = fill(&mnt, cs);
        m.release();
        filled
    };
    let img = std::fs::read(&image).expect("read image");
    // CASELOAD_EXFAT_KEEP=DIR keeps the images for a look with fls/fswalk.
    if let Some(keep) = std::env::var_os("CASELOAD_EXFAT_KEEP") {
        std::fs::write(Path::new(&keep).join(format!("{cs}.img")), &img).expect("keep");
    }
    let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    let (records, summary) = walk_all(&fs);
    // Ground truth: every live file with its bytes, every deleted name.
    for (path, data) in &filled.live {
        let r = record(&records, path);
        assert!(r.allocated, "{path}");
        assert_eq!(r.size, data.len() as u64, "{path}");
        assert_eq!(md5_of(&img[..], r), md5_bytes(data), "{path}");
        assert!(r.errors.is_empty(), "{path}: {:?}", r.errors);
    }
    for path in &filled.deleted {
        let r = record(&records, path);
        assert!(r.deleted(), "{path}");
    }
    let b = record(&records, "frag/B");
    assert!(
        b.content.extents().len() > 1,
        "frag/B is not fragmented: {:?}",
        b.content
    );
    eprintln!(
        "{test}: {} records, {} deleted, {} orphans, {} walk errors",
        records.len(),
        records.iter().filter(|r| r.deleted()).count(),
        records
            .iter()
            .filter(|r| r.parent.first().is_some_and(|p| p == "$OrphanFiles"))
            .count(),
        summary.errors.total()
    );
    compare_with_tsk(test, &img, &records);
    if have_tool(test, "blkls") {
        let tsk = blkls_unallocated(&image, 0).expect("blkls");
        let mut ours = std::collections::BTreeSet::new();
        fs.unallocated_runs(|e| ours.extend(e.offset / 512..(e.offset + e.len) / 512))
            .expect("runs");
        assert!(ours == tsk, "{test}: unallocated sectors differ from blkls");
    }
    // Mutations of the real layout never panic either.
    let regions = [
        (0, 12 * 512),
        (0x10_0000, 64 * 1024),
        (0x20_0000, 256 * 1024),
    ];
    if img.len() > 0x20_0000 + 256 * 1024 {
        fuzz(&img, &regions, 0x0E8F, 60);
    }
}

#[test]
fn mkfs_fuse_volume_4k_clusters_matches_tsk() {
    mkfs_fuse_volume_matches_tsk("mkfs_fuse_volume_4k_clusters_matches_tsk", 4096);
}

#[test]
fn mkfs_fuse_volume_512_byte_clusters_matches_tsk() {
    mkfs_fuse_volume_matches_tsk("mkfs_fuse_volume_512_byte_clusters_matches_tsk", 512);
}
