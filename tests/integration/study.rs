//! `caseload study ftk4` on two small labs of the study's shape (the base
//! system's three 7200 rpm disks, and the same with a SATA SSD database):
//! every lab is built, compared on with DD and E01 and taken down; the
//! merged report has every configuration, ratios to the base, a database
//! upgrade that shows in the KFF stage, and a chart that renders.
//!
//! Needs root, loop devices and FUSE (CI runs as root); skipped with a
//! notice otherwise. The labs are small copies of the built-in ones (the
//! built-ins want 16 GiB of backing space each).

use crate::common;
use serde_json::Value;
use std::path::Path;

fn unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    if !Path::new("/dev/loop-control").exists() || !Path::new("/dev/fuse").exists() {
        return Some("no loop devices or no /dev/fuse");
    }
    None
}

fn lab_file(dir: &Path, name: &str, database_model: &str) -> String {
    let text = format!(
        "name = \"{name}\"\ndescription = \"test copy of the FTK 4 study's shape\"\n\
         [devices.system]\nmodel = \"hdd-7200\"\nsize = \"256MiB\"\n\
         [devices.data]\nmodel = \"hdd-7200\"\nsize = \"256MiB\"\n\
         [devices.database]\nmodel = \"{database_model}\"\nsize = \"256MiB\"\n\
         [channels]\ntemp = \"system\"\nevidence = \"data\"\ncase = \"data\"\ndatabase = \"database\"\n"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn study_ftk4_builds_compares_and_removes_every_lab() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED study ftk4: {why}");
        return;
    }
    let _serial = common::lab_lock();
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    common::run_ok(
        common::caseload()
            .args([
                "corpus", "--size", "32MiB", "--seed", "12", "--format", "dd,e01",
            ])
            // A hash library of a few MiB: KFF's lookups reach the
            // database device (a tiny one is read in one request).
            .args(["--decoys", "20000", "--out"])
            .arg(&corpus),
    );
    let tag = std::process::id();
    let base = format!("t{tag}-base");
    let ssd = format!("t{tag}-ssd-db");
    let labs = format!(
        "{},{}",
        lab_file(work.path(), &base, "hdd-7200"),
        lab_file(work.path(), &ssd, "sata-ssd")
    );
    let lab_dir = work.path().join("labs");
    let backing = work.path().join("backing");
    std::fs::create_dir_all(&backing).unwrap();
    let out_dir = work.path().join("study");
    let out = common::caseload()
        .env("CASELOAD_LAB_DIR", &lab_dir)
        .env("CASELOAD_LAB_BACKING", &backing)
        .args(["study", "ftk4", "--labs", &labs, "--out"])
        .arg(&out_dir)
        .arg("--evidence")
        .arg(corpus.join("image.dd"))
        .arg("--evidence")
        .arg(corpus.join("image.E01"))
        .arg("--hashset")
        .arg(format!("known={}", corpus.join("NSRLFile.txt").display()))
        .arg("--hashset")
        .arg(format!("notable={}", corpus.join("notable.md5").display()))
        .output()
        .unwrap();
    // Nothing of the labs is left, whatever happened.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&lab_dir.display().to_string()),
        "a lab mount is left"
    );
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        if let Ok(t) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            assert!(
                !t.contains(&backing.display().to_string()),
                "loop device {:?} left",
                e.file_name()
            );
        }
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("compare.json")).unwrap()).unwrap();
    assert_eq!(report["status"], "completed");
    let labels: Vec<&str> = report["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            format!("image.dd@{base}"),
            format!("image.dd@{ssd}"),
            format!("image.E01@{base}"),
            format!("image.E01@{ssd}")
        ]
    );
    assert_eq!(report["baseline"], 0);
    assert_eq!(report["runs"].as_array().unwrap().len(), 4);
    for r in report["runs"].as_array().unwrap() {
        assert_eq!(r["status"], "completed", "{}", r["error"]);
        let run_json = out_dir.join(r["report"].as_str().unwrap());
        assert!(run_json.is_file(), "{}", run_json.display());
    }
    // The SSD database shows in the stage that reads the database most,
    // KFF's hash-library lookups: time blocked on the database channel
    // (not wall time, which the rest of the suite's load moves).
    let kff_db_blocked = |config: usize| -> f64 {
        let run = report["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["configuration"] == config)
            .unwrap();
        let run_json: Value = serde_json::from_slice(
            &std::fs::read(out_dir.join(run["report"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        let kff = run_json["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "kff")
            .unwrap();
        kff["channels"]["database"]["blocked_seconds"]
            .as_f64()
            .unwrap()
    };
    for (base, ssd) in [(0, 1), (2, 3)] {
        let (b, s) = (kff_db_blocked(base), kff_db_blocked(ssd));
        eprintln!("study ftk4: kff blocked on the database: 7200 rpm {b:.3} s, SSD {s:.3} s");
        assert!(
            s * 3.0 < b,
            "kff blocked on the database: SSD {s} s, 7200 rpm {b} s"
        );
    }
    common::assert_stage_chart_renders("study ftk4", &out_dir.join("report.html"));
}
