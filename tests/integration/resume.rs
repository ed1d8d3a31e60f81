//! Crash consistency (reliability issue): `caseload run` killed with
//! SIGKILL at points spread over the whole run (every stage), then
//! `caseload run --resume` with the same arguments. A killed run's case
//! is clearly marked incomplete (a progress record, no run.json) and a
//! plain `run` refuses it; the resumed run completes, and its case equals
//! a run that was never killed: the same rows (no duplicates, none
//! missing), the same carved files with their hashes, no temporary files
//! left, nothing written outside the channel directories.
//!
//! Kill points: 12 by default (about 30 s); `CASELOAD_KILL_POINTS=N` for
//! more (the closing note's figures use 60).

use crate::common;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STAGES: &str = "image-hash,filesystem,file-hash,index,carve,kff";

fn run_cmd(corpus: &Path, root: &Path) -> Command {
    let mut cmd = common::channels_run(STAGES, &corpus.join("image.dd"), root);
    cmd.arg("--hashset")
        .arg(format!("known={}", corpus.join("NSRLFile.txt").display()))
        .arg("--hashset")
        .arg(format!("notable={}", corpus.join("notable.md5").display()));
    cmd
}

/// What a case holds, engine-independent of row ids where they may
/// differ: sorted row contents per table.
fn case_contents(root: &Path) -> BTreeMap<&'static str, Vec<String>> {
    let db = rusqlite::Connection::open_with_flags(
        root.join("db/case.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let queries: [(&str, &str); 9] = [
        ("runs", "SELECT status || ' ' || stages FROM runs"),
        (
            "stage_runs",
            "SELECT seq || ' ' || stage || ' ' || status FROM stage_runs",
        ),
        (
            "evidence",
            "SELECT coalesce(md5, '-') || ' ' || coalesce(hash_verified, '-') FROM evidence",
        ),
        (
            "volumes",
            "SELECT slot || ' ' || \"offset\" || ' ' || coalesce(fs_type, '-') FROM volumes",
        ),
        (
            "files",
            "SELECT path || ' ' || coalesce(md5, '-') || ' ' || coalesce(kff, '-') || ' ' || coalesce(duplicate_group, 0) FROM files",
        ),
        (
            "carved_items",
            "SELECT \"offset\" || ' ' || type || ' ' || validation || ' ' || coalesce(md5, '-') || ' ' || coalesce(case_path, '-') || ' ' || coalesce(kff, '-') FROM carved_items",
        ),
        (
            "extracted_items",
            "SELECT id || ' ' || member || ' ' || coalesce(md5, '-') || ' ' || coalesce(kff, '-') FROM extracted_items",
        ),
        (
            "hits",
            "SELECT item_kind || ' ' || item_id || ' ' || kind || ' ' || name FROM hits",
        ),
        (
            "processing_errors",
            "SELECT stage || ' ' || severity || ' ' || coalesce(path, '-') || ' ' || message FROM processing_errors",
        ),
    ];
    let mut out = BTreeMap::new();
    for (name, sql) in queries {
        let mut q = db.prepare(sql).unwrap();
        let mut rows: Vec<String> = q
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(name, rows);
    }
    // Carved files on the case channel, with their contents' MD5.
    let mut carved = Vec::new();
    let mut stack = vec![root.join("case/carved")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(root.join("case"))
                    .unwrap()
                    .to_path_buf();
                carved.push(format!(
                    "{} {}",
                    rel.display(),
                    common::md5_hex(&std::fs::read(e.path()).unwrap())
                ));
            }
        }
    }
    carved.sort();
    out.insert("carved files", carved);
    out
}

/// Every file under `dir`, relative.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
            out.push(e.path().strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    out.sort();
    out
}

/// The stage the progress record says was running (or how far it got).
fn killed_in(root: &Path) -> String {
    let Ok(bytes) = std::fs::read(root.join("case/run.progress")) else {
        return if root.join("case/run.json.partial").exists() {
            "setting up the case".into()
        } else {
            "before the case".into()
        };
    };
    let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    match record["running"]["stage"].as_str() {
        Some(s) => s.to_string(),
        None => "between stages".into(),
    }
}

#[test]
fn a_run_killed_anywhere_resumes_to_the_case_a_whole_run_makes() {
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    common::corpus(&corpus, &["--size", "32MiB", "--seed", "11"]);
    let corpus_files = tree(&corpus);
    let reference = work.path().join("reference");
    let clock = Instant::now();
    common::run_ok(&mut run_cmd(&corpus, &reference));
    let whole = clock.elapsed();
    let expected = case_contents(&reference);
    assert!(expected["carved_items"].len() > 3 && expected["files"].len() > 20);
    assert!(
        !expected["hits"].is_empty(),
        "kff finds something to compare"
    );

    let points: u32 = std::env::var("CASELOAD_KILL_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut where_killed: BTreeMap<String, u32> = BTreeMap::new();
    for i in 0..points {
        let root = work.path().join(format!("kill-{i}"));
        let delay = whole.mul_f64(0.9 * (f64::from(i) + 0.5) / f64::from(points));
        let mut child = run_cmd(&corpus, &root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let stage = killed_in(&root);
        let what = format!("kill {i} after {delay:?}, in {stage}");
        if root.join("case/run.json").exists() {
            *where_killed.entry("after the end".into()).or_default() += 1;
            continue;
        }
        *where_killed.entry(stage.clone()).or_default() += 1;
        if root.join("case/run.json.partial").exists() || root.join("case/run.progress").exists() {
            // Clearly incomplete: a plain run refuses the case.
            let out = run_cmd(&corpus, &root).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{what}");
            assert!(err.contains("--resume"), "{what}: {err}");
            let out = run_cmd(&corpus, &root).arg("--resume").output().unwrap();
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        } else {
            // Killed before a case existed: nothing to resume.
            assert!(!root.join("db/case.sqlite").exists(), "{what}");
            common::run_ok(&mut run_cmd(&corpus, &root));
        }
        let raw: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("case/run.json")).unwrap()).unwrap();
        crate::run_json::check(&raw, &what);
        let report = caseload_engine::run::load_run_json(&root.join("case")).unwrap();
        if stage != "before the case" && stage != "setting up the case" {
            assert!(report.resumed.is_some(), "{what}");
        }
        assert_eq!(report.status, "completed", "{what}");
        assert!(report.stages.iter().all(|s| s.status == "completed"));
        assert_eq!(report.stages.len(), 6, "{what}");
        let got = case_contents(&root);
        for (table, rows) in &expected {
            assert_eq!(&got[table], rows, "{what}: {table}");
        }
        assert!(
            std::fs::read_dir(root.join("temp"))
                .unwrap()
                .next()
                .is_none(),
            "{what}: temporary files left"
        );
        assert!(!root.join("case/run.json.partial").exists(), "{what}");
        assert!(!root.join("case/run.progress").exists(), "{what}");
    }
    eprintln!("kill points by where they landed: {where_killed:?}");
    // Nothing was written outside the channel directories.
    assert_eq!(tree(&corpus), corpus_files, "the evidence directory");
    let mut top: Vec<String> = std::fs::read_dir(work.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    let mut allowed: Vec<String> = (0..points).map(|i| format!("kill-{i}")).collect();
    allowed.extend(["corpus".to_string(), "reference".to_string()]);
    allowed.sort();
    assert_eq!(top, allowed);
}

#[test]
fn resume_refuses_other_arguments_and_a_finished_run() {
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    common::corpus(&corpus, &["--size", "32MiB", "--seed", "12"]);
    let root = work.path().join("case");
    // Nothing to resume yet.
    let out = run_cmd(&corpus, &root).arg("--resume").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no unfinished run"));
    // A killed run, resumed with other stages: refused, the case kept.
    let mut child = run_cmd(&corpus, &root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until the first stage has finished.
    let started = Instant::now();
    while killed_in(&root) != "filesystem"
        && killed_in(&root) != "file-hash"
        && started.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    let _ = child.wait();
    if root.join("case/run.json").exists() {
        eprintln!("SKIPPED the refusal checks: the run ended before it was killed");
        return;
    }
    let mut other = common::caseload();
    other
        .args([
            "run",
            "--stages",
            "filesystem",
            "--cache",
            "warm",
            "--resume",
        ])
        .arg("--evidence")
        .arg(corpus.join("image.dd"));
    for (flag, sub) in [("--database", "db"), ("--case", "case"), ("--temp", "temp")] {
        other.arg(flag).arg(root.join(sub));
    }
    let out = other.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("ran the stages"), "{err}");
    assert!(root.join("case/run.json.partial").exists());
    // The same arguments then resume it.
    common::run_ok(run_cmd(&corpus, &root).arg("--resume"));
    // A finished run is not resumed.
    let out = run_cmd(&corpus, &root).arg("--resume").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("its run finished"));
}
