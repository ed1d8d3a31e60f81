//! The kff stage on real images with published answer keys
//! (`../shared/real-images`): a notable set made from every file MD5 in the
//! DFTT answer keys (`dftt/dftt_ground_truth.json`) marks `sing.dat` in DFTT
//! #6 (FAT; TSK names the deleted file `_ing.dat`) and its copy `sing1.dat`
//! in DFTT #7 (NTFS), raw and E01. Beyond that: every answer-key file whose
//! published MD5 TSK's `icat` reproduces is marked, and exactly the files
//! whose MD5 is in the set are (the fragmented deleted FAT files, which a
//! contiguous recovery gets wrong as the key predicts, are not).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `md5` value in the answer-key JSON (file MD5s; the image MD5s are
/// `md5_published`/`md5_actual`, and the wrong contiguous-recovery MD5s
/// `md5_if_recovered_contiguously`, are left out).
fn key_md5s(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("md5", serde_json::Value::String(s)) => {
                        out.insert(s.to_ascii_lowercase());
                    }
                    _ => key_md5s(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| key_md5s(v, out)),
        _ => {}
    }
}

/// (path, md5, kff, hit set names) of every file of the case.
type Files = BTreeMap<String, (Option<String>, Option<String>, BTreeSet<String>)>;

fn run(evidence: &Path, set: &Path, library: &Path) -> Files {
    let case = tempfile::tempdir().unwrap();
    common::run_ok(
        common::stage_run("filesystem,file-hash,kff", evidence, case.path(), &[])
            .arg("--hashset")
            .arg(format!("notable={}", set.display()))
            .arg("--kff-library")
            .arg(library),
    );
    let conn = rusqlite::Connection::open(case.path().join("case.sqlite")).unwrap();
    let mut files = Files::new();
    let mut st = conn
        .prepare("SELECT id, path, md5, kff FROM files WHERE kind = 'file'")
        .unwrap();
    let mut ids = BTreeMap::new();
    let mut rows = st.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let path: String = r.get(1).unwrap();
        ids.insert(r.get::<_, i64>(0).unwrap(), path.clone());
        let prev = files.insert(
            path.clone(),
            (r.get(2).unwrap(), r.get(3).unwrap(), BTreeSet::new()),
        );
        assert!(prev.is_none(), "{path} twice");
    }
    let mut st = conn
        .prepare("SELECT item_kind, item_id, name, category FROM hits WHERE kind = 'kff'")
        .unwrap();
    let mut rows = st.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        assert_eq!(r.get::<_, String>(0).unwrap(), "file");
        assert_eq!(r.get::<_, String>(3).unwrap(), "notable");
        let path = &ids[&r.get::<_, i64>(1).unwrap()];
        files.get_mut(path).unwrap().2.insert(r.get(2).unwrap());
    }
    files
}

#[test]
fn dftt_answer_key_set_marks_sing_dat_in_6_and_7() {
    let Some(real) = common::real_images("dftt_answer_key_set_marks_sing_dat_in_6_and_7") else {
        return;
    };
    let key: serde_json::Value =
        serde_json::from_slice(&std::fs::read(real.join("dftt/dftt_ground_truth.json")).unwrap())
            .unwrap();
    let mut md5s = BTreeSet::new();
    key_md5s(&key, &mut md5s);
    assert!(
        md5s.contains("59b20779f69ff9f0ac5fcd2c38835a79"),
        "sing.dat's MD5"
    );
    let work = tempfile::tempdir().unwrap();
    let set = work.path().join("dftt.md5");
    std::fs::write(
        &set,
        md5s.iter().map(|h| format!("{h}\n")).collect::<String>(),
    )
    .unwrap();
    let library = work.path().join("kff.sqlite");

    for (key_name, sing, evidence) in [
        (
            "6-fat-undel.dd",
            "_ing.dat",
            "dftt/6-undel-fat/6-fat-undel.dd",
        ),
        ("6-fat-undel.dd", "_ing.dat", "dftt-e01/6-fat-undel.E01"),
        (
            "7-ntfs-undel.dd",
            "sing1.dat",
            "dftt/7-undel-ntfs/7-ntfs-undel.dd",
        ),
        ("7-ntfs-undel.dd", "sing1.dat", "dftt-e01/7-ntfs-undel.E01"),
    ] {
        let files = run(&real.join(evidence), &set, &library);
        let (md5, kff, hits) = &files
            .get(sing)
            .unwrap_or_else(|| panic!("{evidence}: no {sing} in {:?}", files.keys()));
        assert_eq!(
            md5.as_deref(),
            Some("59b20779f69ff9f0ac5fcd2c38835a79"),
            "{evidence}"
        );
        assert_eq!(kff.as_deref(), Some("notable"), "{evidence}: {sing}");
        assert_eq!(
            hits.iter().map(String::as_str).collect::<Vec<_>>(),
            ["dftt"],
            "{evidence}"
        );
        // Exactly the files whose MD5 is in the set are marked.
        for (path, (md5, kff, hits)) in &files {
            let listed = md5.as_ref().is_some_and(|m| md5s.contains(m));
            assert_eq!(kff.is_some(), listed, "{evidence}: {path} {md5:?}");
            assert_eq!(hits.len(), usize::from(listed), "{evidence}: {path}");
        }
        // Every key file whose published MD5 TSK reproduces is marked.
        let marked: BTreeSet<&str> = files
            .values()
            .filter(|f| f.1.is_some())
            .filter_map(|f| f.0.as_deref())
            .collect();
        let entries = key["images"][key_name]["deleted_files"].as_array().unwrap();
        let mut reproducible = 0;
        for e in entries {
            let published = e["md5"].as_str().unwrap();
            if e["tsk_icat_md5"].as_str() == Some(published) {
                reproducible += 1;
                assert!(
                    marked.contains(published),
                    "{evidence}: {} ({published}) not marked",
                    e["path"]
                );
            }
        }
        assert!(reproducible >= 3, "{evidence}: {reproducible}");
    }
}
