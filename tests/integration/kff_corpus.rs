//! The kff stage against corpus-gen ground truth: with the corpus's four
//! hash-set files imported (`NSRLFile.txt` and `RDSv3.db` as two known sets,
//! `notable.md5` + `notable.sha1` as one notable set), exactly the files
//! whose content is a planted known or notable hash are hit, by exactly the
//! sets that hold it, among the decoys; with the carve stage built, carved
//! items too. The library holds every decoy (counts checked), a second run
//! reuses it without re-importing, and the hits do not depend on the thread
//! count.
//!
//! Decoys: 1 million per set here (each set file holds decoys + planted
//! entries), so the test stays near half a minute on 2 cores. The issue's
//! 10-million-decoy case is the same test with `CASELOAD_KFF_DECOYS=10000000`
//! (run by hand; `benches/scripts/kff-bench.sh` covers 10-million-entry
//! imports and lookups).

use crate::common;

use caseload_corpus::manifest::{EntryKind, Manifest};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn decoys() -> u64 {
    std::env::var("CASELOAD_KFF_DECOYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn corpus(dir: &Path, decoys: u64) -> Manifest {
    // The suspect profile plants more notable files (5%) than the default.
    let out = common::caseload()
        .args([
            "corpus",
            "--size",
            "64MiB",
            "--seed",
            "5",
            "--profile",
            "suspect",
            "--decoys",
            &decoys.to_string(),
            "--out",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Run `stages` with the corpus's hash sets into a fresh case directory;
/// returns (case, stderr), or `None` when a stage is not built.
fn run(
    corpus: &Path,
    library: &Path,
    stages: &str,
    threads: &str,
) -> Option<(tempfile::TempDir, String)> {
    let case = tempfile::tempdir().unwrap();
    let out = common::caseload()
        .args([
            "run",
            "--stages",
            stages,
            "--cache",
            "warm",
            "--threads",
            threads,
        ])
        .arg("--evidence")
        .arg(corpus.join("image.dd"))
        .arg("--kff-library")
        .arg(library)
        .args(
            [
                "known=NSRLFile.txt",
                "known=RDSv3.db",
                "notable=notable.md5",
                "notable=notable.sha1",
            ]
            .iter()
            .flat_map(|spec| {
                let (cat, file) = spec.split_once('=').unwrap();
                [
                    "--hashset".to_string(),
                    format!("{cat}={}", corpus.join(file).display()),
                ]
            }),
        )
        .args(
            ["--database", "--case", "--temp"]
                .iter()
                .flat_map(|f| [f.to_string(), case.path().display().to_string()]),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() && stderr.contains("not built") {
        return None;
    }
    assert!(out.status.success(), "{stderr}");
    Some((case, stderr))
}

/// One kff hit: (set, category, detail).
type Hit = (String, String, String);

/// Per item kind and id: (label, md5, sha1, kff column, hits).
type Items = BTreeMap<
    (String, i64),
    (
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        BTreeSet<Hit>,
    ),
>;

fn items(case: &Path) -> Items {
    let conn = rusqlite::Connection::open(case.join("case.sqlite")).unwrap();
    let mut out = Items::new();
    for (kind, sql) in [
        (
            "file",
            "SELECT id, path || '|' || allocated, md5, sha1, kff FROM files WHERE kind = 'file'",
        ),
        (
            "carved",
            "SELECT id, coalesce(case_path, ''), md5, sha1, kff FROM carved_items",
        ),
    ] {
        let mut st = conn.prepare(sql).unwrap();
        let mut rows = st.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            out.insert(
                (kind.to_string(), r.get(0).unwrap()),
                (
                    r.get(1).unwrap(),
                    r.get(2).unwrap(),
                    r.get(3).unwrap(),
                    r.get(4).unwrap(),
                    BTreeSet::new(),
                ),
            );
        }
    }
    let mut st = conn
        .prepare("SELECT item_kind, item_id, name, category, detail FROM hits WHERE kind = 'kff'")
        .unwrap();
    let mut rows = st.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let key: (String, i64) = (r.get(0).unwrap(), r.get(1).unwrap());
        let item = out
            .get_mut(&key)
            .unwrap_or_else(|| panic!("hit on a missing item {key:?}"));
        assert!(
            item.4
                .insert((r.get(2).unwrap(), r.get(3).unwrap(), r.get(4).unwrap()))
        );
    }
    out
}

fn sets_of(library: &Path) -> BTreeMap<String, serde_json::Value> {
    let out = common::caseload()
        .args(["hashset", "list", "--json", "--library"])
        .arg(library)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

#[test]
fn exactly_the_planted_known_and_notable_items_are_hit_among_decoys() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("corpus");
    let decoys = decoys();
    let manifest = corpus(&dir, decoys);
    let hs = &manifest.hash_sets;
    assert_eq!(hs.decoys, decoys);
    assert!(hs.known_planted > 0 && hs.notable_planted > 0, "{hs:?}");
    let library: PathBuf = work.path().join("shared").join("kff.sqlite");
    std::fs::create_dir_all(library.parent().unwrap()).unwrap();

    let with_carve = "filesystem,file-hash,carve,kff";
    let (case, stderr, carved) = match run(&dir, &library, with_carve, "2") {
        Some((c, e)) => (c, e, true),
        None => {
            eprintln!("NOTE: the carve stage is not built; checking files only");
            let (c, e) = run(&dir, &library, "filesystem,file-hash,kff", "2").unwrap();
            (c, e, false)
        }
    };
    assert!(!stderr.contains("reused"), "{stderr}");

    // The library holds every entry of every file: decoys + planted.
    let sets = sets_of(&library);
    assert_eq!(
        sets.keys().map(String::as_str).collect::<Vec<_>>(),
        ["NSRLFile", "RDSv3", "notable"]
    );
    let known_n = decoys + hs.known_planted;
    let notable_n = decoys + hs.notable_planted;
    for (name, category, md5, sha1, sha256, records) in [
        ("NSRLFile", "known", known_n, known_n, 0, known_n),
        ("RDSv3", "known", known_n, known_n, known_n, known_n),
        // One record per line of each of the two files.
        ("notable", "notable", notable_n, notable_n, 0, 2 * notable_n),
    ] {
        let s = &sets[name];
        assert_eq!(s["category"], category, "{s}");
        assert_eq!(s["status"], "complete", "{s}");
        assert_eq!(s["md5"], md5, "{s}");
        assert_eq!(s["sha1"], sha1, "{s}");
        assert_eq!(s["sha256"], sha256, "{s}");
        assert_eq!(s["records"], records, "{s}");
        assert_eq!(s["malformed"], 0, "{s}");
        assert_eq!(s["duplicates"], 0, "{s}");
    }

    // Ground truth: the planted hashes are those of the manifest's files
    // marked known / notable (decoys never equal one). Every set holds MD5
    // and SHA-1 (file-hash and carve compute both by default).
    let mut known: [BTreeSet<String>; 2] = Default::default();
    let mut notable: [BTreeSet<String>; 2] = Default::default();
    for f in &manifest.files {
        if f.kind != EntryKind::File {
            continue;
        }
        for (i, h) in [&f.md5, &f.sha1].into_iter().enumerate() {
            let Some(h) = h else { continue };
            if f.known {
                known[i].insert(h.clone());
            }
            if f.notable {
                notable[i].insert(h.clone());
            }
        }
    }
    let got = items(case.path());
    let expect = |md5: &Option<String>, sha1: &Option<String>| -> BTreeSet<Hit> {
        let mut e = BTreeSet::new();
        for (sets, category, planted) in [
            (&["NSRLFile", "RDSv3"][..], "known", &known),
            (&["notable"][..], "notable", &notable),
        ] {
            let matched: Vec<String> = [("md5", md5), ("sha1", sha1)]
                .into_iter()
                .enumerate()
                .filter_map(|(i, (kind, h))| {
                    h.as_ref()
                        .filter(|h| planted[i].contains(*h))
                        .map(|h| format!("{kind}:{h}"))
                })
                .collect();
            if !matched.is_empty() {
                for set in sets {
                    e.insert((set.to_string(), category.to_string(), matched.join(",")));
                }
            }
        }
        e
    };
    let (mut known_items, mut notable_items, mut hits) = (0, 0, 0);
    for ((kind, id), (label, md5, sha1, kff, item_hits)) in &got {
        let want = expect(md5, sha1);
        assert_eq!(item_hits, &want, "{kind} {id} {label}");
        let verdict = if want.iter().any(|h| h.1 == "notable") {
            notable_items += 1;
            Some("notable")
        } else if !want.is_empty() {
            known_items += 1;
            Some("known")
        } else {
            None
        };
        assert_eq!(kff.as_deref(), verdict, "{kind} {id} {label}");
        hits += want.len();
    }
    // Every allocated or intact planted file is found by its manifest
    // flags, not only by the hashes caseload computed.
    let files: BTreeMap<(String, bool), &BTreeSet<Hit>> = got
        .iter()
        .filter(|(k, _)| k.0 == "file")
        .map(|(_, v)| {
            let (path, alloc) = v.0.rsplit_once('|').unwrap();
            ((path.to_string(), alloc == "0"), &v.4)
        })
        .collect();
    let mut planted_found = 0;
    for f in &manifest.files {
        if f.kind != EntryKind::File || !f.intact || !(f.known || f.notable) {
            continue;
        }
        let h = files
            .get(&(f.tsk_path.clone(), f.deleted))
            .unwrap_or_else(|| panic!("{} not in the files table", f.tsk_path));
        let names: BTreeSet<&str> = h.iter().map(|h| h.0.as_str()).collect();
        assert_eq!(names.contains("NSRLFile"), f.known, "{}", f.path);
        assert_eq!(names.contains("RDSv3"), f.known, "{}", f.path);
        assert_eq!(names.contains("notable"), f.notable, "{}", f.path);
        planted_found += 1;
    }
    assert!(planted_found >= 4, "only {planted_found} planted files");
    assert!(known_items > 0 && notable_items > 0);
    if carved {
        assert!(
            got.iter().any(|(k, v)| k.0 == "carved" && !v.4.is_empty()),
            "no carved item was hit"
        );
    }

    // The stage's report and findings agree with the hits table.
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.path().join("run.json")).unwrap()).unwrap();
    let stage = run_json["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "kff")
        .unwrap();
    let d = &stage["summary"]["details"];
    assert_eq!(d["hits"], hits, "{d}");
    assert_eq!(
        d["known_files"].as_u64().unwrap() + d["known_carved"].as_u64().unwrap(),
        known_items,
        "{d}"
    );
    assert_eq!(
        d["notable_files"].as_u64().unwrap() + d["notable_carved"].as_u64().unwrap(),
        notable_items,
        "{d}"
    );
    assert_eq!(stage["recorded"]["findings"], notable_items, "{stage}");
    // Lookups read the library through the database channel.
    assert!(stage["channels"]["database"]["read_ops"].as_u64().unwrap() > 0);

    // A second run with one thread reuses the library (no re-import) and
    // records the same hits.
    let stages = if carved {
        with_carve
    } else {
        "filesystem,file-hash,kff"
    };
    let (case1, stderr1) = run(&dir, &library, stages, "1").unwrap();
    assert_eq!(stderr1.matches("reused").count(), 3, "{stderr1}");
    assert_eq!(
        items(case1.path()),
        got,
        "hits differ between 1 and 2 threads"
    );

    // `hashset lookup` (the hfind -f counterpart) agrees.
    let md5 = notable[0].iter().next().unwrap();
    let kmd5 = known[0].iter().next().unwrap();
    let absent = "0123456789abcdef0123456789abcdef";
    let mut child = common::caseload()
        .args(["hashset", "lookup", "--library"])
        .arg(&library)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(
            stdin,
            "{}\n{kmd5}\n{absent}\nnot-a-hash",
            md5.to_uppercase()
        )
        .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        format!(
            "{}\tnotable:notable\n{kmd5}\tNSRLFile:known,RDSv3:known\n{absent}\t-\nnot-a-hash\tinvalid\n",
            md5.to_uppercase()
        )
    );
}
