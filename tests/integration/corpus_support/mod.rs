//! Shared helpers of the `corpus_*` integration tests: make a corpus with
//! the release binary, load its manifest, read bytes by manifest extents,
//! and run the TSK oracles.

#![allow(dead_code)]

use caseload_corpus::manifest::{EntryKind, FileEntry, Manifest};
use md5::{Digest, Md5};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A generated corpus in a temporary directory.
pub struct Corpus {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
    /// The parsed manifest.
    pub manifest: Manifest,
}

impl Corpus {
    /// Path of the image.
    pub fn image(&self) -> PathBuf {
        self.dir.path().join("image.dd")
    }

    /// Path of a file in the output directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Partition start in sectors, as the manifest records it.
    pub fn start_sector(&self) -> u64 {
        self.manifest.partition_table.partitions[0].start_sector
    }

    /// `len` bytes of the image at `offset`.
    pub fn read(&self, offset: u64, len: u64) -> Vec<u8> {
        let mut f = std::fs::File::open(self.image()).expect("open image");
        f.seek(SeekFrom::Start(offset)).expect("seek");
        let mut v = vec![0u8; len as usize];
        f.read_exact(&mut v).expect("read");
        v
    }

    /// A file's content read through its manifest extents (for an NTFS
    /// compressed file, its stored LZNT1 stream, not its content).
    pub fn content(&self, f: &FileEntry) -> Vec<u8> {
        let mut out = Vec::with_capacity(f.size as usize);
        for e in &f.extents {
            out.extend_from_slice(&self.read(e.offset, e.length));
        }
        out.truncate(f.size as usize);
        out
    }

    /// Allocated regular files.
    pub fn live_files(&self) -> impl Iterator<Item = &FileEntry> {
        self.manifest
            .files
            .iter()
            .filter(|f| f.kind == EntryKind::File && f.allocated)
    }

    /// The partition alone, copied to a file (fsck.fat has no offset option).
    pub fn partition_file(&self) -> PathBuf {
        let p = self.dir.path().join("partition.img");
        let fs = &self.manifest.filesystem;
        let part = &self.manifest.partition_table.partitions[0];
        let mut src = std::fs::File::open(self.image()).expect("open image");
        src.seek(SeekFrom::Start(fs.offset)).expect("seek");
        let mut dst = std::fs::File::create(&p).expect("create partition copy");
        std::io::copy(&mut src.take(part.sectors * 512), &mut dst).expect("copy partition");
        p
    }
}

/// Run `caseload corpus` into a fresh temporary directory and load the
/// manifest. Panics with the tool's output on failure.
pub fn make(args: &[&str]) -> Corpus {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = crate::common::caseload()
        .arg("corpus")
        .arg("--out")
        .arg(dir.path())
        .args(args)
        .args(crate::common::dense_unless_asked(args))
        .output()
        .expect("run caseload");
    assert!(
        out.status.success(),
        "caseload corpus {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let f = std::fs::File::open(dir.path().join("manifest.json")).expect("manifest");
    let manifest: Manifest =
        serde_json::from_reader(std::io::BufReader::new(f)).expect("parse manifest");
    Corpus { dir, manifest }
}

/// Lower-case hex MD5.
pub fn md5_hex(data: &[u8]) -> String {
    let d = Md5::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// One line of `fls -r -p`.
#[derive(Debug, Clone)]
pub struct FlsEntry {
    /// `r/r` or `d/d`.
    pub kind: String,
    /// Marked with `*`.
    pub deleted: bool,
    /// The metadata address for `icat`.
    pub inode: String,
}

/// `fls -r -p -o <start>` as a map from (path, deleted) to entry; virtual
/// entries ($MBR, $FAT1, $FAT2, $OrphanFiles) are left out, but any file
/// listed under $OrphanFiles is kept (it would be a mismatch).
pub fn fls(c: &Corpus) -> HashMap<(String, bool), FlsEntry> {
    let out = Command::new("fls")
        .args(["-r", "-p", "-o", &c.start_sector().to_string()])
        .arg(c.image())
        .output()
        .expect("run fls");
    assert!(
        out.status.success(),
        "fls failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut map = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((meta, path)) = line.split_once('\t') else {
            continue;
        };
        let parts: Vec<&str> = meta.split_whitespace().collect();
        let kind = parts[0].to_string();
        if kind == "v/v" || kind == "V/V" {
            continue;
        }
        let deleted = parts.get(1) == Some(&"*");
        let inode = parts
            .last()
            .unwrap_or(&"")
            .trim_end_matches(':')
            .to_string();
        map.insert(
            (path.to_string(), deleted),
            FlsEntry {
                kind,
                deleted,
                inode,
            },
        );
    }
    map
}

/// `icat -o <start> image inode`.
pub fn icat(c: &Corpus, inode: &str) -> Vec<u8> {
    let out = Command::new("icat")
        .args(["-o", &c.start_sector().to_string()])
        .arg(c.image())
        .arg(inode)
        .output()
        .expect("run icat");
    out.stdout
}

/// Whether every tool is present (prints the skip notice otherwise).
pub fn have_tools(test: &str, tools: &[&str]) -> bool {
    tools.iter().all(|t| crate::common::have_tool(test, t))
}

/// Write `data` to `dir/name` and return the path.
pub fn write_tmp(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).expect("write temp file");
    p
}
