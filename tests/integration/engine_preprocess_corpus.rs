//! Pre-processing against corpus-gen ground truth: the files table equals
//! the manifest (names, sizes, allocated/deleted, MD5/SHA-1 of every
//! allocated file and every intact deleted file, duplicate groups), for the
//! raw image and for the same image as E01, with 1 and 2 threads.

use crate::common;

use caseload_corpus::manifest::{EntryKind, Manifest};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

struct Row {
    size: i64,
    allocated: bool,
    md5: Option<String>,
    sha1: Option<String>,
    duplicate_group: Option<i64>,
    kind: String,
}

fn corpus(dir: &Path, size: &str, seed: &str) -> (PathBuf, Manifest) {
    common::corpus(dir, &["--size", size, "--seed", seed])
}

/// Run filesystem + file-hash and read the files table, keyed by
/// (path, deleted).
fn files_table(evidence: &Path, threads: &str) -> (BTreeMap<(String, bool), Row>, String) {
    let case = tempfile::tempdir().unwrap();
    let out = common::caseload()
        .args([
            "run",
            "--stages",
            "filesystem,file-hash",
            "--cache",
            "warm",
            "--threads",
            threads,
        ])
        .arg("--evidence")
        .arg(evidence)
        .args(
            ["--database", "--case", "--temp"]
                .iter()
                .flat_map(|f| [f.to_string(), case.path().display().to_string()]),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut stmt = conn
        .prepare("SELECT path, allocated, size, md5, sha1, duplicate_group, kind FROM files WHERE kind IN ('file', 'directory')")
        .unwrap();
    let mut rows = BTreeMap::new();
    let mut iter = stmt.query([]).unwrap();
    while let Some(r) = iter.next().unwrap() {
        let path: String = r.get(0).unwrap();
        let allocated: bool = r.get(1).unwrap();
        let prev = rows.insert(
            (path.clone(), !allocated),
            Row {
                size: r.get(2).unwrap(),
                allocated,
                md5: r.get(3).unwrap(),
                sha1: r.get(4).unwrap(),
                duplicate_group: r.get(5).unwrap(),
                kind: r.get(6).unwrap(),
            },
        );
        assert!(prev.is_none(), "{path} listed twice");
    }
    let errors: i64 = conn
        .query_row(
            "SELECT count(*) FROM processing_errors WHERE severity = 'error'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // A canonical dump for comparing runs.
    let mut dump = String::new();
    let mut stmt = conn
        .prepare("SELECT path, allocated, size, md5, sha1, signature, extension_mismatch, round(entropy, 6), duplicate_group FROM files ORDER BY path, allocated")
        .unwrap();
    let mut iter = stmt.query([]).unwrap();
    while let Some(r) = iter.next().unwrap() {
        for i in 0..9 {
            let v: rusqlite::types::Value = r.get(i).unwrap();
            dump.push_str(&format!("{v:?}|"));
        }
        dump.push('\n');
    }
    assert_eq!(
        errors, 0,
        "{evidence:?}: processing errors on a clean corpus"
    );
    (rows, dump)
}

fn check_against_manifest(manifest: &Manifest, rows: &BTreeMap<(String, bool), Row>, label: &str) {
    let mut groups: BTreeMap<u64, BTreeSet<Option<i64>>> = BTreeMap::new();
    for f in &manifest.files {
        let key = (f.tsk_path.clone(), f.deleted);
        let row = rows
            .get(&key)
            .unwrap_or_else(|| panic!("{label}: {} (deleted={}) missing", f.tsk_path, f.deleted));
        assert_eq!(row.allocated, f.allocated, "{label}: {}", f.path);
        match f.kind {
            EntryKind::Directory => assert_eq!(row.kind, "directory", "{label}: {}", f.path),
            // A symbolic link is a file whose content is its target.
            EntryKind::File | EntryKind::Symlink => {
                assert_eq!(row.kind, "file", "{label}: {}", f.path);
                assert_eq!(row.size as u64, f.size, "{label}: size of {}", f.path);
                if f.intact {
                    assert_eq!(row.md5, f.md5, "{label}: MD5 of {}", f.path);
                    assert_eq!(row.sha1, f.sha1, "{label}: SHA-1 of {}", f.path);
                }
                if let Some(g) = f.duplicate_group
                    && f.intact
                {
                    groups.entry(g).or_default().insert(row.duplicate_group);
                }
            }
        }
    }
    // Every manifest file and directory is listed, and nothing else.
    assert_eq!(rows.len(), manifest.files.len(), "{label}: record count");
    // Each planted duplicate group is one caseload duplicate group.
    assert!(!groups.is_empty(), "{label}: the corpus plants duplicates");
    for (g, ids) in &groups {
        assert_eq!(
            ids.len(),
            1,
            "{label}: planted group {g} split into {ids:?}"
        );
        assert!(
            ids.iter().all(Option::is_some),
            "{label}: planted group {g} not flagged"
        );
    }
}

#[test]
fn files_table_equals_the_manifest_raw_e01_and_any_thread_count() {
    let work = tempfile::tempdir().unwrap();
    // 48 MiB is FAT32 with 512-byte clusters; 36 MiB falls back to FAT16.
    for (size, seed) in [("48MiB", "21"), ("36MiB", "22")] {
        let dir = work.path().join(size);
        let (image, manifest) = corpus(&dir, size, seed);
        let (rows, dump1) = files_table(&image, "1");
        check_against_manifest(&manifest, &rows, &format!("{size} raw"));
        let (_, dump2) = files_table(&image, "2");
        assert_eq!(
            dump1, dump2,
            "{size}: results differ between 1 and 2 threads"
        );

        let e01 = dir.join("image-fast");
        let out = common::caseload()
            .arg("convert")
            .arg(&image)
            .args(["--to", "e01", "--compression", "fast", "--out"])
            .arg(&e01)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (rows, dump_e01) = files_table(&e01.with_extension("E01"), "2");
        check_against_manifest(&manifest, &rows, &format!("{size} E01"));
        assert_eq!(
            dump1, dump_e01,
            "{size}: E01 and raw give different files tables"
        );
    }
}
