//! `caseload convert` against libewf's tools and the `ewf` crate.
//!
//! Raw inputs are built here (text-like, incompressible and zero runs) in
//! three shapes: a size that is not a multiple of the chunk size, a set of
//! many segments at a small segment size, and one segment with more than
//! 65534 chunks (512-byte chunks). At each compression level:
//! `ewfverify` says SUCCESS with a stored MD5 equal to the raw MD5, `ewfinfo`
//! shows the metadata given, `ewfexport` gives back the raw bytes, and the
//! `ewf` crate reads identical bytes with its `verify()` matching. Also:
//! identical output across thread counts and runs, split raw input, sector
//! padding, and the refusals and clean-ups of bad input.

use crate::common;

use crate::shared;
use crate::shared::{hex, md5_hex};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn write_raw(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

/// A sparse file of `len` zero bytes (no disk space used).
fn sparse_file(dir: &Path, name: &str, len: u64) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().set_len(len).unwrap();
    p
}

fn convert(args: &[&str]) -> Output {
    common::caseload()
        .arg("convert")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run caseload convert")
}

/// `caseload convert INPUT --to e01 --out PREFIX EXTRA...`
fn convert_to(input: &Path, prefix: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        input.to_str().unwrap(),
        "--to",
        "e01",
        "--out",
        prefix.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    convert(&args)
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "caseload convert failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The segment files of `prefix`, in order.
fn segments(prefix: &Path) -> Vec<PathBuf> {
    (1..)
        .map_while(|n| {
            let p = caseload_ewf_writer::segment_path(prefix, n)?;
            p.is_file().then_some(p)
        })
        .collect()
}

fn tool(name: &str, args: &[&Path]) -> Output {
    Command::new(name)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

/// `ewfverify -q`: whether it says SUCCESS, and the MD5 stored in the file.
fn ewfverify(first: &Path) -> (bool, String) {
    let out = Command::new("ewfverify")
        .arg("-q")
        .arg(first)
        .stdin(Stdio::null())
        .output()
        .expect("run ewfverify");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stored = text
        .lines()
        .find_map(|l| l.strip_prefix("MD5 hash stored in file:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    let success = out.status.success() && text.contains("ewfverify: SUCCESS");
    (success, stored)
}

/// Read the media through the `ewf` crate; returns it with `verify()`.
fn ewf_crate(segs: &[PathBuf]) -> (Vec<u8>, ewf::VerifyResult, ewf::StoredHashes) {
    let reader = ewf::EwfReader::open_segments(segs).expect("ewf crate opens the set");
    let mut out = vec![0u8; reader.total_size() as usize];
    let mut off = 0;
    while off < out.len() {
        let n = reader
            .read_at(&mut out[off..], off as u64)
            .expect("ewf crate reads");
        assert!(n > 0);
        off += n;
    }
    let verify = reader.verify().expect("ewf crate verifies");
    (out, verify, reader.stored_hashes())
}

const METADATA: [(&str, &str); 5] = [
    ("--case-number", "CASE-0042"),
    ("--evidence-number", "EV-7"),
    ("--examiner", "A. Examiner"),
    ("--description", "laptop disk"),
    ("--notes", "converted by the acceptance test"),
];

/// Convert `raw` at `level` with `extra` options and check it with every
/// oracle. Returns the segment files.
fn convert_and_check(
    dir: &Path,
    name: &str,
    raw: &[u8],
    level: &str,
    extra: &[&str],
    have_libewf: bool,
) -> Vec<PathBuf> {
    let input = write_raw(dir, &format!("{name}.raw"), raw);
    let prefix = dir.join(format!("{name}-{level}"));
    let mut args = vec!["--compression", level];
    for (flag, value) in METADATA {
        args.push(flag);
        args.push(value);
    }
    args.extend_from_slice(extra);
    let stdout = ok(&convert_to(&input, &prefix, &args));
    let raw_md5 = md5_hex(raw);
    assert!(stdout.contains(&format!("MD5:  {raw_md5}")), "{stdout}");
    let segs = segments(&prefix);
    assert!(!segs.is_empty());
    let first = &segs[0];

    if have_libewf {
        let (success, stored) = ewfverify(first);
        assert!(success, "ewfverify failed on {name} at {level}");
        assert_eq!(stored, raw_md5, "{name} at {level}");
        let info = String::from_utf8_lossy(&tool("ewfinfo", &[first]).stdout).into_owned();
        for (label, (_, value)) in [
            "Case number:",
            "Evidence number:",
            "Examiner name:",
            "Description:",
            "Notes:",
        ]
        .iter()
        .zip(METADATA)
        {
            let line = info.lines().find(|l| l.trim_start().starts_with(label));
            assert_eq!(
                line.map(|l| l.split('\t').rfind(|s| !s.is_empty()).unwrap_or("")),
                Some(value),
                "{label} in:\n{info}"
            );
        }
        let level_line = match level {
            "none" => "no compression",
            "fast" => "good (fast) compression",
            _ => "best compression",
        };
        assert!(info.contains(level_line), "{info}");
        assert!(info.contains("File format:\t\tEnCase 6"), "{info}");
        let exported = shared::ewfexport(first, &dir.join("exported"));
        assert!(
            exported == raw,
            "ewfexport gave different bytes for {name} at {level}"
        );
    }

    let (read, verify, stored) = ewf_crate(&segs);
    assert!(
        read == raw,
        "ewf crate read different bytes for {name} at {level}"
    );
    assert_eq!(verify.md5_match, Some(true));
    assert_eq!(verify.sha1_match, Some(true));
    assert_eq!(stored.md5.map(|h| hex(&h)), Some(raw_md5));
    segs
}

fn check_level(level: &str) {
    let test = format!("convert_at_{level}");
    let have_libewf = ["ewfverify", "ewfinfo", "ewfexport"]
        .iter()
        .all(|t| common::have_tool(&test, t));
    let dir = tempfile::tempdir().unwrap();

    // Not a multiple of the 32 KiB chunk size (but whole sectors).
    let raw = shared::mixed_media(3 * 1024 * 1024 + 5 * 512, 11);
    let segs = convert_and_check(dir.path(), "remainder", &raw, level, &[], have_libewf);
    assert_eq!(segs.len(), 1);

    // Many segments at a small segment size.
    let raw = shared::mixed_media(4 * 1024 * 1024, 12);
    let segs = convert_and_check(
        dir.path(),
        "segments",
        &raw,
        level,
        &["--segment-size", "300000", "--threads", "2"],
        have_libewf,
    );
    assert!(segs.len() >= 4, "{} segments", segs.len());
    for s in &segs {
        assert!(std::fs::metadata(s).unwrap().len() <= 300_000);
    }

    // One segment holding more than 65534 chunks (70000 of 512 bytes).
    let raw = shared::mixed_media(70_000 * 512, 13);
    let segs = convert_and_check(
        dir.path(),
        "bigtable",
        &raw,
        level,
        &["--chunk-sectors", "1"],
        have_libewf,
    );
    assert_eq!(segs.len(), 1);
}

#[test]
fn convert_at_level_none() {
    check_level("none");
}

#[test]
fn convert_at_level_fast() {
    check_level("fast");
}

#[test]
fn convert_at_level_best() {
    check_level("best");
}

fn read_set(prefix: &Path) -> Vec<Vec<u8>> {
    segments(prefix)
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn output_is_byte_identical_across_thread_counts_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let raw = shared::mixed_media(2 * 1024 * 1024 + 512, 14);
    let input = write_raw(dir.path(), "det.raw", &raw);
    let mut sets = Vec::new();
    for (i, threads) in ["1", "2", "4", "2"].into_iter().enumerate() {
        let prefix = dir.path().join(format!("det{i}"));
        ok(&convert_to(
            &input,
            &prefix,
            &[
                "--compression",
                "best",
                "--segment-size",
                "500000",
                "--threads",
                threads,
            ],
        ));
        sets.push(read_set(&prefix));
    }
    assert!(sets[0].len() > 1);
    for s in &sets[1..] {
        assert!(*s == sets[0], "output differs between runs/thread counts");
    }
}

#[test]
fn split_raw_parts_convert_as_one_image() {
    let dir = tempfile::tempdir().unwrap();
    let raw = shared::mixed_media(1024 * 1024 + 3 * 512, 15);
    let (a, rest) = raw.split_at(400_000);
    let (b, c) = rest.split_at(300_001);
    let first = write_raw(dir.path(), "disk.001", a);
    write_raw(dir.path(), "disk.002", b);
    write_raw(dir.path(), "disk.003", c);
    let prefix = dir.path().join("split");
    let stdout = ok(&convert_to(&first, &prefix, &[]));
    assert!(stdout.contains("(3 parts)"), "{stdout}");
    let (read, verify, _) = ewf_crate(&segments(&prefix));
    assert!(read == raw);
    assert_eq!(verify.md5_match, Some(true));
}

#[test]
fn a_size_that_is_not_whole_sectors_is_padded_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let raw = shared::mixed_media(100_100, 16);
    let input = write_raw(dir.path(), "odd.raw", &raw);
    let prefix = dir.path().join("odd");
    let stdout = ok(&convert_to(&input, &prefix, &[]));
    assert!(stdout.contains("padded with 252 zero bytes"), "{stdout}");
    let mut padded = raw.clone();
    padded.resize(100_352, 0);
    assert!(stdout.contains(&md5_hex(&padded)));
    let segs = segments(&prefix);
    if common::have_tool("a_size_that_is_not_whole_sectors", "ewfverify") {
        let (success, stored) = ewfverify(&segs[0]);
        assert!(success);
        assert_eq!(stored, md5_hex(&padded));
    }
    let (read, _, _) = ewf_crate(&segs);
    assert!(read == padded);
}

#[test]
fn existing_segments_are_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let raw = shared::mixed_media(300_000 - 300_000 % 512, 17);
    let input = write_raw(dir.path(), "x.raw", &raw);
    let prefix = dir.path().join("x");
    ok(&convert_to(&input, &prefix, &[]));
    let before = read_set(&prefix);
    let again = convert_to(&input, &prefix, &[]);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert!(read_set(&prefix) == before);
    ok(&convert_to(
        &input,
        &prefix,
        &["--force", "--compression", "none"],
    ));
    assert!(read_set(&prefix) != before);
}

#[test]
fn bad_sources_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("out");
    let missing = dir.path().join("missing.raw");
    let out = convert_to(&missing, &prefix, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open source") && err.contains("No such file"),
        "{err}"
    );

    let out = convert_to(dir.path(), &prefix, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));

    let empty = write_raw(dir.path(), "empty.raw", &[]);
    let out = convert_to(&empty, &prefix, &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("source is empty"));

    // An E01 given as the raw input is refused rather than wrapped.
    let raw = shared::mixed_media(64 * 1024, 18);
    let input = write_raw(dir.path(), "r.raw", &raw);
    let e01 = dir.path().join("r");
    ok(&convert_to(&input, &e01, &[]));
    let out = convert_to(&dir.path().join("r.E01"), &prefix, &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already an EWF image"));

    let out = convert_to(&input, &prefix, &["--chunk-sectors", "48"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("48 sectors per chunk is not supported"));

    let out = convert_to(&input, &prefix, &["--segment-size", "20000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("segment size 20000 bytes is too small"),
        "{err}"
    );
    assert!(segments(&prefix).is_empty());
}

#[test]
fn more_segments_than_names_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    // 1 GiB sparse source: the refusal comes from the sizes alone, before
    // any byte is read or any segment written.
    let input = sparse_file(dir.path(), "sparse.raw", 1 << 30);
    let prefix = dir.path().join("many");
    let out = convert_to(&input, &prefix, &["--segment-size", "40000"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than the 14971"), "{err}");
    assert!(err.contains("use a segment size of at least"), "{err}");
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1, "only the source exists");
}

#[test]
fn running_out_of_space_fails_cleanly_and_removes_segments() {
    let test = "running_out_of_space_fails_cleanly";
    if !common::have_tool(test, "sh") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = shared::mixed_media(8 * 1024 * 1024, 19);
    let input = write_raw(dir.path(), "big.raw", &raw);
    let prefix = dir.path().join("full");
    // The file size limit (1000 blocks: 512 KB or 1 MB depending on the
    // shell's unit) is far below one 4 MiB segment of incompressible data,
    // so a write fails with EFBIG, as on a full disk.
    let script = format!(
        "ulimit -f 1000; trap '' XFSZ; exec '{}' convert '{}' --to e01 --out '{}' --compression none --segment-size 4MiB",
        common::caseload_bin().display(),
        input.display(),
        prefix.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("writing") && err.contains("full.E01"), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(segments(&prefix).is_empty(), "partial segments remain");
}

#[test]
fn ctrl_c_stops_the_conversion_and_removes_segments() {
    let test = "ctrl_c_stops_the_conversion";
    if !common::have_tool(test, "kill") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 16 GiB of sparse zeros: hashing alone takes far longer than the
    // moment the test waits before pressing Ctrl-C.
    let input = sparse_file(dir.path(), "zeros.raw", 16 << 30);
    let prefix = dir.path().join("stopped");
    let child = common::caseload()
        .args(["convert", input.to_str().unwrap(), "--to", "e01", "--out"])
        .arg(&prefix)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first segment exists, then interrupt.
    let first = prefix.with_extension("E01");
    let started = std::time::Instant::now();
    while !first.exists() && started.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert!(segments(&prefix).is_empty(), "partial segments remain");
}
