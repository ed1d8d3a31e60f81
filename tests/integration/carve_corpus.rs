//! The carve stage against corpus-gen ground truth (`manifest.json`):
//!
//! - every contiguous carvable item (residue and deleted content) is carved
//!   from the unallocated space with its type, offset and MD5, validated,
//!   and its case file holds exactly those bytes (recall 100%);
//! - at least 95% of the carved data items are manifest items (precision);
//! - a fragmented item is never reported as a valid whole file, by data or
//!   by meta carving;
//! - meta carving recovers every deleted file's entry (name, size) and the
//!   content of every intact one (MD5);
//! - the whole image scope in unaligned mode also carves every contiguous
//!   allocated file of a carvable type (a fragmented one along the chain
//!   the file system maps for it) and every contiguous item, except
//!   (at most 10%) those whose header lies inside an item of the same
//!   family that a fragmented file before it left open, which must then
//!   have ended broken, never valid;
//! - the database rows and the case files are identical with 1 and 2
//!   threads.

use crate::common;

use caseload_corpus::content::Kind;
use caseload_corpus::manifest::{EntryKind, Manifest};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn corpus(dir: &Path, size: &str, seed: &str, profile: &str) -> (PathBuf, Manifest) {
    common::corpus(dir, &["--size", size, "--seed", seed, "--profile", profile])
}

/// One `carved_items` row.
#[derive(Debug, Clone)]
struct Row {
    method: String,
    offset: u64,
    length: u64,
    kind_of_item: String,
    validation: String,
    md5: Option<String>,
    case_path: Option<String>,
    name: Option<String>,
    size: Option<u64>,
    deleted: Option<bool>,
    /// Runs in `extents` (more than one: carved along a file's map).
    fragments: usize,
}

/// A finished carve run: its case directory, rows, a canonical dump of
/// the table and of the carved files.
struct Carved {
    case: tempfile::TempDir,
    rows: Vec<Row>,
    dump: String,
}

fn carve(image: &Path, threads: &str, options: &[&str]) -> Carved {
    let case = tempfile::tempdir().unwrap();
    common::run_ok(
        common::stage_run("filesystem,carve", image, case.path(), options)
            .args(["--threads", threads]),
    );
    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut rows = Vec::new();
    let mut st = conn
        .prepare(
            "SELECT method, offset, length, type, validation, md5, case_path, name, size, deleted,
                    coalesce(json_array_length(extents), 0)
             FROM carved_items ORDER BY id",
        )
        .unwrap();
    let mut it = st.query([]).unwrap();
    while let Some(r) = it.next().unwrap() {
        rows.push(Row {
            method: r.get(0).unwrap(),
            offset: r.get::<_, i64>(1).unwrap() as u64,
            length: r.get::<_, i64>(2).unwrap() as u64,
            kind_of_item: r.get(3).unwrap(),
            validation: r.get(4).unwrap(),
            md5: r.get(5).unwrap(),
            case_path: r.get(6).unwrap(),
            name: r.get(7).unwrap(),
            size: r.get::<_, Option<i64>>(8).unwrap().map(|s| s as u64),
            deleted: r.get(9).unwrap(),
            fragments: r.get::<_, i64>(10).unwrap() as usize,
        });
    }
    let errors: i64 = conn
        .query_row(
            "SELECT count(*) FROM processing_errors WHERE severity = 'error'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(errors, 0, "processing errors on a clean corpus");
    // Every column, for comparing runs.
    let mut dump = String::new();
    let mut st = conn
        .prepare("SELECT * FROM carved_items ORDER BY id")
        .unwrap();
    let n = st.column_count();
    let mut it = st.query([]).unwrap();
    while let Some(r) = it.next().unwrap() {
        for i in 0..n {
            let v: rusqlite::types::Value = r.get(i).unwrap();
            let v = match v {
                rusqlite::types::Value::Real(x) => format!("{x:.9}"),
                other => format!("{other:?}"),
            };
            dump.push_str(&v);
            dump.push('|');
        }
        dump.push('\n');
    }
    // The carved files: relative path and MD5.
    let mut files = BTreeMap::new();
    list_files(&case.path().join("carved"), case.path(), &mut files);
    for (p, m) in &files {
        dump.push_str(&format!("{p} {m}\n"));
    }
    Carved { case, rows, dump }
}

fn list_files(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            list_files(&p, root, out);
        } else {
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            out.insert(rel, common::md5_hex(&std::fs::read(&p).unwrap()));
        }
    }
}

fn type_name(kind: &Kind) -> String {
    serde_json::to_value(kind)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

/// The data row carving item (`offset`, `md5`), checked against its case
/// file.
fn carved_at<'a>(c: &'a Carved, offset: u64, md5: &str) -> Option<&'a Row> {
    let row = c
        .rows
        .iter()
        .find(|r| r.method == "data" && r.offset == offset && r.md5.as_deref() == Some(md5))?;
    let path = c.case.path().join(row.case_path.as_ref().unwrap());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, row.length, "{path:?}");
    assert_eq!(
        common::md5_hex(&bytes),
        md5,
        "{path:?}: case file differs from its row"
    );
    Some(row)
}

#[test]
fn corpus_carving_matches_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let (image, manifest) = corpus(dir.path(), "96MiB", "3", "suspect");
    let one = carve(&image, "1", &[]);
    let two = carve(&image, "2", &[]);
    assert!(
        one.dump == two.dump,
        "carved items or files differ between 1 and 2 threads"
    );
    let c = &two;

    // Recall: every contiguous item, with its type, offset and MD5.
    let contiguous: Vec<_> = manifest.carvable.iter().filter(|i| i.contiguous).collect();
    assert!(
        contiguous.len() >= 20,
        "corpus too small to mean anything: {} items",
        contiguous.len()
    );
    let mut types = BTreeSet::new();
    for item in &contiguous {
        let t = type_name(&item.content_type);
        let row = carved_at(c, item.offset, &item.md5).unwrap_or_else(|| {
            let near: Vec<_> = c.rows.iter().filter(|r| r.offset == item.offset).collect();
            panic!(
                "{t} item at {} ({} bytes, {:?}) not carved; rows there: {near:?}",
                item.offset, item.length, item.source
            )
        });
        assert_eq!(row.kind_of_item, t, "type of the item at {}", item.offset);
        assert_eq!(row.length, item.length);
        assert_eq!(
            row.validation, "valid",
            "{t} item at {} carved whole but not validated",
            item.offset
        );
        types.insert(t);
    }
    assert!(types.len() >= 6, "too few types exercised: {types:?}");

    // Precision: carved data items that are manifest items.
    let truth: BTreeSet<(u64, &str)> = contiguous
        .iter()
        .map(|i| (i.offset, i.md5.as_str()))
        .collect();
    let data: Vec<&Row> = c.rows.iter().filter(|r| r.method == "data").collect();
    let right = data
        .iter()
        .filter(|r| truth.contains(&(r.offset, r.md5.as_deref().unwrap_or(""))))
        .count();
    let wrong: Vec<_> = data
        .iter()
        .filter(|r| !truth.contains(&(r.offset, r.md5.as_deref().unwrap_or(""))))
        .collect();
    assert!(
        right * 100 >= data.len() * 95,
        "precision {right}/{}: {wrong:?}",
        data.len()
    );

    // Fragmented items: never a valid whole file at their first byte.
    for item in manifest.carvable.iter().filter(|i| !i.contiguous) {
        for r in c.rows.iter().filter(|r| r.offset == item.offset) {
            assert_ne!(
                r.validation, "valid",
                "fragmented item at {} reported valid: {r:?}",
                item.offset
            );
        }
    }

    // Meta carving: every deleted file's entry; intact ones with content.
    let meta: Vec<&Row> = c.rows.iter().filter(|r| r.method == "meta").collect();
    let mut intact = 0;
    for f in manifest
        .files
        .iter()
        .filter(|f| f.deleted && f.kind == EntryKind::File)
    {
        let name = f.tsk_path.rsplit('/').next().unwrap();
        let found: Vec<&&Row> = meta
            .iter()
            .filter(|r| {
                r.name.as_deref() == Some(name) && r.size == Some(f.size) && r.deleted == Some(true)
            })
            .collect();
        assert!(
            !found.is_empty(),
            "deleted {} ({} bytes) not meta-carved",
            f.tsk_path,
            f.size
        );
        if f.intact && f.size > 0 {
            intact += 1;
            assert!(
                found.iter().any(|r| r.md5 == f.md5),
                "content of intact deleted {} not recovered: {found:?}",
                f.tsk_path
            );
        }
        for r in &found {
            if r.validation == "valid" {
                assert_eq!(r.md5, f.md5, "{}: wrong content reported valid", f.tsk_path);
            }
        }
    }
    assert!(intact >= 10, "only {intact} intact deleted files");
}

#[test]
fn whole_image_unaligned_carves_allocated_files_too() {
    let dir = tempfile::tempdir().unwrap();
    let (image, manifest) = corpus(dir.path(), "64MiB", "5", "workstation");
    let c = carve(
        &image,
        "2",
        &[
            "carve.scope=\"image\"",
            "carve.aligned=false",
            "carve.keep_broken=true",
            "carve.meta=false",
        ],
    );
    assert!(c.rows.iter().all(|r| r.method == "data"));
    let carvable = [
        "jpeg", "png", "gif", "pdf", "zip", "docx", "xlsx", "sqlite", "eml", "html",
    ];
    let (mut checked, mut swallowed, mut followed) = (0, 0, 0);
    for f in manifest.files.iter().filter(|f| f.allocated) {
        let (Some(kind), Some(md5)) = (&f.content_type, &f.md5) else {
            continue;
        };
        let t = type_name(kind);
        if !carvable.contains(&t.as_str()) || f.size == 0 {
            continue;
        }
        if f.extents.len() > 1 {
            // Fragmented: its contiguous carve breaks off, and it is carved
            // again along the chain the file system maps for it.
            let at = f.extents[0].offset;
            let Some(row) = c.rows.iter().find(|r| r.offset == at && r.fragments > 1) else {
                // Its contiguous carve did not break: the container's
                // structure ends in the first fragment (see below), so
                // nothing sent the carver along the file's map.
                assert!(
                    c.rows.iter().any(|r| r.offset == at
                        && r.fragments <= 1
                        && r.validation == "valid"
                        && r.length == f.size),
                    "fragmented {} ({t}) not followed",
                    f.path
                );
                continue;
            };
            assert_eq!(row.validation, "valid", "{}: {row:?}", f.path);
            assert_eq!(row.md5.as_deref(), Some(md5.as_str()), "{}", f.path);
            assert_eq!(row.fragments, f.extents.len(), "{}", f.path);
            followed += 1;
            continue;
        }
        checked += 1;
        let at = f.extents[0].offset;
        let Some(row) = carved_at(&c, at, md5) else {
            // A header inside an open item of its family is taken as part
            // of it (a JPEG's thumbnail, an OOXML part): when that item was
            // a fragmented file read on into this one, it must have ended
            // broken, not valid.
            let outer = c
                .rows
                .iter()
                .find(|r| r.fragments <= 1 && r.offset < at && at < r.offset + r.length)
                .unwrap_or_else(|| panic!("allocated {} ({t}) not carved from the image", f.path));
            // Unless the fragmented file's whole structure lies in its
            // first fragment (an OOXML whose end record, padded by a
            // comment, comes before the break): then the contiguous read
            // is a valid container of the file's size, its comment bytes
            // being the next file's, which no carver can tell.
            let structure_in_first_fragment = manifest.files.iter().any(|g| {
                g.extents.len() > 1
                    && g.extents[0].offset == outer.offset
                    && g.size == outer.length
                    && outer.md5 != g.md5
            });
            if !structure_in_first_fragment {
                assert_ne!(outer.validation, "valid", "{} inside {outer:?}", f.path);
            }
            swallowed += 1;
            continue;
        };
        assert_eq!(row.kind_of_item, t, "{}", f.path);
        assert_eq!(row.validation, "valid", "{}", f.path);
    }
    assert!(checked >= 20, "only {checked} allocated files checked");
    assert!(followed >= 1, "no fragmented allocated file followed");
    for item in &manifest.carvable {
        let found = carved_at(&c, item.offset, &item.md5).is_some();
        if item.contiguous {
            checked += 1;
        }
        if !found && item.contiguous {
            let outer = c
                .rows
                .iter()
                .find(|r| {
                    r.fragments <= 1 && r.offset < item.offset && item.offset < r.offset + r.length
                })
                .unwrap_or_else(|| panic!("contiguous item at {} not carved", item.offset));
            assert_ne!(outer.validation, "valid", "item inside {outer:?}");
            swallowed += 1;
        }
        if !item.contiguous {
            assert!(!found, "fragmented item at {} carved whole", item.offset);
            for r in c.rows.iter().filter(|r| r.offset == item.offset) {
                assert_ne!(r.validation, "valid", "fragmented item: {r:?}");
            }
        }
    }
    assert!(
        swallowed * 10 <= checked,
        "{swallowed} of {checked} items lost inside broken items"
    );
}
