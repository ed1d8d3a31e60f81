//! Bad input to `caseload compare`: a workload with an unknown stage or
//! option (refused before anything runs, naming file and line), runs that
//! fail (each reported with its error, the matrix goes on), a layout on a
//! full file system, and Ctrl-C (what finished is kept and reported).

use crate::compare_support;

use compare_support::{STAGES, compare_cmd, compare_json, entries, output, summary};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Two files and a layout that a refused compare never gets to use.
fn dummy(work: &Path) -> (PathBuf, PathBuf) {
    let evidence = work.join("image.dd");
    std::fs::write(&evidence, vec![0u8; 4096]).unwrap();
    let dir = work.join("layout");
    (
        evidence,
        compare_support::layout(work, "local", &dir, &dir, &dir),
    )
}

#[test]
fn a_workload_with_an_unknown_stage_or_option_is_refused_with_file_and_line() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (evidence, layout) = dummy(work.path());
    for (case, text, line, what) in [
        (
            "stage",
            "name = \"bad\"\n\n[[stage]]\nname = \"filesystem\"\n\n[[stage]]\nname = \"defragment\"\n",
            7,
            "defragment",
        ),
        (
            "option",
            "name = \"bad\"\n\n[[stage]]\nname = \"file-hash\"\nalgorithms = [\"md5\"]\ncolour = \"blue\"\n",
            6,
            "colour",
        ),
    ] {
        let workload = work.path().join(format!("bad-{case}.toml"));
        std::fs::write(&workload, text).unwrap();
        let out_dir = work.path().join(format!("out-{case}"));
        let out = output(
            compare_cmd(&[&evidence], &[&layout], &out_dir)
                .arg("--workload")
                .arg(&workload)
                .args(["--repeat", "1"]),
        );
        assert!(!out.status.success(), "{case}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{}:{line}:", workload.display())),
            "{case}: {stderr}"
        );
        assert!(stderr.contains(what), "{case}: {stderr}");
        // Nothing ran.
        assert!(!out_dir.join("compare.json").exists(), "{case}");
    }
}

#[test]
fn runs_that_fail_are_reported_per_run_and_the_matrix_goes_on() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (dd, e01) = compare_support::corpus(&work.path().join("corpus"), "32MiB", 31);
    let dir = work.path().join("layout");
    let layout = compare_support::layout(work.path(), "local", &dir, &dir, &dir);
    let out_dir = work.path().join("out");
    // Every run's database channel fails (EIO) at its first write in a
    // stage (docs: DEVELOPERS.md, injected channel faults): each run fails
    // on its own, after the case was made, and the matrix goes on.
    let out = output(
        compare_cmd(&[&dd, &e01], &[&layout], &out_dir)
            .args(["--stages", STAGES, "--repeat", "2", "--threads", "1"])
            .env("CASELOAD_INJECT_FAULT", "database:eio:0"),
    );
    assert_eq!(out.status.code(), Some(1), "the runs failed");
    let doc = compare_json(&out_dir);
    assert_eq!(doc["status"], "completed-with-failures");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "every run of the matrix was made");
    for r in runs {
        assert_ne!(r["status"], "completed", "{r}");
        // Why is recorded with the run: its own error, or the error of
        // the stage that failed, naming the channel.
        let stage_errors: Vec<&str> = r["stages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["error"].as_str())
            .collect();
        assert!(
            r["error"]
                .as_str()
                .is_some_and(|e| e.contains("database channel"))
                || stage_errors.iter().any(|e| e.contains("database channel")),
            "{r}"
        );
    }
    for c in [0, 1] {
        assert_eq!(summary(&doc, c)["runs_completed"], 0);
        assert_eq!(summary(&doc, c)["runs"], 2);
    }
    // The table and the page show the failed runs.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("image.E01@local"), "{stdout}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("class=\"l bad\""), "failed runs are marked");
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
}

/// A tmpfs of a few KiB mounted for the test; unmounted when dropped.
struct SmallMount(PathBuf);

impl SmallMount {
    fn new(dir: PathBuf) -> Option<SmallMount> {
        std::fs::create_dir_all(&dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "caseload-test"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallMount(dir))
    }
}

impl Drop for SmallMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_layout_on_a_full_file_system_fails_its_runs_visibly() {
    let test = "a_layout_on_a_full_file_system_fails_its_runs_visibly";
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(mount) = SmallMount::new(work.path().join("tiny")) else {
        eprintln!("SKIPPED {test}: cannot mount a small tmpfs (needs root)");
        return;
    };
    let (dd, _) = compare_support::corpus(&work.path().join("corpus"), "32MiB", 37);
    let roomy = work.path().join("roomy");
    // The database fills the tiny file system; case and temp have room.
    let full = compare_support::layout(work.path(), "full", &mount.0, &roomy, &roomy);
    let fine = compare_support::layout(work.path(), "fine", &roomy, &roomy, &roomy);
    let out_dir = work.path().join("out");
    let out = output(
        compare_cmd(&[&dd], &[&fine, &full], &out_dir)
            .args(["--stages", STAGES, "--repeat", "1", "--threads", "1"])
            .args(["--synchronous", "full", "--batch-size", "1"])
            // Past the up-front room check (preflight.rs tests it), to
            // see a run meet the full disk.
            .arg("--no-room-check"),
    );
    assert_eq!(out.status.code(), Some(1));
    let doc = compare_json(&out_dir);
    assert_eq!(doc["status"], "completed-with-failures");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["status"], "completed");
    let failed = &runs[1];
    assert_ne!(failed["status"], "completed");
    let text = failed.to_string().to_lowercase();
    assert!(
        text.contains("no space") || text.contains("full"),
        "the run's error says the disk is full: {failed}"
    );
    // The run's scratch on the full file system is removed again.
    assert!(entries(&mount.0).is_empty(), "{:?}", entries(&mount.0));
}

#[test]
fn ctrl_c_keeps_and_reports_what_finished() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (dd, _) = compare_support::corpus(&work.path().join("corpus"), "32MiB", 43);
    let dir = work.path().join("layout");
    let layout = compare_support::layout(work.path(), "local", &dir, &dir, &dir);
    let out_dir = work.path().join("out");
    let mut child = compare_cmd(&[&dd], &[&layout], &out_dir)
        .args(["--stages", STAGES, "--repeat", "6", "--threads", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first run to finish (compare.json is rewritten after
    // every run), then press Ctrl-C.
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let done = std::fs::read(out_dir.join("compare.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|d| !d["runs"].as_array().is_none_or(|r| r.is_empty()));
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "no run finished");
        assert!(child.try_wait().unwrap().is_none(), "compare ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let doc = compare_json(&out_dir);
    assert_eq!(doc["status"], "interrupted");
    assert!(doc["finished_at"].is_string());
    let runs = doc["runs"].as_array().unwrap();
    assert!(!runs.is_empty() && runs.len() < 6, "{} runs", runs.len());
    // Every run but the last completed; the last either completed before
    // the signal arrived or was stopped and says so.
    for (i, r) in runs.iter().enumerate() {
        if i + 1 < runs.len() {
            assert_eq!(r["status"], "completed", "{r}");
        } else {
            assert!(
                r["status"] == "completed" || r["status"] == "interrupted",
                "{r}"
            );
        }
        if r["status"] == "completed" {
            let kept = compare_support::run_report(&out_dir, r);
            assert_eq!(kept["status"], "completed");
        }
    }
    let completed = runs.iter().filter(|r| r["status"] == "completed").count();
    assert_eq!(summary(&doc, 0)["runs_completed"], completed);
    // The reports were written for what finished, and no scratch is left.
    let table = std::fs::read_to_string(out_dir.join("table.txt")).unwrap();
    assert!(table.contains("status interrupted"), "{table}");
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
}
