//! `caseload predict` from the command line: a run predicted on the
//! devices it ran on gives its own times; a faster database device
//! predicts less time only where the database was waited on; bad device
//! descriptions are clear errors. (How close predictions come to measured
//! runs on other devices is a bench: benches/scripts/predict-check.sh.)

use crate::common;
use serde_json::Value;
use std::path::Path;

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

    // A probe of another directory than the run's: predicted, with a
    // warning that it may be another layout's devices.
    let other = work.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let probe_of = |dir: &Path, evidence: &Path| -> std::path::PathBuf {
        let out = common::run_ok(
            common::caseload()
                .args(["probe", "--size", "4MiB", "--seconds", "0.2", "--json"])
                .arg("--database")
                .arg(dir)
                .arg("--case")
                .arg(dir)
                .arg("--temp")
                .arg(dir)
                .arg("--evidence")
                .arg(evidence),
        );
        let path = dir.join(format!(
            "probe-{}.json",
            evidence.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&path, &out.stdout).unwrap();
        path
    };
    let elsewhere = probe_of(&other, &image);
    let out = common::run_ok(
        common::caseload()
            .args(["predict", "--run"])
            .arg(&run_json)
            .arg("--from")
            .arg(&elsewhere)
            .args(["--devices", "ftk4-base"]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another layout"), "{err}");
    // Evidence probed as an E01 for a run that read a raw image: refused.
    let e01 = work.path().join("probe.E01");
    let mut bytes = b"EVF\x09\x0d\x0a\xff\x00".to_vec();
    bytes.resize(4 << 20, 0);
    std::fs::write(&e01, bytes).unwrap();
    let ewf_probe = probe_of(&case, &e01);
    let out = common::caseload()
        .args(["predict", "--run"])
        .arg(&run_json)
        .arg("--from")
        .arg(&probe_json)
        .arg("--devices")
        .arg(&ewf_probe)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("E01 and DD"), "{err}");

    // A probe that lacks a channel the run used: refused, naming it.
    let all: Vec<Value> = serde_json::from_slice(&std::fs::read(&probe_json).unwrap()).unwrap();
    let evidence_only: Vec<&Value> = all.iter().filter(|p| p["channel"] == "evidence").collect();
    let partial = work.path().join("partial.json");
    std::fs::write(&partial, serde_json::to_vec(&evidence_only).unwrap()).unwrap();
    let out = common::caseload()
        .args(["predict", "--run"])
        .arg(&run_json)
        .arg("--from")
        .arg(&partial)
        .args(["--devices", "ftk4-base"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no figures for the") && err.contains("channel's device"),
        "{err}"
    );

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

/// The study's question on the lab (root, loop devices, FUSE; skipped
/// with a notice otherwise): a run on the base system's three 7200 rpm
/// disks, predicted for the high-end combination (SATA SSD system, RAID-5
/// evidence and case, PCIe SSD database), agrees with a run measured there
/// within the error band `predict` prints; so does the prediction the
/// other way, from the high-end run down to the base system.
#[test]
fn a_prediction_from_the_base_lab_agrees_with_the_high_end_lab_within_its_band() {
    if let Some(why) = common::lab_unavailable() {
        eprintln!("SKIPPED predict on the lab: {why}");
        return;
    }
    let _serial = common::lab_lock();
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    common::run_ok(
        common::caseload()
            .args(["corpus", "--size", "64MiB", "--seed", "91"])
            .args(["--decoys", "20000", "--out"])
            .arg(&corpus),
    );
    let tag = std::process::id();
    let base = common::small_lab_file(
        work.path(),
        &format!("t{tag}-pbase"),
        ["hdd-7200", "hdd-7200", "hdd-7200"],
        "512MiB",
    );
    let high = common::small_lab_file(
        work.path(),
        &format!("t{tag}-phigh"),
        ["sata-ssd", "raid5-4x7200", "pcie-ssd"],
        "512MiB",
    );
    // Three runs per lab, and the quickest of each taken: the other tests
    // of this binary run beside this one, and a run they slow down (the
    // high-end lab's stages are mostly CPU) is not the lab's figure.
    let out_dir = common::study_ftk4_dd(
        work.path(),
        &format!("{base},{high}"),
        &corpus,
        &["--repeat", "3"],
    );
    let total = |run: &Path| -> f64 {
        let v: Value = serde_json::from_slice(&std::fs::read(run).unwrap()).unwrap();
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["wall_seconds"].as_f64().unwrap())
            .sum()
    };
    let quickest = |lab: &str| -> (std::path::PathBuf, f64) {
        let name = Path::new(lab).file_stem().unwrap().to_str().unwrap();
        (1..=3)
            .map(|r| {
                out_dir
                    .join("labs")
                    .join(name)
                    .join("runs")
                    .join(format!("c-image.dd@{name}-r{r}.json"))
            })
            .map(|run| {
                let t = total(&run);
                (run, t)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap()
    };
    for (from, to) in [(&base, &high), (&high, &base)] {
        let p = common::run_ok(
            common::caseload()
                .args(["predict", "--json", "--run"])
                .arg(quickest(from).0)
                .args(["--from", from.as_str(), "--devices", to.as_str()]),
        );
        let p: Value = serde_json::from_slice(&p.stdout).unwrap();
        let predicted = p["predicted_total_s"].as_f64().unwrap();
        let band = p["error_band"].as_f64().unwrap();
        let measured = quickest(to).1;
        let error = predicted / measured - 1.0;
        eprintln!(
            "predict on the lab: {from} -> {to}: predicted {predicted:.2} s, measured {measured:.2} s ({:+.1}%, band {:.0}%)",
            error * 100.0,
            band * 100.0
        );
        assert!(
            error.abs() <= band,
            "{from} -> {to}: predicted {predicted:.2} s, measured {measured:.2} s, outside the band {band}"
        );
    }
}
