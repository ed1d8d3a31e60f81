//! Crafted FAT12/16/32 and NTFS images with known content: the walk must
//! find every name, size, deletion state and byte. The FAT images are also
//! checked with `fsck.fat` and listed with TSK's `fls`/`icat`, whose output
//! the walk must match exactly (the only FAT32 oracle check: no real FAT32
//! image is in the answer-key set).

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;

use caseload_fs::{
    Content, FileKind, FileSystem, FsKind, Recovery, open_filesystem, open_volume_system,
};
use support::synth::{Fat, FatType, NTFS_ROOT, Ntfs, NtfsData};
use support::*;

use support::filler as bytes;

/// What a sample image holds: TSK path -> (content, deleted).
type Expected = BTreeMap<String, (Vec<u8>, bool)>;

/// A FAT image with long names, nested directories, a fragmented file, an
/// empty file, a one-cluster file and a deleted contiguous file.
fn sample_fat(kind: FatType) -> (Vec<u8>, Expected) {
    let (sectors, spc) = match kind {
        FatType::Fat12 => (4096, 1),
        FatType::Fat16 => (40_000, 2),
        FatType::Fat32 => (140_000, 1),
    };
    let mut f = Fat::new(kind, sectors, spc);
    let cs = f.cluster_size();
    let mut exp = Expected::new();
    let root = f.root();
    let a = bytes(1, 3000);
    f.add_file(root, Some("Read Me First.txt"), b"README~1TXT", &a);
    exp.insert("Read Me First.txt".into(), (a, false));
    let b = bytes(2, cs);
    f.add_file(root, None, b"ONECLUSTDAT", &b);
    exp.insert("ONECLUST.DAT".into(), (b, false));
    f.add_file(root, None, b"EMPTY   TXT", &[]);
    exp.insert("EMPTY.TXT".into(), (Vec::new(), false));
    let docs = f.add_dir(root, Some("Documents and Settings"), b"DOCUME~1   ");
    let deep = f.add_dir(docs, None, b"DEEP       ");
    let c = bytes(3, 5 * cs + 17);
    f.add_file(deep, Some("nested file.bin"), b"NESTED~1BIN", &c);
    exp.insert(
        "Documents and Settings/DEEP/nested file.bin".into(),
        (c, false),
    );
    // Fragmented: three pieces with free clusters between.
    let frag = bytes(4, 3 * cs + 100);
    let p1 = f.alloc(2);
    f.skip(3);
    let p2 = f.alloc(1);
    f.skip(2);
    let p3 = f.alloc(1);
    let chain: Vec<u32> = [p1, p2, p3].concat();
    f.add_file_in(docs, Some("fragmented.dat"), b"FRAGME~1DAT", &chain, &frag);
    exp.insert(
        "Documents and Settings/fragmented.dat".into(),
        (frag, false),
    );
    // Deleted, contiguous: recoverable exactly.
    let gone = bytes(5, 2 * cs + 3);
    let (first, off) = f.add_file(root, Some("deleted.doc"), b"DELETEDDOC ", &gone);
    f.delete(off, first);
    exp.insert("deleted.doc".into(), (gone, true));
    (f.finish(), exp)
}

fn write_temp(img: &[u8]) -> tempfile::NamedTempFile {
    let mut t = tempfile::NamedTempFile::new().expect("temp file");
    t.write_all(img).expect("write image");
    t.flush().expect("flush");
    t
}

fn check_sample_fat(test: &str, kind: FatType, want: FsKind) {
    let (img, exp) = sample_fat(kind);
    let vs = open_volume_system(&img).expect("volume system");
    assert_eq!(vs.partitions.len(), 1);
    assert_eq!(vs.partitions[0].filesystem, want);
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    assert_eq!(fs.kind(), want);
    let (records, summary) = walk_all(&fs);
    assert!(summary.errors.is_empty(), "{:#?}", summary.errors);
    check_expected(&img, &records, &exp);
    // Oracles: fsck.fat finds nothing wrong; TSK lists the same.
    let file = write_temp(&img);
    if have_tool(test, "fsck.fat") {
        let out = Command::new("fsck.fat")
            .arg("-n")
            .arg(file.path())
            .output()
            .expect("fsck.fat");
        assert!(
            out.status.success(),
            "fsck.fat: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if have_tool(test, "fls") && have_tool(test, "icat") {
        let lines = live_bodyfile(file.path(), 0).expect("fls");
        let failures = compare_with_bodyfile(&img, file.path(), 0, &records, &lines, true);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// Every expected path is a record with the expected deletion state, size
/// and bytes, without errors; deleted ones are fully recoverable.
fn check_expected(img: &[u8], records: &[caseload_fs::FileRecord], exp: &Expected) {
    for (path, (data, deleted)) in exp {
        let r = records
            .iter()
            .find(|r| r.path() == *path)
            .unwrap_or_else(|| panic!("{path} not found in {:?}", paths(records)));
        assert_eq!(r.deleted(), *deleted, "{path}");
        assert_eq!(r.size, data.len() as u64, "{path}");
        assert_eq!(md5_of(img, r), md5_bytes(data), "{path}");
        if *deleted {
            assert_eq!(r.recovery, Recovery::Unallocated, "{path}");
        }
        assert!(r.errors.is_empty(), "{path}: {:?}", r.errors);
    }
}

fn paths(records: &[caseload_fs::FileRecord]) -> Vec<String> {
    records.iter().map(|r| r.path()).collect()
}

#[test]
fn fat12_sample_matches_content_and_tsk() {
    check_sample_fat(
        "fat12_sample_matches_content_and_tsk",
        FatType::Fat12,
        FsKind::Fat12,
    );
}

#[test]
fn fat16_sample_matches_content_and_tsk() {
    check_sample_fat(
        "fat16_sample_matches_content_and_tsk",
        FatType::Fat16,
        FsKind::Fat16,
    );
}

#[test]
fn fat32_sample_matches_content_and_tsk() {
    check_sample_fat(
        "fat32_sample_matches_content_and_tsk",
        FatType::Fat32,
        FsKind::Fat32,
    );
}

#[test]
fn fat_extents_slack_and_unallocated_runs_are_exact() {
    let mut f = Fat::new(FatType::Fat16, 40_000, 2);
    let cs = f.cluster_size() as u64;
    let root = f.root();
    let data = bytes(9, 2 * cs as usize + 10);
    let p1 = f.alloc(1);
    f.skip(4);
    let p2 = f.alloc(2);
    let chain = [p1.clone(), p2.clone()].concat();
    f.add_file_in(root, None, b"SPLIT   BIN", &chain, &data);
    let off1 = f.cluster_offset(p1[0]) as u64;
    let off2 = f.cluster_offset(p2[0]) as u64;
    let total = f.cluster_count;
    let img = f.finish();
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    let (records, _) = walk_all(&fs);
    let r = records
        .iter()
        .find(|r| r.name == "SPLIT.BIN")
        .expect("file");
    assert_eq!(
        r.content,
        Content::Runs(vec![
            caseload_fs::Run::Data {
                offset: off1,
                len: cs
            },
            caseload_fs::Run::Data {
                offset: off2,
                len: cs + 10
            },
        ])
    );
    assert_eq!(
        r.slack,
        vec![caseload_fs::Extent {
            offset: off2 + cs + 10,
            len: cs - 10
        }]
    );
    let mut free = Vec::new();
    fs.unallocated_runs(|e| free.push(e)).expect("unallocated");
    // Clusters 3..=6 (the gap) and everything after the file are free.
    assert_eq!(free[0].offset, off1 + cs);
    assert_eq!(free[0].len, 4 * cs);
    let free_clusters: u64 = free.iter().map(|e| e.len / cs).sum();
    assert_eq!(free_clusters, u64::from(total) - 3);
}

/// An NTFS volume with resident, non-resident, sparse, uninitialized-tail
/// and alternate-stream files, a subdirectory large enough to need index
/// blocks, and a deleted file in a deleted directory.
fn sample_ntfs() -> (Vec<u8>, Expected) {
    let mut n = Ntfs::new(8192, 256);
    let mut exp = Expected::new();
    let small = b"resident bytes".to_vec();
    n.add_file(
        NTFS_ROOT,
        "small.txt",
        NtfsData::Resident(small.clone()),
        vec![],
    );
    exp.insert("small.txt".into(), (small, false));
    let big = bytes(7, 20_000);
    let ads = bytes(8, 3000);
    n.add_file(
        NTFS_ROOT,
        "big.bin",
        NtfsData::NonResident(big.clone()),
        vec![("secret", NtfsData::NonResident(ads.clone()))],
    );
    exp.insert("big.bin".into(), (big, false));
    exp.insert("big.bin:secret".into(), (ads, false));
    // Sparse: one stored cluster, a 4-cluster hole, one stored cluster.
    let l1 = n.alloc(1);
    let l2 = n.alloc(1);
    n.write_clusters(l1, &[1u8; 512]);
    n.write_clusters(l2, &[2u8; 512]);
    let mut sparse = vec![1u8; 512];
    sparse.extend(vec![0u8; 4 * 512]);
    sparse.extend(vec![2u8; 300]);
    n.add_file(
        NTFS_ROOT,
        "sparse.img",
        NtfsData::Runs {
            runs: vec![(Some(l1), 1), (None, 4), (Some(l2), 1)],
            data_size: sparse.len() as u64,
            init_size: sparse.len() as u64,
        },
        vec![],
    );
    exp.insert("sparse.img".into(), (sparse, false));
    // Valid data length shorter than the size: the tail reads as zeros even
    // though the cluster holds other bytes.
    let l3 = n.alloc(2);
    n.write_clusters(l3, &[0xAB; 1024]);
    let mut vdl = vec![0xABu8; 600];
    vdl.extend(vec![0u8; 400]);
    n.add_file(
        NTFS_ROOT,
        "prealloc.dat",
        NtfsData::Runs {
            runs: vec![(Some(l3), 2)],
            data_size: 1000,
            init_size: 600,
        },
        vec![],
    );
    exp.insert("prealloc.dat".into(), (vdl, false));
    // Compressed: text compresses; random bytes do not (stored raw units);
    // zeros compress to almost nothing.
    let mut squeezed = Vec::new();
    for i in 0..1500 {
        squeezed.extend(format!("line {i} of a compressible text file\n").into_bytes());
    }
    squeezed.extend(bytes(13, 9000));
    squeezed.extend(vec![0u8; 10_000]);
    n.add_file(
        NTFS_ROOT,
        "compressed.txt",
        NtfsData::Compressed(squeezed.clone()),
        vec![],
    );
    exp.insert("compressed.txt".into(), (squeezed, false));
    let many = n.add_dir(NTFS_ROOT, "many");
    for i in 0..120 {
        let body = format!("file number {i}").into_bytes();
        n.add_file(
            many,
            &format!("entry-{i:03}.txt"),
            NtfsData::Resident(body.clone()),
            vec![],
        );
        exp.insert(format!("many/entry-{i:03}.txt"), (body, false));
    }
    let gone_dir = n.add_dir(NTFS_ROOT, "old");
    let gone = bytes(9, 5000);
    let g = n.add_file(
        gone_dir,
        "gone.bin",
        NtfsData::NonResident(gone.clone()),
        vec![],
    );
    n.delete(g);
    exp.insert("old/gone.bin".into(), (gone, true));
    (n.finish(), exp)
}

#[test]
fn ntfs_sample_lists_every_stream_with_its_bytes() {
    let (img, exp) = sample_ntfs();
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    assert_eq!(fs.kind(), FsKind::Ntfs);
    if let FileSystem::Ntfs(n) = &fs {
        assert_eq!(n.info().volume_name.as_deref(), Some("SYNTH"));
        assert_eq!(n.info().version, Some((3, 1)));
    }
    let (records, summary) = walk_all(&fs);
    assert!(summary.errors.is_empty(), "{:#?}", summary.errors);
    check_expected(&img, &records, &exp);
    let small = records
        .iter()
        .find(|r| r.name == "small.txt")
        .expect("small");
    assert!(matches!(small.content, Content::Resident(_)));
    let sparse = records
        .iter()
        .find(|r| r.name == "sparse.img")
        .expect("sparse");
    let Content::Runs(runs) = &sparse.content else {
        panic!("runs");
    };
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[1], caseload_fs::Run::Zeros { len: 2048 });
    let packed = records
        .iter()
        .find(|r| r.name == "compressed.txt")
        .expect("compressed");
    let Content::Compressed { unit, .. } = &packed.content else {
        panic!("{:?}", packed.content);
    };
    assert_eq!(*unit, 16 * 512);
    let stored: u64 = packed.content.extents().iter().map(|e| e.len).sum();
    assert!(
        stored < packed.size / 2,
        "{stored} stored for {}",
        packed.size
    );
    let ads = records
        .iter()
        .find(|r| r.stream.as_deref() == Some("secret"))
        .expect("ads");
    assert_eq!(ads.meta.attr, Some((0x80, 4)));
    // The deleted directory shows too, deleted.
    let old = records.iter().find(|r| r.path() == "old").expect("old dir");
    assert_eq!(old.kind, FileKind::Directory);
    assert!(!old.deleted(), "the directory itself was not deleted");
    let gone = records.iter().find(|r| r.name == "gone.bin").expect("gone");
    assert_eq!(gone.recovery, Recovery::Unallocated);
    // TSK lists the same names, sizes, times and bytes (it also finds the
    // system records the synthetic root index leaves out, as we do).
    let test = "ntfs_sample_lists_every_stream_with_its_bytes";
    if have_tool(test, "fls") && have_tool(test, "icat") {
        let file = write_temp(&img);
        let lines = live_bodyfile(file.path(), 0).expect("fls");
        let failures = compare_with_bodyfile(&img, file.path(), 0, &records, &lines, true);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn walks_can_stop_early() {
    let (img, _) = sample_ntfs();
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    let mut n = 0;
    let summary = fs
        .walk(|_| {
            n += 1;
            if n == 5 {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        })
        .expect("walk");
    assert!(summary.stopped);
    assert_eq!(summary.records, 5);
    let (img, _) = sample_fat(FatType::Fat16);
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    let summary = fs.walk(|_| std::ops::ControlFlow::Break(())).expect("walk");
    assert!(summary.stopped);
    assert_eq!(summary.records, 1);
}

/// A file whose `$DATA` is split over two extension records named by an
/// `$ATTRIBUTE_LIST` (how NTFS stores heavily fragmented files): the runs
/// of both pieces are joined in VCN order.
#[test]
fn ntfs_attribute_list_pieces_are_joined() {
    use support::synth::{attr_nonresident, attr_resident, record_bytes, std_info_value};
    let mut n = Ntfs::new(4096, 64);
    let data = bytes(11, 6 * 512 - 100);
    let a = n.alloc(3);
    n.alloc(2); // a gap, so the pieces are not contiguous
    let b = n.alloc(3);
    n.write_clusters(a, &data[..3 * 512]);
    n.write_clusters(b, &data[3 * 512..]);
    let base = n.reserve_record();
    let x = n.reserve_record();
    let y = n.reserve_record();
    let base_ref = base | (1 << 48);
    let len = data.len() as u64;
    let piece1 = attr_nonresident(0x80, "", 3, &[(Some(a), 3)], len, len, 0);
    let mut piece2 = attr_nonresident(0x80, "", 3, &[(Some(b), 3)], len, len, 0);
    // Second piece: VCNs 3..=5.
    piece2[16..24].copy_from_slice(&3u64.to_le_bytes());
    piece2[24..32].copy_from_slice(&5u64.to_le_bytes());
    n.insert_record(x, record_bytes(1, 0x01, &[piece1], base_ref));
    n.insert_record(y, record_bytes(1, 0x01, &[piece2], base_ref));
    let list_entry = |ty: u32, rec: u64, vcn: u64, instance: u16| {
        let mut e = vec![0u8; 32];
        e[0..4].copy_from_slice(&ty.to_le_bytes());
        e[4..6].copy_from_slice(&32u16.to_le_bytes());
        e[7] = 26;
        e[8..16].copy_from_slice(&vcn.to_le_bytes());
        e[16..24].copy_from_slice(&(rec | (1 << 48)).to_le_bytes());
        e[24..26].copy_from_slice(&instance.to_le_bytes());
        e
    };
    let list = [
        list_entry(0x10, base, 0, 0),
        list_entry(0x30, base, 0, 2),
        list_entry(0x80, x, 0, 3),
        list_entry(0x80, y, 3, 3),
    ]
    .concat();
    let fname = n.link_name(NTFS_ROOT, base, "fragmented.bin");
    n.insert_record(
        base,
        record_bytes(
            1,
            0x01,
            &[
                attr_resident(0x10, "", 0, &std_info_value()),
                attr_resident(0x20, "", 1, &list),
                attr_resident(0x30, "", 2, &fname),
            ],
            0,
        ),
    );
    let img = n.finish();
    let fs = open_filesystem(&img, 0, img.len() as u64).expect("open");
    let (records, summary) = walk_all(&fs);
    assert!(summary.errors.is_empty(), "{:#?}", summary.errors);
    let r = records
        .iter()
        .find(|r| r.name == "fragmented.bin")
        .expect("listed");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.size, len);
    assert_eq!(r.content.extents().len(), 2);
    assert_eq!(md5_of(&img, r), md5_bytes(&data));
    // The extension records are not files of their own.
    assert_eq!(
        records
            .iter()
            .filter(|r| r.meta.inode == x || r.meta.inode == y)
            .count(),
        0
    );
}
