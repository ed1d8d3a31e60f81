//! The carve stage on DFTT images against their published answer keys
//! (`dftt/dftt_ground_truth.json`, transcribed from each test's
//! index.html):
//!
//! - DFTT #8 (JPEG search, NTFS): the five standalone JPEGs with
//!   sector-aligned headers are carved with their published MD5s. Four
//!   start contiguous data; the fifth (file13's ADS) is a stream in five
//!   fragments out of order, which no contiguous carve returns whole: it is
//!   carved again along the clusters NTFS maps for it, and only that item
//!   is valid.
//!   The deleted ones are also recovered by meta carving from their MFT
//!   records, with their names. In unaligned mode the `$UpCase` bytes that
//!   happen to read `FF D8 FF` give no item.
//! - DFTT #6 (FAT undelete): the contiguous deleted files are recovered
//!   from their deleted directory entries with the published MD5s; the
//!   fragmented ones are never reported valid.

use crate::common;

use serde_json::Value;
use std::path::Path;

#[derive(Debug)]
struct Row {
    method: String,
    offset: u64,
    validation: String,
    md5: Option<String>,
    name: Option<String>,
    kind_of_item: String,
    /// Runs in `extents`.
    fragments: usize,
}

fn carve(image: &Path, options: &[&str]) -> Vec<Row> {
    let case = tempfile::tempdir().unwrap();
    common::run_ok(&mut common::stage_run(
        "filesystem,carve",
        image,
        case.path(),
        options,
    ));
    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut st = conn
        .prepare(
            "SELECT method, offset, validation, md5, name, type,
                    coalesce(json_array_length(extents), 0) FROM carved_items ORDER BY id",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok(Row {
            method: r.get(0)?,
            offset: r.get::<_, i64>(1)? as u64,
            validation: r.get(2)?,
            md5: r.get(3)?,
            name: r.get(4)?,
            kind_of_item: r.get(5)?,
            fragments: r.get::<_, i64>(6)? as usize,
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn truth(root: &Path, image: &str) -> Value {
    let all: Value =
        serde_json::from_slice(&std::fs::read(root.join("dftt/dftt_ground_truth.json")).unwrap())
            .unwrap();
    all["images"][image].clone()
}

fn md5_of(files: &Value, path: &str) -> String {
    files
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} not in the answer key"))["md5"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn dftt8_jpegs_are_carved_with_published_md5s() {
    let Some(root) = common::real_images("dftt8_jpegs_are_carved_with_published_md5s") else {
        return;
    };
    let image = root.join("dftt/8-jpeg-search/8-jpeg-search.dd");
    let key = truth(&root, "8-jpeg-search.dd");
    let files = &key["files"];
    let offsets = &key["jpeg_header_offsets_derived_tsk"];
    let aligned: Vec<u64> = offsets["sector_aligned_FFD8FF_offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(aligned.len(), 5);
    // The contiguous standalone JPEGs: allocated, renamed, deleted.
    let standalone = [
        ("alloc/file1.jpg", "alloc\\file1.jpg", true),
        ("alloc/file2.dat", "alloc\\file2.dat", true),
        ("del1/file6.jpg", "del1\\file6.jpg", false),
        ("del2/file7.hmm", "del2\\file7.hmm", false),
    ];
    let fragmented_ads = offsets["misc/file13.dll:here (ADS)"].as_u64().unwrap();
    assert!(aligned.contains(&fragmented_ads));

    let whole = carve(&image, &["carve.scope=\"image\""]);
    let unaligned = carve(&image, &["carve.scope=\"image\"", "carve.aligned=false"]);
    for rows in [&whole, &unaligned] {
        for (key_path, pub_path, _) in standalone {
            let at = offsets[key_path].as_u64().unwrap();
            assert!(aligned.contains(&at));
            let md5 = md5_of(files, pub_path);
            assert!(
                rows.iter().any(|r| r.method == "data"
                    && r.offset == at
                    && r.kind_of_item == "jpeg"
                    && r.validation == "valid"
                    && r.md5.as_deref() == Some(md5.as_str())),
                "{pub_path} at {at} not carved with MD5 {md5}: {rows:?}"
            );
        }
        let md5 = md5_of(files, "misc\\file13.dll:here");
        let at_ads: Vec<&Row> = rows.iter().filter(|r| r.offset == fragmented_ads).collect();
        assert!(
            at_ads.iter().any(|r| r.method == "data"
                && r.kind_of_item == "jpeg"
                && r.validation == "valid"
                && r.md5.as_deref() == Some(md5.as_str())
                && r.fragments == 5),
            "the ADS JPEG not carved along its 5 fragments with MD5 {md5}: {at_ads:?}"
        );
        assert!(
            at_ads
                .iter()
                .all(|r| r.fragments > 1 || r.validation != "valid"),
            "a contiguous carve of the fragmented ADS was reported valid: {at_ads:?}"
        );
    }
    // Without following fragments the ADS gives no valid item.
    let contiguous = carve(
        &image,
        &["carve.scope=\"image\"", "carve.follow_fragments=false"],
    );
    assert!(
        !contiguous
            .iter()
            .any(|r| r.offset == fragmented_ads && r.validation == "valid"),
        "the fragmented ADS JPEG was reported valid by a contiguous carve"
    );
    // `$UpCase` holds FF D8 FF by chance: no item there.
    assert!(!unaligned.iter().any(|r| r.offset == 5_327_279));

    // Default scope: unallocated space holds the deleted JPEGs; meta
    // carving finds their MFT records and recovers them by name.
    let free = carve(&image, &[]);
    for (key_path, pub_path, allocated) in standalone {
        let at = offsets[key_path].as_u64().unwrap();
        let md5 = md5_of(files, pub_path);
        let data = free
            .iter()
            .any(|r| r.method == "data" && r.offset == at && r.md5.as_deref() == Some(&md5));
        assert_eq!(data, !allocated, "{pub_path}: carved from free space");
        if !allocated {
            let name = pub_path.rsplit('\\').next().unwrap();
            assert!(
                free.iter().any(|r| r.method == "meta"
                    && r.name.as_deref() == Some(name)
                    && r.validation == "valid"
                    && r.md5.as_deref() == Some(&md5)),
                "{pub_path}: not recovered from its MFT record: {free:?}"
            );
        }
    }
}

#[test]
fn dftt6_deleted_files_are_recovered_by_meta_carving() {
    let Some(root) = common::real_images("dftt6_deleted_files_are_recovered_by_meta_carving")
    else {
        return;
    };
    let image = root.join("dftt/6-undel-fat/6-fat-undel.dd");
    let key = truth(&root, "6-fat-undel.dd");
    let rows = carve(&image, &[]);
    let deleted = key["deleted_files"].as_array().unwrap();
    let mut contiguous = 0;
    for f in deleted {
        let path = f["path"].as_str().unwrap();
        let name = path.rsplit('\\').next().unwrap();
        // A deleted 8.3 entry whose first byte became 0xE5 shows `_`
        // there, as TSK shows it (entries inside a deleted directory were
        // left as they were).
        let shown = format!("_{}", &name[1..]);
        let found: Vec<&Row> = rows
            .iter()
            .filter(|r| {
                r.method == "meta"
                    && (r.name.as_deref() == Some(name) || r.name == Some(shown.clone()))
            })
            .collect();
        assert!(!found.is_empty(), "{path} not meta-carved: {rows:?}");
        let md5 = f["md5"].as_str().unwrap();
        if f["md5_if_recovered_contiguously"].is_null() {
            contiguous += 1;
            assert!(
                found.iter().any(|r| r.md5.as_deref() == Some(md5)),
                "{path}: content not recovered with MD5 {md5}: {found:?}"
            );
        } else {
            for r in &found {
                assert_ne!(r.validation, "valid", "{path}: fragmented, reported valid");
                assert_ne!(r.md5.as_deref(), Some(md5), "{path}: cannot be whole");
            }
        }
    }
    assert_eq!(contiguous, 3);
}
