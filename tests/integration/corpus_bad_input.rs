//! Bad input to `caseload corpus`: a clear message, a non-zero exit, and no
//! output file left behind that looks complete.

use crate::common;

use std::path::Path;
use std::process::Output;

const FINAL: &[&str] = &[
    "image.dd",
    "manifest.json",
    "NSRLFile.txt",
    "RDSv3.db",
    "notable.md5",
    "notable.sha1",
];

fn corpus(out: &Path, args: &[&str]) -> Output {
    common::caseload()
        .args(["corpus", "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("run caseload")
}

fn assert_fails(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded unexpectedly: {err}");
    assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn assert_nothing_left(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let left: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn invalid_options_are_refused_before_writing() {
    let d = tempfile::tempdir().expect("tempdir");
    let out = d.path().join("out");
    let cases: &[(&[&str], &str)] = &[
        (&["--size", "31MiB", "--seed", "1"], "minimum of 32 MiB"),
        (&["--size", "abc", "--seed", "1"], "not a size"),
        (&["--size", "64MiB", "--seed", "x"], "invalid value 'x'"),
        (&["--size", "64MiB", "--seed", "-3"], "--seed"),
        (
            &["--size", "64MiB", "--seed", "1", "--profile", "nope"],
            "unknown profile `nope`",
        ),
        (
            &["--size", "64MiB", "--seed", "1", "--format", "dd,tar"],
            "unknown output format",
        ),
        (
            &["--size", "64MiB", "--seed", "1", "--threads", "0"],
            "at least 1",
        ),
        (
            &["--size", "64MiB", "--seed", "1", "--deleted-share", "1.5"],
            "between 0 and 1",
        ),
        (
            &["--size", "64MiB", "--seed", "1", "--decoys", "100000001"],
            "100 million",
        ),
        (
            &["--size", "3TiB", "--seed", "1", "--partition-table", "mbr"],
            "use --partition-table gpt",
        ),
        (&["--size", "9TiB", "--seed", "1"], "maximum of 8 TiB"),
        (
            &["--size", "32MiB", "--seed", "1", "--fat", "fat32"],
            "no valid FAT32 layout",
        ),
    ];
    for (args, needle) in cases {
        let o = corpus(&out, args);
        assert_fails(&o, needle);
        assert_nothing_left(&out);
    }
}

#[test]
fn unwritable_output_directory_is_reported() {
    let d = tempfile::tempdir().expect("tempdir");
    let file = d.path().join("plain-file");
    std::fs::write(&file, b"x").expect("write");
    // A directory cannot be created below a regular file, even as root.
    let o = corpus(
        &file.join("sub"),
        &["--size", "32MiB", "--seed", "1", "--decoys", "10"],
    );
    assert_fails(&o, "cannot write to output directory");
}

#[test]
fn disk_full_midway_leaves_nothing_complete() {
    if !common::have_tool("disk_full_midway_leaves_nothing_complete", "sh") {
        return;
    }
    let d = tempfile::tempdir().expect("tempdir");
    let out = d.path().join("out");
    // The file-size limit (512-byte blocks in POSIX sh) makes writes fail
    // with EFBIG about 16 MiB into the 64 MiB image, as a full disk would.
    let cmd = "ulimit -f 32768; trap '' XFSZ; exec \"$0\" corpus --out \"$1\" --size 64MiB --seed 4 --decoys 1000";
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .arg(common::caseload_bin())
        .arg(&out)
        .output()
        .expect("run sh");
    assert_fails(&o, "writing");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("image.dd") || err.contains("large"), "{err}");
    for n in FINAL {
        assert!(!out.join(n).exists(), "{n} exists after a failed run");
    }
    assert_nothing_left(&out);
}
