//! caseload-fs against real evidence with published answer keys and The
//! Sleuth Kit 4.11.1 oracle outputs (`../shared/real-images`). Skipped with
//! a notice when the folder is absent.

mod support;

use std::path::Path;

use caseload_fs::{FileRecord, FsKind, open_filesystem, open_volume_system};
use support::*;

/// Compares a walk of `image`'s file system at `sector` with TSK's bodyfile:
/// every regular-file line must be a record with the same path, meta address,
/// deleted state, size, timestamps and MD5, and every regular-file record
/// must be in TSK's listing. Returns the records.
fn check_against_oracle(
    test: &str,
    root: &Path,
    image: &str,
    oracle: &str,
    sector: u64,
    kind: FsKind,
) -> Vec<caseload_fs::FileRecord> {
    let path = root.join(image);
    let src = open_image(&path);
    let vs = open_volume_system(&*src).expect("volume system");
    let part = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == sector)
        .unwrap_or_else(|| panic!("{image}: no partition at sector {sector}: {vs:#?}"));
    assert_eq!(part.filesystem, kind, "{image}: detected file system");
    let fs = open_filesystem(&*src, part.offset, part.length).expect("open file system");
    assert_eq!(fs.kind(), kind);
    let (records, summary) = walk_all(&fs);
    let text = std::fs::read_to_string(
        root.join("oracles")
            .join(oracle)
            .join(format!("bodyfile_md5_o{sector}.txt")),
    )
    .expect("oracle bodyfile");
    let lines = parse_bodyfile(&text);
    let can_icat = have_tool(test, "icat");
    let failures = compare_with_bodyfile(&*src, &path, sector, &records, &lines, can_icat);
    assert!(
        failures.is_empty(),
        "{image} @{sector}: {} differences:\n{}\nwalk errors: {:#?}",
        failures.len(),
        failures.join("\n"),
        summary.errors
    );
    records
}

macro_rules! oracle_test {
    ($name:ident, $image:expr, $oracle:expr, $sector:expr, $kind:expr) => {
        #[test]
        fn $name() {
            let Some(root) = real_images(stringify!($name)) else {
                return;
            };
            check_against_oracle(stringify!($name), &root, $image, $oracle, $sector, $kind);
        }
    };
}

oracle_test!(
    fat_undelete_dd,
    "dftt/6-undel-fat/6-fat-undel.dd",
    "6-fat-undel.dd",
    0,
    FsKind::Fat16
);
oracle_test!(
    fat_undelete_e01,
    "dftt-e01/6-fat-undel.E01",
    "6-fat-undel.dd",
    0,
    FsKind::Fat16
);
oracle_test!(
    ntfs_undelete_dd,
    "dftt/7-undel-ntfs/7-ntfs-undel.dd",
    "7-ntfs-undel.dd",
    0,
    FsKind::Ntfs
);
oracle_test!(
    ntfs_undelete_e01,
    "dftt-e01/7-ntfs-undel.E01",
    "7-ntfs-undel.dd",
    0,
    FsKind::Ntfs
);
oracle_test!(
    ntfs_jpeg_search_dd,
    "dftt/8-jpeg-search/8-jpeg-search.dd",
    "8-jpeg-search.dd",
    0,
    FsKind::Ntfs
);
oracle_test!(
    ntfs_jpeg_search_e01,
    "dftt-e01/8-jpeg-search.E01",
    "8-jpeg-search.dd",
    0,
    FsKind::Ntfs
);
oracle_test!(
    fat_label_dd,
    "dftt/9-fat-label/9-fat-label.dd",
    "9-fat-label.dd",
    0,
    FsKind::Fat16
);
oracle_test!(
    fat_label_e01,
    "dftt-e01/9-fat-label.E01",
    "9-fat-label.dd",
    0,
    FsKind::Fat16
);
oracle_test!(
    fat12_daylight,
    "dftt/5-fat-daylight/daylight.dd",
    "daylight.dd",
    0,
    FsKind::Fat12
);
oracle_test!(
    fat_keyword_dd,
    "dftt/2-kwsrch-fat/fat-img-kw.dd",
    "fat-img-kw.dd",
    0,
    FsKind::Fat16
);
oracle_test!(
    fat_keyword_e01,
    "dftt-e01/fat-img-kw.E01",
    "fat-img-kw.dd",
    0,
    FsKind::Fat16
);
oracle_test!(fat12_macos, "fat/fat12.img", "fat12.img", 0, FsKind::Fat12);
oracle_test!(
    ntfs_testfs1_sparse,
    "ntfs/testfs1",
    "testfs1",
    0,
    FsKind::Ntfs
);
oracle_test!(
    nps_emails_fat_in_mbr,
    "ewf/nps-2010-emails.E01",
    "nps-2010-emails.E01",
    1,
    FsKind::Fat16
);
oracle_test!(
    mmls_image_first_ntfs,
    "ewf/imageformat_mmls_1.E01",
    "imageformat_mmls_1.E01",
    128,
    FsKind::Ntfs
);
oracle_test!(
    mmls_image_second_ntfs,
    "ewf/imageformat_mmls_1.E01",
    "imageformat_mmls_1.E01",
    55424,
    FsKind::Ntfs
);
oracle_test!(
    ntfs_sample_e01,
    "ewf/ntfs_sample.E01",
    "ntfs_sample.E01",
    0,
    FsKind::Ntfs
);
oracle_test!(
    ntfs_sample_raw_twin,
    "ntfs/ntfs_sample_partition.dd",
    "ntfs_sample.E01",
    0,
    FsKind::Ntfs
);

/// Records of the file system at `sector` of an image.
fn walk_image(
    root: &Path,
    image: &str,
    sector: u64,
) -> (Box<dyn caseload_fs::ReadAt>, Vec<FileRecord>) {
    let src = open_image(&root.join(image));
    let vs = open_volume_system(&*src).expect("volume system");
    let p = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == sector)
        .expect("partition");
    let fs = open_filesystem(&*src, p.offset, p.length).expect("open");
    let (records, _) = walk_all(&fs);
    drop(fs);
    (src, records)
}

fn ground_truth(root: &Path, image: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(root.join("dftt/dftt_ground_truth.json")).expect("key");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["images"][image].clone()
}

/// A DFTT image's source, its records and the answer-key entries checked.
type DfttCase = (
    Box<dyn caseload_fs::ReadAt>,
    Vec<FileRecord>,
    Vec<serde_json::Value>,
);

/// For a DFTT test: the image's walk and the `list` of its answer-key
/// entries (asserted to hold `count` items), or `None` when the real images
/// are absent.
fn dftt_case(
    test: &str,
    key_name: &str,
    image: &str,
    list: &str,
    count: usize,
) -> Option<DfttCase> {
    let root = real_images(test)?;
    let key = ground_truth(&root, key_name);
    let (src, records) = walk_image(&root, image, 0);
    let items = key[list].as_array().expect("answer-key list").clone();
    assert_eq!(items.len(), count, "{key_name}: {list}");
    Some((src, records, items))
}

#[test]
fn ntfs_sample_e01_and_raw_twin_give_identical_records() {
    let Some(root) = real_images("ntfs_sample_e01_and_raw_twin_give_identical_records") else {
        return;
    };
    let (e01, a) = walk_image(&root, "ewf/ntfs_sample.E01", 0);
    let (raw, b) = walk_image(&root, "ntfs/ntfs_sample_partition.dd", 0);
    assert_eq!(a.len(), b.len());
    assert!(a.len() > 30);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
        assert_eq!(md5_of(&*e01, x), md5_of(&*raw, y), "{}", x.path());
    }
}

/// DFTT #6: the deleted FAT files. Contiguous ones must have the published
/// MD5. The fragmented ones cannot be recovered from FAT metadata (a deleted
/// file's chain is zeroed; only its first cluster and size survive): TSK's
/// documented recovery, which this crate follows, takes the unallocated
/// clusters after the first one, and the answer key publishes the MD5 that
/// gives ("md5_if_recovered_contiguously") next to the true one. Both are
/// asserted, so a change in either direction is caught.
#[test]
fn dftt6_deleted_fat_files_follow_the_answer_key() {
    let Some((src, records, files)) = dftt_case(
        "dftt6_deleted_fat_files_follow_the_answer_key",
        "6-fat-undel.dd",
        "dftt/6-undel-fat/6-fat-undel.dd",
        "deleted_files",
        6,
    ) else {
        return;
    };
    for f in &files {
        let inode = f["tsk_inode"].as_u64().expect("inode");
        let want_name = f["path"]
            .as_str()
            .expect("path")
            .rsplit('\\')
            .next()
            .expect("name");
        let matches: Vec<&FileRecord> = records.iter().filter(|r| r.meta.inode == inode).collect();
        assert!(!matches.is_empty(), "inode {inode}");
        for r in matches {
            assert!(r.deleted(), "{}", r.path());
            // The first character of a deleted short name is lost (`_`).
            assert_eq!(r.name[1..], want_name[1..], "inode {inode}");
            assert_eq!(r.size, f["size"].as_u64().expect("size"));
            let md5 = md5_of(&*src, r);
            let published = f["md5"].as_str().expect("md5");
            match f["md5_if_recovered_contiguously"].as_str() {
                None => {
                    assert_eq!(md5, published, "{}", r.path());
                    assert!(r.recoverable());
                }
                Some(naive) => {
                    assert_eq!(md5, naive, "{}: TSK-style recovery", r.path());
                    assert_ne!(md5, published, "{}", r.path());
                }
            }
            assert_eq!(r.recovery, caseload_fs::Recovery::Unallocated);
        }
    }
    // The deleted directories, and frag3.dat also reached through the
    // deleted `_P1` directory whose first cluster is dir2's (as TSK shows).
    for dir in ["_ir1", "_ir1/dir2"] {
        let d = records.iter().find(|r| r.path() == dir).expect(dir);
        assert_eq!(d.kind, caseload_fs::FileKind::Directory);
        assert!(d.deleted());
    }
    let frag3: Vec<String> = records
        .iter()
        .filter(|r| r.meta.inode == 965)
        .map(FileRecord::path)
        .collect();
    assert_eq!(frag3.len(), 2, "{frag3:?}");
    assert!(frag3.contains(&"_ir1/dir2/frag3.dat".to_string()));
}

/// DFTT #7: all nine deleted NTFS files and streams, with the published
/// MD5s, including the resident one, the alternate data stream, the files in
/// deleted directories and the orphan whose parent record was reused.
#[test]
fn dftt7_deleted_ntfs_files_and_streams_match_published_md5s() {
    let Some((src, records, files)) = dftt_case(
        "dftt7_deleted_ntfs_files_and_streams_match_published_md5s",
        "7-ntfs-undel.dd",
        "dftt/7-undel-ntfs/7-ntfs-undel.dd",
        "deleted_files",
        9,
    ) else {
        return;
    };
    for f in &files {
        let entry = f["mft_entry"].as_str().expect("entry");
        let mut parts = entry.split('-').map(|p| p.parse::<u64>().expect("number"));
        let inode = parts.next().expect("inode");
        let attr = parts.next().zip(parts.next());
        let r = records
            .iter()
            .find(|r| {
                r.meta.inode == inode
                    && match attr {
                        Some((t, id)) => r.meta.attr == Some((t as u32, id as u16)),
                        None => r.stream.is_none() && r.meta.attr.is_some_and(|a| a.0 == 0x80),
                    }
            })
            .unwrap_or_else(|| panic!("{entry}"));
        let path = f["path"].as_str().expect("path").replace('\\', "/");
        let name = path.rsplit('/').next().expect("name");
        assert!(r.deleted(), "{entry}");
        assert!(r.tsk_name() == name, "{entry}: {} vs {name}", r.tsk_name());
        assert_eq!(r.size, f["size"].as_u64().expect("size"), "{entry}");
        assert_eq!(md5_of(&*src, r), f["md5"].as_str().expect("md5"), "{entry}");
        assert!(r.recoverable(), "{entry}: {:?}", r.recovery);
        if f["note"]
            .as_str()
            .is_some_and(|n| n.contains("OrphanFiles"))
        {
            assert_eq!(r.path(), "$OrphanFiles/sing2.dat");
        } else {
            assert_eq!(format!("/{}", r.path()), path, "{entry}");
        }
        // Leap-year test: created on 2004-02-29 (UTC).
        let created = r.times.created.expect("created").secs;
        assert!((1_078_012_800..1_078_099_200).contains(&created), "{entry}");
    }
    let res = records.iter().find(|r| r.name == "res1.dat").expect("res1");
    assert!(matches!(res.content, caseload_fs::Content::Resident(_)));
}

/// DFTT #8: every JPEG-search file, the ADS one included, has the published
/// MD5 and size.
#[test]
fn dftt8_files_match_published_md5s() {
    let Some((src, records, files)) = dftt_case(
        "dftt8_files_match_published_md5s",
        "8-jpeg-search.dd",
        "dftt/8-jpeg-search/8-jpeg-search.dd",
        "files",
        13,
    ) else {
        return;
    };
    for f in &files {
        let path = f["path"].as_str().expect("path").replace('\\', "/");
        let r = records
            .iter()
            .find(|r| r.path() == path)
            .unwrap_or_else(|| panic!("{path}"));
        assert_eq!(r.size, f["size"].as_u64().expect("size"), "{path}");
        assert_eq!(md5_of(&*src, r), f["md5"].as_str().expect("md5"), "{path}");
    }
}

/// DFTT #9: volume-label entries, in the root and in a subdirectory, both
/// owning clusters; the boot sector holds a third label.
#[test]
fn dftt9_volume_label_entries_and_their_content() {
    let Some(root) = real_images("dftt9_volume_label_entries_and_their_content") else {
        return;
    };
    let key = ground_truth(&root, "9-fat-label.dd");
    let path = root.join("dftt/9-fat-label/9-fat-label.dd");
    let src = open_image(&path);
    let fs = caseload_fs::FatFs::open(&*src, 0, src.len()).expect("open");
    assert_eq!(
        fs.boot_sector()
            .volume_label
            .as_ref()
            .map(|l| String::from_utf8_lossy(l).trim().to_string()),
        key["boot_sector_label"].as_str().map(str::to_string)
    );
    let (_, records) = walk_image(&root, "dftt/9-fat-label/9-fat-label.dd", 0);
    for e in key["entries"].as_array().expect("entries") {
        let inode = e["tsk_inode"].as_u64().expect("inode");
        let r = records
            .iter()
            .find(|r| r.meta.inode == inode)
            .expect("entry");
        assert_eq!(r.kind, caseload_fs::FileKind::VolumeLabel);
        assert_eq!(md5_of(&*src, r), e["md5"].as_str().expect("md5"));
    }
}

/// DFTT #5: FAT times are the local wall clock of the writer, reported as is
/// (no zone or daylight-saving shift).
#[test]
fn dftt5_fat_times_are_the_local_wall_clock() {
    let Some(root) = real_images("dftt5_fat_times_are_the_local_wall_clock") else {
        return;
    };
    let (_, records) = walk_image(&root, "dftt/5-fat-daylight/daylight.dd", 0);
    // 2004-01-01 14:00 and 2004-06-01 15:00 (the answer key), read as UTC.
    for (name, minute) in [
        ("winter.txt", 1_072_965_600i64),
        ("summer.txt", 1_086_102_000),
    ] {
        let r = records.iter().find(|r| r.name == name).expect(name);
        assert_eq!(r.time_base, caseload_fs::TimeBase::LocalWallClock);
        let created = r.times.created.expect("created").secs;
        assert_eq!(created - created % 60, minute, "{name}");
    }
}

/// Byte runs of fiwalk's DFXML per file: (volume offset, path, inode,
/// resident, runs as (image offset, length) merged where contiguous;
/// resident data as (0, length)).
type DfxmlFile = (u64, String, u64, bool, Vec<(u64, u64)>);

fn dfxml_runs(xml: &str) -> Vec<DfxmlFile> {
    let attr = |s: &str, name: &str| -> Option<u64> {
        let k = format!("{name}='");
        let i = s.find(&k)? + k.len();
        s[i..].split('\'').next()?.parse().ok()
    };
    let mut out = Vec::new();
    for volume in xml.split("<volume ").skip(1) {
        let vol_offset = attr(volume, "offset").unwrap_or(0);
        for obj in volume.split("<fileobject>").skip(1) {
            let Some(name) = obj
                .split("<filename>")
                .nth(1)
                .and_then(|s| s.split("</filename>").next())
            else {
                continue;
            };
            let after = obj.split("</filename>").nth(1).unwrap_or("");
            let Some(inode) = after
                .split("<inode>")
                .nth(1)
                .and_then(|s| s.split("</inode>").next())
                .and_then(|s| s.parse().ok())
            else {
                continue;
            };
            let Some(data) = obj.split("<byte_runs facet='data'>").nth(1) else {
                continue;
            };
            let data = data.split("</byte_runs>").next().unwrap_or("");
            let mut resident = false;
            let mut runs: Vec<(u64, u64)> = Vec::new();
            for run in data.split("<byte_run ").skip(1) {
                let (Some(img), Some(len)) = (attr(run, "img_offset"), attr(run, "len")) else {
                    continue;
                };
                if run.contains("type='resident'") {
                    resident = true;
                    runs.push((0, len));
                    continue;
                }
                match runs.last_mut() {
                    Some((o, l)) if *o + *l == img => *l += len,
                    _ => runs.push((img, len)),
                }
            }
            out.push((vol_offset, name.to_string(), inode, resident, runs));
        }
    }
    out
}

/// fiwalk's DFXML byte runs (made by TSK) are the ground truth for extents:
/// every file's data runs, in order and clipped to its size, equal ours, on
/// FAT (deleted files included) and on both NTFS partitions of an E01.
#[test]
fn extents_match_fiwalk_dfxml_byte_runs() {
    let Some(root) = real_images("extents_match_fiwalk_dfxml_byte_runs") else {
        return;
    };
    let cases: [(&str, &str, &[u64]); 4] = [
        (
            "dftt/2-kwsrch-fat/fat-img-kw.dd",
            "dftt/2-kwsrch-fat/fat-img-kw.xml",
            &[0],
        ),
        (
            "dftt/5-fat-daylight/daylight.dd",
            "dftt/5-fat-daylight/daylight.xml",
            &[0],
        ),
        (
            "dftt/6-undel-fat/6-fat-undel.dd",
            "oracles/6-fat-undel.dd.xml",
            &[0],
        ),
        (
            "ewf/imageformat_mmls_1.E01",
            "oracles/imageformat_mmls_1.E01.xml",
            &[128, 55424],
        ),
    ];
    for (image, xml, sectors) in cases {
        let xml = std::fs::read_to_string(root.join(xml)).expect("dfxml");
        let expected = dfxml_runs(&xml);
        let mut by_volume = std::collections::BTreeMap::new();
        for &s in sectors {
            by_volume.insert(s * 512, walk_image(&root, image, s).1);
        }
        let mut checked = 0;
        for (vol, name, inode, resident, runs) in &expected {
            if name.ends_with("/.") || name.ends_with("/..") || name == "." || name == ".." {
                continue;
            }
            let records = &by_volume[vol];
            // fiwalk describes a file by its default attribute: the unnamed
            // $DATA, else the $DATA with the lowest id (`$Secure:$SDS`).
            let prefix = format!("{name}:");
            let mut candidates: Vec<&FileRecord> = records
                .iter()
                .filter(|r| r.meta.inode == *inode)
                .filter(|r| r.path() == *name || r.path().starts_with(&prefix))
                .collect();
            candidates
                .sort_by_key(|r| (r.stream.is_some(), r.meta.attr.map(|a| (a.0 != 0x80, a.1))));
            let Some(r) = candidates.first() else {
                panic!("{image}: {name} [{inode}] not found");
            };
            let ours: Vec<(u64, u64)> = if *resident {
                match &r.content {
                    caseload_fs::Content::Resident(b) => vec![(0, b.len() as u64)],
                    other => panic!("{image}: {name}: expected resident, got {other:?}"),
                }
            } else {
                r.content
                    .extents()
                    .iter()
                    .map(|e| (e.offset, e.len))
                    .collect()
            };
            assert_eq!(&ours, runs, "{image}: {name} [{inode}]");
            checked += 1;
        }
        assert!(checked >= 5, "{image}: only {checked} files checked");
    }
}

/// The partitioned real images: partitions, tables and gaps equal TSK's
/// `mmls`, and each partition's file system is the one TSK found.
#[test]
fn volume_systems_agree_with_mmls() {
    let Some(root) = real_images("volume_systems_agree_with_mmls") else {
        return;
    };
    let cases = [
        (
            "ewf/nps-2010-emails.E01",
            "nps-2010-emails.E01",
            caseload_fs::Scheme::Mbr,
            vec![FsKind::Fat16],
        ),
        (
            "ewf/imageformat_mmls_1.E01",
            "imageformat_mmls_1.E01",
            caseload_fs::Scheme::Mbr,
            vec![FsKind::Ntfs, FsKind::Ntfs],
        ),
        (
            "ewf/exfat1.E01",
            "exfat1.E01",
            caseload_fs::Scheme::Gpt,
            vec![FsKind::ExFat],
        ),
    ];
    for (image, oracle, scheme, kinds) in cases {
        let src = open_image(&root.join(image));
        let vs = open_volume_system(&*src).expect("volume system");
        assert_eq!(vs.scheme, scheme, "{image}");
        assert!(vs.errors.is_empty(), "{image}: {:?}", vs.errors);
        let text = std::fs::read_to_string(root.join("oracles").join(oracle).join("mmls.txt"))
            .expect("mmls");
        assert_mmls_agrees(&vs, &parse_mmls(&text), image);
        let found: Vec<FsKind> = vs.partitions.iter().map(|p| p.filesystem).collect();
        assert_eq!(found, kinds, "{image}");
    }
    // Bare file systems: mmls finds no table, nor do we.
    for image in [
        "dftt/6-undel-fat/6-fat-undel.dd",
        "ntfs/testfs1",
        "ewf/image.dd",
    ] {
        let src = open_image(&root.join(image));
        let vs = open_volume_system(&*src).expect("volume system");
        assert_eq!(vs.scheme, caseload_fs::Scheme::None, "{image}");
        assert_eq!(vs.partitions.len(), 1);
    }
}

/// ext2 is detected and parsed (tests/ext.rs compares it with TSK's
/// bodyfile line by line).
#[test]
fn ext2_is_detected_and_parsed() {
    let Some(root) = real_images("ext2_is_detected_and_parsed") else {
        return;
    };
    for (image, sector, kind) in [
        ("ewf/image.dd", 0, FsKind::Ext2),
        ("ewf/image.E01", 0, FsKind::Ext2),
    ] {
        let src = open_image(&root.join(image));
        let vs = open_volume_system(&*src).expect("volume system");
        let p = vs
            .partitions
            .iter()
            .find(|p| p.start_sector == sector)
            .expect("partition");
        assert_eq!(p.filesystem, kind, "{image}");
        assert!(kind.is_parsed());
        let fs = open_filesystem(&*src, p.offset, p.length).expect("open");
        assert!(matches!(fs, caseload_fs::FileSystem::Ext(_)));
        assert_eq!(fs.kind(), kind);
        let mut n = 0;
        fs.walk(|_| {
            n += 1;
            std::ops::ControlFlow::Continue(())
        })
        .expect("walk");
        assert_eq!(n, 9, "{image}");
    }
}

oracle_test!(
    exfat_e01_regular_files,
    "ewf/exfat1.E01",
    "exfat1.E01",
    2048,
    FsKind::ExFat
);

/// exFAT in a GPT partition of an E01 (a macOS volume with a deleted
/// directory whose second cluster holds orphaned entries): every line of
/// TSK's bodyfile, directories, label, `$ALLOC_BITMAP`, `$UPCASE_TABLE`,
/// virtual files and the 20 orphans included, is a record with the same
/// path, inode, deleted state, size, times and MD5, and nothing else is
/// listed. The unallocated runs equal `blkls`'s.
#[test]
fn exfat_e01_every_entry_matches_tsk() {
    let test = "exfat_e01_every_entry_matches_tsk";
    let Some(root) = real_images(test) else {
        return;
    };
    let oracle = root.join("oracles/exfat1.E01");
    if !oracle.is_dir() {
        eprintln!("SKIPPED {test}: {} is absent", oracle.display());
        return;
    }
    let path = root.join("ewf/exfat1.E01");
    let src = open_image(&path);
    let vs = open_volume_system(&*src).expect("volume system");
    let p = vs
        .partitions
        .iter()
        .find(|p| p.start_sector == 2048)
        .expect("partition");
    let fs = open_filesystem(&*src, p.offset, p.length).expect("open");
    let caseload_fs::FileSystem::ExFat(x) = &fs else {
        panic!("not opened as exFAT");
    };
    assert_eq!(x.label(), Some("exfat1"));
    assert!(fs.open_errors().is_empty(), "{:?}", fs.open_errors());
    let (records, summary) = walk_all(&fs);
    let text =
        std::fs::read_to_string(oracle.join("bodyfile_md5_o2048.txt")).expect("oracle bodyfile");
    let lines = parse_bodyfile(&text);
    // Neither deliberate difference applies here: every stream is valid to
    // its end and every UTC offset is zero.
    for r in &records {
        assert!(
            !matches!(&r.content, caseload_fs::Content::Runs(runs) if runs.iter().any(|x| matches!(x, caseload_fs::Run::Zeros { .. }))),
            "{}",
            r.path()
        );
    }
    let failures = compare_every_line(&*src, &records, &lines, &|_, l| l.md5.clone());
    assert!(
        failures.is_empty(),
        "{} differences:\n{}\nwalk errors: {:#?}",
        failures.len(),
        failures.join("\n"),
        summary.errors
    );
    let deleted = records.iter().filter(|r| r.deleted()).count();
    assert_eq!(deleted, 64);
    let orphans = records
        .iter()
        .filter(|r| r.parent.first().is_some_and(|p| p == "$OrphanFiles"))
        .count();
    assert_eq!(orphans, 20);
    // The one orphan without its stream and name entries (they are in the
    // deleted directory's next cluster) is reported, not guessed.
    let nameless = records
        .iter()
        .find(|r| r.name == "OrphanFile-11138")
        .expect("nameless orphan");
    assert_eq!(nameless.size, 0);
    assert!(!nameless.errors.is_empty());
    if have_tool(test, "blkls") {
        match blkls_unallocated(&path, 2048) {
            Some(tsk) => {
                let mut ours = std::collections::BTreeSet::new();
                fs.unallocated_runs(|e| {
                    assert_eq!((e.offset - p.offset) % 512, 0);
                    let first = (e.offset - p.offset) / 512;
                    ours.extend(first..first + e.len / 512);
                })
                .expect("unallocated runs");
                assert!(ours == tsk, "unallocated sectors differ from blkls");
            }
            None => eprintln!("SKIPPED {test} (blkls part): this TSK cannot read E01"),
        }
    }
}

/// The unallocated cluster runs the carving stage reads equal the
/// unallocated blocks TSK lists, on FAT and NTFS.
#[test]
fn unallocated_runs_match_blkls() {
    let test = "unallocated_runs_match_blkls";
    let Some(root) = real_images(test) else {
        return;
    };
    if !have_tool(test, "blkls") {
        return;
    }
    for image in [
        "dftt/6-undel-fat/6-fat-undel.dd",
        "dftt/2-kwsrch-fat/fat-img-kw.dd",
        "fat/fat12.img",
        "dftt/7-undel-ntfs/7-ntfs-undel.dd",
        "ntfs/testfs1",
    ] {
        let path = root.join(image);
        let src = open_image(&path);
        let fs = open_filesystem(&*src, 0, src.len()).expect("open");
        let block = match &fs {
            caseload_fs::FileSystem::Fat(f) => u64::from(f.boot_sector().bytes_per_sector),
            _ => fs.cluster_size().expect("cluster size"),
        };
        let mut ours = std::collections::BTreeSet::new();
        fs.unallocated_runs(|e| {
            assert_eq!(e.offset % block, 0);
            ours.extend(e.offset / block..(e.offset + e.len) / block);
        })
        .expect("unallocated runs");
        // TSK counts sectors the boot sector claims past the end of the
        // image too (6-fat-undel.dd is one sector short); none can be read.
        let present = src.len() / block;
        let tsk: std::collections::BTreeSet<u64> = blkls_unallocated(&path, 0)
            .expect("blkls")
            .into_iter()
            .filter(|&b| b < present)
            .collect();
        let extra: Vec<u64> = tsk.difference(&ours).copied().collect();
        let missing: Vec<u64> = ours.difference(&tsk).copied().collect();
        assert!(
            extra.is_empty() && missing.is_empty(),
            "{image}: TSK only {extra:?}, ours only {missing:?}"
        );
        assert!(!ours.is_empty(), "{image}");
    }
}

/// Real FAT and NTFS images with random damage in their metadata (boot
/// sector, FAT and directories; MFT) never make a walk panic or loop.
#[test]
fn fuzzed_real_images_never_panic() {
    let Some(root) = real_images("fuzzed_real_images_never_panic") else {
        return;
    };
    let fat = std::fs::read(root.join("dftt/6-undel-fat/6-fat-undel.dd")).expect("read");
    // Boot sector to the end of the first directory clusters.
    fuzz(&fat, &[(0, 512), (512, 130 * 512)], 0xFA7, 400);
    for image in [
        "dftt/7-undel-ntfs/7-ntfs-undel.dd",
        "dftt/8-jpeg-search/8-jpeg-search.dd",
    ] {
        let img = std::fs::read(root.join(image)).expect("read");
        let cs = u64::from(u16::from_le_bytes([img[11], img[12]])) * u64::from(img[13]);
        let mft_lcn = u64::from_le_bytes(img[0x30..0x38].try_into().expect("8"));
        let mft = usize::try_from(mft_lcn * cs).expect("offset");
        fuzz(&img, &[(0, 512), (mft, 64 * 1024)], 0x7F5, 400);
    }
}
