//! Channel faults (reliability issue): a database, case or temp channel
//! that fills up (ENOSPC), fails (EIO), goes read-only (EROFS) or whose
//! directory vanishes in the middle of a stage. Each must end the run with an error naming the
//! channel, run.json recording the run as failed at that stage, and
//! everything written before the fault present and consistent: the case
//! database passes `PRAGMA integrity_check`, the file-system walk's rows
//! are all there when its stage finished, and every carved file the
//! database lists exists with its recorded MD5. The evidence is unchanged.
//!
//! Faults are injected in the channel layer (`CASELOAD_INJECT_FAULT`, see
//! engine/src/fault.rs) half-way through the stage that writes the most to
//! the channel in a clean run; one test also fills a real tmpfs.

use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const STAGES: &str = "filesystem,file-hash,index,carve";

struct Dirs {
    root: PathBuf,
    database: PathBuf,
    case: PathBuf,
    temp: PathBuf,
}

impl Dirs {
    fn new(root: &Path, tag: &str) -> Dirs {
        let root = root.join(tag);
        let d = Dirs {
            database: root.join("db"),
            case: root.join("case"),
            temp: root.join("temp"),
            root,
        };
        for p in [&d.database, &d.case, &d.temp] {
            std::fs::create_dir_all(p).unwrap();
        }
        d
    }
}

fn run(image: &Path, dirs: &Dirs, fault: Option<&str>) -> (Output, Value) {
    let mut cmd = common::channels_run(STAGES, image, &dirs.root);
    // These runs are meant to fail mid-run (a full tmpfs among them),
    // not to be refused before it: the up-front check is tested in
    // preflight.rs.
    cmd.arg("--no-room-check");
    match fault {
        Some(f) => cmd.env("CASELOAD_INJECT_FAULT", f),
        None => cmd.env_remove("CASELOAD_INJECT_FAULT"),
    };
    let out = cmd.output().unwrap();
    let report = std::fs::read(dirs.case.join("run.json")).unwrap_or_else(|e| {
        panic!(
            "no run.json ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, serde_json::from_slice(&report).unwrap())
}

/// Bytes the channel has written by the middle of the stage that writes
/// the most to it.
fn middle_of_busiest_stage(report: &Value, channel: &str) -> (String, u64) {
    let stages = report["stages"].as_array().unwrap();
    let written = |s: &Value| {
        s["channels"][channel]["bytes_written"]
            .as_u64()
            .unwrap_or(0)
    };
    let (k, busiest) = stages
        .iter()
        .enumerate()
        .max_by_key(|(_, s)| written(s))
        .unwrap();
    assert!(written(busiest) > 0, "no stage writes to {channel}");
    let before: u64 = stages[..k].iter().map(written).sum();
    (
        busiest["name"].as_str().unwrap().to_string(),
        before + written(busiest) / 2,
    )
}

/// Every row and file written before the fault: the database intact, the
/// walk complete if its stage completed, carved files present with their
/// hashes. `files_clean` is the walk's row count in the clean run.
fn assert_consistent(dirs: &Dirs, report: &Value, files_clean: i64, case_gone: bool) {
    let db_path = dirs.database.join("case.sqlite");
    let db =
        rusqlite::Connection::open_with_flags(&db_path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let completed = |name: &str| {
        report["stages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == name && s["status"] == "completed")
    };
    if completed("filesystem") {
        let files: i64 = db
            .query_row("SELECT count(*) FROM files", [], |r| r.get(0))
            .unwrap();
        assert_eq!(files, files_clean, "the walk's rows are all there");
    }
    if case_gone {
        return;
    }
    let mut q = db
        .prepare("SELECT case_path, md5 FROM carved_items WHERE case_path IS NOT NULL AND md5 IS NOT NULL")
        .unwrap();
    let rows: Vec<(String, String)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (path, md5) in rows {
        let data = std::fs::read(dirs.case.join(&path))
            .unwrap_or_else(|e| panic!("carved file {path} listed but unreadable: {e}"));
        assert_eq!(common::md5_hex(&data), md5, "{path}");
    }
}

/// A clean run, then each fault on `channel`, checked.
fn faults_on(channel: &str, errors: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "11"],
    );
    let evidence_md5 = common::md5_hex(&std::fs::read(&image).unwrap());
    let clean = Dirs::new(work.path(), "clean");
    let (out, report) = run(&image, &clean, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = rusqlite::Connection::open(clean.database.join("case.sqlite")).unwrap();
    let files_clean: i64 = db
        .query_row("SELECT count(*) FROM files", [], |r| r.get(0))
        .unwrap();
    let (busiest, after) = middle_of_busiest_stage(&report, channel);

    for error in errors {
        let dirs = Dirs::new(work.path(), error);
        let spec = format!("{channel}:{error}:{after}");
        let (out, report) = run(&image, &dirs, Some(&spec));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{spec} (busiest stage {busiest})");
        assert!(
            !out.status.success(),
            "{what}: a failed channel fails the run: {stderr}"
        );
        assert!(
            stderr.contains(&format!("the {channel} channel failed")),
            "{what}: {stderr}"
        );
        assert_eq!(report["status"], "failed", "{what}");
        crate::run_json::check(&report, &what);
        let fault = &report["channel_fault"];
        assert_eq!(fault["channel"], channel, "{what}: {fault}");
        assert!(
            fault["error"]
                .as_str()
                .unwrap()
                .contains(&format!("{channel} channel")),
            "{what}: {fault}"
        );
        // Stages before the fault completed; the run stopped at it.
        let stages = report["stages"].as_array().unwrap();
        let last = stages.last().unwrap();
        assert_eq!(last["status"], "failed", "{what}");
        assert_eq!(last["name"], fault["stage"], "{what}");
        assert!(
            last["error"]
                .as_str()
                .unwrap()
                .contains(&format!("{channel} channel")),
            "{what}: {}",
            last["error"]
        );
        for s in &stages[..stages.len() - 1] {
            assert_eq!(s["status"], "completed", "{what}: {}", s["name"]);
        }
        if !(channel == "database" && *error == "gone") {
            assert_consistent(
                &dirs,
                &report,
                files_clean,
                channel == "case" && *error == "gone",
            );
        } else {
            assert!(!dirs.database.exists(), "{what}");
        }
        // Nothing of the run's temporary files is left behind.
        if dirs.temp.exists() {
            assert_eq!(std::fs::read_dir(&dirs.temp).unwrap().count(), 0, "{what}");
        }
        assert!(!dirs.case.join("run.json.partial").exists(), "{what}");
    }
    assert_eq!(
        common::md5_hex(&std::fs::read(&image).unwrap()),
        evidence_md5,
        "the evidence is unchanged"
    );
}

#[test]
fn a_database_channel_that_fills_fails_goes_read_only_or_vanishes_stops_the_run_intact() {
    faults_on("database", &["enospc", "eio", "erofs", "gone"]);
}

#[test]
fn a_case_channel_that_fills_fails_goes_read_only_or_vanishes_stops_the_run_intact() {
    faults_on("case", &["enospc", "eio", "erofs", "gone"]);
}

#[test]
fn a_temp_channel_that_fills_fails_goes_read_only_or_vanishes_stops_the_run_intact() {
    faults_on("temp", &["enospc", "eio", "erofs", "gone"]);
}

#[test]
fn a_bad_fault_specification_is_refused_before_anything_is_written() {
    let work = tempfile::tempdir().unwrap();
    let image = work.path().join("image.dd");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let dirs = Dirs::new(work.path(), "x");
    let mut cmd = common::stage_run("filesystem", &image, &dirs.case, &[]);
    let out = cmd
        .env("CASELOAD_INJECT_FAULT", "evidence:eio:1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CASELOAD_INJECT_FAULT"), "{err}");
    assert_eq!(std::fs::read_dir(&dirs.case).unwrap().count(), 0);
}

/// A real full device: the case channel on a tmpfs too small for the
/// index and the carved files. Needs root for the mount.
#[test]
fn a_case_channel_on_a_full_tmpfs_stops_the_run_with_the_case_intact() {
    let work = tempfile::tempdir().unwrap();
    let dirs = Dirs::new(work.path(), "small");
    let Some(_mounted) = common::small_tmpfs("full case tmpfs", &dirs.case, "3m") else {
        return;
    };
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "11"],
    );
    let clean = Dirs::new(work.path(), "clean");
    let (out, _) = run(&image, &clean, None);
    assert!(out.status.success());
    let files_clean: i64 = rusqlite::Connection::open(clean.database.join("case.sqlite"))
        .unwrap()
        .query_row("SELECT count(*) FROM files", [], |r| r.get(0))
        .unwrap();
    let (out, report) = run(&image, &dirs, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("the case channel failed"), "{stderr}");
    assert_eq!(report["status"], "failed");
    let error = report["channel_fault"]["error"].as_str().unwrap();
    assert!(error.contains("No space left on device"), "{error}");
    assert_consistent(&dirs, &report, files_clean, false);
}
