//! The command line as a new user meets it: layouts by preset name,
//! causes said once, a probe that measures a shared directory once, and
//! a comparison that checks every configuration before its first run and
//! takes its hash sets as `run` does.

use crate::common;
use crate::compare_support::{STAGES, compare_cmd, compare_json, corpus, layout, output};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn layouts_are_taken_by_preset_name_and_errors_say_their_cause_once() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = corpus(&work.path().join("ev"), "32MiB", 3);
    let disk = work.path().join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    // The preset reads its directory from the environment.
    let out = common::caseload()
        .args(["run", "--stages", "image-hash", "--cache", "warm", "--json"])
        .args(["--layout", "single-disk", "--evidence"])
        .arg(&image)
        .env("CASELOAD_DISK_DIR", &disk)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["layout"]["name"], "single-disk");
    assert!(disk.join("run.json").is_file());
    // A missing layout file: one line, its cause once.
    let missing = work.path().join("nope.toml");
    let out = common::caseload()
        .args(["run", "--stages", "image-hash", "--layout"])
        .arg(&missing)
        .arg("--evidence")
        .arg(&image)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("three-channel"), "the presets are listed: {e}");
    // A missing evidence file: the OS error appears once.
    let out = common::caseload()
        .args(["run", "--stages", "image-hash", "--database"])
        .arg(&disk)
        .arg("--case")
        .arg(&disk)
        .arg("--temp")
        .arg(&disk)
        .args(["--force", "--evidence", "/nonexistent/image.dd"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert_eq!(
        e.matches("No such file or directory").count(),
        1,
        "the cause is said once: {e}"
    );
}

#[test]
fn a_probe_measures_a_shared_directory_once() {
    let work = tempfile::tempdir().unwrap();
    let disk = work.path().join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let out = common::caseload()
        .args([
            "probe",
            "--layout",
            "single-disk",
            "--size",
            "4MiB",
            "--seconds",
            "0.2",
            "--json",
        ])
        .env("CASELOAD_DISK_DIR", &disk)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let probes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let probes = probes.as_array().unwrap();
    assert_eq!(
        probes.len(),
        1,
        "one directory, one measurement: {probes:?}"
    );
    assert_eq!(probes[0]["channel"], "database");
    assert_eq!(
        probes[0]["shared_with"],
        serde_json::json!(["case", "temp"])
    );
}

#[test]
fn compare_checks_every_configuration_first_and_takes_hash_sets() {
    let work = tempfile::tempdir().unwrap();
    let (image, e01) = corpus(&work.path().join("ev"), "32MiB", 5);
    let ev = work.path().join("ev");
    let mk = |name: &str| {
        let d = work.path().join(name);
        layout(
            work.path(),
            name,
            &d.join("db"),
            &d.join("case"),
            &d.join("temp"),
        )
    };
    let (a, b) = (mk("a"), mk("b"));
    // The FTK workload's kff stage has no hash library: refused before any
    // run, naming the layout and what is missing.
    let out = output(
        compare_cmd(&[&image], &[&a, &b], &work.path().join("refused")).args([
            "--workload",
            "ftk4-default",
            "--repeat",
            "1",
        ]),
    );
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("no hash library") && e.contains("layout `a`"),
        "{e}"
    );
    assert!(!work.path().join("refused/compare.json").exists());
    // Evidence that does not open as evidence is refused before any run too.
    let junk = work.path().join("junk.E01");
    std::fs::write(&junk, b"EVF\x09\x0d\x0a\xff\x00 not really").unwrap();
    let out = output(
        compare_cmd(&[&image, &junk], &[&a], &work.path().join("junk"))
            .args(["--stages", STAGES, "--repeat", "1"]),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("junk.E01"), "{}", stderr(&out));
    assert!(!work.path().join("junk/compare.json").exists());
    // With --hashset, each layout gets the sets in its own database
    // directory's library, and every run's kff stage finds them.
    let out_dir = work.path().join("ok");
    let out = output(
        compare_cmd(&[&image, &e01], &[&a, &b], &out_dir)
            .args([
                "--stages",
                "filesystem,file-hash,kff",
                "--repeat",
                "1",
                "--threads",
                "1",
            ])
            .arg("--hashset")
            .arg(format!("known={}", ev.join("NSRLFile.txt").display()))
            .arg("--hashset")
            .arg(format!("notable={}", ev.join("notable.md5").display())),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for name in ["a", "b"] {
        assert!(
            work.path().join(name).join("db/kff.sqlite").is_file(),
            "layout {name} has its own library"
        );
    }
    let report = compare_json(&out_dir);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{report}");
}

#[test]
fn the_quickstart_table_fits_120_columns_and_wide_shows_every_column() {
    let work = tempfile::tempdir().unwrap();
    for (wide, dir) in [(false, "narrow"), (true, "wide")] {
        let mut cmd = common::caseload();
        cmd.args(["quickstart", "--clean", "--size", "48MiB", "--dir"])
            .arg(work.path().join(dir));
        if wide {
            cmd.arg("--wide");
        }
        let out = common::run_ok(&mut cmd);
        let text = String::from_utf8_lossy(&out.stdout);
        // The table: from its header to the footer's profile line (the
        // paths printed after it are the machine's).
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("stage "))
            .take_while(|l| !l.starts_with("case:"))
            .collect();
        assert!(table.len() >= 8, "{text}");
        let header = table[0];
        if wide {
            for h in [
                "evidence R MB/ops",
                "db ops R/W",
                "db rows/txn",
                "fsync",
                "cpu usr/sys s",
            ] {
                assert!(header.contains(h), "{h}: {header}");
            }
        } else {
            for line in &table {
                assert!(
                    line.chars().count() <= 120,
                    "{} columns: {line}",
                    line.len()
                );
            }
            assert!(!header.contains("db ops R/W"), "{header}");
        }
    }
}

/// Output into a pipe whose reader has gone (`caseload predict ... |
/// head -1`) ends the command without a panic message.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    // Closed before the command starts: its first write finds no reader.
    drop(reader);
    let run =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/tests/data/run.json");
    let out = common::caseload()
        .args([
            "predict",
            "--from",
            "ftk4-base",
            "--devices",
            "ftk4-base",
            "--run",
        ])
        .arg(run)
        .stdout(writer)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
    assert!(!out.status.success());
}
