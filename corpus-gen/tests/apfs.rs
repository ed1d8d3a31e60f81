//! APFS corpora against independent oracles: apfsck (apfsprogs), The
//! Sleuth Kit's `pstat`, `fls` and `icat`, and libfsapfs's `fsapfsinfo`.
//! A missing tool prints `SKIPPED: <tool>` and the check passes.

use caseload_corpus::manifest::{EntryKind, FileEntry};
use caseload_corpus::{ImageDigests, Manifest, NoProgress, Options, Profile, generate_apfs};
use md5::{Digest, Md5};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;

fn opts(dir: &Path, size: u64, seed: u64, threads: usize, profile: &str) -> Options {
    Options {
        out_dir: dir.to_path_buf(),
        size,
        seed,
        profile: Profile::by_name(profile).expect("profile"),
        threads,
        partition_table: None,
        fat: None,
        ntfs: false,
        decoys: 10,
        discard_image: false,
        image_digests: ImageDigests::default(),
    }
}

struct Corpus {
    dir: tempfile::TempDir,
    image: PathBuf,
    manifest: Manifest,
}

fn corpus(size: u64, seed: u64, threads: usize, profile: &str) -> Corpus {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = opts(dir.path(), size, seed, threads, profile);
    if let Ok(keep) = std::env::var("APFS_KEEP") {
        let d = PathBuf::from(keep).join(format!("{profile}-{size}-{seed}-{threads}"));
        let mut k = o.clone();
        k.out_dir = d;
        let _ = generate_apfs(&k, &NoProgress, None);
    }
    generate_apfs(&o, &NoProgress, None).expect("generate");
    let manifest: Manifest = serde_json::from_slice(
        &std::fs::read(dir.path().join(caseload_corpus::MANIFEST)).expect("manifest"),
    )
    .expect("parse manifest");
    Corpus {
        image: dir.path().join(caseload_corpus::IMAGE),
        dir,
        manifest,
    }
}

fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        println!("SKIPPED: {tool}");
    }
    found
}

fn run(tool: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(tool).args(args).output().expect(tool);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn part(c: &Corpus) -> (u64, u64) {
    let p = &c.manifest.partition_table.partitions[0];
    (p.offset, p.sectors * 512)
}

/// The container alone, for tools that take a device.
fn container_file(c: &Corpus) -> PathBuf {
    let (off, len) = part(c);
    let img = std::fs::read(&c.image).expect("image");
    let path = c.dir.path().join("container.raw");
    std::fs::write(&path, &img[off as usize..(off + len) as usize]).expect("write");
    path
}

fn check_apfsck(c: &Corpus) {
    if !have("apfsck") {
        return;
    }
    let v = container_file(c);
    let (ok, text) = run("apfsck", &[v.to_str().expect("path")]);
    assert!(ok && text.trim().is_empty(), "apfsck reported:\n{text}");
    let _ = std::fs::remove_file(v);
}

#[test]
fn small_workstation_corpus_passes_apfsck() {
    let c = corpus(64 * MIB, 1, 2, "workstation");
    check_apfsck(&c);
}
