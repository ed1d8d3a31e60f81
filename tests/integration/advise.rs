//! `caseload advise`: every configuration of candidate upgrades a budget
//! allows, predicted from a recorded run, ranked and with its Pareto
//! front; bad candidates files, budgets and run.json versions refused
//! with the line or field named; and, on the lab (root), the ranking and
//! totals of three candidates against the measured runs on labs built
//! with them.

use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Candidates against the FTK 4 study's base system (three 7200 rpm
/// disks): a SATA or PCIe SSD database, an SSD for evidence and case, an
/// SSD for the system and temp.
const CANDIDATES: &str = r#"currency = "EUR"
from = "ftk4-base"

[[option]]
name = "SATA SSD database"
channels = ["database"]
model = "sata-ssd"
price = 150

[[option]]
name = "PCIe SSD database"
channels = ["database"]
model = "pcie-ssd"
price = 400

[[option]]
name = "SSD evidence+case"
channels = ["evidence", "case"]
model = "sata-ssd"
price = 300

[[option]]
name = "SSD system"
channels = ["temp"]
model = "sata-ssd"
price = 100
"#;

fn advise(run: &Path, candidates: &Path, extra: &[&str]) -> Output {
    common::caseload()
        .arg("advise")
        .arg("--run")
        .arg(run)
        .arg("--candidates")
        .arg(candidates)
        .args(extra)
        .output()
        .unwrap()
}

fn advice(run: &Path, candidates: &Path, extra: &[&str]) -> Value {
    let out = advise(run, candidates, &[&["--json"], extra].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn refused(run: &Path, candidates: &Path, extra: &[&str]) -> String {
    let out = advise(run, candidates, extra);
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn total(c: &Value) -> f64 {
    c["predicted_total_s"].as_f64().unwrap()
}

fn price(c: &Value) -> f64 {
    c["price"].as_f64().unwrap()
}

fn options(c: &Value) -> Vec<String> {
    c["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn advise_predicts_every_configuration_ranks_them_and_marks_the_front() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "21"],
    );
    let root = work.path().join("dirs");
    common::run_ok(&mut common::channels_run(
        "filesystem,file-hash,index,carve",
        &image,
        &root,
    ));
    let run = root.join("case").join("run.json");
    let candidates = work.path().join("candidates.toml");
    std::fs::write(&candidates, CANDIDATES).unwrap();
    let out_dir = work.path().join("advice");
    let a = advice(&run, &candidates, &["--out", out_dir.to_str().unwrap()]);
    assert_eq!(a["schema"], "caseload-advice");
    assert_eq!(a["currency"], "EUR");
    assert!(a["method"].as_str().unwrap().contains("docs/predict.md"));
    let error = a["total_error"].as_f64().unwrap();
    assert!(error > 0.0 && error < 0.5);
    let configs = a["configurations"].as_array().unwrap();
    // The database once at most: {none, SATA, PCIe} x {none, data} x
    // {none, system}.
    assert_eq!(configs.len(), 12, "{configs:#?}");
    assert!(!configs.iter().any(|c| {
        let o = options(c);
        o.contains(&"SATA SSD database".to_string()) && o.contains(&"PCIe SSD database".to_string())
    }));
    // Ranked by predicted total, 1..n.
    for (i, c) in configs.iter().enumerate() {
        assert_eq!(c["rank"], i + 1);
        if i > 0 {
            assert!(total(&configs[i - 1]) <= total(c));
        }
        let range = (c["low_s"].as_f64().unwrap(), c["high_s"].as_f64().unwrap());
        assert!((range.0 - total(c) * (1.0 - error)).abs() < 1e-9);
        assert!((range.1 - total(c) * (1.0 + error)).abs() < 1e-9);
    }
    // The workstation as it is: no saving, predicted as recorded (a run
    // predicted on its own devices gives its own times).
    let base = configs.iter().find(|c| options(c).is_empty()).unwrap();
    assert_eq!(price(base), 0.0);
    let recorded = a["recorded_total_s"].as_f64().unwrap();
    assert!((total(base) - recorded).abs() < 1e-6 * recorded.max(1.0));
    // Savings and value are against it.
    for c in configs {
        let saved = c["saved_s"].as_f64().unwrap();
        assert!((saved - (total(base) - total(c))).abs() < 1e-9);
        match c["saved_s_per_price"].as_f64() {
            Some(v) => assert!((v - saved / price(c)).abs() < 1e-9),
            None => assert_eq!(price(c), 0.0),
        }
    }
    // The front: nothing at its price or less is faster; everything off
    // it is beaten by something at its price or less.
    for c in configs {
        let beaten = configs
            .iter()
            .any(|o| price(o) <= price(c) && total(o) < total(c));
        assert_eq!(c["pareto"].as_bool().unwrap(), !beaten, "{c:#}");
    }
    assert!(base["pareto"].as_bool().unwrap());
    // Best value: the most seconds saved per unit of price.
    let best = a["best_value"].as_u64().unwrap() as usize;
    let best_v = configs[best - 1]["saved_s_per_price"].as_f64().unwrap();
    for c in configs {
        if let Some(v) = c["saved_s_per_price"].as_f64() {
            assert!(v <= best_v + 1e-12);
        }
    }
    // Each prediction is `caseload predict`'s: the SATA SSD database
    // alone is the study's ssd-db lab.
    let out = common::run_ok(
        common::caseload()
            .args([
                "predict",
                "--json",
                "--from",
                "ftk4-base",
                "--devices",
                "ftk4-ssd-db",
                "--run",
            ])
            .arg(&run),
    );
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ssd_db = configs
        .iter()
        .find(|c| options(c) == ["SATA SSD database"])
        .unwrap();
    assert!(
        (total(ssd_db) - p["predicted_total_s"].as_f64().unwrap()).abs() < 1e-9,
        "{ssd_db:#} against {p:#}"
    );
    // The files: JSON as printed, the whole table, a page with the chart.
    let written: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("advise.json")).unwrap()).unwrap();
    assert_eq!(written, a);
    let txt = std::fs::read_to_string(out_dir.join("advise.txt")).unwrap();
    assert_eq!(
        txt.lines().filter(|l| l.contains("SSD")).count(),
        11,
        "{txt}"
    );
    let html = std::fs::read_to_string(out_dir.join("advise.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("Pareto front"),
        "{html}"
    );

    // A budget keeps to it.
    let within = advice(&run, &candidates, &["--budget", "260"]);
    let kept = within["configurations"].as_array().unwrap();
    assert!(kept.iter().all(|c| price(c) <= 260.0));
    // {}, SATA db, SSD system, SATA db + SSD system.
    assert_eq!(kept.len(), 4, "{kept:#?}");

    // A budget below the cheapest option.
    let err = refused(&run, &candidates, &["--budget", "50"]);
    assert!(
        err.contains("--budget 50 is below the cheapest option (\"SSD system\", 100)"),
        "{err}"
    );
}

/// The stages of a run.json, and their total.
fn recorded_total(run: &Path) -> f64 {
    let doc: Value = serde_json::from_slice(&std::fs::read(run).unwrap()).unwrap();
    doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["wall_seconds"].as_f64().unwrap())
        .sum()
}

#[test]
fn a_workstation_option_is_predicted_from_the_run_recorded_with_it() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "23"],
    );
    let stages = "filesystem,file-hash,carve";
    // The workstation as it is, and the same work recorded with 64 GB of
    // modelled memory (cold: a modelled cache starts empty).
    let base_dirs = work.path().join("base");
    common::run_ok(&mut common::channels_run(stages, &image, &base_dirs));
    let ram_dirs = work.path().join("ram");
    let mut cmd = common::caseload();
    cmd.args(["run", "--stages", stages, "--threads", "2", "--ram", "64GB"])
        .arg("--evidence")
        .arg(&image);
    for (flag, sub) in [("--database", "db"), ("--case", "case"), ("--temp", "temp")] {
        std::fs::create_dir_all(ram_dirs.join(sub)).unwrap();
        cmd.arg(flag).arg(ram_dirs.join(sub));
    }
    common::run_ok(&mut cmd);
    let base = base_dirs.join("case").join("run.json");
    let with_ram = ram_dirs.join("case").join("run.json");
    let candidates = work.path().join("candidates.toml");
    std::fs::write(
        &candidates,
        format!(
            "from = \"ftk4-base\"\n\n[[option]]\nname = \"64 GB\"\nram = \"64GB\"\nrun = \"{}\"\nprice = 250\n\n[[option]]\nname = \"SATA SSD database\"\nchannels = [\"database\"]\nmodel = \"sata-ssd\"\nprice = 150\n",
            with_ram.display()
        ),
    )
    .unwrap();
    let a = advice(&base, &candidates, &[]);
    let configs = a["configurations"].as_array().unwrap();
    // {}, RAM, SSD, RAM + SSD.
    assert_eq!(configs.len(), 4, "{configs:#?}");
    let find = |names: &[&str]| {
        configs
            .iter()
            .find(|c| options(c) == names)
            .unwrap_or_else(|| panic!("no configuration {names:?}"))
    };
    // The RAM alone: the run recorded with it, as recorded.
    let ram = find(&["64 GB"]);
    assert!(
        (total(ram) - recorded_total(&with_ram)).abs() < 1e-6,
        "{ram:#}"
    );
    assert_eq!(price(ram), 250.0);
    // RAM and the SSD: that run predicted on the SSD, as predict does.
    let both = find(&["64 GB", "SATA SSD database"]);
    let out = common::run_ok(
        common::caseload()
            .args([
                "predict",
                "--json",
                "--from",
                "ftk4-base",
                "--devices",
                "ftk4-ssd-db",
                "--run",
            ])
            .arg(&with_ram),
    );
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!((total(both) - p["predicted_total_s"].as_f64().unwrap()).abs() < 1e-9);
    assert_eq!(price(both), 400.0);
    // The option says what it buys.
    let buys = a["options"][0]["buys"].as_str().unwrap();
    assert!(
        buys.contains("ram 64GB") && buys.contains("run.json"),
        "{buys}"
    );
    // A workstation run of other work is refused.
    let other_dirs = work.path().join("other");
    common::run_ok(&mut common::channels_run("filesystem", &image, &other_dirs));
    let file = work.path().join("other.toml");
    std::fs::write(
        &file,
        format!(
            "from = \"ftk4-base\"\n[[option]]\nname = \"x\"\nrun = \"{}\"\nprice = 1\n",
            other_dirs.join("case").join("run.json").display()
        ),
    )
    .unwrap();
    let err = refused(&base, &file, &[]);
    assert!(
        err.contains("option \"x\": run: it ran other stages"),
        "{err}"
    );
    // A slower processor the run was not recorded with is refused.
    std::fs::write(
        &file,
        format!(
            "from = \"ftk4-base\"\n[[option]]\nname = \"slow\"\ncpu_scale = 0.5\nrun = \"{}\"\nprice = 1\n",
            with_ram.display()
        ),
    )
    .unwrap();
    let err = refused(&base, &file, &[]);
    assert!(
        err.contains("cpu_scale") && err.contains("without a CPU quota"),
        "{err}"
    );
}

/// A candidates file with one option replaced by `option`.
fn with_option(dir: &Path, name: &str, option: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!("from = \"ftk4-base\"\n\n[[option]]\nname = \"ok\"\nchannels = [\"temp\"]\nmodel = \"sata-ssd\"\nprice = 100\n\n[[option]]\n{option}"),
    )
    .unwrap();
    path
}

#[test]
fn bad_candidates_budgets_and_run_versions_are_refused_naming_the_line_or_field() {
    let work = tempfile::tempdir().unwrap();
    let (image, _) = common::corpus(
        &work.path().join("corpus"),
        &["--size", "32MiB", "--seed", "22"],
    );
    let root = work.path().join("dirs");
    common::run_ok(&mut common::channels_run(
        "filesystem,file-hash",
        &image,
        &root,
    ));
    let run = root.join("case").join("run.json");
    let d = work.path();
    // Line 9 is the second [[option]].
    for (name, option, want) in [
        (
            "unknown-model",
            "name = \"x\"\nchannels = [\"database\"]\nmodel = \"floppy-9000\"\nprice = 10\n",
            "line 9, option \"x\": model:",
        ),
        (
            "negative-price",
            "name = \"x\"\nchannels = [\"database\"]\nmodel = \"sata-ssd\"\nprice = -5\n",
            "line 9, option \"x\": price: -5 is not zero or more",
        ),
        (
            "missing-price",
            "name = \"x\"\nchannels = [\"database\"]\nmodel = \"sata-ssd\"\n",
            "line 9, option \"x\": price: missing",
        ),
        (
            "unknown-channel",
            "name = \"x\"\nchannels = [\"db\"]\nmodel = \"sata-ssd\"\nprice = 10\n",
            "line 9, option \"x\": channels: `db` is not a channel",
        ),
        (
            "two-devices",
            "name = \"x\"\nchannels = [\"case\"]\nmodel = \"sata-ssd\"\nprobe = \"p.json\"\nprice = 10\n",
            "line 9, option \"x\": model: give exactly one of",
        ),
        (
            "bad-figures",
            "name = \"x\"\nchannels = [\"case\"]\nprice = 10\nfigures = { read_mb_s = 0, write_mb_s = 100, random_read_iops = 100 }\n",
            "line 9, option \"x\": figures: every figure must be positive",
        ),
        (
            "workstation-without-run",
            "name = \"x\"\nram = \"64GB\"\nprice = 10\n",
            "line 9, option \"x\": run: missing",
        ),
        (
            "unknown-key",
            "name = \"x\"\nchannels = [\"case\"]\nmodel = \"sata-ssd\"\nprice = 10\ncolour = \"red\"\n",
            "line 14",
        ),
    ] {
        let file = with_option(d, name, option);
        let err = refused(&run, &file, &[]);
        assert!(err.contains(want), "{name}: {err}");
    }
    // A workstation option whose run was recorded without that RAM.
    let file = with_option(
        d,
        "ram-mismatch",
        &format!(
            "name = \"64 GB\"\nram = \"64GB\"\nrun = \"{}\"\nprice = 10\n",
            run.display()
        ),
    );
    let err = refused(&run, &file, &[]);
    assert!(
        err.contains("option \"64 GB\": ram: 64GB") && err.contains("recorded with no --ram"),
        "{err}"
    );
    // No devices to start from.
    let no_from = d.join("no-from.toml");
    std::fs::write(
        &no_from,
        "[[option]]\nname = \"x\"\nchannels = [\"case\"]\nmodel = \"sata-ssd\"\nprice = 1\n",
    )
    .unwrap();
    assert!(refused(&run, &no_from, &[]).contains("--from"));
    // A run.json of another version.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    doc["schema_version"] = 99.into();
    let old = d.join("other-version.json");
    std::fs::write(&old, serde_json::to_vec(&doc).unwrap()).unwrap();
    let ok = with_option(
        d,
        "fine",
        "name = \"y\"\nchannels = [\"case\"]\nmodel = \"sata-ssd\"\nprice = 1\n",
    );
    let err = refused(&old, &ok, &[]);
    assert!(
        err.contains("field `schema_version` is 99") && err.contains("version 1"),
        "{err}"
    );
    doc["schema"] = "something-else".into();
    std::fs::write(&old, serde_json::to_vec(&doc).unwrap()).unwrap();
    assert!(refused(&old, &ok, &[]).contains("field `schema` is \"something-else\""));
}

/// A lab of the study's shape with `models` for system, data and
/// database (room on data for the evidence and the case).
fn lab_file(dir: &Path, name: &str, system: &str, data: &str, database: &str) -> String {
    common::small_lab_file(dir, name, [system, data, database], "384MiB")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn advise_ranks_three_candidates_as_the_lab_measures_them_within_the_stated_error() {
    let test = "advise on the lab";
    if let Some(why) = common::lab_unavailable() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let _serial = common::lab_lock();
    let work = tempfile::tempdir().unwrap();
    let corpus = work.path().join("corpus");
    common::run_ok(
        common::caseload()
            .args([
                "corpus", "--size", "128MiB", "--seed", "12", "--format", "dd",
            ])
            // A hash library of some MiB: KFF's lookups reach the database
            // device.
            .args(["--decoys", "100000", "--out"])
            .arg(&corpus),
    );
    let tag = std::process::id();
    let d = work.path();
    let base = lab_file(
        d,
        &format!("a{tag}-base"),
        "hdd-7200",
        "hdd-7200",
        "hdd-7200",
    );
    let measured = [
        (
            "SSD database",
            "database",
            lab_file(d, &format!("a{tag}-db"), "hdd-7200", "hdd-7200", "sata-ssd"),
        ),
        (
            "SSD evidence+case",
            "evidence\", \"case",
            lab_file(
                d,
                &format!("a{tag}-data"),
                "hdd-7200",
                "sata-ssd",
                "hdd-7200",
            ),
        ),
        (
            "SSD system",
            "temp",
            lab_file(
                d,
                &format!("a{tag}-sys"),
                "sata-ssd",
                "hdd-7200",
                "hdd-7200",
            ),
        ),
    ];
    let labs: Vec<&str> = std::iter::once(base.as_str())
        .chain(measured.iter().map(|m| m.2.as_str()))
        .collect();
    // native (SQLite): the database's I/O is caseload's own, timed per
    // call (a PostgreSQL server's comes from its statistics views).
    let out_dir = common::study_ftk4_dd(
        d,
        &labs.join(","),
        &corpus,
        &["--profile", "native", "--repeat", "3"],
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("compare.json")).unwrap()).unwrap();
    // Each configuration's runs: (total seconds, run.json).
    let runs = |config: usize| -> Vec<(f64, PathBuf)> {
        report["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["configuration"] == config)
            .map(|r| {
                assert_eq!(r["status"], "completed", "{}", r["error"]);
                let path = out_dir.join(r["report"].as_str().unwrap());
                let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                let t = doc["stages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["wall_seconds"].as_f64().unwrap())
                    .sum();
                (t, path)
            })
            .collect()
    };
    // The base system's median run is the one advised on.
    let mut base_runs = runs(0);
    base_runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (base_total, base_run) = base_runs[base_runs.len() / 2].clone();
    let mut text = format!("from = \"{base}\"\ncurrency = \"EUR\"\n");
    for (i, (name, channels, _)) in measured.iter().enumerate() {
        text.push_str(&format!(
            "\n[[option]]\nname = \"{name}\"\nchannels = [\"{channels}\"]\nmodel = \"sata-ssd\"\nprice = {}\n",
            100 * (i + 1)
        ));
    }
    let candidates = d.join("candidates.toml");
    std::fs::write(&candidates, text).unwrap();
    let a = advice(&base_run, &candidates, &[]);
    let error = a["total_error"].as_f64().unwrap();
    let configs = a["configurations"].as_array().unwrap();
    let mut predicted = Vec::new();
    let mut lab = Vec::new();
    for (i, (name, _, _)) in measured.iter().enumerate() {
        let c = configs
            .iter()
            .find(|c| options(c) == [name.to_string()])
            .unwrap();
        let m = median(runs(i + 1).into_iter().map(|r| r.0).collect());
        eprintln!(
            "{test}: {name}: predicted {:.2} s, measured {m:.2} s ({:+.1}%); base {base_total:.2} s",
            total(c),
            (total(c) / m - 1.0) * 100.0
        );
        predicted.push((total(c), *name));
        lab.push((m, *name));
        assert!(
            (total(c) - m).abs() <= error * m,
            "{name}: predicted {} s, measured {m} s: beyond the stated {error}",
            total(c)
        );
    }
    predicted.sort_by(|a, b| a.0.total_cmp(&b.0));
    lab.sort_by(|a, b| a.0.total_cmp(&b.0));
    let order = |v: &[(f64, &str)]| v.iter().map(|p| p.1.to_string()).collect::<Vec<_>>();
    assert_eq!(
        order(&predicted),
        order(&lab),
        "predicted {predicted:?}, measured {lab:?}"
    );
}
