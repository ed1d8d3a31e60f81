//! `caseload compare --instances 3`: every run is three concurrent
//! pipelines; compare keeps each instance's figures, and the aggregate
//! evidence bytes of each stage equal three single runs of that stage.

use crate::common;
use crate::compare_support;

use compare_support::{STAGES, compare_cmd, f, output, stage, summary};
use serde_json::Value;
use std::path::Path;

/// A plain single `caseload run` (not through compare): the ground truth.
fn single_run(evidence: &Path, dir: &Path) -> Value {
    for d in ["db", "case", "temp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let out = common::caseload()
        .args(["run", "--stages", STAGES, "--threads", "1", "--json"])
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

fn evidence_bytes(stage: &Value) -> u64 {
    stage["channels"]["evidence"]["bytes_read"]
        .as_u64()
        .unwrap()
}

#[test]
fn three_instances_through_compare_read_three_times_the_evidence_of_one() {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (dd, e01) = compare_support::corpus(&work.path().join("corpus"), "32MiB", 29);
    let dir = work.path().join("layout");
    let layout = compare_support::layout(work.path(), "local", &dir, &dir, &dir);
    let out = work.path().join("out");
    // One worker thread per pipeline: which worker reads which file decides
    // how often an E01 chunk is found in that thread's chunk cache.
    let result = output(compare_cmd(&[&e01, &dd], &[&layout], &out).args([
        "--stages",
        STAGES,
        "--repeat",
        "1",
        "--instances",
        "3",
        "--threads",
        "1",
    ]));
    assert!(result.status.success(), "compare failed");
    let doc = compare_support::compare_json(&out);
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["instances"], 3);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (config, evidence) in [(0u64, &e01), (1, &dd)] {
        let single = single_run(evidence, &work.path().join(format!("single-{config}")));
        let run = runs.iter().find(|r| r["configuration"] == config).unwrap();
        assert_eq!(run["status"], "completed");
        assert_eq!(run["instance_failures"].as_array().unwrap().len(), 0);
        // The run kept is the instances report.
        let kept = compare_support::run_report(&out, run);
        assert_eq!(kept["schema"], "caseload-instances");
        let instances = run["instances"].as_array().unwrap();
        let mut ids: Vec<u64> = instances
            .iter()
            .map(|i| i["instance"].as_u64().unwrap())
            .collect();
        ids.sort();
        assert_eq!(ids, [0, 1, 2]);
        for (i, one) in single["stages"].as_array().unwrap().iter().enumerate() {
            let name = one["name"].as_str().unwrap();
            let one_bytes = evidence_bytes(one);
            assert!(one_bytes > 0, "{name}");
            // Each instance read what a single run reads.
            for inst in instances {
                assert_eq!(inst["status"], "completed");
                assert_eq!(inst["stages"][i]["name"], name);
                assert_eq!(evidence_bytes(&inst["stages"][i]), one_bytes, "{name}");
                assert_eq!(
                    inst["stages"][i]["items"], one["summary"]["items"],
                    "{name}"
                );
            }
            // The run's figures are the aggregate: three single runs.
            let agg = &run["stages"][i];
            assert_eq!(agg["name"], name);
            assert_eq!(evidence_bytes(agg), 3 * one_bytes, "{name}");
            assert_eq!(
                agg["items"].as_u64().unwrap(),
                3 * one["summary"]["items"].as_u64().unwrap(),
                "{name}"
            );
            // And so is the summary compare reports.
            let st = stage(summary(&doc, config as usize), name);
            assert_eq!(
                f(&st["channels"]["evidence"]["bytes_read"]["median"]),
                (3 * one_bytes) as f64,
                "{name}"
            );
        }
    }
    // The table names the instances.
    let table = std::fs::read_to_string(out.join("table.txt")).unwrap();
    assert!(table.contains("3 instance(s) per run"), "{table}");
}
