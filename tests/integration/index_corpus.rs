//! The index stage against corpus-gen ground truth: every planted keyword
//! query returns exactly the manifest's items (allocated files and intact
//! deleted files; deleted files whose content is not intact may or may not
//! hold their token, and are the only extras allowed), tokens planted
//! across cluster and fragment boundaries are found through file-level
//! extraction, and the whole index content (every item's words) is the
//! same with 1 and 2 threads. With the carve stage, intact carvable items'
//! tokens are found in carved items too.

use crate::common;
use crate::index_support;

use caseload_corpus::manifest::Manifest;
use index_support::{Hit, run, search};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn corpus(dir: &Path, size: &str, seed: &str) -> (PathBuf, Manifest) {
    common::corpus(dir, &["--size", size, "--seed", seed])
}

/// files.id by (path, deleted).
fn file_ids(case: &Path) -> BTreeMap<(String, bool), i64> {
    let conn = rusqlite::Connection::open(case.join("case.sqlite")).unwrap();
    let mut stmt = conn
        .prepare("SELECT path, allocated, id FROM files")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                (r.get::<_, String>(0)?, !r.get::<_, bool>(1)?),
                r.get::<_, i64>(2)?,
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

pub(crate) fn check_keywords(manifest: &Manifest, case: &Path, label: &str) {
    let ids = file_ids(case);
    let id_of = |tsk_path: &str, deleted: bool| -> i64 {
        *ids.get(&(tsk_path.to_string(), deleted))
            .unwrap_or_else(|| panic!("{label}: {tsk_path} not in the files table"))
    };
    // Files whose content the manifest does not vouch for.
    let unvouched: BTreeSet<i64> = manifest
        .files
        .iter()
        .filter(|f| !f.intact && f.deleted)
        .map(|f| id_of(&f.tsk_path, f.deleted))
        .collect();
    let mut expected: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
    let (mut cluster, mut fragment, mut deleted) = (0, 0, 0);
    for f in &manifest.files {
        for k in &f.keywords {
            let set = expected.entry(k.token.as_str()).or_default();
            if f.intact {
                set.insert(id_of(&f.tsk_path, f.deleted));
                cluster += k.raw.iter().filter(|o| o.crosses_cluster_boundary).count();
                fragment += k.raw.iter().filter(|o| o.crosses_fragment_boundary).count();
                deleted += usize::from(f.deleted);
            }
        }
    }
    assert!(expected.len() >= 10, "{label}: the corpus plants keywords");
    assert!(
        cluster > 0,
        "{label}: no token crosses a cluster boundary; the test would prove nothing"
    );
    eprintln!(
        "{label}: {} tokens; intact occurrences crossing clusters {cluster}, fragments {fragment}; in deleted files {deleted}",
        expected.len()
    );
    for (token, want) in &expected {
        let got = search(case, token, false);
        let files: BTreeSet<i64> = got
            .iter()
            .filter(|h| h.kind == "file")
            .map(|h| h.id)
            .collect();
        let missing: Vec<_> = want.difference(&files).collect();
        assert!(
            missing.is_empty(),
            "{label}: {token} not found in files {missing:?} (got {got:?})"
        );
        let extra: Vec<_> = files
            .difference(want)
            .filter(|id| !unvouched.contains(id))
            .collect();
        assert!(
            extra.is_empty(),
            "{label}: {token} found in unexpected files {extra:?}"
        );
        assert!(got.iter().all(|h| h.hits >= 1));
    }
}

/// Every item's words: a regex over all extracted text, as search prints it.
fn whole_index(case: &Path) -> Vec<Hit> {
    let mut all = search(case, r"[A-Za-z0-9@._-]{3,}", true);
    all.sort();
    all
}

/// The segments `index/meta.json` lists, by id as in file names.
fn live_segments(index: &Path) -> Vec<String> {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(index.join("meta.json")).unwrap()).unwrap();
    meta["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["segment_id"].as_str().unwrap().replace('-', ""))
        .collect()
}

/// Every segment file in `index` belongs to a segment `meta.json` lists.
fn only_live_segment_files(index: &Path) {
    let live = live_segments(index);
    assert!(!live.is_empty());
    for entry in std::fs::read_dir(index).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "meta.json" {
            continue;
        }
        let id = name.split('.').next().unwrap_or_default();
        assert!(
            live.iter().any(|l| l == id),
            "{name} belongs to no live segment ({live:?})"
        );
    }
}

#[test]
fn planted_keywords_are_found_exactly_and_threads_do_not_matter() {
    let work = tempfile::tempdir().unwrap();
    let (image, manifest) = corpus(&work.path().join("c48"), "48MiB", "21");
    let case1 = run(&image, "filesystem,file-hash,index", "1", &[]);
    check_keywords(&manifest, case1.path(), "48MiB 1 thread");
    let case2 = run(&image, "filesystem,file-hash,index", "2", &[]);
    check_keywords(&manifest, case2.path(), "48MiB 2 threads");
    let a = whole_index(case1.path());
    let b = whole_index(case2.path());
    assert!(
        a.len() > 50,
        "the index holds the corpus' items ({})",
        a.len()
    );
    assert_eq!(a, b, "index content differs between 1 and 2 threads");

    // Merged down to one segment per tier: the same content, and nothing
    // but the live segments' files left in the case's index (a merged-away
    // segment's files used to stay behind).
    let merged = run(
        &image,
        "filesystem,file-hash,index",
        "2",
        &["--stage-option", "index.segments_per_tier=1"],
    );
    assert_eq!(whole_index(merged.path()), a, "the merged index differs");
    // A merge ran: two threads leave more segments unmerged.
    let unmerged = live_segments(&case2.path().join("index")).len();
    assert!(
        unmerged > 1,
        "2 threads left {unmerged} segment(s): no merge to test"
    );
    assert_eq!(live_segments(&merged.path().join("index")).len(), 1);
    only_live_segment_files(&merged.path().join("index"));

    // With the carve stage, intact contiguous carvable items are found as
    // carved items.
    let case3 = run(&image, "filesystem,file-hash,carve,index", "2", &[]);
    check_keywords(&manifest, case3.path(), "48MiB with carving");
    let conn = rusqlite::Connection::open(case3.path().join("case.sqlite")).unwrap();
    let mut carved_tokens = 0;
    for item in manifest.carvable.iter().filter(|c| c.contiguous) {
        let carved: Vec<i64> = {
            let mut stmt = conn
                .prepare("SELECT id FROM carved_items WHERE offset = ?1 AND length = ?2")
                .unwrap();
            stmt.query_map([item.offset as i64, item.length as i64], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let Some(&id) = carved.first() else { continue };
        for k in &item.keywords {
            carved_tokens += 1;
            let got = search(case3.path(), &k.token, false);
            assert!(
                got.iter().any(|h| h.kind == "carved" && h.id == id),
                "{}: carved item {id} at {} not found (got {got:?})",
                k.token,
                item.offset
            );
        }
    }
    eprintln!("{carved_tokens} tokens of intact carvable items checked in carved items");
    assert!(
        carved_tokens > 0,
        "no carvable item with tokens was carved; the check proved nothing"
    );
}

#[test]
fn unallocated_space_and_slack_options_add_items() {
    let work = tempfile::tempdir().unwrap();
    let (image, manifest) = corpus(&work.path().join("c48"), "48MiB", "21");
    let case = run(
        &image,
        "filesystem,index",
        "2",
        &[
            "--stage-option",
            "index.unallocated=true",
            "--stage-option",
            "index.slack=true",
        ],
    );
    // Residue (content with no entry anywhere) is found in unallocated space.
    let mut residue_tokens = 0;
    for item in manifest
        .carvable
        .iter()
        .filter(|c| c.contiguous && c.source == caseload_corpus::manifest::CarveSource::Residue)
    {
        for k in item.keywords.iter().filter(|k| {
            k.raw
                .iter()
                .any(|o| o.disk_offset.is_some() && !o.overwritten)
        }) {
            residue_tokens += 1;
            let got = search(case.path(), &k.token, false);
            assert!(
                got.iter().any(|h| h.kind == "unallocated"
                    && (h.id as u64) <= item.offset
                    && item.offset < h.id as u64 + (16 << 20)),
                "{} of residue at {} not found in unallocated space: {got:?}",
                k.token,
                item.offset
            );
        }
    }
    assert!(residue_tokens > 0, "the corpus has residue with tokens");
    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let summary: String = conn
        .query_row(
            "SELECT summary FROM stage_runs WHERE stage = 'index'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let s: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert!(s["items_indexed"].as_u64().unwrap() > 0, "{s}");
    let slack: i64 = conn
        .query_row(
            "SELECT count(*) FROM files WHERE slack IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(slack > 0);
}

#[test]
fn autopsy_chunks_find_the_same_items_in_overlapping_32k_documents() {
    let work = tempfile::tempdir().unwrap();
    let (image, manifest) = corpus(&work.path().join("c40"), "40MiB", "23");
    let stages = "filesystem,file-hash,index";
    let native = run(&image, stages, "2", &[]);
    let autopsy = run(&image, stages, "2", &["--profile", "autopsy"]);
    check_keywords(&manifest, autopsy.path(), "autopsy profile");
    // The same items are in the index (search lists at most 20 of an
    // item's matching words, so the words shown depend on the cut)...
    let items = |case: &Path| -> Vec<(String, i64)> {
        whole_index(case)
            .into_iter()
            .map(|h| (h.kind, h.id))
            .collect()
    };
    assert_eq!(items(native.path()), items(autopsy.path()));
    // ...in more, smaller documents: Autopsy's chunks are at most 32,760
    // bytes with an overlapping window, caseload's own up to 1 MiB.
    let docs = |case: &Path| -> u64 {
        let run: serde_json::Value =
            serde_json::from_slice(&std::fs::read(case.join("run.json")).unwrap()).unwrap();
        let index = run["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "index")
            .unwrap()
            .clone();
        index["summary"]["details"]["documents"].as_u64().unwrap()
    };
    let (n, a) = (docs(native.path()), docs(autopsy.path()));
    assert!(a > n, "autopsy documents {a}, native {n}");
}

/// The ftk4 profile's index keeps dtSearch's words and positions and no
/// copy of the text: it is smaller than native's for the same text, its
/// searches (terms, a prefix, a phrase, boolean) give every native item
/// with the same hit counts, counted from the positions, and `--regex`,
/// which needs the text, is refused saying why. (ftk4 items that native
/// has not, such as expanded archive members, are left out of the
/// comparison.)
#[test]
fn the_ftk4_index_keeps_no_text_and_counts_hits_from_positions() {
    let test = "the_ftk4_index_keeps_no_text_and_counts_hits_from_positions";
    if !common::have_postgres(test) {
        return;
    }
    let work = common::pg_tempdir();
    let (image, manifest) = corpus(&work.path().join("c40"), "40MiB", "23");
    let stages = "filesystem,file-hash,index";
    let native = work.path().join("native");
    let ftk4 = work.path().join("ftk4");
    for d in [&native, &ftk4] {
        std::fs::create_dir_all(d).unwrap();
    }
    index_support::run_into(&native, &image, stages, "2", &[]);
    index_support::run_into(&ftk4, &image, stages, "2", &["--profile", "ftk4"]);
    common::assert_no_server_left(work.path());

    let detail = |case: &Path, key: &str| -> f64 {
        let run: serde_json::Value =
            serde_json::from_slice(&std::fs::read(case.join("run.json")).unwrap()).unwrap();
        let stages = run["stages"].as_array().unwrap().clone();
        let index = stages.iter().find(|s| s["name"] == "index").unwrap();
        index["summary"]["details"][key].as_f64().unwrap()
    };
    let (n, f) = (
        detail(&native, "index_share_of_text"),
        detail(&ftk4, "index_share_of_text"),
    );
    eprintln!("index bytes per byte of text: native {n:.3}, ftk4 {f:.3}");
    assert!(f < 0.85 * n, "ftk4 {f:.3} against native {n:.3}");

    let mut tokens: Vec<String> = manifest
        .files
        .iter()
        .flat_map(|f| f.keywords.iter().map(|k| k.token.clone()))
        .collect();
    tokens.sort();
    tokens.dedup();
    assert!(tokens.len() >= 4, "{tokens:?}");
    let queries = [
        tokens[0].clone(),
        format!("{} OR {}", tokens[1], tokens[2]),
        format!("{}*", &tokens[3][..5]),
        "\"of the\"".to_string(),
        "the -zzzzzz".to_string(),
    ];
    // By kind and label (row ids differ between the case databases; a
    // path may be both a deleted and a live file).
    let by_label = |hits: Vec<Hit>| -> BTreeMap<(String, String), Vec<u64>> {
        let mut m: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
        for h in hits {
            m.entry((h.kind, h.label)).or_default().push(h.hits);
        }
        m.values_mut().for_each(|v| v.sort());
        m
    };
    for q in &queries {
        let a = by_label(search(&native, q, false));
        let b = by_label(search(&ftk4, q, false));
        assert!(!a.is_empty(), "{q}: nothing found");
        for (item, hits) in &a {
            assert_eq!(b.get(item), Some(hits), "{q}: {item:?}");
        }
    }

    let out = common::caseload()
        .args(["search", "--regex", "--case"])
        .arg(&ftk4)
        .arg("qz[a-z]+")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("keeps no copy of the text"), "{err}");
    assert!(!search(&native, "qz[a-z]+", true).is_empty());
}
