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
    common::lab_unavailable()
}

fn lab_file(dir: &Path, name: &str, database_model: &str) -> String {
    common::small_lab_file(
        dir,
        name,
        ["hdd-7200", "hdd-7200", database_model],
        "256MiB",
    )
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

/// A small copy of a built-in tier lab (256 MiB devices), named `name`.
fn tier_lab_file(dir: &Path, builtin: &str, name: &str) {
    let (system, data, database, threads, scale) = match builtin {
        "ftk4-tier-economy" => ("hdd-10k", "hdd-7200", "sata-ssd", 8, 0.71),
        "ftk4-tier-mid-dd" => ("hdd-10k", "usb3-sata-7200", "sata-ssd", 8, 0.71),
        "ftk4-tier-mid-e01" => ("hdd-10k", "raid5-4x7200", "sata-ssd", 8, 0.71),
        _ => ("hdd-10k", "raid5-4x7200", "pcie-ssd", 12, 1.0),
    };
    let text = format!(
        "name = \"{name}\"\ndescription = \"test copy of {builtin}\"\n\
         [devices.system]\nmodel = \"{system}\"\nsize = \"256MiB\"\n\
         [devices.data]\nmodel = \"{data}\"\nsize = \"256MiB\"\n\
         [devices.database]\nmodel = \"{database}\"\nsize = \"256MiB\"\n\
         [channels]\ntemp = \"system\"\nevidence = \"data\"\ncase = \"data\"\ndatabase = \"database\"\n\
         [workstation]\nprocessor_threads = {threads}\ncpu_scale = {scale}\n"
    );
    std::fs::write(dir.join(format!("{builtin}.toml")), text).unwrap();
}

#[test]
fn study_ftk4_tiers_runs_the_final_tables_with_their_memory_and_processors() {
    if let Some(why) = unavailable() {
        eprintln!("SKIPPED study ftk4 --tiers: {why}");
        return;
    }
    let _serial = common::lab_lock();
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    common::run_ok(
        common::caseload()
            .args([
                "corpus", "--size", "32MiB", "--seed", "13", "--format", "dd,e01",
            ])
            .args(["--decoys", "2000", "--out"])
            .arg(&corpus),
    );
    let tag = std::process::id();
    let own = work.path().join("own-labs");
    std::fs::create_dir_all(&own).unwrap();
    for (builtin, short) in [
        ("ftk4-tier-economy", "eco"),
        ("ftk4-tier-mid-dd", "middd"),
        ("ftk4-tier-mid-e01", "mide01"),
        ("ftk4-tier-high-end", "high"),
    ] {
        tier_lab_file(&own, builtin, &format!("t{tag}-{short}"));
    }
    let lab_dir = work.path().join("labs");
    let backing = work.path().join("backing");
    std::fs::create_dir_all(&backing).unwrap();
    let study = |out: &Path, evidence: &[&str]| {
        let mut cmd = common::caseload();
        cmd.env("CASELOAD_LAB_DIR", &lab_dir)
            .env("CASELOAD_LAB_BACKING", &backing)
            .args(["study", "ftk4", "--tiers", "--repeat", "1", "--labs-from"])
            .arg(&own)
            .arg("--out")
            .arg(out);
        for e in evidence {
            cmd.arg("--evidence").arg(corpus.join(e));
        }
        cmd.arg("--hashset")
            .arg(format!("known={}", corpus.join("NSRLFile.txt").display()))
            .arg("--hashset")
            .arg(format!("notable={}", corpus.join("notable.md5").display()));
        cmd.output().unwrap()
    };
    // Refused before any lab: the tables need a DD and an E01.
    let refused = study(&work.path().join("one"), &["image.dd"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("a DD and an E01"), "{err}");
    let out_dir = work.path().join("tiers");
    let out = study(&out_dir, &["image.dd", "image.E01"]);
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&lab_dir.display().to_string()),
        "a lab mount is left"
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("tiers.json")).unwrap()).unwrap();
    assert_eq!(t["schema"], "caseload-study-tables");
    let rows = t["rows"].as_array().unwrap();
    let shape: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["row"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
                r["ram_bytes"].as_u64().unwrap() >> 30,
            )
        })
        .collect();
    let want: Vec<(String, String, u64)> = [
        ("economy", "dd", 32),
        ("economy", "e01", 16),
        ("mid-range", "dd", 64),
        ("mid-range", "e01", 32),
        ("high-end", "dd", 64),
        ("high-end", "e01", 32),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), *c))
    .collect();
    assert_eq!(shape, want);
    let evidence_bytes = t["evidence_bytes"].as_f64().unwrap();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["runs_completed"], 1, "{r}");
        let median = r["total_seconds"]["median"].as_f64().unwrap();
        let minutes = r["modelled_minutes"].as_f64().unwrap();
        assert!((minutes - median * 240e9 / evidence_bytes / 60.0).abs() < 1e-6);
        if i < 2 {
            assert_eq!(r["ratio"], 1.0);
        }
        // Each run modelled its workstation: RAM, scale, processor.
        let compare: Value = serde_json::from_slice(
            &std::fs::read(
                out_dir
                    .join(r["dir"].as_str().unwrap())
                    .join("compare.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let run_path = out_dir
            .join(r["dir"].as_str().unwrap())
            .join(compare["runs"][0]["report"].as_str().unwrap());
        let run: Value = serde_json::from_slice(&std::fs::read(run_path).unwrap()).unwrap();
        let m = &run["workstation"]["memory"];
        assert_eq!(m["ram_bytes"], r["ram_bytes"]);
        assert_eq!(m["scale"]["modelled_evidence_bytes"], 240_000_000_000u64);
        assert_eq!(m["suite"], "ftk");
        let quad = r["row"] != "high-end";
        assert_eq!(m["suite_threads"], if quad { 8 } else { 12 });
        let cpus = run["system"]["cpus_allowed"].as_array().unwrap().len() as f64;
        match run["system"]["cpu_quota"].as_f64() {
            Some(q) => assert!(
                (q - (if quad { 0.71 } else { 1.0 }) * cpus).abs() < 0.02,
                "{q}"
            ),
            None => panic!("no CPU quota in {}", r["dir"]),
        }
    }
    let high_dd = &rows[4];
    assert!((high_dd["study_ratio"].as_f64().unwrap() - 438.0 / 1078.0).abs() < 1e-9);
    assert_eq!(t["e01_over_dd"].as_array().unwrap().len(), 3);
    let html = std::fs::read_to_string(out_dir.join("tiers.html")).unwrap();
    assert!(html.matches("<svg").count() >= 2, "charts missing");
}
