//! Same seed and options give byte-identical image, manifest and hash sets,
//! with one worker thread or two, and across runs; another seed gives a
//! different corpus.

use crate::common;

use md5::{Digest, Md5};
use std::path::Path;

const OUTPUTS: &[&str] = &[
    "image.dd",
    "manifest.json",
    "NSRLFile.txt",
    "RDSv3.db",
    "notable.md5",
    "notable.sha1",
];

fn run(dir: &Path, seed: &str, threads: &str) -> Vec<String> {
    let out = common::caseload()
        .args(["corpus", "--out"])
        .arg(dir)
        .args([
            "--size",
            "48MiB",
            "--seed",
            seed,
            "--profile",
            "suspect",
            "--decoys",
            "20000",
            "--threads",
            threads,
        ])
        .output()
        .expect("run caseload");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    OUTPUTS
        .iter()
        .map(|n| {
            let data = std::fs::read(dir.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            Md5::digest(&data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        })
        .collect()
}

#[test]
fn output_is_identical_across_threads_and_runs() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let c = tempfile::tempdir().expect("tempdir");
    let one = run(a.path(), "9", "1");
    let two = run(b.path(), "9", "2");
    assert_eq!(one, two, "1 thread vs 2 threads");
    let again = run(c.path(), "9", "2");
    assert_eq!(two, again, "second run");
    let other = run(c.path(), "10", "2");
    for (i, n) in OUTPUTS.iter().enumerate() {
        assert_ne!(two[i], other[i], "{n} does not depend on the seed");
    }
}
