//! `run.json` against its contract: every run (every stage, SQLite and
//! PostgreSQL, a run with a failed stage) validates against
//! `docs/run.schema.json`, and every key a stage puts in its details is
//! documented for that stage in `docs/run-json.md`.

use crate::common;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/run.schema.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// The detail keys docs/run-json.md lists under each stage's heading.
fn documented_details() -> BTreeMap<String, BTreeSet<String>> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/run-json.md"))
            .unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stage: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("### `").and_then(|l| l.strip_suffix('`')) {
            stage = Some(name.to_string());
            continue;
        }
        let Some(s) = &stage else { continue };
        if let Some(keys) = line.strip_prefix("| ").and_then(|l| l.split(" |").next()) {
            for k in keys.split(", ") {
                if let Some(k) = k.strip_prefix('`').and_then(|k| k.strip_suffix('`')) {
                    out.entry(s.clone()).or_default().insert(k.to_string());
                }
            }
        }
    }
    out
}

/// Validate `run` against the schema and the documented details.
pub(crate) fn check(run: &Value, what: &str) {
    let v = validator();
    let errors: Vec<String> = v
        .iter_errors(run)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
    let documented = documented_details();
    for s in run["stages"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        let keys = documented
            .get(name)
            .unwrap_or_else(|| panic!("docs/run-json.md has no section for `{name}`"));
        for k in s["summary"]["details"].as_object().unwrap().keys() {
            assert!(
                keys.contains(k),
                "{what}: stage `{name}` detail `{k}` is not documented in docs/run-json.md"
            );
        }
    }
}

#[test]
fn every_run_json_follows_its_schema_and_documents_its_details() {
    let work = common::pg_tempdir();
    let (image, _) = common::corpus(
        &work.path().join("ev"),
        &["--size", "32MiB", "--seed", "19"],
    );
    let ev = work.path().join("ev");
    let hashsets = [
        format!("known={}", ev.join("NSRLFile.txt").display()),
        format!("notable={}", ev.join("notable.md5").display()),
    ];
    let all = "image-hash,filesystem,file-hash,index,carve,kff";
    let mut runs = vec![("sqlite, every stage", work.path().join("lite"), vec![])];
    if common::have_postgres("every_run_json_follows_its_schema_and_documents_its_details") {
        runs.push((
            "postgres, every stage",
            work.path().join("pg"),
            vec!["--db-engine", "postgres"],
        ));
        // The ftk4 profile: compound files expanded, the KFF library
        // loaded into the case database first (`preparation`), the
        // server's temporary files on the temp channel (`server_temp`).
        runs.push((
            "ftk4, every stage",
            work.path().join("ftk4"),
            vec!["--profile", "ftk4"],
        ));
    }
    for (what, dir, extra) in &runs {
        let mut cmd = common::stage_run(all, &image, dir, &[]);
        for h in &hashsets {
            cmd.args(["--hashset", h]);
        }
        cmd.args(extra);
        std::fs::create_dir_all(dir).unwrap();
        common::run_ok(&mut cmd);
        let run: Value =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        check(&run, what);
    }
    // A run with a failed stage (a signature file that is not there)
    // still writes a report that follows the schema.
    let dir = work.path().join("failed");
    std::fs::create_dir_all(&dir).unwrap();
    let out = common::stage_run(
        "filesystem,carve",
        &image,
        &dir,
        &["carve.signatures=/nonexistent/scalpel.conf"],
    )
    .output()
    .unwrap();
    if let Ok(bytes) = std::fs::read(dir.join("run.json")) {
        let run: Value = serde_json::from_slice(&bytes).unwrap();
        check(&run, "a failed stage");
    } else {
        assert!(!out.status.success(), "a run that wrote no report failed");
    }
    // The schema is strict enough to catch a broken report.
    let run: Value =
        serde_json::from_slice(&std::fs::read(work.path().join("lite/run.json")).unwrap()).unwrap();
    // The system's own count of the process's I/O holds at least what the
    // channels counted: the image hash reads the whole image through
    // read system calls, and the index writes its segments.
    for (stage, field, channel, counted) in [
        ("image-hash", "read_bytes", "evidence", "bytes_read"),
        ("index", "write_bytes", "case", "bytes_written"),
    ] {
        let s = run["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == stage)
            .unwrap();
        let (system, channels) = (
            s["process_io"][field].as_u64().unwrap(),
            s["channels"][channel][counted].as_u64().unwrap(),
        );
        assert!(
            channels > 0 && system >= channels,
            "{stage}: {system} < {channels}"
        );
    }
    let v = validator();
    let mut broken = run.clone();
    broken["stages"][0]["status"] = "done".into();
    assert!(!v.is_valid(&broken));
    let mut broken = run.clone();
    broken["totals"]["channels"]["case"]["bytes_read"] = (-1).into();
    assert!(!v.is_valid(&broken));
    let mut broken = run;
    broken["stages"][1]["channels"]["evidence"]
        .as_object_mut()
        .unwrap()
        .insert("surprise".into(), 1.into());
    assert!(!v.is_valid(&broken));
    // And the library's own types read it back.
    let typed: caseload_engine::report::RunReport =
        serde_json::from_slice(&std::fs::read(work.path().join("lite/run.json")).unwrap()).unwrap();
    assert_eq!(typed.stages.len(), 6);
    common::assert_no_server_left(work.path());
}
