//! `--instances 3`: three concurrent pipelines on the same evidence, each
//! with its own case; per-instance figures, and aggregate evidence bytes
//! equal to three single runs, stage by stage.

use crate::common;

use std::path::Path;

fn run(evidence: &Path, dir: &Path, extra: &[&str]) -> serde_json::Value {
    for d in ["db", "case", "temp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let out = common::caseload()
        .args([
            "run",
            "--stages",
            "image-hash,filesystem,file-hash",
            "--cache",
            "warm",
            "--json",
        ])
        .args(extra)
        .arg("--evidence")
        .arg(evidence)
        .arg("--database")
        .arg(dir.join("db"))
        .arg("--case")
        .arg(dir.join("case"))
        .arg("--temp")
        .arg(dir.join("temp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn three_instances_read_three_times_the_evidence_of_one() {
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    let out = common::caseload()
        .args([
            "corpus", "--size", "40MiB", "--seed", "41", "--decoys", "10", "--format", "dd,e01",
            "--out",
        ])
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One worker thread per pipeline: with several, which worker reads which
    // file decides how often an E01 chunk is found in that thread's chunk
    // cache, so E01 byte counts would vary by a few hundredths of a percent.
    for image in ["image.dd", "image.E01"] {
        let evidence = corpus.join(image);
        let single = run(
            &evidence,
            &work.path().join(format!("single-{image}")),
            &["--threads", "1"],
        );
        let multi = run(
            &evidence,
            &work.path().join(format!("multi-{image}")),
            &["--instances", "3", "--threads", "1"],
        );
        assert_eq!(multi["schema"], "caseload-instances");
        assert_eq!(multi["instances"], 3);
        let runs = multi["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{image}: {:?}", multi["failures"]);
        let mut instance_ids: Vec<u64> = runs
            .iter()
            .map(|r| r["instance"].as_u64().unwrap())
            .collect();
        instance_ids.sort();
        assert_eq!(instance_ids, [0, 1, 2]);
        for (i, stage) in single["stages"].as_array().unwrap().iter().enumerate() {
            let one = stage["channels"]["evidence"]["bytes_read"]
                .as_u64()
                .unwrap();
            let agg = &multi["aggregate"][i];
            assert_eq!(agg["name"], stage["name"]);
            assert_eq!(agg["instances"], 3);
            assert_eq!(
                agg["channels"]["evidence"]["bytes_read"].as_u64().unwrap(),
                3 * one,
                "{image} {}",
                stage["name"]
            );
            for r in runs {
                assert_eq!(
                    r["stages"][i]["channels"]["evidence"]["bytes_read"]
                        .as_u64()
                        .unwrap(),
                    one
                );
                // Each instance found the same files and hashes.
                assert_eq!(
                    r["stages"][i]["summary"]["items"],
                    stage["summary"]["items"]
                );
            }
        }
        // Every instance wrote its own case.
        for k in 0..3 {
            assert!(
                work.path()
                    .join(format!("multi-{image}/case/instance-{k}/run.json"))
                    .is_file()
            );
            assert!(
                work.path()
                    .join(format!("multi-{image}/db/instance-{k}/case.sqlite"))
                    .is_file()
            );
        }
        assert!(
            work.path()
                .join(format!("multi-{image}/case/instances.json"))
                .is_file()
        );
    }
}
