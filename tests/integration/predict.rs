//! `caseload predict` from the command line: a run predicted on the
//! devices it ran on gives its own times; a faster database device
//! predicts less time only where the database was waited on; bad device
//! descriptions are clear errors. (How close predictions come to measured
//! runs on other devices is a bench: benches/scripts/predict-check.sh.)

use crate::common;
use serde_json::Value;

#[test]
fn predictions_follow_the_devices_and_bad_inputs_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "21"],
    );
    let case = work.path().join("case");
    std::fs::create_dir_all(&case).unwrap();
    common::run_ok(&mut common::stage_run(
        "filesystem,file-hash,index",
        &image,
        &case,
        &[],
    ));
    let run_json = case.join("run.json");
    let recorded: Value = serde_json::from_slice(&std::fs::read(&run_json).unwrap()).unwrap();

    // A probe of the directory the run used, for every channel.
    let probe = common::run_ok(
        common::caseload()
            .args(["probe", "--size", "4MiB", "--seconds", "0.2", "--json"])
            .arg("--database")
            .arg(&case)
            .arg("--case")
            .arg(&case)
            .arg("--temp")
            .arg(&case)
            .arg("--evidence")
            .arg(&image),
    );
    let probe_json = work.path().join("probe.json");
    std::fs::write(&probe_json, &probe.stdout).unwrap();

    let predict = |from: &str, to: &str| -> Value {
        let out = common::run_ok(
            common::caseload()
                .args(["predict", "--json", "--run"])
                .arg(&run_json)
                .args(["--from", from, "--devices", to]),
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let probe_arg = probe_json.display().to_string();
    let same = predict(&probe_arg, &probe_arg);
    for (p, r) in same["stages"]
        .as_array()
        .unwrap()
        .iter()
        .zip(recorded["stages"].as_array().unwrap())
    {
        assert_eq!(p["name"], r["name"]);
        let (ps, rs) = (
            p["predicted_s"].as_f64().unwrap(),
            r["wall_seconds"].as_f64().unwrap(),
        );
        assert!((ps - rs).abs() < 1e-6, "{}: {ps} against {rs}", p["name"]);
    }

    // Built-in labs as device descriptions: from the 7200 rpm base system
    // to the same with a PCIe database, the prediction can only shrink.
    let base = predict("ftk4-base", "ftk4-base");
    let pcie = predict("ftk4-base", "ftk4-pcie-db");
    let total = |v: &Value| v["predicted_total_s"].as_f64().unwrap();
    assert!(total(&pcie) <= total(&base) + 1e-9, "{pcie}");

    // A JSON file that is no probe, and an unknown lab.
    let bogus = work.path().join("bogus.json");
    std::fs::write(&bogus, b"{\"hello\": 1}").unwrap();
    for (from, want) in [
        (bogus.display().to_string(), "probe --json"),
        ("no-such-lab".to_string(), "no-such-lab"),
    ] {
        let out = common::caseload()
            .args(["predict", "--run"])
            .arg(&run_json)
            .args(["--from", &from, "--devices", "ftk4-base"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
}
