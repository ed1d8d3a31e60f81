//! Helpers the file-system oracle tests (exFAT, APFS, ext4) share: tool
//! lookup, hex, a run's options and its corpus in a temporary folder, the
//! manifest's entries and partition, the volume alone, and the manifest's
//! byte claims (extents, keyword offsets, carvable items, zero areas)
//! checked against the image.

#![allow(dead_code)]

use caseload_corpus::manifest::{EntryKind, FileEntry};
use caseload_corpus::{CorpusError, ImageDigests, Manifest, Options, Profile, Report};
use md5::{Digest, Md5};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether `tool` is on the PATH; prints `SKIPPED: tool` when not.
pub fn have(tool: &str) -> bool {
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

/// Whether apfsck's `report` is one of bookworm's apfsck's two misreadings
/// of files compressed into their resource fork (fixed upstream the day
/// after Debian's snapshot; `.ci/fixed-apfsck.sh` builds the fixed one):
/// printed as a skip, since that apfsck stops there and checks no more.
pub fn apfsck_cannot_read_forks(report: &str, compressed_files: u64) -> bool {
    let known = [
        "Object map record: oid used twice in latest checkpoint.",
        "Resource compressed file: block metadata is too big.",
    ];
    let hit = compressed_files > 0 && known.contains(&report.trim());
    if hit {
        println!(
            "SKIPPED: apfsck (this is bookworm's, which misreads resource-fork compression: {}; .ci/fixed-apfsck.sh builds the fixed one)",
            report.trim()
        );
    }
    hit
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Options for a `size`-byte corpus of `seed` and `profile` in `dir` on
/// `threads` threads (ten decoys, the file system's default table).
pub fn opts(dir: &Path, size: u64, seed: u64, threads: usize, profile: &str) -> Options {
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

/// The manifest's files and folders (no streams).
pub fn entries(m: &Manifest) -> Vec<&FileEntry> {
    m.files.iter().filter(|e| e.stream.is_none()).collect()
}

/// The partition's byte offset and length.
pub fn part(m: &Manifest) -> (u64, u64) {
    let p = &m.partition_table.partitions[0];
    (p.offset, p.sectors * 512)
}

/// The partition alone, for tools that take a volume.
pub fn volume_file(image: &Path, m: &Manifest) -> tempfile::NamedTempFile {
    let (off, len) = part(m);
    let img = std::fs::read(image).expect("image");
    let f = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(f.path(), &img[off as usize..(off + len) as usize]).expect("write");
    f
}

/// The manifest's extents (of live files stored byte for byte), keyword
/// offsets, contiguous carvable items and zeroed free areas against the
/// image; returns the keyword occurrences checked.
pub fn check_offsets(image: &Path, m: &Manifest) -> usize {
    let img = std::fs::read(image).expect("image");
    let mut occurrences = 0;
    for e in entries(m) {
        // A sparse file's extents hold its data units only.
        if e.kind == EntryKind::File && !e.deleted && !e.sparse {
            let mut h = Md5::new();
            let mut left = e.size;
            for x in &e.extents {
                let take = x.length.min(left);
                h.update(&img[x.offset as usize..(x.offset + take) as usize]);
                left -= take;
            }
            assert_eq!(left, 0, "{}: extents shorter than the file", e.path);
            assert_eq!(Some(hex(&h.finalize())), e.md5, "extents of {}", e.path);
        }
        for k in &e.keywords {
            for o in &k.raw {
                if let Some(d) = o.disk_offset
                    && !o.overwritten
                {
                    let at = &img[d as usize..d as usize + k.token.len()];
                    assert_eq!(at, k.token.as_bytes(), "{} in {}", k.token, e.path);
                    occurrences += 1;
                }
            }
        }
    }
    for x in &m.carvable {
        if x.contiguous {
            let b = &img[x.offset as usize..(x.offset + x.length) as usize];
            assert_eq!(hex(&Md5::digest(b)), x.md5, "carvable at {}", x.offset);
        }
    }
    for a in &m.unallocated {
        if a.fill == "zero" {
            let b = &img[a.offset as usize..(a.offset + a.length) as usize];
            assert!(b.iter().all(|&x| x == 0), "area at {} not zero", a.offset);
        }
    }
    occurrences
}

/// `fls -r -p` against the manifest: names (but those `skip` accepts),
/// deleted state and inode numbers; then `icat` of every allocated file
/// against its MD5, and with `recover` of every `intact` deleted one.
/// Returns the files checked and the deleted ones among them.
pub fn check_tsk(
    image: &Path,
    m: &Manifest,
    skip: impl Fn(&str) -> bool,
    recover: bool,
) -> (usize, usize) {
    let sector = (part(m).0 / 512).to_string();
    let out = Command::new("fls")
        .args(["-r", "-p", "-o", &sector])
        .arg(image)
        .output()
        .expect("fls");
    assert!(out.status.success(), "fls failed");
    let mut listed: BTreeMap<(String, bool), u64> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((meta, path)) = line.split_once(":\t") else {
            continue;
        };
        if skip(path) {
            continue;
        }
        let deleted = meta.contains('*');
        let inode: u64 = meta
            .split_whitespace()
            .last()
            .and_then(|s| s.split('-').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("fls line {line:?}"));
        assert!(
            listed.insert((path.to_string(), deleted), inode).is_none(),
            "fls lists {path} twice"
        );
    }
    let mut want: BTreeMap<(String, bool), u64> = BTreeMap::new();
    for e in entries(m) {
        let inode = e
            .inode
            .unwrap_or_else(|| panic!("{} has no inode number", e.path));
        want.insert((e.tsk_path.clone(), e.deleted), inode);
    }
    let only_fls: Vec<_> = listed.keys().filter(|k| !want.contains_key(k)).collect();
    let only_mf: Vec<_> = want.keys().filter(|k| !listed.contains_key(k)).collect();
    assert!(
        only_fls.is_empty() && only_mf.is_empty(),
        "fls and the manifest differ: only in fls {:?}, only in the manifest {:?}",
        &only_fls[..only_fls.len().min(10)],
        &only_mf[..only_mf.len().min(10)]
    );
    assert_eq!(listed, want, "inode numbers differ");
    assert!(
        m.summary.deleted_files > 0,
        "the corpus holds no deleted files"
    );
    let mut checked = 0;
    let mut recovered = 0;
    for e in entries(m) {
        if e.kind != EntryKind::File || (e.deleted && !(recover && e.intact && e.size > 0)) {
            continue;
        }
        recovered += e.deleted as usize;
        let out = Command::new("icat")
            .args(["-o", &sector])
            .arg(image)
            .arg(e.inode.expect("inode").to_string())
            .output()
            .expect("icat");
        assert_eq!(
            Some(hex(&Md5::digest(&out.stdout))),
            e.md5,
            "icat of {} ({:?})",
            e.path,
            e.inode
        );
        checked += 1;
    }
    assert!(checked > 20, "only {checked} files checked");
    (checked, recovered)
}

/// A generated corpus in a temporary folder.
pub struct Corpus {
    /// The folder (removed when dropped).
    pub dir: tempfile::TempDir,
    /// `image.dd`.
    pub image: PathBuf,
    /// The parsed manifest.
    pub manifest: Manifest,
}

/// Generate `o` (into a temporary folder, whatever `o.out_dir` says) with
/// `generate`; a copy is kept under `$KEEP/LABEL` when the variable `keep`
/// names a folder.
pub fn corpus(
    o: &Options,
    keep: &str,
    label: &str,
    generate: impl Fn(&Options) -> Result<Report, CorpusError>,
) -> Corpus {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = o.clone();
    if let Ok(keep) = std::env::var(keep) {
        o.out_dir = PathBuf::from(keep).join(label);
        let _ = generate(&o);
    }
    o.out_dir = dir.path().to_path_buf();
    generate(&o).expect("generate");
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

/// Every folder (`None`) and file (its MD5) below `root`, by path from it.
pub fn tree_md5(root: &Path) -> BTreeMap<String, Option<String>> {
    fn walk(root: &Path, dir: &Path, got: &mut BTreeMap<String, Option<String>>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        names.sort();
        for p in names {
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .into_owned();
            if p.is_symlink() {
                // A symbolic link's content is its target text.
                let t = std::fs::read_link(&p).expect("read_link");
                got.insert(
                    rel,
                    Some(hex(&Md5::digest(t.as_os_str().as_encoded_bytes()))),
                );
            } else if p.is_dir() {
                got.insert(rel, None);
                walk(root, &p, got);
            } else {
                let b = std::fs::read(&p).expect("read");
                got.insert(rel, Some(hex(&Md5::digest(&b))));
            }
        }
    }
    let mut got = BTreeMap::new();
    walk(root, root, &mut got);
    got
}
