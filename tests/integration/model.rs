//! `caseload model` from the command line: one worker gives the recorded
//! stage times, more workers never make a stage slower nor faster than
//! its asymptotic bound allows, a link adds its time, and bad input is a
//! clear error. (Validation against `caseload cluster` runs is issue 21's
//! bench, still to come.)

use crate::common;
use serde_json::Value;

#[test]
fn one_worker_gives_the_recorded_times_and_more_stay_within_the_bounds() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "23"],
    );
    let case = work.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    common::run_ok(&mut common::stage_run(
        "image-hash,filesystem,file-hash",
        &image,
        &case,
        &[],
    ));
    let recorded: Value =
        serde_json::from_slice(&std::fs::read(case.join("run.json")).unwrap()).unwrap();
    let model = |extra: &[&str]| -> Value {
        let out = common::run_ok(
            common::caseload()
                .args(["model", "--json", "--workers", "1,2,8", "--run"])
                .arg(&case)
                .args(extra),
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let m = model(&[]);
    assert_eq!(m["schema"], "caseload-model");
    assert_eq!(m["workers"], serde_json::json!([1, 2, 8]));
    let stages = m["stages"].as_array().unwrap();
    assert_eq!(stages.len(), recorded["stages"].as_array().unwrap().len());
    for (s, r) in stages.iter().zip(recorded["stages"].as_array().unwrap()) {
        assert_eq!(s["name"], r["name"]);
        let floats = |v: &Value| -> Vec<f64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        let (t, bound) = (floats(&s["predicted_s"]), floats(&s["bound_s"]));
        let wall = r["wall_seconds"].as_f64().unwrap();
        assert!(
            (t[0] - wall).abs() < 1e-9,
            "{}: {} against {wall}",
            s["name"],
            t[0]
        );
        assert!(t[1] <= t[0] + 1e-12 && t[2] <= t[1] + 1e-12, "{s}");
        for (ti, bi) in t.iter().zip(&bound) {
            assert!(ti + 1e-9 >= *bi, "{s}: faster than its bound");
        }
        assert!(s["bounds"]["knee"].as_f64().unwrap_or(f64::INFINITY) >= 1.0);
    }
    // --out: the same model as JSON, and a page with the throughput chart.
    let out_dir = work.path().join("model");
    common::run_ok(
        common::caseload()
            .args(["model", "--workers", "1,2,8", "--run"])
            .arg(&case)
            .arg("--out")
            .arg(&out_dir),
    );
    let written: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("model.json")).unwrap()).unwrap();
    assert_eq!(written, m);
    let html = std::fs::read_to_string(out_dir.join("model.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("MVA prediction"),
        "{html}"
    );
    for s in stages {
        assert!(html.contains(&format!("<td>{}</td>", s["name"].as_str().unwrap())));
    }

    // Workers sharing this machine's processors: a cpu station, and one
    // worker still gives the recorded times.
    let shared = model(&["--shared-cpus", "2"]);
    assert_eq!(shared["shared_cpus"], 2);
    for (s, r) in shared["stages"]
        .as_array()
        .unwrap()
        .iter()
        .zip(recorded["stages"].as_array().unwrap())
    {
        let names: Vec<&str> = s["network"]["stations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|st| st["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["evidence", "database", "case", "cpu"]);
        let t1 = s["predicted_s"][0].as_f64().unwrap();
        let wall = r["wall_seconds"].as_f64().unwrap();
        // Exact unless the devices and processors took more than the wall
        // time (then the worker's own time is 0 and one worker is slower).
        assert!(t1 + 1e-9 >= wall, "{t1} {wall}");
    }

    // A slow link between the workers and the shared store adds time.
    let slow = model(&["--link-mb-s", "1"]);
    let total = |v: &Value| v["total_s"][0].as_f64().unwrap();
    assert!(total(&slow) > total(&m), "{} {}", total(&slow), total(&m));

    // Bad input: no workers, a zero link rate, a file that is no run.json.
    let bogus = work.path().join("bogus.json");
    std::fs::write(&bogus, b"{\"hello\": 1}").unwrap();
    for (args, want) in [
        (vec!["--workers", "0,4"], "at least 1"),
        (vec!["--link-mb-s", "0"], "link rate"),
        (vec!["--shared-cpus", "0"], "shared processors"),
    ] {
        let out = common::caseload()
            .args(["model", "--run"])
            .arg(&case)
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = common::caseload()
        .args(["model", "--run"])
        .arg(&bogus)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a caseload run.json"));
}
