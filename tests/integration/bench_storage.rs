//! `caseload bench-storage` on a plain directory: every benchmark's
//! figures are there and add up (PostMark's reads and appends are its
//! transactions, every file it created is deleted), the iozone-like matrix
//! has the cells its bounds give and says which it skipped, the page
//! colours each cell, nothing is left in the channel, and bad requests
//! are refused before anything is written. Agreement with fio on a
//! modelled disk is in `lab.rs`.

use crate::common;

#[test]
fn every_benchmark_reports_figures_that_add_up_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = common::run_ok(
        common::caseload()
            .args(["bench-storage", "--dir"])
            .arg(dir.path())
            .args([
                "--channel",
                "temp",
                "--size",
                "4MiB",
                "--bonnie-files",
                "300",
            ])
            .args(["--bonnie-seeks", "300", "--postmark-files", "200"])
            .args([
                "--postmark-transactions",
                "500",
                "--iozone-min-file",
                "64KiB",
            ])
            .args([
                "--iozone-max-file",
                "256KiB",
                "--iozone-max-record",
                "128KiB",
            ])
            .args(["--seed", "5", "--json", "--out"])
            .arg(&out),
    );
    let r: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(r["schema"], "caseload-bench-storage");
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["target"]["channel"], "temp");
    let b = &r["bonnie"];
    for k in [
        "seq_write_mb_s",
        "rewrite_mb_s",
        "seq_read_mb_s",
        "seeks_per_s",
        "create_per_s",
        "stat_per_s",
        "delete_per_s",
    ] {
        assert!(b[k].as_f64().unwrap() > 0.0, "bonnie {k}: {b}");
    }
    let p = &r["postmark"];
    let n = |k: &str| p[k].as_u64().unwrap();
    assert_eq!(n("read") + n("appended"), 500, "{p}");
    assert_eq!(
        n("created"),
        n("deleted"),
        "every file created is deleted: {p}"
    );
    assert!(n("created") >= 200, "{p}");
    // Files 64, 128, 256 KiB by records 4..128 KiB: 5 + 6 + 6 cells run,
    // a record over the file skipped (128 KiB on a 64 KiB file) and said.
    let cells = r["iozone"]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 17);
    assert!(
        cells
            .iter()
            .all(|c| c["record"].as_u64() <= c["file_size"].as_u64())
    );
    for c in cells {
        for t in [
            "write",
            "rewrite",
            "read",
            "reread",
            "random_read",
            "random_write",
        ] {
            assert!(c[t].as_f64().unwrap() > 0.0, "{c}");
        }
    }
    let skipped = r["iozone"]["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("record larger than the file")),
        "{}",
        r["notes"]
    );
    // Only the report directory is left.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out")]);
    let html = std::fs::read_to_string(out.join("bench-storage.html")).unwrap();
    assert_eq!(html.matches("style=\"background:hsl(").count(), 17 * 6);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("bench-storage.json")).unwrap()).unwrap();
    assert_eq!(json["seed"], 5);
    assert!(
        std::fs::read_to_string(out.join("bench-storage.txt"))
            .unwrap()
            .contains("iozone random_write")
    );
}

#[test]
fn bad_requests_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (vec!["--channel", "evidence"], "never written"),
        (vec!["--channel", "attic"], "one of database, case, temp"),
        (vec!["--tests", "dd"], "one of bonnie, postmark, iozone"),
        (
            vec!["--tests", "iozone", "--iozone-min-record", "3000"],
            "powers of two",
        ),
    ] {
        let out = common::caseload()
            .args(["bench-storage", "--dir"])
            .arg(dir.path())
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{args:?}"
        );
    }
}
