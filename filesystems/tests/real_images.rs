//! caseload-fs against real evidence with published answer keys and The
//! Sleuth Kit 4.11.1 oracle outputs (`../shared/real-images`). Skipped with
//! a notice when the folder is absent.

mod support;

use std::path::Path;

use caseload_fs::{FsKind, open_filesystem, open_volume_system};
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
