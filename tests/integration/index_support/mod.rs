//! Helpers of the `index_*` integration tests: run stages into a case
//! directory and search it through the `caseload` binary.

#![allow(dead_code)]

use crate::common;
use std::path::Path;

/// Run `stages` with `threads` into `case` (database, case and temp
/// channels all there); `extra` are more `caseload run` arguments.
pub fn run_into(case: &Path, evidence: &Path, stages: &str, threads: &str, extra: &[&str]) {
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
        .args(extra)
        .arg("--evidence")
        .arg(evidence)
        .args(
            ["--database", "--case", "--temp"]
                .iter()
                .flat_map(|f| [f.to_string(), case.display().to_string()]),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `stages` into a fresh case directory; returns it.
pub fn run(evidence: &Path, stages: &str, threads: &str, extra: &[&str]) -> tempfile::TempDir {
    let case = tempfile::tempdir().unwrap();
    run_into(case.path(), evidence, stages, threads, extra);
    case
}

/// One item of `caseload search --json`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    pub kind: String,
    pub id: i64,
    pub label: String,
    pub hits: u64,
    pub matches: Vec<String>,
}

/// `caseload search --json --case CASE QUERY [--regex]`.
pub fn search(case: &Path, query: &str, regex: bool) -> Vec<Hit> {
    let mut cmd = common::caseload();
    cmd.args(["search", "--json", "--case"])
        .arg(case)
        .arg(query);
    if regex {
        cmd.arg("--regex");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{query}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| Hit {
            kind: h["kind"].as_str().unwrap().to_string(),
            id: h["id"].as_i64().unwrap(),
            label: h["label"].as_str().unwrap().to_string(),
            hits: h["hits"].as_u64().unwrap(),
            matches: h["matches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_string())
                .collect(),
        })
        .collect()
}
