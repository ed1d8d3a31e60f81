//! Shared helpers of the `compare_*` integration tests: make a small corpus,
//! write layout files, run `caseload compare`, and read what it wrote.

#![allow(dead_code)]

use super::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Stages every compare test runs: the ones every build has.
pub const STAGES: &str = "image-hash,filesystem,file-hash";

/// Generate a corpus of `size` (e.g. `12MiB`) as `image.dd` and `image.E01`
/// in `dir`.
pub fn corpus(dir: &Path, size: &str, seed: u64) -> (PathBuf, PathBuf) {
    let out = common::caseload()
        .args(["corpus", "--size", size, "--seed", &seed.to_string()])
        .args(common::dense_unless_asked(&[]))
        .args(["--decoys", "5", "--format", "dd,e01", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "corpus: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir.join("image.dd"), dir.join("image.E01"))
}

/// Write a layout file `dir/NAME.toml` with the given channel directories
/// (created if missing).
pub fn layout(dir: &Path, name: &str, database: &Path, case: &Path, temp: &Path) -> PathBuf {
    for d in [database, case, temp] {
        std::fs::create_dir_all(d).unwrap();
    }
    // TOML literal strings: no escaping, and temporary paths hold no `'`.
    let text = format!(
        "name = '{name}'\ndescription = 'test layout {name}'\n\n[channels]\ndatabase = '{}'\ncase = '{}'\ntemp = '{}'\n",
        database.display(),
        case.display(),
        temp.display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A `caseload compare` command over `evidence` × `layouts` into `out`.
pub fn compare_cmd(evidence: &[&Path], layouts: &[&Path], out: &Path) -> Command {
    let mut cmd = common::caseload();
    cmd.arg("compare");
    for e in evidence {
        cmd.arg("--evidence").arg(e);
    }
    for l in layouts {
        cmd.arg("--layout").arg(l);
    }
    cmd.arg("--out").arg(out);
    cmd
}

/// Run a command and return its output, printing its stderr (so a failing
/// test shows what compare said).
pub fn output(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// `compare.json` of an output directory.
pub fn compare_json(out: &Path) -> Value {
    let text = std::fs::read(out.join("compare.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// A run's own report (`run.json`, or `instances.json` with instances),
/// as kept in the output directory.
pub fn run_report(out: &Path, run: &Value) -> Value {
    let rel = run["report"].as_str().expect("the run kept its report");
    serde_json::from_slice(&std::fs::read(out.join(rel)).unwrap()).unwrap()
}

/// The summary of configuration `config`.
pub fn summary(doc: &Value, config: usize) -> &Value {
    doc["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["configuration"] == config)
        .unwrap()
}

/// The summary's stage called `name`.
pub fn stage<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("stage {name} in {summary}"))
}

/// `value` as f64, failing loudly.
pub fn f(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// Median of `values` (mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    assert!(n > 0);
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The file system type of the mount holding `path` (longest mount point
/// that is a prefix of its canonical path), from `/proc/mounts`.
pub fn fs_type(path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let _src = it.next()?;
            let point = it.next()?.replace("\\040", " ");
            let fs = it.next()?.to_string();
            path.starts_with(&point).then_some((point.len(), fs))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}

/// Entries left in `dir` (compare's per-run scratch must be gone).
pub fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
