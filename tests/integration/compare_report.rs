//! One E01-against-raw `caseload compare` (the same corpus written both
//! ways by `caseload corpus --format dd,e01`), shared by every test here:
//! per-stage ratios in one command, checked against each run's own
//! run.json; compare.json against its JSON Schema; compare.csv against
//! compare.json; report.html rendered in headless Chromium.

use crate::common;
use crate::compare_support;

use compare_support::{STAGES, compare_cmd, f, median, stage, summary};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

struct Shared {
    /// Keeps the directory alive for every test.
    _work: tempfile::TempDir,
    dd: PathBuf,
    out: PathBuf,
    doc: Value,
    stdout: String,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let (dd, e01) = compare_support::corpus(&work.path().join("corpus"), "32MiB", 23);
        let dir = work.path().join("layout");
        let layout = compare_support::layout(work.path(), "local", &dir, &dir, &dir);
        let out = work.path().join("out");
        let result = compare_support::output(compare_cmd(&[&e01, &dd], &[&layout], &out).args([
            "--stages",
            STAGES,
            "--repeat",
            "2",
            "--threads",
            "1",
        ]));
        assert!(result.status.success(), "compare failed");
        let doc = compare_support::compare_json(&out);
        Shared {
            _work: work,
            dd,
            out,
            doc,
            stdout: String::from_utf8_lossy(&result.stdout).into_owned(),
        }
    })
}

#[test]
fn e01_against_raw_gives_per_stage_ratios_from_the_runs() {
    let s = shared();
    let doc = &s.doc;
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["baseline"], 0);
    let labels: Vec<&str> = doc["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["image.E01@local", "image.dd@local"]);
    let runs = doc["runs"].as_array().unwrap();
    let order: Vec<u64> = runs
        .iter()
        .map(|r| r["configuration"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [0, 1, 0, 1], "interleaved");

    // Ground truth: every stage's wall seconds as each run's own run.json
    // recorded them.
    let walls = |config: u64, name: &str| -> Vec<f64> {
        runs.iter()
            .filter(|r| r["configuration"] == config)
            .map(|r| {
                let report = compare_support::run_report(&s.out, r);
                let st = report["stages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x["name"] == name)
                    .unwrap()
                    .clone();
                assert_eq!(st["status"], "completed");
                f(&st["wall_seconds"])
            })
            .collect()
    };
    for name in STAGES.split(',') {
        let (e01_walls, dd_walls) = (walls(0, name), walls(1, name));
        let (e01, dd) = (stage(summary(doc, 0), name), stage(summary(doc, 1), name));
        for (st, w) in [(e01, &e01_walls), (dd, &dd_walls)] {
            assert_eq!(st["runs"], 2);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            assert!(close(f(&st["wall_seconds"]["median"]), median(w)), "{name}");
            assert!(close(
                f(&st["wall_seconds"]["min"]),
                w.iter().copied().fold(f64::INFINITY, f64::min)
            ));
            assert!(close(
                f(&st["wall_seconds"]["max"]),
                w.iter().copied().fold(0.0, f64::max)
            ));
        }
        assert_eq!(
            f(&e01["wall_ratio"]),
            1.0,
            "{name}: the baseline against itself"
        );
        let expected = median(&dd_walls) / median(&e01_walls);
        let ratio = f(&dd["wall_ratio"]);
        assert!(
            (ratio - expected).abs() <= 1e-9 * expected,
            "{name}: ratio {ratio}, runs give {expected}"
        );
        // The same content in both formats: the same items and logical
        // bytes (what differs is how the evidence is read).
        assert_eq!(e01["items"]["median"], dd["items"]["median"], "{name}");
        assert_eq!(e01["bytes"]["median"], dd["bytes"]["median"], "{name}");
    }
    // image-hash reads the raw image exactly once.
    let dd_len = std::fs::metadata(&s.dd).unwrap().len() as f64;
    assert_eq!(
        f(&stage(summary(doc, 1), "image-hash")["channels"]["evidence"]["bytes_read"]["median"]),
        dd_len
    );
    // The total ratio is the ratio of median totals.
    let totals = |c: usize| f(&summary(doc, c)["total_seconds"]["median"]);
    let total_ratio = f(&summary(doc, 1)["total_ratio"]);
    assert!((total_ratio - totals(1) / totals(0)).abs() <= 1e-9 * total_ratio);
    // The table printed at the end shows both configurations and the
    // ratio of each stage.
    for name in STAGES.split(',') {
        let ratio = format!("{:.2}", f(&stage(summary(doc, 1), name)["wall_ratio"]));
        assert!(
            s.stdout
                .lines()
                .any(|l| l.starts_with(name) && l.contains("image.dd@local") && l.contains(&ratio)),
            "{name} {ratio} in\n{}",
            s.stdout
        );
    }
}

#[test]
fn compare_json_validates_against_its_schema() {
    let s = shared();
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compare.schema.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&s.doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The schema is strict enough to catch a broken document.
    let mut broken = s.doc.clone();
    broken["status"] = "finished".into();
    assert!(!validator.is_valid(&broken));
    let mut broken = s.doc.clone();
    broken["runs"][0].as_object_mut().unwrap().remove("status");
    assert!(!validator.is_valid(&broken));
    let mut broken = s.doc.clone();
    broken["summary"][1]["stages"][0]["wall_seconds"]["median"] = "fast".into();
    assert!(!validator.is_valid(&broken));
    // And the library's own types read it back.
    let typed: caseload_workloads::CompareReport = serde_json::from_value(s.doc.clone()).unwrap();
    assert_eq!(typed.runs.len(), 4);
}

#[test]
fn compare_csv_holds_the_summary() {
    let s = shared();
    let text = std::fs::read_to_string(s.out.join("compare.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // A total row and a row per stage for each configuration.
    assert_eq!(rows.len(), 2 * (1 + STAGES.split(',').count()));
    for row in &rows {
        let config: usize = row[col("configuration")].parse().unwrap();
        let name = row[col("stage")];
        let sum = summary(&s.doc, config);
        let (median, ratio) = if name == "total" {
            (f(&sum["total_seconds"]["median"]), f(&sum["total_ratio"]))
        } else {
            let st = stage(sum, name);
            (f(&st["wall_seconds"]["median"]), f(&st["wall_ratio"]))
        };
        let csv_median: f64 = row[col("wall_s_median")].parse().unwrap();
        let csv_ratio: f64 = row[col("wall_ratio")].parse().unwrap();
        assert!((csv_median - median).abs() < 1e-5, "{name}");
        assert!((csv_ratio - ratio).abs() < 1e-5, "{name}");
    }
    let runs = std::fs::read_to_string(s.out.join("runs.csv")).unwrap();
    assert_eq!(runs.lines().count(), 1 + 4 * STAGES.split(',').count());
}

#[test]
fn report_html_renders_its_chart_in_headless_chromium() {
    let test = "report_html_renders_its_chart_in_headless_chromium";
    let s = shared();
    let html = std::fs::read_to_string(s.out.join("report.html")).unwrap();
    // Self-contained: no script, no external resource.
    assert!(!html.contains("<script"));
    assert!(only_svg_namespaces(&html));
    assert!(html.contains("id=\"stage-chart\"") && html.contains("<svg"));
    for name in STAGES.split(',') {
        assert!(html.contains(name));
    }
    common::assert_stage_chart_renders(test, &s.out.join("report.html"));
}

/// Whether every URL in the page is an XML namespace of the inline SVG.
fn only_svg_namespaces(html: &str) -> bool {
    html.match_indices("http")
        .all(|(i, _)| html[i..].starts_with("http://www.w3.org/"))
}
